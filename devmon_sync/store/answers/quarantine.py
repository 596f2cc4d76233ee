"""One value at a time, for the slow path: the lenient JSON parse, readers of numbers,
ids and timestamps with the reason they fail, the quarantine table and duplicate rules.

``read_number`` and ``read_integer`` are the one home of the rule "a number from a JSON
value", for data points, GNSS epochs and metadata records (``store/records.py``) alike: a
value is read by its meaning, so a number a service writes as a string (``"46.3030235"``,
``"600"``, an int64 id as proto3 JSON writes it) is read, and counted, when it is
unambiguous; what is not is a problem worded to follow the value's name."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync import timestamps
from devmon_sync.store.answers.columns import (
    _ARROW_ERRORS,
    _EPOCH,
    _ONE_US,
    QUARANTINE_SCHEMA,
    TS_MAX_US,
    TS_MIN_US,
    UTC_TIMESTAMP,
)

# ----------------------------------------------------------------------------- lenient JSON


class _Bad:
    """A JSON token the API does not allow where a number goes: the bare ``NaN`` /
    ``Infinity`` / ``-Infinity`` some servers write, a number beyond float64 (``1e999``) or an
    integer too long for Python to read.  It keeps the text so the quarantine shows it as
    sent."""

    __slots__ = ("text", "why")

    def __init__(self, text: str, why: str) -> None:
        self.text, self.why = text, why

    def __repr__(self) -> str:
        return self.text


def _constant(text: str) -> _Bad:
    return _Bad(text, "is not a number the API allows")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(text, "is not a finite number")


def _int(text: str) -> int | _Bad:
    try:
        return int(text)
    except ValueError:  # longer than sys.get_int_max_str_digits()
        return _Bad(text, "is not a number that can be read")


def lenient_loads(body: bytes) -> Any:
    """The body as Python objects, bare NaN / Infinity and unreadable numbers as ``_Bad``.

    Raises ValueError for a body that is not JSON at all (HTML, empty, cut short)."""
    try:
        return json.loads(body, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"not a JSON answer: {err}") from None


def raw_json(value: Any) -> str:
    """Compact JSON text of a leniently parsed value, bad tokens written as they were sent
    (``NaN``, ``1e999``), so a quarantined point reads as the server wrote it."""
    if type(value) is _Bad:
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + raw_json(v)
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(raw_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _shown(value: Any, limit: int = 80) -> str:
    """A value as a reason quotes it: strings with quotes, the rest as JSON text."""
    text = repr(value) if isinstance(value, str) else raw_json(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ----------------------------------------------------------------------------- one value

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_EXACT_IN_FLOAT = 2 ** 53  # every whole number up to this is a float exactly
_MISSING = object()


def read_number(value: Any) -> tuple[float | None, str | None, bool]:
    """``(number, problem, was_a_string)`` of a value where the API puts a number.

    A finite JSON number is kept; null stays None (the service's faulty point); a string
    holding exactly a decimal literal is read (and counted by the caller, since the service
    should not send one); anything else is a problem, worded to follow the value's name."""
    kind = type(value)
    if value is None or (kind is float and math.isfinite(value)):
        return value, None, False
    if kind is float:  # not from lenient_loads, which makes 1e999 a _Bad
        return None, f"{_shown(value)} is not a finite number", False
    if kind is int:
        try:
            return float(value), None, False
        except OverflowError:
            return None, f"{_shown(value)} is beyond the float range", False
    if kind is str:
        if not _DECIMAL.fullmatch(value):
            return None, f"{_shown(value)} is not a number", False
        number = float(value)
        if not math.isfinite(number):
            return None, f"{_shown(value)} is not a finite number", False
        return number, None, True
    if kind is _Bad:
        return None, f"{_shown(value)} {value.why}", False
    return None, f"{_shown(value)} is not a number", False


def read_integer(value: Any, bits: int = 64) -> tuple[int | None, str | None, bool]:
    """``(integer, problem, was_a_string)`` of a value where the API puts an integer (an id,
    an index, a precision) and the column holds ``bits`` bits (BIGINT 64, INTEGER 32).

    Read by meaning, not by JSON type, when the value is unambiguous: a JSON integer; a JSON
    number whose value is whole (``6.0``) and exact (within +-2**53: beyond it a number with a
    fraction or exponent may have been rounded on its way); a string holding a decimal
    literal whose value is whole (``"250000000"``, as proto3 JSON writes an int64, ``"2.0"``,
    ``"1e3"``), read exactly.  Not whole (``"2.5"``), not a number (``"abc"``, ``"NaN"``,
    ``true``) or outside the column is a problem; null stays None."""
    kind = type(value)
    if value is None:
        return None, None, False
    if kind is int:
        return _in_bits(value, value, bits, False)
    if kind is str:
        return _whole_string(value, bits)
    if kind is float:
        return _whole_float(value, bits)
    if kind is _Bad:
        return None, f"{_shown(value)} {value.why}", False
    return None, f"{_shown(value)} is not a number", False


def _in_bits(whole: int | Decimal, value: Any, bits: int, was_string: bool
             ) -> tuple[int | None, str | None, bool]:
    """``whole`` as an int when a ``bits``-bit signed column holds it, else the problem."""
    if -2 ** (bits - 1) <= whole < 2 ** (bits - 1):
        return int(whole), None, was_string
    return None, f"{_shown(value)} is outside int{bits}", False


def _whole_float(value: float, bits: int) -> tuple[int | None, str | None, bool]:
    if not math.isfinite(value):
        return None, f"{_shown(value)} is not a finite number", False
    if not value.is_integer():
        return None, f"{_shown(value)} is not a whole number", False
    if abs(value) > _EXACT_IN_FLOAT:
        return None, (f"{_shown(value)} is beyond 2**53, where a number written with a "
                      f"fraction or exponent is not exact"), False
    return _in_bits(int(value), value, bits, False)


def _whole_string(value: str, bits: int) -> tuple[int | None, str | None, bool]:
    if _INTEGER.fullmatch(value) and len(value) <= 20:  # the usual "250000000": no Decimal
        return _in_bits(int(value), value, bits, True)
    if not _DECIMAL.fullmatch(value):
        return None, f"{_shown(value)} is not a number", False
    try:
        exact = Decimal(value)
        whole = exact == exact.to_integral_value()
    except InvalidOperation:  # an exponent beyond what Decimal holds (1e99999999999999999999)
        return None, f"{_shown(value)} is not a number devmon can read", False
    if not whole:
        return None, f"{_shown(value)} is not a whole number", False
    return _in_bits(exact, value, bits, True)


def _timestamp_problem(message: str) -> str:
    if "without a timezone" in message:
        return "has no timezone"
    if "out of range" in message:
        return "is out of range"
    return "is not a date-time"


def _arrow_timestamp(text: str) -> int | None:
    """Microseconds Arrow reads from ``text`` (None if it cannot): what the fast path would
    have accepted, so one bad point elsewhere never changes how this one is read."""
    try:
        return pc.cast(pa.array([text], pa.string()), UTC_TIMESTAMP)[0].value
    except _ARROW_ERRORS:
        return None


def read_timestamp(text: str) -> tuple[int | None, str | None]:
    """``(microseconds since 1970 UTC, problem)`` of a date-time string, read as
    ``api_timestamps.parse_timestamp`` reads it (an offset is required) or as Arrow does."""
    try:
        return (timestamps.parse_timestamp(text) - _EPOCH) // _ONE_US, None
    except ValueError as err:
        problem = _timestamp_problem(str(err))
    if problem != "has no timezone":
        us = _arrow_timestamp(text)
        if us is not None:
            return (us, None) if TS_MIN_US <= us <= TS_MAX_US else (us, "is out of range")
    return None, problem


class _Stamps:
    """Timestamps of one answer read once each: every series of an answer repeats them."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int | None, str | None]] = {}

    def read(self, value: Any) -> tuple[int | None, str | None, str | None]:
        """``(microseconds or None, text as sent or None, problem or None)``; the problem
        names the value (``'2026-01-01T00:00:00' has no timezone``)."""
        if value is _MISSING or value is None:
            return None, None, "is missing"
        if type(value) is not str:
            text = raw_json(value)
            return None, text, f"{_shown(value)} is not a date-time"
        known = self.seen.get(value)
        if known is None:
            known = self.seen[value] = read_timestamp(value)
        us, problem = known
        if problem is None:
            return us, value, None
        return None, value, f"{_shown(value)} {problem}"


# ----------------------------------------------------------------------------- quarantine


def empty_quarantine() -> pa.Table:
    """A quarantine table without rows."""
    return QUARANTINE_SCHEMA.empty_table()


class _Quarantine:
    """Rows of an answer's quarantine table, gathered one by one on the slow path."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, key: str | None, us: int | None, ts_text: str | None, raw: str,
            reason: str) -> None:
        self.rows.append((key, us, ts_text, raw, reason))

    def table(self) -> pa.Table:
        if not self.rows:
            return empty_quarantine()
        columns = list(zip(*self.rows))
        return pa.table([pa.array(c, f.type) for c, f in zip(columns, QUARANTINE_SCHEMA)],
                        schema=QUARANTINE_SCHEMA)


# ----------------------------------------------------------------------------- duplicates


@dataclass(frozen=True)
class _Duplicates:
    """Rows of a table where some (key, id) came more than once: ``kept`` (in answer order)
    and, for each ``dropped`` row, the ``winner`` row of the same (key, id) that is kept."""

    kept: np.ndarray
    dropped: np.ndarray
    winner: np.ndarray


def _monotone_within(codes: np.ndarray, ids: np.ndarray) -> bool:
    """True when ``ids`` strictly increase (or strictly decrease) within each run of equal
    ``codes``: then no (code, id) repeats, known without sorting."""
    if len(ids) < 2:
        return True
    step = np.diff(ids)
    new_key = codes[1:] != codes[:-1]
    return bool(np.all((step > 0) | new_key)) or bool(np.all((step < 0) | new_key))


def last_wins(codes: np.ndarray, ids: np.ndarray, items_unique: bool) -> _Duplicates | None:
    """Which rows to keep so that each (code, id) appears once, the last in answer order
    winning; None when nothing repeats.

    The usual answer (one item per key, times increasing) is recognised in one pass; any
    other is sorted by (code, id) with a stable sort, so the copies of a point stay in answer
    order and the last of each run is the one kept."""
    if len(codes) < 2 or (items_unique and _monotone_within(codes, ids)):
        return None
    order = np.lexsort((ids, codes))
    c, i = codes[order], ids[order]
    repeat = (c[1:] == c[:-1]) & (i[1:] == i[:-1])  # row k and row k + 1 are one point
    if not repeat.any():
        return None
    last = np.append(~repeat, True)
    group = np.concatenate(([0], np.cumsum(~repeat)))
    winners = order[last]
    dropped, winner = order[~last], winners[group[~last]]
    in_answer_order = np.argsort(dropped, kind="stable")
    return _Duplicates(np.sort(winners), dropped[in_answer_order], winner[in_answer_order])


def _rows_differ(table: pa.Table, a: np.ndarray, b: np.ndarray, skip: tuple[str, ...]
                 ) -> np.ndarray:
    """Per pair, True when row ``a[k]`` and row ``b[k]`` of ``table`` differ in any column
    but ``skip`` (null equals null, NaN equals NaN)."""
    differ = np.zeros(len(a), dtype=bool)
    left, right = table.take(a), table.take(b)
    for name in table.column_names:
        if name in skip:
            continue
        x, y = left.column(name), right.column(name)
        same = pc.or_kleene(pc.equal(x, y), pc.and_(x.is_null(), y.is_null()))
        if pa.types.is_floating(x.type):
            same = pc.or_kleene(same, pc.and_(pc.is_nan(x), pc.is_nan(y)))
        differ |= ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return differ


def _number_text(value: float | None) -> str:
    return "null" if value is None else repr(value)


