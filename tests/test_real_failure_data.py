"""The real slope-failure records in ``benchmarks/data/`` are well formed: every CSV is
listed in ``SOURCES.md`` (and every listed one exists), times are UTC ISO-8601 and strictly
increasing, displacements finite, and the known failure time comes after the last reading.
Cheap: no forecast is run (``benchmarks/bench_real_failures.py`` does that)."""

from __future__ import annotations

import csv
import math
import re
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
COLUMNS = ("file", "case", "event", "failure_time_utc", "failure_uncertainty_hours")
UTC_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?Z")


def listed_cases(sources: Path = DATA / "SOURCES.md") -> list[dict[str, str]]:
    """The rows of SOURCES.md's table of cases (parsed here independently of the
    benchmark's own reader, which a test below compares with this)."""
    lines = [ln.strip() for ln in sources.read_text(encoding="utf-8").splitlines()]
    cells = [[c.strip().strip("`") for c in ln.strip("|").split("|")] for ln in lines]
    start = next(i for i, c in enumerate(cells) if tuple(c) == COLUMNS)
    rows = []
    for line, row in zip(lines[start + 2:], cells[start + 2:], strict=True):
        if not line.startswith("|"):
            break
        rows.append(dict(zip(COLUMNS, row, strict=True)))
    return rows


def utc(text: str) -> datetime:
    if not UTC_TIME.fullmatch(text):
        raise ValueError(f"{text!r} is not ISO-8601 UTC")
    return datetime.fromisoformat(text)


def problems(path: Path, failure_time: datetime) -> list[str]:
    """What is wrong with one record's CSV (empty when it is well formed)."""
    found = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        if header[:2] != ["time_utc", "displacement_mm"] or header[2:] not in ([], ["note"]):
            return [f"header {header} is not time_utc,displacement_mm[,note]"]
        rows = list(reader)
    if len(rows) < 3:
        found.append(f"only {len(rows)} readings")
    previous = None
    for i, row in enumerate(rows, start=2):
        if len(row) != len(header):
            found.append(f"line {i}: {len(row)} fields, header has {len(header)}")
            continue
        try:
            t = utc(row[0])
        except ValueError as exc:
            found.append(f"line {i}: {exc}")
            continue
        try:
            x = float(row[1])
        except ValueError:
            x = math.nan
        if not math.isfinite(x):
            found.append(f"line {i}: displacement {row[1]!r} is not a finite number")
        if previous is not None and t <= previous:
            found.append(f"line {i}: time {row[0]} does not increase")
        previous = t
    if previous is not None and previous >= failure_time:
        found.append(f"last reading {previous.isoformat()} is not before the failure "
                     f"{failure_time.isoformat()}")
    return found


def test_every_csv_is_listed_and_every_listed_csv_exists():
    listed = {row["file"] for row in listed_cases()}
    on_disk = {p.name for p in DATA.glob("*.csv")}
    assert listed, "SOURCES.md lists no case"
    assert listed == on_disk, (f"listed but missing: {sorted(listed - on_disk)}; "
                               f"on disk but not listed: {sorted(on_disk - listed)}")


@pytest.mark.parametrize("row", listed_cases(), ids=lambda r: r["file"])
def test_a_record_is_well_formed(row):
    assert row["case"] and row["event"], f"{row['file']}: case and event must be named"
    assert float(row["failure_uncertainty_hours"]) >= 0
    assert problems(DATA / row["file"], utc(row["failure_time_utc"])) == []


def test_the_checks_see_a_malformed_record(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time_utc,displacement_mm,note\n2014-01-02T00:00:00Z,1,\n"
                   "2014-01-01T00:00:00Z,nan,\n2014-01-03 00:00,2,\n"
                   "2014-01-05T00:00:00Z,3,\n", encoding="utf-8")
    found = problems(bad, utc("2014-01-04T00:00:00Z"))
    assert any("does not increase" in p for p in found)
    assert any("not a finite number" in p for p in found)
    assert any("not ISO-8601 UTC" in p for p in found)
    assert any("not before the failure" in p for p in found)


def test_the_benchmark_reads_the_same_cases():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_real_failures as bench

    cases = bench.load_cases()
    assert [c.file for c in cases] == [r["file"] for r in listed_cases()]
    for case in cases:
        rec = bench.load_record(DATA / case.file)
        assert rec.t.size >= 3 and str(rec.t.dtype) == "datetime64[ns]"
