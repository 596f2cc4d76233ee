"""The mirror: one DuckDB file.  This package owns its schema and every SQL statement."""

from devmon_sync.store.mirror import (GnssSensorToSync, Mirror, MirrorLockedError,
                                      ParameterToSync, StoreError)
from devmon_sync.store.records import Metadata, metadata_from_api

__all__ = ["GnssSensorToSync", "Metadata", "Mirror", "MirrorLockedError", "ParameterToSync",
           "StoreError", "metadata_from_api"]
