"""GNSS deformation analysis: pure functions on numpy arrays (no Qt, no HTTP, no SQL).

Timestamps are numpy ``datetime64`` arrays meaning UTC; positions in degrees and metres.
The modules, each with one job: ``geodesy`` (geodetic to ENU through ECEF), ``projections``
(any CRS, grid factors), ``displacement`` (from a chosen reference, slope axes), ``cleaning``
(quality, outliers, gaps, steps), ``trends`` (least squares, MIDAS, sliding, acceleration),
``lines`` (windowed least-squares lines), ``stats`` (normal and t quantiles),
``inverse_velocity`` (windowed velocities and their inverse), ``forecast`` (the failure-time
forecast), ``alarms`` (alarm levels and their evaluation), ``pipeline`` (one rover's whole
analysis).
"""

import importlib

#: The names offered here and the module each comes from: imported when first asked for
#: (PEP 562), so that ``import analysis.words`` (the CLI's counts in words) does not load
#: numpy, pyproj and every analysis module: `devmon --version` took 0.7 s.
_EXPORTS = {"Displacement": "displacement", "Reference": "displacement",
            "displacement_enu": "displacement", "geodetic_to_ecef": "geodesy",
            "geodetic_to_enu": "geodesy", "normalize_longitude": "geodesy",
            "TrendResult": "trends", "acceleration": "trends", "midas_velocity": "trends",
            "ols_velocity": "trends", "sliding_velocity": "trends"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"analysis.{_EXPORTS[name]}"), name)
