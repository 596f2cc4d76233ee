"""``devmon login``: keep a service's address and key as a named profile, the key in the OS
keyring (``devmon_sync.credentials``), so that no key is typed on a command line."""

from __future__ import annotations

import sys

from devmon_sync.cli.args import UsageError


def add_login(sub) -> None:
    p = sub.add_parser("login", help="save a named profile: base URL here, key in the OS keyring",
                       description="Save a profile so that `devmon sync --profile NAME` needs "
                                   "no key on the command line. The key is asked for without "
                                   "echo (or read from standard input) and kept in the OS "
                                   "keyring. A keyring backend that is no OS keyring (such as "
                                   "keyrings.alt's plaintext file) is refused unless "
                                   "--allow-plaintext-keyring is given; without a keyring, set "
                                   "DEVMON_API_KEY instead.")
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
    from devmon_sync.credentials import CredentialsError, key_store, save_profile

    try:
        base_url = normalise_base_url(args.base_url, args.allow_insecure)
    except ApiError as err:  # not an address, a bad port or IPv6 literal, plain http off-host
        raise UsageError(str(err)) from None
    try:  # before asking for the key: a refused keyring is known up front
        store = key_store(allow_plaintext=args.allow_plaintext_keyring)
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
