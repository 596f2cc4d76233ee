"""``devmon serve``: the reference server (``devmon_sync.server``) on a port of this machine.

With ``devmon_sync.demo`` and the package's ``__init__``, the one module of the client side
that may import the server (tests/test_layers.py, ``SERVER_STARTERS``).
"""

from __future__ import annotations

import sys

from devmon_sync import __version__
from devmon_sync.api_contract import DEFAULT_LIMITS, RATE_LIMIT_PER_MINUTE
from devmon_sync.cli.args import (UsageError, duration, from_library, port, positive_int,
                                  positive_number, rate_limit, share, timestamp)
from devmon_sync.demo import DEMO_KEY  # the key accepted when no --api-key is given


def add_serve(sub) -> None:
    from devmon_sync.server.config import parse_api_key
    from devmon_sync.server.contracts import SUMMARIES, contract_named
    from devmon_sync.server.misbehave import parse_setting

    p = sub.add_parser("serve", help="run the reference Device Monitoring API server",
                       description="Run the reference server: a deterministic simulator of the "
                                   "Device Monitoring read API with realistic monitoring data.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=port, default=8787,
                   help="port (default %(default)s; 0: any free)")
    p.add_argument("--seed", type=int, default=42, help="world seed (default %(default)s)")
    p.add_argument("--api-key", action="append", type=from_library(parse_api_key),
                   metavar="KEY[:SITE_UUID,...]",
                   help="accepted API key; repeat for several. KEY:SITE_UUID,... limits the key "
                        f"to those sites (default: one key {DEMO_KEY!r} seeing all)")
    p.add_argument("--sites", type=positive_int, default=6,
                   help="number of sites (default %(default)s)")
    p.add_argument("--devices", type=positive_int, default=48,
                   help="number of devices (default %(default)s)")
    p.add_argument("--days", type=positive_int, default=90,
                   help="days of history before the clock's start (default %(default)s)")
    p.add_argument("--now", type=timestamp, default=None,
                   help="fix the world's clock, e.g. 2026-01-01T00:00:00Z (default: wall clock)")
    p.add_argument("--history-start", type=timestamp, default=None,
                   help="where the world's history begins, e.g. 2025-10-03T00:00:00Z: servers "
                        "started on later days with the same value serve the same world with "
                        "more data (default: --days before the clock's day)")
    p.add_argument("--rate-limit", type=rate_limit, default=RATE_LIMIT_PER_MINUTE,
                   help="requests per minute per key (default %(default)s; 0: unlimited)")
    p.add_argument("--max-points", type=positive_int, default=DEFAULT_LIMITS.max_points,
                   help="most points one POST /sensor-data returns (default %(default)s)")
    p.add_argument("--max-epochs", type=positive_int, default=DEFAULT_LIMITS.max_epochs,
                   help="most epochs one POST /sensor-data/gnss returns (default %(default)s)")
    p.add_argument("--max-range-days", type=positive_number,
                   default=DEFAULT_LIMITS.max_range_days,
                   help="longest date range of one data request (default %(default)s)")
    f = p.add_argument_group("fault injection (shares of API requests, seeded)")
    f.add_argument("--fault-error-rate", type=share, default=0.0, help="answer 500")
    f.add_argument("--fault-slow-rate", type=share, default=0.0, help="answer late")
    f.add_argument("--fault-slow-seconds", type=duration("seconds"), default=2.0,
                   help="delay of a slow answer")
    f.add_argument("--fault-drop-rate", type=share, default=0.0,
                   help="close the connection without answering")
    f.add_argument("--fault-truncate-rate", type=share, default=0.0,
                   help="cut the body off mid-stream")
    f.add_argument("--fault-drip-rate", type=share, default=0.0,
                   help="send the headers, then the body one byte every half second (a client "
                        "without an overall deadline waits for ever)")
    f.add_argument("--fault-seed", type=int, default=0, help="seed of the fault sequence")
    m = p.add_argument_group("misbehaviour (answers 200 with less or odd data, seeded)")
    m.add_argument("--misbehave", action="append", type=from_library(parse_setting), default=[],
                   metavar="NAME=VALUE",
                   help="switch on a misbehaviour; repeat for several, e.g. "
                        "--misbehave cap-points=5000 --misbehave cap-keep=newest --misbehave "
                        "nan-rate=0.01. NAME is a field of devmon_sync.server.Misbehaviour "
                        "with dashes; an unknown NAME lists them all")
    m.add_argument("--contract", type=from_library(contract_named), default="default",
                   metavar="NAME",
                   help="how the points the spec leaves unshown are realised: "
                        + "; ".join(f"{name} ({what})" for name, what in SUMMARIES.items()))
    p.add_argument("--log-requests", action="store_true", help="log each request to stderr")
    p.set_defaults(func=run_serve)


def serve_config(args):
    """The ``ServerConfig`` the options describe; a UsageError for fault rates that add up
    to more than all requests."""
    from dataclasses import replace

    from devmon_sync.server import FaultConfig, ServerConfig, WorldSize, parse_api_key
    from devmon_sync.server.misbehave import from_settings

    keys = dict(args.api_key or [parse_api_key(DEMO_KEY)])
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
                        history_start=args.history_start,
                        rate_limit_per_minute=args.rate_limit, limits=limits, faults=faults,
                        misbehaviour=from_settings(args.misbehave),
                        contract=args.contract,
                        log_requests=args.log_requests)


def run_serve(args) -> int:
    from devmon_sync.server import ReferenceServer

    config = serve_config(args)
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
