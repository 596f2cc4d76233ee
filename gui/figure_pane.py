"""A matplotlib Figure in a Qt pane with the navigation toolbar: the builders of
``analysis.figures`` make the Figure, the pane shows it."""

from __future__ import annotations


from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg, NavigationToolbar2QT
from matplotlib.figure import Figure
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from gui.gnss_controls import HINT_STYLE


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
    dropped parameters)."""

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
        self._layout.insertWidget(0, self.toolbar)
        self._layout.insertWidget(1, self.canvas, 1)
        # no draw here: the canvas draws once the layout has given it its size (drawing at
        # the figure's own size first would cost a second full draw on the GUI thread)

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))
