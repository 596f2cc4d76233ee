"""Writing a report: the planned pages drawn into a PDF, and optionally each figure as a
PNG.

The PDF is A4 with vector figures and TrueType fonts embedded (``pdf.fonttype`` 42, set
only while the report is drawn).  Its metadata dates are the report's creation time, and
nothing else in it depends on the clock, so one mirror with one set of options (and one
creation time) gives the same file.  It is written next to its destination and renamed
into place: an interrupted run never leaves half a report behind.

Drawing is most of a report's time (a site of 43 rovers: ~30 s of 34 s, 145 pages at
~0.2 s each), so a long report uses every core: the pages are drawn in runs of
``PAGES_PER_PART`` into part files, by worker processes (``analyze_pool``) when there are
enough pages for them to pay, and the parts are joined in page order (pypdf).  The parts are
the same however many processes draw them, and so is the joined file, byte for byte.
"""

from __future__ import annotations

import errno
import os
import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from pypdf import PdfWriter

from devmon_sync.analyze import pool as analyze_pool
from devmon_sync.report import layout
from devmon_sync.report.model import ReportData, ReportError, utc_text
from devmon_sync.report.pages import PageSpec, plan_pages
from devmon_sync.report.png import write_png
from devmon_sync.report.resolution import PNG_DPI

#: Pages drawn into one part file: fixed, so that the parts (and the joined report) do not
#: depend on how many processes drew them.
PAGES_PER_PART = 16
#: Worker processes draw the pages only when each gets at least this many: starting one
#: (a fresh Python importing matplotlib, then reading the report's data) costs about what
#: drawing 4-5 pages does; on 2 cores 2 workers were slower up to 18 pages and 1.5-1.7x
#: faster from 31 (``benchmarks/bench_report_pages.py``).
MIN_PAGES_PER_WORKER = 16
#: rcParams in force while a report is drawn: TrueType fonts embedded in the PDF (text stays
#: text: searchable, copyable) and matplotlib's own font, so every machine draws the same.
RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "font.family": ["DejaVu Sans"],
      "pdf.compression": 6}


@dataclass(frozen=True)
class Section:
    """A run of pages about one thing: ``title`` (as in the contents), ``kind`` (cover,
    summary, device, plan, methods), its first page (from 1) and how many pages."""

    title: str
    kind: str
    first_page: int
    pages: int


@dataclass(frozen=True)
class ReportResult:
    """What ``write_report`` wrote."""

    path: Path
    pages: int
    sections: tuple[Section, ...]
    png_paths: tuple[Path, ...] = ()


def sections_of(specs: list[PageSpec]) -> tuple[Section, ...]:
    out: list[Section] = []
    for page, spec in enumerate(specs, 1):
        if out and out[-1].title == spec.section:
            last = out[-1]
            out[-1] = Section(last.title, last.kind, last.first_page, last.pages + 1)
        else:
            out.append(Section(spec.section, spec.kind, page, 1))
    return tuple(out)


def _check_writable(out_pdf: Path, png_dir: Path | None) -> None:
    """A ReportError before any drawing when the output cannot be written."""
    parent = out_pdf.parent
    if out_pdf.is_dir():
        raise ReportError(f"{out_pdf} is a directory: give a file name for the PDF, e.g. "
                          f"{out_pdf / 'report.pdf'}")
    if not parent.is_dir():
        raise ReportError(f"cannot write {out_pdf}: the folder {parent} does not exist; "
                          f"create it or choose another output path")
    if not os.access(parent, os.W_OK) or (out_pdf.exists() and not os.access(out_pdf, os.W_OK)):
        raise ReportError(f"cannot write {out_pdf}: permission denied; choose an output path "
                          f"you can write to")
    if png_dir is not None:
        if png_dir.exists() and not png_dir.is_dir():
            raise ReportError(f"the PNG folder {png_dir} is a file: choose a folder")
        try:
            png_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ReportError(f"cannot create the PNG folder {png_dir} ({err.strerror}): "
                              f"choose another") from None
        if not os.access(png_dir, os.W_OK):
            raise ReportError(f"cannot write to the PNG folder {png_dir}: permission denied")
    os.unlink(_temp_file(out_pdf))  # the name too: one too long fails now, not after drawing


def _temp_file(out_pdf: Path) -> Path:
    """A new empty file beside ``out_pdf`` to write the report into before it is renamed
    into place; a ReportError when it cannot be made (a file name too long for the file
    system, a full disk)."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out_pdf.name}.", suffix=".tmp",
                                    dir=out_pdf.parent)
    except OSError as err:
        raise ReportError(f"cannot write {out_pdf}: {err.strerror or err}; choose another "
                          f"output path" + (" with a shorter file name"
                                            if err.errno == errno.ENAMETOOLONG else "")
                          ) from None
    os.close(fd)
    return Path(name)


def _new_file_mode() -> int:
    """The mode a new file gets here (0666 less the umask), as ``open()`` would give it."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def check_output(out_pdf: str | os.PathLike, png_dir: str | os.PathLike | None = None) -> None:
    """Whether a report can be written there: call before the (slower) analyses so a bad
    path fails at once.  A ReportError saying what to change."""
    _check_writable(Path(out_pdf), None if png_dir is None else Path(png_dir))


def write_report(data: ReportData, out_pdf: str | os.PathLike,
                 png_dir: str | os.PathLike | None = None, *, png_dpi: int = PNG_DPI,
                 progress: Callable[[int, int, str], None] | None = None,
                 jobs: int | None = 1) -> ReportResult:
    """Draw the report of ``data`` into ``out_pdf`` (A4) and, with ``png_dir``, each figure
    page also as ``<name>.png`` at ``png_dpi`` (without the page header and footer).
    ``progress(done, total, what)`` is called as pages are drawn (a GUI worker may raise
    from it to cancel: no PDF is left behind).  ``jobs``: worker processes allowed (None:
    every core; 1, the default: this process).  A ReportError when the files cannot be
    written.

    Fit for a worker thread: no pyplot, and every artist belongs to the report's own
    figures.  The rcParams of ``RC`` are set with ``matplotlib.rc_context`` while it draws
    (matplotlib's PDF backend reads ``pdf.fonttype`` from them); they matter only to
    figures saved as PDF meanwhile, and are restored after."""
    out = Path(out_pdf)
    pngs = None if png_dir is None else Path(png_dir)
    _check_writable(out, pngs)
    specs = plan_pages(data)
    parts = [(a, min(a + PAGES_PER_PART, len(specs)))
             for a in range(0, len(specs), PAGES_PER_PART)]
    tmp = _temp_file(out)
    try:
        with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as folder:
            drawn = _draw_parts(data, specs, parts, Path(folder), pngs, png_dpi, progress, jobs)
            _join(data, [path for path, _ in drawn], tmp)
        os.chmod(tmp, _new_file_mode())  # mkstemp's 0600 would hide the report from others
        os.replace(tmp, out)
    except OSError as err:
        raise ReportError(f"cannot write {out}: {err.strerror or err}; choose another output "
                          f"path") from None
    finally:
        tmp.unlink(missing_ok=True)
    written = tuple(p for _, paths in drawn for p in paths)
    return ReportResult(out, len(specs), sections_of(specs), written)


def write_pages(data: ReportData, specs: list[PageSpec], first: int, end: int,
                out_pdf: str | os.PathLike) -> None:
    """Pages ``first`` to ``end - 1`` (from 0) of the report planned as ``specs`` into
    ``out_pdf``, drawn as the report draws them (chrome, page numbers of the whole report):
    to look at a few pages, the cover or a table, without drawing every page."""
    out = Path(out_pdf)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as folder:
        path, _ = _draw_part(data, specs, first, end, Path(folder), None, PNG_DPI, None)
        os.replace(path, out)


def page_workers(jobs: int | None, pages: int) -> int:
    """Worker processes drawing ``pages`` pages with ``jobs`` allowed (None: every core); 0:
    this process (one job, or fewer than ``MIN_PAGES_PER_WORKER`` pages for each of two)."""
    return analyze_pool.worker_count(jobs, pages, per_worker=MIN_PAGES_PER_WORKER)


def _draw_parts(data: ReportData, specs: list[PageSpec], parts: list[tuple[int, int]],
                folder: Path, pngs: Path | None, png_dpi: int, progress,
                jobs: int | None) -> list[tuple[Path, tuple[Path, ...]]]:
    """Each part's file and PNGs, in page order: drawn here, or by worker processes that
    read the report's data from a file in ``folder`` (pickled once, not once a part)."""
    workers = page_workers(jobs, len(specs))
    if not workers:
        return [_draw_part(data, specs, a, b, folder, pngs, png_dpi, progress)
                for a, b in parts]
    source = folder / "report-data.pickle"
    with open(source, "wb") as f:
        pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
    done = [0]

    def finished(_done: int, _total: int, index: int) -> None:
        done[0] += parts[index][1] - parts[index][0]
        if progress is not None:
            progress(done[0], len(specs), f"drew {done[0]} of {len(specs)} pages")

    tasks = [(str(source), a, b, str(folder), None if pngs is None else str(pngs), png_dpi)
             for a, b in parts]
    outcomes = analyze_pool.run(_draw_part_in_worker, tasks, workers=workers,
                                progress=finished)
    for outcome in outcomes:
        if isinstance(outcome, analyze_pool.Failed):
            outcome.reraise()
    return outcomes


_worker_report: tuple[str, ReportData, list[PageSpec]] | None = None


def _draw_part_in_worker(_mirror, source: str, first: int, end: int, folder: str,
                         pngs: str | None, png_dpi: int) -> tuple[Path, tuple[Path, ...]]:
    """In a worker: the report's data read once (kept for its next parts), its pages planned
    as the parent planned them (``plan_pages`` depends on the data alone), one part drawn."""
    global _worker_report
    if _worker_report is None or _worker_report[0] != source:
        with open(source, "rb") as f:
            data = pickle.load(f)
        _worker_report = (source, data, plan_pages(data))
    _, data, specs = _worker_report
    return _draw_part(data, specs, first, end, Path(folder),
                      None if pngs is None else Path(pngs), png_dpi, None)


def _draw_part(data: ReportData, specs: list[PageSpec], first: int, end: int, folder: Path,
               pngs: Path | None, png_dpi: int, progress
               ) -> tuple[Path, tuple[Path, ...]]:
    """Pages ``first`` to ``end - 1`` (from 0) into a part file of their own, and their
    figures as PNGs: (the part's path, the PNGs written)."""
    chrome = layout.Chrome(data.footer_title, utc_text(data.generated_at), len(specs))
    path = folder / f"part-{first:06d}.pdf"
    written: list[Path] = []
    with matplotlib.rc_context(RC), PdfPages(path, metadata={"CreationDate": None}) as pdf:
        for page in range(first + 1, end + 1):
            spec = specs[page - 1]
            if progress is not None:
                progress(page - 1, len(specs), f"drawing page {page}: {spec.section}")
            fig, heading = spec.draw()
            artists = chrome.draw(fig, page, spec.label, heading)
            settle_layout(fig)
            pdf.savefig(fig)
            if pngs is not None and spec.png_name:
                for artist in artists:
                    artist.set_visible(False)
                png = pngs / spec.png_name
                write_png(fig, png, png_dpi)
                written.append(png)
    return path, tuple(written)


def settle_layout(fig: Figure) -> None:
    """Run a page's layout engine once and detach it: matplotlib's ``savefig`` draws a
    figure that has a layout engine twice (a whole draw to place it, then the real one),
    and a page's layout is final once drawn.  Detached, each page is drawn once: 21 % less
    CPU for the demo site's 42 pages (``benchmarks/bench_report_layout.py``).  The layout
    is then measured by the figure's own renderer rather than the PDF one: positions move
    by fractions of a point, the words and the file's determinism do not change."""
    engine = fig.get_layout_engine()
    if engine is None:
        return
    engine.execute(fig)
    # None (not "none", which leaves a placeholder engine that still costs the extra draw)
    with matplotlib.rc_context({"figure.autolayout": False,
                                "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def _join(data: ReportData, parts: list[Path], target: Path) -> None:
    """The parts, in order, as one PDF with the report's metadata (its dates the report's
    creation time: nothing in the file depends on when it was joined)."""
    writer = PdfWriter()
    for part in parts:
        writer.append(str(part))
    made = _pdf_date(data.generated_at)
    writer.add_metadata({"/Title": data.title, "/Author": "devmon",
                         "/Creator": f"devmon {data.version}",
                         "/Producer": f"devmon {data.version} (matplotlib, pypdf)",
                         "/Subject": f"GNSS deformation report, {data.scope.describe()}",
                         "/CreationDate": made, "/ModDate": made})
    with open(target, "wb") as f:
        writer.write(f)


def _pdf_date(t: datetime) -> str:
    """A PDF date (ISO 32000 7.9.4) in UTC: D:YYYYMMDDHHmmSSZ."""
    return t.astimezone(timezone.utc).strftime("D:%Y%m%d%H%M%SZ")
