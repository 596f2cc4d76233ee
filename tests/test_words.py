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
