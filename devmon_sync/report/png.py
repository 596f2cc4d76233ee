"""A report page's figure as a PNG: drawn once at the PNG's resolution and cropped to what
it draws, plus a margin.

matplotlib's ``bbox_inches="tight"`` first measures the extent of every artist (every tick
label laid out again at the PNG's resolution), then draws: a quarter of a page's PNG time
(``benchmarks/bench_report_png.py``).  The page is drawn on a white page anyway, so the
pixels say where its ink is: one draw, one numpy scan.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

PAD_IN = 0.15  # white margin kept around the ink, inches (matplotlib's pad_inches)
# zlib's level for the PNG's pixels: 3 compresses a page's figure in 0.69x the time of
# Pillow's default 6 for a file 5 % larger (the same pixels; ``bench_report_trees.py``)
COMPRESS_LEVEL = 3


def write_png(fig: Figure, path: Path, dpi: int) -> None:
    """``fig`` (the page with its header and footer hidden) as a PNG at ``dpi``, cropped to
    its ink and ``PAD_IN`` around it, with its resolution in the file (pHYs)."""
    page = _drawn(fig, dpi)
    box = _ink_box(np.asarray(page).view(np.uint32).reshape(page.height, page.width),
                   round(PAD_IN * dpi))
    page.crop(box).convert("RGB").save(path, format="png", dpi=(dpi, dpi),
                                   compress_level=COMPRESS_LEVEL)


def _drawn(fig: Figure, dpi: int) -> Image.Image:
    """The figure drawn at ``dpi`` on white, as an RGBA image."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=dpi, facecolor="white")
    size = _pixel_size(fig, dpi, buffer.getbuffer().nbytes)
    return Image.frombuffer("RGBA", size, buffer.getbuffer(), "raw", "RGBA", 0, 1)


def _pixel_size(fig: Figure, dpi: int, nbytes: int) -> tuple[int, int]:
    """(width, height) in pixels of the RGBA buffer matplotlib's Agg canvas drew: the
    figure's size times ``dpi``, truncated, where a product in floating point may fall
    either side of a whole number, so the one of the neighbours the buffer's length fits."""
    width, height = fig.get_figwidth() * dpi, fig.get_figheight() * dpi
    for w in (int(width), int(width) - 1, int(width) + 1):
        for h in (int(height), int(height) - 1, int(height) + 1):
            if w * h * 4 == nbytes:
                return w, h
    raise ValueError(f"a {nbytes}-byte RGBA drawing does not fit a {width:g} x {height:g} "
                     f"pixel figure")


WHITE = np.uint32(0xFFFFFFFF)  # an opaque white pixel, RGBA bytes read as one word


def _ink_box(pixels: np.ndarray, pad: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the pixels that are not white, ``pad`` wider on each
    side within the page (the whole page when it is blank)."""
    rows = np.flatnonzero((pixels != WHITE).any(axis=1))
    if not rows.size:
        return 0, 0, pixels.shape[1], pixels.shape[0]
    top, bottom = rows[0], rows[-1] + 1
    cols = np.flatnonzero((pixels[top:bottom] != WHITE).any(axis=0))
    height, width = pixels.shape
    return (max(int(cols[0]) - pad, 0), max(int(top) - pad, 0),
            min(int(cols[-1]) + 1 + pad, width), min(int(bottom) + pad, height))
