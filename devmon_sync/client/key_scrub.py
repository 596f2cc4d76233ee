"""The API key scrubbed out of text that came from the service, in whatever form it came.

A service (or a proxy in front of it) may echo the key in an error message: verbatim, but also
base64-encoded (an ``Authorization: Basic`` value of "user:KEY", a "Bearer KEY" token, a token
it minted from the key), URL-encoded (a query string it logs), or as hex.  Any of these kept in
the sync log, the mirror or a terminal is the key to whoever decodes it (audit: a base64 echo
reached all of them).  ``KeyScrubber`` finds every such form: the transport passes every text
of the service through it before anything else of devmon sees it.

Base64 of a text that merely contains the key depends on where in the text the key stands
(its offset modulo 3), so for each of the three offsets the run of base64 characters that
encode only key bytes is found; the whole base64 token holding such a run is replaced.  Shorter
runs than ``MIN_CORE_CHARS`` are not looked for: they occur in ordinary text.
"""

from __future__ import annotations

import base64
import re

PLACEHOLDER = "<api key>"
MIN_KEY_CHARS = 4
"""Shorter "keys" occur in ordinary words: scrubbing them would garble every message."""
MIN_CORE_CHARS = 8
"""Fewest base64 characters of the key looked for inside a longer base64 token."""
_B64_CHARS = "A-Za-z0-9+/_-"


class KeyScrubber:
    """Replaces the key, in any of its common encodings, by ``PLACEHOLDER``.

    Two linear passes (a hostile message may be megabytes long): the key with any of its
    characters percent-encoded (verbatim is the case of none) and its hex; then every base64
    token, replaced whole when it holds a run of the key's base64."""

    def __init__(self, key: str) -> None:
        usable = len(key) >= MIN_KEY_CHARS
        self._forms = _literal_forms(key) if usable else []
        self._plain = _plain_pattern(key) if usable else None
        self._cores = _cores_pattern(key.encode()) if usable else None

    def __call__(self, text: str) -> str:
        """``text`` with every form of the key replaced."""
        if self._plain is None or self._cores is None or not text:
            return text
        text = self._plain.sub(PLACEHOLDER, text)
        cores = self._cores
        return _TOKEN.sub(lambda m: PLACEHOLDER if cores.search(m.group()) else m.group(),
                          text)

    def forms(self) -> list[str]:
        """The key and its encoded forms as plain strings (longest first), for a log filter
        that masks literal secrets in whatever else is logged."""
        return list(self._forms)


_TOKEN = re.compile(f"[{_B64_CHARS}]+=*")


def _base64_cores(raw: bytes) -> list[bytes]:
    """For each offset of the key in a longer text, the key bytes that fill whole base64
    groups there; and the key alone, whose encoding is exact."""
    cores = [raw]
    for offset in range(3):
        body = raw[offset:]
        body = body[:len(body) // 3 * 3]
        if len(body) // 3 * 4 >= MIN_CORE_CHARS:
            cores.append(body)
    return cores


def _encoded(raw: bytes) -> set[str]:
    """The base64 of each core, in the standard and URL-safe alphabets, without padding."""
    out = set()
    for core in _base64_cores(raw):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            out.add(encode(core).decode().rstrip("="))
    return out


def _cores_pattern(raw: bytes) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(c) for c in sorted(_encoded(raw), key=len,
                                                            reverse=True)))


def _plain_pattern(key: str) -> re.Pattern[str]:
    """The key with any of its characters percent-encoded, in either case; its hex."""
    percent = "".join(f"(?:{re.escape(c)}|%(?i:{ord(c):02x}))" for c in key)
    return re.compile(f"(?i:{key.encode().hex()})|{percent}")


def _literal_forms(key: str) -> list[str]:
    raw = key.encode()
    upper = "".join(c if c.isalnum() or c in "-._~" else f"%{ord(c):02X}" for c in key)
    lower = "".join(c if c.isalnum() or c in "-._~" else f"%{ord(c):02x}" for c in key)
    forms = {key, upper, lower, raw.hex(), raw.hex().upper(), *_encoded(raw)}
    return sorted(forms, key=len, reverse=True)
