"""``devmon probe``: measure how a service realises what the spec leaves unshown.

Before a first sync of hours, a user wants to know whether devmon and this service agree:
where the API answers, how it pages, what it refuses or silently cuts, which options it
honours.  The probe asks at most 15 requests (and one more for each option the service
refuses as unknown: a refusal names one), each chosen to answer one question (a data
request sized to exceed devmon's default cap, a range twice devmon's default longest), and
returns findings: what the spec says, what this service does, what devmon will do.  Some
findings cost no request (numbers written as strings are seen in the answers already read);
a record whose numbers come as strings is read with the mirror's own rule, so it never stops
the probe.  What it learned is what a sync would learn on its first run, so it goes into
the same stored service profile.  No SQL here (the CLI stores the profile), HTTP only
through the client.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from devmon_sync import service_profile as assumed
from devmon_sync import timestamps
from devmon_sync.client import (
    ApiClient,
    ApiError,
    AuthError,
    ForbiddenError,
    NotFoundError,
    RequestTooLargeError,
)
from devmon_sync.client.paging import link_next, paging_style
from devmon_sync.service_profile import ServiceProfile
from devmon_sync.store.answers.quarantine import read_number
from devmon_sync.sync.metadata_check import (
    groups_without_devices,
    listed_serials,
    named_elsewhere,
    unknown_owners,
    without_formulas,
    without_internal,
)

DQ = assumed.DEVICES_QUERY
OVERSHOOT = 1.25
"""A cap probe asks for this much more than devmon's default, so a cap at the default shows."""
UNDERSHOOT = 0.95
"""After a refusal stating a limit, the cap probe asks again for this share of it."""
CAP_TOPIC = {"readings": "largest reading answer", "gnss": "largest GNSS answer"}
UNIT = {"readings": "points", "gnss": "epochs"}
CUT_SHARE = 0.8
"""An answer holding less than this share of the points the periods predict looks cut."""
DEVICE_NUMBERS = (("location", "lat"), ("location", "lon"), ("samplingPeriodSeconds",),
                  ("txPeriodSeconds",), ("legacyDeviceId",), ("health", "battery", "voltage"),
                  ("health", "battery", "percentage"), ("gnss", "arpHeight"),
                  ("gnss", "azimuth"), ("gnss", "baseStation", "id"))
"""Where a device record holds a number the mirror reads (sensors and parameters below)."""
SENSOR_NUMBERS, PARAMETER_NUMBERS = ("channelIndex",), ("displayPrecision", "readIndex")
NAMES_SHOWN = 4
"""The most fields of records a finding names (besides those of data points)."""


@dataclass(frozen=True)
class Finding:
    """One row of the probe's table."""

    topic: str
    spec: str
    service: str
    devmon: str
    blocking: bool = False
    """True when this stops an exact sync (the command then exits non-zero)."""


@dataclass
class ProbeResult:
    findings: list[Finding] = field(default_factory=list)
    requests: int = 0
    profile: ServiceProfile | None = None

    @property
    def blocked(self) -> bool:
        return any(f.blocking for f in self.findings)


class _Stop(Exception):
    """Nothing more can be measured (the key or the address does not work)."""


class Probe:
    """Measures one service; ``run`` returns the findings and the profile learned."""

    def __init__(self, client: ApiClient, profile: ServiceProfile,
                 limits: assumed.ResponseLimits = assumed.DEFAULT_LIMITS):
        self.client = client
        self.profile = profile
        self.limits = limits
        self.result = ProbeResult()
        self.devices: list[dict] = []
        self.string_points: dict[str, str] = {}
        """Fields of data points seen holding a number written as a string, each with one
        such value (the records' fields are looked at last, all at once)."""
        self.end = datetime.now(timezone.utc).replace(microsecond=0)
        """End of the data windows asked: the newest point /latest reports (else now)."""

    def run(self) -> ProbeResult:
        try:
            sites = self._address_and_key()
            self._lists(sites)
            latest = self.client.latest({})
            self.end = _newest(latest) or self.end
            self._inactive_sensors(latest)
            self._latest_coverage(latest)
            self._uuid_case(latest)
            self._timestamps(latest)
            self._see_strings_in_points(latest, "reading value", ("value",))
            self._range_limit()  # first: the caps are then asked within the longest range
            self._reading_cap()
            self._epoch_cap()
            self._numbers_as_strings()
            self._history_before_created()
        except _Stop:
            pass
        self._rate_limit()
        self.result.requests = self.client.requests_sent
        self.result.profile = dataclasses.replace(
            self.profile, lists=self.client.list_paging, api_url=self.client.base_url
            if self.client.located else self.profile.api_url)
        return self.result

    def _add(self, *args, **kw) -> None:
        self.result.findings.append(Finding(*args, **kw))

    # -- address and key

    def _address_and_key(self) -> list[dict]:
        spec = "base address ends in /v1 (some descriptions give no prefix)"
        try:
            sites = self.client.sites(include_devices=True)
        except AuthError as err:
            self._add("API address", spec, f"answers at {self.client.base_url}", "-")
            self._add("authentication", "x-api-key header; 401 if not accepted",
                      f"key refused: {err.server_message!r}", "cannot sync: give a valid key "
                      "(--api-key, DEVMON_API_KEY or `devmon login`)", blocking=True)
            raise _Stop() from None
        except NotFoundError:
            self._add("API address", spec, f"no API at {self.client.base_given} nor with /v1 "
                      "added or taken off", "cannot sync: give the API's address",
                      blocking=True)
            raise _Stop() from None
        moved = self.client.base_url != self.client.base_given
        self._add("API address", spec, f"answers at {self.client.base_url}",
                  f"uses {self.client.base_url}" + (" (not the address given)" if moved else ""))
        self._add("authentication", "x-api-key header; 401 if not accepted", "key accepted",
                  f"sends the key to {self.client.base_url} only")
        return sites

    # -- lists and options

    def _lists(self, sites: list[dict]) -> None:
        try:
            self.devices = self.client.devices()
        except ApiError as err:
            self._add("paging of GET /devices", "paginated; parameters not shown",
                      f"cannot be read to its end: {err.server_message or err}",
                      "cannot sync", blocking=True)
            raise _Stop() from None
        groups = self.client.device_groups(include_devices=True, include_ungrouped=True)
        paging = self.client.list_paging
        if self._ignores_page_size():
            paging = dataclasses.replace(paging, style="none")
        how = {"offset": "limit/offset", "page": "page/pageSize with a total",
               "cursor": "a cursor token", "none": "no paging: all at once",
               None: "not seen"}[paging.style]
        if paging.page_cap:
            how += f"; at most {paging.page_cap} a page whatever is asked"
        self._add("paging of GET /devices", "paginated; parameters not shown", how,
                  "follows it; stops on a page that brings nothing new")
        listed, elsewhere = listed_serials(self.devices), named_elsewhere(sites, groups)
        missing = elsewhere - listed
        self._add("device count", "lists hold what the key may access",
                  f"{len(listed)} devices listed" + (
                      f"; sites and groups name {len(missing)} more" if missing else
                      "; sites and groups agree"),
                  "reads the missing ones one by one (GET /devices/{sn})" if missing else
                  "mirrors them all")
        self._options(groups)

    def _ignores_page_size(self) -> bool:
        """One page of one device, asked the way devmon asks first: more than one back means
        the service ignores the page size (a list of devmon's usual page would not show it)."""
        try:
            answer = self.client.get("/devices", {DQ["limit"]: 1, DQ["offset"]: 0})
        except ApiError:
            return False
        items = answer.get("items") if isinstance(answer, dict) else None
        link = link_next(self.client.last_headers().get("Link"))
        return isinstance(items, list) and paging_style(answer, len(items), 1, link) == "none"

    def _options(self, groups: dict) -> None:
        spec = "option named by purpose only"
        formulas = without_formulas(self.devices)
        self._option(DQ["include_formulas"], spec, bool(formulas),
                     f"{len(formulas)} devices give derived parameters without formulas")
        self._option(DQ["include_internal"], spec, without_internal(self.devices),
                     "no device carries _internal", fallback="not mirrored (warned)")
        self._option(assumed.DEVICE_GROUPS_QUERY["include_devices"], spec,
                     groups_without_devices(groups), "groups come without their devices",
                     path="/device-groups",
                     fallback="reads each top-level group (GET /device-groups/{uuid})")

    def _option(self, name: str, spec: str, ignored: bool, sign: str, path: str = "/devices",
                fallback: str = "reads those devices one by one (GET /devices/{sn})") -> None:
        if self.client.refused(path, name):
            self._add(f"{path} {name}", spec, "refused as unknown (HTTP 400)",
                      f"asks without it; {fallback}")
        elif ignored:
            self._add(f"{path} {name}", spec, f"ignored: {sign}", fallback)
        else:
            self._add(f"{path} {name}", spec, "honoured", "uses it")

    def _inactive_sensors(self, latest: list[dict]) -> None:
        name = DQ["include_inactive_sensors"]
        known = {p["uuid"].lower() for d in self.devices for s in d.get("sensors") or ()
                 for p in s.get("parameters") or () if isinstance(p.get("uuid"), str)}
        owners = unknown_owners(latest, known)
        listed_inactive = any(s.get("isActive") is False for d in self.devices
                              for s in d.get("sensors") or ())
        spec = "option named by purpose only (archived data of inactive sensors)"
        fallback = "reads the devices whose sensors are missing (GET /devices/{sn})"
        if self.client.refused("/devices", name):
            self._add(f"/devices {name}", spec, "refused as unknown (HTTP 400)",
                      "reads every device one by one (GET /devices/{sn})")
        elif owners:
            self._add(f"/devices {name}", spec, f"ignored: /sensor-data/latest names sensors "
                      f"of {len(owners)} devices the list left out", fallback)
        elif listed_inactive:
            self._add(f"/devices {name}", spec, "honoured (inactive sensors listed)", "uses it")
        else:
            self._add(f"/devices {name}", spec, "no inactive sensor seen (cannot tell)",
                      f"uses it; {fallback} if /latest shows any")

    def _latest_coverage(self, latest: list[dict]) -> None:
        """Does /latest name every listed stream whose device reports data?"""
        named = {item["parameterUuid"].lower() for item in latest
                 if isinstance(item, dict) and isinstance(item.get("parameterUuid"), str)}
        with_data = [p["uuid"].lower() for d in self.devices
                     if (d.get("health") or {}).get("sensors", {}).get("lastDataTimestamp")
                     for s in d.get("sensors") or () for p in s.get("parameters") or ()
                     if isinstance(p.get("uuid"), str)]
        left_out = [u for u in with_data if u not in named]
        spec = "the newest point of each parameter; the body 'may be' empty"
        if not with_data:
            self._add("/sensor-data/latest", spec, "no device reports data (cannot tell)",
                      "fetches every listed stream up to its device's last data")
        elif left_out:
            self._add("/sensor-data/latest", spec, f"leaves out {len(left_out)} of "
                      f"{len(with_data)} parameters of devices that report data",
                      "fetches every listed stream anyway, up to its device's last data")
        else:
            self._add("/sensor-data/latest", spec, f"names all {len(with_data)} parameters "
                      f"of devices that report data", "one hint among the listings")

    def _uuid_case(self, latest: list[dict]) -> None:
        upper = any(isinstance(v, str) and v != v.lower() and len(v) == 36
                    for item in latest[:50] if isinstance(item, dict)
                    for v in (item.get("parameterUuid"), item.get("sensorUuid")))
        upper |= any(isinstance(d.get("orgUuid"), str) and d["orgUuid"] != d["orgUuid"].lower()
                     for d in self.devices[:50])
        self._add("UUID case", "version-4 UUID strings",
                  "upper case" if upper else "lower case",
                  "compares UUIDs in lower case (RFC 9562: hex digits are case-insensitive)")

    def _history_before_created(self) -> None:
        """One request: the 7 days before the earliest ``createdAt`` of the parameters of
        devices that report data (up to 20 of those created then)."""
        created = sorted((p.get("createdAt"), p["uuid"]) for d in self.devices
                         if (d.get("health") or {}).get("sensors", {}).get("lastDataTimestamp")
                         for s in d.get("sensors") or () for p in s.get("parameters") or ()
                         if isinstance(p.get("createdAt"), str) and isinstance(p.get("uuid"),
                                                                              str))
        spec = "createdAt of each parameter (not when its data begins)"
        if not created:
            self._add("history before createdAt", spec, "no createdAt given (cannot tell)",
                      "searches each stream's history once, before its oldest point")
            return
        try:
            at = timestamps.parse_timestamp(created[0][0])
        except ValueError:
            return
        try:
            first = [u for t, u in created if t == created[0][0]][:20]
            items = self.client.sensor_data({"parameterUuids": first,
                                             **_window(at, 7 * 86400 - 1)})
        except RequestTooLargeError:
            items = [{"data": [None] * 2}]  # more than one answer holds: there is data
        except ApiError as err:
            self._add("history before createdAt", spec, f"could not ask ({err})",
                      "searches each stream's history once, before its oldest point")
            return
        points = sum(len(i.get("data") or ()) for i in items if isinstance(i, dict))
        self._add("history before createdAt", spec,
                  f"data in the 7 days before the earliest createdAt ({points} points seen)"
                  if points else "none in the 7 days before the earliest createdAt",
                  "searches each stream's history once, before its oldest point")

    # -- data answers

    def _timestamps(self, latest: list[dict]) -> None:
        stamp = next((p.get("timestamp") for item in latest for p in item.get("data") or ()
                      if isinstance(p, dict) and isinstance(p.get("timestamp"), str)), None)
        try:
            timestamps.parse_timestamp(stamp)
            form = f"{stamp} ({_timestamp_form(stamp)})"
            todo = "reads it as UTC"
        except (ValueError, TypeError):
            form = f"{stamp!r}: not an ISO 8601 time with an offset" if stamp else "no data yet"
            todo = "quarantines points whose time cannot be read" if stamp else "-"
        self._add("timestamps", "ISO 8601, UTC, with Z", form, todo)

    def _reading_cap(self) -> None:
        series = self._fastest_parameters()
        if not series:
            self._add("largest reading answer", "not shown", "no parameters to ask", "-")
            return
        rate = sum(1.0 / period for _, period in series)  # points per second, all series
        uuids = [u for u, _ in series]
        self._cap_question("readings", self.client.sensor_data, rate,
                           lambda span_s: {"parameterUuids": uuids, **_window(self.end, span_s)})

    def _epoch_cap(self) -> None:
        gnss = [(period, d) for d in self.devices if d.get("gnss")
                for period in [_period_s(d)] if period is not None]
        if not gnss:
            self._add(CAP_TOPIC["gnss"], "not shown", "no GNSS devices to ask",
                      f"devmon plans {self.limits.max_epochs:,} epochs an answer")
            return
        gnss = sorted(gnss, key=lambda pd: pd[0])[:self.limits.max_selector_items]
        rate = sum(1.0 / period for period, _ in gnss)
        serials = [d["serialNumber"] for _, d in gnss]
        self._cap_question("gnss", self.client.gnss, rate,
                           lambda span_s: {"deviceSerialNumbers": serials,
                                           **_window(self.end, span_s)})

    def _cap_question(self, kind: str, ask, rate: float, body_for) -> None:
        """Ask for more than devmon plans an answer to hold (``rate``: points a second of all
        the series asked; ``body_for``: the request body of a window of so many seconds).
        A refusal that states a limit is asked again just under it, once: a service may
        also cut answers it does not refuse."""
        topic = CAP_TOPIC[kind]
        planned = self.limits.max_points if kind == "readings" else self.limits.max_epochs
        default = f"devmon plans {planned:,} {UNIT[kind]} an answer"
        target, refusal = OVERSHOOT * planned, None
        while True:
            span_s = min(target / rate, self._longest_span_s())
            body = body_for(span_s)
            try:
                items = ask(body)
                break
            except RequestTooLargeError as err:
                self._note_refusal(kind, err)
                said = err.too_large
                if refusal is not None or said.what != "points" or not said.limit:
                    self._add_refusal(kind, err, topic)
                    return
                refusal, target = err, UNDERSHOOT * said.limit
            except ForbiddenError as err:
                self._add(topic, "not shown", f"refused: {err.server_message}",
                          "skips what the key may not read")
                return
        got = _points(items)
        if kind == "gnss":
            self._see_strings_in_points(items, "GNSS epoch id", ("id",))
            self._see_strings_in_points(items, "GNSS epoch bs", ("bs",))
        self.profile = self.profile.saw_answer(kind, got)
        halves = self._halves(ask, body, got, int(rate * span_s))
        self._add_cap(kind, topic, got, int(rate * span_s), halves, default, refusal)

    def _longest_span_s(self) -> float:
        """A data window safely inside the longest range: devmon's default, or the one the
        range question found, so a cap question is not refused for its range instead."""
        days = self.profile.planning_limits(self.limits).max_range_days
        return 0.9 * days * 86400

    def _halves(self, ask, body: dict, got: int, expected: int) -> int | None:
        """When an answer holds fewer points than the periods predict, the points of its
        window asked in two halves (two requests): more than the whole gave proves a silent
        cap; as many shows gaps.  None when the answer was not suspect."""
        if got >= CUT_SHARE * expected:
            return None
        start = timestamps.parse_timestamp(body["startDate"])
        end = timestamps.parse_timestamp(body["endDate"])
        mid = start + (end - start) / 2
        first = {**body, "endDate": timestamps.format_timestamp(mid - timedelta(milliseconds=1))}
        second = {**body, "startDate": timestamps.format_timestamp(mid)}
        try:
            return _points(ask(first)) + _points(ask(second))
        except ApiError:
            return None

    def _add_cap(self, kind: str, topic: str, got: int, expected: int, halves: int | None,
                 default: str, refusal: RequestTooLargeError | None = None) -> None:
        unit = UNIT[kind]
        refused = "" if refusal is None else (f"refuses over {refusal.too_large.limit:,g} "
                                              f"{unit} (HTTP {refusal.status}); under that, ")
        if refusal is not None:
            default = f"plans within {refusal.too_large.limit:,g} {unit}; halves a window " \
                      f"the service refuses"
        if halves is not None and halves > got:
            self.profile = self.profile.with_kind(kind, silent_cap=got)
            self._add(topic, "not shown", f"{refused}cuts answers at {got:,} {unit} without "
                      f"an error (its two halves held {halves:,})", f"plans within {got:,} "
                      f"{unit}; proves every answer complete and fetches what a cut left out")
        elif halves is not None:
            self._add(topic, "not shown", f"{refused}all {got:,} {unit} of the window (fewer "
                      f"than the {expected:,} its sampling periods predict: gaps)", default)
        elif refusal is not None:
            self._add(topic, "not shown", f"{refused}all {got:,} {unit} asked", default)
        elif got > (self.limits.max_points if kind == "readings" else self.limits.max_epochs):
            self._add(topic, "not shown", f"all {got:,} {unit} asked (more than devmon's "
                      f"default)", default)
        else:
            self._add(topic, "not shown", f"all {got:,} {unit} asked (the data cannot fill "
                      f"more within the range limit: a cap above that is not measured)", default)

    def _range_limit(self) -> None:
        series = self._fastest_parameters()[-1:]  # the slowest of them: few points
        default = f"devmon plans ranges of {self.limits.max_range_days:g} days at most"
        if not series:
            return
        span_s = 2 * self.limits.max_range_days * 86400
        try:
            self.client.sensor_data({"parameterUuids": [series[0][0]], **_window(self.end, span_s)})
        except RequestTooLargeError as err:
            self._note_refusal("readings", err)
            self._add_refusal("readings", err, "longest date range")
            return
        self._add("longest date range", "not shown",
                  f"answers {2 * self.limits.max_range_days:g} days in one request", default)

    def _note_refusal(self, kind: str, err: RequestTooLargeError) -> None:
        said = err.too_large
        self.profile = self.profile.refused(kind, said.what, said.limit, err.status or 0,
                                            err.server_message or "")

    def _add_refusal(self, kind: str, err: RequestTooLargeError, topic: str) -> None:
        said = err.too_large
        unit = "days" if said.what == "range" else UNIT[kind]
        limit = f"{said.limit:,g} {unit}" if said.limit else "no limit stated"
        self._add(topic, "not shown", f"refuses with HTTP {err.status}: "
                  f"{err.server_message!r}", f"plans within it ({limit}); halves a window the "
                  f"service refuses")

    def _fastest_parameters(self) -> list[tuple[str, float]]:
        """(parameter UUID, sampling period s) of up to 200 of the fastest-sampled series."""
        found = []
        for d in self.devices:
            period = _period_s(d)
            if period is None:
                continue
            for s in d.get("sensors") or ():
                if s.get("isActive") is False:
                    continue
                found += [(p["uuid"], float(period)) for p in s.get("parameters") or ()
                          if isinstance(p.get("uuid"), str)]
        found.sort(key=lambda x: x[1])
        return found[:self.limits.max_selector_items]

    # -- numbers written as strings

    def _numbers_as_strings(self) -> None:
        """Whether the service writes numbers as JSON strings (``"600"``; proto3 JSON writes
        every int64 so), judged from the answers already read: no request of its own."""
        seen: dict[str, str] = {}
        for d in self.devices:
            _see_strings(seen, d, DEVICE_NUMBERS, "")
            for s in d.get("sensors") or ():
                _see_strings(seen, s, [(n,) for n in SENSOR_NUMBERS], "sensor ")
                for p in s.get("parameters") or () if isinstance(s, dict) else ():
                    _see_strings(seen, p, [(n,) for n in PARAMETER_NUMBERS], "parameter ")
        spec = "numbers are JSON numbers"
        if not seen and not self.string_points:
            self._add("numbers as strings", spec, f"none seen ({len(self.devices)} devices, "
                      "their sensors, readings and GNSS epochs looked at)", "-")
            return
        said = [f"{n} ({v!r})" for n, v in self.string_points.items()]  # three at most
        names = list(seen)
        said += [f"{n} ({seen[n]!r})" for n in names[:NAMES_SHOWN]]
        if len(names) > NAMES_SHOWN:
            said.append(f"{len(names) - NAMES_SHOWN} more fields of devices, sensors and "
                        f"parameters")
        self._add("numbers as strings", spec, "writes numbers as strings: " + ", ".join(said),
                  "reads them as numbers and counts them; a value that is no number is kept "
                  "as sent and reported")

    def _see_strings_in_points(self, items: list, name: str, keys: tuple[str, ...]) -> None:
        """Note ``name`` when a point of a data answer holds a number as a string there."""
        for item in items:
            for point in (item.get("data") or ()) if isinstance(item, dict) else ():
                value = _dig(point, keys)
                if isinstance(value, str) and read_number(value)[0] is not None:
                    self.string_points.setdefault(name, value)
                    return

    # -- rate limit

    def _rate_limit(self) -> None:
        said = self.profile.refusals
        spec = "200 a minute; message states the seconds to wait; status not shown"
        if self.client.rate_limit_answers:
            status, message = self.client.rate_limit_answers[-1]
            self.profile = self.profile.rate_limited(status, message, None)
            seen = f"HTTP {status}: {message!r}"
        elif said.rate_limit_status:
            seen = f"earlier: HTTP {said.rate_limit_status}: {said.rate_limit_message!r}"
        else:
            seen = "not provoked (it would cost 200 requests)"
        pace = self.client.rate_limit_per_minute
        pace = f"paces to {pace} a minute" if pace else "does not pace (--rate-limit 0)"
        self._add("rate limit", spec, seen,
                  f"{pace}; waits as any answer asks (any status, any words)")


def _newest(latest: list[dict]) -> datetime | None:
    """The newest point time /latest reports, if any can be read."""
    times = []
    for item in latest:
        for point in item.get("data") or ():
            try:
                times.append(timestamps.parse_timestamp(point.get("timestamp")))
            except (ValueError, TypeError, AttributeError):
                continue
    return max(times) if times else None


def _period_s(device: dict) -> float | None:
    """A device's sampling period in seconds, a number however written, None when it has
    none that can be read or it is not positive (its rate cannot be planned with)."""
    period = read_number(device.get("samplingPeriodSeconds"))[0]
    return period if period is not None and period > 0 else None


def _see_strings(seen: dict[str, str], record: object, paths, prefix: str) -> None:
    """Note in ``seen`` each field of ``record`` at ``paths`` holding a number as a string."""
    for path in paths:
        value = _dig(record, path)
        if isinstance(value, str) and read_number(value)[0] is not None:
            seen.setdefault(prefix + ".".join(path), value)


def _dig(obj: object, path: tuple[str, ...]) -> object:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _points(items: list[dict]) -> int:
    return sum(len(i.get("data") or ()) for i in items if isinstance(i, dict))


def _window(end: datetime, span_s: float) -> dict:
    start = end - timedelta(seconds=math.floor(span_s))
    return {"startDate": timestamps.format_timestamp(start),
            "endDate": timestamps.format_timestamp(end)}


def _timestamp_form(text: str) -> str:
    parts = ["UTC" if text.endswith(("Z", "z", "+00:00")) else "with an offset"]
    if "." in text:
        parts.append("milliseconds" if len(text.split(".")[-1].rstrip("Zz")) == 3 else
                     "fractional seconds")
    return ", ".join(parts)
