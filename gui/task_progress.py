"""The status bar's progress for one long task (the demo, a report): a bar and a Stop button.

Why: the demo runs about 40 s and a report of a whole site 10-20 s; a line of text alone
looks like a hang, and the user must be able to stop what they started.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QToolButton, QWidget

from gui.workers import TaskState


class TaskProgress(QWidget):
    """Hidden until ``track``; hides itself when the task ends however it ends."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.bar = QProgressBar()
        self.bar.setMaximumWidth(200)
        self.stop_button = QToolButton()
        self.stop_button.setText("Stop")
        self.stop_button.clicked.connect(self.stop)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.stop_button)
        self.setMaximumWidth(self.bar.maximumWidth() + 80)  # the two side by side
        self.state: TaskState | None = None
        self.hide()

    def track(self, state: TaskState, what: str) -> None:
        """Show the progress of ``state`` (a busy bar until it reports a percentage)."""
        self.state = state
        self.stop_button.setEnabled(True)
        self.stop_button.setToolTip(f"Stop {what}")
        self._progress(-1.0, "")
        state.progress.connect(self._progress)
        for signal in (state.done, state.failed, state.cancelled_signal):
            signal.connect(lambda *_args, s=state: self._finished(s))
        self.show()

    def stop(self) -> None:
        if self.state is not None:
            self.state.cancel()
            self.stop_button.setEnabled(False)

    def _progress(self, percent: float, _message: str) -> None:
        if percent < 0:
            self.bar.setRange(0, 0)  # busy: no fraction known
        else:
            self.bar.setRange(0, 100)
            self.bar.setValue(int(min(percent, 100.0)))

    def _finished(self, state: TaskState) -> None:
        if state is self.state:  # a newer task's bar stays
            self.state = None
            self.hide()
