"""The classic linear inverse-velocity forecast (``analysis.forecast_linear``, Fukuzono 1985)
beside the Voight fit: its states, its agreement check, and where a user reads it (the
pipeline summary, ``devmon analyze``, the inverse-velocity figure, the report's forecast
text).

Issue 28: on a real pit-wall failure read once a day (~5 mm scatter) devmon refused every
forecast from 30 days to 1 day before the failure; the synthetic daily slope here (alpha =
2, one reading a day, 5 mm white scatter) is that case.  Seeds used here are not those the
module's constants were chosen on (1000-1099 of ``failure_series``).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis import figures
from analysis import forecast_linear as fl
from analysis.forecast import FailureForecast
from analysis.inverse_velocity import MIN_WINDOW_POINTS, inverse_velocity
from analysis.pipeline import analyze_rover
from devmon_sync.server.gnss import enu_to_geodetic

T0 = np.datetime64("2026-01-01T00:00", "ns")
DAY = np.timedelta64(86_400_000_000_000, "ns")


def at(days) -> np.ndarray:
    return T0 + np.rint(np.asarray(days, np.float64) * 86_400e9).astype(np.int64).astype(
        "timedelta64[ns]")


def failure_series(seed: int, *, lead_days: float, creep_mm_per_day: float = 2.0,
                   onset_to_failure_days: float = 30.0, creep_days: float = 60.0,
                   noise_mm: float = 5.0, alpha: float = 2.0, per_day: int = 1
                   ) -> tuple[np.ndarray, np.ndarray, np.datetime64]:
    """Readings ``per_day`` a day (1: a prism at 10:00 UTC +- 2 h) of a slope creeping at a
    steady rate, then accelerating by Voight's law from the onset (velocity continuous:
    v = creep (1 - s / T)^(-1 / (alpha - 1)), s the time since the onset, T the onset to
    failure; alpha = 2 is Fukuzono's 1/v falling linearly), plus white noise; the record
    ends ``lead_days`` before the failure.  Returns t, displacement (m), failure time."""
    rng = np.random.default_rng(seed)
    tf = creep_days + onset_to_failure_days
    d = np.arange(0.0, tf - lead_days, 1.0 / per_day)
    if per_day == 1:
        d = d + 10.0 / 24.0 + rng.uniform(-2.0, 2.0, d.size) / 24.0
        d = d[d <= tf - lead_days]
    s = np.maximum(d - creep_days, 0.0)
    big_t = onset_to_failure_days
    if alpha == 2.0:
        accel = creep_mm_per_day * big_t * np.log(big_t / (big_t - s))
    else:
        p = 1.0 / (alpha - 1.0)
        accel = creep_mm_per_day * big_t / (p - 1.0) * ((1.0 - s / big_t) ** (1.0 - p) - 1.0)
    x_mm = creep_mm_per_day * np.minimum(d, creep_days) + accel
    return at(d), (x_mm + noise_mm * rng.standard_normal(d.size)) / 1000.0, at(tf)


def forecast_of(seed: int, **kwargs) -> tuple[fl.LinearForecast, np.datetime64]:
    t, x, failure = failure_series(seed, **kwargs)
    return fl.linear_forecast(inverse_velocity(t, x, smoothing_days=4.0)), failure


def steady_series(seed: int, *, days: float = 120.0, rate_mm_per_day: float = 1.0,
                  noise_mm: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """Daily readings of a point creeping steadily (0: at rest), white noise."""
    rng = np.random.default_rng(seed)
    d = np.arange(0.0, days) + 10.0 / 24.0
    return at(d), (rate_mm_per_day * d + noise_mm * rng.standard_normal(d.size)) / 1000.0


def daily_epochs(seed: int, lead_days: float) -> tuple[dict, np.datetime64]:
    """``failure_series`` as a rover's epochs (the columns ``analyze_rover`` reads): the
    motion east, 5 mm white noise on east, north and up, every epoch passing the quality
    filter."""
    t, x, failure = failure_series(seed, lead_days=lead_days)
    rng = np.random.default_rng(seed + 10_000)
    n, u = (0.005 * rng.standard_normal(t.size) for _ in range(2))
    lat, lon, h = enu_to_geodetic(46.5, 8.0, 1500.0, x, n, u)
    m = t.size
    sd = np.full(m, 0.005)
    return ({"ts": t.astype("datetime64[s]"), "lat": lat, "lon": lon, "eh": h, "sde": sd,
             "sdn": sd, "sdu": sd, "q": np.ones(m, np.int64), "ns": np.full(m, 20),
             "ar": np.full(m, 20.0), "base_station_id": np.ones(m, np.int64)}, failure)


def days_between(a, b) -> float:
    return float((a - b) / DAY)


# ----------------------------------------------------------------------------- the case

def test_a_daily_failure_seven_days_ahead_is_stated_where_the_voight_fit_refuses():
    """Before: the pipeline's summary had no linear forecast and its Voight fit said "only 6
    velocity values usable (5 more with a velocity under 2 sigma of its noise); need 8": no
    failure warning of any kind, 7 days before the failure."""
    epochs, failure = daily_epochs(seed=3, lead_days=7.0)
    a = analyze_rover(epochs, serial_number="PRISM-1", sampling_period_s=86_400.0)
    lin = a.summary()["linear_forecast"]
    assert lin is not None and lin["state"] in fl.WARNING_STATES, lin
    assert lin["statement"] == a.linear_forecast.statement
    assert lin["agreement"]["text"]
    f = a.linear_forecast
    if f.state == fl.DATED:
        assert f.interval[0] <= failure <= f.interval[1], f.statement
    elif f.state == fl.ACCELERATING:
        assert "Accelerating; failure possible within" in f.statement
        assert 0 < f.within_days <= days_between(failure, f.data_end)  # the safe side


def test_the_daily_slope_warns_7_3_and_1_days_ahead_and_not_30():
    """Ten slopes (seeds the constants were not chosen on): a warning of some kind 7, 3
    and 1 days before failure in each; 30 days before, the onset (nothing to see)."""
    for seed in range(2000, 2010):
        for lead in (7.0, 3.0, 1.0):
            f, _ = forecast_of(seed, lead_days=lead)
            assert f.warns, (seed, lead, f.statement)
        far, _ = forecast_of(seed, lead_days=30.0)
        assert far.state == fl.NO_ACCELERATION, (seed, far.statement)


# ----------------------------------------------------------------------------- states

def test_dated_on_good_hourly_data_with_an_interval_that_holds_the_truth():
    f, failure = forecast_of(1, lead_days=10.0, per_day=24, noise_mm=3.0,
                             creep_mm_per_day=5.0, onset_to_failure_days=50.0,
                             creep_days=20.0)
    assert f.state == fl.DATED, f.statement
    lo, hi = f.interval
    assert f.data_end <= lo <= f.failure_time <= hi
    assert lo <= failure <= hi and abs(days_between(f.failure_time, failure)) < 2.0
    assert f.lead_days == pytest.approx(days_between(f.failure_time, f.data_end), abs=1e-6)
    assert f.statement.startswith("Failure at ") and "where the inverse-velocity line " \
        "reaches zero" in f.statement
    assert f.line.slope_per_mm < 0 and f.n_points >= fl.MIN_PHASE_POINTS
    assert f.line_at(np.array([f.failure_time]))[0] == pytest.approx(0.0, abs=1e-6)


def test_imminent_when_the_line_is_at_zero_before_the_data_end():
    """alpha = 1.5: 1/v curves up, and a line through its last values reaches zero early -
    here before the last reading, two days before the failure: the safe side."""
    f, failure = forecast_of(1, lead_days=2.0, alpha=1.5, noise_mm=2.0)
    assert f.state == fl.IMMINENT, f.statement
    assert f.failure_time <= f.data_end < failure and f.lead_days <= 0
    assert f.statement.startswith("Failure may be imminent") and "not a date" in f.statement
    assert f.interval is None


def test_accelerating_not_dated_says_within_how_many_days():
    f, failure = forecast_of(5, lead_days=7.0)
    assert f.state == fl.ACCELERATING, f.statement
    assert f.failure_time is None and f.interval is None
    n = round(f.within_days)
    assert f.statement.startswith(f"Accelerating; failure possible within {n} day")
    assert "as steeply as the data allow" in f.within_basis
    assert 1 <= n <= days_between(failure, f.data_end)  # early, the safe side


def test_no_acceleration_for_steady_creep_and_for_a_point_at_rest():
    for rate in (1.0, 0.0):
        t, x = steady_series(7, rate_mm_per_day=rate)
        f = fl.linear_forecast(inverse_velocity(t, x, smoothing_days=4.0))
        assert f.state == fl.NO_ACCELERATION and not f.warns, f.statement
        assert f.statement.startswith("No acceleration over the last 30 days:")


def test_too_few_data_is_said_not_taken_for_no_acceleration():
    t, x = steady_series(1, days=6)
    f = fl.linear_forecast(inverse_velocity(t, x, smoothing_days=4.0))
    assert f.state == fl.TOO_FEW and "too few to say" in f.statement
    assert fl.linear_forecast(inverse_velocity(t[:2], x[:2])).state == fl.TOO_FEW


def test_stable_points_do_not_cry_wolf_along_their_motion():
    """30 points at rest (5 mm white noise in east, north and up, daily), each evaluated
    at ten month ends along the direction of its last 30 days' motion, as the pipeline
    does: at most 1 % of evaluations warn (0 measured)."""
    warned, total = 0, 0
    for seed in range(30):
        rng = np.random.default_rng([31, seed])
        d = np.arange(0.0, 330.0) + 0.4
        enu = 0.005 * rng.standard_normal((3, d.size))
        for end in range(60, 331, 30):
            keep = d <= end
            acc = fl.acceleration_along_motion(at(d[keep]), *enu[:, keep])
            along = enu[0, keep]  # the line's values need a series; the gate decides
            f = fl.linear_forecast(inverse_velocity(at(d[keep]), along, smoothing_days=4.0),
                                   acceleration=acc)
            warned += f.warns
            total += 1
    assert warned <= 0.01 * total, (warned, total)


def test_a_height_excursion_of_a_real_stable_station_is_not_an_acceleration():
    """Before: P156's daily residuals (``benchmarks/real_noise.py``, the block from day 1635,
    cut on 2011-11-28, day 360) said "Accelerating; failure possible within ..." along
    the motion: a week-long 15 mm dip in height, tested against the 60 quieter days before
    the window (4.7 mm scatter along the motion; the window's own 8.5 mm).  The window's
    early days now measure the noise too."""
    from support import bench_module

    days, enu = bench_module("real_noise").daily(("P156", 1635))
    keep = days <= 360.0
    t = at(days[keep] + 0.5)
    east, north, up = (c[keep] / 1000.0 for c in enu)
    acc = fl.acceleration_along_motion(t, east, north, up)
    f = fl.linear_forecast(inverse_velocity(t, east, smoothing_days=4.0), acceleration=acc)
    assert f.state == fl.NO_ACCELERATION and not f.warns, f.statement
    assert acc.noise_source == "window", acc


# ----------------------------------------------------------------------------- windows

def test_the_benchmark_entry_uses_the_pipelines_windows():
    """``linear_forecast_from_displacement`` (what benchmarks call) smooths as the pipeline
    does: its default is the pipeline's constant, not a copy that could drift."""
    import inspect

    from analysis import pipeline

    default = inspect.signature(fl.linear_forecast_from_displacement).parameters[
        "smoothing_days"].default
    assert default == pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS
    t, x, _ = failure_series(5, lead_days=7.0)
    direct = fl.linear_forecast(inverse_velocity(t, x, smoothing_days=default))
    assert fl.linear_forecast_from_displacement(t, x).statement == direct.statement


def test_windows_widen_on_daily_data_and_not_on_hourly():
    t, x = steady_series(2, days=730)
    iv = inverse_velocity(t, x, smoothing_days=4.0)
    assert iv.smoothing_days == pytest.approx(MIN_WINDOW_POINTS, rel=1e-6)
    assert (iv.n_points == MIN_WINDOW_POINTS).all() and iv.step_days == iv.smoothing_days
    # the pooled sigma is the velocities' true scatter: 5 mm / sqrt(sum (t - mean)^2)
    true = 5.0 / np.sqrt(((np.arange(MIN_WINDOW_POINTS) - 3.0) ** 2).sum())
    assert np.median(iv.pooled_velocity_sigma()) == pytest.approx(true, rel=0.15)
    assert np.std(iv.velocity_mm_per_day) == pytest.approx(true, rel=0.2)
    hourly = inverse_velocity(at(np.arange(0.0, 20.0, 1 / 24)), np.zeros(480) + 1e-3
                              * np.arange(480), smoothing_days=4.0)
    assert hourly.smoothing_days == 4.0 and (hourly.n_points == 96).all()


# ----------------------------------------------------------------------------- agreement

def voight(failure: str | None, lo: str = "", hi: str = "") -> FailureForecast:
    if failure is None:
        return FailureForecast(False, "no onset of acceleration")
    return FailureForecast(True, "", failure_time=np.datetime64(failure, "ns"),
                           interval=(np.datetime64(lo, "ns"), np.datetime64(hi, "ns")))


def linear(state: str, **kw) -> fl.LinearForecast:
    kw = {k: (tuple(np.datetime64(x, "ns") for x in v) if k == "interval"
              else np.datetime64(v, "ns") if k in ("failure_time", "data_end") else v)
          for k, v in kw.items()}
    return fl.LinearForecast(state, "", **{"data_end": np.datetime64("2026-03-01", "ns"),
                                           **kw})


@pytest.mark.parametrize("lin, v, agree, words", [
    (linear(fl.DATED, failure_time="2026-03-05", interval=("2026-03-03", "2026-03-09")),
     voight("2026-03-06", "2026-03-04", "2026-03-08"), True, "lies inside"),
    (linear(fl.DATED, failure_time="2026-03-03", interval=("2026-03-02", "2026-03-05")),
     voight("2026-03-06", "2026-03-04", "2026-03-08"), True, "lies outside"),
    (linear(fl.DATED, failure_time="2026-03-03", interval=("2026-03-02", "2026-03-04")),
     voight("2026-03-08", "2026-03-06", "2026-03-12"), False, "earlier than"),
    (linear(fl.IMMINENT, failure_time="2026-02-28"),
     voight("2026-03-02", "2026-03-01T12:00", "2026-03-04"), True, "failure is near"),
    (linear(fl.IMMINENT, failure_time="2026-02-28"),
     voight("2026-03-10", "2026-03-07", "2026-03-15"), False, "the more urgent"),
    (linear(fl.ACCELERATING, within_days=8.0),
     voight("2026-03-10", "2026-03-07", "2026-03-15"), True, "within the 8 days"),
    (linear(fl.ACCELERATING, within_days=3.0),
     voight("2026-03-10", "2026-03-07", "2026-03-15"), False, "the more urgent"),
    (linear(fl.ACCELERATING, within_days=3.0), voight(None), False, "only the linear"),
    (linear(fl.NO_ACCELERATION), voight("2026-03-10", "2026-03-07", "2026-03-15"), False,
     "only the Voight"),
    (linear(fl.NO_ACCELERATION), voight(None), True, "neither"),
])
def test_the_two_forecasts_are_compared_in_words(lin, v, agree, words):
    result = fl.compare(lin, v)
    assert result.agree is agree and words in result.text, result.text
    assert fl.compare(lin, None).agree is None


# ----------------------------------------------------------------------------- surfaces

@pytest.fixture(scope="module")
def daily_analyses() -> dict:
    """The pipeline's analysis of the daily slope 7 days before failure (seed 3: the line
    already at zero, "imminent") and of another (seed 5: "accelerating, not dated")."""
    out = {}
    for seed in (3, 5):
        epochs, _ = daily_epochs(seed=seed, lead_days=7.0)
        out[seed] = analyze_rover(epochs, serial_number=f"PRISM-{seed}",
                                  sampling_period_s=86_400.0)
    return out


def test_the_figure_draws_the_linear_line_its_zero_and_legend(daily_analyses):
    imminent, accelerating = daily_analyses[3], daily_analyses[5]
    assert imminent.linear_forecast.state == fl.IMMINENT
    assert accelerating.linear_forecast.state == fl.ACCELERATING
    fig = figures.inverse_velocity_figure(imminent)
    (line,) = [a for a in fig.findobj() if a.get_gid() == "linear:fit"]
    (zero,) = [a for a in fig.findobj() if a.get_gid() == "linear:imminent"]
    assert line.get_ydata()[-1] == pytest.approx(0.0, abs=1e-9)  # drawn to its zero
    assert zero.get_ydata()[0] == 0.0
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "linear 1/v line (Fukuzono), least squares" in labels
    assert any(x.startswith("linear: zero before the last data (imminent)") for x in labels)
    assert "failure may be imminent" in fig.axes[0].get_title(loc="left")
    fig = figures.inverse_velocity_figure(accelerating)
    (within,) = [a for a in fig.findobj() if a.get_gid() == "linear:within"]
    n = round(accelerating.linear_forecast.within_days)
    assert days_between(within.get_xdata()[1], within.get_xdata()[0]) == n
    assert f"failure possible within {n} day" in fig.axes[0].get_title(loc="left")


def test_devmon_analyze_prints_the_statement_where_the_voight_fit_gives_no_date(
        daily_analyses):
    from devmon_sync.cli.analyze import format_analysis

    a = daily_analyses[5]
    text = format_analysis(a)
    assert (f"  linear inverse-velocity forecast (Fukuzono): "
            f"{a.linear_forecast.statement}") in text
    assert "Accelerating; failure possible within" in text
    assert f"  the two forecasts: {a.summary()['linear_forecast']['agreement']['text']}" in text


def test_the_report_shows_both_forecasts_and_whether_they_agree(daily_analyses):
    from devmon_sync.report import pages, tables
    from devmon_sync.report.model import DeviceEntry
    from devmon_sync.store.report_queries import ScopeDevice

    for seed, words in ((3, "Failure may be imminent"),
                        (5, "Accelerating; failure possible within")):
        a = daily_analyses[seed]
        entry = DeviceEntry(ScopeDevice(a.serial_number, a.serial_number, None, None,
                                        "ROVER"), a)
        assert pages._relevant_inverse_velocity(entry)  # the inverse-velocity page is shown
        texts = [b.text for b in pages._forecast_blocks(entry) if hasattr(b, "text")]
        assert any(t.startswith("No failure forecast: only") for t in texts), texts
        assert any(t.startswith(f"Linear inverse velocity (Fukuzono 1985): {words}")
                   for t in texts), texts
        assert any(t.startswith("The two forecasts: They disagree: only the linear method")
                   for t in texts), texts
        facts = dict(tables.key_facts(a))
        assert facts["Linear forecast"].startswith(words)
        assert facts["Forecasts agree?"].startswith("They disagree")
        assert "(linear)" in tables.forecast_text(a.summary())
