"""Writing a report: the planned pages drawn one at a time into a PDF, and optionally each
figure as a PNG.

The PDF is A4 with vector figures and TrueType fonts embedded (``pdf.fonttype`` 42, set
only while the report is drawn).  Its metadata dates are the report's creation time, and
nothing else in it depends on the clock, so one mirror with one set of options (and one
creation time) gives the same file.  It is written next to its destination and renamed
into place: an interrupted run never leaves half a report behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_pdf import PdfPages

from devmon_sync.report import layout
from devmon_sync.report.model import ReportData, ReportError, utc_text
from devmon_sync.report.pages import PageSpec, plan_pages

PNG_DPI = 200  # print resolution of the PNG figures
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
                 progress: Callable[[int, int, str], None] | None = None) -> ReportResult:
    """Draw the report of ``data`` into ``out_pdf`` (A4, one page at a time) and, with
    ``png_dir``, each figure page also as ``<name>.png`` at ``png_dpi`` (without the page
    header and footer).  ``progress(done, total, what)`` is called before each page (a GUI
    worker may raise from it to cancel: no PDF is left behind).  A ReportError when the
    files cannot be written.

    Fit for a worker thread: no pyplot, and every artist belongs to the report's own
    figures.  The rcParams of ``RC`` are set with ``matplotlib.rc_context`` while it draws
    (matplotlib's PDF backend reads ``pdf.fonttype`` from them); they matter only to
    figures saved as PDF meanwhile, and are restored after."""
    out = Path(out_pdf)
    pngs = None if png_dir is None else Path(png_dir)
    _check_writable(out, pngs)
    specs = plan_pages(data)
    chrome = layout.Chrome(data.footer_title, utc_text(data.generated_at), len(specs))
    metadata = {"Title": data.title, "Author": "devmon", "Creator": f"devmon {data.version}",
                "Subject": f"GNSS deformation report, {data.scope.describe()}",
                "CreationDate": data.generated_at, "ModDate": data.generated_at}
    written: list[Path] = []
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with matplotlib.rc_context(RC), PdfPages(tmp, metadata=metadata) as pdf:
            for page, spec in enumerate(specs, 1):
                if progress is not None:
                    progress(page - 1, len(specs), f"drawing page {page}: {spec.section}")
                fig, heading = spec.draw()
                artists = chrome.draw(fig, page, spec.label, heading)
                pdf.savefig(fig)
                if pngs is not None and spec.png_name:
                    for artist in artists:
                        artist.set_visible(False)
                    path = pngs / spec.png_name
                    fig.savefig(path, format="png", dpi=png_dpi, bbox_inches="tight",
                                pad_inches=0.15, facecolor="white")
                    written.append(path)
        os.chmod(tmp, _new_file_mode())  # mkstemp's 0600 would hide the report from others
        os.replace(tmp, out)
    except OSError as err:
        raise ReportError(f"cannot write {out}: {err.strerror or err}; choose another output "
                          f"path") from None
    finally:
        tmp.unlink(missing_ok=True)
    return ReportResult(out, len(specs), sections_of(specs), tuple(written))
