"""Where the API key comes from: the command line, the environment, or a saved profile.

Precedence, first found wins: ``--api-key``, then the ``DEVMON_API_KEY`` environment variable,
then a profile (the one named, else the profile called ``default`` if it exists).

A profile is a name, a base URL and a key.  The base URL is no secret and lives in a JSON file
in the user's config directory (``DEVMON_CONFIG_DIR`` overrides it, for tests and portable
setups); the key is a secret and lives in the operating system's keyring (service ``devmon``,
user name = profile name), never in a file devmon writes.  Machines without a keyring (servers,
CI, containers) use the environment variable instead: `devmon login` there saves the profile's
address without its key (``save_profile_without_key``), so ``--profile`` still names the
service and the key comes from ``DEVMON_API_KEY`` at each run; a run without it is told both
ways to give one.

keyring may also pick a backend that is no OS keyring: keyrings.alt's PlaintextKeyring keeps keys
base64-encoded in a file anyone who can read it can use.  ``key_store`` refuses such a backend
unless the user allows it (`devmon login --allow-plaintext-keyring`), and names it with its file
when allowed, so that nothing claims "the OS keyring" for a file.

No message, log line or repr here ever contains a key.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import keyring
import keyring.errors
import platformdirs
from keyring.backends import chainer, fail, null

APP_NAME = "devmon"
KEYRING_SERVICE = "devmon"
ENV_API_KEY = "DEVMON_API_KEY"
ENV_CONFIG_DIR = "DEVMON_CONFIG_DIR"
DEFAULT_PROFILE = "default"
PROFILES_FILE = "profiles.json"
KEY_FROM_ENVIRONMENT = "environment"
"""A profile's ``key`` in the profiles file when it keeps none: the key is DEVMON_API_KEY's."""
_PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

HOW_TO_GIVE_A_KEY = (
    "pass --api-key KEY, set the DEVMON_API_KEY environment variable, or save a profile with "
    "`devmon login`"
)


class CredentialsError(Exception):
    """No usable API key or profile; the message says which and how to give one."""


class NoKeyStore(CredentialsError):
    """No keyring devmon may keep a key in: none at all, or one that is no OS keyring and
    the user did not allow (``key_store``).  ``reason`` is the short why, for a line that
    says what was saved instead."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Profile:
    """A saved connection: the API's base URL and its key (kept out of the repr)."""

    name: str
    base_url: str
    api_key: str = field(repr=False)


# ---------------------------------------------------------------------------- resolving


def resolve_api_key(api_key: str | None, profile: str | None) -> tuple[str, str | None]:
    """The key to use and the base URL of the profile in play (None when there is none).

    An explicit key or the environment variable wins over the profile's key, but a named
    profile (or the ``default`` one) still supplies its base URL, read from the file alone so
    that a machine without a keyring can combine a profile's address with DEVMON_API_KEY.
    """
    override = _clean(api_key) or _clean(os.environ.get(ENV_API_KEY))
    if override:
        return override, _profile_base_url(profile)
    name = profile or (DEFAULT_PROFILE if DEFAULT_PROFILE in _read_profiles() else None)
    if name is None:
        raise CredentialsError(f"No API key given: {HOW_TO_GIVE_A_KEY}.")
    found = load_profile(name)
    return found.api_key, found.base_url


def _profile_base_url(name: str | None) -> str | None:
    """The named profile's base URL (an unknown name is an error), else the default's, if any."""
    profiles = _read_profiles()
    if name is None:
        return profiles.get(DEFAULT_PROFILE, {}).get("base_url")
    if name not in profiles:
        raise _unknown_profile(name, profiles)
    return profiles[name]["base_url"]


def _clean(key: str | None) -> str | None:
    """A key without surrounding whitespace (a pasted newline), or None if nothing is left."""
    key = (key or "").strip()
    return key or None


# ---------------------------------------------------------------------------- profiles


def save_profile(name: str, base_url: str, api_key: str) -> Profile:
    """Store the key in the OS keyring and the base URL in the profiles file.

    The key is stored (and read back) first: when the keyring fails, no half-made profile is
    left in the file.
    """
    base_url = _checked_address(name, base_url)
    key = _clean(api_key)
    if key is None:
        raise CredentialsError(f"Profile {name!r}: the API key is empty; give the key the "
                               f"service issued you.")
    _keyring_set(name, key)
    profiles = _read_profiles()
    profiles[name] = {"base_url": base_url}
    _write_profiles(profiles)
    return Profile(name, base_url, key)


def save_profile_without_key(name: str, base_url: str) -> str:
    """Save a profile's address alone, marked as keeping no key: where no keyring may keep
    one, ``--profile`` still names the service and the key comes from DEVMON_API_KEY at each
    run.  The keyring is not touched.  Returns the base URL as saved."""
    base_url = _checked_address(name, base_url)
    profiles = _read_profiles()
    profiles[name] = {"base_url": base_url, "key": KEY_FROM_ENVIRONMENT}
    _write_profiles(profiles)
    return base_url


def keeps_no_key(name: str) -> bool:
    """Whether the saved profile ``name`` was saved without its key (reads the file only)."""
    return _read_profiles().get(name, {}).get("key") == KEY_FROM_ENVIRONMENT


def _checked_address(name: str, base_url: str) -> str:
    """The profile name checked and its base URL, stripped; a CredentialsError for either."""
    _check_name(name)
    base_url = (base_url or "").strip()
    if not base_url.startswith(("https://", "http://")):
        raise CredentialsError(f"Profile {name!r}: {base_url!r} is not an API address; give "
                               f"one like https://monitoring.example.com/v1.")
    return base_url


def load_profile(name: str) -> Profile:
    """A saved profile with its key from the OS keyring."""
    profiles = _read_profiles()
    if name not in profiles:
        raise _unknown_profile(name, profiles)
    if profiles[name].get("key") == KEY_FROM_ENVIRONMENT:
        raise _key_not_kept(name)
    key = _keyring_get(name)
    if not key:
        raise CredentialsError(
            f"Profile {name!r} has no API key in the OS keyring (service {KEYRING_SERVICE!r}); "
            f"save it again with `devmon login --profile {name}`, or set {ENV_API_KEY}.")
    return Profile(name, profiles[name]["base_url"], key)


def list_profiles() -> list[str]:
    """Names of the saved profiles, sorted (reads the file only, never the keyring)."""
    return sorted(_read_profiles())


def delete_profile(name: str) -> None:
    """Forget a profile: its key in the keyring and its entry in the file."""
    profiles = _read_profiles()
    if name not in profiles:
        raise _unknown_profile(name, profiles)
    try:
        if profiles[name].get("key") != KEY_FROM_ENVIRONMENT:  # else no key to forget
            keyring.delete_password(KEYRING_SERVICE, name)
    except keyring.errors.PasswordDeleteError:
        pass  # already gone from the keyring: forgetting the file entry is what is left
    except keyring.errors.KeyringError as exc:
        raise _keyring_failed(exc) from None
    del profiles[name]
    _write_profiles(profiles)


def config_dir() -> Path:
    """Where the profiles file lives: $DEVMON_CONFIG_DIR, else the platform's config dir."""
    override = os.environ.get(ENV_CONFIG_DIR)
    return Path(override) if override else Path(platformdirs.user_config_dir(APP_NAME))


def profiles_path() -> Path:
    return config_dir() / PROFILES_FILE


def _unknown_profile(name: str, profiles: dict) -> CredentialsError:
    known = ", ".join(sorted(profiles)) or "none yet"
    return CredentialsError(f"No profile named {name!r} (known profiles: {known}). Save it with "
                            f"`devmon login --profile {name}`, or {HOW_TO_GIVE_A_KEY}.")


def _key_not_kept(name: str) -> CredentialsError:
    """A profile saved without its key, run without DEVMON_API_KEY: both ways to give it."""
    return CredentialsError(
        f"Profile {name!r} keeps no API key (it was saved where no OS keyring could keep "
        f"one). Set the {ENV_API_KEY} environment variable for each run (or pass --api-key); "
        f"or keep the key in a keyring: run `devmon login --profile {name}` where an OS "
        f"keyring is available, or with {ALLOW_PLAINTEXT_FLAG} to keep it in a file-backed "
        f"keyring.")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _PROFILE_NAME_RE.match(name):
        raise CredentialsError(f"{name!r} is not a usable profile name: use letters, digits, "
                               f"'.', '_' and '-' (at most 64), starting with a letter or digit.")


# ---------------------------------------------------------------------------- the file


def _read_profiles() -> dict[str, dict]:
    """The profiles file as ``{name: {"base_url": ...}}``; no file means no profiles."""
    path = profiles_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CredentialsError(f"Cannot read the profiles file {path} ({exc}); fix or delete "
                               f"it and run `devmon login` again.") from None
    profiles = data.get("profiles") if isinstance(data, dict) else None
    if not isinstance(profiles, dict) or not all(
            isinstance(p, dict) and isinstance(p.get("base_url"), str) for p in profiles.values()):
        raise CredentialsError(f"The profiles file {path} is not in devmon's format; delete it "
                               f"and run `devmon login` again.")
    return profiles


def _write_profiles(profiles: dict[str, dict]) -> None:
    """Replace the file atomically, so a crash never leaves half a file behind."""
    path = profiles_path()
    text = json.dumps({"profiles": profiles}, indent=2, sort_keys=True) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".profiles-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise CredentialsError(f"Cannot write the profiles file {path} ({exc}); check the "
                               f"permissions of {path.parent}, or set {ENV_CONFIG_DIR} to a "
                               f"writable directory.") from None


# ---------------------------------------------------------------------------- the keyring

# keyring's own backends for the operating systems' credential stores: Secret Service (GNOME
# Keyring, KWallet over D-Bus), libsecret, KWallet, macOS Keychain, Windows Credential Manager.
# Anything else (keyrings.alt's files, third-party plugins) is not counted as an OS keyring.
OS_KEYRING_MODULES = ("keyring.backends.SecretService", "keyring.backends.libsecret",
                      "keyring.backends.kwallet", "keyring.backends.macOS",
                      "keyring.backends.Windows")
ALLOW_PLAINTEXT_FLAG = "--allow-plaintext-keyring"


@dataclass(frozen=True)
class KeyStore:
    """Where keyring would put a key: its backend, whether that is an OS keyring, and the file
    it writes when it is a file-backed one."""

    backend: str  # the backend's class, dotted: keyrings.alt.file.PlaintextKeyring
    secure: bool  # an OS keyring
    file: str | None = None

    def place(self) -> str:
        """Where a key saved there is: the OS keyring, or the file and how it is kept."""
        if self.secure:
            return "the OS keyring"
        where = f"the file {self.file}" if self.file else "a store that is not an OS keyring"
        if self.backend.endswith("PlaintextKeyring"):
            return f"{where}, as plain text (base64-encoded, not encrypted)"
        return where

    def describe(self) -> str:
        """``place`` with the backend named, for a message."""
        if self.secure:
            return f"the OS keyring ({self.backend})"
        return f"{self.place()}; keyring backend {self.backend}"


def key_store(allow_plaintext: bool = False) -> KeyStore:
    """The backend a key would be saved to; a CredentialsError when there is none, or when it
    is no OS keyring and ``allow_plaintext`` is not given."""
    _require_keyring()
    backend = _storing_backend(keyring.get_keyring())
    if backend is None:
        raise _no_keyring()
    cls = type(backend)
    name = f"{cls.__module__}.{cls.__qualname__}"
    secure = cls.__module__.startswith(OS_KEYRING_MODULES)
    path = getattr(backend, "file_path", None)
    store = KeyStore(name, secure, str(path) if path else None)
    if not secure and not allow_plaintext:
        raise NoKeyStore(
            f"The keyring backend on this machine, {name}, is not an OS keyring: it would keep "
            f"the API key in {store.place()}, where anyone who can read it can use the "
            f"key. Nothing was saved. Set the {ENV_API_KEY} environment variable "
            f"instead (no profile needed), or, to store the key there all the same, run "
            f"`devmon login` again with {ALLOW_PLAINTEXT_FLAG}.",
            reason=f"the keyring backend here, {name}, is not an OS keyring (it would keep "
                   f"the key in {store.place()})")
    return store


def _storing_backend(backend):
    """The backend that set_password writes to: keyring's chainer writes to the first of its
    backends (highest priority first); None when a chain holds none."""
    if isinstance(backend, chainer.ChainerBackend):
        chain = list(backend.backends)
        return chain[0] if chain else None
    return backend



def _keyring_set(name: str, key: str) -> None:
    """Store a key and read it back: an empty chain of backends 'stores' without keeping."""
    _require_keyring()
    try:
        keyring.set_password(KEYRING_SERVICE, name, key)
        kept = keyring.get_password(KEYRING_SERVICE, name)
    except keyring.errors.KeyringError as exc:
        raise _keyring_failed(exc) from None
    if kept != key:
        raise _no_keyring()


def _keyring_get(name: str) -> str | None:
    _require_keyring()
    try:
        return keyring.get_password(KEYRING_SERVICE, name)
    except keyring.errors.KeyringError as exc:
        raise _keyring_failed(exc) from None


def _require_keyring() -> None:
    """Refuse up front on machines whose keyring backend only fails or discards (or cannot
    even be loaded: a backend forced by PYTHON_KEYRING_BACKEND without its D-Bus service
    raises RuntimeError)."""
    try:
        backend = keyring.get_keyring()
    except RuntimeError:
        raise _no_keyring() from None
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        raise _no_keyring()


def _no_keyring() -> NoKeyStore:
    return NoKeyStore(
        f"No OS keyring is available on this machine, so devmon cannot store or read a "
        f"profile's API key. Set the {ENV_API_KEY} environment variable or pass --api-key "
        f"instead.", reason="No OS keyring is available on this machine")


def _keyring_failed(exc: BaseException) -> CredentialsError:
    """A keyring failure; only its type is named: backends may quote what they were given."""
    if isinstance(exc, keyring.errors.NoKeyringError):
        return _no_keyring()
    return CredentialsError(
        f"The OS keyring refused the request ({type(exc).__name__}). Unlock it and try again, "
        f"or set the {ENV_API_KEY} environment variable or pass --api-key instead.")
