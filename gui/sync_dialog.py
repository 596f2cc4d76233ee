"""The Sync dialog: choose or add a profile, sync the open mirror, watch it, cancel it.

DuckDB allows one writing process and the main window holds the mirror open read-write, so
the sync cannot be a ``devmon sync`` subprocess: it runs in-process as a ``TaskRunner`` task,
on a pool thread with its own cursor (``Mirror.for_thread``).  The engine reports through a
callback on that thread; ``_ProgressRelay`` turns each report into text there and hands it to
``state.set_progress`` (a queued signal), so widgets are only touched on the GUI thread.

Cancel sets the task's event: the engine stops before its next chunk and every chunk commits
whole, so a cancelled (or failed) sync keeps everything before it and a later one resumes.
The client's waits (rate-limit pacing, retry backoff, up to a minute) sleep on that same event,
so Cancel is not stuck behind them.

The dialog is not modal: the main window stays usable, and learns of every finished run
through ``synced`` to refresh its views.  Its writes go through ``mirror_watch.own_write``,
so the window never takes them for another program's.

After a sync the dialog lists every rover at an alarm level now, by name, the most severe
first (``browse.points_at_level``): not only those the sync evaluated again (the rovers it
brought new epochs to), which left out a rover at emergency whose data had not changed.

Size: about 700 lines for one dialog: profiles, the run on a worker with its progress and
cancel, and the report at the end share the dialog's state.
"""

from __future__ import annotations

import os
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, time, timezone
from pathlib import Path
from typing import Any

from PySide6.QtCore import QDate, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDateEdit, QDialog, QFormLayout, QGroupBox,
                               QHBoxLayout, QLabel, QLineEdit, QMessageBox, QProgressBar,
                               QPushButton, QSizePolicy, QVBoxLayout, QWidget)

from analysis.alarms import quantity_words
from analysis.words import counted
from devmon_sync.client import ApiError, normalise_base_url
from devmon_sync.credentials import (ENV_API_KEY, CredentialsError, key_store, list_profiles,
                                     save_profile)
from devmon_sync.store import StoreError, browse
from devmon_sync.analyze.alarm_history import after_sync
from devmon_sync.sync.engine import Cancelled, Progress, ScopeError, SyncEngine, SyncOptions, SyncReport
from gui.connectivity import PROFILE_SETTING, connect, sync_error_text
from gui.mirror_watch import own_write
from gui.settings import Settings
from gui.workers import TaskRunner, TaskState

STOPPING = "Stopping after the current chunk…"
AT_LEVEL_SHOWN = 10  # rovers at a level listed by name; the Overview lists them all
BUSY = -1.0  # the percent of a phase whose length is not known yet (an indeterminate bar)
_PHASES = {"metadata": "Reading sites, devices and groups", "latest": "Asking what is new",
           "readings": "Readings", "gnss": "GNSS epochs", "done": "Finishing"}
_ERROR_STYLE = "color: #c62828;"

#: The sync running on each runner's mirror: two writers at once would fight over the cursors.
_RUNNING: "weakref.WeakKeyDictionary[TaskRunner, TaskState]" = weakref.WeakKeyDictionary()


# ----------------------------------------------------------------------------- the task


@dataclass
class SyncOutcome:
    """What a sync task hands back: the engine's report (None if it never reached the
    mirror) and, when it failed, the message for the user."""

    report: SyncReport | None = None
    error: str | None = None
    alarm_lines: list[str] = field(default_factory=list)  # the evaluation after it
    api_url: str | None = None  # where the service answered, when the sync reached it
    at_level: list = field(default_factory=list)  # every rover at a level now (LevelledPoint)


@dataclass
class SyncJob:
    """One sync, as a ``TaskRunner`` task (``job.run``).  ``outcome`` is filled as it goes, so
    the dialog can read the report of a cancelled run, which the runner does not deliver."""

    profile: str | None
    base_url: str | None = None
    options: SyncOptions = field(default_factory=SyncOptions)
    rate_limit_per_minute: int | None = None
    client_options: dict[str, Any] = field(default_factory=dict)
    outcome: SyncOutcome = field(default_factory=SyncOutcome)

    def run(self, mirror, state: TaskState) -> SyncOutcome:
        """On the worker: connect, run the engine on this thread's cursor, and turn the
        expected failures into a message (a bug still reaches the runner's error path)."""
        relay = _ProgressRelay(state)
        try:
            conn = connect(self.profile, self.base_url, **self._client_kwargs(state, relay))
        except (CredentialsError, ApiError) as err:
            self.outcome.error = str(err)
            return self.outcome
        with conn.client as client, _for_writing(mirror) as writable:
            engine = SyncEngine(client, writable, self.options, on_progress=relay,
                                cancel=state.cancel_event)
            self.outcome.report = engine.report
            try:
                if engine.run().status == "ok":
                    self.outcome.api_url = client.base_url
                    self.outcome.alarm_lines = after_sync(writable)
                    self.outcome.at_level = _points_at_level(writable, self.outcome)
            except ApiError as err:
                self.outcome.error = sync_error_text(err, conn.key_origin, client.base_url)
            except (StoreError, ScopeError, CredentialsError) as err:
                self.outcome.error = str(err)
        return self.outcome

    def _client_kwargs(self, state: TaskState, relay: "_ProgressRelay") -> dict[str, Any]:
        kwargs: dict[str, Any] = {"on_wait": relay.on_wait,
                                  "sleep": _cancellable_sleep(state.cancel_event)}
        if self.rate_limit_per_minute is not None:
            kwargs["rate_limit_per_minute"] = self.rate_limit_per_minute
        return {**kwargs, **self.client_options}


def _points_at_level(mirror, outcome: SyncOutcome) -> list:
    """Every rover at a level now, as the store holds them after the evaluation; a read
    that fails is said in one line (the synced data stay)."""
    try:
        return browse.points_at_level(mirror)
    except StoreError as err:
        outcome.alarm_lines.append(f"  Could not list the rovers at a level ({err}); the "
                                   f"Overview lists them once the mirror is read again.")
        return []


@contextmanager
def _for_writing(mirror):
    """The task's mirror opened for writing: the window's reads hold no lock between tasks
    (``MirrorAccess``), so its sync takes the file for writing only while it runs, as the
    window's own write (``own_write``: not another program's); a mirror opened for writing
    already (tests' runners) is used as it is."""
    access = getattr(mirror, "access", None)
    if access is None:
        yield mirror
        return
    with own_write(access) as writable:
        yield writable


def _key_store_or_none():
    """Where a saved key would go (``credentials.key_store``), or None without any keyring."""
    try:
        return key_store(allow_plaintext=True)
    except CredentialsError:
        return None


def _cancellable_sleep(cancel: threading.Event):
    """The client's sleep: a wait (pacing, backoff) ends at once on Cancel.  Raising the
    engine's ``Cancelled`` before a request is sent leaves no chunk half-done."""
    def sleep(seconds: float) -> None:
        if cancel.wait(seconds):
            raise Cancelled()
    return sleep


class _ProgressRelay:
    """Called on the worker thread: formats the engine's ``Progress`` and the client's waits
    and passes them on through ``state.set_progress`` (queued to the GUI thread)."""

    def __init__(self, state: TaskState) -> None:
        self.state = state
        self.percent = BUSY
        self.text = ""

    def __call__(self, p: Progress) -> None:
        self.percent, self.text = progress_percent(p), progress_text(p)
        self.state.set_progress(self.percent, self.text)

    def on_wait(self, seconds: float, reason: str) -> None:
        if seconds >= 1.0:  # short pacing waits are not worth a word
            self.state.set_progress(self.percent, f"{self.text}\nWaiting {seconds:.0f} s: "
                                                  f"{reason}")


def progress_percent(p: Progress) -> float:
    """Windows done of the plan; BUSY while the plan is not made yet."""
    if p.phase == "done":
        return 100.0
    if p.phase in ("readings", "gnss") and p.total:
        return 100.0 * p.done / p.total
    return BUSY


def progress_text(p: Progress) -> str:
    """Two lines: what is being fetched, then rows, requests and the time left."""
    counts = f"{p.rows:,} rows · {p.requests:,} requests"
    if p.phase in ("readings", "gnss"):
        eta = f" · {_eta_text(p.eta_s)}" if p.eta_s is not None else ""
        return (f"{_PHASES[p.phase]}: window {p.done + 1} of {p.total} ({p.message})\n"
                f"{counts}{eta}")
    return f"{_PHASES.get(p.phase, p.phase)}…\n{counts}"


def result_text(outcome: SyncOutcome) -> str:
    """The dialog's result line: counts on success, what is kept on cancel, else the error."""
    report = outcome.report
    if outcome.error:
        return outcome.error
    if report is None or report.status == "cancelled":
        done = "" if report is None or not (report.readings_rows or report.epoch_rows) else \
            f" ({report.readings_rows:,} readings and {report.epoch_rows:,} epochs this time)"
        return f"Cancelled: everything committed so far is kept{done}; Sync again to resume."
    if not report.windows:
        text = f"Up to date: nothing new to fetch ({report.requests} requests, " \
               f"{_seconds_text(report.seconds)})"
    else:
        text = (f"Synced {report.readings_rows:,} readings and {report.epoch_rows:,} epochs in "
                f"{_seconds_text(report.seconds)}")
    if report.problems:
        text += (f"; {len(report.problems)} resources were refused to this key and skipped "
                 f"(`devmon status` lists them)")
    return text + "." + "".join(f"\n{line}" for line in _alarm_lines(outcome))


def _alarm_lines(outcome: SyncOutcome) -> list[str]:
    """Every rover at a level now, by name, the most severe first (at most
    ``AT_LEVEL_SHOWN``), then what the evaluation after the sync could not do."""
    points = outcome.at_level
    lines = []
    if points:
        lines.append(f"At an alarm level now: {len(points)} rover{'s' * (len(points) != 1)}")
        lines += [f"  {p.display_name} ({p.serial_number}): {p.level} by "
                  f"{quantity_words(p.quantity)}" for p in points[:AT_LEVEL_SHOWN]]
        if len(points) > AT_LEVEL_SHOWN:
            lines.append(f"  and {len(points) - AT_LEVEL_SHOWN} more: the Overview lists "
                         f"them all")
    problems = [line.strip() for line in outcome.alarm_lines
                if "not evaluated" in line or "failed" in line or "Could not" in line]
    return lines + problems


def _eta_text(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    return f"about {int(seconds // 3600)} h {round(seconds % 3600 / 60):02d} min left"


def _seconds_text(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {round(seconds % 60):02d} s"


# ----------------------------------------------------------------------------- the dialog


class SyncDialog(QDialog):
    """Sync the runner's open mirror from a saved profile; not modal.

    ``rate_limit_per_minute`` overrides the client's default (200, the service's limit; 0 for
    none, as tests against a local server use) and ``client_options`` go to ``ApiClient``
    (timeouts, retries).  ``settings`` remembers the profile last used (default: the parent's
    ``settings``, if it has one).
    """

    synced = Signal(object)  # the SyncReport of every run that reached the mirror (ok,
    # cancelled or failed: all may have committed chunks), while that mirror is still open

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None, *,
                 rate_limit_per_minute: int | None = None,
                 client_options: dict[str, Any] | None = None,
                 settings: Settings | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.rate_limit_per_minute = rate_limit_per_minute
        self.client_options = dict(client_options or {})
        self.settings = settings if settings is not None else getattr(parent, "settings", None)
        self.job: SyncJob | None = None
        self.state: TaskState | None = None
        self._stopping = False
        self._synced_mirror = None  # the Mirror the running sync writes to
        self.setModal(False)
        self._build()
        self._show_mirror()
        self.reload_profiles(self._remembered_profile())

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.addWidget(self._service_box())
        layout.addWidget(self._profile_form())
        layout.addWidget(self._options_box())
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)  # no "0%" before the first sync
        self.detail_label = _wrapping_label()
        self.result_label = _wrapping_label()
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for label in (self.detail_label, self.result_label):  # room for two lines each, so
            label.setMinimumHeight(2 * label.fontMetrics().lineSpacing())  # it rarely grows
        for widget in (self.progress, self.detail_label, self.result_label):
            layout.addWidget(widget)
        layout.addStretch(1)
        layout.addLayout(self._buttons())
        self.setMinimumWidth(560)

    def _service_box(self) -> QGroupBox:
        box = QGroupBox("Service")
        form = QFormLayout(box)
        self.profile_combo = QComboBox()
        self.profile_combo.setPlaceholderText("no profile yet: add one with New profile…")
        self.profile_combo.setSizePolicy(QSizePolicy.Policy.Expanding,
                                         QSizePolicy.Policy.Fixed)
        self.new_profile_button = _button("New profile…", self._toggle_form)
        self.new_profile_button.setCheckable(True)
        row = QHBoxLayout()
        row.addWidget(self.profile_combo, 1)
        row.addWidget(self.new_profile_button)
        form.addRow("Profile:", row)
        self.address_edit = QLineEdit(placeholderText="https://monitoring.example.com/v1")
        self.address_label = QLabel("Address:")
        form.addRow(self.address_label, self.address_edit)
        self.env_note = _wrapping_label()
        form.addRow(self.env_note)
        self.mirror_label = QLabel()
        form.addRow("Mirror:", self.mirror_label)
        self.profile_combo.currentIndexChanged.connect(self._source_changed)
        return box

    def _profile_form(self) -> QGroupBox:
        self.form_box = QGroupBox("New profile")
        form = QFormLayout(self.form_box)
        self.name_edit = QLineEdit(placeholderText="e.g. site-a")
        self.url_edit = QLineEdit(placeholderText="https://monitoring.example.com/v1")
        self.key_edit = QLineEdit(placeholderText="the key the service issued you")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.returnPressed.connect(self.save_new_profile)
        form.addRow("Name:", self.name_edit)
        form.addRow("Address:", self.url_edit)
        form.addRow("API key:", self.key_edit)
        store = _key_store_or_none()
        plain = store is not None and not store.secure
        self.plaintext_check = QCheckBox("Keep the key in a plain file all the same")
        self.plaintext_check.setToolTip(f"The key would be kept in {store.place()}."
                                        if plain else "")
        self.plaintext_check.setVisible(plain)
        form.addRow(self.plaintext_check)
        self.save_button = _button("Save profile", self.save_new_profile)
        row = QHBoxLayout()
        self.form_message = _wrapping_label(
            "The key is kept in the operating system's keyring, never in a file."
            if store is None or store.secure else
            f"No OS keyring here: a saved key would sit in {store.place()}, usable by anyone "
            f"who can read it. Or set {ENV_API_KEY} instead and save no key.")
        # the message gets a row of its own, the dialog's whole width: beside the button,
        # in a nested layout, a wrapped message was given one line's height and cut
        row.addStretch(1)
        row.addWidget(self.save_button)
        form.addRow(row)
        form.addRow(self.form_message)
        return self.form_box

    def _options_box(self) -> QGroupBox:
        box = QGroupBox("Options")
        row = QHBoxLayout(box)
        self.since_check = QCheckBox("Only data since")
        self.since_edit = QDateEdit(QDate.currentDate().addDays(-30))
        self.since_edit.setCalendarPopup(True)
        self.since_edit.setDisplayFormat("yyyy-MM-dd")
        self.since_edit.setEnabled(False)
        self.since_check.toggled.connect(self.since_edit.setEnabled)
        tip = ("For parameters not mirrored yet: fetch nothing older (UTC midnight). Mirrored "
               "ones continue from where they stopped.")
        self.since_check.setToolTip(tip)
        self.since_edit.setToolTip(tip)
        row.addWidget(self.since_check)
        row.addWidget(self.since_edit)
        row.addStretch(1)
        return box

    def _buttons(self) -> QHBoxLayout:
        self.sync_button = _button("Sync now", self.sync_now)
        self.cancel_button = _button("Cancel sync", self.cancel_sync)
        self.cancel_button.setEnabled(False)
        self.close_button = _button("Close", self.close)
        row = QHBoxLayout()
        row.addWidget(self.sync_button)
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        row.addWidget(self.close_button)
        return row

    # ------------------------------------------------------------------ profiles

    def reload_profiles(self, select: str | None = None) -> None:
        """Fill the chooser from the profiles file (and DEVMON_API_KEY when it is set)."""
        self.profile_combo.blockSignals(True)
        self.profile_combo.clear()
        try:
            names = list_profiles()
        except CredentialsError as err:
            names = []
            self._form_says(str(err), error=True)
        for name in names:
            self.profile_combo.addItem(name, name)
        if _env_key_set():
            self.profile_combo.addItem(f"Key from {ENV_API_KEY} (environment)", None)
        index = self.profile_combo.findData(select) if select else -1
        self.profile_combo.setCurrentIndex(max(index, 0) if self.profile_combo.count() else -1)
        self.profile_combo.blockSignals(False)
        self._show_form(not names and not _env_key_set())
        self._source_changed()

    def save_new_profile(self) -> bool:
        """Save the form's profile: the key to the OS keyring (the credentials module's message
        when that fails, which points to DEVMON_API_KEY), the address to the profiles file."""
        name = self.name_edit.text().strip()
        try:
            url = normalise_base_url(self.url_edit.text())
            store = key_store(allow_plaintext=self.plaintext_check.isChecked())
            save_profile(name, url, self.key_edit.text())
        except (CredentialsError, ApiError) as err:
            text = str(err)
            if isinstance(err, CredentialsError) and self.plaintext_check.isVisible() \
                    and not self.plaintext_check.isChecked():
                text = (f"Nothing was saved: this machine has no OS keyring, and the key would "
                        f"sit in {_key_store_or_none().place()}. Tick the box above to keep it "
                        f"there all the same, or set {ENV_API_KEY} instead.")
            self._form_says(text, error=True)
            return False
        self.key_edit.clear()  # the keyring has it; the widget should not keep it
        self.name_edit.clear()
        self.url_edit.clear()
        self.reload_profiles(select=name)
        self._show_form(False)
        self._show_result(f"Saved profile {name!r} for {url}; its key is in {store.place()}.")
        return True

    def _toggle_form(self) -> None:
        self._show_form(self.form_box.isHidden())

    def _show_form(self, visible: bool) -> None:
        self.form_box.setVisible(visible)
        self.new_profile_button.setChecked(visible)
        if visible:
            self.name_edit.setFocus()
        self._fit(shrink=True)

    def _fit(self, shrink: bool = False) -> None:
        """Height to the content at the current width.  (``adjustSize`` measures wrapping
        labels at a narrower width and leaves a gap.)  Grows for a long message; shrinks only
        when asked (the form closed), so the window does not jump while a sync runs."""
        layout = self.layout()
        layout.activate()
        width = max(self.width(), self.minimumWidth())
        needed = layout.totalHeightForWidth(width) if layout.hasHeightForWidth() \
            else layout.sizeHint().height()
        if shrink or needed > self.height():
            self.resize(width, needed)

    def _show_mirror(self) -> None:
        """The file a sync would write (the main window may have opened another since)."""
        path = getattr(self.runner.mirror, "path", None)
        self.mirror_label.setText(Path(path).name if path else
                                  "none open: open or create one first")
        self.mirror_label.setToolTip(str(path or ""))
        self.setWindowTitle(f"Sync {Path(path).name}" if path else "Sync")

    def _form_says(self, text: str, error: bool = False) -> None:
        self.form_message.setStyleSheet(_ERROR_STYLE if error else "")
        self.form_message.setText(text)
        if error:
            self._show_form(True)
        # a form layout gives a wrapped label one line unless told its height at its width
        self.layout().activate()
        label = self.form_message
        label.setMinimumHeight(label.heightForWidth(max(label.width(), 1)))
        self._fit()

    def _source_changed(self) -> None:
        """The address field is for the environment's key only (profiles carry theirs)."""
        env_chosen = self.profile_combo.count() > 0 and self.profile_combo.currentData() is None
        self.address_label.setVisible(env_chosen)
        self.address_edit.setVisible(env_chosen)
        self.env_note.setVisible(_env_key_set())
        self.env_note.setText(f"{ENV_API_KEY} is set: its key is used with the chosen "
                              f"profile's address (as `devmon sync` does).")
        self._update_buttons()

    def _remembered_profile(self) -> str | None:
        if self.settings is None:
            return None
        value = self.settings.value(PROFILE_SETTING)
        return str(value) if value else None

    # ------------------------------------------------------------------ syncing

    def is_syncing(self) -> bool:
        return self.state is not None

    def sync_now(self) -> None:
        """Start a sync of the open mirror on a worker thread."""
        if self.is_syncing():
            return
        refusal = self._cannot_sync()
        if refusal:
            self._show_result(refusal, error=True)
            return
        profile = self.profile_combo.currentData()
        address = self.address_edit.text().strip() if profile is None else ""  # env key only
        self.job = SyncJob(profile, address or None, self._options(),
                           self.rate_limit_per_minute, self.client_options)
        self._remember(profile)
        self._synced_mirror = self.runner.mirror
        self._stopping = False
        self._show_result("")
        self.progress.setTextVisible(True)
        self._on_progress(BUSY, "Connecting…")
        self.state = self.runner.submit(
            self.job.run, on_done=self._on_done, on_error=self._on_error,
            on_progress=self._on_progress, on_cancelled=self._on_cancelled, label="sync")
        _RUNNING[self.runner] = self.state
        self._update_buttons()

    def _cannot_sync(self) -> str | None:
        """Why a sync cannot start now, or None."""
        if self.runner.mirror is None:
            return ("No mirror is open: open one with File → Open, or create one with "
                    "File → Sync, then sync it.")
        other = _RUNNING.get(self.runner)
        if other is not None and not other.finished.is_set():
            return ("A sync of this mirror is already running (in another Sync window): wait "
                    "for it or cancel it there.")
        if self.profile_combo.count() == 0:
            return "Choose a profile, or add one with New profile…."
        return None

    def cancel_sync(self) -> None:
        """Ask the engine to stop; it does so before its next chunk (or wait)."""
        if self.state is None:
            return
        self.state.cancel()
        self._stopping = True
        self.detail_label.setText(STOPPING)
        self._update_buttons()

    def _options(self) -> SyncOptions:
        if not self.since_check.isChecked():
            return SyncOptions()
        day = self.since_edit.date().toPython()
        return SyncOptions(since=datetime.combine(day, time(), tzinfo=timezone.utc))

    def _remember(self, profile: str | None) -> None:
        if self.settings is not None and profile:
            self.settings.set_value(PROFILE_SETTING, profile)

    # ------------------------------------------------------------------ results (GUI thread)

    def _on_progress(self, percent: float, text: str) -> None:
        if percent < 0:
            self.progress.setRange(0, 0)  # busy: the plan is not made yet
        else:
            self.progress.setRange(0, 100)
            self.progress.setValue(round(percent))
        self.detail_label.setText(f"{STOPPING}\n{text}" if self._stopping else text)
        if self.detail_label.text().count("\n") >= 2:  # a wait or Stopping: a third line
            self._fit()

    def _on_done(self, outcome: SyncOutcome) -> None:
        self._finish(outcome)

    def _on_cancelled(self) -> None:
        self._finish(self.job.outcome if self.job is not None else SyncOutcome())

    def _on_error(self, message: str) -> None:
        """A bug in the sync (logged in full by the runner): say so, keep what is known."""
        outcome = self.job.outcome if self.job is not None else SyncOutcome()
        outcome.error = message
        self._finish(outcome)

    def _finish(self, outcome: SyncOutcome) -> None:
        self.state = None
        self.progress.setRange(0, 100)  # stops a busy animation
        self.progress.setValue(round(_share_done(outcome.report)))
        self.detail_label.setText(_counts_text(outcome.report))
        self._show_result(result_text(outcome), error=outcome.error is not None)
        self._stopping = False
        self._update_buttons()
        if outcome.report is not None and self.runner.mirror is self._synced_mirror:
            self.synced.emit(outcome.report)  # not after the window closed that mirror

    def _show_result(self, text: str, error: bool = False) -> None:
        self.result_label.setStyleSheet(_ERROR_STYLE if error else "")
        self.result_label.setText(text)
        self._fit()

    def _update_buttons(self) -> None:
        running = self.is_syncing()
        has_source = self.profile_combo.count() > 0
        self.sync_button.setEnabled(not running and has_source
                                    and self.runner.mirror is not None)
        self.cancel_button.setEnabled(running and not self._stopping)
        for widget in (self.profile_combo, self.new_profile_button, self.form_box,
                       self.since_check, self.address_edit):
            widget.setEnabled(not running)
        self.since_edit.setEnabled(not running and self.since_check.isChecked())

    # ------------------------------------------------------------------ showing and closing

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self.is_syncing():
            self._show_mirror()
            self._update_buttons()
        self._fit(shrink=True)  # only now are the style's sizes known


    def closeEvent(self, event: QCloseEvent) -> None:
        if self._may_close():
            event.accept()
        else:
            event.ignore()

    def reject(self) -> None:  # Esc
        if self._may_close():
            super().reject()

    def _may_close(self) -> bool:
        """Closing while syncing asks to stop; the stopping sync still reports (``synced``)."""
        if not self.is_syncing():
            return True
        if not self.confirm_stop():
            return False
        self.cancel_sync()
        return True

    def confirm_stop(self) -> bool:
        """Ask whether to stop the running sync (a method, so tests can answer it)."""
        answer = QMessageBox.question(
            self, "Stop the sync?",
            "A sync is running. Stop it after the current chunk and close this window?\n\n"
            "Everything committed so far is kept; Sync again later to resume.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes


# ----------------------------------------------------------------------------- helpers


def _button(text: str, slot) -> QPushButton:
    """A push button that Enter never presses by accident (no auto-default in a dialog)."""
    button = QPushButton(text)
    button.setAutoDefault(False)
    button.clicked.connect(slot)
    return button


def _wrapping_label(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def _share_done(report: SyncReport | None) -> float:
    """Percent of the plan committed when a run ends (a refused window is split, so its halves
    can outnumber the plan: capped)."""
    if report is None:
        return 0.0
    if report.status == "ok":
        return 100.0
    return 100.0 * min(report.windows, len(report.plan)) / len(report.plan) if report.plan \
        else 0.0


def _counts_text(report: SyncReport | None) -> str:
    if report is None or not report.windows:
        return ""
    return f"{counted(report.windows, 'chunk')} committed · {counted(report.requests, 'request')}"


def _env_key_set() -> bool:
    return bool((os.environ.get(ENV_API_KEY) or "").strip())
