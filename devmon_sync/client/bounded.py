"""Reading one answer within devmon's bounds on what it may cost in memory.

An answer is held whole before it is parsed, so an answer of any size was held whole: a
2 GiB answer took a sync to 2.2 GB, a gzip bomb (10 MB that decode to 10 GB) to the 3 GB
that killed it, and 3 million extra points (parsed one dict each) to 2.1 GB (audit, issue
29).  Here the body is read in pieces of ``PIECE_BYTES`` and counted as it comes: the bytes
off the wire (``Deadline.wire_bytes``, headers included) and the bytes decoded (a gzip or
deflate body is decoded piece by piece: urllib3 >= 2.6 decodes at most a piece's worth at
a time, so a bomb is stopped after one piece past the bound, whatever it would decode to).
Past ``max_bytes`` either way, reading stops and ``PastBound`` says so; the response is
closed with its connection by the caller's ``with``.  A length the answer states past the
bound is refused before any of the body is read.

``values_past`` bounds what parsing costs: the values of a data answer (each point's
fields, each point, each series) are counted by the commas between them, a C-speed count
(2 ms for a 5 MB answer of 100,000 points, against 50 ms to decode it), and an answer
with more than the bound is not parsed at all.

The bounds are devmon's (``service_profile.MAX_ANSWER_BYTES`` and ``MAX_ANSWER_VALUES``):
the transport turns ``PastBound`` into ``AnswerTooLargeError``, a "too large" the sync
answers by asking smaller windows, as it does a service's own refusal.
"""

from __future__ import annotations

import io

import numpy as np
import requests

from devmon_sync.client.deadline import Deadline

PIECE_BYTES = 256 * 1024
"""Bytes read (and, of a compressed body, decoded) at a time.  requests' ``.content`` and
``iter_content(None)`` read a whole body (or a whole HTTP chunk) in one call, so nothing
could be counted before all of it was held; a 10 kB piece cost 4x the CPU of one read on
6 MB answers (measured), 256 kB costs nothing measurable.  An urllib3 older than 2.6
decodes a compressed piece whole: at most 1032 times its size (deflate's greatest ratio),
so 260 MB, still bounded."""


class PastBound(Exception):
    """An answer went past one of devmon's bounds; ``what`` says which, in words."""

    def __init__(self, what: str, bound: str):
        super().__init__(what)
        self.what = what
        """What happened, in words ("the answer passed 64 MiB as decoded ...")."""
        self.bound = bound
        """The bound passed, in words ("64 MiB decoded", "1,500,000 values")."""


def read_body(response: requests.Response, deadline: Deadline, max_bytes: int) -> bytes:
    """The whole body of ``response`` (decoded), read as it arrives in ``PIECE_BYTES``
    pieces, each extending the attempt's deadline by its share; ``PastBound`` when the
    answer states, brings or decodes to more than ``max_bytes``."""
    stated = _stated_length(response)
    if stated is not None and stated > max_bytes:
        raise PastBound(f"the answer states a length of {size_text(stated)}, more than the "
                        f"{size_text(max_bytes)} devmon reads of one answer, so devmon did "
                        f"not read it", size_text(max_bytes))
    deadline.body_started(stated)
    body = io.BytesIO()  # grows in place; getvalue() hands its buffer over without a copy
    try:
        for piece in response.iter_content(chunk_size=PIECE_BYTES):
            body.write(piece)
            _within(body.tell(), deadline.wire_bytes, max_bytes)
            deadline.saw(body.tell())
    except PastBound:
        # freed now: the exception's traceback keeps this frame (and ``body``) alive for as
        # long as a caller holds it, and the sync asks the smaller windows while it does
        body.close()
        raise
    return body.getvalue()


def _within(decoded: int, wire: int, max_bytes: int) -> None:
    """``PastBound`` when ``wire`` (as it came) or ``decoded`` bytes passed ``max_bytes``."""
    if wire > max_bytes:
        raise PastBound(f"the answer passed {size_text(max_bytes)} as it came, the most "
                        f"devmon reads of one answer, so devmon stopped reading it",
                        size_text(max_bytes))
    if decoded > max_bytes:
        raise PastBound(
            f"the answer passed {size_text(max_bytes)} decoded (it came compressed: "
            f"{size_text(wire)} on the wire by then), the most devmon reads of one answer, "
            f"so devmon stopped reading it", f"{size_text(max_bytes)} decoded")


def values_past(content: bytes, max_values: int) -> PastBound | None:
    """``PastBound`` when a data answer holds more than ``max_values`` values, counted by
    its commas (each value after the first of a list or object follows one; a comma in a
    text counts too, which only errs on the safe side); None when it holds fewer."""
    if len(content) <= max_values:  # too short to hold that many commas
        return None
    commas = _commas(content)
    if commas <= max_values:
        return None
    return PastBound(f"the answer holds {commas:,} values, more than the {max_values:,} "
                     f"values devmon parses of one data answer, so devmon did not parse it",
                     f"{max_values:,} values")


_COUNT_PIECE = 1 << 20


def _commas(content: bytes) -> int:
    """The commas in ``content``, counted by numpy a MiB at a time (twice as fast as
    ``bytes.count``, measured on a 4.8 MB answer: 0.9 against 2.0 ms; no copy of the
    answer held beside it)."""
    view = np.frombuffer(content, np.uint8)
    return sum(int(np.count_nonzero(view[at:at + _COUNT_PIECE] == 44))
               for at in range(0, len(view), _COUNT_PIECE))


def size_text(size_bytes: int) -> str:
    """A size in binary units, as a person reads it: 4 KiB, 64 MiB, 2.5 GiB."""
    size = float(size_bytes)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "bytes" or size == int(size) \
                else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size_bytes:,} bytes"  # not reached


def _stated_length(response: requests.Response) -> int | None:
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None
