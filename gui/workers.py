"""Work off the GUI thread: database reads, analyses and syncs run on a thread pool.

Modelled on Orange's ``TaskState``: a task is a plain callable ``fn(mirror, state)`` that reads
through its own DuckDB connection (``Mirror.for_thread()``: DuckDB connections are not shared
between threads, cursors of one database are), reports progress with
``state.set_progress(percent, message)`` and stops early when ``state.cancelled``.  Results and
errors come back to the GUI thread as Qt signals (queued across threads), so widgets are only
ever touched on the GUI thread.

A task submitted under a *slot* supersedes the earlier one of that slot (a new zoom replaces the
re-query of the previous one): the older task is asked to cancel, and whatever it still returns
is dropped, so a slow answer can never overwrite a newer one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from PySide6.QtCore import QObject, Signal

from devmon_sync.store import damage_of, damaged_error

log = logging.getLogger(__name__)

#: Errors a task may raise for an expected failure; their text is shown as is.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError)


class Cancelled(Exception):
    """Raised inside a task (by ``TaskState.check``) to stop it early."""


class TaskState(QObject):
    """What a running task sees: progress reporting and the cancel flag.  Lives on the GUI
    thread; its signals are emitted from the worker and delivered on the GUI thread."""

    progress = Signal(float, str)  # percent 0..100, message
    done = Signal(object)  # the task's result
    failed = Signal(str)  # a message for the user
    cancelled_signal = Signal()

    def __init__(self, label: str = "") -> None:
        super().__init__()
        self.label = label
        self._cancel = threading.Event()
        self.finished = threading.Event()
        self.result: Any = None  # what the task returned, kept even when it was cancelled

    @property
    def cancel_event(self) -> threading.Event:
        """The flag itself, for engines that take a ``threading.Event`` (the sync)."""
        return self._cancel

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()

    def check(self) -> None:
        """Raise ``Cancelled`` if the task was asked to stop."""
        if self._cancel.is_set():
            raise Cancelled()

    def set_progress(self, percent: float, message: str = "") -> None:
        self.progress.emit(float(percent), message)


def _failure_text(err: Exception, runner: "TaskRunner", state: TaskState) -> str:
    """What the window says of a failed task: a damaged mirror file in the store's one line
    (not DuckDB's "IO Error ..."), an expected error's own text, or else (a bug, logged in
    full) "Unexpected error in <task>"."""
    what = damage_of(err)
    if what and runner.mirror is not None:
        return str(damaged_error(runner.mirror.path, what))
    if isinstance(err, EXPECTED_ERRORS + runner.expected_errors):
        return str(err) or type(err).__name__
    log.exception("task %s failed", state.label, exc_info=err)
    return f"Unexpected error in {state.label or 'a task'}: {type(err).__name__}: {err}"


def _run_task(runner: "TaskRunner", fn: Callable, state: TaskState, serial: int,
              slot: str | None) -> None:
    """One task on a pool thread: run it on its own cursor and report on the GUI thread."""
    view = None
    try:
        view = runner.mirror.for_thread() if runner.mirror is not None else None
        result = state.result = fn(view, state)
        outcome: tuple[str, Any] = ("done", result)
    except Cancelled:
        outcome = ("cancelled", None)
    except Exception as err:  # noqa: BLE001 - every failure reaches the window as words
        outcome = ("failed", _failure_text(err, runner, state))
    finally:
        if view is not None:
            view.close()
    if state.cancelled and outcome[0] == "done":
        outcome = ("cancelled", None)
    if slot is not None and runner._latest.get(slot) != serial:
        outcome = ("cancelled", None)  # superseded: never deliver a stale answer
    kind, value = outcome
    if kind == "done":
        state.done.emit(value)
    elif kind == "failed":
        state.failed.emit(value)
    else:
        state.cancelled_signal.emit()
    state.finished.set()


class TaskRunner(QObject):
    """Runs tasks on its own pool of Python threads against one open mirror (or none).

    Plain long-lived Python threads, not a ``QThreadPool``: pyproj keeps its PROJ context per
    Python thread state, and a QThreadPool thread gets a fresh thread state for every task,
    which freed the context under the next task's transformer (a segfault in pyproj.CRS on
    the second projected analysis).  Signals emitted from these threads reach the GUI
    thread queued, like any cross-thread Qt signal."""

    def __init__(self, mirror=None, max_threads: int = 3,
                 expected_errors: tuple[type[BaseException], ...] = ()) -> None:
        super().__init__()
        self.mirror = mirror
        self.expected_errors = expected_errors
        self._max_threads = max_threads
        self.pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="devmon-task")
        self._futures: list[Future] = []
        self._latest: dict[str, int] = {}
        self._serial = 0
        self._states: dict[str, TaskState] = {}
        self._running: list[TaskState] = []

    def submit(self, fn: Callable[[Any, TaskState], Any], *,
               on_done: Callable[[Any], None] | None = None,
               on_error: Callable[[str], None] | None = None,
               on_progress: Callable[[float, str], None] | None = None,
               on_cancelled: Callable[[], None] | None = None,
               slot: str | None = None, label: str = "") -> TaskState:
        """Run ``fn(mirror_view, state)`` on a pool thread; callbacks run on the GUI thread."""
        self._serial += 1
        state = TaskState(label)
        if slot is not None:
            previous = self._states.get(slot)
            if previous is not None:
                previous.cancel()
            self._latest[slot] = self._serial
            self._states[slot] = state
        for signal, callback in ((state.done, on_done), (state.failed, on_error),
                                 (state.progress, on_progress),
                                 (state.cancelled_signal, on_cancelled)):
            if callback is not None:
                signal.connect(callback)
        self._running = [s for s in self._running if not s.finished.is_set()] + [state]
        self._futures = [f for f in self._futures if not f.done()]
        self._futures.append(self.pool.submit(_run_task, self, fn, state, self._serial, slot))
        return state

    def busy(self) -> bool:
        return any(not s.finished.is_set() for s in self._running)

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        """Ask every task to stop and wait for them (before the mirror is closed)."""
        for state in self._running:
            state.cancel()
        _done, pending = wait(self._futures, timeout=timeout_ms / 1000)
        if not pending:  # end the idle threads too; a new pool starts threads on demand
            self.pool.shutdown(wait=True)
            self.pool = ThreadPoolExecutor(max_workers=self._max_threads,
                                           thread_name_prefix="devmon-task")
        return not pending
