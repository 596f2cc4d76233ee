"""Many rovers on every core: the process pool behind ``devmon analyze --jobs`` and
``devmon report --jobs`` (which also draws a long report's pages with it:
``devmon_sync.report.render``).

``run(work, tasks, jobs=..., mirror=...)`` calls ``work(mirror, *task)`` for each task and
returns the outcomes in task order: the task's result, or ``Failed`` with what it raised.
With one job, or too few tasks for the pool to pay for itself (``worker_count``), it runs in
this process on the caller's mirror.  Otherwise ``spawn``-started worker processes each open
the mirror read-only themselves (a DuckDB connection cannot cross processes) and run the
same ``work`` on the same data, so the outcomes are the serial ones, number for number.

The pool never outlives the call.  Ctrl+C (which the terminal sends to the workers too) and
SIGTERM (which ``devmon`` turns into ``SystemExit``) stop it: the workers ignore SIGINT and
die silently of SIGTERM, the parent cancels what is queued and terminates them, then the
interruption goes on as in a serial run (a message, exit 130/143, no traceback).  Workers
are started with ``spawn`` explicitly: never ``fork`` (a Qt or threaded process), and the
same on Linux, macOS and Windows.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

#: The pool is used only when each worker gets at least this many rovers.  Starting a
#: worker costs ~0.5 CPU s (a fresh Python importing numpy, DuckDB, pyproj and the
#: analysis, then opening the mirror) against ~25 ms a rover of a 60-day hourly mirror;
#: since the calling process works while the workers start (``_run_pool``), 2 processes
#: were as fast as one at 24 rovers and faster from 32 (1.10x; 1.32x at 48), measured
#: with ``benchmarks/bench_many_rovers.py``, part 2 (issue 31; it was 48-64 before).
MIN_ROVERS_PER_WORKER = 16

#: Tasks handed to a worker at once: fewer round trips, still a progress step per few
#: rovers and an even share of the work at the end.
MAX_CHUNK = 8

#: Math libraries' own thread pools, one thread each in a worker (the pool is the
#: parallelism; two workers each starting a BLAS thread per core oversubscribe the cores).
_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def default_jobs() -> int:
    """Worker processes when ``--jobs`` is not given: one per core (``cli.args.jobs``
    checks a ``--jobs`` given)."""
    return os.cpu_count() or 1


def worker_count(jobs: int | None, tasks: int, per_worker: int | None = None) -> int:
    """Worker processes for ``tasks`` tasks (rovers; a report's pages) with ``jobs`` allowed
    (None: every core); 0 means serial, in this process: one job, or fewer than
    ``per_worker`` tasks (None: ``MIN_ROVERS_PER_WORKER``) for each of at least two
    workers."""
    jobs = default_jobs() if jobs is None else int(jobs)
    per_worker = MIN_ROVERS_PER_WORKER if per_worker is None else per_worker
    workers = min(jobs, tasks // per_worker)
    return workers if workers >= 2 else 0


@dataclass(frozen=True)
class Failed:
    """A task that raised: the exception, and where (the worker's traceback, as text)."""

    error: BaseException
    traceback: str = ""

    def reraise(self):
        """Raise the task's exception again (a worker's traceback as its cause)."""
        if self.traceback and self.error.__cause__ is None:
            raise self.error from _RemoteTraceback(self.traceback)
        raise self.error


class _RemoteTraceback(Exception):
    def __str__(self) -> str:
        return "\n" + str(self.args[0])


def run(work: Callable, tasks: Sequence[tuple], *, jobs: int | None = 1, mirror=None,
        progress: Callable[[int, int, int], None] | None = None,
        workers: int | None = None) -> list:
    """``work(mirror, *task)`` for each task; one outcome per task, in task order: the
    result, or ``Failed`` when it raised an ``Exception`` (the caller decides which are
    expected).  ``work`` must be a module-level function and tasks and results picklable
    when a pool runs them.

    ``mirror``: an open mirror (or None).  Serial runs use it; the pool's workers open its
    file read-only, so it must be open read-only itself (DuckDB: one writer or many
    readers), else the tasks run serially.  ``jobs``: worker processes allowed (None: every
    core, 1: serial); ``workers`` overrides ``worker_count`` (benchmarks: 0 forces serial).
    ``progress(done, total, index)`` is called in this process after each task finishes
    (``index``: which); an exception it raises stops the run (the pool with it)."""
    tasks = list(tasks)
    count = worker_count(jobs, len(tasks)) if workers is None else int(workers)
    if mirror is not None and not mirror.read_only:
        count = 0  # a read-write connection locks the file: workers could not open it
    if count < 2:  # one process in all: this one
        return _run_serial(work, tasks, mirror, progress)
    return _run_pool(work, tasks, count, mirror, progress)


def _run_serial(work, tasks, mirror, progress) -> list:
    out = _run_here(work, tasks, mirror)
    if progress is not None:
        for index in range(len(tasks)):
            progress(index + 1, len(tasks), index)
    return out


def _run_here(work, tasks, mirror) -> list:
    """``work(mirror, *task)`` for each task, in this process, errors as values."""
    out = []
    for task in tasks:
        try:
            out.append(work(mirror, *task))
        except Exception as err:
            out.append(Failed(err))
    return out


def _chunks(n: int, workers: int) -> list[range]:
    """Consecutive task ranges: about 8 per worker, at most ``MAX_CHUNK`` tasks each."""
    size = max(1, min(MAX_CHUNK, n // (8 * workers)))
    return [range(a, min(n, a + size)) for a in range(0, n, size)]


def _run_pool(work, tasks, workers: int, mirror, progress) -> list:
    """``workers`` processes in all: this one and ``workers - 1`` spawned, taking chunks
    from one list.  This process starts at once and keeps working while the others start
    (a spawned worker imports numpy, DuckDB and the analysis for ~0.5 s before its first
    task, which an idle parent used to wait out), so starting the pool costs one
    worker fewer and no idle time.

    ``multiprocessing.Pool``, not ``ProcessPoolExecutor``: its ``terminate`` stops the
    workers and its own queue threads reliably on Ctrl+C (an executor shut down while its
    workers were killed could leave its queue threads for the interpreter's exit to wait on:
    a Ctrl+C that hung for 30 s in CI).  The workers' results arrive on a thread of this
    process; ``progress`` is called on the calling thread only."""
    out: list = [None] * len(tasks)
    chunks = _chunks(len(tasks), workers)
    feed = _Feed(len(chunks), in_flight=2 * (workers - 1))
    arrived: queue.SimpleQueue = queue.SimpleQueue()
    mirror_path = None if mirror is None else str(mirror.path)
    with _quiet_children():  # the workers start here, with these signals blocked
        pool = multiprocessing.get_context("spawn").Pool(
            workers - 1, initializer=_start_worker, initargs=(mirror_path,))
    done = 0

    def record(n: int, outcomes: list) -> None:
        nonlocal done
        for index, outcome in zip(chunks[n], outcomes):
            out[index] = outcome
            done += 1
            if progress is not None:
                progress(done, len(tasks), index)

    try:
        jobs = ((n, work, [tasks[i] for i in chunks[n]]) for n in feed)
        threading.Thread(target=_collect, args=(pool, jobs, feed, arrived), daemon=True,
                         name="devmon-pool-results").start()
        while (n := feed.take()) is not None:
            record(n, _run_here(work, [tasks[i] for i in chunks[n]], mirror))
            _record_arrived(arrived, record, block=False)
        while done < len(tasks):
            _record_arrived(arrived, record, block=True)
        pool.close()
    except BaseException:
        feed.close()  # the pool's task thread may wait in the feed: terminate joins it
        pool.terminate()  # the running tasks stop now; queued ones never start
        raise
    finally:
        pool.join()
    return out


def _record_arrived(arrived: queue.SimpleQueue, record, *, block: bool) -> None:
    """The workers' chunks that arrived (at least one when ``block``), recorded; a fault
    of the pool itself raised here, on the calling thread."""
    while True:
        try:
            item = arrived.get(block=block)
        except queue.Empty:
            return
        if isinstance(item, BaseException):
            raise item
        record(*item)
        block = False


def _collect(pool, jobs, feed: "_Feed", arrived: queue.SimpleQueue) -> None:
    """On a thread: the workers' results as they come, each freeing a place in flight.
    It ends with the run: when every result came, or soon after the feed is closed (a
    cancelled or interrupted run, whose terminated pool sends nothing more: a wait without
    end would keep this thread for the life of the process, a GUI's)."""
    try:
        results = pool.imap_unordered(_run_numbered_chunk, jobs)
        while True:
            try:
                n, outcomes = results.next(timeout=_COLLECT_POLL_S)
            except multiprocessing.TimeoutError:
                if feed.closed:
                    return
                continue
            except StopIteration:
                return
            arrived.put((n, outcomes))
            feed.release()
    except BaseException as err:  # the pool broke: the caller raises it
        arrived.put(err)


_COLLECT_POLL_S = 0.2  # how often a waiting collector looks whether the run was given up


class _Feed:
    """Chunk numbers 0..count-1, each handed out once, to this process (``take``) or to the
    pool (iterating the feed, on the pool's task thread).  The pool gets a chunk only while
    fewer than ``in_flight`` of its chunks are unfinished, so chunks are not queued for the
    workers that this process could have taken."""

    def __init__(self, count: int, in_flight: int) -> None:
        self._next, self._count, self._closed = 0, count, False
        self._lock = threading.Lock()
        self._places = threading.Semaphore(max(1, in_flight))

    def take(self) -> int | None:
        with self._lock:
            if self._closed or self._next >= self._count:
                return None
            self._next += 1
            return self._next - 1

    def release(self) -> None:
        self._places.release()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """No more chunks; a pool thread waiting for a place wakes up and stops."""
        self._closed = True
        self._places.release()

    def __iter__(self):
        while True:
            self._places.acquire()
            n = self.take()
            if n is None:
                self._places.release()  # wake any other waiter too
                return
            yield n


@contextmanager
def _quiet_children():
    """While worker processes start: SIGINT and SIGTERM blocked (children inherit the mask
    through exec; a signal to this process waits, it is not lost), and one math thread
    per worker in the environment they inherit (unless the user set it)."""
    saved = {k: os.environ.get(k) for k in _ONE_THREAD}
    for key, value in _ONE_THREAD.items():
        os.environ.setdefault(key, value)
    mask = getattr(signal, "pthread_sigmask", None)
    blocked = {signal.SIGINT, signal.SIGTERM}
    old = mask(signal.SIG_BLOCK, blocked) if mask else None
    try:
        yield
    finally:
        if mask:
            mask(signal.SIG_SETMASK, old)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ----------------------------------------------------------------------------- workers

_worker_mirror_path: str | None = None
_worker_mirror = None


def _start_worker(mirror_path: str | None) -> None:
    """A worker's first act: Ctrl+C is the parent's to handle (the terminal sends it to the
    whole process group), SIGTERM (the parent stopping it) ends it silently; then the
    signals blocked while it started are let through."""
    global _worker_mirror_path
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    _worker_mirror_path = mirror_path


def _mirror():
    """This worker's read-only connection to the mirror, opened on first use."""
    global _worker_mirror
    if _worker_mirror is None and _worker_mirror_path is not None:
        from devmon_sync.store import Mirror

        _worker_mirror = Mirror.open(_worker_mirror_path, read_only=True)
    return _worker_mirror


def _run_numbered_chunk(job: tuple) -> tuple[int, list]:
    """``_run_chunk`` of ``(n, work, chunk)``, returned with its number ``n``."""
    n, work, chunk = job
    return n, _run_chunk(work, chunk)


def _run_chunk(work, chunk: list[tuple]) -> list:
    """In a worker: ``work(mirror, *task)`` for each task of the chunk, errors as values."""
    out = []
    for task in chunk:
        try:
            out.append(work(_mirror(), *task))
        except Exception as err:
            out.append(Failed(_picklable(err), traceback.format_exc()))
    return out


def _picklable(err: Exception) -> Exception:
    """The exception itself when it can travel back to the parent, else a RuntimeError
    naming it (an exception whose constructor wants other arguments cannot)."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")
