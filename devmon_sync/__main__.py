import sys

from devmon_sync.cli import main

sys.exit(main())
