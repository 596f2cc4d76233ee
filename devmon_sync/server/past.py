"""A world that changes its past: the ``changing-past`` contract (issue 27, point 10).

A real monitoring service rewrites history between two syncs: a logger that was offline
uploads its buffer, an engineer corrects a calibration, GNSS epochs are re-solved with final
orbits, a device is moved to another group, a sensor is deleted, a device is decommissioned
(or moved to an organisation the key cannot see).  A mirror that only fetches what is new
keeps the old past; this module makes the reference server do all six at one stated time, ``change_s`` = the clock's day start (``world.anchor_s``, a UTC midnight) plus
``Contract.past_changes_h`` hours, so tests can sync before it and again after it.

The changes and whom they hit (``picks``: tests on both sides name them by it):

1. late upload: device L's readings (every non-GNSS sensor) in ``late_span`` = [anchor-3d,
   anchor-1d], and device L2's in ``old_hole_span`` = [anchor-18d, anchor-17d] (a hole older
   than 14 days), are absent before the change and served after.  Their newer data is there
   in both, so /sensor-data/latest and health.sensors.lastDataTimestamp do not move.
2. correction: device C's raw readings in ``corrected_span`` = [anchor-9d, anchor-2d] are
   ``CORRECTION`` (0.5, in each parameter's unit) higher after the change.
3. re-solution: rover R's epochs in ``resolved_span`` = [anchor-16d, anchor-2d] are
   ``HEIGHT_CHANGE_M`` (4 mm) higher after the change: eh, oh, dU and every projected h;
   d3d recomputed from dE, dN and the new dU; lat, lon, ids and every other field as before
   (vU too: it stays the receiver's day-to-day velocity as first solved).  POST /sensor-data
   serves R's field series from the same epochs.
4. group move: device M leaves its site's group for the group of the next site (by index,
   wrapping) of the same organisation.
5. deletion: the last non-GNSS sensor S of device D is soft-deleted: no longer listed, its data
   served only where ``includeDeleted`` asks for deleted data.
6. removal: device X is no longer listed anywhere (GET /devices, the devices of GET /sites
   and GET /device-groups; GET /devices/{sn} answers 404) and none of its data is served.
   Its groups keep other members, so no group disappears with it, and none is one of the
   groups of change 4.

Spans are inclusive at both ends.  The data changes (1-3) follow each request's clock; the
metadata changes (4-6) are made when the world is built (``as_of``), by the server's clock at
start: a wall-clock server started before the change time keeps its groups, sensors and
devices until restarted.  Honest servers (``past_changes_h == 0``) never call into this module.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from devmon_sync.server import series
from devmon_sync.server.clock import DAY_S, HOUR_S
from devmon_sync.server.contracts import Contract
from devmon_sync.server.gnss import Epochs
from devmon_sync.server.noise import uuid4_from
from devmon_sync.server.world import Device, Group, Sensor, World

CORRECTION = 0.5
"""What the correction adds to each of C's raw readings, in the parameter's own unit."""
HEIGHT_CHANGE_M = 0.004
"""How much higher (m) the re-solution puts R's epochs."""
FAULTY_RATE = 0.01
"""A parameter this often null has a lastFaultTimestamp (views.py), looked for over the last
two days: a hole there could hide the fault it names, so L has none."""

Span = tuple[int, int]


@dataclass(frozen=True)
class Picks:
    """Which device and sensor each change hits, and when (Unix seconds, inclusive spans).

    A change whose pick finds no device in a (small or short) world is None and not made.
    """

    late_serial: str | None
    late_span: Span
    old_hole_serial: str | None
    old_hole_span: Span
    corrected_serial: str | None
    corrected_span: Span
    rover_serial: str | None
    resolved_span: Span
    moved_serial: str | None
    moved_from_group: str | None
    moved_to_group: str | None
    deleted_serial: str | None
    deleted_sensor_uuid: str | None
    removed_serial: str | None


def change_s(anchor_s: int, contract: Contract) -> int:
    """When the past changes: ``past_changes_h`` hours after the clock's day start."""
    return anchor_s + round(contract.past_changes_h * HOUR_S)


def picks(world: World) -> Picks:
    """The devices the changes hit: the first, by serial number, that fits each rule, in the
    order L, L2, C, D, M, R, X, each from the devices not picked before.

    L, L2, C and D are steady loggers (physical, sited, no GNSS, sampling and transmitting
    still, with readings over the span: installed before it, no outage in it); L also has no
    parameter null often enough to name a last fault, C no derived parameter (each of its
    readings moves by exactly ``CORRECTION``).  D has two or more non-GNSS sensors, none of
    them deactivated nor deleted but the last, and loses that one.  M is a physical device
    without GNSS at a site whose organisation has another site.  R is a transmitting rover
    (not the outlier scenario, whose gaps and deleted day would blur the change) with epochs
    over its span.  X is a steady logger like D whose every group keeps a member without it
    and is none of the two groups of M's move.  The rules read nothing the changes alter
    (M's groups by site, not by members; the deleted flag of D's last sensor), and the world
    after the change keeps X in ``World.removed`` (in no group: removable still), so the
    world before and after the change give the same picks.
    """
    anchor = world.anchor_s
    late, old_hole = _days(anchor, 3, 1), _days(anchor, 18, 17)
    corrected, resolved = _days(anchor, 9, 2), _days(anchor, 16, 2)
    devices = sorted(world.devices + world.removed, key=lambda d: d.serial)
    taken: set[str] = set()

    def first(rule) -> Device | None:
        found = next((d for d in devices if d.serial not in taken and rule(d)), None)
        if found is not None:
            taken.add(found.serial)
        return found

    l1 = first(lambda d: _steady(d, late) and not _faulty(d))
    l2 = first(lambda d: _steady(d, old_hole))
    c = first(lambda d: _steady(d, corrected) and not _derived(d))
    d = first(lambda d: _steady(d, _days(anchor, 1, 0)) and _can_lose_a_sensor(d))
    m = first(lambda d: _movable(world, d))
    r = first(lambda d: _steady_rover(d, resolved))
    from_group, to_group = _move(world, m) if m else (None, None)
    x = first(lambda d: _steady(d, _days(anchor, 1, 0))
              and _removable(world, d, {from_group, to_group}))
    return Picks(_sn(l1), late, _sn(l2), old_hole, _sn(c), corrected, _sn(r), resolved,
                 _sn(m), from_group, to_group, _sn(d),
                 _non_gnss(d)[-1].uuid if d else None, _sn(x))


def _days(anchor_s: int, first_days_ago: int, last_days_ago: int) -> Span:
    return anchor_s - first_days_ago * DAY_S, anchor_s - last_days_ago * DAY_S


def _sn(d: Device | None) -> str | None:
    return d.serial if d else None


def _non_gnss(d: Device) -> list[Sensor]:
    return sorted((s for s in d.sensors if not s.is_gnss), key=lambda s: s.index)


def _has_gnss(d: Device) -> bool:
    return any(s.is_gnss for s in d.sensors)


def _transmits_over(d: Device, span: Span) -> bool:
    return (d.kind == "physical" and d.site is not None and d.stopped_s is None
            and d.sampling_s is not None and d.installed_s <= span[0]
            and not series.outages(d, *span))


def _steady(d: Device, span: Span) -> bool:
    return _transmits_over(d, span) and not _has_gnss(d) and bool(_non_gnss(d))


def _faulty(d: Device) -> bool:
    return any(p.fault_rate >= FAULTY_RATE for s in d.sensors for p in s.params)


def _derived(d: Device) -> bool:
    return any(p.source_type == "derived" for s in d.sensors for p in s.params)


def _can_lose_a_sensor(d: Device) -> bool:
    sensors = _non_gnss(d)
    return (len(sensors) >= 2 and all(s.is_active for s in d.sensors)
            and not any(s.deleted for s in sensors[:-1]))


def _steady_rover(d: Device, span: Span) -> bool:
    return (d.role.gnss_scenario not in (None, "base", "outliers")
            and _transmits_over(d, span))


def _site_group(world: World, site_index: int) -> Group | None:
    # world._make_groups names each site's group so
    return world.group_by_uuid.get(uuid4_from(world.seed, "group", "site", site_index))


def _next_site_of_org(world: World, d: Device):
    same_org = [s for s in world.sites if s.org_uuid == d.site.org_uuid]
    if len(same_org) < 2:
        return None
    return same_org[(same_org.index(d.site) + 1) % len(same_org)]


def _movable(world: World, d: Device) -> bool:
    return (d.kind == "physical" and d.site is not None and not _has_gnss(d)
            and _next_site_of_org(world, d) is not None
            and _site_group(world, d.site.index) is not None
            and _site_group(world, _next_site_of_org(world, d).index) is not None)


def _removable(world: World, d: Device, move_groups: set[str | None]) -> bool:
    """Whether every group holding ``d`` keeps a member once it is gone (a group left empty
    would vanish from the listing too: a seventh change) and none is a group M leaves or
    joins (so each group's membership changes by one change at most)."""
    groups = [g for g in world.groups if d.serial in g.device_serials]
    return all(set(g.device_serials) - {d.serial} and g.uuid not in move_groups
               for g in groups)


def _move(world: World, d: Device) -> tuple[str, str]:
    return (_site_group(world, d.site.index).uuid,
            _site_group(world, _next_site_of_org(world, d).index).uuid)


# ----------------------------------------------------------------------------- metadata

def as_of(world: World, contract: Contract, started_s: int) -> World:
    """The world as the server shows it from its start: with the group move, the sensor
    deletion and the device removal when it starts at or after the change time, else
    ``world`` itself.  The removed device leaves every list and index, so no route names or
    serves it; it stays in ``World.removed`` for the picks."""
    if started_s < change_s(world.anchor_s, contract):
        return world
    p = picks(world)
    devices = [_with_deleted_sensor(d, p.deleted_sensor_uuid) if d.serial == p.deleted_serial
               else d for d in world.devices]
    kept = [d for d in devices if d.serial != p.removed_serial]
    groups = [_without(_moved(world, g, p), p.removed_serial) for g in world.groups]
    return World(world.seed, world.origin_s, world.anchor_s, world.orgs, world.sites,
                 kept, groups, removed=[d for d in devices if d.serial == p.removed_serial])


def _with_deleted_sensor(d: Device, sensor_uuid: str) -> Device:
    sensors = tuple(dataclasses.replace(s, deleted=True) if s.uuid == sensor_uuid else s
                    for s in d.sensors)
    return dataclasses.replace(d, sensors=sensors)


def _without(g: Group, serial: str | None) -> Group:
    if serial not in g.device_serials:
        return g
    return dataclasses.replace(g, device_serials=tuple(sn for sn in g.device_serials
                                                       if sn != serial))


def _moved(world: World, g: Group, p: Picks) -> Group:
    if p.moved_serial is None or g.uuid not in (p.moved_from_group, p.moved_to_group):
        return g
    members = set(g.device_serials) - {p.moved_serial}
    if g.uuid == p.moved_to_group:
        members.add(p.moved_serial)
    in_world_order = tuple(d.serial for d in world.devices if d.serial in members)
    return dataclasses.replace(g, device_serials=in_world_order)


# ----------------------------------------------------------------------------- data

class Changes:
    """The data changes of one server, applied per request by the request's clock."""

    def __init__(self, world: World, contract: Contract):
        self.world = world
        self.picks = picks(world)
        self.change_s = change_s(world.anchor_s, contract)
        p = self.picks
        self._holes = {sn: span for sn, span in ((p.late_serial, p.late_span),
                                                 (p.old_hole_serial, p.old_hole_span)) if sn}

    def sample_times(self, d: Device, t: np.ndarray, now_s: int) -> np.ndarray:
        """``t`` without the hole of a device whose buffer is not uploaded yet at ``now_s``."""
        span = self._holes.get(d.serial)
        if span is None or now_s >= self.change_s:
            return t
        return t[~_inside(t, span)]

    def correct(self, d: Device, s: Sensor, t: np.ndarray, memo: dict, now_s: int) -> None:
        """Put the corrected raw values of C's sensor ``s`` at ``t`` in ``memo`` (keyed by
        parameter UUID, as ``series.values`` reads it), so its derived ones follow them."""
        if d.serial != self.picks.corrected_serial or s.is_gnss or now_s < self.change_s:
            return
        shift = CORRECTION * _inside(t, self.picks.corrected_span)
        for p in s.params:
            if p.source_type == "raw" and p.uuid not in memo:
                memo[p.uuid] = series.raw_values(self.world, d, s, p, t) + shift

    def epochs(self, d: Device, ep: Epochs, now_s: int) -> Epochs:
        """R's epochs as re-solved with final orbits, once ``now_s`` is past the change."""
        if d.serial != self.picks.rover_serial or now_s < self.change_s:
            return ep
        inside = _inside(ep.t, self.picks.resolved_span)
        up = HEIGHT_CHANGE_M * inside
        cols = dict(ep.cols)
        for name in ("eh", "oh", "dU"):
            cols[name] = ep.cols[name] + up
        e, n, u = cols["dE"], cols["dN"], cols["dU"]
        cols["d3d"] = np.where(inside, np.sqrt(e * e + n * n + u * u), ep.cols["d3d"])
        proj = {pid: (e, n, h + up) for pid, (e, n, h) in ep.proj.items()}
        return dataclasses.replace(ep, cols=cols, proj=proj)


def _inside(t: np.ndarray, span: Span) -> np.ndarray:
    return (t >= span[0]) & (t <= span[1])
