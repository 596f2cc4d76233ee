"""The device panel: everything the mirror knows about one device's state and health.

It renders the fields of ``browse.DeviceDetails`` in order, so a field the store adds shows up
without GUI changes; units come from the field-name suffixes of the house style (``_pct``,
``_v``, ``_s``, ``_m``, ``_deg``) and times are shown in the site's timezone, labelled.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from gui.browser import STATUS_COLOURS
from gui.timefmt import local_text

UNIT_SUFFIXES = {"_pct": "%", "_v": "V", "_s": "s", "_m": "m", "_deg": "°", "_dbm": "dBm",
                 "_db": "dB"}
HIDDEN = {"raw", "site_timezone"}


LABELS = {"rssi_dbm": ("RSSI", "dBm"), "rsrp_dbm": ("RSRP", "dBm"), "rsrq_db": ("RSRQ", "dB"),
          "lte_tx_mode": ("LTE transmission mode", ""), "tx_protocol": ("Transmission protocol", ""),
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
    """A field value as the panel shows it."""
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


class DevicePanel(QScrollArea):
    """A read-only form of one device's details."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.title = QLabel("Select a device in the browser.")
        self.title.setStyleSheet("font-size: 15pt; font-weight: 600;")
        self.title.setWordWrap(True)
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        inner = QWidget()
        layout = QVBoxLayout(inner)
        layout.addWidget(self.title)
        layout.addLayout(self.form)
        layout.addStretch(1)
        self.setWidget(inner)
        self.values: dict[str, str] = {}

    def show_details(self, details) -> None:
        """Fill the form from a ``browse.DeviceDetails``."""
        while self.form.rowCount():
            self.form.removeRow(0)
        tz = getattr(details, "site_timezone", None)
        self.title.setText(f"{details.display_name}  ·  {details.serial_number}")
        self.values = {}
        for f in dataclasses.fields(details):
            if f.name in HIDDEN or f.name in ("display_name",):
                continue
            label, unit = _label(f.name)
            text = format_value(getattr(details, f.name), unit, tz)
            self.values[f.name] = text
            value = QLabel(text)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setWordWrap(True)
            if f.name == "connection_status":
                colour = STATUS_COLOURS.get(text, STATUS_COLOURS["unknown"])
                value.setStyleSheet(f"color: {colour}; font-weight: 600;")
            self.form.addRow(label + ":", value)

    def show_message(self, text: str) -> None:
        while self.form.rowCount():
            self.form.removeRow(0)
        self.title.setText(text)
