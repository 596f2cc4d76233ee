"""Helpers both benchmark scripts use: the benchmark key and clock, timestamps, a free port."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

KEY = "bench-key"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
