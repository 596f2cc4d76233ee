"""The read API of spec section 4: one function per endpoint, over the world and the clock.

Each endpoint takes parsed input and the caller's ``Access`` and returns a JSON-ready object,
or raises ``ApiError``.  HTTP itself (sockets, auth headers, rate limits, faults) is
``http.py``'s business.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from devmon_sync import api_contract as contract
from devmon_sync.api_contract import DEVICE_GROUPS_QUERY as GQ
from devmon_sync.api_contract import DEVICES_QUERY as DQ
from devmon_sync.server import contracts, encode, gnss, past, series, views
from devmon_sync.server.clock import DAY_S
from devmon_sync.server.contracts import Contract, paged
from devmon_sync.server.requests_in import (
    ApiError,
    Body,
    Query,
    bad_request,
    check_uuid,
)
from devmon_sync.server.world import Device, Parameter, Sensor, World


@dataclass(frozen=True)
class Access:
    """What one API key may see: every site (``sites is None``) or only the named ones."""

    sites: frozenset[str] | None = None

    def device(self, d: Device) -> bool:
        return self.sites is None or (d.site is not None and d.site.uuid in self.sites)

    def site(self, uuid: str) -> bool:
        return self.sites is None or uuid in self.sites


class ReadApi:
    def __init__(self, world: World, limits: contract.ResponseLimits,
                 realised: Contract | None = None):
        self.world = world
        self.limits = limits
        self.realised = realised or Contract()  # how the unshown points are realised
        # a world that changes its past (changing-past); honest servers skip it entirely
        self.past = past.Changes(world, self.realised) if self.realised.past_changes_h \
            else None
        # GET /devices answers so far: an order that moves moves with each (order_shift)
        self._device_lists = itertools.count()

    # ------------------------------------------------------------------ GET endpoints

    def sites(self, params: dict, access: Access, now_s: int) -> dict:
        q = Query(params, {"uuids", "includeDevices", "includeSensors"},
                  self.limits.max_selector_items)
        wanted = q.uuids("uuids")  # lower-cased
        with_devices, with_sensors = q.flag("includeDevices"), q.flag("includeSensors")
        items = []
        for site in self.world.sites:
            if not access.site(site.uuid) or (wanted is not None and site.uuid not in wanted):
                continue
            devices = None
            if with_devices:
                devices = [views.device_view(self.world, d, now_s, sensors=with_sensors)
                           for d in self.world.devices if d.site is site]
            items.append(views.site_view(site, devices))
        return {"items": items}

    def devices(self, params: dict, access: Access, now_s: int) -> dict:
        paging = self.realised.query_names
        allowed, as_false = self.realised.option_names(
            (set(DQ.values()) - {DQ["limit"], DQ["offset"]}) | paging
            if self.realised.paging != "offset" else set(DQ.values()))
        q = Query(params, allowed, self.limits.max_selector_items,
                  ignored={DQ["limit"], DQ["offset"]} - paging, read_as_false=as_false)
        kind = q.one(DQ["device_kind"])
        if kind is not None and kind != "physical":
            raise bad_request(f"Query parameter {DQ['device_kind']!r} accepts only 'physical', "
                              f"not {kind!r}.")
        group = q.one(DQ["group_uuid"])
        site = q.one(DQ["site_uuid"])
        if group is not None:
            check_uuid(group, f"query parameter {DQ['group_uuid']!r}")
        if site is not None:
            check_uuid(site, f"query parameter {DQ['site_uuid']!r}")
        serials = q.strings(DQ["serial_numbers"])
        options = dict(sensors=q.flag(DQ["include_sensors"]),
                       include_inactive=q.flag(DQ["include_inactive_sensors"]),
                       formulas=q.flag(DQ["include_formulas"]),
                       internal=q.flag(DQ["include_internal"]))
        members = self._group_members(group.lower()) if group else None
        chosen = [d for d in sorted(self.world.devices, key=lambda d: d.serial)
                  if access.device(d)
                  and (kind is None or d.kind == kind)
                  and (members is None or d.serial in members)
                  and (site is None or (d.site is not None and d.site.uuid == site.lower()))
                  and (serials is None or d.serial in serials)]
        return paged(self.realised, q, chosen,
                     lambda page: [views.device_view(self.world, d, now_s, **options)
                                   for d in page], turn=next(self._device_lists))

    def _group_members(self, uuid: str) -> set[str]:
        """Serial numbers of a group and all the groups nested in it."""
        group = self.world.group_by_uuid.get(uuid)
        if group is None:
            return set()
        out = set(group.device_serials)
        for child in group.children:
            out |= self._group_members(child)
        return out

    def device(self, sn: str, params: dict, access: Access, now_s: int) -> dict:
        Query(params, set(), self.limits.max_selector_items)
        d = self.world.device_by_serial.get(sn)
        if d is None:
            raise ApiError(404, f"No device with serial number {sn!r}.")
        if not access.device(d):
            raise ApiError(403, f"This API key has no access to device {sn!r}.")
        return {"items": [views.device_view(self.world, d, now_s, sensors=True,
                                            include_inactive=True, formulas=True, derived=True)]}

    def device_groups(self, params: dict, access: Access, now_s: int) -> dict:
        allowed, as_false = self.realised.option_names(set(GQ.values()))
        q = Query(params, allowed, self.limits.max_selector_items, read_as_false=as_false)
        wanted = q.uuids(GQ["uuids"])
        sensors, devices = q.flag(GQ["include_sensors"]), q.flag(GQ["include_devices"])
        ungrouped = q.flag(GQ["include_ungrouped"])
        visible = access.device
        if wanted is None:
            roots = [g for g in self.world.groups if g.parent_uuid == ""]
        else:
            roots = [self.world.group_by_uuid[u] for u in wanted if u in self.world.group_by_uuid]
        grouped = [views.group_view(self.world, g, now_s, visible, devices=devices,
                                    sensors=sensors)
                   for g in roots if views.group_visible(self.world, g, visible)]
        loose = []
        if ungrouped:
            in_groups = {sn for g in self.world.groups for sn in g.device_serials}
            loose = [views.device_view(self.world, d, now_s, sensors=sensors,
                                       include_inactive=sensors, formulas=sensors,
                                       derived=sensors)  # as the grouped devices
                     for d in self.world.devices if visible(d) and d.serial not in in_groups]
        return {"grouped": grouped, "ungrouped": loose}

    def device_group(self, uuid: str, params: dict, access: Access, now_s: int) -> dict:
        Query(params, set(), self.limits.max_selector_items)
        check_uuid(uuid, "the device group UUID in the path")
        group = self.world.group_by_uuid.get(uuid.lower())
        if group is None:
            raise ApiError(404, f"No device group with UUID {uuid}.")
        if not views.group_visible(self.world, group, access.device):
            raise ApiError(403, f"This API key has no access to device group {uuid}.")
        return views.group_view(self.world, group, now_s, access.device, devices=True,
                                sensors=True)

    def sensor(self, uuid: str, params: dict, access: Access, now_s: int) -> dict:
        Query(params, set(), self.limits.max_selector_items)
        check_uuid(uuid, "the sensor UUID in the path")
        found = self.world.sensor_by_uuid.get(uuid.lower())
        if found is None or found[1].deleted:
            raise ApiError(404, f"No sensor with UUID {uuid}.")
        d, s = found
        if not access.device(d):
            raise ApiError(403, f"This API key has no access to sensor {uuid}.")
        return views.sensor_view(self.world, d, s, True, now_s)

    # ------------------------------------------------------------------ selectors

    def _resolve(self, b: Body, access: Access, include_deleted: bool,
                 legacy: bool) -> list[tuple[Device, Sensor, Parameter]]:
        """The union of every selector of a sensor-data body, in a stable order."""
        w = self.world
        chosen: dict[str, tuple[Device, Sensor, Parameter]] = {}
        forbidden: list[str] = []

        def take(d: Device, s: Sensor, p: Parameter, what: str) -> None:
            if s.deleted and not include_deleted:
                return
            if not access.device(d):
                forbidden.append(what)
            else:
                chosen[p.uuid] = (d, s, p)

        for u in b.array("parameterUuids", "uuid") or ():
            if u in w.param_by_uuid:
                take(*w.param_by_uuid[u], f"parameter {u}")
        devices = [w.device_by_serial[sn] for sn in b.array("deviceSerialNumbers", "string") or ()
                   if sn in w.device_by_serial]
        if legacy:
            ids = set(b.array("legacyDeviceIds", "int") or ())
            devices += [d for d in w.devices if d.legacy_id is not None and d.legacy_id in ids]
        for d in devices:
            for s in d.sensors:
                for p in s.params:
                    take(d, s, p, f"device {d.serial}")
        for u in b.array("sensorUuids", "uuid") or ():
            if u in w.sensor_by_uuid:
                d, s = w.sensor_by_uuid[u]
                for p in s.params:
                    take(d, s, p, f"sensor {u}")
        for sn, sensor_name, param_name in b.array("parameterPaths", "path") or ():
            d = w.device_by_serial.get(sn)
            for s in d.sensors if d else ():
                for p in s.params:
                    if s.name == sensor_name and p.name == param_name:
                        take(d, s, p, f"parameter path {sn}/{sensor_name}/{param_name}")
        if forbidden:
            raise ApiError(403, f"This API key has no access to {forbidden[0]}"
                                + (f" (and {len(forbidden) - 1} more)" if len(forbidden) > 1
                                   else "") + ".")
        return sorted(chosen.values(), key=lambda x: (x[0].serial, x[1].index, x[2].read_index))

    def _window(self, b: Body, now_s: int, require_z: bool) -> tuple[int, int]:
        start = b.timestamp("startDate", require_z)
        end = b.timestamp("endDate", require_z)
        if start is not None and end is not None and start > end:
            raise bad_request("startDate is after endDate: swap them or widen the range.")
        service_now_s = now_s + self.realised.clock_offset_s  # its own clock, not the world's
        if self.realised.refuse_future_start and start is not None and start > service_now_s:
            raise self.realised.start_in_future(service_now_s)
        end_s = now_s if end is None else math.floor(end)
        start_s = end_s - int(self.limits.default_range_days * DAY_S) if start is None \
            else math.ceil(start)  # whole seconds inside: [ceil(start), floor(end)]
        span_days = (end_s - start_s) / DAY_S
        if span_days > self.limits.max_range_days:
            raise self.realised.range_too_long(span_days, self.limits.max_range_days)
        return start_s, end_s

    # ------------------------------------------------------------------ POST endpoints

    def _aggregation_asked(self, body: dict) -> tuple[int | None, str | None]:
        """The aggregation a body asks, as this service realises it (``Contract``)."""
        if "aggregation" in body and self.realised.aggregation == "refused":
            raise bad_request("Unknown field 'aggregation' in the request body.")
        if self.realised.aggregation == "ignored":
            return None, None
        return _aggregation(body.get("aggregation"))

    def sensor_data(self, body: object, access: Access, now_s: int) -> dict:
        b = Body(body, {"parameterUuids", "deviceSerialNumbers", "sensorUuids", "parameterPaths",
                        "startDate", "endDate", "orderBy", "aggregation", "disableRounding"},
                 self.limits.max_selector_items, "POST /sensor-data")
        if not any(b.body.get(k) for k in ("parameterUuids", "deviceSerialNumbers",
                                           "sensorUuids", "parameterPaths")):
            raise bad_request("Give at least one of parameterUuids, deviceSerialNumbers, "
                              "sensorUuids or parameterPaths.")
        start_s, end_s = self._window(b, now_s, require_z=True)
        order, raw = b.order(), b.boolean("disableRounding")
        bucket_s, function = self._aggregation_asked(b.body)
        chosen = self._resolve(b, access, include_deleted=False, legacy=False)
        self._check_points(chosen, start_s, end_s, now_s, bucket_s)
        batch = _Batch(self.world, start_s, end_s, now_s, self.past)
        items = []
        for d, s, p in chosen:
            t, v = batch.series(d, s, p)
            if bucket_s:
                t, v = aggregate(t, v, bucket_s, function)
            if not raw:
                v = np.round(v, p.precision)
            if order == "desc":
                t, v = t[::-1], v[::-1]
            stamps = batch.stamps((d.serial, s.uuid, bucket_s, order), t)
            items.append(views.series_item(d, s, p, encode.points(stamps, v), latest=False))
        return {"items": items}

    def _check_points(self, chosen, start_s, end_s, now_s, bucket_s) -> None:
        total = 0
        for d, s, _ in chosen:
            until = series.data_until_s(d, s, now_s)
            if until is None:
                continue
            lo, hi = max(start_s, s.active_from_s, d.installed_s), min(end_s, until)
            if hi >= lo:
                n = (hi - lo) // (d.sampling_s or DAY_S) + 1
                total += min(n, (hi - lo) // bucket_s + 2) if bucket_s else n
        if total > self.limits.max_points:
            raise self.realised.too_many_points(total, self.limits.max_points)


    def latest(self, body: object, access: Access, now_s: int) -> dict:
        b = Body(body, {"parameterUuids", "deviceSerialNumbers", "legacyDeviceIds",
                        "sensorUuids", "parameterPaths", "includeDeleted"},
                 self.limits.max_selector_items, "POST /sensor-data/latest")
        deleted = b.boolean("includeDeleted")
        selected = any(b.body.get(k) is not None for k in (
            "parameterUuids", "deviceSerialNumbers", "legacyDeviceIds", "sensorUuids",
            "parameterPaths"))
        if selected:
            chosen = self._resolve(b, access, include_deleted=deleted, legacy=True)
        else:
            chosen = [(d, s, p) for d in sorted(self.world.devices, key=lambda d: d.serial)
                      if access.device(d) for s in d.sensors if deleted or not s.deleted
                      for p in s.params]
        items, batches = [], {}
        for d, s, p in contracts.latest_chosen(self.realised, chosen, selected):
            t, v = self._newest(d, s, p, now_s, batches)
            data = encode.points(encode.timestamp_tokens(t), np.round(v, p.precision))
            items.append(views.series_item(d, s, p, data, latest=True))
        return {"items": items}

    def _newest(self, d, s, p, now_s, batches: dict) -> tuple[np.ndarray, np.ndarray]:
        """The parameter's newest point: look back two days, then further if need be.
        ``batches``: the request's batches by window, so that a sensor's times (a rover's
        epochs) are made once for all its parameters, not once each."""
        until = series.data_until_s(d, s, now_s)
        if until is None:
            return np.empty(0, np.int64), np.empty(0)
        for back_days in (2, 40, 10**5):
            lo = max(until - back_days * DAY_S, d.installed_s)
            if (lo, until) not in batches:
                batches[(lo, until)] = _Batch(self.world, lo, until, now_s, self.past)
            t, v = batches[(lo, until)].series(d, s, p)
            if t.size:
                return t[-1:], v[-1:]
            if lo == d.installed_s:
                break
        return np.empty(0, np.int64), np.empty(0)

    def gnss(self, body: object, access: Access, now_s: int) -> dict:
        b = Body(body, {"deviceSerialNumbers", "legacyDeviceIds", "startDate", "endDate",
                        "orderBy", "includeDeleted"}, self.limits.max_selector_items,
                 "POST /sensor-data/gnss")
        start_s, end_s = self._window(b, now_s, require_z=False)
        order, deleted = b.order(), b.boolean("includeDeleted")
        devices = self._gnss_devices(b, access)
        expected = sum(((min(end_s, now_s) - max(start_s, d.installed_s)) // d.sampling_s + 1)
                       for d in devices if min(end_s, now_s) >= max(start_s, d.installed_s))
        if expected > self.limits.max_epochs:
            raise self.realised.too_many_epochs(expected, self.limits.max_epochs)
        items = []
        for d in devices:
            sensor = next(s for s in d.sensors if s.is_gnss)
            ep = gnss.epochs(self.world, d, start_s, end_s, now_s, include_deleted=deleted)
            if self.past is not None:
                ep = self.past.epochs(d, ep, now_s)
            head = views.gnss_item_head(d, sensor, set(np.unique(ep.bs).tolist()))
            head["data"] = encode.epochs(ep, order == "desc")
            items.append(head)
        return {"items": items}

    def _gnss_devices(self, b: Body, access: Access) -> list[Device]:
        serials = b.array("deviceSerialNumbers", "string")
        ids = b.array("legacyDeviceIds", "int")
        w = self.world
        if serials is None and ids is None:
            return [d for d in sorted(w.devices, key=lambda d: d.serial)
                    if access.device(d) and _has_gnss(d)]
        named = [w.device_by_serial[sn] for sn in serials or () if sn in w.device_by_serial]
        named += [d for d in w.devices if ids and d.legacy_id in set(ids)]
        denied = [d.serial for d in named if not access.device(d)]
        if denied:
            raise ApiError(403, f"This API key has no access to device {denied[0]}.")
        unique = {d.serial: d for d in named if _has_gnss(d)}
        return [unique[sn] for sn in sorted(unique)]


class _Batch:
    """What one request computes once and shares: each sensor's sample times, each device's
    epochs, each raw parameter's values (derived ones reuse them) and timestamp text."""

    def __init__(self, world: World, start_s: int, end_s: int, now_s: int,
                 changes: past.Changes | None = None):
        self.world, self.start_s, self.end_s, self.now_s = world, start_s, end_s, now_s
        self.changes = changes  # the changing past, None for an honest server
        self._times: dict[str, np.ndarray] = {}
        self._epochs: dict[str, gnss.Epochs] = {}
        self._values: dict[str, dict] = {}
        self._stamps: dict[tuple, list[bytes]] = {}

    def series(self, d: Device, s: Sensor, p: Parameter) -> tuple[np.ndarray, np.ndarray]:
        if s.is_gnss:
            if d.serial not in self._epochs:
                ep = gnss.epochs(self.world, d, self.start_s, self.end_s, self.now_s)
                self._epochs[d.serial] = ep if self.changes is None else \
                    self.changes.epochs(d, ep, self.now_s)
            ep = self._epochs[d.serial]
            return ep.t, ep.cols[p.args["field"]]
        if s.uuid not in self._times:
            t = series.sample_times(d, s, self.start_s, self.end_s, self.now_s)
            self._times[s.uuid] = t if self.changes is None else \
                self.changes.sample_times(d, t, self.now_s)
        t = self._times[s.uuid]
        memo = self._values.setdefault(s.uuid, {})
        if self.changes is not None:
            self.changes.correct(d, s, t, memo, self.now_s)
        return t, series.values(self.world, d, s, p, t, memo)

    def stamps(self, key: tuple, t: np.ndarray) -> list[bytes]:
        """Timestamp tokens of ``t``, shared by every series with the same ``key``."""
        if key not in self._stamps:
            self._stamps[key] = encode.timestamp_tokens(t)
        return self._stamps[key]


def _has_gnss(d: Device) -> bool:
    return any(s.is_gnss for s in d.sensors)


def _aggregation(value: object) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    intervals = ", ".join(contract.AGGREGATION_INTERVALS_S)
    functions = ", ".join(contract.AGGREGATION_FUNCTIONS)
    if not isinstance(value, dict) or set(value) != {"interval", "function"}:
        raise bad_request(f"Field 'aggregation' must be an object {{interval, function}}, "
                          f"interval one of {intervals}, function one of {functions}.")
    if not isinstance(value["interval"], str) or \
            value["interval"] not in contract.AGGREGATION_INTERVALS_S:
        raise bad_request(f"Unknown aggregation interval {value['interval']!r}; use one of "
                          f"{intervals}.")
    if not isinstance(value["function"], str) or \
            value["function"] not in contract.AGGREGATION_FUNCTIONS:
        raise bad_request(f"Unknown aggregation function {value['function']!r}; use one of "
                          f"{functions}.")
    return contract.AGGREGATION_INTERVALS_S[value["interval"]], value["function"]


def aggregate(t: np.ndarray, v: np.ndarray, bucket_s: int,
              function: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-bucket aggregate of a series (buckets aligned to the Unix epoch; nulls ignored,
    a bucket of only nulls gives null, ``count`` counts non-null points)."""
    if t.size == 0:
        return t, v
    bucket = t // bucket_s
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    valid = ~np.isnan(v)
    count = np.add.reduceat(valid.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        if function == "avg":
            out = np.add.reduceat(np.where(valid, v, 0.0), starts) / count
        elif function == "sum":
            out = np.where(count > 0, np.add.reduceat(np.where(valid, v, 0.0), starts), np.nan)
        elif function == "min":
            out = np.fmin.reduceat(v, starts)
        elif function == "max":
            out = np.fmax.reduceat(v, starts)
        elif function == "count":
            out = count.astype(np.float64)
        elif function == "first":
            out = v[starts]
        else:
            out = v[np.r_[starts[1:], v.size] - 1]
    return bucket[starts] * bucket_s, out
