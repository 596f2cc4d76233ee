"""Templates of the reference world: places, sensors and the device roles built from them.

Plain data, no behaviour.  The generators named here (``gen``) live in ``series.py``; a
derived parameter is a linear formula over raw parameters of the same sensor, so its readings
can be computed from theirs and its formula text shown to users.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ORGS = (
    ("Alpine Geotechnik AG", "Slope and dam monitoring in the Alps"),
    ("Coastal Slopes Ltd", "Cliff and cutting monitoring"),
    ("Pacific Dam Authority", "Dam safety surveillance"),
)


@dataclass(frozen=True)
class Place:
    name: str
    description: str | None
    lat: float
    lon: float
    height_m: float
    timezone: str | None
    utm_epsg: int
    national_epsg: int | None
    geoid_undulation_m: float
    mean_temp_c: float


PLACES = (
    Place("Illgraben slope", "Debris-flow catchment, left flank", 46.3021, 7.6312, 1120.0,
          "Europe/Zurich", 32632, 2056, 50.1, 8.0),
    Place("Mattmark dam", "Earthfill dam crest and abutments", 46.0466, 7.9650, 2205.0,
          "Europe/Zurich", 32632, 2056, 51.9, 1.0),
    Place("Folkestone Warren", "Coastal landslide complex", 51.0960, 1.2440, 45.0,
          "Europe/London", 32631, 27700, 45.6, 11.0),
    Place("Ruahine road cut", None, -40.2140, 175.9030, 610.0,
          "Pacific/Auckland", 32760, 2193, 23.4, 12.0),
    Place("La Conchita bluff", "Coastal bluff above the highway", 34.3640, -119.4460, 160.0,
          "America/Los_Angeles", 32611, None, -35.0, 17.0),
    Place("Tunnel portal north", "Portal cut slope, chainage 0+120", -33.4470, -70.2010, 2400.0,
          None, 32719, None, 27.8, 9.0),
    Place("Aknes rock slope", "Unstable rock slope above the fjord", 62.1830, 6.9950, 880.0,
          "Europe/Oslo", 32632, 25832, 43.5, 4.0),
    Place("Quarry east wall", None, 35.6230, 138.8950, 720.0, None, 32654, None, 41.2, 13.0),
)


@dataclass(frozen=True)
class ParamTemplate:
    name: str
    alias: str
    parameter_type: str
    unit: str
    precision: int
    gen: str
    args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DerivedTemplate:
    """``value = const + sum(coef * (input - zero))`` over raw parameters of the same sensor."""

    name: str
    alias: str
    parameter_type: str
    unit: str
    precision: int
    terms: tuple[tuple[str, float, float], ...]
    const: float = 0.0


@dataclass(frozen=True)
class SensorTemplate:
    type: str
    model: str
    name: str
    alias: str
    params: tuple[ParamTemplate, ...]
    derived: tuple[DerivedTemplate, ...] = ()
    connection_type: str = "external"
    attributes: tuple[tuple[str, str, float], ...] = ()  # (name, unit, value) offsets


def _temp(name="temperature", alias="Temperature", damp=1.0, lag_h=0.0):
    return ParamTemplate(name, alias, "temperature", "°C", 2, "temperature",
                         {"damp": damp, "lag_h": lag_h})


SENSORS: dict[str, SensorTemplate] = {
    "vw_piezometer": SensorTemplate(
        "vibrating_wire", "vw_piezometer_4500s", "vw1", "Piezometer",
        (ParamTemplate("digits", "Reading", "frequency_squared", "digits", 1, "piezo_digits"),
         _temp(damp=0.15, lag_h=12.0)),
        (DerivedTemplate("pore_pressure", "Pore pressure", "pressure", "kPa", 2,
                         (("digits", -0.1275, 8650.0), ("temperature", 0.0312, 12.0))),
         DerivedTemplate("water_level", "Water level", "water_level", "m", 3,
                         (("digits", -0.013001, 8650.0),), const=412.500)),
        attributes=(("zero_reading", "digits", 8650.0), ("tip_elevation", "m", 412.5)),
    ),
    "barometer": SensorTemplate(
        "barometer", "baro_bmp_388", "baro", "Barometer",
        (ParamTemplate("pressure", "Air pressure", "pressure", "hPa", 1, "barometric"),),
        connection_type="integrated"),
    "tiltmeter": SensorTemplate(
        "inclinometer", "tilt_biaxial_mems", "tilt1", "Tiltmeter",
        (ParamTemplate("tilt_x", "Tilt X", "tilt", "deg", 4, "tilt", {"axis": 0}),
         ParamTemplate("tilt_y", "Tilt Y", "tilt", "deg", 4, "tilt", {"axis": 1}),
         _temp(damp=0.8, lag_h=1.0)),
        attributes=(("tilt_x_offset", "deg", 0.0125),)),
    "rain": SensorTemplate(
        "pulse_rain", "tipping_bucket_02mm", "rain", "Rain gauge",
        (ParamTemplate("rainfall", "Rainfall", "precipitation", "mm", 1, "rain_mm"),)),
    "weather": SensorTemplate(
        "weather", "forecast_weather", "forecast", "Weather",
        (_temp("air_temperature", "Air temperature"),
         ParamTemplate("relative_humidity", "Relative humidity", "humidity", "%", 0, "humidity"),
         ParamTemplate("wind_speed", "Wind speed", "wind_speed", "m/s", 1, "wind_speed"),
         ParamTemplate("precipitation", "Precipitation", "precipitation", "mm", 1, "rain_mm")),
        connection_type="integrated"),
    "wind": SensorTemplate(
        "wind", "anemometer_ultrasonic", "wind", "Wind",
        (ParamTemplate("wind_speed", "Wind speed", "wind_speed", "m/s", 1, "wind_speed"),
         ParamTemplate("wind_direction", "Wind direction", "wind_direction", "deg", 0,
                       "wind_direction"))),
    "crackmeter": SensorTemplate(
        "linear_displacement", "crackmeter_lvdt_50", "crack1", "Crack meter",
        (ParamTemplate("displacement", "Crack opening", "displacement", "mm", 3, "crack"),
         _temp(damp=0.6, lag_h=2.0))),
    "water_quality": SensorTemplate(
        "conductivity_ph", "multiprobe_wq", "wq", "Water quality",
        (ParamTemplate("ph", "pH", "ph", "pH", 2, "smooth",
                       {"mean": 7.4, "annual": 0.2, "daily": 0.05, "noise": 0.02}),
         ParamTemplate("conductivity", "Conductivity", "conductivity", "uS/cm", 0, "smooth",
                       {"mean": 420.0, "annual": 60.0, "daily": 5.0, "noise": 3.0}),
         _temp("water_temperature", "Water temperature", damp=0.4, lag_h=6.0))),
    "turbidity": SensorTemplate(
        "turbidity", "turbidity_optical", "turb", "Turbidity",
        (ParamTemplate("turbidity", "Turbidity", "turbidity", "NTU", 1, "rain_response",
                       {"base": 4.0, "gain": 2.5, "tau_h": 10.0, "noise": 0.4}),)),
    "oxygen": SensorTemplate(
        "dissolved_oxygen", "do_optical", "do", "Dissolved oxygen",
        (ParamTemplate("dissolved_oxygen", "Dissolved oxygen", "oxygen", "mg/L", 2, "smooth",
                       {"mean": 9.5, "annual": -1.2, "daily": 0.4, "noise": 0.05}),)),
    "river_radar": SensorTemplate(
        "radar", "radar_level_80ghz", "radar", "River level radar",
        (ParamTemplate("distance", "Distance to water", "distance", "m", 3, "rain_response",
                       {"base": 3.2, "gain": -0.045, "tau_h": 18.0, "noise": 0.002}),),
        (DerivedTemplate("stage", "River stage", "water_level", "m", 3,
                         (("distance", -1.0, 0.0),), const=5.000),)),
    "ma420": SensorTemplate(
        "ma420", "analog_4_20", "ai1", "Standpipe transducer",
        (ParamTemplate("current", "Loop current", "current", "mA", 3, "rain_response",
                       {"base": 9.1, "gain": 0.08, "tau_h": 96.0, "noise": 0.004}),),
        (DerivedTemplate("head", "Water head", "water_level", "m", 3,
                         (("current", 1.25, 4.0),)),)),
    "soil": SensorTemplate(
        "soil_moisture", "soil_tdr", "soil", "Soil moisture",
        (ParamTemplate("vwc", "Volumetric water content", "moisture", "%", 1, "rain_response",
                       {"base": 21.0, "gain": 0.9, "tau_h": 72.0, "noise": 0.1}),
         _temp(damp=0.3, lag_h=8.0))),
    "survey": SensorTemplate(
        "linear_displacement", "manual_entry", "survey", "Survey prism",
        (ParamTemplate("settlement", "Settlement", "displacement", "mm", 1, "survey"),),
        connection_type="integrated"),
    "logger": SensorTemplate(
        "gauge_pressure_temp", "logger_internal", "internal", "Logger internals",
        (_temp("logger_temperature", "Logger temperature", damp=0.9, lag_h=0.5),
         ParamTemplate("supply_voltage", "Supply voltage", "voltage", "V", 2, "smooth",
                       {"mean": 3.62, "annual": 0.03, "daily": 0.02, "noise": 0.005})),
        connection_type="integrated"),
}

# GNSS solution fields that POST /sensor-data serves as one series each (spec 4.9).
GNSS_SERIES_FIELDS = (
    ("lat", "deg", 9), ("lon", "deg", 9), ("eh", "m", 4), ("oh", "m", 4),
    ("dE", "m", 4), ("dN", "m", 4), ("dU", "m", 4), ("d2d", "m", 4), ("d3d", "m", 4),
    ("vE", "mm/d", 2), ("vN", "mm/d", 2), ("vU", "mm/d", 2), ("roll", "deg", 3), ("pitch", "deg", 3),
)
GNSS_UNITS = {"dE": "m", "dN": "m", "dU": "m", "d2d": "m", "d3d": "m",
              "vE": "mm/d", "vN": "mm/d", "vU": "mm/d", "lat": "deg", "lon": "deg",
              "roll": "deg", "pitch": "deg", "eh": "m", "oh": "m"}


@dataclass(frozen=True)
class Role:
    """What a device is for: its kind, sensors, sampling and (for GNSS) its motion scenario."""

    name: str
    kind: str = "physical"
    sensors: tuple[str, ...] = ()
    sampling_s: int | None = 900
    tx_s: int | None = 3600
    product: str | None = "DM Logger 4"
    gnss_scenario: str | None = None
    satellite: bool = False
    state: str = "active"
    status: str = "online"  # intended connection status at the world's start
    sited: bool = True


ROLES: dict[str, Role] = {
    "gnss_base": Role("gnss_base", product="DM GNSS Base", gnss_scenario="base",
                      sensors=("logger",), sampling_s=3600, tx_s=3600),
    "gnss_stable": Role("gnss_stable", product="DM GNSS Rover", gnss_scenario="stable",
                        sensors=("logger",), sampling_s=3600, tx_s=3600),
    "gnss_creep": Role("gnss_creep", product="DM GNSS Rover", gnss_scenario="creep",
                       sensors=("logger",), sampling_s=3600, tx_s=3600, satellite=True),
    "gnss_accelerating": Role("gnss_accelerating", product="DM GNSS Rover",
                              gnss_scenario="accelerating", sensors=("logger",),
                              sampling_s=3600, tx_s=3600),
    "gnss_seasonal": Role("gnss_seasonal", product="DM GNSS Rover", gnss_scenario="seasonal",
                          sensors=("logger",), sampling_s=3600, tx_s=3600),
    "gnss_step": Role("gnss_step", product="DM GNSS Rover", gnss_scenario="step",
                      sensors=("logger",), sampling_s=3600, tx_s=3600),
    "gnss_outliers": Role("gnss_outliers", product="DM GNSS Rover", gnss_scenario="outliers",
                          sensors=("logger",), sampling_s=3600, tx_s=3600),
    "weather": Role("weather", kind="weather", sensors=("weather",), sampling_s=3600,
                    tx_s=3600, product=None),
    "piezometer": Role("piezometer", sensors=("vw_piezometer", "barometer", "logger")),
    "tiltmeter": Role("tiltmeter", sensors=("tiltmeter", "logger"), sampling_s=600),
    "raingauge": Role("raingauge", sensors=("rain", "wind", "soil"), sampling_s=600,
                      satellite=True),
    "survey_virtual": Role("survey_virtual", kind="virtual", sensors=("survey",),
                           sampling_s=None, tx_s=None, product=None, status="unknown"),
    "crackmeter": Role("crackmeter", sensors=("crackmeter", "logger"), status="offline"),
    "water_quality": Role("water_quality", sensors=("water_quality", "turbidity", "oxygen"),
                          state="overdue"),
    "river_level": Role("river_level", sensors=("river_radar", "ma420"), status="degraded"),
    "piezometer_deployed": Role("piezometer_deployed", sensors=("vw_piezometer", "logger"),
                                state="deployed", status="unknown"),
    "tiltmeter_suspended": Role("tiltmeter_suspended", sensors=("tiltmeter",),
                                state="suspended", status="offline"),
    "raingauge_retired": Role("raingauge_retired", sensors=("rain",), state="retired",
                              status="offline"),
    "unsited_inventory": Role("unsited_inventory", state="inventory", status="unknown",
                              sited=False),
    "unsited_testing": Role("unsited_testing", sensors=("logger",), state="testing",
                            status="unknown", sited=False),
    "unsited_unprovisioned": Role("unsited_unprovisioned", state="unprovisioned",
                                  status="unknown", sited=False),
    "unsited_provisioned": Role("unsited_provisioned", sensors=("logger",),
                                state="provisioned", status="unknown", sited=False),
}

# The first devices of every world, in this order: together they show every feature.
CORE_ROLES = (
    "gnss_base", "gnss_stable", "gnss_creep", "gnss_accelerating", "gnss_seasonal",
    "gnss_step", "gnss_outliers", "weather", "piezometer", "tiltmeter", "raingauge",
    "survey_virtual", "crackmeter", "water_quality", "river_level", "piezometer_deployed",
    "tiltmeter_suspended", "raingauge_retired", "unsited_inventory", "unsited_testing",
    "unsited_unprovisioned", "unsited_provisioned",
)
# Devices beyond the core cycle through these.
FILL_ROLES = (
    "piezometer", "tiltmeter", "gnss_creep", "crackmeter", "gnss_seasonal", "raingauge",
    "piezometer", "weather", "gnss_stable", "water_quality", "river_level", "tiltmeter",
    "gnss_accelerating", "piezometer", "unsited_inventory",
)
