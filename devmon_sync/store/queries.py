"""Reading the mirror for analysis, the GUI and reports: numpy columns out, SQL kept here.

Every function takes an open ``Mirror`` and returns plain Python values or dicts of numpy
arrays (timestamps as ``datetime64[us]`` in UTC, NULL numbers as NaN), so callers never see
DuckDB.  Alarm levels are the one thing the user writes into the mirror; a sync never
touches them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

import duckdb
import numpy as np
import pyarrow as pa

from devmon_sync.store.mirror import Mirror, StoreError

EPOCH_FIELDS = ("epoch_id", "ts", "lat", "lon", "eh", "oh", "sdn", "sde", "sdu", "q", "ns", "ar",
                "base_station_id", "de", "dn", "du", "ve", "vn", "vu")
ALARM_QUANTITIES = {"displacement": "mm", "velocity": "mm/day"}
PARAMETER_QUANTITY = "parameter:"  # + a parameter uuid: levels on that parameter's values


@dataclass(frozen=True)
class GnssDevice:
    """A GNSS rover as the mirror knows it: what an analysis needs besides its epochs."""

    serial_number: str
    display_name: str
    site_uuid: str | None
    site_name: str | None
    sensor_uuid: str | None
    azimuth_deg: float | None
    srid: int | None
    projections: list[dict] = field(default_factory=list)  # the solution's projectionMetadata
    events: list[dict] = field(default_factory=list)  # _internal.metadata.gnssEvents: type, at
    sampling_period_s: float | None = None
    site_timezone: str | None = None
    epochs: int = 0
    first: datetime | None = None
    last: datetime | None = None


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Arrow columns as numpy: timestamps as naive UTC datetime64[us], NULL numbers as NaN."""
    out = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us"))
            out[name] = col.to_numpy().astype("datetime64[us]")
        elif pa.types.is_integer(col.type) and col.null_count:
            out[name] = col.cast(pa.float64()).to_numpy()
        else:
            out[name] = col.to_numpy(zero_copy_only=False)
    return out


def gnss_devices(mirror: Mirror) -> list[GnssDevice]:
    """Every GNSS rover (base stations excluded) with its site, azimuth, projections and the
    span of its mirrored epochs, by serial number."""
    rows = mirror.con.execute("""
        SELECT c.device_serial_number, coalesce(d.display_name, c.device_serial_number),
               d.site_uuid::VARCHAR, s.name, g.sensor_uuid::VARCHAR, c.azimuth_deg, g.srid,
               g.projection_metadata, count(e.epoch_id), min(e.ts), max(e.ts),
               d.raw->'$._internal.metadata.gnssEvents', d.sampling_period_s, s.timezone
        FROM device_gnss_config c
        LEFT JOIN devices d ON d.serial_number = c.device_serial_number
        LEFT JOIN sites s ON s.uuid = d.site_uuid
        LEFT JOIN gnss_solutions g ON g.device_serial_number = c.device_serial_number
        LEFT JOIN gnss_epochs e ON e.sensor_uuid = g.sensor_uuid
        WHERE NOT coalesce(c.is_base_station, false)
        GROUP BY ALL ORDER BY 1""").fetchall()
    return [GnssDevice(serial_number=r[0], display_name=r[1], site_uuid=r[2], site_name=r[3],
                       sensor_uuid=r[4], azimuth_deg=r[5], srid=r[6],
                       projections=json.loads(r[7]) if r[7] else [], epochs=r[8], first=r[9],
                       last=r[10], events=_events(r[11]), sampling_period_s=r[12],
                       site_timezone=r[13])
            for r in rows]


def _events(raw: str | None) -> list[dict]:
    """Known events of a device (antenna change, base-station switch), as the service's
    ``_internal.metadata.gnssEvents`` lists them; [] when it lists none or not a list."""
    events = json.loads(raw) if raw else []
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def gnss_device(mirror: Mirror, serial_number: str) -> GnssDevice:
    """One GNSS rover; a StoreError naming the known ones when it is not in the mirror."""
    devices = gnss_devices(mirror)
    for d in devices:
        if d.serial_number == serial_number:
            return d
    known = ", ".join(d.serial_number for d in devices[:12]) or "none"
    raise StoreError(f"No GNSS rover {serial_number!r} in {mirror.path} (rovers: {known}"
                     f"{', ...' if len(devices) > 12 else ''}). Check the serial number, or "
                     f"run `devmon sync` if the device is new.")


def gnss_epochs(mirror: Mirror, serial_number: str, start: datetime | None = None,
                end: datetime | None = None) -> dict[str, np.ndarray]:
    """The mirrored epochs of a rover in [start, end], in time order, as numpy columns
    (``EPOCH_FIELDS``: lat/lon in degrees, heights and displacements in metres, sigmas in
    metres, velocities in mm/day)."""
    table = mirror.con.sql(
        f"SELECT {', '.join(EPOCH_FIELDS)} FROM gnss_epochs WHERE device_serial_number = ? "
        "AND ts >= coalesce(?::TIMESTAMPTZ, '-infinity') "
        "AND ts <= coalesce(?::TIMESTAMPTZ, 'infinity') ORDER BY ts, epoch_id",
        params=[serial_number, start, end]).to_arrow_table()
    return _columns(table)


def gnss_projected(mirror: Mirror, serial_number: str, projection_id: int,
                   start: datetime | None = None,
                   end: datetime | None = None) -> dict[str, np.ndarray]:
    """The service's projected coordinates (e, n, h in metres) of a rover's epochs in one
    projection, in time order."""
    table = mirror.con.sql(
        "SELECT p.epoch_id, p.ts, p.e, p.n, p.h FROM gnss_projected p "
        "JOIN gnss_solutions g ON g.sensor_uuid = p.sensor_uuid "
        "WHERE g.device_serial_number = ? AND p.projection_id = ? "
        "AND p.ts >= coalesce(?::TIMESTAMPTZ, '-infinity') "
        "AND p.ts <= coalesce(?::TIMESTAMPTZ, 'infinity') ORDER BY p.ts, p.epoch_id",
        params=[serial_number, projection_id, start, end]).to_arrow_table()
    return _columns(table)


# ----------------------------------------------------------------------------- alarm levels

def device_exists(mirror: Mirror, serial_number: str) -> bool:
    """Whether the mirror knows a device of that serial number."""
    return mirror._row("SELECT count(*) FROM devices WHERE serial_number = ?",
                       [serial_number])[0] > 0


def alarm_levels(mirror: Mirror, serial_number: str) -> dict[str, dict[str, float]]:
    """The device's alarm levels: {quantity: {level name: threshold}}, thresholds ascending
    (displacement in mm, velocity in mm/day); empty when none are set."""
    out: dict[str, dict[str, float]] = {}
    for quantity, level, threshold in mirror.con.execute(
            "SELECT quantity, level, threshold FROM alarm_levels "
            "WHERE device_serial_number = ? ORDER BY quantity, threshold",
            [serial_number]).fetchall():
        out.setdefault(quantity, {})[level] = threshold
    return out


def set_alarm_levels(mirror: Mirror, serial_number: str, quantity: str,
                     levels: dict[str, float]) -> None:
    """Replace the device's levels for one quantity (``{}`` clears them), in one transaction.
    The caller validates the levels (names, ascending positive thresholds)."""
    unit = _alarm_unit(mirror, serial_number, quantity)
    names, thresholds = list(levels), [float(v) for v in levels.values()]
    try:
        with mirror._transaction():
            mirror.con.execute("DELETE FROM alarm_levels WHERE device_serial_number = ? "
                               "AND quantity = ?", [serial_number, quantity])
            if names:
                mirror.con.execute(
                    "INSERT INTO alarm_levels SELECT ?, ?, unnest(?::VARCHAR[]), "
                    "unnest(?::DOUBLE[]), ?, ?",
                    [serial_number, quantity, names, thresholds, unit,
                     datetime.now(timezone.utc)])
    except duckdb.Error as err:  # a full disk: the store's one message, not DuckDB's
        error = mirror._write_error(err)
        if error is None:
            raise
        raise error from None


def _alarm_unit(mirror: Mirror, serial_number: str, quantity: str) -> str:
    """The unit of a quantity's thresholds; a parameter's levels are in its own unit (the
    unit its mirrored values have) and it must belong to the device."""
    if quantity in ALARM_QUANTITIES:
        return ALARM_QUANTITIES[quantity]
    if quantity.startswith(PARAMETER_QUANTITY):
        row = mirror._row("SELECT coalesce(display_unit, base_unit, '') FROM parameters "
                          "WHERE uuid::VARCHAR = ? AND device_serial_number = ?",
                          [quantity[len(PARAMETER_QUANTITY):], serial_number])
        if row is None:
            raise StoreError(f"Device {serial_number} has no parameter "
                             f"{quantity[len(PARAMETER_QUANTITY):]!r}: check the uuid "
                             f"(the GUI's browser shows each parameter's).")
        return row[0]
    raise StoreError(f"Unknown alarm quantity {quantity!r}: use one of "
                     f"{', '.join(ALARM_QUANTITIES)} or {PARAMETER_QUANTITY}<parameter uuid>.")


def parameter_alarm_levels(mirror: Mirror, parameter_uuids: list[str]
                           ) -> dict[str, dict[str, float]]:
    """Alarm levels set on parameters' values: {uuid: {level: threshold}}, ascending, in
    each parameter's unit; parameters without levels are left out."""
    out: dict[str, dict[str, float]] = {}
    for quantity, level, threshold in mirror.con.execute(
            "SELECT quantity, level, threshold FROM alarm_levels WHERE quantity IN "
            "(SELECT ? || unnest(?::VARCHAR[])) ORDER BY quantity, threshold",
            [PARAMETER_QUANTITY, list(parameter_uuids)]).fetchall():
        out.setdefault(quantity[len(PARAMETER_QUANTITY):], {})[level] = threshold
    return out
