"""The service's daily counts and sums, compared with the mirror's: one request per up to
200 devices says which stream-days differ (``sync.recheck`` holds the comparison itself).

Shared by the search for history before ``createdAt`` (``sync.history_steps``: counts only,
data or none) and the re-check of the past (``sync.recheck_steps``: counts and sums).  A
service that refuses or ignores the aggregation is remembered in the profile and said once.

A part of ``SyncEngine`` (a mixin): it uses the engine's ``client``, ``mirror``, ``profile``,
``report``, ``_limits`` and its ``_fetch``/``_progress``/``_check_cancel``/``_rate_per_s``.
``devmon verify`` asks the same counts (``_device_chunks``, ``_changed_days``) through an
object holding just ``client``, ``mirror``, ``profile``, ``report``, ``_limits`` and
``_fetcher`` (``sync.verify``).
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta

from devmon_sync import service_profile as assumed
from devmon_sync import timestamps
from devmon_sync.client import BadRequestError, RequestTooLargeError
from devmon_sync.store import answers
from devmon_sync.sync import recheck
from devmon_sync.sync.plan import FILL, Stream, pack


class DailyCounts:
    """Which stream-days differ between the service and the mirror, and fetching them."""

    def _settle_days(self) -> int:
        """Days one daily-aggregate request covers: the settling window, within the longest
        range the service accepts (learned or given)."""
        return max(2, min(recheck.SETTLE_DAYS, math.floor(self._limits.max_range_days) - 1))

    def _device_chunks(self, serials: list[str], days: int) -> list[list[str]]:
        """``serials`` in groups one daily-aggregate request may name: at most the selector
        limit, and a value per series and day within the points budget."""
        series = self.mirror.parameters_per_device()
        budget = FILL * self._limits.max_points
        out: list[list[str]] = []
        points = 0.0
        for sn in serials:
            cost = max(1, series.get(sn, 1)) * (days + 1)
            if not out or len(out[-1]) >= self._limits.max_selector_items or \
                    points + cost > budget:
                out.append([])
                points = 0.0
            out[-1].append(sn)
            points += cost
        return out

    def _changed_days(self, serials: list[str], keys: set[str], start: datetime,
                      end: datetime, days: range, sums: bool = True
                      ) -> list[tuple[str, int]] | None:
        """(parameter, day) of ``serials`` whose daily count (or, with ``sums``, sum)
        differs; None when the service does not aggregate as asked (remembered in the
        profile, said once)."""
        body = {"deviceSerialNumbers": serials, "startDate": _iso(start), "endDate": _iso(end),
                "disableRounding": True}
        try:
            answers_ = [self.client.sensor_data({**body, "aggregation": assumed.daily(f)},
                                                decoder=answers.readings_from_json)
                        for f in (("count", "sum") if sums else ("count",))]
        except RequestTooLargeError as err:
            if err.too_large.what == "range" and len(days) > 1:
                return self._in_shorter_ranges(serials, keys, start, end, days, sums, err)
            if len(serials) == 1:
                return []  # one device's days too many for one answer: left to verify
            half = len(serials) // 2
            parts = [self._changed_days(s, keys, start, end, days, sums)
                     for s in (serials[:half], serials[half:])]
            return None if None in parts else parts[0] + parts[1]
        except BadRequestError as err:
            return self._no_aggregation("refused", f"it refused it: {err.server_message}")
        service = recheck.service_days(answers_[0].table,
                                       answers_[1].table if sums else None, "parameter_uuid")
        if service is None:
            return self._no_aggregation("ignored", "it sent raw points back")
        self.profile = dataclasses.replace(self.profile, aggregation="daily")
        mirror = {k: recheck.DayValues(*v) for k, v in self.mirror.daily_values(
            sorted(keys), start, end, recheck.HEIGHT_TOL_M, recheck.DEGREE_TOL).items()}
        mine = {k for (k, _) in service} | {k for (k, _) in mirror}
        unknown = set().union(*(recheck.unreadable_days(a.quarantine) for a in answers_))
        return recheck.changed_days(service, mirror, keys & mine, days, sums, unknown)

    def _in_shorter_ranges(self, serials: list[str], keys: set[str], start: datetime,
                           end: datetime, days: range, sums: bool, err: RequestTooLargeError
                           ) -> list[tuple[str, int]] | None:
        """The same days asked in ranges the service accepts: as long as the limit it stated
        (learned for the rest of the run and, through the profile, the next), else halves."""
        said = err.too_large
        per = len(days) // 2
        if said.limit:
            self._fetcher.profile = self._fetcher.profile.refused(
                "readings", said.what, said.limit, err.status or 0, err.server_message or "")
            self._limits = dataclasses.replace(
                self._limits, max_range_days=min(self._limits.max_range_days, said.limit))
            per = min(per, max(1, math.floor(said.limit)))
        out: list[tuple[str, int]] = []
        for first in range(days.start, days.stop, max(1, per)):
            part = range(first, min(days.stop, first + max(1, per)))
            found = self._changed_days(
                serials, keys, max(start, recheck.day_start(part.start)),
                min(end, recheck.day_start(part.stop) - timedelta(milliseconds=1)), part, sums)
            if found is None:
                return None
            out += found
        return out

    NO_AGGREGATION_NOTE = (
        "The service does not give a daily count and sum as devmon asks ({why}): values "
        "it changes or receives late are found by `devmon verify`, not by each sync.")
    """What the report says when the service gives no daily counts (``devmon verify`` says
    what it did instead)."""

    def _no_aggregation(self, how: str, why: str) -> None:
        self.profile = dataclasses.replace(self.profile, aggregation=how)
        self.report.notes.append(self.NO_AGGREGATION_NOTE.format(why=why))
        return None

    def _fetch_days(self, run_id: int, changed: list[tuple[str, int]],
                    gnss_fields: dict[str, str], now: datetime, phase: str) -> None:
        """Fetch every (parameter, day) again, a GNSS field's as its sensor's epochs; the
        commits keep the values they replace as revisions."""
        by_kind: dict[str, dict[tuple[str, int], None]] = {"readings": {}, "gnss": {}}
        for key, day in changed:
            kind, stream = ("gnss", gnss_fields[key]) if key in gnss_fields else ("readings", key)
            by_kind[kind][(stream, day)] = None
        windows = []
        for kind, items in by_kind.items():
            streams = [Stream(key, recheck.day_start(day), min(now, recheck.day_start(day + 1)
                                                               - timedelta(milliseconds=1)),
                              self._rate_per_s(kind, key)) for key, day in items]
            budget = FILL * (self._limits.max_points if kind == "readings"
                             else self._limits.max_epochs)
            windows += [dataclasses.replace(w, side="heal")
                        for w in pack(kind, streams, budget, self._limits)]
        for i, window in enumerate(windows):
            self._check_cancel()
            self._progress(phase, i, len(windows), f"{len(window.keys)} streams, "
                           f"{window.start:%Y-%m-%d} to {window.end:%Y-%m-%d}")
            self._fetch(run_id, window)


def of_devices(keys, serial_of: dict[str, str], serials: list[str]) -> set[str]:
    """The ``keys`` (parameters) whose device is one of ``serials``: what one request by
    device serial numbers answers for."""
    wanted = set(serials)
    return {k for k in keys if serial_of.get(k) in wanted}


def _iso(t: datetime) -> str:
    """API form of a bound: UTC with milliseconds and Z."""
    return timestamps.format_timestamp(t)
