"""The reference world: organisations, sites, devices, groups, sensors and parameters.

Built once per server from (seed, origin, sizes) with its own ``random.Random``, so the same
seed and clock give the same world.  Entities are frozen dataclasses; how they look on the wire
is ``views.py``'s job, and their readings are computed on demand by ``series.py``/``gnss.py``.
All times are integer seconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from devmon_sync.server import catalogue as cat
from devmon_sync.server.clock import DAY_S, iso
from devmon_sync.server.noise import uuid4_from


@dataclass(frozen=True)
class Projection:
    id: int
    label: str
    projection_type: str  # standard | proj_string
    srid: int | None
    proj_string: str | None
    vertical_datum: str | None
    height_type: str  # orthometric | ellipsoidal

    @property
    def crs(self) -> str:
        return f"EPSG:{self.srid}" if self.projection_type == "standard" else self.proj_string


@dataclass(frozen=True)
class BaseStation:
    id: int
    type: str  # cors | private | device
    name: str
    status: str  # active | inactive | no_data
    device_serial: str | None = None


@dataclass(frozen=True)
class Site:
    index: int
    uuid: str
    org_uuid: str
    name: str
    description: str | None
    timezone: str | None
    place: cat.Place
    base_stations: tuple[BaseStation, ...] = ()
    projections: tuple[Projection, ...] = ()

    @property
    def has_gnss(self) -> bool:
        return bool(self.projections)

    @property
    def default_projection_id(self) -> int:
        """The projection the site's drawings use: its national grid where the place has
        one (an engineer's plans are in it), else its first (the UTM zone)."""
        national = [p for p in self.projections
                    if self.place.national_epsg and p.srid == self.place.national_epsg]
        return (national or list(self.projections))[0].id


@dataclass(frozen=True)
class Parameter:
    uuid: str
    name: str
    alias: str
    parameter_type: str
    unit: str
    precision: int
    source_type: str  # raw | derived
    read_index: int
    gen: str
    args: dict
    created_s: int
    updated_s: int
    fault_rate: float = 0.0
    fault_reason: str | None = None
    terms: tuple = ()  # derived: ((input parameter name, coef, zero), ...)
    const: float = 0.0

    @property
    def formula(self) -> str | None:
        """The derived parameter's formula over the raw parameters of its sensor."""
        if self.source_type != "derived":
            return None
        text = " + ".join(f"{coef:g} * ({name} - {zero:g})" for name, coef, zero in self.terms)
        return f"{text} + {self.const:g}" if self.const else text


@dataclass(frozen=True)
class Sensor:
    uuid: str
    index: int  # channelIndex
    template: str
    type: str
    model: str
    name: str
    alias: str
    connection_type: str
    physical_uuid: str | None
    physical_serial: str | None
    params: tuple[Parameter, ...]
    active_from_s: int
    active_until_s: int | None = None  # deactivated at
    deleted: bool = False
    attributes: tuple[dict, ...] | None = None
    is_gnss: bool = False

    @property
    def is_active(self) -> bool:
        return self.active_until_s is None


@dataclass(frozen=True)
class Device:
    index: int
    serial: str
    role: cat.Role
    kind: str
    alias: str | None
    name: str | None
    description: str | None
    org_uuid: str
    legacy_id: int | None
    site: Site | None
    lat: float | None
    lon: float | None
    height_m: float | None
    state: str
    installed_s: int
    stopped_s: int | None  # last possible transmission (None: still transmitting)
    tx_phase_s: int
    sensors: tuple[Sensor, ...]
    hardware: dict | None
    firmware: dict | None
    modems: tuple[dict, ...]
    tags: tuple[dict, ...]
    queued_command: dict | None
    battery: dict
    power_source: str | None
    signal: dict | None
    tx_protocol: str | None
    gnss_config: dict | None
    internal: dict
    outage_until_s: int  # no outages are generated after this time

    @property
    def display_name(self) -> str:
        return self.alias or self.name or self.serial

    @property
    def sampling_s(self) -> int | None:
        return self.role.sampling_s

    @property
    def tx_s(self) -> int | None:
        return self.role.tx_s


@dataclass(frozen=True)
class Group:
    uuid: str
    org_uuid: str
    name: str
    description: str
    parent_uuid: str  # "" for a root group: the spec types parentUuid as a non-null string
    device_serials: tuple[str, ...]
    children: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorldSize:
    sites: int = 6
    devices: int = 48
    days: int = 90


@dataclass
class World:
    seed: int
    origin_s: int
    anchor_s: int
    orgs: list[tuple[str, str]]
    sites: list[Site]
    devices: list[Device]
    groups: list[Group]
    site_by_uuid: dict[str, Site] = field(default_factory=dict)
    device_by_serial: dict[str, Device] = field(default_factory=dict)
    group_by_uuid: dict[str, Group] = field(default_factory=dict)
    sensor_by_uuid: dict[str, tuple[Device, Sensor]] = field(default_factory=dict)
    param_by_uuid: dict[str, tuple[Device, Sensor, Parameter]] = field(default_factory=dict)
    memo: dict = field(default_factory=dict)
    """Results that change only at a device's next transmission (health), keyed by it."""
    removed: list[Device] = field(default_factory=list)
    """Devices the service no longer lists (``past.as_of``: removed upstream), kept out of
    every index above so no route serves them, and kept here so the changes' picks stay the
    same."""

    def __post_init__(self) -> None:
        self.site_by_uuid = {s.uuid: s for s in self.sites}
        self.device_by_serial = {d.serial: d for d in self.devices}
        self.group_by_uuid = {g.uuid: g for g in self.groups}
        for d in self.devices:
            for s in d.sensors:
                self.sensor_by_uuid[s.uuid] = (d, s)
                for p in s.params:
                    self.param_by_uuid[p.uuid] = (d, s, p)


def build_world(seed: int, anchor_s: int, size: WorldSize, started_s: int | None = None,
                origin_s: int | None = None) -> World:
    """Build the world whose history runs ``size.days`` days up to ``anchor_s`` (a midnight).

    ``started_s`` (default ``anchor_s``) is when the server's clock started: the device meant
    to show "degraded" missed the transmission just before it, so the status is true at start
    whatever the time of day, and turns "offline" later as a real one would.  ``origin_s``
    fixes where the history begins instead (``ServerConfig.history_start``): the world is the
    one designed ``size.days`` after it (its events, stops and outages in place), whatever day
    the server starts on, its data running on to the server's clock.
    """
    if origin_s is None:
        origin_s = anchor_s - size.days * DAY_S
    else:  # its events, stops and outages as designed, wherever the clock now is
        anchor_s = origin_s + size.days * DAY_S
    started_s = anchor_s if started_s is None else started_s
    rng = random.Random(seed)
    orgs = [(uuid4_from(seed, "org", i), name) for i, (name, _) in enumerate(cat.ORGS)]
    sites = [_make_site(seed, i, orgs) for i in range(max(1, size.sites))]
    roles = _role_list(size.devices)
    devices: list[Device] = []
    sited_cursor = 0
    gnss_sites = [s for s in sites if s.has_gnss] or sites[:1]
    for i, role in enumerate(roles):
        if role.sited and role.gnss_scenario:
            site = gnss_sites[0] if i < len(cat.CORE_ROLES) else gnss_sites[i % len(gnss_sites)]
        elif role.sited:
            site = sites[sited_cursor % len(sites)]
            sited_cursor += 1
        else:
            site = None
        devices.append(_make_device(seed, rng, i, role, site, orgs, origin_s, anchor_s,
                                    started_s))
    groups = _make_groups(seed, orgs, sites, devices)
    return World(seed, origin_s, anchor_s, orgs, sites, devices, groups)


def _role_list(n: int) -> list[cat.Role]:
    roles = [cat.ROLES[name] for name in cat.CORE_ROLES[:n]]
    for k in range(n - len(roles)):
        role = cat.ROLES[cat.FILL_ROLES[k % len(cat.FILL_ROLES)]]
        if role.sited:
            role = dataclasses.replace(role, state="active",
                                       status="unknown" if role.tx_s is None else "online")
        roles.append(role)
    return roles


def _make_site(seed: int, i: int, orgs: list[tuple[str, str]]) -> Site:
    place = cat.PLACES[i % len(cat.PLACES)]
    lap = i // len(cat.PLACES)
    name = place.name if lap == 0 else f"{place.name} {lap + 1}"
    uuid = uuid4_from(seed, "site", i)
    org_uuid = orgs[i % len(orgs)][0]
    if i % 2 == 1:  # every other site has no GNSS
        return Site(i, uuid, org_uuid, name, place.description, place.timezone, place)
    base = 100 + 10 * i
    stations = (
        BaseStation(base + 1, "cors", f"CORS {place.name.split()[0][:4].upper()}", "active"),
        BaseStation(base + 2, "private", f"{name} private base", "active"),
        BaseStation(base + 3, "device", f"{name} base receiver", "inactive"),
    )
    projections = [Projection(base + 1, f"WGS 84 / UTM zone {place.utm_epsg % 100}"
                              f"{'N' if place.utm_epsg < 32700 else 'S'}", "standard",
                              place.utm_epsg, None, "EGM2008", "orthometric")]
    projections.append(Projection(
        base + 2, f"{name} site grid", "proj_string", None,
        f"+proj=tmerc +lat_0={place.lat:.4f} +lon_0={place.lon:.4f} +k=1 +x_0=5000 "
        f"+y_0=10000 +ellps=WGS84 +units=m +no_defs", None, "ellipsoidal"))
    if place.national_epsg:
        projections.append(Projection(base + 3, f"National grid EPSG:{place.national_epsg}",
                                      "standard", place.national_epsg, None, "EGM2008",
                                      "orthometric"))
    return Site(i, uuid, org_uuid, name, place.description, place.timezone, place,
                stations, tuple(projections))


def _serial(i: int) -> str:
    return f"DM{24 + i % 3:02d}-{(i * 7919) % 90000 + 10000:05d}"


def _make_device(seed, rng, i, role, site, orgs, origin_s, anchor_s, started_s) -> Device:
    serial = _serial(i)
    org_uuid = site.org_uuid if site else orgs[i % len(orgs)][0]
    installed_s = origin_s + (0 if i < len(cat.CORE_ROLES) else rng.randrange(0, 20) * DAY_S)
    if role.state in ("inventory", "testing", "unprovisioned", "provisioned", "deployed"):
        installed_s = anchor_s  # nothing transmitted yet
    tx_phase_s = 17 + (i * 13) % 40
    stopped_s = _stop_time(role, installed_s, anchor_s, started_s, tx_phase_s)
    lat = lon = h = None
    if site:
        p = site.place
        lat = p.lat + rng.uniform(-0.003, 0.003)
        lon = p.lon + rng.uniform(-0.004, 0.004)
        h = p.height_m + rng.uniform(-40.0, 40.0)
    sensors = _make_sensors(seed, rng, serial, role, installed_s, anchor_s, i)
    physical = role.kind == "physical"
    no_sensors_yet = role.state in ("inventory", "unprovisioned")
    return Device(
        index=i, serial=serial, role=role, kind=role.kind,
        alias=None if i % 5 == 3 else _alias(role, i, site),
        name=None if i % 7 == 6 else f"{role.name.replace('_', '-')}-{i:03d}",
        description=None if i % 3 else f"{role.name.replace('_', ' ').capitalize()} #{i}",
        org_uuid=org_uuid,
        legacy_id=None if no_sensors_yet else _legacy_id(i),  # series items need one
        site=site, lat=lat, lon=lon, height_m=h, state=role.state,
        installed_s=installed_s, stopped_s=stopped_s,
        tx_phase_s=tx_phase_s,
        sensors=() if no_sensors_yet else sensors,
        hardware={"model": "DMX-4" if role.gnss_scenario is None else "DMX-4G",
                  "revision": f"r{2 + i % 3}"} if physical else None,
        firmware={"string": f"dmx-fw {4 + i % 2}.{i % 4}.{i % 9} (build {2100 + i})",
                  "version": f"{4 + i % 2}.{i % 4}.{i % 9}"} if physical else None,
        modems=_modems(i, role) if physical else (),
        tags=_tags(i, role),
        queued_command=_queued_command(seed, i, anchor_s) if physical and i % 6 == 2 else None,
        battery=_battery(rng, role),
        power_source=("external" if role.gnss_scenario else "battery") if physical else None,
        signal=_signal(rng, i) if physical and role.state not in ("inventory",) else None,
        tx_protocol=("mqtt" if i % 2 else "coap") if physical and stopped_s != installed_s
        else None,
        gnss_config=_gnss_config(seed, i, role, site),
        internal={"peripheralId": 1000 + i,
                  "metadata": _gnss_events(role, origin_s, anchor_s) if role.gnss_scenario else None,
                  "config": {"samplingPeriodSeconds": role.sampling_s,
                             "txPeriodSeconds": role.tx_s} if physical else None},
        outage_until_s=anchor_s - 3 * DAY_S,
    )


def _alias(role: cat.Role, i: int, site: Site | None) -> str:
    label = {"gnss_base": "GNSS base", "weather": "Weather forecast",
             "survey_virtual": "Survey prisms"}.get(role.name)
    label = label or role.name.split("_")[0].replace("gnss", "GNSS").capitalize()
    if role.gnss_scenario and role.gnss_scenario != "base":
        label = f"GNSS {role.gnss_scenario}" if i < len(cat.CORE_ROLES) else "GNSS rover"
    where = site.name.split()[0] if site else "Store"
    return f"{where} {label} {i:02d}"


def _legacy_id(i: int) -> int:
    # One device sits at the very edge of the spec's integer range (JavaScript's safe integer).
    return 9007199254740991 if i == 4 else 410000 + i * 37


def _stop_time(role: cat.Role, installed_s: int, anchor_s: int, started_s: int,
               tx_phase_s: int) -> int | None:
    if role.tx_s is None:
        return None
    if role.state in ("inventory", "testing", "unprovisioned", "provisioned", "deployed"):
        return installed_s  # never transmitted
    if role.state == "retired":
        return anchor_s - 40 * DAY_S
    if role.state == "suspended":
        return anchor_s - 9 * DAY_S
    if role.status == "degraded":  # sent the slot before the last one due at start, not that
        slot = (started_s - installed_s - tx_phase_s) // role.tx_s
        return installed_s + tx_phase_s + (slot - 1) * role.tx_s
    if role.status == "offline":
        return anchor_s - 3 * DAY_S
    return None


def _modems(i: int, role: cat.Role) -> tuple[dict, ...]:
    lte = {"type": "lte", "model": "nRF9160", "imei": f"3566600{i:08d}",
           "iccid": f"8944500{i:012d}", "uuid": None}
    if not role.satellite:
        return (lte,)
    sat_type = "iridium" if i % 2 else "myriota"
    sat = {"type": sat_type, "model": "9603N" if sat_type == "iridium" else "HyperPulse",
           "imei": f"3004340{i:08d}" if sat_type == "iridium" else None, "iccid": None,
           "uuid": None}
    return (lte, sat)


def _tags(i: int, role: cat.Role) -> tuple[dict, ...]:
    tags = []
    if role.gnss_scenario:
        tags.append({"id": 1, "name": "gnss", "colour": "#1f77b4"})
    if role.gnss_scenario in ("accelerating", "outliers") or role.name == "river_level":
        tags.append({"id": 2, "name": "critical", "colour": "#d62728"})
    if i % 4 == 1:
        tags.append({"id": 3, "name": f"zone-{'ABC'[i % 3]}", "colour": None})
    return tuple(tags)


def _queued_command(seed: int, i: int, anchor_s: int) -> dict:
    return {"uuid": uuid4_from(seed, "command", i),
            "status": "queued" if i % 4 else "processing",
            "createdAt": iso(anchor_s - 3600 * (1 + i % 5))}


def _battery(rng: random.Random, role: cat.Role) -> dict:
    if role.kind != "physical":
        return {"voltage": None, "percentage": None, "remaining": None, "isCharging": None}
    pct = round(rng.uniform(8.0, 100.0), 1)
    return {"voltage": round(3.3 + 0.9 * pct / 100.0, 2), "percentage": pct,
            "remaining": f"{max(1, int(pct * 0.3))} months",
            "isCharging": bool(role.gnss_scenario) and pct < 95}


def _signal(rng: random.Random, i: int) -> dict:
    rsrp = round(rng.uniform(-125.0, -80.0), 0)
    quality = "no_signal" if rsrp < -122 else "weak" if rsrp < -110 else \
        "ok" if rsrp < -95 else "good"
    return {"rssi": round(rsrp + 30.0, 0), "rsrp": rsrp, "rsrq": round(rng.uniform(-19, -5), 0),
            "signalQuality": quality}


def _gnss_config(seed: int, i: int, role: cat.Role, site: Site | None) -> dict | None:
    if not role.gnss_scenario:
        return None
    is_base = role.gnss_scenario == "base"
    station = None
    if site and site.base_stations and not is_base:
        bs = site.base_stations[1] if role.gnss_scenario == "creep" else site.base_stations[0]
        station = {"id": bs.id, "type": bs.type, "name": bs.name, "status": bs.status}
    return {"processingMode": "static" if i % 2 else "kinematic",
            "antennaType": "LEIAR20 LEIM" if role.gnss_scenario == "step" else "TRM59800.00 NONE",
            "arpHeight": 0.058 if role.gnss_scenario == "step" else 0.0,
            "azimuth": None if is_base else float((135 + 37 * i) % 360),
            "enableLeverArmCompensation": role.gnss_scenario in ("accelerating", "creep"),
            "isBaseStation": is_base, "baseStation": station}


def gnss_event_times(role: cat.Role, origin_s: int, anchor_s: int) -> dict[str, int]:
    """Absolute times of a GNSS device's scenario events (step, base switch, acceleration)."""
    span = anchor_s - origin_s
    if role.gnss_scenario == "step":
        return {"antenna_change": origin_s + int(span * 0.55) // 3600 * 3600}
    if role.gnss_scenario == "creep":
        return {"base_station_switch": origin_s + int(span * 0.4) // 3600 * 3600}
    if role.gnss_scenario == "accelerating":
        return {"acceleration_onset": origin_s + int(span * 0.35) // 3600 * 3600,
                "failure": anchor_s + 12 * DAY_S}
    return {}


def _gnss_events(role: cat.Role, origin_s: int, anchor_s: int) -> dict:
    events = [{"type": kind, "at": iso(t)}
              for kind, t in gnss_event_times(role, origin_s, anchor_s).items()
              if kind in ("antenna_change", "base_station_switch")]
    return {"gnssEvents": events}


def _make_sensors(seed, rng, serial, role, installed_s, anchor_s, dev_i) -> tuple[Sensor, ...]:
    templates = list(role.sensors)
    sensors: list[Sensor] = []
    if role.gnss_scenario:
        sensors.append(_gnss_sensor(seed, serial, installed_s))
    for key in templates:
        sensors.append(_sensor_from_template(seed, serial, key, len(sensors), installed_s,
                                             dev_i))
    if role.name == "piezometer" and dev_i < len(cat.CORE_ROLES):
        # A sensor replaced mid-history: the old one deactivated (archived data), and a sensor
        # removed by the user: soft-deleted, its data served only with includeDeleted.
        old = _sensor_from_template(seed, serial, "vw_piezometer", len(sensors), installed_s,
                                    dev_i, suffix="old")
        sensors.append(dataclasses.replace(old, active_until_s=(installed_s + anchor_s) // 2
                                           // 3600 * 3600))
        gone = _sensor_from_template(seed, serial, "soil", len(sensors), installed_s, dev_i,
                                     suffix="removed")
        sensors.append(dataclasses.replace(gone, deleted=True))
    return tuple(sensors)


def _gnss_sensor(seed: int, serial: str, installed_s: int) -> Sensor:
    s_uuid = uuid4_from(seed, "sensor", serial, "gnss")
    params = tuple(
        Parameter(uuid4_from(seed, "param", serial, "gnss", name), name, name,
                  "gnss_" + name.lower(), unit, prec, "raw", k, "gnss", {"field": name},
                  installed_s, installed_s)
        for k, (name, unit, prec) in enumerate(cat.GNSS_SERIES_FIELDS))
    return Sensor(s_uuid, 0, "gnss", "linear_displacement", "gnss_dual_freq_rtk", "gnss",
                  "GNSS", "integrated", uuid4_from(seed, "phys", serial, "gnss"),
                  f"G{serial[-5:]}", params, installed_s, is_gnss=True)


def _sensor_from_template(seed, serial, key, channel, installed_s, dev_i, suffix="") -> Sensor:
    t = cat.SENSORS[key]
    tag = f"{key}{suffix}"
    s_uuid = uuid4_from(seed, "sensor", serial, tag)
    faulty = (dev_i + channel) % 5 == 0
    params = []
    for k, pt in enumerate(t.params):
        params.append(Parameter(
            uuid4_from(seed, "param", serial, tag, pt.name), pt.name, pt.alias, pt.parameter_type,
            pt.unit, pt.precision, "raw", k, pt.gen, dict(pt.args), installed_s, installed_s,
            fault_rate=0.01 if faulty and k == 0 else 0.0005,
            fault_reason="out_of_range" if faulty and k == 0 else "null_value"))
    for k, dt in enumerate(t.derived, start=len(t.params)):
        params.append(Parameter(
            uuid4_from(seed, "param", serial, tag, dt.name), dt.name, dt.alias,
            dt.parameter_type, dt.unit, dt.precision, "derived", k, "derived", {},
            installed_s, installed_s + DAY_S, terms=dt.terms, const=dt.const))
    virtual = t.model in ("manual_entry", "forecast_weather")
    attributes = tuple(_attribute(seed, s_uuid, serial, tag, n, u, v, installed_s)
                       for n, u, v in t.attributes) or None
    alias = t.alias if not suffix else f"{t.alias} ({suffix})"
    return Sensor(s_uuid, channel, key, t.type, t.model, f"{t.name}{suffix}", alias,
                  t.connection_type, None if virtual else uuid4_from(seed, "phys", serial, tag),
                  None if virtual else f"S{dev_i:04d}{channel}{len(suffix)}",
                  tuple(params), installed_s, attributes=attributes)


def _attribute(seed, s_uuid, serial, tag, name, unit, value, installed_s) -> dict:
    ts = iso(installed_s)
    return {"uuid": uuid4_from(seed, "attr", serial, tag, name), "sensorUuid": s_uuid,
            "physicalSensorUuid": uuid4_from(seed, "phys", serial, tag),
            "behaviour": "static", "name": name, "alias": name.replace("_", " ").capitalize(),
            "description": f"Calibration constant {name}", "unit": unit,
            "valueType": "numeric", "value": value, "attributeSource": "custom",
            "function": "offset", "parameterType": "unknown", "timestamp": ts, "updatedAt": ts,
            "optionSet": {"uuid": uuid4_from(seed, "optionset", name), "name": f"{name} options",
                          "description": "Typical values", "orgUuid": uuid4_from(seed, "org", 0),
                          "optionsType": "numeric",
                          "options": [{"value": value, "label": "factory"}],
                          "allowCustomValue": True},
            "template": {"uuid": uuid4_from(seed, "template", name),
                         "templateName": "Calibration"}}


def _make_groups(seed: int, orgs, sites: list[Site], devices: list[Device]) -> list[Group]:
    """Per organisation a root network group; per site a group with nested instrument groups.

    Weather devices, virtual devices and devices with no site stay in no group.
    """
    groups: list[Group] = []
    for oi, (org_uuid, org_name) in enumerate(orgs):
        root_uuid = uuid4_from(seed, "group", "root", oi)
        site_groups = []
        for site in (s for s in sites if s.org_uuid == org_uuid):
            members = [d for d in devices if d.site is site and d.kind == "physical"]
            gnss = tuple(d.serial for d in members if d.role.gnss_scenario)
            other = tuple(d.serial for d in members if not d.role.gnss_scenario)
            sg_uuid = uuid4_from(seed, "group", "site", site.index)
            children = []
            if gnss:
                g_uuid = uuid4_from(seed, "group", "gnss", site.index)
                groups.append(Group(g_uuid, org_uuid, f"{site.name}: GNSS",
                                    "GNSS rovers and base", sg_uuid, gnss))
                children.append(g_uuid)
            groups.append(Group(sg_uuid, org_uuid, site.name, f"Instruments at {site.name}",
                                root_uuid, other, tuple(children)))
            site_groups.append(sg_uuid)
        groups.append(Group(root_uuid, org_uuid, f"{org_name} network",
                            "All monitored sites", "", (), tuple(site_groups)))
    return groups
