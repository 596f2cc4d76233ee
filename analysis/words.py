"""Counts in words, one home for the whole tool: "1 velocity value", "2 requests".

Pure text: the analysis, the command line, the reports and the GUI all say counts with
``counted`` so none prints "1 windows"."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None, *, grouped: bool = True) -> str:
    """``n`` and the noun in the number it takes: ``counted(1, "window")`` -> "1 window",
    ``counted(2, "velocity value")`` -> "2 velocity values", ``counted(3, "query",
    "queries")``; thousands grouped ("12,000 readings") unless ``grouped`` is False."""
    noun = singular if n == 1 else (plural or singular + "s")
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun}"


__all__ = ["counted"]
