"""Issue 29, item 4: what one answer may cost in memory is bounded, and the data still arrive.

A 2 GiB answer to POST /sensor-data took a sync to 2.2 GB, a gzip bomb (10 MB that decode to
10 GB) to the 3 GB cap that killed it, 3 million extra points in one answer to 2.1 GB: a
desktop with 8 GB and the GUI open swaps or dies.  devmon reads at most
``service_profile.MAX_ANSWER_BYTES`` of one answer (as it came and as decoded) and at most
``MAX_ANSWER_VALUES`` values of a data answer; an answer past a bound is dropped, said in
words, and its window asked again in smaller windows.

The hostile service is the reference server behind a loopback proxy that answers the first
POST /sensor-data itself (``bench_answer_memory.HostileProxy``; its answers are made as they
are sent, never held whole); the sync is ``devmon sync`` in a subprocess, whose own peak
resident memory is read (``os.wait4``).  The answers here are a tenth of the audit's (1 GiB,
a bomb to 1 GiB, a million slow-path points): still several times what the bounds let
through, so a sync that holds them fails the memory check; the audit's sizes are measured by
``benchmarks/bench_answer_memory.py``.
"""

from __future__ import annotations

import pytest
from http_stubs import stub
from support import KEY, bench_module, snapshot, start_server

from devmon_sync import service_profile
from devmon_sync.client import ApiClient, RequestTooLargeError
from devmon_sync.server import WorldSize
from devmon_sync.store import answers

TINY = WorldSize(sites=1, devices=4, days=3)
MiB = 1 << 20
GiB = 1 << 30
PEAK_LIMIT_BYTES = 600 * MiB
"""Most a sync of this tiny world may hold at its peak (its bare baseline is far below)."""

memory = bench_module("bench_answer_memory")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The reference server, and what a sync through a proxy that answers nothing itself
    mirrors (and costs)."""
    folder = tmp_path_factory.mktemp("clean")
    with start_server(size=TINY) as srv:
        with memory.HostileProxy(srv.base_url, None) as proxy:
            clean = memory.measured_sync(proxy.base_url, KEY, folder / "clean.duckdb",
                                         folder / "home")
        assert clean.returncode == 0, clean.stderr
        yield srv, snapshot(folder / "clean.duckdb"), clean


def _through(world, tmp_path, answer, times: int = 1):
    srv, expected, clean = world
    db = tmp_path / "mirror.duckdb"
    with memory.HostileProxy(srv.base_url, answer, times) as proxy:
        got = memory.measured_sync(proxy.base_url, KEY, db, tmp_path / "home")
    assert proxy.hostile_sent, "the hostile answer was never asked for: the test proves nothing"
    return got, db, expected, clean


def _check(got, db, expected, clean, *bound_words: str) -> None:
    assert got.returncode == 0, got.stdout + got.stderr
    assert "Traceback" not in got.stderr, got.stderr
    assert got.peak_rss_bytes < PEAK_LIMIT_BYTES, (
        f"the sync held {got.peak_rss_bytes / MiB:.0f} MiB at its peak (a well-behaved "
        f"service: {clean.peak_rss_bytes / MiB:.0f} MiB)")
    said = got.stdout + got.stderr
    for words in bound_words:
        assert words in said, said
    assert "smaller windows" in said, said
    assert snapshot(db) == expected, "the mirror is not what a clean sync mirrors"


def test_an_endless_answer_is_cut_at_the_bound_and_its_window_asked_smaller(world, tmp_path):
    got, db, expected, clean = _through(world, tmp_path, memory.huge(1 * GiB))
    _check(got, db, expected, clean, f"{service_profile.MAX_ANSWER_BYTES // MiB} MiB")


def test_a_gzip_bomb_is_cut_at_the_bound_as_it_is_decoded(world, tmp_path):
    got, db, expected, clean = _through(world, tmp_path, memory.bomb(1 * GiB))
    _check(got, db, expected, clean, f"{service_profile.MAX_ANSWER_BYTES // MiB} MiB",
           "decoded")


def test_an_answer_with_a_million_extra_points_is_not_parsed(world, tmp_path):
    """A million points (56 MB, under the byte bound) that the decoder's slow path would
    read into a dict each (650 MB)."""
    got, db, expected, clean = _through(world, tmp_path, memory.points(1_000_000))
    _check(got, db, expected, clean, f"{service_profile.MAX_ANSWER_VALUES:,} values")


def test_a_service_whose_every_answer_is_too_large_ends_the_sync_in_words(world, tmp_path):
    """Halving to one instant takes some 30 answers past the bound: none may stay held
    while the smaller windows are asked (a dropped answer kept alive by the exception that
    said so took this sync to 2 GB), and the end is one message, no traceback."""
    got, _, _, clean = _through(world, tmp_path, memory.huge(1 * GiB), times=10**6)
    assert got.returncode == 2, got.stdout + got.stderr
    assert "Traceback" not in got.stderr, got.stderr
    assert got.peak_rss_bytes < PEAK_LIMIT_BYTES, (
        f"the sync held {got.peak_rss_bytes / MiB:.0f} MiB at its peak (a well-behaved "
        f"service: {clean.peak_rss_bytes / MiB:.0f} MiB)")
    last = got.stderr.strip().splitlines()[-1]
    assert last.startswith("devmon sync: error: POST /sensor-data: the answer passed "
                           f"{service_profile.MAX_ANSWER_BYTES // MiB} MiB"), \
        last
    assert "tell its operators" in last, last


# ------------------------------------------------------------ the client's bounds, lowered

def test_an_answer_stating_a_length_past_the_bound_is_refused_before_its_body_is_read():
    body = {"items": [{"uuid": "s1", "name": "x" * 5000}]}
    with stub([(200, {}, body)]) as (url, _), \
            ApiClient(url, KEY, rate_limit_per_minute=0, max_answer_bytes=4096,
                      max_retries=0) as client, \
            pytest.raises(RequestTooLargeError) as err:
        client.sites()
    assert "states a length of 4.9 KiB, more than the 4 KiB" in str(err.value), str(err.value)
    assert err.value.too_large.what == "size"
    assert err.value.status is None  # devmon's bound, not the service's refusal


def test_a_data_answer_with_more_values_than_the_bound_is_refused_unread():
    """The bound on values is for data answers (the decoder's): a list of sites is not
    counted."""
    data = [{"timestamp": f"2026-01-01T00:00:{s:02d}.000Z", "value": s} for s in range(30)]
    series = {"items": [{"parameterUuid": "0b7e1b9e-0000-4000-8000-000000000001",
                         "data": data}]}
    sites = {"items": [{"uuid": f"s{n}", "name": f"site {n}"} for n in range(30)]}
    with stub([(200, {}, sites), (200, {}, series)]) as (url, _), \
            ApiClient(url, KEY, rate_limit_per_minute=0, max_answer_values=40,
                      max_retries=0) as client:
        assert len(client.sites()) == 30
        with pytest.raises(RequestTooLargeError) as err:
            client.sensor_data({}, decoder=answers.readings_from_json)
    assert "40 values" in str(err.value), str(err.value)
    assert "smaller" in str(err.value), str(err.value)
