#!/usr/bin/env python3
"""What matplotlib's font list costs a process that must make it, against one that reads it:
the desktop app made it in every process (PyInstaller's run-time hook gave matplotlib a new
temporary folder each time: the app at each start, and each report worker), and keeps it in
the user's cache folder now (``devmon_sync.paths.keep_matplotlib_cache``).

Each run is a fresh Python importing ``matplotlib.font_manager`` with a temporary HOME that
holds ``--fonts`` extra font files (copies of matplotlib's own DejaVu fonts under
``~/.local/share/fonts``, where fontconfig and matplotlib look), so the cost a font can be
read off several sizes of font collection: a Windows laptop has some 300-600 font files, a
Linux desktop 100-1,000.  "made": a new, empty MPLCONFIGDIR; "read": one made beforehand.
CPU seconds (user + system) of the child, alternated, median of ``--repeats``.

    python benchmarks/bench_font_list.py
    python benchmarks/bench_font_list.py --fonts 0 100 400 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import children_cpu_s  # noqa: E402

IMPORT = "import matplotlib.font_manager as fm; print(len(fm.fontManager.ttflist))"


def child(env: dict[str, str]) -> tuple[float, int]:
    """(CPU s, fonts listed) of one Python importing matplotlib's font manager."""
    before = children_cpu_s()
    done = subprocess.run([sys.executable, "-c", IMPORT], env=env, capture_output=True,
                          text=True, check=True)
    return children_cpu_s() - before, int(done.stdout.split()[-1])


def font_home(root: Path, count: int) -> Path:
    """A HOME with ``count`` extra font files (matplotlib's DejaVu fonts, copied)."""
    import matplotlib

    home = root / f"home-{count}"
    fonts = home / ".local" / "share" / "fonts"
    fonts.mkdir(parents=True)
    sources = sorted(Path(matplotlib.get_data_path(), "fonts", "ttf").glob("DejaVu*.ttf"))
    for i in range(count):
        src = sources[i % len(sources)]
        shutil.copyfile(src, fonts / f"{src.stem}-{i:04d}.ttf")
    return home


def measure(root: Path, count: int, repeats: int) -> tuple[list[float], list[float], int]:
    """CPU s of each "made" and "read" run (alternated) with ``count`` extra fonts."""
    home = font_home(root, count)
    base = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache")}
    kept = root / f"kept-{count}"
    kept.mkdir()
    child({**base, "MPLCONFIGDIR": str(kept)})  # makes the list "read" runs find
    made, read, listed = [], [], 0
    for r in range(repeats):
        fresh = root / f"fresh-{count}-{r}"
        fresh.mkdir()
        cpu, listed = child({**base, "MPLCONFIGDIR": str(fresh)})
        made.append(cpu)
        read.append(child({**base, "MPLCONFIGDIR": str(kept)})[0])
    return made, read, listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fonts", type=int, nargs="+", default=[0, 100, 300, 600])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.fonts:
            made, read, listed = measure(Path(tmp), count, args.repeats)
            rows.append((listed, statistics.median(made), statistics.median(read)))
            print(f"{count:4d} extra font files ({listed} fonts listed): made "
                  f"{statistics.median(made):.3f} s, read {statistics.median(read):.3f} s, "
                  f"difference {statistics.median(made) - statistics.median(read):.3f} s "
                  f"(CPU, median of {args.repeats})")
    if len(rows) > 1:
        (l0, m0, r0), (l1, m1, r1) = rows[0], rows[-1]
        per_font = ((m1 - r1) - (m0 - r0)) / max(l1 - l0, 1)
        print(f"\nMaking the list costs {per_font * 1e3:.2f} ms of CPU a font listed "
              f"(from {l0} to {l1} fonts); reading it costs the same at every size.")


if __name__ == "__main__":
    main()
