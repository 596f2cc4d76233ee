"""Issue 27, point 4: the window says what the service changed in its past (a report issued
last week may rest on values since corrected)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from qt_input import open_mirror
from support import NOW, SMALL, start_server, sync

from devmon_sync.server.contracts import CONTRACTS


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    """A mirror synced before and after the changing-past service rewrote its past."""
    db = tmp_path_factory.mktemp("revised") / "revised.duckdb"
    for hours in (1, 12):
        with start_server(size=SMALL, now=NOW + timedelta(hours=hours),
                          contract=CONTRACTS["changing-past"]) as srv:
            assert sync(srv.base_url, db, recheck_share=1.0).status == "ok"
    return db


def test_the_overview_says_how_much_the_service_revised(qtbot, window, db):
    open_mirror(qtbot, window, db, wait_idle=True)
    text = window.overview_view.header.text()
    assert "Revised:" in text and "the service revised" in text, text
    assert "values and" in text and "GNSS epochs since" in text, text
