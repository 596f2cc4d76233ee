"""Pacing: a sliding-window limiter that keeps devmon under the service's request rate.

The service allows 200 (spec section 8) requests per minute and a mirror sync makes
thousands, so the client paces itself instead of discovering the limit by being refused.
Pure timekeeping with an injectable clock (no HTTP here): the transport asks for a slot
before every attempt and waits as long as ``try_acquire`` says.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from devmon_sync import service_profile as assumed

LIMITER_MARGIN_S = 0.01
"""Added to client-side limiter waits so a slot is surely free when the request leaves."""
MIN_PACE_PER_MINUTE = 10
"""The slowest pace devmon lowers itself to after rate-limit answers (requests per minute)."""


class Slot:
    """One request's place in the limiter window; ``t`` is when it finished (inf: in flight)."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = float("inf")


class SlidingWindowLimiter:
    """At most ``limit`` requests in any ``window_s`` seconds, counting every attempt.

    A request is stamped with the time its answer (or failure) arrived, not the time it left:
    the server recorded it somewhere in between, so counting from the later instant guarantees
    the server's window has freed the slot too when ours has.  In-flight requests hold a slot.
    """

    def __init__(self, limit: int, window_s: float | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.window_s = assumed.RATE_LIMIT_WINDOW_S if window_s is None else window_s
        self._monotonic = monotonic
        self._slots: list[Slot] = []
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def try_acquire(self) -> tuple[Slot | None, float]:
        """Take a slot now, or return (None, seconds until one frees)."""
        with self._lock:
            now = self._monotonic()
            self._slots = [s for s in self._slots if s.t > now - self.window_s]
            if len(self._slots) < self.limit:
                slot = Slot()
                self._slots.append(slot)
                return slot, 0.0
            finished = [s.t for s in self._slots if s.t != float("inf")]
            if not finished:  # every slot is in flight on other threads: look again shortly
                return None, 0.05
            return None, max(min(finished) + self.window_s - now, 0.0) + LIMITER_MARGIN_S

    def least_seconds_for(self, requests: int) -> float:
        """The least time the limit allows ``requests`` more requests to take: the slots free
        now cost nothing, every further ``limit`` of them one more window."""
        if not self.enabled:
            return 0.0
        with self._lock:
            now = self._monotonic()
            free = self.limit - sum(1 for s in self._slots if s.t > now - self.window_s)
        return max(0, requests - free) / self.limit * self.window_s

    def release(self, slot: Slot | None) -> None:
        """Stamp a slot with the time its request finished."""
        if slot is not None:
            with self._lock:
                slot.t = self._monotonic()
