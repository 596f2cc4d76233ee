"""`devmon demo` end to end, as a new user runs it: its own process, a fresh folder, the
in-process reference server, the sync, the analysis, the report and its PNGs."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time

import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries

from support import synced_mirror


def test_demo_syncs_analyses_and_reports_in_one_command(tmp_path):
    out = tmp_path / "demo"
    started = time.monotonic()
    # --gui at the end opens the desktop app on the result; a timer closes it once the event
    # loop runs (the window has opened the file by then)
    code = ("import sys; from PySide6.QtCore import QTimer; from gui.app import make_app; "
            "app = make_app(); "
            "QTimer.singleShot(2000, lambda: [w.close() for w in app.topLevelWidgets()]); "
            "from devmon_sync.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen",
           "DEVMON_GUI_SETTINGS": str(tmp_path / "settings.ini"),
           "DEVMON_CONFIG_DIR": str(tmp_path / "config")}
    # 12 devices, 30 days: the world's 6 rovers (one accelerating), a 27-page report
    r = subprocess.run([sys.executable, "-c", code, "demo", "--dir", str(out), "--devices",
                        "12", "--days", "30", "--gui"], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path, env=env)
    seconds = time.monotonic() - started
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    text = r.stdout
    synced = re.search(r"Synced .*: ([\d,]+) readings and ([\d,]+) GNSS epochs", text)
    assert synced, text
    with Mirror.open(out / "mirror.duckdb", read_only=True) as m:
        readings = m._row("SELECT count(*) FROM readings")[0]
        epochs = m._row("SELECT count(*) FROM gnss_epochs")[0]
        rovers = [d for d in queries.gnss_devices(m) if d.epochs]
        levels = queries.alarm_levels(m, rovers[0].serial_number)
    assert int(synced.group(1).replace(",", "")) == readings > 0
    assert int(synced.group(2).replace(",", "")) == epochs > 0
    assert levels["displacement"] and levels["velocity"]  # the example levels
    for rover in rovers:  # every rover is in the summary, moving or stable
        assert re.search(rf"(moving|stable)\s+.*{rover.serial_number}", text), rover
    assert "gnss-accelerating" in text.split("moving", 1)[1]
    pdf = out / "report.pdf"
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 50_000
    pngs = sorted((out / "figures").glob("*.png"))
    assert len(pngs) >= len(rovers)
    assert f"{pdf}" in text and "devmon gui --db" in text
    # the GUI opened the demo's mirror (it remembers it as the last file)
    assert str((out / "mirror.duckdb").resolve()) in (tmp_path / "settings.ini").read_text()
    print(f"devmon demo (12 devices, 30 days) took {seconds:.1f} s")


def test_demo_refuses_a_file_as_its_folder(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "demo", "--dir", str(target)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "is not a folder" in r.stderr and "Traceback" not in r.stderr


def test_a_demo_folder_under_a_file_is_one_message_on_every_path(tmp_path):
    """The app's Help → Run the demo reaches the pipeline without the CLI's checks."""
    from devmon_sync.demo import DemoError, demo_pipeline

    (tmp_path / "file").write_text("x")
    with pytest.raises(DemoError, match="choose another folder"):
        demo_pipeline(tmp_path / "file" / "demo", say=lambda _line: None)


def test_the_summary_of_a_small_world_has_no_1_sites_and_no_nan_rates(tmp_path):
    """`devmon demo --sites 1 --days 10` said "set on the 1 sites of the 6 GNSS rovers" and
    "nan ±  nan mm/yr" for the rovers whose ten days give MIDAS no rate."""
    from devmon_sync import demo

    mirror = synced_mirror(tmp_path / "mirror.duckdb", WorldSize(sites=1, devices=8, days=10))
    lines: list[str] = []
    summaries = demo.rovers_by_rate(demo._analyse(mirror, lines.append))
    demo._print_rovers(summaries, lines.append)
    text = "\n".join(lines)
    assert "Example alarm levels set on the site of the 6 GNSS rovers:" in text, text
    assert "nan" not in text, text
    no_rate = [s for s in summaries
               if not math.isfinite(s["velocity_mm_per_yr"].get("horizontal", [math.nan])[0])]
    assert no_rate, "the world should have rovers without a rate"
    for s in no_rate:
        [line] = [ln for ln in lines if s["serial_number"] in ln]
        assert "no rate (record too short)" in line, line
