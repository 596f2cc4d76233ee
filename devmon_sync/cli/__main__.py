"""``python -m devmon_sync.cli``: the ``devmon`` command."""

import sys

from devmon_sync.cli import main

sys.exit(main())
