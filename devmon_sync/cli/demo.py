"""``devmon demo``: all of devmon in one command, on the built-in reference server
(``devmon_sync.demo``), with the sync's progress bar and the summary on the terminal."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from devmon_sync.cli.args import UsageError, add_open_argument, open_written, positive_int
from devmon_sync.cli.progress import Bar


def add_demo(sub, run_devmon: Callable[[list[str]], int]) -> None:
    """``run_devmon``: runs another ``devmon`` command (the package's ``main``), for
    ``--gui``; passed in, since the package imports this module."""
    p = sub.add_parser(
        "demo", help="sync, analyse and report a realistic world from the built-in server",
        description="Start the reference server in-process, sync its world into "
                    "DIR/mirror.duckdb, analyse the GNSS rovers, write DIR/report.pdf and its "
                    "PNG figures, and print a summary. No account, no network.")
    p.add_argument("--dir", default="devmon-demo", help="output folder (default %(default)s)")
    p.add_argument("--gui", action="store_true", help="open the desktop app on the result")
    add_open_argument(p)
    p.add_argument("--sites", type=positive_int, default=6,
                   help="sites in the world (default 6)")
    p.add_argument("--devices", type=positive_int, default=48, help="devices (default 48)")
    p.add_argument("--days", type=positive_int, default=90,
                   help="days of history (default 90)")
    p.add_argument("--seed", type=int, default=42, help="world seed (default 42)")
    p.set_defaults(func=partial(run_demo, run_devmon=run_devmon))


def _check_folder(folder: Path) -> None:
    """A usage error when ``folder`` cannot be a folder: it, or a folder it would be made
    in, is a file."""
    for path in (folder, *folder.parents):
        if path.exists():
            if not path.is_dir():
                raise UsageError(f"{path} exists and is not a folder: choose another folder "
                                 f"(--dir)")
            return


def run_demo(args, run_devmon: Callable[[list[str]], int]) -> int:
    _check_folder(Path(args.dir))
    from devmon_sync.demo import DemoError, demo_pipeline

    bar = Bar(quiet=False)

    def say(text: str) -> None:
        bar.close()
        print(text, flush=True)

    try:
        result = demo_pipeline(Path(args.dir), args.sites, args.devices, args.days, args.seed,
                               say=say, on_progress=bar)
    except DemoError as err:
        raise UsageError(str(err)) from None
    print(f"Done in {result.seconds:.0f} s. Browse it: devmon gui --db {result.mirror_path}"
          + ("" if args.gui else "   (or: devmon demo --gui)"), flush=True)
    if args.open:
        open_written(result.report_pdf, "devmon demo")
    if args.gui:
        return run_devmon(["gui", "--db", str(result.mirror_path)])
    return 0
