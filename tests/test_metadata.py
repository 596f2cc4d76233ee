"""What `pip install .` gives: complete package metadata, both commands, a CHANGELOG entry for
the version, and no placeholder anywhere a user or an index would show it."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import devmon_sync

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDERS = re.compile(r"example\.(com|org)|your[-_ ]?(org|name)|TODO|FIXME|xxx|<.*?>|"
                          r"placeholder|changeme", re.I)


def test_the_metadata_is_complete_and_placeholder_free():
    meta = metadata.metadata("devmon")
    assert meta["Version"] == devmon_sync.__version__
    assert meta["Summary"] and meta["Requires-Python"] == ">=3.11"
    assert meta["License-Expression"] == "MIT"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    classifiers = meta.get_all("Classifier") or []
    for wanted in ("Intended Audience :: End Users/Desktop", "Environment :: X11 Applications :: Qt",
                   "Programming Language :: Python :: 3.11"):
        assert wanted in classifiers
    assert meta["Description-Content-Type"] == "text/markdown"
    fields = [meta["Summary"], meta["Author"] or "", *(meta.get_all("Keywords") or []),
              *(meta.get_all("Project-URL") or []), *classifiers]
    assert not [f for f in fields if PLACEHOLDERS.search(f)], fields
    for url in meta.get_all("Project-URL") or []:  # where there are URLs, real ones
        assert re.match(r"^[\w ]+, https://[\w.-]+\.\w+/", url), url


def test_both_commands_are_installed_and_the_version_is_printed():
    eps = {ep.name: ep for ep in metadata.entry_points(group="console_scripts")}
    gui = {ep.name: ep for ep in metadata.entry_points(group="gui_scripts")}
    assert eps["devmon"].value == "devmon_sync.cli:main"
    assert gui["devmon-gui"].value == "gui.commands:main"
    out = subprocess.run([sys.executable, "-m", "devmon_sync.cli", "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"devmon {devmon_sync.__version__}"


def test_the_changelog_has_the_version_and_the_licence_file_ships():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(devmon_sync.__version__)}\]", changelog, re.M)
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_windows_installer_script_agrees_with_the_app_and_the_spec():
    """What cannot be run here (no Windows) is at least kept consistent: the installer's
    shortcuts carry the app's task-bar identity, and every file it names exists."""
    from gui.app import APP_USER_MODEL_ID

    iss = (ROOT / "packaging" / "windows" / "devmon.iss").read_text()
    ids = re.findall(r'AppUserModelID: "([^"]+)"', iss)
    assert ids and set(ids) == {APP_USER_MODEL_ID}
    here = ROOT / "packaging" / "windows"
    for name in re.findall(r"^(?:SetupIconFile|LicenseFile)=(.+)$", iss, re.M):
        assert (here / name.replace("\\", "/")).is_file(), name
    spec = (ROOT / "packaging" / "devmon.spec").read_text()
    assert 'name="devmon-gui"' in spec and "devmon-gui.exe" in iss
    ps1 = (ROOT / "packaging" / "build.ps1").read_text()
    assert "packaging\\devmon.spec" in ps1 and "build\\dist" in ps1
    assert "build\\dist\\devmon\\*" in iss.replace("..\\..\\", "")
