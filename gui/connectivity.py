"""Is the service reachable with the chosen profile?  And how the GUI connects to it at all.

The desktop app works offline on its mirror; the network matters only for a sync.  At start-up
the main window runs ``probe`` on a worker: ONE small authenticated request, a short timeout, no
retries, so that the status bar can say at once whether a sync would work, and if not, why
(offline, key refused, service down) instead of letting the user find out mid-sync.

``connect`` is the one place the GUI turns a profile into an ``ApiClient``, with the same
precedence as ``devmon sync`` (``credentials.resolve_api_key``: DEVMON_API_KEY, else the
profile's key in the OS keyring).  HTTP itself stays in ``devmon_sync.client``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from devmon_sync import service_profile as assumed
from devmon_sync.client import (ApiClient, ApiError, AuthError, ForbiddenError, InsecureUrlError,
                                NetworkError, RateLimitedError, ServiceUnavailableError)
from devmon_sync.credentials import (DEFAULT_PROFILE, ENV_API_KEY, CredentialsError,
                                     list_profiles, resolve_api_key)
from gui.timefmt import local_text

PROFILE_SETTING = "sync/profile"
"""Settings key of the profile last synced with: the one the start-up probe checks."""

OFFLINE_BROWSING = "browsing the mirror as of its last sync"
"""Ends the line of a probe that cannot sync; ``status_text`` dates it."""

PROBE_TIMEOUT_S = (3.0, 5.0)  # connect, read: the status bar should not wait longer


@dataclass(frozen=True)
class Reachability:
    """What the start-up probe found: whether a sync would reach the service, and a line for
    the status bar saying so (and what to do when not)."""

    reachable: bool
    message: str
    base_url: str | None = None


@dataclass(frozen=True)
class Connection:
    """A client ready to use and where its key came from (for messages; never the key)."""

    client: ApiClient
    key_origin: str  # "profile 'site-a'" or "DEVMON_API_KEY"


# ---------------------------------------------------------------------------- connecting


def key_origin(profile: str | None) -> str:
    """Whose key a request carries, in words: the environment variable wins (as in the CLI)."""
    if (os.environ.get(ENV_API_KEY) or "").strip():
        return ENV_API_KEY
    return f"profile {profile or DEFAULT_PROFILE!r}"


def connect(profile: str | None, base_url: str | None = None, **client_options: Any) -> Connection:
    """An ``ApiClient`` for ``profile`` (None: DEVMON_API_KEY or the default profile).

    ``base_url`` overrides the profile's address (needed when the key comes from the
    environment and no profile exists); ``client_options`` go to ``ApiClient`` (rate limit,
    timeouts, retries, ``sleep``, ``on_wait``).  Raises ``CredentialsError`` when there is no
    usable key or address and ``ApiError`` for an address the client refuses.
    """
    key, profile_url = resolve_api_key(None, profile)
    url = (base_url or "").strip() or profile_url
    if not url:
        raise CredentialsError(f"No service address for the key in {ENV_API_KEY}: enter the "
                               f"address (with or without /v1), or save a profile with New profile….")
    return Connection(ApiClient(url, key, **client_options), key_origin(profile))


def startup_profile(remembered: str | None) -> str | None:
    """The profile to probe at start: the one last synced with if it still exists, else the
    default one, else the only one; None lets DEVMON_API_KEY and the default decide."""
    try:
        names = list_profiles()
    except CredentialsError:
        return None
    if remembered in names:
        return remembered
    if DEFAULT_PROFILE in names:
        return DEFAULT_PROFILE
    return names[0] if len(names) == 1 else None


# ---------------------------------------------------------------------------- the probe


def probe(profile_name: str | None = None, base_url: str | None = None) -> Reachability:
    """One cheap authenticated request (a one-device page of GET /devices, no sensors) with a
    short timeout and no retries nor waits: at start-up a quick answer beats a sure one."""
    try:
        conn = connect(profile_name, base_url, rate_limit_per_minute=0, timeout_s=PROBE_TIMEOUT_S,
                       max_retries=0, max_server_waits=0)
    except (CredentialsError, ApiError) as err:
        return Reachability(False, _not_configured(profile_name, err))
    url = conn.client.base_url
    try:
        with conn.client as client:
            client.get("/devices", _SMALLEST_DEVICES_PAGE)
    except ApiError as err:
        return _unreachable(err, conn.key_origin, url)
    url = conn.client.base_url  # where the API answered (the given address, or with /v1)
    return Reachability(True, f"Online: {url} ({conn.key_origin})", url)


def probe_task(profile_name: str | None = None,
               base_url: str | None = None) -> Callable[[Any, Any], Reachability]:
    """``probe`` as a ``TaskRunner`` task (``fn(mirror_view, state)``; it needs neither)."""
    return lambda _mirror, _state: probe(profile_name, base_url)


_Q = assumed.DEVICES_QUERY
_SMALLEST_DEVICES_PAGE = {_Q["limit"]: 1, _Q["offset"]: 0, _Q["include_sensors"]: False,
                          _Q["include_inactive_sensors"]: False, _Q["include_formulas"]: False,
                          _Q["include_internal"]: False}


def _not_configured(profile_name: str | None, err: Exception) -> str:
    """No key or address to probe with: with no profile at all that is no error, just a start."""
    try:
        none_yet = profile_name is None and not list_profiles()
    except CredentialsError:
        none_yet = False
    if none_yet and not (os.environ.get(ENV_API_KEY) or "").strip():
        return f"No service profile yet (add one in Sync… → New profile…); {OFFLINE_BROWSING}"
    return f"Not connected: {err}"


def _unreachable(err: ApiError, origin: str, url: str) -> Reachability:
    """The status-bar line for a failed probe; a 403 or 429 still means the service is up."""
    if isinstance(err, NetworkError):
        return Reachability(False, f"Offline: no connection to {url}; {OFFLINE_BROWSING}", url)
    if isinstance(err, AuthError):
        return Reachability(False, f"The key of {origin} was refused by {url}: save it again "
                                   f"with Sync… → New profile…", url)
    if isinstance(err, ForbiddenError):
        return Reachability(True, f"Online: {url} ({origin}; this key may not list devices)",
                            url)
    if isinstance(err, RateLimitedError):
        return Reachability(True, f"Online: {url} ({origin}), but busy: the service is "
                                  f"rate-limiting this key; a sync will pace itself", url)
    if isinstance(err, ServiceUnavailableError):
        return Reachability(False, f"The service at {url} is having trouble (HTTP "
                                   f"{err.status}); {OFFLINE_BROWSING}", url)
    if isinstance(err, InsecureUrlError):
        return Reachability(False, str(err), url)
    return Reachability(False, f"{url} did not answer as a Device Monitoring API "
                               f"(HTTP {err.status}): check the profile's address", url)


# ---------------------------------------------------------------------------- texts


def status_text(reachability: Reachability, last_synced: datetime | None,
                now: datetime | None = None) -> str:
    """The status-bar label: the probe's line, with the date of the data being browsed."""
    message = reachability.message
    if last_synced is None:
        if OFFLINE_BROWSING in message:
            return message.replace(OFFLINE_BROWSING, "the mirror was never synced")
        return f"{message} · the mirror was never synced"
    when = f"{local_text(last_synced)}, {_age(last_synced, now)}"
    if OFFLINE_BROWSING in message:
        return message.replace(OFFLINE_BROWSING, f"{OFFLINE_BROWSING} ({when})")
    return f"{message} · last sync {when}"


def sync_error_text(err: ApiError, origin: str, url: str) -> str:
    """What a failed sync says in the dialog: what went wrong and what to do.  Everything
    committed before the failure is kept (each chunk commits whole)."""
    kept = "Everything committed before is kept; Sync again to resume."
    if isinstance(err, NetworkError):
        return f"No connection to {url}: check the network and that the service is up. {kept}"
    if isinstance(err, AuthError):
        return (f"The service at {url} refused the key of {origin} (HTTP 401). Save the "
                f"profile again with the right key (New profile…) or ask for a new key.")
    return f"{err} {kept}" if err.status is not None else str(err)


def _age(t: datetime, now: datetime | None) -> str:
    """'5 min ago', '3 h ago', '12 days ago'."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    seconds = max(0.0, ((now or datetime.now(timezone.utc)) - t).total_seconds())
    if seconds < 90:
        return "just now"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"
