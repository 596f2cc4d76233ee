"""The ``devmon`` command: a thin layer of argument parsing over the library.

Expected failures (a port in use, a bad option value) end with one clear line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import signal
import sys
import threading


def _stopped_by_sigterm(signum, frame) -> None:
    """SIGTERM outside a sync's own handling (devmon still starting, another command): end
    as Ctrl-C would, with a message and 128 + the signal's number, not silently killed."""
    print("Stopped by SIGTERM.", file=sys.stderr)
    raise SystemExit(128 + signum)


if threading.current_thread() is threading.main_thread():  # before the heavy imports below
    signal.signal(signal.SIGTERM, _stopped_by_sigterm)

import argparse  # noqa: E402
import importlib  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402

from devmon_sync import __version__  # noqa: E402
from devmon_sync.api_contract import DEFAULT_LIMITS, RATE_LIMIT_PER_MINUTE  # noqa: E402
from devmon_sync.cli.args import UsageError, timestamp_arg  # noqa: E402
from devmon_sync.logs import HideFileOnly  # noqa: E402
from devmon_sync.cli.analyze import add_alarms, add_analyze  # noqa: E402
from devmon_sync.cli.report import add_report  # noqa: E402
from devmon_sync.cli.demo import add_demo  # noqa: E402
from devmon_sync.cli.probe import add_probe  # noqa: E402
from devmon_sync.cli.sync import add_export, add_login, add_status, add_sync  # noqa: E402
from devmon_sync.cli.verify import add_verify  # noqa: E402

DEFAULT_DEMO_KEY = "devmon-demo-key"

#: Packages that add subcommands (``add_commands(sub)``), loaded by name so that the sync and
#: analysis never import them: ``gui.commands`` adds ``devmon gui`` and imports Qt only when
#: that command runs.  A package that is not installed simply adds nothing.
COMMAND_PLUGINS = ("gui.commands",)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share between 0 and 1")
    return value


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number from 0 to 65535")
    return int(text)


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, 0 or more")
    return value


def _add_serve(sub) -> None:
    from devmon_sync.server.contracts import SUMMARIES

    p = sub.add_parser("serve", help="run the reference Device Monitoring API server",
                       description="Run the reference server: a deterministic simulator of the "
                                   "Device Monitoring read API with realistic monitoring data.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=_port, default=8787,
                   help="port (default %(default)s; 0: any free)")
    p.add_argument("--seed", type=int, default=42, help="world seed (default %(default)s)")
    p.add_argument("--api-key", action="append", metavar="KEY[:SITE_UUID,...]",
                   help="accepted API key; repeat for several. KEY:SITE_UUID,... limits the key "
                        f"to those sites (default: one key {DEFAULT_DEMO_KEY!r} seeing all)")
    p.add_argument("--sites", type=_positive, default=6, help="number of sites (default %(default)s)")
    p.add_argument("--devices", type=_positive, default=48,
                   help="number of devices (default %(default)s)")
    p.add_argument("--days", type=_positive, default=90,
                   help="days of history before the clock's start (default %(default)s)")
    p.add_argument("--now", type=timestamp_arg, default=None,
                   help="fix the world's clock, e.g. 2026-01-01T00:00:00Z (default: wall clock)")
    p.add_argument("--rate-limit", type=int, default=RATE_LIMIT_PER_MINUTE,
                   help="requests per minute per key (default %(default)s; 0: unlimited)")
    p.add_argument("--max-points", type=_positive, default=DEFAULT_LIMITS.max_points,
                   help="most points one POST /sensor-data returns (default %(default)s)")
    p.add_argument("--max-epochs", type=_positive, default=DEFAULT_LIMITS.max_epochs,
                   help="most epochs one POST /sensor-data/gnss returns (default %(default)s)")
    p.add_argument("--max-range-days", type=_positive_number,
                   default=DEFAULT_LIMITS.max_range_days,
                   help="longest date range of one data request (default %(default)s)")
    f = p.add_argument_group("fault injection (shares of API requests, seeded)")
    f.add_argument("--fault-error-rate", type=_share, default=0.0, help="answer 500")
    f.add_argument("--fault-slow-rate", type=_share, default=0.0, help="answer late")
    f.add_argument("--fault-slow-seconds", type=_seconds, default=2.0,
                   help="delay of a slow answer")
    f.add_argument("--fault-drop-rate", type=_share, default=0.0,
                   help="close the connection without answering")
    f.add_argument("--fault-truncate-rate", type=_share, default=0.0,
                   help="cut the body off mid-stream")
    f.add_argument("--fault-drip-rate", type=_share, default=0.0,
                   help="send the headers, then the body one byte every half second (a client "
                        "without an overall deadline waits for ever)")
    f.add_argument("--fault-seed", type=int, default=0, help="seed of the fault sequence")
    m = p.add_argument_group("misbehaviour (answers 200 with less or odd data, seeded)")
    m.add_argument("--misbehave", action="append", type=_misbehave_setting, default=[],
                   metavar="NAME=VALUE",
                   help="switch on a misbehaviour; repeat for several, e.g. "
                        "--misbehave cap-points=5000 --misbehave cap-keep=newest --misbehave "
                        "nan-rate=0.01. NAME is a field of devmon_sync.server.Misbehaviour "
                        "with dashes; an unknown NAME lists them all")
    m.add_argument("--contract", type=_contract_name, default="default", metavar="NAME",
                   help="how the points the spec leaves unshown are realised: "
                        + "; ".join(f"{name} ({what})" for name, what in SUMMARIES.items()))
    p.add_argument("--log-requests", action="store_true", help="log each request to stderr")
    p.set_defaults(func=_run_serve)


def _contract_name(text: str):
    """One ``--contract NAME``, checked at once so argparse reports it in one line."""
    from devmon_sync.server.contracts import contract_named

    try:
        return contract_named(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _misbehave_setting(text: str) -> tuple[str, object]:
    """One ``--misbehave NAME=VALUE``, checked at once so argparse reports it in one line."""
    from devmon_sync.server.misbehave import parse_setting

    try:
        return parse_setting(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _serve_config(args):
    from dataclasses import replace

    from devmon_sync.server import FaultConfig, ServerConfig, WorldSize, parse_api_key
    from devmon_sync.server.misbehave import from_settings

    try:
        keys = dict(parse_api_key(k) for k in (args.api_key or [DEFAULT_DEMO_KEY]))
    except ValueError as err:
        raise UsageError(f"--api-key: {err}") from None
    if args.rate_limit < 0:
        raise UsageError("--rate-limit must be 0 (unlimited) or a positive number per minute")
    faults = FaultConfig(args.fault_error_rate, args.fault_slow_rate, args.fault_slow_seconds,
                         args.fault_drop_rate, args.fault_truncate_rate, args.fault_seed,
                         drip_rate=args.fault_drip_rate)
    if sum((faults.error_rate, faults.slow_rate, faults.drop_rate, faults.truncate_rate,
            faults.drip_rate)) > 1:
        raise UsageError("the fault rates add up to more than 1: lower them")
    limits = replace(DEFAULT_LIMITS, max_points=args.max_points, max_epochs=args.max_epochs,
                     max_range_days=args.max_range_days)
    return ServerConfig(host=args.host, port=args.port, seed=args.seed, api_keys=keys,
                        size=WorldSize(args.sites, args.devices, args.days), now=args.now,
                        rate_limit_per_minute=args.rate_limit, limits=limits, faults=faults,
                        misbehaviour=from_settings(args.misbehave),
                        contract=args.contract,
                        log_requests=args.log_requests)


def _run_serve(args) -> int:
    from devmon_sync.server import ReferenceServer

    config = _serve_config(args)
    try:
        server = ReferenceServer(config)
    except OSError as err:
        raise UsageError(f"cannot listen on {config.host}:{config.port} ({err.strerror}): "
                         f"pick another port with --port, or stop what is using it") from None
    keys = ", ".join(sorted(config.api_keys))
    print(f"devmon reference server {__version__}: seed {config.seed}, "
          f"{len(server.app.world.sites)} sites, {len(server.app.world.devices)} devices, "
          f"{config.size.days} days of history", flush=True)
    print(f"Base URL: {server.base_url}", flush=True)
    print(f"API key(s): {keys}  (send as header 'x-api-key: <key>')", flush=True)
    first = sorted(config.api_keys)[0]
    print(f"Try: curl -H 'x-api-key: {first}' {server.base_url}/sites", flush=True)
    print("Stop with Ctrl+C.", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("Stopped.", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="devmon", description="Offline sync and GNSS "
                                     "deformation analysis for device monitoring data.")
    parser.add_argument("--version", action="version", version=f"devmon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(sub)
    add_sync(sub)
    add_login(sub)
    add_probe(sub)
    add_status(sub)
    add_verify(sub)
    add_export(sub)
    add_analyze(sub)
    add_report(sub)
    add_alarms(sub)
    add_demo(sub)
    for name in COMMAND_PLUGINS:
        try:
            plugin = importlib.import_module(name)
        except ImportError:
            continue
        plugin.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # the terminal: short lines only
        handler.addFilter(HideFileOnly())
    # matplotlib's PDF backend subsets fonts through fontTools, which logs every table at INFO
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"devmon {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
