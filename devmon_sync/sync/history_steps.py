"""The search for each stream's history before its ``createdAt`` (``sync.history`` plans it):
by the service's daily counts where it gives them (one request per 200 devices covers every
stream whose origin lies in one settling window, and only days with data are fetched), else
round by round, until a span before what is known comes back empty.

A part of ``SyncEngine`` (a mixin over ``DailyCounts``): it uses the engine's ``options``,
``mirror``, ``profile``, ``report``, ``_limits`` and ``_fetch``/``_progress``/``_in_scope``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from devmon_sync.sync import history, recheck
from devmon_sync.sync.daily_counts import DailyCounts, of_devices

MAX_HISTORY_ROUNDS = 1000  # spans searched back before createdAt (31 days each: 85 years)


class HistoryStarts(DailyCounts):
    """Finding where each stream's history truly starts."""

    def _search_history_starts(self, run_id: int) -> None:
        """Search each stream's history before its ``createdAt`` once (``sync.history``):
        round by round, until a span before what is known comes back empty."""
        span = timedelta(days=self._limits.max_range_days) * 0.999
        searches: dict[str, history.HistorySearch] = {}
        params, sensors = self.mirror.parameters_to_sync(), self.mirror.gnss_sensors_to_sync()
        todo = {"readings": [(p.uuid, p.device_serial_number, p.created_at, p.first_ts,
                              p.history_searched) for p in params],
                "gnss": [(g.sensor_uuid, g.device_serial_number, g.created_at, g.first_ts,
                          g.history_searched) for g in sensors]}
        for kind, rows in todo.items():
            keys = [key for key, serial, _, _, searched in rows
                    if not searched and self._in_scope(serial)]
            proved = self.mirror.proved_starts(kind, keys)
            origins = history.origins([(key, created, first, proved.get(key))
                                       for key, serial, created, first, searched in rows
                                       if key in proved or first is not None])
            search = history.HistorySearch.of(kind, {k: t for k, t in origins.items()
                                                     if k in set(keys)}, span,
                                              self.options.since)
            self.mirror.note_history_searched(kind, search.done)
            searches[kind] = search
        if self.profile.aggregation not in ("refused", "ignored"):
            serial_of = {p.uuid: p.device_serial_number for p in params}
            serial_of.update((g.sensor_uuid, g.device_serial_number) for g in sensors)
            self._count_history(run_id, searches, serial_of)
        for search in searches.values():
            self._search_rounds(run_id, search)

    def _count_history(self, run_id: int, searches: dict[str, history.HistorySearch],
                       device_of: dict[str, str]) -> None:
        """Search history by the service's daily counts where it gives them: one request
        per 200 devices covers every stream whose origin lies in one settling window, and
        only the days that hold data are fetched (``sync.history``, ``sync.recheck``).
        ``device_of``: each parameter's and GNSS sensor's device."""
        readings, gnss = searches["readings"], searches["gnss"]
        sensor_of = self.mirror.gnss_field_parameters()
        serial_of = dict(device_of)
        serial_of.update((k, device_of.get(s, "")) for k, s in sensor_of.items())
        window = timedelta(days=self._settle_days() - 1)
        for _ in range(MAX_HISTORY_ROUNDS):
            origins = dict(readings.origin)
            origins.update((k, gnss.origin[s]) for k, s in sensor_of.items() if s in gnss.origin)
            if not origins:
                return
            for keys in history.clusters(origins, max(timedelta(0), window - history.MIN_SILENCE)):
                if not self._count_cluster(run_id, keys, origins, serial_of, sensor_of,
                                           searches, window):
                    return  # no daily counts from this service: the raw rounds go on

    def _count_cluster(self, run_id: int, keys: list[str], origins: dict[str, datetime],
                       serial_of: dict[str, str], sensor_of: dict[str, str],
                       searches: dict[str, history.HistorySearch], window: timedelta) -> bool:
        """One counting round for streams whose origins lie close; False when the service
        does not give daily counts."""
        last_day = recheck.day_of(max(origins[k] for k in keys))
        # whole days on both sides (the service's edges are its own): the origin's day too
        end = min(self._service_now(), recheck.day_start(last_day + 1) - timedelta(milliseconds=1))
        start = recheck.day_start(last_day - window.days)
        if self.options.since is not None:
            start = max(start, self.options.since)
        days = range(recheck.day_of(start), recheck.day_of(end) + 1)
        serials = sorted({serial_of[k] for k in keys if serial_of.get(k)})
        changed: list[tuple[str, int]] = []
        for chunk in self._device_chunks(serials, len(days)):
            found = self._changed_days(chunk, of_devices(keys, serial_of, chunk), start, end,
                                       days, sums=False)  # data or none: the count says
            if found is None:
                return False
            changed += found
        before = [(k, d) for k, d in changed if d <= recheck.day_of(origins[k])]
        if before:
            self._fetch_days(run_id, before, sensor_of, self._service_now(), "history")
        hit = {sensor_of.get(k, k) for k, _ in before}
        for kind, search in searches.items():
            streams = {sensor_of.get(k, k) for k in keys} & set(search.origin)
            ended: dict[str, datetime] = {}
            for stream in sorted(streams):
                ended.update(search.counted(stream, start, stream in hit))
            self.mirror.note_history_searched(kind, ended)  # one commit for the round
        return True

    def _search_rounds(self, run_id: int, search: history.HistorySearch) -> None:
        rounds = 0
        while search.open and rounds < MAX_HISTORY_ROUNDS:
            rounds += 1
            windows = search.windows(self._limits)
            for i, window in enumerate(windows):
                self._check_cancel()
                self._progress("history", i, len(windows), f"{search.kind} before "
                               f"{window.end:%Y-%m-%d}, {len(window.keys)} streams")
                self._fetch(run_id, window)
            ended = search.advance(self.mirror.first_points(search.kind, search.open))
            self.mirror.note_history_searched(search.kind, ended)
        if search.older:
            what = "GNSS sensors" if search.kind == "gnss" else "parameters"
            self.report.notes.append(
                f"{len(search.older)} {what} hold data from before their records' createdAt "
                f"(an import, an archive or a platform migration): devmon searched back "
                f"until {history.MIN_SILENCE.days} days held nothing ({rounds} rounds of "
                f"up to {search.span.days} days) and mirrored it.")
