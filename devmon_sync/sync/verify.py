"""`devmon verify`: re-read a sample of committed windows and compare them with the mirror.

What an engineer runs before trusting a mirror for a report: it asks the service again for
some of the windows the mirror committed (a few percent by default, never more requests than
a budget, or all of them), compares every point, and reports each difference by device,
parameter and time range.  Differences become unverified ranges (``sync_gaps``), so the next
`devmon sync` heals them; with ``repair`` they are re-synced at once, through the same
fetch-judge-commit path a sync uses.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync.client import ApiClient, ForbiddenError, RequestTooLargeError
from devmon_sync.sync.plan import Window, split
from devmon_sync.sync.proof.fetcher import StreamInfo, WindowFetcher
from devmon_sync.store import Mirror
from devmon_sync.store.audit import CommittedWindow, StreamDifference

_MS = timedelta(milliseconds=1)


BAD_SHARE = 0.01
POWER = 0.95
"""The default sample: large enough that a mirror in which at least ``BAD_SHARE`` of the
committed windows differ from the service is caught with at least ``POWER`` probability."""


def miss_probability(total: int, checked: int, bad_share: float = BAD_SHARE) -> float:
    """The chance that ``checked`` windows drawn at random from ``total`` miss every one of
    the ``ceil(bad_share * total)`` that differ (hypergeometric, exact)."""
    bad = math.ceil(bad_share * total)
    if not total or not bad:
        return 0.0
    miss = 1.0
    for i in range(min(checked, total)):
        if total - bad - i <= 0:
            return 0.0
        miss *= (total - bad - i) / (total - i)
    return miss


def sample_size(total: int, bad_share: float = BAD_SHARE, power: float = POWER) -> int:
    """The fewest windows whose random sample catches ``bad_share`` of ``total`` differing
    with probability ``power`` (about 299 for a large mirror, all of a small one)."""
    n, miss, bad = 0, 1.0, math.ceil(bad_share * total)
    while n < total and miss > 1.0 - power:
        miss *= max(0.0, (total - bad - n) / (total - n))
        n += 1
    return n


@dataclass(frozen=True)
class VerifyOptions:
    share: float | None = None
    """Share of the committed windows to re-read (at least one); None: as many as the
    stated power needs (``sample_size``)."""
    check_all: bool = False
    budget: int | None = None
    """Most data requests to spend (None: no limit beyond the sample)."""
    repair: bool = False
    seed: int | None = None
    """Seed of the sample (None: a new sample each time)."""


@dataclass
class VerifyReport:
    run_id: int
    windows_total: int
    windows_planned: int
    windows_checked: int = 0
    requests: int = 0
    differences: list[StreamDifference] = field(default_factory=list)
    repaired: int = 0
    refused: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.differences


def sample(windows: list[CommittedWindow], options: VerifyOptions) -> list[CommittedWindow]:
    """The windows to check: all, or a random share (at least one), at most ``budget``."""
    chosen = list(windows)
    if not options.check_all:
        n = sample_size(len(windows)) if options.share is None else \
            max(1, math.ceil(options.share * len(windows))) if windows else 0
        chosen = sorted(random.Random(options.seed).sample(windows, min(n, len(windows))),
                        key=lambda w: (w.start, w.kind))
    if options.budget is not None:
        chosen = chosen[:options.budget]
    return chosen


class Verifier:
    def __init__(self, client: ApiClient, mirror: Mirror, options: VerifyOptions,
                 on_window: Callable[[int, int], None] | None = None):
        self.client, self.mirror, self.options = client, mirror, options
        self.on_window = on_window or (lambda done, total: None)

    def plan(self) -> tuple[list[CommittedWindow], int]:
        """(the windows to check, how many the mirror committed)."""
        windows = self.mirror.committed_windows()
        return sample(windows, self.options), len(windows)

    def run(self, chosen: list[CommittedWindow], total: int) -> VerifyReport:
        run_id = self.mirror.begin_run(self.client.base_url, {
            "verify": True, "repair": self.options.repair, "windows": len(chosen)})
        report = VerifyReport(run_id, total, len(chosen))
        profile = self.mirror.load_profile(self.client.base_given)
        if profile.api_url:
            self.client.locate(profile.api_url)
        fetcher = WindowFetcher(self.client, self.mirror, run_id, profile,
                                self._stream_info(), lambda kind, rows: None)
        sent0 = self.client.requests_sent
        status = "failed"
        try:
            for i, cw in enumerate(chosen):
                if self._spent(sent0):
                    break
                self.on_window(i, len(chosen))
                self._check(fetcher, self._window(cw), report, sent0)
                report.windows_checked += 1
            status = "verified" if report.clean else \
                "repaired" if self.options.repair else "differences"
        finally:
            report.requests = self.client.requests_sent - sent0
            self.mirror.finish_run(run_id, status, report.requests,
                                   f"{len(report.differences)} streams differ"
                                   if report.differences else "")
        return report

    def _spent(self, sent0: int) -> bool:
        budget = self.options.budget
        return budget is not None and self.client.requests_sent - sent0 >= budget

    def _stream_info(self) -> dict[tuple[str, str], StreamInfo]:
        """Sampling periods for the completeness judgement of a repair."""
        return {(kind, key): StreamInfo(period, None)
                for kind, key, period in self.mirror.stream_periods()}

    @staticmethod
    def _window(cw: CommittedWindow) -> Window:
        return Window(cw.kind, list(cw.keys), cw.start, cw.end, {k: cw.end for k in cw.keys},
                      float(cw.rows), side="verify")

    def _check(self, fetcher: WindowFetcher, w: Window, report: VerifyReport,
               sent0: int) -> None:
        """Compare one window (halved if the service now finds it too large)."""
        try:
            fetched = fetcher.ask(w)
        except RequestTooLargeError:
            for half in split(w):
                if not self._spent(sent0):
                    self._check(fetcher, half, report, sent0)
            return
        except ForbiddenError:
            report.refused.append(f"{w.kind} {w.start:%Y-%m-%d %H:%M}..{w.end:%Y-%m-%d %H:%M}")
            return
        found = self.mirror.differences(w.kind, w.keys, w.start, w.end,
                                        _as_answer(fetched.table, w.kind))
        report.differences += found
        if not found:
            return
        keys = [d.key for d in found]
        if self.options.repair:
            part = Window(w.kind, keys, w.start, w.end, {k: w.end for k in keys},
                          w.expected_points * len(keys) / max(1, len(w.keys)), side="verify")
            fetcher.fetch(part)
            report.repaired += len(keys)
        else:
            self.mirror.record_gaps(report.run_id, w.kind, {
                d.key: (d.first, d.last, f"devmon verify: {d.points} points differ from the "
                                         f"service") for d in found})


def _as_answer(table: pa.Table, kind: str) -> pa.Table:
    """A fetched table with its stream key as text in ``key`` (what audit compares)."""
    column = "parameter_uuid" if kind == "readings" else "sensor_uuid"
    key = pc.cast(table.column(column), pa.string())
    return table.drop_columns([column]).append_column("key", key)
