"""The re-check of the past at each sync: the settling window's daily counts and sums
compared with the mirror's, each differing day fetched again (``sync.recheck`` says what it
sees and what it cannot), paid from a share of the syncs' own requests.

A part of ``SyncEngine`` (a mixin over ``DailyCounts``): it uses the engine's ``options``,
``mirror``, ``client``, ``report`` and ``_in_scope``/``_service_now``.
"""

from __future__ import annotations

import logging

from devmon_sync.sync import recheck
from devmon_sync.sync.daily_counts import DailyCounts, of_devices

log = logging.getLogger("devmon.sync")


class PastRecheck(DailyCounts):
    """Re-reading the past where it can change."""

    def _recheck_past(self, run_id: int) -> None:
        """Ask the service's daily count and sum of every stream over the settling window
        and fetch again each day that differs from the mirror (``sync.recheck``)."""
        if self.profile.aggregation in ("refused", "ignored"):
            return
        params = {p.uuid: p for p in self.mirror.parameters_to_sync()
                  if self._in_scope(p.device_serial_number)}
        gnss_fields = self.mirror.gnss_field_parameters()
        sensor_serial = {g.sensor_uuid: g.device_serial_number
                         for g in self.mirror.gnss_sensors_to_sync()}
        serial_of = {k: p.device_serial_number for k, p in params.items()}
        serial_of.update((k, sensor_serial.get(s, "")) for k, s in gnss_fields.items())
        serials = sorted({sn for sn in serial_of.values() if sn and self._in_scope(sn)})
        now = self._service_now()
        first = recheck.day_of(now) - (self._settle_days() - 1)
        start, days = recheck.day_start(first), range(first, recheck.day_of(now) + 1)
        keys = set(params) | set(gnss_fields)
        changed: list[tuple[str, int]] = []
        chunks = self._device_chunks(serials, len(days))
        if not self._recheck_affordable(2 * len(chunks)):
            return
        asked = self.client.requests_sent
        try:
            for chunk in chunks:
                found = self._changed_days(chunk, of_devices(keys, serial_of, chunk), start,
                                           now, days)
                if found is None:
                    return
                changed += found
        finally:
            self.mirror.note_recheck_requests(self.report.run_id,
                                              self.client.requests_sent - asked)
        if changed:
            self._fetch_days(run_id, changed, gnss_fields, now, "recheck")
            days = len({d for _, d in changed})
            self.report.notes.append(
                f"The service changed its past since the last sync ({len(changed)} "
                f"stream-days over {days} days: late data, corrections or re-solved epochs): "
                f"devmon read them again and kept the values they replace (`devmon status` "
                f"counts them).")

    def _recheck_affordable(self, cost: int) -> bool:
        """Whether the share of requests the re-check may add (``recheck_share`` of every
        sync's own, this one's so far included) pays for ``cost`` more now."""
        share = self.options.recheck_share
        if share >= 1.0:
            return True
        earned = self.mirror.recheck_credit(share, self.report.run_id)
        if earned <= 0 and share > 0:
            return False  # a first sync: what it just read has nothing to be compared with
        credit = earned + share * self.client.requests_sent
        if credit >= cost:
            return True
        log.info("re-check of the past deferred: %d requests, %.1f earned", cost, credit)
        return False
