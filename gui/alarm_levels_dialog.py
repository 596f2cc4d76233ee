"""The Alarm levels dialog: set the GNSS alarm levels of a device, a site or a device group,
kept in the mirror (issue 16, point 3; what `devmon alarms` sets from the command line).

One row per level key: the 3D displacement and velocity, then each component (horizontal,
vertical, up, down, along and across the device azimuth) for both, with an alert, alarm and
emergency threshold each (empty: that level is not used).  For a device, the levels it
inherits (from its nearest group with levels, else its site) are shown greyed in the empty
cells, with where they come from; typing a value gives the device its own ladder for that
key, which then replaces the inherited one as a whole.

Reads run on the window's ``TaskRunner``.  Save validates every row first (``AlarmLevels``:
nothing is written while a row is wrong), then, on a worker, takes the file for writing
(``MirrorAccess.writing``: the window holds no lock between reads, so a `devmon sync` may
hold it; then the dialog says so and the user can click Save again), writes the changed
keys, and evaluates the alarm history of the rovers concerned again, as `devmon alarms`
does.  A mirror on read-only media is shown, and the dialog says why it cannot be saved.

Size: about 680 lines for one dialog whose parts (the scope tree, the inherited and own
levels of each key, validation, saving under the mirror's lock) share the rows' state.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDialog, QDialogButtonBox,
                               QHBoxLayout, QHeaderView, QLabel, QMessageBox,
                               QStyledItemDelegate, QTableWidget, QTableWidgetItem,
                               QVBoxLayout)

from analysis.alarms import quantity_words
from analysis.alarms import AlarmLevels
from devmon_sync.store import StoreError, queries
from devmon_sync.store.mirror import MirrorLockedError
from gui.mirror_watch import own_write

#: The level names the dialog offers, least severe first (the CLI's and analysis' names).
LEVEL_NAMES = ("alert", "alarm", "emergency")
#: The rows: the 3D length of displacement and velocity, then each component for both.
QUANTITY_KEYS = ("displacement", "velocity") + tuple(
    queries.alarm_quantity(base, component)
    for component in queries.ALARM_COMPONENTS for base in queries.ALARM_QUANTITIES)
SCOPE_TITLES = {"device": "Device (GNSS rover)", "site": "Site", "group": "Device group"}
ERROR_STYLE = "color: #b71c1c;"
HINT_STYLE = "color: #616161;"
INVALID_BRUSH = QBrush(QColor("#ffcdd2"))
INHERITED_COLOUR = QColor("#8a8a8a")
INHERITED_ROLE = Qt.ItemDataRole.UserRole + 1  # the inherited threshold shown in an empty cell
LOCKED_TEXT = ("Not saved: another program (a `devmon sync`?) is writing the mirror, and "
               "DuckDB lets only one program write a file at a time. Your levels are still "
               "here: click Save again when it has finished.")


# ----------------------------------------------------------------------------- what is edited

@dataclass(frozen=True)
class Target:
    """What the levels are set on, as the dialog offers it: ``scope`` device / site / group,
    ``key`` the serial number or uuid, ``label`` for the name combo, ``rovers`` the GNSS
    rovers the levels apply to (evaluated again after a save)."""

    scope: str
    key: str
    label: str
    name: str
    rovers: tuple[str, ...] = ()

    def describe(self) -> str:
        """``site Illgraben slope``, ``device DM24-1 (Rover 1)`` (as ``AlarmScope``)."""
        return queries.AlarmScope(self.scope, self.key, self.name).describe()


def targets_of(overview: dict) -> dict[str, list[Target]]:
    """The devices (GNSS rovers), sites and groups of the window's overview
    (``browse.device_tree`` and ``browse.group_tree``), with the rovers each covers."""
    rovers_by_site: dict[str, list[str]] = {}
    devices, names = [], {}
    for site in overview.get("sites", []):
        for d in site.devices:
            names[d.serial_number] = d.display_name
            if d.is_gnss_rover:
                devices.append(d)
                if site.uuid is not None:
                    rovers_by_site.setdefault(site.uuid, []).append(d.serial_number)
    out: dict[str, list[Target]] = {"device": [], "site": [], "group": []}
    for d in sorted(devices, key=lambda d: (d.display_name.casefold(), d.serial_number)):
        label = d.display_name if d.display_name == d.serial_number \
            else f"{d.display_name}  ·  {d.serial_number}"
        out["device"].append(Target("device", d.serial_number, label, d.display_name,
                                    (d.serial_number,)))
    for site in overview.get("sites", []):
        if site.uuid is not None:
            out["site"].append(Target("site", site.uuid, site.name, site.name,
                                      tuple(rovers_by_site.get(site.uuid, ()))))
    rover_set = {d.serial_number for d in devices}

    def walk(node, path: str) -> tuple[str, ...]:
        label = f"{path} › {node.name}" if path else node.name
        at = len(out["group"])
        members = [s for s in node.members if s in rover_set]
        for child in node.children:
            members += walk(child, label)
        members = tuple(dict.fromkeys(members))
        out["group"].insert(at, Target("group", node.uuid, label, node.name, members))
        return members

    groups = overview.get("groups")
    for root in getattr(groups, "roots", ()):
        walk(root, "")
    return out


@dataclass
class Loaded:
    """A target's levels as read: those set on it, and for a device those that apply to it
    with where each comes from."""

    target: Target
    own: dict[str, dict[str, float]]
    applied: dict[str, dict[str, float]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def load_task(target: Target):
    def task(mirror, _state) -> Loaded:
        own = queries.alarm_levels_set(mirror, target.scope, target.key)
        if target.scope != "device":
            return Loaded(target, own)
        return Loaded(target, own, queries.alarm_levels(mirror, target.key),
                      queries.alarm_level_sources(mirror, target.key))
    return task


@dataclass
class Saved:
    """What a save did: the keys written, each rover evaluated (``PointAlarms`` or why not),
    and the evaluation's failure, if any (the levels are saved all the same)."""

    target: Target
    changed: dict[str, dict[str, float]]
    results: list[tuple[str, object]]
    evaluation_error: str | None = None


@contextmanager
def _for_writing(mirror):
    """The file opened for writing for as long as the block runs (the window's reads hold
    no lock between tasks); a mirror open for writing already is used as it is.  Another
    program writing it (after the store's lock wait): a StoreError saying so in words."""
    access = getattr(mirror, "access", None)
    if access is None:
        yield mirror
        return
    try:
        with own_write(access) as writable:  # the window's own write, not another program's
            yield writable
    except MirrorLockedError:
        raise StoreError(LOCKED_TEXT) from None


def save_task(target: Target, changes: dict[str, dict[str, float]]):
    """Write ``changes`` ({key: ladder}, ``{}`` clears) on the target in one transaction
    (all or nothing), then evaluate its rovers again."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms

    def task(mirror, _state) -> Saved:
        with _for_writing(mirror) as writable:
            queries.set_alarm_ladders(writable, target.key, changes, scope=target.scope)
            try:
                results = evaluate_alarms(writable, list(target.rovers), only_stale=False) \
                    if target.rovers else []
            except Exception as err:  # noqa: BLE001 - the levels are saved; the user is told
                import logging

                logging.getLogger("devmon.alarms").exception("evaluation after a save failed")
                return Saved(target, changes, [], str(err) or type(err).__name__)
        return Saved(target, changes, results)
    return task


def read_only_reason(path: str) -> str | None:
    """Why the mirror file cannot be written (read-only media, a read-only file or folder),
    in words; None when it can."""
    file = Path(path)
    try:
        if os.statvfs(file.parent).f_flag & os.ST_RDONLY:
            return f"it is on read-only media ({file.parent})"
    except (OSError, AttributeError):
        pass
    if not os.access(file, os.W_OK):
        return f"the file {file} is read-only"
    if not os.access(file.parent, os.W_OK):
        return (f"its folder {file.parent} is read-only (DuckDB writes a journal file beside "
                f"the mirror)")
    return None


def threshold_text(value: float) -> str:
    """A stored threshold as typed: ``10``, ``0.5``, exact enough to read back unchanged."""
    text = f"{value:.15g}"
    return text if float(text) == value else repr(value)


def parse_threshold(text: str) -> float:
    """A typed threshold: ``12.5`` or ``12,5``; ValueError otherwise."""
    text = text.strip()
    if "," in text and "." not in text:
        text = text.replace(",", ".")
    return float(text)


def saved_message(saved: Saved, names: dict[str, str]) -> str:
    """The status-bar line after a save: what was saved, how many rovers were evaluated,
    and which are at a level now."""
    text = f"Alarm levels saved for {saved.target.describe()}"
    if saved.evaluation_error:
        return (f"{text}, but their evaluation failed ({saved.evaluation_error}): run "
                f"`devmon alarms --evaluate` to try again")
    evaluated = [(s, a) for s, a in saved.results if not isinstance(a, str)]
    text += f"; {len(evaluated)} rover{'s' * (len(evaluated) != 1)} evaluated"
    skipped = len(saved.results) - len(evaluated)
    if skipped:
        text += f" ({skipped} not: too few epochs)"
    at_level = [f"{names.get(s, s)} {a.overall} ({quantity_words(a.overall_quantity)})"
                for s, a in evaluated if a is not None and a.overall]
    return text + ("; at a level now: " + ", ".join(at_level) if at_level
                   else "; none at a level now")


# ----------------------------------------------------------------------------- widgets

class _InheritedDelegate(QStyledItemDelegate):
    """Draws an inherited threshold, greyed and in italics, in an empty cell; the editor
    starts empty (the inherited value is not the device's own)."""

    def initStyleOption(self, option, index) -> None:
        super().initStyleOption(option, index)
        inherited = index.data(INHERITED_ROLE)
        if not option.text and inherited is not None:
            option.text = threshold_text(inherited)
            option.font.setItalic(True)
            option.palette.setColor(option.palette.ColorRole.Text, INHERITED_COLOUR)
            option.palette.setColor(option.palette.ColorRole.HighlightedText, INHERITED_COLOUR)


class LevelTable(QTableWidget):
    """The thresholds: Delete or Backspace clears the selected cells."""

    def keyPressEvent(self, event) -> None:
        if self.state() != QAbstractItemView.State.EditingState and (
                event.matches(QKeySequence.StandardKey.Delete)
                or event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)):
            for item in self.selectedItems():
                if item.flags() & Qt.ItemFlag.ItemIsEditable:
                    item.setText("")
            return
        super().keyPressEvent(event)


class AlarmLevelsDialog(QDialog):
    """Window-modal, not blocking: ``saved`` carries the status-bar line after a save, and
    whether anything was written."""

    saved = Signal(str, bool)
    loaded = Signal()  # a target's levels are shown (for tests)
    failed = Signal(str)  # a message shown in the dialog (validation, a locked file...)

    def __init__(self, runner, path: str, targets: dict[str, list[Target]],
                 initial: tuple[str, str] | None = None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Alarm levels")
        self.runner = runner
        self.path = path
        self.targets = targets
        self.names = {t.key: t.name for t in targets.get("device", [])}
        self.loaded_levels: Loaded | None = None
        self.level_names = list(LEVEL_NAMES)
        self.read_only = read_only_reason(path)
        self._saving = False
        self._filling = False
        self._build()
        self._choose_initial(initial)

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        self.scope_combo = QComboBox()
        for scope, title in SCOPE_TITLES.items():
            self.scope_combo.addItem(title, scope)
        self.name_combo = QComboBox()
        self.name_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.name_combo.setMinimumContentsLength(28)
        top = QHBoxLayout()
        top.addWidget(QLabel("Levels of:"))
        top.addWidget(self.scope_combo)
        top.addWidget(self.name_combo, 1)
        self.about = QLabel()
        self.about.setWordWrap(True)
        self.about.setStyleSheet(HINT_STYLE)
        self.read_only_label = QLabel()
        self.read_only_label.setWordWrap(True)
        self.read_only_label.setStyleSheet(ERROR_STYLE)
        self.read_only_label.setVisible(bool(self.read_only))
        if self.read_only:
            self.read_only_label.setText(
                f"These levels cannot be saved: {self.read_only}. They are shown as they "
                f"are; to change them, copy the mirror to a writable folder and open the "
                f"copy (File → Open mirror).")
        self.table = LevelTable(0, 0)
        self.table.setItemDelegate(_InheritedDelegate(self.table))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectItems)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                   | QAbstractItemView.EditTrigger.EditKeyPressed
                                   | QAbstractItemView.EditTrigger.AnyKeyPressed)
        self.table.verticalHeader().hide()
        self.table.itemChanged.connect(self._item_changed)
        hint = QLabel("Thresholds are sizes (displacement in mm, velocity in mm/day): a level "
                      "is reached when the value is at least its threshold, so they must rise "
                      "from alert to emergency. Empty: that level is not used; a row left "
                      "empty has no levels of its own. Double-click or F2 to edit, Delete to "
                      "clear.")
        hint.setWordWrap(True)
        hint.setStyleSheet(HINT_STYLE)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet(ERROR_STYLE)
        self.message.hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.cancel_button = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        for button in (self.save_button, self.cancel_button):
            button.setAutoDefault(False)  # Enter commits a cell: it neither saves nor cancels
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.about)
        layout.addWidget(self.read_only_label)
        layout.addWidget(self.table, 1)
        layout.addWidget(hint)
        layout.addWidget(self.message)
        layout.addWidget(self.buttons)
        self.scope_combo.currentIndexChanged.connect(self._scope_changed)
        self.name_combo.currentIndexChanged.connect(self._name_changed)
        self.resize(940, 600)

    def _choose_initial(self, initial: tuple[str, str] | None) -> None:
        scope, key = initial or (None, None)
        if scope not in self.targets or not any(t.key == key for t in self.targets[scope]):
            scope = next((s for s in SCOPE_TITLES if self.targets.get(s)), "site")
            key = None
        self._set_combos(scope, key)
        self._load()

    def _set_combos(self, scope: str, key: str | None) -> None:
        for combo in (self.scope_combo, self.name_combo):
            combo.blockSignals(True)
        self.scope_combo.setCurrentIndex(max(self.scope_combo.findData(scope), 0))
        self._fill_names(scope)
        if key is not None:
            self.name_combo.setCurrentIndex(max(self.name_combo.findData(key), 0))
        for combo in (self.scope_combo, self.name_combo):
            combo.blockSignals(False)

    def _fill_names(self, scope: str) -> None:
        self.name_combo.clear()
        for target in self.targets.get(scope, []):
            self.name_combo.addItem(target.label, target.key)
        self.name_combo.setEnabled(self.name_combo.count() > 0)

    # ------------------------------------------------------------------ the target

    def target(self) -> Target | None:
        scope, key = self.scope_combo.currentData(), self.name_combo.currentData()
        return next((t for t in self.targets.get(scope, []) if t.key == key), None)

    def _scope_changed(self) -> None:
        if not self._may_leave():
            return
        self.name_combo.blockSignals(True)
        self._fill_names(self.scope_combo.currentData())
        self.name_combo.blockSignals(False)
        self._load()

    def _name_changed(self) -> None:
        if self._may_leave():
            self._load()

    def _may_leave(self) -> bool:
        """Unsaved changes: ask before showing another target; No puts the combos back."""
        loaded = self.loaded_levels
        if loaded is None or not self.changes():
            return True
        answer = QMessageBox.question(
            self, "Unsaved alarm levels", f"Discard the changes to the levels of "
            f"{loaded.target.describe()}?")
        if answer == QMessageBox.StandardButton.Yes:
            return True
        self._set_combos(loaded.target.scope, loaded.target.key)
        return False

    def _load(self) -> None:
        target = self.target()
        self.loaded_levels = None
        self.table.setRowCount(0)
        self.message.hide()
        self.save_button.setEnabled(False)
        if target is None:
            scope = self.scope_combo.currentData()
            self.about.setText(f"This mirror has no {SCOPE_TITLES[scope].lower()} to set "
                               f"levels on.")
            return
        self.about.setText(f"Reading the levels of {target.describe()}…")
        self.runner.submit(load_task(target), on_done=self._show,
                           on_error=lambda m: self._say(f"Cannot read the levels: {m} "
                                                        f"Choose it again to retry."),
                           slot="alarm-levels-dialog", label="alarm levels")

    # ------------------------------------------------------------------ the table

    def _show(self, loaded: Loaded) -> None:
        if loaded.target != self.target():
            return  # the user has moved on
        self.loaded_levels = loaded
        self.about.setText(self._about_text(loaded))
        extra = [name for ladder in (*loaded.own.values(), *loaded.applied.values())
                 for name in ladder if name not in LEVEL_NAMES]
        self.level_names = list(LEVEL_NAMES) + list(dict.fromkeys(extra))
        device = loaded.target.scope == "device"
        headers = ["Quantity", "Unit"] + [n.capitalize() for n in self.level_names] + \
            (["Applies now"] if device else [])
        self._filling = True
        table = self.table
        table.clear()
        table.setColumnCount(len(headers))
        table.setHorizontalHeaderLabels(headers)
        table.setRowCount(len(QUANTITY_KEYS))
        for col, name in enumerate(self.level_names, start=2):  # no header item wrapper kept:
            table.model().setHeaderData(  # clear() deletes the item under it (health_view)
                col, Qt.Orientation.Horizontal,
                f"the {name} threshold (empty: no {name} level)" if name in LEVEL_NAMES else
                f"a level named {name!r}, set with `devmon alarms`", Qt.ItemDataRole.ToolTipRole)
        for row, key in enumerate(QUANTITY_KEYS):
            base, component = queries.split_alarm_quantity(key)
            unit = queries.ALARM_QUANTITIES[base]
            words = quantity_words(key)
            label = self._fixed(words[:1].upper() + words[1:],
                                f"{key}: " + (queries.ALARM_COMPONENTS[component] if component
                                              else f"length of the 3D {base}"))
            table.setItem(row, 0, label)
            table.setItem(row, 1, self._fixed(unit))
            own = loaded.own.get(key, {})
            inherited = {} if own or not device else loaded.applied.get(key, {})
            for col, name in enumerate(self.level_names, start=2):
                item = QTableWidgetItem(threshold_text(own[name]) if name in own else "")
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                      | Qt.AlignmentFlag.AlignVCenter)
                if self.read_only:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if name in inherited:
                    item.setData(INHERITED_ROLE, inherited[name])
                table.setItem(row, col, item)
            if device:
                table.setItem(row, len(headers) - 1, self._fixed(""))
            self._update_row(row)
        self._filling = False
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        table.resizeColumnsToContents()
        for col in range(2, 2 + len(self.level_names)):
            table.setColumnWidth(col, max(table.columnWidth(col), 96))
        header.setStretchLastSection(True)
        self.save_button.setEnabled(not self.read_only)
        if self.read_only:
            self.save_button.setToolTip("The mirror cannot be written: " + self.read_only)
        self.loaded.emit()

    @staticmethod
    def _fixed(text: str, tooltip: str = "") -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
        if tooltip:
            item.setToolTip(tooltip)
        return item

    def _about_text(self, loaded: Loaded) -> str:
        target = loaded.target
        n = len(target.rovers)
        rovers = f"{n} GNSS rover{'s' * (n != 1)}"
        if target.scope == "device":
            return (f"The levels {target.describe()} follows, key by key: its own where set, "
                    f"else those of its nearest group with levels, else its site's (greyed, "
                    f"with where they come from). A value typed in a row gives it its own "
                    f"ladder for that key, which replaces the inherited one as a whole.")
        if target.scope == "site":
            return (f"Levels set on {target.describe()} apply to its {rovers}, for each key "
                    f"where neither the rover nor one of its groups has levels of its own.")
        return (f"Levels set on {target.describe()} apply to the {rovers} in it and in its "
                f"nested groups, for each key where the rover has none of its own (a group's "
                f"levels come before its site's).")

    def _item_changed(self, item: QTableWidgetItem) -> None:
        if not self._filling and item.column() >= 2:
            self._update_row(item.row())

    def _update_row(self, row: int) -> None:
        """The row's tooltips, invalid mark cleared, and for a device where its levels
        come from ("own levels", "from site X")."""
        loaded = self.loaded_levels
        if loaded is None:
            return
        key = QUANTITY_KEYS[row]
        typed = any(self._cell(row, col) for col in range(2, 2 + len(self.level_names)))
        self._filling, was = True, self._filling
        for col in range(self.table.columnCount()):
            item = self.table.item(row, col)
            if item is not None:
                item.setData(Qt.ItemDataRole.BackgroundRole, None)
        source_text, source_tip = self._source(key, typed)
        inherited_tip = f"Inherited {source_text[5:]}: type a value to set this device's own " \
                        f"ladder for {quantity_words(key)}" if source_text.startswith("from ")\
            else ""
        for col in range(2, 2 + len(self.level_names)):
            item = self.table.item(row, col)
            item.setToolTip(inherited_tip if not item.text() and
                            item.data(INHERITED_ROLE) is not None else "")
        if loaded.target.scope == "device":
            item = self.table.item(row, self.table.columnCount() - 1)
            item.setText(source_text)
            item.setToolTip(source_tip)
            own = bool(loaded.own.get(key)) or typed
            item.setForeground(QBrush(INHERITED_COLOUR) if not own else QBrush())
            font = QFont(item.font())
            font.setItalic(not own)
            item.setFont(font)
        self._filling = was

    def _source(self, key: str, typed: bool) -> tuple[str, str]:
        loaded = self.loaded_levels
        source = loaded.sources.get(key)
        own = bool(loaded.own.get(key))
        if typed:
            if own or source is None:
                return "own levels", ""
            return "own levels", f"instead of those of {source}"
        if own:
            return ("no levels (after saving)",
                    "cleared: after saving it follows its groups' or its site's levels for "
                    "this key, if they have any")
        if source is None:
            return "no levels", "neither the device, its groups nor its site has levels"
        return f"from {source}", f"set on {source}; shown greyed in the cells"

    def _cell(self, row: int, col: int) -> str:
        item = self.table.item(row, col)
        return item.text().strip() if item is not None else ""

    # ------------------------------------------------------------------ saving

    def ladders(self) -> tuple[dict[str, dict[str, float]], dict[int, str]]:
        """Every row's ladder as typed ({key: {level: threshold}}, ``{}`` for an empty
        row) and the problems of the invalid rows by row, in words."""
        out, problems = {}, {}
        for row, key in enumerate(QUANTITY_KEYS):
            base = queries.split_alarm_quantity(key)[0]
            unit = queries.ALARM_QUANTITIES[base]
            ladder: dict[str, float] = {}
            for col, name in enumerate(self.level_names, start=2):
                text = self._cell(row, col)
                if not text:
                    continue
                try:
                    ladder[name] = parse_threshold(text)
                except ValueError:
                    problems[row] = (f"{name} {text!r} is not a number: type a threshold in "
                                     f"{unit}, or leave the cell empty")
                    break
            if row in problems:
                continue
            stored = (self.loaded_levels.own.get(key, {}) if self.loaded_levels else {})
            if ladder and ladder != stored:  # a ladder as stored was valid when set
                try:
                    AlarmLevels(ladder, unit)
                except ValueError as err:
                    problems[row] = str(err)
                    continue
            out[key] = ladder
        return out, problems

    def changes(self) -> dict[str, dict[str, float]]:
        """The keys whose ladder differs from the stored one ({} clears); invalid rows are
        left out."""
        if self.loaded_levels is None:
            return {}
        ladders, _ = self.ladders()
        own = self.loaded_levels.own
        return {k: v for k, v in ladders.items() if v != own.get(k, {})}

    def save(self) -> None:
        """Validate every row (an invalid one marked, nothing saved), then write the changed
        keys and evaluate the rovers on a worker."""
        if self._saving or self.loaded_levels is None:
            return
        self._commit_editing()
        if self.read_only:
            return self._say(f"Not saved: {self.read_only}. Copy the mirror to a writable "
                             f"folder and open the copy to change its levels.")
        ladders, problems = self.ladders()
        for row in range(self.table.rowCount()):
            self._update_row(row)
        if problems:
            self._filling = True  # marking a row is no edit of it
            for row in problems:
                for col in [0, *range(2, 2 + len(self.level_names))]:
                    self.table.item(row, col).setBackground(INVALID_BRUSH)
                    self.table.item(row, col).setToolTip(problems[row])
            self._filling = False
            first = min(problems)
            self.table.scrollToItem(self.table.item(first, 0))
            lines = [f"{self.table.item(r, 0).text()}: {problems[r]}" for r in
                     sorted(problems)]
            return self._say("Nothing saved. Correct the marked row"
                             f"{'s' * (len(problems) > 1)}, or clear "
                             f"{'them' if len(problems) > 1 else 'it'}:\n" + "\n".join(lines))
        loaded = self.loaded_levels
        changes = {k: v for k, v in ladders.items() if v != loaded.own.get(k, {})}
        if not changes:
            self.saved.emit(f"Alarm levels of {loaded.target.describe()} unchanged: nothing "
                            f"to save", False)
            self.accept()
            return
        self._set_saving(True)
        self.runner.submit(save_task(loaded.target, changes),
                           on_done=self._saved, on_error=self._save_failed,
                           label="saving alarm levels")

    def _commit_editing(self) -> None:
        """A cell still being edited (Save clicked by keyboard) counts as typed."""
        if self.table.state() == QAbstractItemView.State.EditingState:
            editor = self.table.indexWidget(self.table.currentIndex())
            if editor is not None:
                self.table.commitData(editor)
                self.table.closeEditor(editor, QStyledItemDelegate.EndEditHint.NoHint)

    def _set_saving(self, saving: bool) -> None:
        self._saving = saving
        for widget in (self.save_button, self.scope_combo, self.name_combo, self.table):
            widget.setEnabled(not saving)
        if saving:
            self.message.setStyleSheet(HINT_STYLE)
            self.message.setText("Saving the levels and evaluating the rovers again…")
            self.message.show()

    def _saved(self, saved: Saved) -> None:
        self._set_saving(False)
        self.saved.emit(saved_message(saved, self.names), True)
        self.accept()

    def _save_failed(self, message: str) -> None:
        self._set_saving(False)
        self._say(message if message.startswith("Not saved") else
                  f"Not saved: {message}")

    def _say(self, text: str) -> None:
        self.message.setStyleSheet(ERROR_STYLE)
        self.message.setText(text)
        self.message.show()
        self.failed.emit(text)

    def reject(self) -> None:
        if self._saving:  # a save under way finishes; closing now would hide its outcome
            return
        super().reject()


__all__ = ["AlarmLevelsDialog", "QUANTITY_KEYS", "Target", "targets_of"]
