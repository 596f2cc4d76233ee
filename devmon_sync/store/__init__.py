"""The mirror: one DuckDB file.  This package owns its schema and every SQL statement."""

from devmon_sync.store.errors import (DamagedMirrorError, DiskFullError, MirrorLockedError,
                                      StoreError, damage_of, damaged_error,
                                      interrupted_by_signal)
from devmon_sync.store.mirror import GnssSensorToSync, Mirror, ParameterToSync
from devmon_sync.store.records import Metadata, metadata_from_api

__all__ = ["DamagedMirrorError", "DiskFullError", "GnssSensorToSync", "Metadata", "Mirror",
           "MirrorLockedError", "ParameterToSync", "StoreError", "damage_of", "damaged_error",
           "interrupted_by_signal", "metadata_from_api"]
