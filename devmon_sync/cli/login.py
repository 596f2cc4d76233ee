"""``devmon login``: keep a service's address and key as a named profile, the key in the OS
keyring (``devmon_sync.credentials``), so that no key is typed on a command line.  Without a
keyring that may keep it, the profile keeps its address alone and the key comes from
DEVMON_API_KEY at each run (issue 30.8: login refused, and ``--profile`` could not be used)."""

from __future__ import annotations

import sys

from devmon_sync.cli.args import UsageError


def add_login(sub) -> None:
    p = sub.add_parser("login", help="save a named profile: base URL here, key in the OS keyring",
                       description="Save a profile so that `devmon sync --profile NAME` needs "
                                   "no key on the command line. The key is asked for without "
                                   "echo (or read from standard input) and kept in the OS "
                                   "keyring. Where there is no OS keyring (or only a keyring "
                                   "backend that is none, such as keyrings.alt's plaintext "
                                   "file, unless --allow-plaintext-keyring is given), the "
                                   "profile is saved without its key, and the key comes from "
                                   "the DEVMON_API_KEY environment variable at each run.")
    p.add_argument("--profile", default="default", help="profile name (default: default)")
    p.add_argument("--base-url", required=True, help="service base URL, with or without /v1")
    p.add_argument("--api-key-stdin", action="store_true",
                   help="read the key from standard input instead of prompting")
    p.add_argument("--allow-insecure", action="store_true",
                   help="allow plain http:// to a non-loopback host")
    p.add_argument("--allow-plaintext-keyring", action="store_true",
                   help="save the key even when the keyring backend is no OS keyring but a file "
                        "(keyrings.alt): devmon then names the file that holds it")
    p.set_defaults(func=run_login)


def run_login(args) -> int:
    import getpass

    from devmon_sync.client import ApiError, normalise_base_url
    from devmon_sync.credentials import CredentialsError, NoKeyStore, key_store, save_profile

    try:
        base_url = normalise_base_url(args.base_url, args.allow_insecure)
    except ApiError as err:  # not an address, a bad port or IPv6 literal, plain http off-host
        raise UsageError(str(err)) from None
    try:  # before asking for the key: a refused keyring is known up front
        store = key_store(allow_plaintext=args.allow_plaintext_keyring)
    except NoKeyStore as err:  # the address is saved all the same; the key is not asked for
        return _save_without_key(args.profile, base_url, err.reason)
    except CredentialsError as err:
        raise UsageError(str(err)) from None
    key = sys.stdin.readline().strip() if args.api_key_stdin else \
        getpass.getpass(f"API key for profile {args.profile!r}: ").strip()
    if not key:
        raise UsageError("no API key given: nothing saved")
    try:
        save_profile(args.profile, base_url, key)
    except CredentialsError as err:
        raise UsageError(str(err)) from None
    print(f"Saved profile {args.profile!r} for {base_url}; its key is in {store.describe()}. "
          f"Use: devmon sync --profile {args.profile} --db mirror.duckdb")
    return 0


def _save_without_key(profile: str, base_url: str, why: str) -> int:
    """Where no keyring may keep the key: save the profile's address alone and say, in one
    line, why the key was not kept and where it comes from instead (DEVMON_API_KEY, set now
    or to set before each run; or a keyring)."""
    import os

    from devmon_sync import credentials

    try:
        credentials.save_profile_without_key(profile, base_url)
    except credentials.CredentialsError as err:
        raise UsageError(str(err)) from None
    env = credentials.ENV_API_KEY
    source = f"the key comes from {env} (set now) at each run" \
        if (os.environ.get(env) or "").strip() else f"set {env} to the key before each run"
    plaintext = "" if why.startswith("No OS keyring") else \
        f", or run `devmon login` again with {credentials.ALLOW_PLAINTEXT_FLAG} to keep it there"
    print(f"Saved profile {profile!r} for {base_url} without its key: {why[0].lower()}"
          f"{why[1:]}; {source}{plaintext}. Use: devmon sync --profile {profile} "
          f"--db mirror.duckdb")
    return 0
