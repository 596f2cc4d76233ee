"""SQL of `devmon verify`: which windows the mirror committed, and how a fresh answer for one
of them differs from what the mirror holds, point by point; the metadata, the oldest point of
each stream and the sync's ``--since`` its other checks compare.  No HTTP; the verifier
decides.

A point the mirror holds more than once counts as extra points (every copy after the first):
the audit of exactly once, since the mirror's tables declare no unique key (see
``Mirror._refuse_doubles``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import pyarrow as pa


@dataclass(frozen=True)
class CommittedWindow:
    kind: str
    start: datetime
    end: datetime
    keys: tuple[str, ...]
    rows: int


@dataclass(frozen=True)
class StreamDifference:
    """How the mirror differs from the service for one stream over one window."""

    kind: str
    key: str
    device: str
    name: str
    missing: int  # points the service has and the mirror lacks
    extra: int  # points the mirror has and the service does not
    changed: int  # points both have with different values
    first: datetime
    last: datetime

    @property
    def points(self) -> int:
        return self.missing + self.extra + self.changed


def committed_windows(con: duckdb.DuckDBPyConnection) -> list[CommittedWindow]:
    """Every data request the mirror committed (one per window, with its streams), oldest
    first; legacy and unverified windows included: they are what most needs checking."""
    rows = con.execute("""
        SELECT split_part(stream, ':', 1) AS kind, window_start, window_end,
               list(substr(stream, strpos(stream, ':') + 1) ORDER BY stream), sum(rows)
        FROM sync_windows GROUP BY kind, window_start, window_end, run_id, committed_at
        ORDER BY window_start, kind""").fetchall()
    return [CommittedWindow(k, a, b, tuple(keys), int(n)) for k, a, b, keys, n in rows]


_READINGS_DIFF = """
    WITH mirror AS (
        SELECT parameter_uuid::VARCHAR AS key, ts, value,
               row_number() OVER (PARTITION BY parameter_uuid, ts) AS copy FROM readings
        WHERE list_contains(?::UUID[], parameter_uuid) AND ts BETWEEN ? AND ?),
    service AS (
        SELECT key, ts, value FROM answer WHERE list_contains(?::VARCHAR[], key)
        AND ts BETWEEN ? AND ?),
    joined AS (
        SELECT coalesce(m.key, s.key) AS key, coalesce(m.ts, s.ts) AS ts,
               m.key IS NULL AS missing, s.key IS NULL OR m.copy > 1 AS extra,
               m.copy = 1 AND s.key IS NOT NULL AND m.value IS DISTINCT FROM s.value
                   AS changed
        FROM mirror m FULL OUTER JOIN service s ON m.key = s.key AND m.ts = s.ts)
    SELECT j.key, coalesce(p.device_serial_number, '?'), coalesce(p.name, j.key),
           count(*) FILTER (missing), count(*) FILTER (extra), count(*) FILTER (changed),
           min(ts), max(ts)
    FROM joined j LEFT JOIN parameters p ON p.uuid::VARCHAR = j.key
    WHERE missing OR extra OR changed GROUP BY ALL ORDER BY 2, 3"""

_EPOCH_COLUMNS = ("ts", "lat", "lon", "eh", "oh", "de", "dn", "du", "sdn", "sde", "sdu",
                  "base_station_id")

_EPOCHS_DIFF = f"""
    WITH mirror AS (
        SELECT sensor_uuid::VARCHAR AS key, epoch_id, {', '.join(_EPOCH_COLUMNS)},
               row_number() OVER (PARTITION BY sensor_uuid, epoch_id) AS copy
        FROM gnss_epochs WHERE list_contains(?::UUID[], sensor_uuid) AND ts BETWEEN ? AND ?),
    service AS (
        SELECT key, epoch_id, {', '.join(_EPOCH_COLUMNS)} FROM answer
        WHERE list_contains(?::VARCHAR[], key) AND ts BETWEEN ? AND ?),
    joined AS (
        SELECT coalesce(m.key, s.key) AS key, coalesce(m.ts, s.ts) AS ts,
               m.key IS NULL AS missing, s.key IS NULL OR m.copy > 1 AS extra,
               m.copy = 1 AND s.key IS NOT NULL AND ({' OR '.join(
                   f'm.{c} IS DISTINCT FROM s.{c}' for c in _EPOCH_COLUMNS)}) AS changed
        FROM mirror m FULL OUTER JOIN service s ON m.key = s.key AND m.epoch_id = s.epoch_id)
    SELECT j.key, coalesce(g.device_serial_number, '?'), 'GNSS epochs',
           count(*) FILTER (missing), count(*) FILTER (extra), count(*) FILTER (changed),
           min(ts), max(ts)
    FROM joined j LEFT JOIN gnss_solutions g ON g.sensor_uuid::VARCHAR = j.key
    WHERE missing OR extra OR changed GROUP BY ALL ORDER BY 2, 3"""


def differences(con: duckdb.DuckDBPyConnection, kind: str, keys: list[str], start: datetime,
                end: datetime, answer: pa.Table) -> list[StreamDifference]:
    """Per stream, the points where ``answer`` (the service now; columns as the mirror's,
    with the stream key as text in ``key``) and the mirror differ over [start, end]."""
    sql = _READINGS_DIFF if kind == "readings" else _EPOCHS_DIFF
    con.register("answer", answer)
    try:
        rows = con.execute(sql, [keys, start, end, keys, start, end]).fetchall()
    finally:
        con.unregister("answer")
    return [StreamDifference(kind, *r) for r in rows]


def stream_extents(con: duckdb.DuckDBPyConnection, kind: str, keys: list[str],
                   start: datetime, end: datetime) -> dict[str, tuple[int, datetime, datetime]]:
    """Per stream of ``keys`` with points in [start, end]: (distinct timestamps, oldest,
    newest) as the mirror holds them: what verify expects a re-read to bring, so it sizes
    its requests to a service's caps and knows an answer that stops short of them."""
    table, column = ("readings", "parameter_uuid") if kind == "readings" else \
        ("gnss_epochs", "sensor_uuid")
    rows = con.execute(f"""
        SELECT {column}::VARCHAR, count(DISTINCT ts), min(ts), max(ts) FROM {table}
        WHERE list_contains(?::UUID[], {column}) AND ts BETWEEN ? AND ? GROUP BY 1""",
                       [keys, start, end]).fetchall()
    return {key: (int(n), first, last) for key, n, first, last in rows}


def daily_values(con: duckdb.DuckDBPyConnection, parameter_uuids: list[str], start: datetime,
                 end: datetime, height_tol_m: float, degree_tol: float
                 ) -> dict[tuple[str, int], tuple[float, float | None, float, float, float]]:
    """Per (parameter, UTC day number) in [start, end]: the count of its values, their sum,
    the sum of their magnitudes and the tolerance of the sum, as the mirror holds them; a GNSS
    sensor's lat, lon and eh parameters from its epochs, whose answers round what the field
    series do not (``height_tol_m`` / ``degree_tol`` an epoch: what the sync re-check allows
    when it compares with the service's own daily count and sum, ``sync.recheck``), and the
    points of that day in quarantine (the service holds them and may count them or not: a
    day with any has no comparable sum, its tolerance infinite)."""
    rows = con.execute("""
        WITH p AS (SELECT uuid, sensor_uuid, lower(name) AS field FROM parameters
                   WHERE list_contains(?::UUID[], uuid))
        SELECT parameter_uuid::VARCHAR, epoch_ms(ts) // 86400000, count(value), sum(value),
               sum(abs(value)), 0.0
        FROM readings WHERE list_contains(?::UUID[], parameter_uuid) AND ts BETWEEN ? AND ?
        GROUP BY 1, 2
        UNION ALL
        SELECT p.uuid::VARCHAR, epoch_ms(e.ts) // 86400000, count(v), sum(v), sum(abs(v)),
               count(v) * any_value(CASE p.field WHEN 'eh' THEN ? ELSE ? END)
        FROM (SELECT e.*, p.uuid, CASE p.field WHEN 'lat' THEN e.lat WHEN 'lon' THEN e.lon
                                               ELSE e.eh END AS v
              FROM gnss_epochs e JOIN p ON p.sensor_uuid = e.sensor_uuid
              WHERE p.field IN ('lat', 'lon', 'eh') AND e.ts BETWEEN ? AND ?) e
        JOIN p ON p.uuid = e.uuid
        GROUP BY 1, 2
        UNION ALL
        SELECT coalesce(p.uuid::VARCHAR, q.key), epoch_ms(q.ts) // 86400000,
               count(DISTINCT q.ts), NULL, 0.0, 'inf'::DOUBLE
        FROM quarantine q LEFT JOIN p ON q.kind = 'gnss' AND p.sensor_uuid::VARCHAR = q.key
                                       AND p.field IN ('lat', 'lon', 'eh')
        WHERE q.ts BETWEEN ? AND ? AND ((q.kind = 'readings' AND
              list_contains(?::VARCHAR[], q.key)) OR p.uuid IS NOT NULL)
        GROUP BY 1, 2""", [parameter_uuids, parameter_uuids, start, end, height_tol_m,
                           degree_tol, start, end, start, end, parameter_uuids]).fetchall()
    out: dict[tuple[str, int], list] = {}
    for key, day, count, total, magnitude, tolerance in rows:
        cell = out.setdefault((key, int(day)), [0.0, None, 0.0, 0.0, 0.0])
        if tolerance == float("inf"):  # quarantined: the service may count them or not
            cell[3], cell[4] = float("inf"), cell[4] + count
        else:
            cell[0], cell[1], cell[2] = float(count), total, float(magnitude or 0.0)
            cell[3] = max(cell[3], float(tolerance))
    return {k: tuple(v) for k, v in out.items()}


def oldest_points(con: duckdb.DuckDBPyConnection, kind: str, keys: list[str]
                  ) -> dict[str, tuple[str, str, datetime]]:
    """Per stream of ``keys`` with data: (device serial, name, its oldest point), read from
    the data itself (an audit does not take ``stream_stats``' word for it); 0.3 s for 10M
    readings of 5,000 parameters."""
    if kind == "readings":
        sql = """
            WITH f AS (SELECT parameter_uuid AS key, min(ts) AS first_ts FROM readings
                       WHERE parameter_uuid IN (SELECT unnest(?::UUID[])) GROUP BY 1)
            SELECT f.key::VARCHAR, coalesce(p.device_serial_number, '?'),
                   coalesce(p.name, f.key::VARCHAR), f.first_ts
            FROM f LEFT JOIN parameters p ON p.uuid = f.key"""
    else:
        sql = """
            WITH f AS (SELECT sensor_uuid AS key, min(ts) AS first_ts FROM gnss_epochs
                       WHERE sensor_uuid IN (SELECT unnest(?::UUID[])) GROUP BY 1)
            SELECT f.key::VARCHAR, coalesce(g.device_serial_number, '?'), 'GNSS epochs',
                   f.first_ts
            FROM f LEFT JOIN gnss_solutions g ON g.sensor_uuid = f.key"""
    return {key: (serial, name, first) for key, serial, name, first
            in con.execute(sql, [keys]).fetchall()}


def data_floor(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The ``since`` of the newest sync run (None: none, or it asked for all history): what
    the user asked the mirror to begin at, before which nothing is missing."""
    row = con.execute("""
        SELECT TRY_CAST(options->>'since' AS TIMESTAMPTZ) FROM sync_runs
        WHERE options->>'verify' IS NULL AND coalesce(options->>'dry_run', 'false') <> 'true'
        ORDER BY run_id DESC LIMIT 1""").fetchone()
    return row[0] if row else None


def deleted_streams(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    """(kind, key) of the streams of sensors deleted and devices removed upstream: the
    service no longer serves their data, the mirror keeps it as their archive."""
    return set(con.execute("""
        WITH gone AS (SELECT s.uuid FROM sensors s LEFT JOIN devices d
                          ON d.serial_number = s.device_serial_number
                      WHERE s.deleted_at IS NOT NULL OR d.removed_at IS NOT NULL)
        SELECT 'readings', p.uuid::VARCHAR FROM parameters p
            LEFT JOIN devices d ON d.serial_number = p.device_serial_number
            WHERE p.sensor_uuid IN (SELECT uuid FROM gone) OR d.removed_at IS NOT NULL
        UNION ALL
        SELECT 'gnss', uuid::VARCHAR FROM gone""").fetchall())


_METADATA_COLUMNS = {
    "sites": "uuid::VARCHAR AS uuid, name",
    "devices": "serial_number, name, alias, site_uuid::VARCHAR AS site_uuid, removed_at",
    "device_groups": "uuid::VARCHAR AS uuid, name, parent_uuid::VARCHAR AS parent_uuid",
    "device_group_members": "group_uuid::VARCHAR AS group_uuid, device_serial_number",
    "sensors": "uuid::VARCHAR AS uuid, device_serial_number, name, alias, deleted_at",
    "parameters": "uuid::VARCHAR AS uuid, device_serial_number, "
                  "sensor_uuid::VARCHAR AS sensor_uuid, name, alias, base_unit, display_unit",
}


def metadata_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict]]:
    """The mirror's metadata rows, with the columns ``records.Metadata.tables()`` names (and
    ``deleted_at`` of sensors, ``removed_at`` of devices): what `devmon verify` compares
    with the service's."""
    out = {}
    for table, columns in _METADATA_COLUMNS.items():
        cursor = con.execute(f"SELECT {columns} FROM {table}")
        names = [d[0] for d in cursor.description]
        out[table] = [dict(zip(names, row)) for row in cursor.fetchall()]
    return out
