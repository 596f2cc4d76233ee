"""``devmon analyze`` and ``devmon alarms`` on a mirror synced from the reference server.

The reference server's rovers each follow a known deformation (devmon_sync/server/gnss.py):
the analysis must find it through the whole chain (sync, store, analysis, command).
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from analysis.pipeline import AnalysisOptions
from devmon_sync.analyze.rovers import analyze_devices
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror

from support import synced_mirror
from support import devmon as run_devmon

WORLD = WorldSize(sites=3, devices=16, days=60)
FAILURE = np.datetime64("2026-01-13T00:00:00")  # 12 days after the server's clock (conftest NOW)


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("analyze") / "mirror.duckdb", WORLD)


def devmon(*args: str) -> subprocess.CompletedProcess:
    return run_devmon(*args, timeout=300)


def within(value: float, truth: float, sigma: float, floor: float) -> bool:
    return abs(value - truth) <= max(3 * sigma, floor)


def test_creep_is_found_along_the_slope_despite_the_base_station_switch(results, rovers):
    r = results["creep"]
    assert r.known_steps.size == 1  # the base-station switch, announced and seen in bs ids
    along = r.velocity["along"]
    assert within(along.m_per_yr * 1000, 25.0, along.sigma_m_per_yr * 1000, 2.0), along
    across = r.velocity["across"]
    assert within(across.m_per_yr * 1000, 0.0, across.sigma_m_per_yr * 1000, 2.0), across
    assert within(r.velocity["up"].m_per_yr * 1000, -7.5, r.velocity["up"].sigma_m_per_yr * 1000,
                  3.0)


def test_a_stable_point_is_stable_and_gets_no_forecast(results):
    r = results["stable"]
    for name in ("east", "north"):
        v = r.velocity[name]
        assert within(v.m_per_yr * 1000, 0.0, v.sigma_m_per_yr * 1000, 2.0), (name, v)
    assert r.forecast is None or not r.forecast.supported


def test_a_stable_point_reads_no_current_speed_from_its_noise(results):
    """Issue 16: the last-7-days 3D velocity, the length of three noisy component rates,
    read the stable rover at 0.092 mm/day here (0.22 in the demo): noise, not motion.  The
    corrected length reads it at rest, far below the 0.5 mm/day alert (seeded world)."""
    recent = results["stable"].recent_velocity
    for key in ("horizontal", "3d"):
        assert recent[key].mm_per_day < 0.05, (key, recent[key])


def test_outliers_are_removed_and_the_trend_survives_them(results):
    r = results["outliers"]
    assert r.outliers.sum() >= 10
    along = r.velocity["along"]
    assert within(along.m_per_yr * 1000, 15.0, along.sigma_m_per_yr * 1000, 3.0), along
    assert len(r.gaps) >= 2  # the server cut 2-, 5- and 3-day outages


def test_the_antenna_change_is_a_known_step_and_not_a_detected_one(results):
    r = results["step"]
    assert r.known_steps.size == 1
    # The server's antenna change moves the solution by E +2, N -1, U +12 mm: measured and
    # removed from the displacement (it is not ground motion)
    (_, de, dn, du), = r.step_corrections_m
    assert abs(de - 0.002) < 0.0015 and abs(dn + 0.001) < 0.0015 and abs(du - 0.012) < 0.003
    assert r.end_displacement_m["up"] < 0.006  # ~0 true vertical motion, not the 12 mm step
    assert not any(abs(s.time - r.known_steps[0]) < np.timedelta64(1, "D")
                   for s in r.detected_steps)


def test_the_accelerating_slope_is_forecast_to_fail_when_it_does(results):
    r = results["accelerating"]
    assert r.forecast is not None and r.forecast.supported, r.forecast
    lo, hi = r.forecast.interval
    assert lo <= FAILURE <= hi, r.forecast
    assert abs(r.forecast.failure_time - FAILURE) < np.timedelta64(4, "D")
    # The server's slope: 0.5 mm/day along its azimuth (0.4 of it downwards) until the onset
    # at 35 % of the 60 days, then 0.5 * 51 / (72 - t) mm/day: over the last 7 days (days
    # 53-60) it averages 25.5 * ln(19/12) / 7 = 1.674 mm/day along, 1.803 mm/day in 3D.
    recent = r.recent_velocity["3d"]
    assert within(recent.mm_per_day, 1.803, recent.sigma_mm_per_day, 0.15), recent


def test_our_displacements_agree_with_the_services_own(results, mirror_path, rovers):
    for r in results.values():
        assert max(r.consistency_m.values()) < 1e-4, (r.serial_number, r.consistency_m)
    creep = rovers["creep"]
    for entry in creep.projections:
        with Mirror.open(mirror_path, read_only=True) as m:
            (r,) = analyze_devices(m, [creep.serial_number],
                                   AnalysisOptions.build(frame=str(entry["id"])))
        assert r.frame.projection_id == entry["id"] and r.consistency_m, entry
        assert max(r.consistency_m.values()) < 1e-3, (entry, r.consistency_m)


def test_the_command_prints_a_table_and_json_with_the_same_numbers(mirror_path, rovers,
                                                                   results):
    sn = rovers["creep"].serial_number
    text = devmon("analyze", "--db", str(mirror_path), "--device", sn)
    assert text.returncode == 0, text.stderr
    assert sn in text.stdout and "along" in text.stdout and "velocity mm/day" in text.stdout
    out = devmon("analyze", "--db", str(mirror_path), "--device", sn, "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    expected = results["creep"].summary()
    assert row["velocity_mm_per_yr"]["along"] == pytest.approx(
        expected["velocity_mm_per_yr"]["along"])
    assert row["displacement_mm"]["3d"] == pytest.approx(expected["displacement_mm"]["3d"])
    assert f"{expected['displacement_mm']['3d']:.1f}" in text.stdout


def test_several_frames_are_shown_side_by_side(mirror_path, rovers, results):
    """ENU and a UTM grid of the same rover: the up component is the same, the horizontal
    components are the ENU ones turned by the grid's meridian convergence and scaled by its
    scale factor (so the 2D length differs only by the scale factor)."""
    sn = rovers["seasonal"].serial_number  # moves 7 mm: a wrong turn of 1° shows as 0.1 mm
    args = ["analyze", "--db", str(mirror_path), "--device", sn,
            "--projection", "enu", "--projection", "EPSG:32632"]
    out = devmon(*args, "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    enu, utm = row["frames"]
    assert (enu["frame"], row["frame"]) == ("local ENU", "local ENU")
    assert utm["frame"] == "WGS 84 / UTM zone 32N" and utm["grid"]
    assert enu["displacement_mm"] == pytest.approx(results["seasonal"].summary()["displacement_mm"])
    gamma = np.radians(utm["grid"]["convergence_deg"])
    k = utm["grid"]["scale_factor"]
    e, n = enu["displacement_mm"]["east"], enu["displacement_mm"]["north"]
    # grid axes are the true axes turned by the convergence (grid bearing = azimuth - gamma)
    assert utm["displacement_mm"]["east"] == pytest.approx(
        k * (e * np.cos(gamma) - n * np.sin(gamma)), abs=0.01)
    assert utm["displacement_mm"]["north"] == pytest.approx(
        k * (e * np.sin(gamma) + n * np.cos(gamma)), abs=0.01)
    assert utm["displacement_mm"]["up"] == pytest.approx(enu["displacement_mm"]["up"])
    assert utm["displacement_mm"]["horizontal"] == pytest.approx(
        k * enu["displacement_mm"]["horizontal"], abs=0.01)
    text = devmon(*args)
    assert "side by side" in text.stdout and "WGS 84 / UTM zone 32N" in text.stdout, text.stderr


def test_a_short_period_gets_a_seasonal_note(results):
    assert any("less than a year" in n for n in results["seasonal"].notes)


def test_alarm_levels_set_by_command_are_reported(mirror_path, rovers, tmp_path):
    db = tmp_path / "copy.duckdb"
    db.write_bytes(mirror_path.read_bytes())
    sn = rovers["accelerating"].serial_number
    r = devmon("alarms", "--db", str(db), "--device", sn, "--displacement",
               "alert=5,alarm=20,emergency=5000", "--velocity", "alert=0.5,alarm=1000")
    assert r.returncode == 0 and "alert >= 5 mm" in r.stdout, r.stderr
    out = devmon("analyze", "--db", str(db), "--device", sn, "--json")
    (row,) = json.loads(out.stdout)
    assert row["alarm_level"] == "alarm", row  # far beyond 20 mm, far below 5 m


@pytest.mark.parametrize("args, message", [
    (["alarms", "--device", "X", "--displacement", "alarm=20,alert=5"], "strictly ascending"),
    (["alarms", "--device", "X", "--displacement", "alert"], "is not NAME=NUMBER"),
    (["analyze", "--device", "NOPE"], "No GNSS rover 'NOPE'"),
    (["analyze", "--projection", "EPSG:999999"], "EPSG:999999"),
    (["analyze", "--reference", "someday"], "use 'first', a date"),
    (["analyze", "--from", "2026-01-01", "--to", "2025-01-01"], "--to must be later"),
])
def test_bad_input_gets_a_clear_message_and_no_traceback(mirror_path, args, message):
    r = devmon(*args[:1], "--db", str(mirror_path), *args[1:])
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [["analyze"], ["alarms", "--device", "X"], ["status"],
                                  ["export", "--out", "/tmp/never-written"],
                                  ["report", "--site", "x", "--out", "/tmp/never.pdf"]])
def test_a_missing_mirror_is_named_by_every_command_that_reads_one(args, tmp_path):
    """One check for all of them (cli_common.open_existing_mirror): no new empty file."""
    missing = tmp_path / "mirror.duckdb"
    r = devmon(args[0], "--db", str(missing), *args[1:])
    assert r.returncode == 2 and f"no mirror at {missing}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not missing.exists()


def test_the_command_prints_both_forecasts_and_whether_they_agree(results):
    """Issue 28: the classic linear inverse-velocity forecast beside the Voight fit, in
    ``devmon analyze``'s table (``format_analysis`` prints it), with their agreement."""
    from devmon_sync.cli.analyze import format_analysis

    for name in ("accelerating", "stable"):
        s = results[name].summary()
        lines = format_analysis(results[name]).splitlines()
        linear = [x for x in lines if x.startswith("  linear inverse-velocity forecast")]
        assert linear == [("  linear inverse-velocity forecast (Fukuzono): "
                           f"{s['linear_forecast']['statement']}")], lines
        assert f"  the two forecasts: {s['linear_forecast']['agreement']['text']}" in lines
    acc = results["accelerating"].linear_forecast
    assert acc.state == "dated" and acc.interval[0] <= FAILURE <= acc.interval[1], acc
    assert results["stable"].linear_forecast.state == "no acceleration"
