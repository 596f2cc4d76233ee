"""Run `devmon` commands as `python -m devmon_sync` runs them, each in a fork of one warm
process: a fresh process per command (its own state, files, exit status, stdout and stderr),
without paying Python's start and devmon's imports (about a second) each time.  For tests
that run a hundred commands which fail at once (``test_bad_arguments``).

Protocol, one JSON object per line: in {"argv": [...], "cwd": ..., "stdout": path, "stderr":
path}; out {"returncode": int}.  What the child prints is in the two files.  The child does
what ``devmon_sync/__main__.py`` and the interpreter do: ``sys.exit(main())``, a traceback on
stderr and status 1 for an exception nobody caught.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _child(request: dict) -> int:
    from devmon_sync.cli import main

    os.chdir(request["cwd"])
    sys.stdin = open(os.devnull)  # the parent's stdin carries the next requests
    os.dup2(sys.stdin.fileno(), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    try:
        code = main(request["argv"])
    except SystemExit as stop:  # argparse's errors, and sys.exit in a command
        code = stop.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter does with an uncaught one
        traceback.print_exc()
        code = 1
    return 0 if code is None else int(code)


#: What the commands import when they run, imported once before the forks (not Qt: `devmon
#: gui` is only given bad options here).
WARM = ("devmon_sync.cli", "devmon_sync.report", "devmon_sync.report.render",
        "devmon_sync.sync.engine", "devmon_sync.server", "devmon_sync.analyze.rovers",
        "devmon_sync.store.export", "matplotlib.backends.backend_pdf",
        "matplotlib.backends.backend_agg")


def serve() -> None:
    import importlib

    for name in WARM:
        importlib.import_module(name)

    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
