"""Notice another program writing the open mirror, and say when it is readable again.

The window holds no connection between reads (``devmon_sync.store.access``), so a scheduled
`devmon sync` can write the file while the window is open.  Every two seconds the file's
size and time (and its WAL's) are compared with what was last read; on a change, one read
is tried on a worker: it fails while the other program still writes (``busy``, said once),
and succeeds when it has finished (``updated``: the window reads the mirror again).

The app's own writes are not "another program": they go through ``own_write``, which every
watch of the file knows of from before the write asks for the file until DuckDB has closed
it.  Why not only the stamp the access keeps after a write: closing the writer writes the
rest of DuckDB's log into the file (a checkpoint: a tenth of a second after a sync of a few
thousand rows, more after a big one) after the access has let go of the writer and before
it has stamped the file, and a watch that looked then saw a change nobody it knew of had
made ("Mirror updated by another program" after the app's own sync).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from PySide6.QtCore import QObject, QTimer, Signal

from devmon_sync.store.access import MirrorAccess

INTERVAL_MS = 2000

_OWN_LOCK = threading.Lock()
#: Per mirror access: [own writes in progress, own writes finished so far].
_OWN: weakref.WeakKeyDictionary[MirrorAccess, list[int]] = weakref.WeakKeyDictionary()


@contextmanager
def own_write(access: MirrorAccess) -> Iterator:
    """``access.writing()`` (the file opened for writing while the block runs), known to
    every ``MirrorWatch`` of ``access`` as this program's own until the file is closed and
    stamped: the app's sync and the alarm levels it saves write through it."""
    with _OWN_LOCK:
        _OWN.setdefault(access, [0, 0])[0] += 1
    try:
        with access.writing() as writable:
            yield writable
    finally:
        with _OWN_LOCK:
            counts = _OWN[access]
            counts[0] -= 1
            counts[1] += 1


def own_writes(access: MirrorAccess) -> tuple[int, int]:
    """(own writes in progress, own writes finished so far) of ``access``."""
    with _OWN_LOCK:
        in_progress, finished = _OWN.get(access, (0, 0))
    return in_progress, finished


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
        if access is None or access.writing_now or own_writes(access)[0]:
            return
        stamp = access.stamp()
        if stamp == self._seen:
            return
        if stamp == access.own_write_stamp:  # the app's own write: its caller refreshes
            self._seen = stamp
            return
        looked = own_writes(access)
        self.runner.submit(lambda m, _state: m.schema_version(),
                           on_done=lambda _v: self._readable(access, stamp, looked),
                           on_error=lambda message: self._locked(access, message, looked),
                           slot="mirror-watch", label="watching the mirror")

    def _ours(self, access: MirrorAccess, looked: tuple[int, int]) -> bool:
        """Whether the change seen may be this program's own: one of its writes began or
        ended since the watch looked, or the file is as its last write left it.  The
        window reads the mirror again after its own writes, so nothing is missed."""
        if own_writes(access) != looked or access.stamp() == access.own_write_stamp:
            if not own_writes(access)[0]:
                self._seen = access.stamp()
            return True
        return False

    def _readable(self, access: MirrorAccess, stamp: tuple,
                  looked: tuple[int, int] = (0, 0)) -> None:
        if access is not self.access or self._ours(access, looked):
            return
        self._seen, self._busy = stamp, False
        self.updated.emit()

    def _locked(self, access: MirrorAccess, message: str,
                looked: tuple[int, int] = (0, 0)) -> None:
        if access is not self.access or self._busy or self._ours(access, looked):
            return
        self._busy = True
        self.busy.emit(message)
