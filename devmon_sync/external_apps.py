"""Open a file in the system's own application (PDF viewer, file manager) from devmon, frozen
or not.

Why this module: the PyInstaller app points the library search path at its own folder
(``LD_LIBRARY_PATH`` on Linux, ``SetDllDirectoryW`` on Windows, path variables set by runtime
hooks), and child processes inherit it.  A system PDF viewer started from the frozen app would
then load the app's Qt, GLib or fontconfig instead of the system's and crash or refuse to
start (PyInstaller's "Launching External Programs from the Frozen Application").  Every launch
of a system program goes through ``system_library_environment``; from source it changes
nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Seconds to wait for the opener (``xdg-open``, ``open``) to say whether it found a program.
#: One still running by then has started one: outside a desktop environment ``xdg-open``
#: runs the viewer in the foreground until it is closed, and must not hold up the caller.
OPENER_WAIT_S = 3.0
#: Prefixes of the PyInstaller bootloader's private variables (``_PYI_ARCHIVE_FILE``, ...).
BOOTLOADER_PRIVATE = ("_PYI_", "_MEIPASS")
#: Variables that name where the user is, not where to load from: left as they are.
NOT_SEARCH_PATHS = frozenset({"PWD", "OLDPWD", "_", "HOME", "USERPROFILE"})


def _bundle_dir() -> str | None:
    """The frozen app's folder of libraries (``sys._MEIPASS``), None when not frozen."""
    return getattr(sys, "_MEIPASS", None) if getattr(sys, "frozen", False) else None


def _without_bundle(value: str, bundle: str) -> str:
    """A path list (``a:b:c``) without the entries inside the app's folder."""
    root = os.path.normcase(os.path.abspath(bundle))
    keep = [p for p in value.split(os.pathsep)
            if p and not os.path.normcase(os.path.abspath(p)).startswith(root)]
    return os.pathsep.join(keep)


def system_environment(environ: dict[str, str], bundle: str) -> dict[str, str]:
    """``environ`` as a system program should get it: ``LD_LIBRARY_PATH`` back to what it was
    before the app started (``LD_LIBRARY_PATH_ORIG``), no path-list entry pointing into the
    app's folder, and none of the bootloader's own variables (another PyInstaller program
    would take them for its own)."""
    env = {k: v for k, v in environ.items() if not k.startswith(BOOTLOADER_PRIVATE)}
    if "LD_LIBRARY_PATH_ORIG" in env:
        env["LD_LIBRARY_PATH"] = env.pop("LD_LIBRARY_PATH_ORIG")
    for name, value in list(env.items()):
        if name in NOT_SEARCH_PATHS:
            continue
        if os.path.normcase(bundle) in os.path.normcase(value):
            cleaned = _without_bundle(value, bundle)
            if cleaned:
                env[name] = cleaned
            else:
                del env[name]
    return env


@contextmanager
def system_library_environment() -> Iterator[None]:
    """Within: programs started (by Qt, ``subprocess``, the shell) get the system's library
    search path, not the frozen app's; afterwards the app's own is back.  No-op from source."""
    bundle = _bundle_dir()
    if bundle is None:
        yield
        return
    saved = dict(os.environ)
    wanted = system_environment(saved, bundle)
    for name in set(saved) - set(wanted):
        del os.environ[name]
    os.environ.update(wanted)
    if sys.platform == "win32":
        import ctypes

        ctypes.windll.kernel32.SetDllDirectoryW(None)
    try:
        yield
    finally:
        if sys.platform == "win32":
            ctypes.windll.kernel32.SetDllDirectoryW(bundle)
        for name in set(os.environ) - set(saved):
            del os.environ[name]
        os.environ.update(saved)


def open_with_system(path: str | os.PathLike) -> str | None:
    """Open ``path`` (a file or folder) in the program the system has for it; None when
    started, else why not (a sentence to show the user).  For the command line; the app uses
    Qt's opener inside ``system_library_environment``."""
    target = Path(path).resolve()
    if not target.exists():
        return f"there is no {target} to open"
    with system_library_environment():
        if sys.platform == "win32":
            try:
                os.startfile(str(target))  # type: ignore[attr-defined]
            except OSError as err:
                return f"Windows could not open {target}: {err.strerror or err}"
            return None
        opener = "open" if sys.platform == "darwin" else "xdg-open"
        try:
            child = subprocess.Popen([opener, str(target)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        except OSError:
            return (f"{opener} is not installed, so no program could be started: open "
                    f"{target} yourself")
    try:
        code = child.wait(OPENER_WAIT_S)
    except subprocess.TimeoutExpired:
        return None
    if code:
        return (f"{opener} found no program for {target.name} (exit status {code}): open "
                f"{target} yourself")
    return None
