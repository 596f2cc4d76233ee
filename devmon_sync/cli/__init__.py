"""The ``devmon`` command: a thin layer of argument parsing over the library.

This module builds the parser and runs a command; each command is a module of its own
(``serve``, ``sync``, ``status``, ``login``, ``probe``, ``verify``, ``export``,
``analyze``, ``alarms``, ``report``, ``demo``), and ``args`` holds every argument type and
the options several commands share, ``progress`` the terminal's progress lines.

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

from devmon_sync import __version__  # noqa: E402
from devmon_sync.cli.alarms import add_alarms  # noqa: E402
from devmon_sync.cli.analyze import add_analyze  # noqa: E402
from devmon_sync.cli.args import UsageError  # noqa: E402
from devmon_sync.cli.demo import add_demo  # noqa: E402
from devmon_sync.cli.export import add_export  # noqa: E402
from devmon_sync.cli.login import add_login  # noqa: E402
from devmon_sync.cli.probe import add_probe  # noqa: E402
from devmon_sync.cli.progress import printable_output  # noqa: E402
from devmon_sync.cli.report import add_report  # noqa: E402
from devmon_sync.cli.serve import add_serve  # noqa: E402
from devmon_sync.cli.status import add_status  # noqa: E402
from devmon_sync.cli.sync import add_sync  # noqa: E402
from devmon_sync.cli.verify import add_verify  # noqa: E402
from devmon_sync.logs import HideFileOnly, PrintableRecords  # noqa: E402
from devmon_sync.printable import printable  # noqa: E402

#: Packages that add subcommands (``add_commands(sub)``), loaded by name so that the sync and
#: analysis never import them: ``gui.commands`` adds ``devmon gui`` and imports Qt only when
#: that command runs.  A package that is not installed simply adds nothing.
COMMAND_PLUGINS = ("gui.commands",)


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser, in the order ``devmon --help`` lists them, then the plugins'
    (``devmon gui``)."""
    parser = argparse.ArgumentParser(prog="devmon", description="Offline sync and GNSS "
                                     "deformation analysis for device monitoring data.")
    parser.add_argument("--version", action="version", version=f"devmon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_serve(sub)
    add_sync(sub)
    add_login(sub)
    add_probe(sub)
    add_status(sub)
    add_verify(sub)
    add_export(sub)
    add_analyze(sub)
    add_report(sub)
    add_alarms(sub)
    add_demo(sub, run_devmon=main)
    for name in COMMAND_PLUGINS:
        try:
            plugin = importlib.import_module(name)
        except ImportError:
            continue
        plugin.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status.  A UsageError ends it in one line and status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # the terminal: short lines only
        handler.addFilter(HideFileOnly())
        handler.addFilter(PrintableRecords())
    # libraries' notes are not the user's: matplotlib's PDF backend subsets fonts through
    # fontTools, which logs every table at INFO, and matplotlib logs "generated new
    # fontManager" the first time it runs on a machine
    for library in ("fontTools", "matplotlib"):
        logging.getLogger(library).setLevel(logging.WARNING)
    with printable_output():  # names from the service never act on the terminal
        try:
            return args.func(args)
        except UsageError as err:  # one line, even when it quotes a name with a newline
            print(f"devmon {args.command}: error: {printable(str(err))}", file=sys.stderr)
            return 2
        except Exception as err:  # noqa: BLE001 - a damaged mirror, wherever it was read
            mirror_error = _mirror_error(err, getattr(args, "db", None))
            if mirror_error is None:
                raise
            print(f"devmon {args.command}: error: {printable(mirror_error)}", file=sys.stderr)
            return 1


def _mirror_error(err: Exception, db: str | None) -> str | None:
    """The one line for a mirror the command could not use (the store's own message, or
    the damage DuckDB found in the file, wherever the command read it); None for any other
    error (a defect: its traceback is wanted)."""
    from devmon_sync.store import StoreError, damage_of, damaged_error

    if isinstance(err, StoreError):
        return str(err)
    what = damage_of(err)
    return str(damaged_error(db or "file", what)) if what else None


if __name__ == "__main__":
    sys.exit(main())
