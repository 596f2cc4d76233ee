"""A report's figure PNG (``devmon_sync.report.png``): drawn once and cropped to its ink,
with ``PAD_IN`` of white around it and its resolution in the file."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

from devmon_sync.report.png import PAD_IN, write_png


def ink_rows_and_columns(path) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"))
    ink = (pixels < 255).any(axis=2)
    return np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0)), ink.shape


def test_the_png_is_the_ink_and_its_margin_at_the_resolution_asked(tmp_path):
    fig = Figure(figsize=(8.27, 11.69))  # an A4 page, one small axes in its middle
    ax = fig.add_axes((0.3, 0.4, 0.3, 0.2))
    ax.plot([0, 1], [0, 1])
    ax.set_title("east: velocity")
    write_png(fig, tmp_path / "f.png", 120)
    rows, cols, (height, width) = ink_rows_and_columns(tmp_path / "f.png")
    pad = round(PAD_IN * 120)
    assert (rows[0], cols[0]) == (pad, pad)  # exactly the margin before the ink ...
    assert (height - 1 - rows[-1], width - 1 - cols[-1]) == (pad, pad)  # ... and after it
    assert width < 0.5 * 8.27 * 120 and height < 0.4 * 11.69 * 120  # cropped, not the page
    with Image.open(tmp_path / "f.png") as image:
        assert [round(d) for d in image.info["dpi"]] == [120, 120]


def test_ink_at_the_page_edge_keeps_the_page_edge_and_a_blank_page_is_written_whole(tmp_path):
    fig = Figure(figsize=(4, 3))  # 400 x 300 px at 100 dpi; ink in its lower-left quarter
    fig.patches.append(Rectangle((0, 0), 0.5, 0.5, transform=fig.transFigure, color="black",
                                 linewidth=0, antialiased=False, figure=fig))
    write_png(fig, tmp_path / "edge.png", 100)
    pad = round(PAD_IN * 100)
    with Image.open(tmp_path / "edge.png") as image:
        assert image.size == (200 + pad, 150 + pad)  # the page's left and bottom edges kept
    write_png(Figure(figsize=(4, 3)), tmp_path / "blank.png", 100)
    with Image.open(tmp_path / "blank.png") as image:
        assert image.size == (400, 300)


def test_the_page_is_read_at_the_size_matplotlib_drew_it_whatever_the_rounding(tmp_path):
    """Sizes whose inches times dots per inch are not whole numbers (A4 at 150 dpi: 1240.5 x
    1753.5 px): the drawing is read at the pixel size matplotlib gave it, not a guess."""
    for (width, height), dpi in (((8.27, 11.69), 150), ((8.27, 11.69), 333), ((3.3, 2.9), 77)):
        fig = Figure(figsize=(width, height))
        fig.patches.append(Rectangle((0, 0), 1, 1, transform=fig.transFigure, color="black",
                                     linewidth=0, antialiased=False, figure=fig))
        write_png(fig, tmp_path / "ours.png", dpi)  # ink everywhere: nothing cropped
        fig.savefig(tmp_path / "theirs.png", dpi=dpi)
        with Image.open(tmp_path / "ours.png") as ours, \
                Image.open(tmp_path / "theirs.png") as theirs:
            assert ours.size == theirs.size, (width, height, dpi)
