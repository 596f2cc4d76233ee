"""Issue 17, the Device tab: a device sheet a person reads (sections, labels with units, tags
by name with a colour swatch, the GNSS setup in words), not a dump of the store's fields.
The real window on a synced mirror; the device chosen by a real click in the browser."""

from __future__ import annotations

import re

import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse

from support import synced_mirror

pytest.importorskip("pytestqt")

from PySide6.QtGui import Qt, QTextDocument  # noqa: E402  (QtGui's Qt has mightBeRichText)
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QWidget  # noqa: E402

from qt_input import click_tab, click_tree_item, open_mirror  # noqa: E402

WORLD = WorldSize(sites=3, devices=16, days=60)  # the main window tests' world

HEX_COLOUR = re.compile(r"#[0-9a-fA-F]{6}\b")


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("daily_device") / "mirror.duckdb", WORLD)


def _plain(label: QLabel) -> str:
    if label.textFormat() == Qt.TextFormat.PlainText or not Qt.mightBeRichText(label.text()):
        return label.text()
    document = QTextDocument()
    document.setHtml(label.text())
    return document.toPlainText()


def _shown(widget: QWidget | None) -> str:
    """The text a person reads in ``widget``: a label's, or its visible labels' in order."""
    if widget is None:
        return ""
    if isinstance(widget, QLabel):
        return _plain(widget)
    return " ".join(_plain(w) for w in widget.findChildren(QLabel) if w.isVisibleTo(widget))


def _title(box: QGroupBox) -> str:
    """A section's title as shown ("&&" is a literal "&", a lone "&" underlines a key)."""
    return box.title().replace("&&", "\0").replace("&", "").replace("\0", "&")


def _sheet(panel) -> str:
    """Every visible section title and form row of the panel, one ``label value`` a line."""
    lines = [_plain(panel.title)]
    for box in panel.findChildren(QGroupBox):
        if not box.isVisibleTo(panel):
            continue
        lines.append(f"[{_title(box)}]")
        form = box.findChild(QFormLayout)
        for row in range(form.rowCount()):
            label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
            field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            lines.append(f"{_shown(label.widget() if label else None)} "
                         f"{_shown(field.widget() if field else None)}".strip())
    return "\n".join(lines)


def _a_rover_with_tags(path) -> browse.DeviceDetails:
    with Mirror.open(path, read_only=True) as m:
        for site in browse.device_tree(m):
            for device in site.devices:
                details = browse.device_details(m, device.serial_number)
                if details.gnss and details.tags and details.battery_pct is not None:
                    return details
    raise AssertionError("the reference world has tagged GNSS rovers")


def test_a_device_clicked_in_the_browser_reads_as_a_device_sheet(qtbot, window, db):
    """The user's report: tags shown as hex colour strings, the GNSS settings as a bare key
    list, units missing, "None" for what the service did not say."""
    rover = _a_rover_with_tags(db)
    open_mirror(qtbot, window, db)
    click_tab(window.tabs, "Device")
    click_tree_item(qtbot, window, rover.serial_number)
    panel = window.device_panel
    qtbot.waitUntil(lambda: rover.serial_number in panel.title.text(), timeout=10000)
    sheet, everything = _sheet(panel), _shown(panel.widget())
    assert not HEX_COLOUR.search(everything), everything
    assert "None" not in everything, everything
    titles = [_title(box) for box in panel.findChildren(QGroupBox) if box.isVisibleTo(panel)]
    assert {"Identity", "Site & location", "Power & link", "GNSS setup"} <= set(titles), titles
    for tag in rover.tags:  # by name, beside a swatch of the tag's colour
        assert tag.name in sheet
        (swatch,) = [w for w in panel.findChildren(QLabel, "tag-swatch")
                     if w.toolTip().startswith(f"Tag {tag.name}")]
        assert swatch.isVisibleTo(panel) and swatch.text() == ""
    assert re.search(r"^Sampling period: \d+ (s|min|h)$", sheet, re.M), sheet
    assert f"Battery: {rover.battery_pct:.0f} %" in sheet, sheet
    assert f"ARP height: {rover.gnss.arp_height_m:.3f} m" in sheet, sheet
    assert re.search(r"^Azimuth: \d+(\.\d)?°$", sheet, re.M), sheet
    assert f"Processing mode: {rover.gnss.processing_mode}" in sheet, sheet
    assert f"Antenna type: {rover.gnss.antenna_type}" in sheet, sheet
    assert re.search(r"^Lever-arm compensation: (on|off)$", sheet, re.M), sheet
    assert re.search(r"^Base station: ", sheet, re.M), sheet
    assert re.search(r"^Last seen: \d{4}-\d\d-\d\d \d\d:\d\d \S+$", sheet, re.M), sheet
    assert "—" in sheet  # what the service did not say, e.g. the description
