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

from analysis.displacement import Displacement, Reference, displacement_enu
from analysis.geodesy import geodetic_to_ecef, geodetic_to_enu, normalize_longitude
from analysis.trends import TrendResult, acceleration, midas_velocity, ols_velocity, sliding_velocity

__all__ = ["Displacement", "Reference", "TrendResult", "acceleration", "displacement_enu",
           "geodetic_to_ecef", "geodetic_to_enu", "midas_velocity", "normalize_longitude",
           "ols_velocity", "sliding_velocity"]
