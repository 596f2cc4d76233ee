"""Notice another program writing the open mirror, and say when it is readable again.

The window holds no connection between reads (``devmon_sync.store.access``), so a scheduled
`devmon sync` can write the file while the window is open.  Every two seconds the file's
size and time (and its WAL's) are compared with what was last read; on a change, one read
is tried on a worker: it fails while the other program still writes (``busy``, said once),
and succeeds when it has finished (``updated``: the window reads the mirror again).  The
app's own sync is not "another program": its writes are recognised by the stamp the
access object keeps after it.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

from devmon_sync.store.access import MirrorAccess

INTERVAL_MS = 2000


class MirrorWatch(QObject):
    updated = Signal()  # another program wrote the mirror, and it can be read again
    busy = Signal(str)  # another program is writing it now (a message for the user)

    def __init__(self, runner, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__()
        self.runner = runner
        self.access: MirrorAccess | None = None
        self._seen: tuple | None = None
        self._busy = False
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)

    def watch(self, access: MirrorAccess | None) -> None:
        """Watch ``access`` from its present state on (None: stop)."""
        self.access, self._busy = access, False
        if access is None:
            self.timer.stop()
            return
        self._seen = access.stamp()
        self.timer.start()

    def accept_current(self) -> None:
        """What the file holds now has been read (after the window's own refresh)."""
        if self.access is not None:
            self._seen = self.access.stamp()

    def _tick(self) -> None:
        access = self.access
        if access is None or access.writing_now:
            return
        stamp = access.stamp()
        if stamp == self._seen:
            return
        if stamp == access.own_write_stamp:  # the app's own sync: its dialog refreshes
            self._seen = stamp
            return
        self.runner.submit(lambda m, _state: m.schema_version(),
                           on_done=lambda _v: self._readable(access, stamp),
                           on_error=lambda message: self._locked(access, message),
                           slot="mirror-watch", label="watching the mirror")

    def _readable(self, access: MirrorAccess, stamp: tuple) -> None:
        if access is not self.access:
            return
        self._seen, self._busy = stamp, False
        self.updated.emit()

    def _locked(self, access: MirrorAccess, message: str) -> None:
        if access is not self.access or self._busy:
            return
        self._busy = True
        self.busy.emit(message)
