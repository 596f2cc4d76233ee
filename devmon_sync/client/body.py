"""Reading an answer's body: its JSON, what an unreadable one is, and the shape an endpoint needs.

Bodies are parsed leniently (bare NaN/Infinity are read, not refused) and a body that is not
JSON becomes ``NOT_JSON`` rather than an exception, so the transport decides what it means:
a cut answer worth retrying, or, on first contact, an HTML page saying the address is wrong.
``body_problem`` puts such a body in words, a captive portal's sign-in page included.  The
shape checks turn an answer that parsed but is not what the API specifies into one
``ApiError`` that points at the base URL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from devmon_sync.client.errors import ApiError


NOT_JSON = object()
"""What ``parse`` and ``decode`` give for a body they cannot read (None is valid JSON)."""


def decode(decoder: Callable[[bytes], Any], content: bytes) -> Any:
    """A caller's decoding of a successful body, or ``NOT_JSON`` when it cannot read it."""
    try:
        return decoder(content)
    except ValueError:
        return NOT_JSON


def parse(content: bytes) -> Any:
    """The JSON of a body, or ``NOT_JSON`` (a cut or foreign body: the caller decides).
    Bare NaN/Infinity tokens, which some servers write, are read (by Python's json) rather
    than refused, so that one odd value never makes a whole answer unreadable."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return NOT_JSON


_PORTAL_WORDS = re.compile(rb"captive|portal|hotspot|wi-?fi|sign.?in|log.?in|accept.{0,20}terms",
                           re.IGNORECASE)


def body_problem(content: bytes, scrub: Callable[[str], str] = str) -> tuple[str, str]:
    """(what the unreadable body is, what to do) in words; the start it quotes is passed
    through ``scrub`` first (the transport's: the key out of it, before it is cut short)."""
    head = content.lstrip()[:2000]
    if not head:
        return "an empty body", "The service or a proxy dropped the answer; try again later."
    if head[:1] == b"<":
        if _PORTAL_WORDS.search(head):
            return ("a web page that looks like a network's sign-in page",
                    "A captive portal (hotel, site or mobile Wi-Fi) may be in the way: sign in "
                    "in a browser, then run the command again.")
        return ("an HTML page, not the API's JSON",
                "A proxy or web server answered instead of the API: check the base URL.")
    quoted = scrub(head.decode("latin-1")).encode("latin-1")[:40]  # bytes kept as they are
    return (f"a body that is not valid JSON (it starts {quoted!r})",
            "The answer was damaged or cut on the way; if this persists, tell the service's "
            "operators.")


def items_of(answer: Any, method: str, path: str) -> list[dict]:
    """The ``items`` list every list answer wraps its items in, or ApiError if there is none."""
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise _bad_shape(method, path, "an object with an 'items' list")
    return answer["items"]


def expect_keys(answer: Any, keys: Sequence[str], method: str, path: str) -> dict:
    """The answer itself when it is an object with all of ``keys``, else ApiError."""
    if not isinstance(answer, dict) or any(k not in answer for k in keys):
        raise _bad_shape(method, path, "an object with " + ", ".join(repr(k) for k in keys))
    return answer


def _bad_shape(method: str, path: str, wanted: str) -> ApiError:
    return ApiError(f"{method} {path}: the answer is not {wanted} as the API specifies. Check "
                    f"that the base URL points at a Device Monitoring API /v1.", status=200,
                    method=method, path=path)
