"""Run `devmon` commands as `python -m devmon_sync` runs them, each in a fork of one warm
process: a fresh process per command (its own pid, state, environment, working folder,
stdin, stdout, stderr and exit status), without paying Python's start and devmon's imports
(about a second of CPU) each time.  The suite runs a few hundred commands; tests about the
entry point itself, signals sent to a command or the frozen app start real processes.

``Forks`` is the tests' side (``support.devmon`` holds one per test process); run as a
script this module is the warm process.  Protocol, one JSON object per line: in {"argv",
"cwd", "env", "stdin", "stdout", "stderr"} (the three streams are file paths); out
{"pid": n} once the command's process exists, then {"returncode": n, "cpu_s": x} (its CPU
seconds, its own workers' included).  The child does what ``devmon_sync/__main__.py`` and
the interpreter do: ``sys.exit(main())``, a traceback on stderr and status 1 for an
exception nobody caught, the exit handlers run at the end.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# ----------------------------------------------------------------- the warm process

#: What the commands import when they run, imported once before the forks (not Qt: the
#: commands run here are not the GUI).
WARM = ("devmon_sync.cli", "devmon_sync.report", "devmon_sync.report.render",
        "devmon_sync.sync.engine", "devmon_sync.server", "devmon_sync.analyze.rovers",
        "devmon_sync.store.export", "matplotlib.backends.backend_pdf",
        "matplotlib.backends.backend_agg")


def _redirect(fd: int, path: str, flags: int) -> None:
    target = os.open(path, flags, 0o600)
    os.dup2(target, fd)
    os.close(target)


def _child(request: dict) -> int:
    import atexit

    from devmon_sync.cli import main

    if request.get("env") is not None:
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
    os.chdir(request["cwd"])
    _redirect(0, request["stdin"] or os.devnull, os.O_RDONLY)
    sys.stdin = open(0, closefd=False)  # the warm process's stdin carries its requests
    _redirect(1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    _redirect(2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
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
    atexit._run_exitfuncs()  # what the interpreter runs on the way out (logging's flush...)
    return 0 if code is None else int(code)


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
        print(json.dumps({"pid": pid}), flush=True)
        _, status, usage = os.wait4(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                          "cpu_s": usage.ru_utime + usage.ru_stime}), flush=True)


# ----------------------------------------------------------------- the tests' side

class Forks:
    """The warm process, started with ``env`` (default: this process's environment)."""

    def __init__(self, env: dict[str, str] | None = None):
        # unbuffered: select() must see every answer line still to be read
        self._server = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, bufsize=0)
        self._files = Path(tempfile.mkdtemp(prefix="devmon-forks-"))
        self._count = 0
        self.cpu_s = 0.0  # the commands' CPU seconds so far (their own: a fork shares no clock)

    def run(self, argv: list[str], *, cwd: str | os.PathLike | None = None,
            env: dict[str, str] | None = None, input: str | bytes | None = None,
            text: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """``devmon ARGV`` as ``subprocess.run(..., capture_output=True)`` gives it: the
        command's own environment ``env`` (default: this process's now), stdin ``input``;
        on ``timeout`` the command is killed and ``subprocess.TimeoutExpired`` raised."""
        self._count += 1
        base = self._files / str(self._count)
        stdin = None
        if input is not None:
            stdin = base.with_suffix(".in")
            stdin.write_bytes(input.encode() if isinstance(input, str) else input)
        request = {"argv": [str(a) for a in argv], "cwd": str(cwd or os.getcwd()),
                   "env": dict(os.environ if env is None else env),
                   "stdin": None if stdin is None else str(stdin),
                   "stdout": str(base.with_suffix(".out")),
                   "stderr": str(base.with_suffix(".err"))}
        self._server.stdin.write((json.dumps(request) + "\n").encode())
        self._server.stdin.flush()
        pid = self._answer(60)["pid"]
        try:
            answer = self._answer(timeout)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self._answer(60)
            raise subprocess.TimeoutExpired(["devmon", *argv], timeout) from None
        code, self.cpu_s = answer["returncode"], self.cpu_s + answer["cpu_s"]
        out, err = (self._read(Path(request[k]), text) for k in ("stdout", "stderr"))
        for k in ("stdout", "stderr"):
            Path(request[k]).unlink()
        if stdin is not None:
            stdin.unlink()
        return subprocess.CompletedProcess(["devmon", *argv], code, out, err)

    def _answer(self, timeout: float) -> dict:
        ready, _, _ = select.select([self._server.stdout], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired("devmon", timeout)
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm devmon process ended ({self._server.wait()})")
        return json.loads(line)

    @staticmethod
    def _read(path: Path, text: bool) -> str | bytes:
        data = path.read_bytes()
        # as subprocess's text mode decodes: the locale's encoding, universal newlines
        return io.TextIOWrapper(io.BytesIO(data)).read() if text else data

    def close(self) -> None:
        self._server.stdin.close()
        self._server.wait(timeout=60)
        for path in self._files.iterdir():
            path.unlink()
        self._files.rmdir()


if __name__ == "__main__":
    serve()
