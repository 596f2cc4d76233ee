"""Text from the service made safe to show: names are data, never terminal commands.

A service names its sites, devices, groups and sensors as it likes, and those names reach
the terminal and the log files.  Printed as they are, an ANSI escape sequence (``\\x1b[2J``)
clears or recolours the user's terminal, a bell rings, a bidi override (U+202E) shows text
reversed, and a newline starts a line that looks like devmon's own output (a forged "Synced"
or log line).  ``printable`` shows each such character as a visible escape instead
(``\\x1b``, ``\\u202e``, ``\\n``), so the name stays recognisable and nothing in it acts;
letters of every script, accents, CJK and emoji are kept as they are.

Used in two places: wherever a line is built around service text (``printable(name)``: a
newline inside a name is escaped, so the name stays on its line), and on every write of the
``devmon`` commands to stdout and stderr (``devmon_sync.cli.progress.PrintableStream``, with
``newlines=True``), the guard behind every path, including the ones nobody thought of.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

#: Unicode categories that act instead of showing: controls (C0, DEL, C1), format characters
#: (bidi embeddings, overrides and isolates, marks like U+200E and U+061C, zero-width
#: spaces, tags), line and paragraph separators, lone surrogates.
_ACTING = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: Format characters that belong to ordinary text: the zero-width (non-)joiners of Persian,
#: Indic scripts and emoji sequences.  They cannot reorder or hide text.
_ORDINARY_FORMAT = frozenset({"\u200c", "\u200d"})
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_NOT_PLAIN_ASCII = re.compile(r"[^\x20-\x7e]")


def printable(text: str, newlines: bool = False) -> str:
    """``text`` with every control, bidi and other format character shown as an escape
    (``\\x1b``, ``\\u202e``, ``\\U000e0041``; newline, tab and carriage return as ``\\n``,
    ``\\t``, ``\\r``).  ``newlines=True`` keeps newlines and tabs (a whole output text whose
    line breaks are devmon's own); by default they are escaped too (a name inside a line)."""
    if text.isascii() and text.isprintable():
        return text  # the common case, without a regular expression
    kept = "\n\t" if newlines else ""

    def escape(match: re.Match) -> str:
        char = match.group()
        if char in kept or not _acts(char):
            return char
        return _SHORT.get(char) or _escape(ord(char))

    return _NOT_PLAIN_ASCII.sub(escape, text)


def printable_lines(lines: Iterable[str]) -> str:
    """Lines joined by newlines, each made ``printable`` on its own: a newline inside one
    (a name's) is escaped, the lines stay the lines they were built as."""
    return "\n".join(printable(line) for line in lines)


def fit(text: str, width: int) -> str:
    """``text`` made ``printable`` in a column of ``width`` characters: padded, or cut with
    "…" as its last character when longer, so a cut name shows that it was cut."""
    text = printable(text)
    return text.ljust(width) if len(text) <= width else text[:width - 1] + "…"


def _acts(char: str) -> bool:
    return unicodedata.category(char) in _ACTING and char not in _ORDINARY_FORMAT


def _escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
