"""The desktop app built by packaging/devmon.spec (PyInstaller, one folder) works on its own.

The app is built once into a temporary folder (about 40 s on two cores; skipped where
PyInstaller is not installed: it is a build tool, not a dependency) and its executables are run
in a clean environment: minimal PATH, no PYTHONPATH, no PROJ_DATA/PROJ_LIB, HOME and cwd in a
temporary folder, so nothing can come from the venv.  ``DEVMON_FROZEN_APP=<dist>/devmon``
tests an app built elsewhere (e.g. by packaging/build.sh) instead of building one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import devmon_sync

pytest.importorskip("PyInstaller", reason="PyInstaller builds the desktop app: pip install pyinstaller")

pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "packaging" / "devmon.spec"
EXE_SUFFIX = ".exe" if sys.platform == "win32" else ""


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Path:
    """The built one-folder app (``.../devmon``)."""
    given = os.environ.get("DEVMON_FROZEN_APP")
    if given:
        return Path(given).resolve()
    build = tmp_path_factory.mktemp("pyinstaller")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
         str(SPEC), "--distpath", str(build / "dist"), "--workpath", str(build / "work")],
        cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    print(f"PyInstaller build: {time.monotonic() - started:.0f} s")
    return build / "dist" / "devmon"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("frozen-home")


def clean_env(home: Path) -> dict[str, str]:
    env = {"PATH": os.pathsep.join(["/usr/bin", "/bin"]), "HOME": str(home),
           "USERPROFILE": str(home), "QT_QPA_PLATFORM": "offscreen", "LANG": "C.UTF-8",
           "DEVMON_DATA_DIR": str(home / "data"), "DEVMON_LOG_DIR": str(home / "logs"),
           "XDG_CONFIG_HOME": str(home / "config")}
    for name in ("SYSTEMROOT", "WINDIR", "TEMP", "TMP"):  # Windows cannot start without them
        if name in os.environ:
            env[name] = os.environ[name]
    assert not {"PYTHONPATH", "PYTHONHOME", "PROJ_DATA", "PROJ_LIB"} & env.keys()
    return env


def run(app: Path, home: Path, *args: str, timeout: float = 300,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(app / ("devmon" + EXE_SUFFIX)), *args], cwd=home,
                          env=env or clean_env(home), capture_output=True, text=True,
                          timeout=timeout)


USER_LIBRARY_PATH = "/opt/user-libs"  # what the user had before starting the app
FAKE_OPENER = """#!/bin/sh
env > "$(dirname "$0")/opener-env.txt"
printf '%s\\n' "$@" > "$(dirname "$0")/opener-args.txt"
"""


@pytest.fixture(scope="module")
def demo(app, home) -> Path:
    """``devmon demo --open`` run headless by the frozen app: its output folder.  On Linux a
    stand-in ``xdg-open`` on the PATH records how the PDF viewer would be started."""
    out = home / "demo"
    env = clean_env(home)
    args = ["demo", "--dir", str(out), "--sites", "1", "--devices", "4", "--days", "10"]
    if sys.platform.startswith("linux"):
        opener = home / "bin" / "xdg-open"
        opener.parent.mkdir(exist_ok=True)
        opener.write_text(FAKE_OPENER)
        opener.chmod(0o755)
        env.update(PATH=f"{opener.parent}{os.pathsep}{env['PATH']}",
                   LD_LIBRARY_PATH=USER_LIBRARY_PATH)
        args.append("--open")
    done = run(app, home, *args, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return out


def test_the_folder_holds_both_executables_and_the_data_they_need(app):
    internal = app / "_internal"
    assert (app / ("devmon" + EXE_SUFFIX)).is_file()
    assert (app / ("devmon-gui" + EXE_SUFFIX)).is_file()
    assert (internal / "pyproj" / "proj_dir" / "share" / "proj" / "proj.db").is_file()
    assert (internal / "devmon_sync" / "server" / "openapi.json").is_file()
    assert (internal / "matplotlib" / "mpl-data" / "matplotlibrc").is_file()
    assert list(internal.glob("keyring-*.dist-info/entry_points.txt")), "keyring backends"
    platforms = {p.name for p in (internal / "PySide6").rglob("platforms/*")}
    assert any("offscreen" in name for name in platforms), platforms
    if sys.platform.startswith("linux"):
        assert any("xcb" in name for name in platforms), platforms
        assert any("wayland" in name for name in platforms), platforms
    # what the spec excludes to keep the folder small
    assert not list(internal.rglob("*WebEngine*"))
    assert not (internal / "tkinter").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11's xcb: Linux")
def test_the_xcb_plugin_finds_every_library_inside_the_app(app):
    """Qt's X11 plugin must start on desktops without libxcb-cursor0 and its kin: the build
    bundles them (installed by .ci/install-system-packages), and the plugin finds them in
    the app's folder, not the system's.  The window icon ships too."""
    internal = app / "_internal"
    xcb = next((internal / "PySide6").rglob("platforms/libqxcb.so"))
    lines = subprocess.run(["ldd", str(xcb)], env={"LD_LIBRARY_PATH": str(internal)},
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert not [line for line in lines if "not found" in line], lines
    for lib in ("libxcb-cursor.so", "libxcb-icccm.so", "libxkbcommon-x11.so"):
        line = next(line for line in lines if lib in line)
        assert str(internal) in line, line
    assert (internal / "gui" / "resources" / "devmon.png").is_file()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux menu entry")
def test_linux_install_script_adds_the_app_to_the_menu_and_removes_it_again(app, tmp_path):
    """packaging/linux/install.sh: the folder in ~/.local/opt, the commands in ~/.local/bin,
    a valid menu entry starting the app by its full path, the icon; --uninstall undoes it."""
    script = ROOT / "packaging" / "linux" / "install.sh"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run(["bash", str(script), str(app)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    installed = tmp_path / ".local" / "opt" / "devmon"
    entry = tmp_path / ".local" / "share" / "applications" / "devmon.desktop"
    fields = dict(line.split("=", 1) for line in entry.read_text().splitlines() if "=" in line)
    assert fields["Exec"] == f'"{installed / "devmon-gui"}"' and fields["Icon"] == "devmon"
    assert (tmp_path / ".local/share/icons/hicolor/256x256/apps/devmon.png").is_file()
    if shutil.which("desktop-file-validate"):
        check = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True,
                               text=True)
        assert check.returncode == 0 and not check.stdout.strip(), check.stdout
    version = subprocess.run([str(tmp_path / ".local" / "bin" / "devmon"), "--version"],
                             env=env, capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"devmon {devmon_sync.__version__}"
    gone = subprocess.run(["bash", str(script), "--uninstall"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert gone.returncode == 0, gone.stderr
    assert not installed.exists() and not entry.exists()
    assert not (tmp_path / ".local" / "bin" / "devmon").is_symlink()
    missing = subprocess.run(["bash", str(script), str(tmp_path / "nothing")], env=env,
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "run packaging/build.sh first" in missing.stderr


def test_frozen_devmon_prints_its_version(app, home):
    done = run(app, home, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"devmon {devmon_sync.__version__}"


def test_frozen_demo_syncs_analyses_and_writes_the_pdf_report(demo):
    pdf = demo / "report.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert (demo / "mirror.duckdb").is_file()
    assert list((demo / "figures").glob("*.png"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xdg-open stand-in: Linux")
def test_frozen_app_starts_the_pdf_viewer_with_the_systems_libraries(app, home, demo):
    """The app's own library folder (LD_LIBRARY_PATH set by PyInstaller's bootloader) must
    not reach the system's PDF viewer, which would load the app's Qt and GLib and crash:
    the viewer gets the user's LD_LIBRARY_PATH back, and no path into the app (nor the
    bootloader's own _PYI_ variables)."""
    args = (home / "bin" / "opener-args.txt").read_text().split("\n")
    assert args[0] == str((demo / "report.pdf").resolve())
    seen = dict(line.split("=", 1) for line in
                (home / "bin" / "opener-env.txt").read_text().splitlines() if "=" in line)
    assert seen["LD_LIBRARY_PATH"] == USER_LIBRARY_PATH
    inside = str(app.resolve())
    assert not [k for k, v in seen.items() if inside in v and k not in ("PWD", "_")], seen


def test_frozen_report_draws_a_long_report_in_worker_processes(app, home):
    """``devmon report --jobs 2`` of 11 rovers (some 43 pages, past the threshold of the
    page workers; six days of epochs: the pages, not their points, are what is tested): the
    workers are the frozen executable itself, started by ``spawn``
    (``multiprocessing.freeze_support`` in the entry points), and the report is whole."""
    from pypdf import PdfReader

    from support import synced_mirror
    from devmon_sync.report import render
    from devmon_sync.server import WorldSize

    mirror = synced_mirror(home / "long.duckdb", WorldSize(sites=1, devices=60, days=6))
    out = home / "long.pdf"
    done = run(app, home, "report", "--db", str(mirror), "--site", "Illgraben slope",
               "--out", str(out), "--jobs", "2", timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    pages = len(PdfReader(out).pages)
    assert render.page_workers(2, pages) == 2, pages  # the pool drew it
    assert f"{pages} pages" in done.stdout, done.stdout[-1000:]


def test_frozen_app_keeps_matplotlibs_font_list_between_runs(app, tmp_path, demo):
    """matplotlib's font list lives in the user's cache folder and is made once: PyInstaller
    gave matplotlib a new temporary folder in every process, so every start of the app and
    every report worker listed the system's fonts again (``paths.keep_matplotlib_cache``)."""
    home = tmp_path / "home"
    home.mkdir()
    args = ("report", "--db", str(demo / "mirror.duckdb"), "--site", "Illgraben slope",
            "--out", str(tmp_path / "r.pdf"))
    done = run(app, home, *args)
    assert done.returncode == 0, done.stderr[-4000:]
    lists = list(home.rglob("devmon/matplotlib/fontlist-*.json"))  # the user's cache folder
    assert len(lists) == 1, sorted(p.name for p in home.rglob("*") if p.is_file())
    made = lists[0].stat().st_mtime_ns
    done = run(app, home, *args)
    assert done.returncode == 0, done.stderr[-4000:]
    assert lists[0].stat().st_mtime_ns == made  # read, not made again


def test_frozen_projection_uses_the_bundled_proj_db(app, home, demo):
    """EPSG:2056 (Swiss LV95) can only be built from proj.db; hiding the app's own proj.db
    must then break it, which proves no other one (the venv's, the system's) is used."""
    args = ("analyze", "--db", str(demo / "mirror.duckdb"), "--projection", "EPSG:2056", "--json")
    done = run(app, home, *args)
    assert done.returncode == 0, done.stderr[-4000:]
    frames = {f["frame"] for rover in json.loads(done.stdout) for f in rover["frames"]}
    assert "CH1903+ / LV95" in frames, frames

    proj_db = app / "_internal" / "pyproj" / "proj_dir" / "share" / "proj" / "proj.db"
    hidden = proj_db.with_name("proj.db.hidden")
    proj_db.rename(hidden)
    try:
        done = run(app, home, *args)
    finally:
        hidden.rename(proj_db)
    assert done.returncode != 0
    assert "PROJ" in done.stderr, done.stderr[-2000:]


@pytest.mark.skipif(sys.platform == "win32", reason="a windowed .exe has no console to read")
def test_frozen_gui_opens_a_mirror_offscreen(app, home, demo):
    """``devmon-gui --db MIRROR`` builds its main window and keeps running (no traceback)."""
    help_ = subprocess.run([str(app / "devmon-gui"), "--help"], cwd=home, env=clean_env(home),
                           capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and "devmon gui" in help_.stdout, help_.stderr
    proc = subprocess.Popen([str(app / "devmon-gui"), "--db", str(demo / "mirror.duckdb")],
                            cwd=home, env=clean_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(8)
        alive = proc.poll() is None
    finally:
        proc.kill()
        out, err = proc.communicate(timeout=30)
    assert alive, f"devmon-gui ended with {proc.returncode}: {err[-4000:]}"
    assert "Traceback" not in err, err[-4000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="elsewhere the OS keyring exists and a real entry would be written")
def test_frozen_keyring_finds_its_backends_and_reports_none_available(app, home):
    """Without a D-Bus session there is no Secret Service: keyring's backends (found through
    its entry points) must load in the frozen app and devmon must say so in one line; the
    profile is saved without its key (issue 30.8: the key then comes from DEVMON_API_KEY),
    and the key is written nowhere."""
    key = "frozen-key-5c2e9a7d41"
    done = subprocess.run([str(app / "devmon"), "login", "--profile", "frozen", "--base-url",
                           "https://example.com/v1", "--api-key-stdin"], input=key + "\n",
                          cwd=home, env=clean_env(home), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "no OS keyring is available" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr
    assert not [f for f in Path(home).rglob("*") if f.is_file() and key.encode() in f.read_bytes()]


def test_frozen_reference_server_serves_its_openapi_document(app, home):
    """``devmon serve`` reads devmon_sync/server/openapi.json (package data) at run time."""
    import urllib.request

    proc = subprocess.Popen([str(app / ("devmon" + EXE_SUFFIX)), "serve", "--port", "0",
                             "--devices", "2", "--days", "1"], cwd=home, env=clean_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base_url = ""
        for line in proc.stdout:
            if line.startswith("Base URL: "):
                base_url = line.split()[-1]
                break
        assert base_url, proc.stderr.read()[-4000:] if proc.poll() is not None else "no Base URL"
        with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=30) as answer:
            document = json.loads(answer.read())
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert document["openapi"].startswith("3.")
