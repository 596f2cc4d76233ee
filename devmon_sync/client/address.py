"""The API's address: checking a base URL as given, and the other form it may answer at.

The key is sent with every request, so an address is refused when the key would cross the
network in clear (plain http off loopback), and its text is never echoed back in a message
(a key pasted into the wrong argument would be shown).  The spec's descriptions differ on
whether paths carry the ``/v1`` prefix, so the client may try the address with the version
segment added or taken off (``other_forms``).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import SplitResult, urlsplit, urlunsplit

from devmon_sync.client.errors import ApiError, InsecureUrlError


def normalise_base_url(base_url: str, allow_insecure: bool = False) -> str:
    """``https://host[:port]/path`` without a trailing slash; refuse clear text off-host.

    The key is sent with every request, so plain http is allowed only where it never leaves
    the machine (loopback) unless the caller explicitly accepts the risk.
    """
    text = (base_url or "").strip()
    parts = _split_address(text)
    # The text itself is never echoed: a key passed in the wrong argument would be shown.
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError("The base URL is not an API address: give one that starts with "
                       "https://, like https://monitoring.example.com/v1.")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ApiError(f"The base URL for {parts.hostname} carries a query, a fragment or a "
                       f"user name: give only the API's address, like "
                       f"https://monitoring.example.com/v1 (the key goes in --api-key).")
    if parts.scheme == "http" and not allow_insecure and not _is_loopback(parts.hostname):
        raise InsecureUrlError(
            f"Refusing plain http to {parts.hostname}: the API key would cross the network "
            f"unencrypted (plain http goes only to localhost or a loopback address written "
            f"out, like 127.0.0.1). Use an https:// address, or pass --allow-insecure if you "
            f"accept the risk.")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _split_address(text: str) -> SplitResult:
    """``urlsplit`` of a base URL whose host and port are checked, or ApiError saying what
    cannot be read (a port out of range or not a number, a broken IPv6 literal)."""
    example = "like https://monitoring.example.com/v1"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError as exc:
        what = "a broken IPv6 address in brackets" if "IPv6" in str(exc) or "[" in text \
            else "a port that is not a number from 1 to 65535"
        raise ApiError(f"The base URL has {what}: give the API's address, {example}.") \
            from None
    host = parts.hostname or ""
    if "[" in parts.netloc and not _is_ip(host):
        raise ApiError(f"The base URL has a broken IPv6 address in brackets: give the API's "
                       f"address, {example}.")
    if parts.port == 0:
        raise ApiError(f"The base URL has a port that is not a number from 1 to 65535: give "
                       f"the API's address, {example}.")
    return parts


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


VERSION_SEGMENT = "/v1"
"""The spec's version segment (section 9): one description ends the base address with it,
others give paths with no prefix."""


def other_forms(base_url: str) -> list[str]:
    """The other place the API may answer: with the version segment, or without it."""
    if base_url.endswith(VERSION_SEGMENT):
        return [base_url[:-len(VERSION_SEGMENT)]]
    return [base_url + VERSION_SEGMENT]


def clear_text_loopback(base_url: str) -> bool:
    parts = urlsplit(base_url)
    return parts.scheme == "http" and _is_loopback(parts.hostname or "")


def _is_loopback(host: str) -> bool:
    """Whether the key, sent to ``host``, cannot leave the machine, decided from the text
    alone: a literal loopback address written plainly (127.0.0.0/8, ::1), or the name
    ``localhost`` in any case.  Nothing is resolved: DNS may answer anything, and the audit
    saw ``localhost.`` (a fully qualified name, which skips the hosts file) go to DNS and
    reach another machine.  So ``localhost.``, ``localhost.localdomain``, ``x.localhost`` and
    the short or numeric forms of an address that resolvers also accept (``127.1``,
    ``2130706433``) are not loopback here: write ``localhost`` or ``127.0.0.1``."""
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host.lower() == "localhost"
