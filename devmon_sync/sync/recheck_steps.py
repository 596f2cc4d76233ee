"""The re-check of the past at each sync: daily counts and sums compared with the mirror's,
each differing day fetched again (``sync.recheck`` says what it sees and what it cannot),
paid from a share of the syncs' own requests.  Turns alternate: the settling window (longer
for devices seen to change late), then a step of the rolling sweep over older history.

A part of ``SyncEngine`` (a mixin over ``DailyCounts``): it uses the engine's ``options``,
``mirror``, ``client``, ``report`` and ``_in_scope``/``_service_now``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from devmon_sync.sync import recheck
from devmon_sync.sync.daily_counts import DailyCounts, of_devices

log = logging.getLogger("devmon.sync")
SETTLE_TURNS = 1
"""Turns of the settling window between two steps of the rolling sweep."""
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Streams:
    """What the re-check compares: every stream key (parameters, GNSS fields) in scope,
    its device, and each device's oldest point."""

    serial_of: dict[str, str]
    gnss_fields: dict[str, str]
    first_day: dict[str, int]

    @property
    def serials(self) -> list[str]:
        return sorted(set(self.serial_of.values()))


class PastRecheck(DailyCounts):
    """Re-reading the past where it can change."""

    def _recheck_past(self, run_id: int) -> None:
        """Ask the service's daily count and sum of every stream, over the settling window
        or, on the sweep's turn, over the next span of older history, and fetch again each
        day that differs from the mirror (``sync.recheck``)."""
        if self.profile.aggregation in ("refused", "ignored"):
            return
        streams = self._recheck_streams()
        if not streams.serial_of:
            return
        now, span = self._service_now(), self._settle_days()
        first = recheck.day_of(now) - (span - 1)
        at, turns = self.mirror.rolling_state(self.report.run_id, self.options.scope_key)
        at_day = recheck.day_of(at) if at is not None else None
        history = min(streams.first_day.values(), default=first)
        every = self.options.recheck_share >= 1.0
        changed: list[tuple[str, int]] | None = []
        self._recheck_spent = 0
        try:
            if every or turns < SETTLE_TURNS or not recheck.rolling_days(at_day, first,
                                                                         history, span):
                changed = self._recheck_settling(streams, first, span, now)
            if every or turns >= SETTLE_TURNS:
                changed = self._recheck_sweep(streams, at_day, first, history, span, now,
                                              changed)
        finally:
            self.mirror.note_recheck_requests(self.report.run_id, self._recheck_spent)
        if changed:
            self._read_changed_again(run_id, changed, streams, now)

    def _recheck_streams(self) -> Streams:
        params = [p for p in self.mirror.parameters_to_sync()
                  if self._in_scope(p.device_serial_number)]
        sensors = [g for g in self.mirror.gnss_sensors_to_sync()
                   if self._in_scope(g.device_serial_number)]
        gnss_fields = {k: s for k, s in self.mirror.gnss_field_parameters().items()
                       if s in {g.sensor_uuid for g in sensors}}
        sensor_serial = {g.sensor_uuid: g.device_serial_number for g in sensors}
        serial_of = {p.uuid: p.device_serial_number for p in params}
        serial_of.update((k, sensor_serial[s]) for k, s in gnss_fields.items())
        first_day: dict[str, int] = {}
        for sn, t in [(p.device_serial_number, p.first_ts) for p in params] + \
                [(g.device_serial_number, g.first_ts) for g in sensors]:
            if t is not None:
                first_day[sn] = min(first_day.get(sn, recheck.day_of(t)), recheck.day_of(t))
        return Streams(serial_of, gnss_fields, first_day)

    def _recheck_settling(self, streams: Streams, first: int, span: int, now: datetime
                          ) -> list[tuple[str, int]] | None:
        """The settling window: ``span`` days for every device, more for one seen to
        change late (``recheck.settle_days_for``), a request per span and device chunk."""
        lateness = self.mirror.lateness_by_device()
        spans = {sn: math.ceil(recheck.settle_days_for(lateness.get(sn), span) / span)
                 for sn in streams.serials}
        steps = [(range(first - i * span, first - (i - 1) * span if i else first + span),
                  [sn for sn in streams.serials if spans[sn] > i and
                   streams.first_day.get(sn, first) < first - (i - 1) * span])
                 for i in range(max(spans.values(), default=0))]
        cost = sum(2 * len(self._device_chunks(sns, span)) for _, sns in steps)
        if not self._recheck_affordable(cost):
            return []
        changed: list[tuple[str, int]] = []
        for days, serials in steps:
            found = self._compare_days(serials, streams, days, now)
            if found is None:
                return None
            changed += found
        return changed

    def _recheck_sweep(self, streams: Streams, at_day: int | None, first: int, history: int,
                       span: int, now: datetime, changed: list[tuple[str, int]] | None
                       ) -> list[tuple[str, int]] | None:
        """Steps of the rolling sweep over older history, as many as the share pays for
        (all of it at a share of 1)."""
        while changed is not None:
            days = recheck.rolling_days(at_day, first, history, span)
            serials = [sn for sn in streams.serials
                       if streams.first_day.get(sn, first) < days.stop]
            if not days or not self._recheck_affordable(
                    2 * len(self._device_chunks(serials, span))):
                break
            found = self._compare_days(serials, streams, days, now)
            self.mirror.note_rolled(self.report.run_id, recheck.day_start(days.start),
                                    recheck.day_start(days.stop) - _MS)
            changed = None if found is None else changed + found
            if days.start <= history:
                break  # the sweep is through: the next starts again at the settling window
            at_day = days.start
        return changed

    def _compare_days(self, serials: list[str], streams: Streams, days: range, now: datetime
                      ) -> list[tuple[str, int]] | None:
        """(key, day) over ``days`` of ``serials`` whose count or sum differs; None when the
        service does not aggregate as asked."""
        start = recheck.day_start(days.start)
        end = min(now, recheck.day_start(days.stop) - _MS)
        keys = set(streams.serial_of)
        out: list[tuple[str, int]] = []
        for chunk in self._device_chunks(serials, len(days)):
            asked = self.client.requests_sent
            try:
                found = self._changed_days(chunk, of_devices(keys, streams.serial_of, chunk),
                                           start, end, days)
            finally:
                self._recheck_spent += self.client.requests_sent - asked
            if found is None:
                return None
            out += found
        return out

    def _read_changed_again(self, run_id: int, changed: list[tuple[str, int]],
                            streams: Streams, now: datetime) -> None:
        """Fetch each changed day again, remember how late the service changed it, say so."""
        self._fetch_days(run_id, changed, streams.gnss_fields, now, "recheck")
        late = recheck.lateness_of(changed, self.mirror.previous_run_start(self.report.run_id))
        fields = streams.gnss_fields
        self.mirror.note_lateness("readings", {k: d for k, d in late.items() if k not in fields})
        gnss: dict[str, float] = {}
        for key, d in late.items():
            if key in fields:
                gnss[fields[key]] = max(gnss.get(fields[key], 0.0), d)
        self.mirror.note_lateness("gnss", gnss)
        days = len({d for _, d in changed})
        self.report.notes.append(
            f"The service changed its past since the last sync ({len(changed)} "
            f"stream-days over {days} days: late data, corrections or re-solved epochs): "
            f"devmon read them again and kept the values they replace (`devmon status` "
            f"counts them).")

    def _recheck_affordable(self, cost: int) -> bool:
        """Whether the share of requests the re-check may add (``recheck_share`` of every
        sync's own, this one's so far included, less what re-checks spent) pays for
        ``cost`` more now."""
        share = self.options.recheck_share
        if share >= 1.0:
            return True
        earned = self.mirror.recheck_credit(share, self.report.run_id)
        if earned <= 0 and share > 0:
            return False  # a first sync: what it just read has nothing to be compared with
        spent = self._recheck_spent
        credit = earned + share * (self.client.requests_sent - spent) - spent
        if credit >= cost:
            return True
        log.info("re-check of the past deferred: %d requests, %.1f earned", cost, credit)
        return False
