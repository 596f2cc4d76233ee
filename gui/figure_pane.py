"""A matplotlib Figure in a Qt pane with the navigation toolbar and the mouse wheel's zoom:
the builders of ``analysis.figures`` make the Figure, the pane shows it."""

from __future__ import annotations


from matplotlib.backend_bases import MouseEvent
from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg, NavigationToolbar2QT
from matplotlib.figure import Figure
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from gui.gnss_controls import HINT_STYLE


WHEEL_ZOOM = 0.8  # one wheel step in shows 80 % of the range


def wheel_zoom(event: MouseEvent, toolbar: NavigationToolbar2QT | None) -> None:
    """The wheel zooms about the pointer (up: in), as plots do: the x axis, which is time
    in every time-series figure (axes sharing it follow), or both axes of an axes with a
    fixed aspect (a plan, a trajectory), which keeps its scale.  The view before is kept in
    the toolbar's history, so Back returns to it.  Every pane's canvas has it (Plots and
    the GNSS figures alike)."""
    ax = event.inaxes
    if ax is None or event.xdata is None or event.ydata is None:
        return
    factor = WHEEL_ZOOM ** (event.step if event.step else (1 if event.button == "up" else -1))
    if toolbar is not None and toolbar._nav_stack() is None:
        toolbar.push_current()  # the first view, as the toolbar's own zoom keeps it for Home
    x, y = float(event.xdata), float(event.ydata)
    lo, hi = ax.get_xlim()
    ax.set_xlim(x - (x - lo) * factor, x + (hi - x) * factor)
    if ax.get_aspect() != "auto":
        lo, hi = ax.get_ylim()
        ax.set_ylim(y - (y - lo) * factor, y + (hi - y) * factor)
    if toolbar is not None:
        toolbar.push_current()  # the new view: Back returns to the one before
    event.canvas.draw_idle()


# ----------------------------------------------------------------------------- figures

class FigurePane(QWidget):
    """One tab: a matplotlib canvas with its navigation toolbar, a placeholder while there
    is nothing to show, and a note line under the plot.

    Each new figure gets a new canvas and toolbar: a canvas sizes its figure to itself and
    to the screen's pixel ratio when it is made, and a toolbar's zoom history belongs to
    the figure it was made for, so swapping the figure of a live canvas would have to redo
    both by hand (``plot_view.PlotView`` once did, and its zoom and pan then did nothing).
    Every view showing a matplotlib figure goes through ``set_figure`` for that reason;
    ``canvas_class`` is the canvas it makes (a ``FigureCanvasQTAgg``: the Plots tab's takes
    dropped parameters).  Each canvas zooms with the mouse wheel (``wheel_zoom``)."""

    def __init__(self, placeholder: str, parent=None, *,
                 canvas_class: type[FigureCanvasQTAgg] = FigureCanvasQTAgg) -> None:
        super().__init__(parent)
        self.canvas_class = canvas_class
        self.figure: Figure | None = None
        self.canvas: FigureCanvasQTAgg | None = None
        self.toolbar: NavigationToolbar2QT | None = None
        self.placeholder = QLabel(placeholder)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet(HINT_STYLE)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.setStyleSheet("padding: 2px 6px; background: #f3f3f3; border-radius: 3px;")
        self.note.hide()
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(2, 2, 2, 2)
        self._layout.addWidget(self.placeholder, 1)
        self._layout.addWidget(self.note)

    def set_figure(self, figure: Figure | None, placeholder: str = "") -> None:
        """Show ``figure``, or (None) the placeholder text."""
        for widget in (self.toolbar, self.canvas):
            if widget is not None:
                self._layout.removeWidget(widget)
                widget.hide()
                widget.deleteLater()
        self.canvas = self.toolbar = None
        self.figure = figure
        if figure is None:
            if placeholder:
                self.placeholder.setText(placeholder)
            self.placeholder.show()
            return
        self.placeholder.hide()
        self.canvas = self.canvas_class(figure)
        self.canvas.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.toolbar = NavigationToolbar2QT(self.canvas, self)
        self.canvas.mpl_connect("scroll_event", lambda event: wheel_zoom(event, self.toolbar))
        self._layout.insertWidget(0, self.toolbar)
        self._layout.insertWidget(1, self.canvas, 1)
        # no draw here: the canvas draws once the layout has given it its size (drawing at
        # the figure's own size first would cost a second full draw on the GUI thread)

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))
