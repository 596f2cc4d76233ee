"""Reading the mirror for analysis: numpy columns from a real synced mirror."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import numpy as np
import pytest

from devmon_sync.client import ApiClient
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, StoreError, queries
from devmon_sync.sync.engine import SyncEngine, SyncOptions

from support import KEY, NOW, start_server, synced_mirror

WORLD = WorldSize(sites=3, devices=16, days=15)


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("q") / "mirror.duckdb", WORLD)


def test_gnss_devices_lists_rovers_with_their_epochs_and_projections(mirror_path):
    with Mirror.open(mirror_path, read_only=True) as m:
        devices = queries.gnss_devices(m)
    con = duckdb.connect(str(mirror_path), read_only=True)
    rovers = {r[0] for r in con.execute("SELECT device_serial_number FROM device_gnss_config "
                                         "WHERE NOT is_base_station").fetchall()}
    assert {d.serial_number for d in devices} == rovers and rovers
    with_data = [d for d in devices if d.epochs]
    assert with_data and all(d.first < d.last and d.projections for d in with_data)
    counts = dict(con.execute("SELECT device_serial_number, count(*) FROM gnss_epochs "
                              "GROUP BY 1").fetchall())
    assert all(d.epochs == counts.get(d.serial_number, 0) for d in devices)
    events = {e["type"] for d in devices for e in d.events}
    assert {"antenna_change", "base_station_switch"} <= events  # the step and creep rovers
    assert all(d.sampling_period_s == 3600 for d in with_data)


def test_gnss_epochs_come_as_numpy_columns_in_time_order_and_honour_the_range(mirror_path):
    with Mirror.open(mirror_path, read_only=True) as m:
        rover = next(d for d in queries.gnss_devices(m) if d.epochs)
        cols = queries.gnss_epochs(m, rover.serial_number)
        start = (NOW - timedelta(days=5)).replace(tzinfo=None)
        recent = queries.gnss_epochs(m, rover.serial_number, start=NOW - timedelta(days=5))
        proj_id = rover.projections[0]["id"]
        projected = queries.gnss_projected(m, rover.serial_number, proj_id)
    assert set(cols) == set(queries.EPOCH_FIELDS) and len(cols["ts"]) == rover.epochs
    assert cols["ts"].dtype == np.dtype("datetime64[us]") and np.all(np.diff(cols["ts"]) >= 0)
    assert cols["lat"].dtype == np.float64 and np.isfinite(cols["lat"]).all()
    assert 0 < len(recent["ts"]) < len(cols["ts"])
    assert recent["ts"].min() >= np.datetime64(start)
    assert len(projected["ts"]) == len(cols["ts"])
    assert np.array_equal(projected["epoch_id"], cols["epoch_id"])


def _same_columns(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f")
        for k in a)


def test_the_epochs_of_many_rovers_in_one_query_are_each_rovers_own(mirror_path):
    """Issue 31: one scan for many rovers, each rover's columns exactly as its own query
    gives them (types too: a rover without NULL base stations keeps integer ids), a rover
    without epochs in the period and an unknown serial get empty columns."""
    with Mirror.open(mirror_path, read_only=True) as m:
        serials = [d.serial_number for d in queries.gnss_devices(m)] + ["no-such-rover"]
        start = NOW - timedelta(days=5)
        for period in ((None, None), (start, None), (start, start + timedelta(days=2))):
            each = {sn: queries.gnss_epochs(m, sn, *period) for sn in serials}
            together = queries.gnss_epochs_of_devices(m, serials, *period)
            assert list(together) == serials
            assert all(_same_columns(together[sn], each[sn]) for sn in serials)
        assert len(together["no-such-rover"]["ts"]) == 0
        assert sum(len(c["ts"]) > 0 for c in together.values()) >= 2


def test_an_unknown_rover_is_named_with_the_known_ones(mirror_path):
    with Mirror.open(mirror_path, read_only=True) as m, \
            pytest.raises(StoreError, match="No GNSS rover 'NOPE'.*rovers: "):
        queries.gnss_device(m, "NOPE")


def test_alarm_levels_round_trip_and_survive_a_sync(mirror_path):
    with Mirror.open(mirror_path) as m:
        rover = next(d for d in queries.gnss_devices(m) if d.epochs).serial_number
        queries.set_alarm_levels(m, rover, "displacement",
                                 {"watch": 10.0, "warning": 25.0, "alarm": 50.0})
        queries.set_alarm_levels(m, rover, "velocity", {"watch": 1.0, "alarm": 5.0})
        with pytest.raises(StoreError, match="Unknown alarm quantity 'speed'"):
            queries.set_alarm_levels(m, rover, "speed", {"x": 1.0})
    with start_server(size=WORLD, now=NOW + timedelta(hours=6)) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(mirror_path) as m:
        assert SyncEngine(client, m, SyncOptions()).run().status == "ok"
        levels = queries.alarm_levels(m, rover)
        assert levels == {"displacement": {"watch": 10.0, "warning": 25.0, "alarm": 50.0},
                          "velocity": {"watch": 1.0, "alarm": 5.0}}
        queries.set_alarm_levels(m, rover, "velocity", {})
        assert queries.alarm_levels(m, rover) == {"displacement": levels["displacement"]}
