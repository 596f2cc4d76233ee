"""Counts take the number of their noun (issue 30: "1 velocity values", "1 requests")."""

from analysis.words import counted


def test_counts_take_the_number_of_their_noun():
    assert counted(1, "window") == "1 window"
    assert counted(0, "window") == "0 windows"
    assert counted(2, "velocity value") == "2 velocity values"
    assert counted(1, "query", "queries") == "1 query"
    assert counted(3, "query", "queries") == "3 queries"
    assert counted(12000, "reading") == "12,000 readings"
    assert counted(12000, "reading", grouped=False) == "12000 readings"


def test_verify_and_sync_summaries_count_one_as_one():
    """The summaries that read "1 requests" and "1 follow-up requests" before."""
    from types import SimpleNamespace

    from devmon_sync.cli.sync import _proof_lines
    from devmon_sync.cli.verify import _checked
    from devmon_sync.sync.verify import VerifyReport

    one = VerifyReport(run_id=1, windows_total=1, windows_planned=1, windows_checked=1,
                       requests=1, window_requests=1, metadata_devices=1, metadata_requests=1,
                       history_streams=1, history_planned=1, history_requests=1)
    line = _checked(one)
    assert line.startswith("Checked 1 window with 1 request ("), line
    assert "the metadata of 1 device with 1 request and the start of history of 1 stream " \
           "with 1 request: 1 request in all." in line, line
    assert "1 requests" not in line and "1 windows" not in line
    cut = SimpleNamespace(cut_answers=1, follow_ups=1, quarantined=0, unproven=0)
    assert "1 answer without saying so; 1 follow-up request fetched the rest." in \
        " ".join(_proof_lines(cut))
