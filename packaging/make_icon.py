"""Draw devmon's icon: gui/resources/devmon.png (256x256, the app's window icon and the Linux
menu icon) and, with Pillow, packaging/devmon.ico (Windows).

    python packaging/make_icon.py

A GNSS rover's displacement track drifting away from its reference point, on a dark blue
rounded square.  The generated files are committed; run this only to change the icon.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Circle, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent


def draw(png: Path) -> None:
    fig = Figure(figsize=(2.56, 2.56), dpi=100)
    fig.patch.set_alpha(0.0)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_axis_off()
    ax.add_patch(FancyBboxPatch((0.04, 0.04), 0.92, 0.92, boxstyle="round,pad=0,rounding_size=0.18",
                                facecolor="#16365c", edgecolor="none"))
    # alarm rings around the reference point
    box = ax.patches[0]
    for r, colour in ((0.16, "#3fa34d"), (0.28, "#e0a800"), (0.40, "#d64545")):
        ring = ax.add_patch(Circle((0.34, 0.34), r, fill=False, lw=5, edgecolor=colour, alpha=0.9))
        ring.set_clip_path(box)  # the rings stay inside the rounded square
    # a drifting displacement track
    rng = np.random.default_rng(7)
    t = np.linspace(0, 1, 40)
    x = 0.34 + 0.42 * t**1.6 + rng.normal(0, 0.012, t.size)
    y = 0.34 + 0.40 * t**1.6 + rng.normal(0, 0.012, t.size)
    ax.plot(x, y, color="white", lw=6, solid_capstyle="round", solid_joinstyle="round")
    ax.add_patch(Circle((x[-1], y[-1]), 0.055, color="white"))
    ax.add_patch(Circle((0.34, 0.34), 0.04, color="#9cc3ff"))
    fig.savefig(png, dpi=100, transparent=True)


def main() -> None:
    png = HERE.parent / "gui" / "resources" / "devmon.png"
    draw(png)
    print(f"wrote {png}")
    try:
        from PIL import Image
    except ImportError:
        print("Pillow is not installed: no devmon.ico (pip install pillow, then run again)")
        return
    ico = HERE / "devmon.ico"
    Image.open(png).save(ico, sizes=[(16, 16), (24, 24), (32, 32), (48, 48), (64, 64),
                                     (128, 128), (256, 256)])
    print(f"wrote {ico}")


if __name__ == "__main__":
    main()
