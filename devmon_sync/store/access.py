"""A mirror file held by nobody between reads: what a long-lived window needs.

DuckDB lets one process write a file, or any number read it, never both at once; a
connection left open holds the file's lock for as long as it lives.  The desktop app kept
one read-write connection for as long as a mirror was open, so no scheduled `devmon sync`
could run while its window was open, and a mirror on read-only media could not be browsed.

``MirrorAccess`` holds no connection while idle.  Each reading task opens the file
read-only and closes it when done (tasks that overlap share one DuckDB instance, so only
the first pays for the open); the lock is held only while something reads.  The app's own
sync takes the file for writing (``writing``) once the readers in progress have finished,
and reads during it go through the writer's cursors (DuckDB refuses two configurations of
one file in one process).  ``stamp`` tells when another program has written the file, so
the window can say "mirror updated" and read it again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devmon_sync.store.mirror import Mirror, OlderSchemaError


class MirrorAccess:
    """One mirror file, opened per task.  Thread-safe."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._cond = threading.Condition()
        self._readers = 0
        self._writer: Mirror | None = None
        self._writer_wanted = False
        self.own_write_stamp: tuple | None = None
        """``stamp`` right after this process last wrote the file (not another program)."""

    @classmethod
    def open(cls, path: str | Path) -> "MirrorAccess":
        """Check the file can be read as a mirror (StoreError saying why not; read whole
        unless devmon knows it unchanged since its last check or write: a damaged file is
        refused at once), hold nothing.  A mirror an older devmon made is upgraded first,
        as opening it read-write always did (a window that opened old files yesterday must
        open them today)."""
        try:
            Mirror.open(path, read_only=True, check=True).close()
        except OlderSchemaError:
            Mirror.open(path).close()  # migrates; StoreError when it cannot (read-only media)
            Mirror.open(path, read_only=True).close()
        return cls(path)

    def for_thread(self) -> "LazyMirror":
        """A mirror for one task on one thread, opened when first used: a task that never
        reads (the app's sync, which writes through ``writing``) holds no reader."""
        return LazyMirror(self)

    @contextmanager
    def writing(self) -> Iterator[Mirror]:
        """The file opened for writing, for as long as the block runs (the app's sync).
        Waits for the reads in progress; MirrorLockedError when another program writes it."""
        with self._cond:
            self._writer_wanted = True
            try:
                self._cond.wait_for(lambda: self._readers == 0)
                self._writer = Mirror.open(self.path)
            finally:
                self._writer_wanted = False
                self._cond.notify_all()
        try:
            yield self._writer
        finally:
            with self._cond:
                writer, self._writer = self._writer, None
                writer.close()
                self.own_write_stamp = self.stamp()
                self._cond.notify_all()

    def stamp(self) -> tuple:
        """What changes when any program writes the file: sizes and times of it and its WAL."""
        out = []
        for p in (Path(self.path), Path(self.path + ".wal")):
            try:
                st = p.stat()
                out.append((st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    @property
    def writing_now(self) -> bool:
        return self._writer is not None

    def close(self) -> None:
        """Nothing is held between tasks; kept for the window's symmetry with a mirror."""

    def _reader(self) -> tuple[Mirror, bool]:
        """(mirror, owned): a cursor of the writer while one runs, else a read-only open."""
        with self._cond:
            self._cond.wait_for(lambda: not self._writer_wanted)
            if self._writer is not None:
                return self._writer.for_thread(), False
            self._readers += 1
        try:
            return Mirror.open(self.path, read_only=True), True
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()


class LazyMirror:
    """A task's mirror: opened at its first use, closed with ``close``."""

    def __init__(self, access: MirrorAccess):
        self.access = access
        self.path = access.path
        self._mirror: Mirror | None = None
        self._owned = False

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if self._mirror is None:
            self._mirror, self._owned = self.access._reader()
        return getattr(self._mirror, name)

    def close(self) -> None:
        mirror, self._mirror = self._mirror, None
        if mirror is None:
            return
        mirror.close()
        if self._owned:
            self.access._release()
