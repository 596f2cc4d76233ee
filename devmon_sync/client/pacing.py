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


class WaitReason(str):
    """Why the client waits: the words for people (it is that text, as the ``on_wait``
    callbacks have always been given) and what kind of wait it is, for code that acts on it
    (``kind``: "pacing", its own pace under ``per_minute`` requests a minute; "asked", the
    service asked; "retry", a backoff) rather than reading the words."""

    kind: str
    per_minute: int | None

    def __new__(cls, text: str, kind: str, per_minute: int | None = None) -> "WaitReason":
        reason = super().__new__(cls, text)
        reason.kind, reason.per_minute = kind, per_minute
        return reason


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
        """The least time the limit allows ``requests`` more requests to take (for ETAs),
        however fast the service answers: when the last of them may leave, sending each as
        soon as a slot frees.

        Why not "requests / rate": a slot frees when its request leaves the window, a window
        after it finished, so after a burst the next request may wait most of a window
        whatever few are left (issue 30.9: 20 a minute, two left, "6 s" while it waited
        40).  Request i of the rest may leave once the request ``limit`` places before it
        (counting those in the window now, in time order) is a window old; in-flight ones
        count as finished now."""
        if not self.enabled or requests <= 0:
            return 0.0
        with self._lock:
            now = self._monotonic()
            times = sorted(min(s.t, now) for s in self._slots if s.t > now - self.window_s)
        return _last_departure(times, requests, self.limit, self.window_s, now) - now

    def release(self, slot: Slot | None) -> None:
        """Stamp a slot with the time its request finished."""
        if slot is not None:
            with self._lock:
                slot.t = self._monotonic()


def _last_departure(times: list[float], requests: int, limit: int, window_s: float,
                    now: float) -> float:
    """When the last of ``requests`` more requests may leave, ``times`` being when those in
    the window now finished (sorted).  In the sequence of those and the new ones, the new
    request at place ``k`` leaves at max(now, place ``k - limit`` + a window); following
    that chain back from the last one, every step of ``limit`` places back among the new
    ones is one more window."""
    place = len(times) + requests - 1 - limit  # the one the last new request waits for
    windows = 0
    while place >= len(times):
        place -= limit
        windows += 1
    start = now if place < 0 else max(now, times[place] + window_s)
    return start + windows * window_s
