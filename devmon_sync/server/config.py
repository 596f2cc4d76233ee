"""Settings of one reference server: world size, clock, keys, limits, faults and misbehaviour."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from devmon_sync.api_contract import (
    DEFAULT_LIMITS,
    RATE_LIMIT_PER_MINUTE,
    ResponseLimits,
)
from devmon_sync.server.clock import DAY_S
from devmon_sync.server.contracts import Contract
from devmon_sync.server.misbehave import Misbehaviour
from devmon_sync.server.world import WorldSize


@dataclass(frozen=True)
class FaultConfig:
    """Shares (0..1) of API requests that fail on purpose, drawn from a seeded sequence."""

    error_rate: float = 0.0      # answer 500
    slow_rate: float = 0.0       # answer after ``slow_s`` seconds
    slow_s: float = 2.0
    drop_rate: float = 0.0       # close the connection without answering
    truncate_rate: float = 0.0   # send half the body, then close
    seed: int = 0
    drip_rate: float = 0.0       # headers at once, then the body a few bytes at a time ...
    drip_every_s: float = 0.5    # ... every ``drip_every_s`` seconds, until the client hangs up
    drip_bytes: int = 1

    @property
    def any(self) -> bool:
        return any((self.error_rate, self.slow_rate, self.drop_rate, self.truncate_rate,
                    self.drip_rate))


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8787  # 0: any free port
    seed: int = 42
    api_keys: dict[str, frozenset[str] | None] = field(default_factory=dict)
    size: WorldSize = field(default_factory=WorldSize)
    now: datetime | None = None  # None: the wall clock
    rate_limit_per_minute: int = RATE_LIMIT_PER_MINUTE  # 0: no limit
    limits: ResponseLimits = DEFAULT_LIMITS
    faults: FaultConfig = FaultConfig()
    misbehaviour: Misbehaviour = field(default_factory=Misbehaviour)  # 200s with odd data
    contract: Contract = field(default_factory=Contract)  # how unshown points are realised
    log_requests: bool = False
    history_start: datetime | None = None
    """When the world's history begins (None: ``size.days`` before the day the clock starts
    on).  Servers started on different days with the same history start serve one world, the
    later one with more of it: what an incremental sync a day later meets."""

    def clock(self):
        """The world's clock, in integer Unix seconds: fixed with ``now``, else the wall clock."""
        if self.now is not None:
            fixed = int(self.now.timestamp())
            return lambda: fixed
        return lambda: int(time.time())

    def service_clock(self):
        """The service's own clock, in integer Unix seconds: the world's, set off by the
        contract's ``clock_offset_s``.  It is what the service's ``Date`` headers and
        ``Retry-After`` dates say and what it calls now when it refuses a start in its future;
        the data keep the world's clock (a real service's clock may be off while its devices,
        stamped by GNSS time, are not)."""
        world, offset = self.clock(), self.contract.clock_offset_s
        if not offset:
            return world
        return lambda: world() + offset

    def anchor_s(self) -> int:
        """Midnight (UTC) of the day the clock starts on: the world's history ends there."""
        return self.clock()() // DAY_S * DAY_S

    def origin_s(self) -> int | None:
        """Where the world's history begins when ``history_start`` fixes it (a UTC midnight)."""
        if self.history_start is None:
            return None
        return int(self.history_start.timestamp()) // DAY_S * DAY_S


def parse_api_key(text: str) -> tuple[str, frozenset[str] | None]:
    """``KEY`` sees everything; ``KEY:SITE_UUID[,SITE_UUID...]`` sees only those sites."""
    key, _, sites = text.partition(":")
    if not key:
        raise ValueError(f"empty API key in {text!r}")
    if not sites:
        return key, None
    return key, frozenset(s.strip().lower() for s in sites.split(",") if s.strip())
