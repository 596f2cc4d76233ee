"""The report's methods page says what the analysis does, with the numbers it uses.

A regulator reads this page: it must describe the failure forecast the report shows
(``analysis.forecast``: Voight's law fitted to the positions), not the inverse-velocity line
it replaced ("fits a line", "R² of at least 0.7"), and each number it states must be the
one the code runs with (a module constant or the default the pipeline calls with), read
from the PDF itself.
"""

from __future__ import annotations

import inspect
import re

import pytest

from analysis import alarms, forecast, pipeline, window_noise
from devmon_sync.report import ReportOptions, build_report, write_report
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries

from support import needs_poppler, pdf_text, synced_mirror

WORLD = WorldSize(sites=1, devices=6, days=20)


def _default(name: str):
    return inspect.signature(forecast.forecast_from_displacement).parameters[name].default


@pytest.fixture(scope="module")
def methods(tmp_path_factory) -> str:
    """The methods pages' text, whitespace folded (pdftotext -layout wraps lines)."""
    root = tmp_path_factory.mktemp("methods")
    path = synced_mirror(root / "mirror.duckdb", WORLD)
    with Mirror.open(path, read_only=True) as m:
        serial = next(d.serial_number for d in queries.gnss_devices(m) if d.epochs)
        data = build_report(m, ReportOptions(devices=[serial]))
    pdf = write_report(data, root / "report.pdf").path
    pages = [p for p in pdf_text(pdf).split("\f") if "Methods and settings" in p]
    assert pages, "no methods page in the PDF"
    return " ".join(" ".join(pages).split())


@needs_poppler
def test_the_methods_page_does_not_describe_the_replaced_line_forecast(methods):
    assert "Failure forecast" in methods or "failure forecast" in methods
    for old in ("fits a line", "R²", "R2 ", "R^2"):
        assert old not in methods, old


@needs_poppler
def test_the_forecast_numbers_stated_are_those_the_forecast_uses(methods):
    # the pipeline calls the forecast with its defaults: they are the module's constants
    assert _default("min_points") == forecast.MIN_POINTS
    assert _default("min_velocity_snr") == forecast.MIN_VELOCITY_SNR
    assert _default("confidence") == forecast.CONFIDENCE
    assert _default("max_horizon_days") == forecast.MAX_HORIZON_DAYS
    assert _default("window_days") == forecast.WINDOW_DAYS
    expected = [
        f"{pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS:g}-day windows",
        f"positions of the last {forecast.WINDOW_DAYS:g} days",
        f"medians of {forecast.BIN_DAYS * 24:g}-hour bins",
        f"more than {forecast.ROBUST_SIGMAS:g} robust σ",
        f"{forecast.CALIBRATION:g} times",
        f"{100 * forecast.CONFIDENCE:g} % interval",
        f"at least {forecast.MIN_POINTS} windowed velocities",
        f"{forecast.MIN_VELOCITY_SNR:g}σ above their noise",
        f"at least {forecast.MIN_BINS} bins",
        f"within {forecast.MAX_HORIZON_DAYS:g} days of the last data",
        "Voight",
        f"exponent alpha fitted within {forecast.ALPHA_RANGE[0]:g} to "
        f"{forecast.ALPHA_RANGE[1]:g}",
        "the interval carries alpha's uncertainty",
        "Plan on the interval's early end",
    ]
    missing = [e for e in expected if e not in methods]
    assert not missing, (missing, methods)


@needs_poppler
def test_the_alarm_numbers_stated_are_those_of_the_rule_in_use(methods):
    rule = alarms.AlarmRule()  # the report's analyses use the default rule
    expected = [
        f"trailing {rule.displacement_window_days:g} day",
        f"trailing {rule.velocity_window_days:g} days",
        f"one-sided {100 * rule.confidence:g} % margin ({rule.z:.2f}σ)",
        f"for {rule.min_duration_hours:g} hours",
        f"differences of successive windows over the trailing "
        f"{window_noise.NOISE_HISTORY_DAYS:g} days",
        f"1 to {int(window_noise.LAGS[-1])} days, over the trailing "
        f"{window_noise.POSITION_HISTORY_DAYS:g} days",
        f"not evaluated until at least {window_noise.MIN_NOISE_SAMPLES} exist",
        f"at least {alarms.DISPLACEMENT_MIN_EPOCHS} and {alarms.VELOCITY_MIN_EPOCHS} readings",
        "cleared once the value itself has stayed below it",
    ]
    missing = [e for e in expected if e not in methods]
    assert not missing, (missing, methods)


@needs_poppler
def test_every_number_in_the_forecast_paragraph_is_accounted_for(methods):
    """No number in the forecast's description that the code does not use (a hard-coded
    copy that could drift): each is one of the forecast's parameters or a citation."""
    start = methods.index("Failure forecast")
    paragraph = methods[start:methods.index("Periods shorter", start)]
    used = {f"{v:g}" for v in (pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS, forecast.WINDOW_DAYS,
                               forecast.BIN_DAYS * 24, forecast.ROBUST_SIGMAS,
                               forecast.CALIBRATION, 100 * forecast.CONFIDENCE,
                               forecast.MIN_POINTS, forecast.MIN_VELOCITY_SNR,
                               forecast.MIN_BINS, forecast.MAX_HORIZON_DAYS, 2,  # alpha = 2
                               *forecast.ALPHA_RANGE)}
    citations = {"1985", "1988", "156"}  # and the GNSS station P156
    stated = set(re.findall(r"\d+(?:\.\d+)?", paragraph))
    assert stated - used - citations == set(), paragraph


@needs_poppler
def test_the_linear_forecast_is_described_with_the_numbers_it_uses(methods):
    """Issue 28: both forecasts on the methods page; the linear one's numbers are
    ``analysis.forecast_linear``'s constants (the pipeline calls it with its defaults)."""
    from analysis import forecast_linear as fl
    from analysis.inverse_velocity import MIN_WINDOW_POINTS

    start = methods.index("Linear inverse-velocity forecast")
    paragraph = methods[start:methods.index("Failure forecast (", start)]
    expected = [
        f"each holds {MIN_WINDOW_POINTS} readings",
        f"at least {fl.MIN_PHASE_POINTS} values on the line",
        f"last {fl.PHASE_WINDOW_DAYS:g} days",
        f"{100 * fl.CONFIDENCE:g} % interval (Fieller)",
        f"last {fl.ACCELERATION_WINDOW_DAYS:g} days",
        f"changes {fl.HINGE_DAYS:g} days before the end",
        f"noise of the {fl.NOISE_WINDOW_DAYS:g} days before",
        f"one-sided {100 * fl.ACCELERATION_CONFIDENCE:g} %",
        "failure may be imminent", "accelerating; failure possible within N days",
        "whether the two forecasts agree", "alpha above 2) it comes late",
    ]
    missing = [e for e in expected if e not in methods]
    assert not missing, (missing, paragraph)
    used = {f"{v:g}" for v in (fl.MIN_PHASE_POINTS, fl.PHASE_WINDOW_DAYS, 100 * fl.CONFIDENCE,
                               fl.ACCELERATION_WINDOW_DAYS, fl.NOISE_WINDOW_DAYS,
                               fl.HINGE_DAYS,
                               100 * fl.ACCELERATION_CONFIDENCE, 2)}  # alpha = 2
    stated = set(re.findall(r"\d+(?:\.\d+)?", paragraph))
    assert stated - used - {"1985", "2017"} == set(), paragraph
