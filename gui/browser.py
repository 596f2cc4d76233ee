"""The browser dock: Sites → Devices → Sensors → Parameters, and the Groups view.

Both trees are built from the store's ``browse`` dataclasses (read on a worker) and filtered
by one box matching serial number, alias, name and tag.  Parameters drag onto plots as a list
of uuids (``PARAMETER_MIME``); double-clicking one plots it.
"""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import (QBrush, QColor, QIcon, QPainter, QPixmap, QStandardItem,
                           QStandardItemModel)
from PySide6.QtWidgets import (QAbstractItemView, QLabel, QLineEdit, QTabWidget, QTreeView,
                               QVBoxLayout, QWidget)

from analysis.figure_style import level_colour
from devmon_sync.store import browse


PARAMETER_MIME = "application/x-devmon-parameters"
KIND_ROLE = Qt.ItemDataRole.UserRole + 1  # "site", "group", "device", "sensor", "parameter"
KEY_ROLE = Qt.ItemDataRole.UserRole + 2  # uuid or serial number
FILTER_ROLE = Qt.ItemDataRole.UserRole + 3  # text the filter box searches (devices only)
ALARM_ROLE = Qt.ItemDataRole.UserRole + 4  # the device's alarm level now, or None

#: Connection status colours, shared with the device panel and the health table.
STATUS_COLOURS = {"online": "#2e7d32", "degraded": "#ef6c00", "offline": "#c62828",
                  "unknown": "#757575"}


#: The usual ladder, for the legend (other level names get the ramp's colours by rank).
LEGEND_LEVELS = ("alert", "alarm", "emergency")
BADGE_PX = 12


def alarm_badge(level: str | None) -> QIcon:
    """A round badge in the level's colour (the colour the tables and plots use); an empty
    one of the same size below every level, so names stay aligned."""
    pixmap = QPixmap(BADGE_PX, BADGE_PX)
    pixmap.fill(Qt.GlobalColor.transparent)
    if level:
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(level_colour(level, 0)))
        painter.drawEllipse(1, 1, BADGE_PX - 2, BADGE_PX - 2)
        painter.end()
    return QIcon(pixmap)


# ----------------------------------------------------------------------------- lights

#: A point's lights, in the order tables show them: horizontal and vertical (how limits are
#: usually set) and the 3D length (``analysis.alarms.DIRECTIONS``), with their words.
LIGHTS = ("H", "V", "3D")
LIGHT_WORDS = {"H": "horizontal", "V": "vertical", "3D": "3D"}
NOT_SET = "not set"
#: A light that is set and below its levels: the green of "online".
BELOW_COLOUR = STATUS_COLOURS["online"]
LIGHT_PX = 14  # the height of a light's box in an icon
_BOX_WIDTHS = (13, 13, 19)  # H, V, 3D: room for the letters at LIGHT_PX - 4 px
#: An icon of a point's lights (``lights_icon``): the icon size of lists and tables that
#: show them.
LIGHTS_ICON_SIZE = QSize(sum(_BOX_WIDTHS) + 2 * (len(LIGHTS) - 1), LIGHT_PX)


def light_text(key) -> str:
    """One direction's light (an ``analysis.alarms.KeyAlarm`` or None) in a word: the level
    it is at; ``below`` its levels; ``no value`` when the last epoch could not be judged
    and no level is held; ``not set`` when no level of that direction applies, which is
    not "ok": nothing is watched there."""
    if key is None:
        return NOT_SET
    if key.current_level:
        return key.current_level
    return "no value" if key.unavailable else "below"


def light_colour(key) -> str | None:
    """The light's colour: its level's, as the plots draw the level; green below its
    levels; None (no colour) when not set or without a value."""
    if key is None:
        return None
    if key.current_level:
        return level_colour(key.current_level, max(key.rank - 1, 0))
    return None if key.unavailable else BELOW_COLOUR


def light_tip(direction: str, key) -> str:
    """The value in words (``KeyAlarm.words()``), or why there is no light."""
    if key is None:
        return (f"No {LIGHT_WORDS[direction]} alarm level is set for this point (Alarms → "
                f"Alarm levels… sets them).")
    return key.words()


def lights_tip(lights) -> str:
    """Every light of a point in words, one line each (a rover list's tooltip); ``lights``
    as ``MainWindow.lights`` holds them: {direction: KeyAlarm or None}, or the reason in
    words the point could not be judged."""
    if isinstance(lights, str):
        return f"No lights: {lights}"
    return "\n".join(f"{d}: {light_tip(d, lights.get(d))}" for d in LIGHTS)


def lights_icon(lights) -> QIcon:
    """Boxes H, V and 3D side by side, each filled with its light's colour (outlined grey
    when not set), for lists and cells that have room for an icon only."""
    pixmap = QPixmap(LIGHTS_ICON_SIZE)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    font = painter.font()
    font.setPixelSize(LIGHT_PX - 4)
    font.setBold(True)
    painter.setFont(font)
    x = 0
    for direction, width in zip(LIGHTS, _BOX_WIDTHS):
        key = lights.get(direction) if isinstance(lights, dict) else None
        colour = light_colour(key)
        box = (x + 1, 1, width - 2, LIGHT_PX - 2)
        painter.setPen(QColor(colour or "#9e9e9e"))
        painter.setBrush(QColor(colour) if colour else Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(*box, 3, 3)
        painter.setPen(QColor("white" if colour else "#9e9e9e"))
        painter.drawText(*box, int(Qt.AlignmentFlag.AlignCenter), direction)
        x += width + 2
    painter.end()
    return QIcon(pixmap)


# ----------------------------------------------------------------------------- battery

#: A battery is low under 20 % state of charge (the service's ``battery.percentage``, what
#: the mirror holds of every physical device).  Why 20 %: it is the usual low-battery
#: warning of battery-powered loggers, and by the service's own estimate of the remaining
#: life (about 0.3 months per %, e.g. "5 months" at 17 %) some six months are left: time
#: to plan a site visit before the device stops.  Without a percentage the voltage is used:
#: under 3.5 V, where a lithium cell (3.3 V empty, 4.2 V full) holds about 20 %.
LOW_BATTERY_PCT = 20.0
LOW_BATTERY_V = 3.5
LOW_BATTERY_COLOUR = STATUS_COLOURS["offline"]


def battery_low(percent: float | None, volts: float | None = None) -> bool:
    """Whether a battery is low (``LOW_BATTERY_PCT``; the voltage only without a
    percentage); unknown is not low."""
    if percent is not None:
        return percent < LOW_BATTERY_PCT
    return volts is not None and volts < LOW_BATTERY_V


def battery_tip(percent: float | None, volts: float | None = None) -> str:
    """Why a battery is flagged, and what to do."""
    level = (f"{percent:g} % state of charge, under {LOW_BATTERY_PCT:g} %"
             if percent is not None else f"{volts:g} V, under {LOW_BATTERY_V:g} V")
    return (f"Low battery: {level}. Plan a visit to change or charge it before the device "
            f"stops sending.")


def legend_html() -> str:
    """What the tree's badges and colours mean, in one line."""
    dots = " ".join(f'<span style="color:{level_colour(name, rank)}">&#9679;</span> {name}'
                    for rank, name in enumerate(LEGEND_LEVELS))
    status = " ".join(f'<span style="color:{colour}">{name}</span>'
                      for name, colour in STATUS_COLOURS.items())
    return f"Badge: alarm level now {dots}<br>Name: connection {status}"


def status_brush(status: str | None) -> QBrush:
    return QBrush(QColor(STATUS_COLOURS.get(status or "unknown", STATUS_COLOURS["unknown"])))


def _item(text: str, kind: str, key: str | None, tooltip: str = "") -> QStandardItem:
    item = QStandardItem(text)
    item.setEditable(False)
    item.setData(kind, KIND_ROLE)
    item.setData(key, KEY_ROLE)
    item.setDragEnabled(kind == "parameter")
    if tooltip:
        item.setToolTip(tooltip)
    return item


def _filter_text(device) -> str:
    """What the filter box matches for a device: serial, alias, name, display name, tags."""
    parts = [device.serial_number, device.alias, device.name, device.display_name,
             *device.tags]
    return "\n".join(p for p in parts if p).lower()


def _device_item(device, level: str | None = None) -> QStandardItem:
    """A device: its name coloured by connection status, a badge of the alarm level it is
    at now (the mirror's alarm history), both said in the tooltip.  One the service no
    longer lists reads "(removed upstream <day>, archive kept)" in grey italics instead of a
    status it no longer has (``_removed``)."""
    status = device.connection_status or "unknown"
    item = _item(device.display_name, "device", device.serial_number,
                 f"{device.serial_number} · {device.device_kind or 'device'} · connection "
                 f"{status}" + (f" · alarm level now: {level}" if level else "")
                 + (f" · tags: {', '.join(device.tags)}" if device.tags else ""))
    item.setForeground(status_brush(status))
    item.setIcon(alarm_badge(level))
    item.setData(level, ALARM_ROLE)
    item.setData(_filter_text(device), FILTER_ROLE)
    if device.removed_at is not None:
        _removed(item, device)
    return item


def _removed(item: QStandardItem, device) -> None:
    """Label a device removed upstream: its last known status would look live."""
    label = browse.removed_upstream_label(device.removed_at)
    kept = device.archived_points
    item.setText(f"{device.display_name} ({label})")
    item.setToolTip(f"{device.serial_number} · {device.device_kind or 'device'}: the service "
                    f"no longer lists this device ({label}; decommissioned, or out of this "
                    f"key's reach). {_archive_kept(kept)}")
    _as_archive(item)


def _archive_kept(points: int) -> str:
    return (f"The mirror keeps its {points:,} point{'s' * (points != 1)} and plots them; "
            f"devmon no longer fetches it.")


def _as_archive(item: QStandardItem) -> None:
    """Grey italics: what the service no longer lists, kept as an archive."""
    item.setForeground(QBrush(QColor(STATUS_COLOURS["unknown"])))
    font = item.font()
    font.setItalic(True)
    item.setFont(font)


def _parameter_label(p) -> str:
    unit = f" [{p.unit}]" if p.unit else ""
    return f"{p.name}{unit}"


def _sensor_item(sensor) -> QStandardItem:
    """A sensor: its name, "(inactive)" when switched off, and for one the service no longer
    lists "(deleted upstream <day>, archive kept)" in grey italics, its tooltip saying what
    the mirror keeps of it and that the sync no longer fetches it."""
    text = sensor.name + ("" if sensor.is_active else " (inactive)")
    if sensor.deleted_at is None:
        return _item(text, "sensor", sensor.uuid, sensor.type or "")
    label = browse.deleted_upstream_label(sensor.deleted_at)
    kept = sensor.archived_points
    item = _item(f"{text} ({label})", "sensor", sensor.uuid,
                 f"{sensor.type or 'sensor'}: the service no longer lists this sensor "
                 f"({label}). {_archive_kept(kept)}")
    _as_archive(item)
    return item


def _device_with_children(device, level: str | None = None) -> QStandardItem:
    item = _device_item(device, level)
    for sensor in device.sensors:
        s_item = _sensor_item(sensor)
        for p in sensor.parameters:
            s_item.appendRow(_item(_parameter_label(p), "parameter", p.uuid,
                                   f"{p.readings:,} readings" if p.readings else "no readings"))
        item.appendRow(s_item)
    return item


class _Model(QStandardItemModel):
    """A tree model whose parameter rows drag as ``PARAMETER_MIME`` (newline-joined uuids)."""

    def mimeTypes(self) -> list[str]:
        return [PARAMETER_MIME]

    def mimeData(self, indexes) -> QMimeData:
        uuids = [i.data(KEY_ROLE) for i in indexes if i.data(KIND_ROLE) == "parameter"]
        data = QMimeData()
        data.setData(PARAMETER_MIME, "\n".join(uuids).encode())
        data.setText("\n".join(uuids))
        return data


class _Filter(QSortFilterProxyModel):
    """Keeps devices whose serial/alias/name/tag contains the text, with their children, and
    the sites or groups that hold them."""

    def __init__(self) -> None:
        super().__init__()
        self.setRecursiveFilteringEnabled(True)
        self.setAutoAcceptChildRows(True)
        self.text = ""

    def set_text(self, text: str) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt 6.9+; invalidateFilter is deprecated
            self.beginFilterChange()
            self.text = text.strip().lower()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self.text = text.strip().lower()
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent) -> bool:
        if not self.text:
            return True
        index = self.sourceModel().index(row, 0, parent)
        haystack = index.data(FILTER_ROLE)
        return bool(haystack) and self.text in haystack


def _tree_view(model: QStandardItemModel) -> tuple[QTreeView, _Filter]:
    proxy = _Filter()
    proxy.setSourceModel(model)
    view = QTreeView()
    view.setModel(proxy)
    view.setHeaderHidden(True)
    view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    view.setDragEnabled(True)
    view.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
    view.setUniformRowHeights(True)
    return view, proxy


class Browser(QWidget):
    """The left dock: a filter box over a Sites tree and a Groups tree."""

    device_selected = Signal(str)  # serial number
    devices_selected = Signal(list)  # serial numbers of every selected device
    parameters_activated = Signal(list)  # parameter uuids to plot
    site_selected = Signal(object)  # uuid of the site of the selection (None: no site)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.filter_box = QLineEdit(placeholderText="Filter: serial, alias, name or tag")
        self.filter_box.setClearButtonEnabled(True)
        self.sites_model, self.groups_model = _Model(), _Model()
        self.sites_view, self.sites_proxy = _tree_view(self.sites_model)
        self.groups_view, self.groups_proxy = _tree_view(self.groups_model)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.sites_view, "Sites")
        self.tabs.addTab(self.groups_view, "Groups")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.legend = QLabel(legend_html())
        self.legend.setStyleSheet("color: #555; padding: 2px 4px;")
        layout.addWidget(self.filter_box)
        layout.addWidget(self.tabs)
        layout.addWidget(self.legend)
        self.filter_box.textChanged.connect(self._filter)
        for view in (self.sites_view, self.groups_view):
            view.selectionModel().selectionChanged.connect(
                lambda *_, v=view: self._selection_changed(v))
            view.doubleClicked.connect(self._activated)
        self.devices: dict[str, object] = {}
        self.alarms: dict[str, str] = {}

    # ------------------------------------------------------------------ filling

    def populate(self, sites: list, groups, alarms: dict[str, str] | None = None) -> None:
        """Fill both trees from ``browse.device_tree`` and ``browse.group_tree`` results;
        ``alarms``: each device's alarm level now ({serial: level}, the store's
        ``worst_alarm_levels``)."""
        self.devices = {d.serial_number: d for s in sites for d in s.devices}
        self.alarms = dict(alarms or {})
        self.sites_model.clear()
        for site in sites:
            tz = site.timezone or "UTC"
            item = _item(f"{site.name} ({len(site.devices)})", "site", site.uuid,
                         f"times in {tz}")
            for device in site.devices:
                item.appendRow(_device_with_children(device, self.alarms.get(
                    device.serial_number)))
            self.sites_model.appendRow(item)
        self.groups_model.clear()
        for node in groups.roots:
            self.groups_model.appendRow(self._group_item(node))
        if groups.ungrouped:
            item = _item(f"Ungrouped devices ({len(groups.ungrouped)})", "group", None)
            self._add_members(item, groups.ungrouped)
            self.groups_model.appendRow(item)
        self.sites_view.expandToDepth(0)
        self.groups_view.expandToDepth(0)

    def _group_item(self, node) -> QStandardItem:
        item = _item(node.name, "group", node.uuid)
        for child in node.children:
            item.appendRow(self._group_item(child))
        self._add_members(item, node.members)
        return item

    def _add_members(self, item: QStandardItem, serials: list[str]) -> None:
        for serial in serials:
            device = self.devices.get(serial)
            if device is not None:
                item.appendRow(_device_item(device, self.alarms.get(serial)))

    # ------------------------------------------------------------------ interaction

    def _filter(self, text: str) -> None:
        for proxy, view in ((self.sites_proxy, self.sites_view),
                            (self.groups_proxy, self.groups_view)):
            proxy.set_text(text)
            if text:
                view.expandAll()

    def _selection_changed(self, view: QTreeView) -> None:
        indexes = view.selectionModel().selectedIndexes()
        serials = list(dict.fromkeys(i.data(KEY_ROLE) for i in indexes
                                     if i.data(KIND_ROLE) == "device"))
        sites = [i.data(KEY_ROLE) for i in indexes if i.data(KIND_ROLE) == "site"]
        sites += [getattr(self.devices.get(sn), "site_uuid", None) for sn in serials]
        if sites:
            self.site_selected.emit(sites[-1])
        if serials:
            self.devices_selected.emit(serials)
            self.device_selected.emit(serials[-1])

    def _activated(self, index) -> None:
        if index.data(KIND_ROLE) == "parameter":
            self.parameters_activated.emit([index.data(KEY_ROLE)])

    def visible_device_count(self) -> int:
        """Devices the Sites tree shows under the current filter (for tests and the status)."""
        proxy = self.sites_proxy
        return sum(proxy.rowCount(proxy.index(r, 0)) for r in range(proxy.rowCount()))

    def select_parameter(self, uuid: str) -> None:
        """Select (and reveal) a parameter row in the Sites tree."""
        self.select_key(uuid)

    def select_key(self, key: str) -> None:
        """Select (and reveal) the Sites tree's row of a device (serial number) or parameter
        (uuid): the selection's signals follow as for a click."""
        matches = self.sites_model.match(self.sites_model.index(0, 0), KEY_ROLE, key, 1,
                                         Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly)
        if matches:
            index = self.sites_proxy.mapFromSource(matches[0])
            self.sites_view.setCurrentIndex(index)
            self.sites_view.scrollTo(index)


__all__ = ["Browser", "PARAMETER_MIME", "STATUS_COLOURS", "status_brush"]
