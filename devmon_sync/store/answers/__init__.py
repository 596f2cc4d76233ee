"""Data answers (POST /sensor-data, POST /sensor-data/gnss) to Arrow columns: no SQL, no HTTP.

This is the sync's hot path, so it is written for speed: msgspec decodes the body straight
into small typed objects (no dicts, and ``gc=False`` so millions of them never wake the
garbage collector), one list comprehension per column turns them into Arrow arrays, and
Arrow's C++ ISO 8601 parser turns the timestamp strings into UTC timestamps.  Keys repeated
on every row (a parameter's or sensor's UUID) are dictionary-encoded: one string per
stream, an int32 index per row.

The rule for what the service sends: **decode per point; a bad value is quarantined, never
blocking, never silently changed.**  A clean body takes the fast path above and nothing
else.  Only when something does not fit (msgspec refuses the body, Arrow refuses a
timestamp, a value is not a number, two copies of a point disagree) is the body read again
by the slow path: Python's ``json`` (which accepts the bare ``NaN`` / ``Infinity`` some
servers write), then one point at a time.  A point that cannot be read as the API defines
it goes to the answer's quarantine table with its JSON text and the reason; the other points
of the answer are kept.  A value sent as a numeric string (``"1.5"``) is read and counted,
``null`` stays NULL (a faulty point, as the service means it), and a point sent twice is
kept once, the last copy winning (a differing earlier copy is quarantined).

Only a body that is not JSON at all, or not the answer's shape (no ``items`` list, an item
without its key), raises ValueError, which the client treats as a damaged answer and fetches
again.
"""


from devmon_sync.store.answers.columns import (
                                               KEY_TYPE,
                                               QUARANTINE_SCHEMA,
                                               UTC_TIMESTAMP,
                                               collector_paused,
                                               repeated_keys,
                                               rows_per_key,
)
from devmon_sync.store.answers.gnss import (
                                               _JSON_NAME,
                                               DEBUG_NUMBERS,
                                               EPOCH_NUMBERS,
                                               QUALITY_NUMBERS,
                                               GnssAnswer,
                                               gnss_from_json,
                                               gnss_lenient,
)
from devmon_sync.store.answers.readings import (
                                               ReadingsAnswer,
                                               readings_from_json,
                                               readings_lenient,
)
from devmon_sync.store.answers.quarantine import empty_quarantine, lenient_loads, raw_json

__all__ = ["DEBUG_NUMBERS", "EPOCH_NUMBERS", "KEY_TYPE", "QUALITY_NUMBERS",
           "QUARANTINE_SCHEMA", "UTC_TIMESTAMP", "GnssAnswer", "ReadingsAnswer",
           "_JSON_NAME", "collector_paused", "empty_quarantine", "gnss_from_json",
           "gnss_lenient", "lenient_loads", "raw_json", "readings_from_json",
           "readings_lenient", "repeated_keys", "rows_per_key"]
