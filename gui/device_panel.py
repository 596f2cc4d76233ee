"""The device panel: one device as a sheet a person reads, from ``browse.DeviceDetails``.

Why a sheet and not the fields in order: an engineer checking a device wants its identity,
where it is, whether it is powered and talking, and how its GNSS antenna is set up, each in
words with units (``Sampling period: 10 min``, ``ARP height: 0.152 m``), tags by name with
their colour, and "—" for what the service did not say.  Times are in the site's timezone,
labelled (``gui.timefmt``).  A field the store adds and no section names still shows, under
"More", labelled from its name and unit suffix (``_pct``, ``_v``, ``_s``, ``_m``, ``_deg``).

A rover (or any device at a level) opens on its alarms: the level it is at now and by
which quantity, and its horizontal, vertical and 3D lights with their values in words,
coloured as the plots colour a level; a low battery is flagged (``gui.browser``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QFormLayout, QGroupBox, QHBoxLayout, QLabel, QScrollArea,
                               QVBoxLayout, QWidget)

from analysis.alarms import quantity_words
from analysis.figure_style import level_colour
from gui.browser import (LIGHT_WORDS, LIGHTS, LOW_BATTERY_COLOUR, LOW_BATTERY_PCT,
                         LOW_BATTERY_V, NOT_SET, STATUS_COLOURS, battery_low, battery_tip,
                         light_colour, light_tip)
from gui.timefmt import local_text, zone_label

MISSING = "—"  # what the service did not say
UNIT_SUFFIXES = {"_pct": "%", "_v": "V", "_s": "s", "_m": "m", "_deg": "°", "_dbm": "dBm",
                 "_db": "dB"}
HIDDEN = {"raw", "site_timezone"}
SWATCH_PX = 12


LABELS = {"rssi_dbm": ("RSSI", "dBm"), "rsrp_dbm": ("RSRP", "dBm"), "rsrq_db": ("RSRQ", "dB"),
          "lte_tx_mode": ("LTE transmission mode", ""),
          "tx_protocol": ("Transmission protocol", ""),
          "tx_success_rate_pct": ("Transmission success", "%"),
          "next_tx": ("Next expected transmission", ""), "last_tx": ("Last transmission", ""),
          "tx_period_s": ("Transmission period", "s"), "gnss": ("GNSS configuration", ""),
          "site_uuid": ("Site UUID", ""), "lat": ("Latitude", "°"), "lon": ("Longitude", "°")}


def _label(name: str) -> tuple[str, str]:
    if name in LABELS:
        return LABELS[name]
    for suffix, unit in UNIT_SUFFIXES.items():
        if name.endswith(suffix):
            return name[: -len(suffix)].replace("_", " ").capitalize(), unit
    return name.replace("_", " ").capitalize(), ""


def format_value(value, unit: str = "", tz_name: str | None = None) -> str:
    """A field value in a table cell (the Site health table) or the sheet's "More"."""
    if value is None or value == "" or (isinstance(value, (list, tuple, dict)) and not value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return local_text(value, tz_name)
    if isinstance(value, float):
        return f"{value:.4g} {unit}".strip()
    if isinstance(value, dict):
        return "; ".join(f"{k}: {format_value(v, '', tz_name)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "\n".join(format_value(v, "", tz_name) for v in value)
    if dataclasses.is_dataclass(value):
        return format_value(dataclasses.asdict(value), unit, tz_name)
    return f"{value} {unit}".strip()


# ----------------------------------------------------------------------------- words

def duration_text(seconds: float | None) -> str:
    """A period as people say it: ``10 min``, ``1 h``, ``2 days``, ``90 s``."""
    if seconds is None:
        return MISSING
    for size, unit in ((86400, "days"), (3600, "h"), (60, "min")):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {'day' if unit == 'days' and n == 1 else unit}"
    return f"{seconds:g} s"


def _text(value) -> str:
    return MISSING if value is None or value == "" else str(value)


def _words(value) -> str:
    """An enum of the service in words: ``no_signal`` is "no signal"."""
    return MISSING if not value else str(value).replace("_", " ")


def _number(value, digits: int, unit: str) -> str:
    """``72 %``, ``3.95 V``, ``0.152 m``; a degree sign sits on the number (``246°``)."""
    if value is None:
        return MISSING
    text = f"{value:.{digits}f}"
    return f"{text}{unit}" if unit == "°" else f"{text} {unit}"


def _angle(value) -> str:
    """An azimuth to 0.1°, without a trailing ``.0``."""
    if value is None:
        return MISSING
    return f"{value:.1f}".rstrip("0").rstrip(".") + "°"


def _battery(d) -> str:
    """``72 %``, or ``17 % · low, under 20 %`` (``gui.browser.LOW_BATTERY_PCT``; the
    voltage only without a percentage)."""
    text = _number(d.battery_pct, 0, "%")
    if not battery_low(d.battery_pct, d.battery_voltage_v):
        return text
    if d.battery_pct is not None:
        return f"{text} · low, under {LOW_BATTERY_PCT:g} %"
    return f"{_number(d.battery_voltage_v, 2, 'V')} · low, under {LOW_BATTERY_V:g} V"


def _flag(value, yes: str = "yes", no: str = "no") -> str:
    return MISSING if value is None else (yes if value else no)


def _time(value, tz: str | None) -> str:
    return MISSING if value is None else local_text(value, tz)


def _position(d) -> str:
    if d.lat is None or d.lon is None:
        return MISSING
    return (f"{abs(d.lat):.5f}° {'N' if d.lat >= 0 else 'S'}, "
            f"{abs(d.lon):.5f}° {'E' if d.lon >= 0 else 'W'}")


def _lines(items, empty: str = "none") -> str:
    return "\n".join(items) if items else empty


def _modem(m) -> str:
    kind = "LTE" if m.type == "lte" else (m.type or "modem")
    parts = [kind, m.model] + [f"{k} {v}" for k, v in (("IMEI", m.imei), ("ICCID", m.iccid))
                               if v]
    return ", ".join(p for p in parts if p)


def _queued(d, tz: str | None) -> str:
    q = d.queued_command
    if q is None:
        return "none"
    since = f" since {local_text(q.created_at, tz)}" if q.created_at else ""
    return f"{_words(q.status)}{since}"


def _hardware(d) -> str:
    parts = [p for p in (d.hardware_model, f"rev. {d.hardware_revision}"
                         if d.hardware_revision else None) if p]
    return ", ".join(parts) or MISSING


def _firmware(d) -> str:
    if d.firmware and d.firmware_version and d.firmware_version not in d.firmware:
        return f"{d.firmware_version} ({d.firmware})"
    return _text(d.firmware or d.firmware_version)


BASE_TYPES = {"cors": "CORS (reference network)", "private": "private base",
              "device": "another device"}


def _base_station(g) -> str:
    if g.is_base_station:
        return "this device is a base station"
    ident = f"id {g.base_station_id}" if g.base_station_id is not None else None
    if g.base_station_name:
        return f"{g.base_station_name} ({ident})" if ident else g.base_station_name
    return ident or MISSING


# ----------------------------------------------------------------------------- the sheet

#: A row: (label, the DeviceDetails fields it shows, its text from (details, site zone)).
Row = tuple[str, tuple[str, ...], Callable]

IDENTITY: tuple[Row, ...] = (
    ("Serial number", ("serial_number",), lambda d, tz: d.serial_number),
    ("Alias", ("alias",), lambda d, tz: _text(d.alias)),
    ("Name", ("name",), lambda d, tz: _text(d.name)),
    ("Description", ("description",), lambda d, tz: _text(d.description)),
    ("Kind", ("device_kind",), lambda d, tz: _words(d.device_kind)),
    ("State", ("state",), lambda d, tz: _words(d.state)),
    ("Product", ("product",), lambda d, tz: _text(d.product)),
    ("Hardware", ("hardware_model", "hardware_revision"), lambda d, tz: _hardware(d)),
    ("Firmware", ("firmware_version", "firmware"), lambda d, tz: _firmware(d)),
    ("Tags", ("tags",), None),  # a swatch and the name of each: ``_tags``
    ("Queued command", ("queued_command",), _queued),
)
SITE: tuple[Row, ...] = (
    ("Site", ("site_name", "site_uuid"), lambda d, tz: _text(d.site_name or d.site_uuid)),
    ("Time zone", ("site_timezone",), lambda d, tz: zone_label(tz)),
    ("Position", ("lat", "lon"), lambda d, tz: _position(d)),
)
POWER_AND_LINK: tuple[Row, ...] = (
    ("Connection", ("connection_status",), lambda d, tz: _text(d.connection_status)),
    ("Last seen", ("last_seen",), lambda d, tz: _time(d.last_seen, tz)),
    ("Last transmission", ("last_tx",), lambda d, tz: _time(d.last_tx, tz)),
    ("Next transmission", ("next_tx",), lambda d, tz: _time(d.next_tx, tz)),
    ("Sampling period", ("sampling_period_s",), lambda d, tz: duration_text(d.sampling_period_s)),
    ("Transmission period", ("tx_period_s",), lambda d, tz: duration_text(d.tx_period_s)),
    ("Battery", ("battery_pct",), lambda d, tz: _battery(d)),
    ("Battery voltage", ("battery_voltage_v",), lambda d, tz: _number(d.battery_voltage_v, 2, "V")),
    ("Battery remaining", ("battery_remaining",), lambda d, tz: _text(d.battery_remaining)),
    ("Charging", ("battery_is_charging",), lambda d, tz: _flag(d.battery_is_charging)),
    ("Power source", ("power_source",), lambda d, tz: _words(d.power_source)),
    ("Signal quality", ("signal_quality",), lambda d, tz: _words(d.signal_quality)),
    ("RSSI", ("rssi_dbm",), lambda d, tz: _number(d.rssi_dbm, 0, "dBm")),
    ("RSRP", ("rsrp_dbm",), lambda d, tz: _number(d.rsrp_dbm, 0, "dBm")),
    ("RSRQ", ("rsrq_db",), lambda d, tz: _number(d.rsrq_db, 0, "dB")),
    ("Transmission success", ("tx_success_rate_pct",),
     lambda d, tz: _number(d.tx_success_rate_pct, 1, "%")),
    ("Protocol", ("tx_protocol",), lambda d, tz: _text(d.tx_protocol and d.tx_protocol.upper())),
    ("LTE mode", ("lte_tx_mode",), lambda d, tz: _words(d.lte_tx_mode)),
    ("Modems", ("modems",), lambda d, tz: _lines([_modem(m) for m in d.modems], MISSING)),
    ("Connection error", ("connection_error",), lambda d, tz: d.connection_error or "none"),
)
DATA_AND_HEALTH: tuple[Row, ...] = (
    ("Newest data at the service", ("last_data",), lambda d, tz: _time(d.last_data, tz)),
    ("Newest in the mirror", ("last_reading",), lambda d, tz: _time(d.last_reading, tz)),
    ("Readings in the mirror", ("readings_in_mirror",), lambda d, tz: f"{d.readings_in_mirror:,}"),
    ("GNSS epochs in the mirror", ("epochs_in_mirror",), lambda d, tz: f"{d.epochs_in_mirror:,}"),
    ("Faults", ("faults", "metadata_error"), lambda d, tz: _lines(d.faults)),
    ("Sensor warnings", ("sensor_warnings",), lambda d, tz: _lines(d.sensor_warnings)),
)


def _of_gnss(text_of: Callable) -> Callable:
    """A GNSS setup row's text from the device's ``GnssConfig``."""
    return lambda d, tz: text_of(d.gnss)


GNSS_SETUP: tuple[Row, ...] = (
    ("Role", ("gnss",), _of_gnss(lambda g: "base station" if g.is_base_station else "rover")),
    ("Processing mode", ("gnss.processing_mode",), _of_gnss(lambda g: _words(g.processing_mode))),
    ("Antenna type", ("gnss.antenna_type",), _of_gnss(lambda g: _text(g.antenna_type))),
    ("ARP height", ("gnss.arp_height_m",), _of_gnss(lambda g: _number(g.arp_height_m, 3, "m"))),
    ("Azimuth", ("gnss.azimuth_deg",), _of_gnss(lambda g: _angle(g.azimuth_deg))),
    ("Lever-arm compensation", ("gnss.lever_arm_compensation",),
     _of_gnss(lambda g: _flag(g.lever_arm_compensation, "on", "off"))),
    ("Base station", ("gnss.base_station_name",), _of_gnss(_base_station)),
    ("Base station type", ("gnss.base_station_type",),
     _of_gnss(lambda g: BASE_TYPES.get(g.base_station_type or "", _words(g.base_station_type)))),
    ("Base station status", ("gnss.base_station_status",),
     _of_gnss(lambda g: _words(g.base_station_status))),
)
#: The alarms section: filled by ``DevicePanel._alarms`` (the lights come apart from the
#: details), listed here for the fields it shows.
ALARMS: tuple[Row, ...] = (
    ("Alarm level now", ("alarm_level", "alarm_rank", "alarm_quantity"), None),
)
#: (title, rows, column of the sheet it is in)
SECTIONS = (("Identity", IDENTITY, 0), ("Site & location", SITE, 0),
            ("GNSS setup", GNSS_SETUP, 0), ("Alarms", ALARMS, 1),
            ("Power & link", POWER_AND_LINK, 1), ("Data & health", DATA_AND_HEALTH, 1))
SHOWN = {f for _, rows, _ in SECTIONS for _, fields, _ in rows for f in fields}
JUDGING = "judging…"  # a light not known yet


def _value_label(text: str) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setWordWrap(True)
    return label


def _swatch(name: str, colour: str | None) -> QLabel:
    """A small square of the tag's colour (the service's ``#rrggbb``, never shown as text)."""
    swatch = QLabel()
    swatch.setObjectName("tag-swatch")
    swatch.setFixedSize(SWATCH_PX, SWATCH_PX)
    valid = QColor(colour or "")
    fill = valid.name() if valid.isValid() else "transparent"
    swatch.setStyleSheet(f"QLabel#tag-swatch {{ background: {fill}; border: 1px solid "
                         f"rgba(0, 0, 0, 90); border-radius: 3px; }}")
    swatch.setToolTip(f"Tag {name}" + ("" if valid.isValid() else " (no colour)"))
    return swatch


def _tags(tags) -> QWidget:
    """Each tag as a colour swatch and its name, side by side."""
    if not tags:
        return _value_label("none")
    box = QWidget()
    layout = QHBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    for tag in tags:
        layout.addWidget(_swatch(tag.name, tag.colour))
        layout.addWidget(_value_label(tag.name))
        layout.addSpacing(8)
    layout.addStretch(1)
    return box


class DevicePanel(QScrollArea):
    """A read-only device sheet; ``values`` holds each shown field's text by the name of the
    ``DeviceDetails`` field (the first one a row shows) (tests; copying)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.title = QLabel("Select a device in the browser.")
        self.title.setStyleSheet("font-size: 15pt; font-weight: 600;")
        self.title.setWordWrap(True)
        inner = QWidget()
        self._layout = QVBoxLayout(inner)
        self._layout.addWidget(self.title)
        self._body: QWidget | None = None
        self._layout.addStretch(1)
        self.setWidget(inner)
        self._title_fills(True)  # "Select a device…" until one is shown
        self.values: dict[str, str] = {}
        self._details = None
        self._lights: dict | None = None  # None: not judged yet (``show_lights``)

    def show_lights(self, lights: dict) -> None:
        """The rovers' lights, {serial: {direction: KeyAlarm or None} or why none}: a rover
        missing from them has no level; the sheet shown is drawn again with them."""
        self._lights = dict(lights)
        if self._details is not None:
            self.show_details(self._details)

    def show_details(self, details) -> None:
        """Show a ``browse.DeviceDetails`` as the sheet."""
        tz = getattr(details, "site_timezone", None)
        self._details = details
        self.title.setText(f"{details.display_name}  ·  {details.serial_number}")
        self.values = {}
        columns = (QVBoxLayout(), QVBoxLayout())
        for title, rows, column in SECTIONS:
            if rows is GNSS_SETUP and details.gnss is None:
                continue
            if rows is ALARMS:
                if _has_alarms(details):
                    columns[column].addWidget(self._alarms(details))
                continue
            columns[column].addWidget(self._section(title, rows, details, tz))
        self._title_fills(False)
        more = self._more(details, tz)
        if more is not None:
            columns[1].addWidget(more)
        body = QWidget()
        layout = QHBoxLayout(body)
        layout.setContentsMargins(0, 0, 0, 0)
        for column in columns:
            column.addStretch(1)
            layout.addLayout(column, 1)
        self._set_body(body)

    def show_message(self, text: str) -> None:
        """``text`` (what to do: pick a device, sync, run the demo) in the middle of the
        panel, where the sheet would be."""
        self._set_body(None)
        self._details = None
        self.values = {}
        self._title_fills(True)
        self.title.setText(text)

    def _title_fills(self, fills: bool) -> None:
        """A message takes the panel's height, centred; a device's name sits on top."""
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter if fills else
                                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self._layout.setStretch(0, int(fills))
        self._layout.setStretch(self._layout.count() - 1, int(not fills))

    def _alarms(self, details) -> QGroupBox:
        """The level now and by which quantity, then each light: its value in words (why
        none: "not set"), coloured as the plots colour its level."""
        box = QGroupBox("Alarms")
        form = QFormLayout(box)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        lights = (self._lights or {}).get(details.serial_number)
        level = QLabel(_level_now(details, lights, self._lights is not None))
        level.setWordWrap(True)
        if details.alarm_level:
            colour = level_colour(details.alarm_level, max(details.alarm_rank or 0, 0))
            level.setStyleSheet(f"color: {colour}; font-weight: 600;")
        form.addRow("Level now:", level)
        self.values["alarm_level"] = level.text()
        for direction in LIGHTS:
            text, colour, tip = _light_row(direction, lights, self._lights is not None)
            label = _value_label(text)
            label.setToolTip(tip)
            if colour:
                label.setStyleSheet(f"color: {colour}; font-weight: 600;")
            words = LIGHT_WORDS[direction]
            form.addRow(f"{words[0].upper()}{words[1:]}:", label)  # Horizontal, Vertical, 3D
            self.values[f"light_{direction}"] = text
        return box

    def _set_body(self, body: QWidget | None) -> None:
        if self._body is not None:
            self._layout.removeWidget(self._body)
            self._body.deleteLater()
        self._body = body
        if body is not None:
            self._layout.insertWidget(1, body)
            body.show()  # now, with the title, not at the layout's next turn of the loop

    def _section(self, title: str, rows, details, tz: str | None) -> QGroupBox:
        box = QGroupBox(title.replace("&", "&&"))  # a lone "&" marks a shortcut key
        form = QFormLayout(box)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        for label, fields, text_of in rows:
            if text_of is None:  # the tags
                form.addRow(label + ":", _tags(details.tags))
                self.values["tags"] = ", ".join(t.name for t in details.tags) or "none"
                continue
            text = text_of(details, tz)
            value = _value_label(text)
            if fields == ("connection_status",) and details.connection_status:
                colour = STATUS_COLOURS.get(text, STATUS_COLOURS["unknown"])
                value.setStyleSheet(f"color: {colour}; font-weight: 600;")
            if fields == ("battery_pct",) and battery_low(details.battery_pct,
                                                          details.battery_voltage_v):
                value.setStyleSheet(f"color: {LOW_BATTERY_COLOUR}; font-weight: 600;")
                value.setToolTip(battery_tip(details.battery_pct, details.battery_voltage_v))
            form.addRow(label + ":", value)
            self.values[fields[0]] = text
        return box

    def _more(self, details, tz: str | None) -> QGroupBox | None:
        """The fields no section shows (one the store added since), labelled generically."""
        names = [f.name for f in dataclasses.fields(details)
                 if f.name not in SHOWN | HIDDEN | {"display_name"}]
        if not names:
            return None
        box = QGroupBox("More")
        form = QFormLayout(box)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        for name in names:
            label, unit = _label(name)
            value = getattr(details, name)
            text = MISSING if value is None or value in ("", ()) else format_value(value, unit,
                                                                                    tz)
            self.values[name] = text
            form.addRow(label + ":", _value_label(text))
        return box


# ----------------------------------------------------------------------------- alarms

def _has_alarms(details) -> bool:
    """A GNSS rover (lights apply to it), or any device the evaluation put at a level."""
    gnss = details.gnss
    return bool(details.alarm_level) or (gnss is not None and not gnss.is_base_station)


def _level_now(details, lights, judged: bool) -> str:
    """``emergency, by horizontal displacement``; else below its levels, or no levels."""
    if details.alarm_level:
        return f"{details.alarm_level}, by {quantity_words(details.alarm_quantity)}"
    if isinstance(lights, dict) and any(k is not None for k in lights.values()):
        return "below its levels"
    if lights is None and judged:
        return "no alarm levels set (Alarms → Alarm levels… sets them)"
    return "no level reached" if lights is not None else JUDGING


def _light_row(direction: str, lights, judged: bool) -> tuple[str, str | None, str]:
    """(text, colour, tooltip) of one light's row: the value in words, "not set", or
    "judging…" while the window judges it."""
    if isinstance(lights, str):
        return f"no value ({lights})", None, lights
    if lights is None:
        return (NOT_SET, None, light_tip(direction, None)) if judged else (JUDGING, None, "")
    key = lights.get(direction)
    if key is None:
        return NOT_SET, None, light_tip(direction, None)
    return key.words(), light_colour(key), key.words()
