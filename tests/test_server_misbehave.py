"""The reference server's misbehaviour on demand: 200 answers with less or odd data.

Every misbehaviour is shown on the raw answer, against an honest server of the same seed,
world and clock, so a sync-client test that switches one on knows exactly what it gets.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

import pytest
from support import Api, start_server

from devmon_sync import cli
from devmon_sync.cli.serve import serve_config
from devmon_sync.api_contract import DEFAULT_LIMITS
from devmon_sync.server import Misbehaviour, WorldSize
from devmon_sync.server.misbehave import from_settings, parse_setting

SIZE = WorldSize(sites=2, devices=8, days=3)
LIMITS = replace(DEFAULT_LIMITS, max_points=10**7, max_epochs=10**6, max_range_days=400)
START, MIDDLE, END = "2025-12-29T00:00:00Z", "2025-12-30T00:00:00Z", "2025-12-31T00:00:00Z"
HUGE = 2**63


@pytest.fixture(scope="module")
def honest():
    with start_server(size=SIZE, limits=LIMITS) as srv:
        yield Api(srv.base_url)


@pytest.fixture(scope="module")
def serials(honest) -> list[str]:
    return [d["serialNumber"] for d in honest.ok("get", "/devices")["items"]]


@contextmanager
def misbehaving(**fields):
    """An Api on a server like ``honest`` that misbehaves as ``fields`` say."""
    with start_server(size=SIZE, limits=LIMITS, misbehaviour=Misbehaviour(**fields)) as srv:
        yield Api(srv.base_url)


def _post(api: Api, path: str, body: dict):
    """The answer parsed by Python's json, which keeps big ints and reads NaN / Infinity."""
    r = api.post(path, body)
    assert r.status_code == 200, r.text[:300]
    return json.loads(r.text), r.text


def _data_body(serials, start=START, end=END, **more) -> dict:
    return {"deviceSerialNumbers": serials, "startDate": start, "endDate": end, **more}


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _flat(items: list[dict]) -> list[tuple[int, int, float]]:
    """(item index, point index, Unix seconds) of every point, in answer order."""
    return [(i, j, _seconds(p["timestamp"])) for i, item in enumerate(items)
            for j, p in enumerate(item["data"] or [])]


def _kept(items: list[dict], chosen: set[tuple[int, int]]) -> list[list[dict]]:
    """The honest items' data reduced to the ``chosen`` (item, point) pairs, order kept."""
    return [[p for j, p in enumerate(item["data"]) if (i, j) in chosen]
            for i, item in enumerate(items)]


def _heads(items: list[dict]) -> list[dict]:
    return [{k: v for k, v in item.items() if k != "data"} for item in items]


# ----------------------------------------------------------------------------- honest

def test_inactive_misbehaviour_is_byte_identical(honest, serials):
    assert not Misbehaviour().active and not Misbehaviour(seed=7, cap_keep="newest").active
    assert Misbehaviour(nan_rate=0.01).active and Misbehaviour(cap_points=5).active
    group = honest.ok("get", "/device-groups")["grouped"][0]["uuid"]
    gets = ["/devices", f"/devices/{serials[0]}", "/device-groups", f"/device-groups/{group}"]
    posts = [("/sensor-data", _data_body(serials)), ("/sensor-data/latest", {}),
             ("/sensor-data/gnss", {"startDate": START, "endDate": END})]
    with misbehaving(seed=7, cap_keep="newest") as api:
        for path in gets:
            assert api.get(path).content == honest.get(path).content, path
        for path, body in posts:
            assert api.post(path, body).content == honest.post(path, body).content, path


# ----------------------------------------------------------------------------- caps

def _expected_cap(items, n: int, keep: str) -> set[tuple[int, int]]:
    flat = _flat(items)
    if keep == "first_items":
        return {(i, j) for i, j, _ in flat[:n]}
    by_time = sorted(flat, key=lambda x: x[2])  # stable: ties stay in answer order
    return {(i, j) for i, j, _ in (by_time[:n] if keep == "oldest" else by_time[-n:])}


@pytest.mark.parametrize("keep,order", [("oldest", "asc"), ("newest", "asc"),
                                        ("newest", "desc"), ("first_items", "asc")])
def test_cap_points_keeps_exactly_n_of_the_whole_answer(honest, serials, keep, order):
    body = _data_body(serials, orderBy=order)
    truth, _ = _post(honest, "/sensor-data", body)
    with misbehaving(cap_points=100, cap_keep=keep) as api:
        got, _ = _post(api, "/sensor-data", body)
    assert len(_flat(truth["items"])) > 1000
    assert sum(len(item["data"]) for item in got["items"]) == 100
    assert _heads(got["items"]) == _heads(truth["items"])  # every item is still there
    expected = _kept(truth["items"], _expected_cap(truth["items"], 100, keep))
    assert [item["data"] for item in got["items"]] == expected
    if keep == "first_items":
        filled = [i for i, item in enumerate(truth["items"]) if item["data"]]
        assert got["items"][filled[0]]["data"] and got["items"][filled[-1]]["data"] == []


def test_cap_per_series_keeps_the_newest_of_each_series(honest, serials):
    body = _data_body(serials)
    truth, _ = _post(honest, "/sensor-data", body)
    with misbehaving(cap_points=5, cap_keep="newest", cap_per_series=True) as api:
        got, _ = _post(api, "/sensor-data", body)
    assert len(got["items"]) == len(truth["items"])
    for g, t in zip(got["items"], truth["items"], strict=True):
        assert g["data"] == t["data"][-5:]
    assert any(len(t["data"]) > 5 for t in truth["items"])


def test_cap_spread_per_series_thins_each_series_evenly_keeping_its_edges(honest, serials):
    """A service that downsamples: every series of more than n points comes back as n
    points spread evenly from its first to its last, so no edge or newest-point check sees
    a difference."""
    body = _data_body(serials)
    truth, _ = _post(honest, "/sensor-data", body)
    with misbehaving(cap_points=20, cap_keep="spread", cap_per_series=True) as api:
        got, _ = _post(api, "/sensor-data", body)
    thinned = 0
    for g, t in zip(got["items"], truth["items"], strict=True):
        if len(t["data"]) <= 20:
            assert g["data"] == t["data"]
            continue
        thinned += 1
        assert len(g["data"]) == 20 and g["data"][0] == t["data"][0]
        assert g["data"][-1] == t["data"][-1]
        picks = [t["data"].index(p) for p in g["data"]]
        steps = {b - a for a, b in zip(picks, picks[1:])}
        assert max(steps) - min(steps) <= 1, "the kept points are not evenly spread"
    assert thinned > 0


def test_cap_epochs_keeps_the_oldest_epochs_of_all_devices(honest):
    body = {"startDate": START, "endDate": END}
    truth, _ = _post(honest, "/sensor-data/gnss", body)
    with misbehaving(cap_epochs=30) as api:
        got, _ = _post(api, "/sensor-data/gnss", body)
    assert sum(len(item["data"]) for item in got["items"]) == 30
    expected = _kept(truth["items"], _expected_cap(truth["items"], 30, "oldest"))
    assert [item["data"] for item in got["items"]] == expected


def test_honest_limits_refuse_before_any_cap(serials):
    small = replace(LIMITS, max_points=1000)
    with start_server(size=SIZE, limits=small,
                      misbehaviour=Misbehaviour(cap_points=100)) as srv:
        r = Api(srv.base_url).post("/sensor-data", _data_body(serials))
    assert r.status_code == 400 and "Too many points" in r.json()["message"]


# ----------------------------------------------------------------------------- windows

@pytest.mark.parametrize("path", ["/sensor-data", "/sensor-data/gnss"])
def test_clip_range_answers_only_the_first_days(honest, serials, path):
    body = _data_body(serials) if path == "/sensor-data" else {"startDate": START,
                                                                "endDate": END}
    truth, _ = _post(honest, path, body)
    with misbehaving(clip_range_days=0.5) as api:
        got, _ = _post(api, path, body)
    limit = _seconds(START) + 43200
    for g, t in zip(got["items"], truth["items"], strict=True):
        assert g["data"] == [p for p in t["data"] if _seconds(p["timestamp"]) <= limit]
    flat = _flat(truth["items"])
    assert any(s > limit for *_, s in flat) and any(s == limit for *_, s in flat)


@pytest.mark.parametrize("path", ["/sensor-data", "/sensor-data/gnss"])
def test_exclusive_end_drops_exactly_the_points_at_end_date(honest, serials, path):
    # Instants, not text: the end with or without milliseconds is the same instant.
    for end, dropped in (("2025-12-31T00:00:00Z", True), ("2025-12-31T00:00:00.000Z", True),
                         ("2025-12-31T00:00:00.500Z", False)):
        body = {"startDate": MIDDLE, "endDate": end}
        if path == "/sensor-data":
            body["deviceSerialNumbers"] = serials
        truth, _ = _post(honest, path, body)
        with misbehaving(exclusive_end=True) as api:
            got, _ = _post(api, path, body)
        at_end = [(i, j) for i, j, s in _flat(truth["items"]) if s == _seconds(END)]
        assert at_end  # the honest answer includes its end, in both cases
        if dropped:
            keep = {(i, j) for i, j, _ in _flat(truth["items"])} - set(at_end)
            assert [g["data"] for g in got["items"]] == _kept(truth["items"], keep)
        else:
            assert got == truth


# ----------------------------------------------------------------------------- bad values

def _values(items, field="value") -> dict[tuple[str, str], object]:
    """Each point's value by (series UUID, timestamp) of a parsed data answer."""
    key = "parameterUuid" if field == "value" else "sensorUuid"
    return {(item[key], p["timestamp"]): p[field] for item in items for p in item["data"]}


def test_nan_is_a_bare_token_and_the_same_points_get_it_every_time(honest, serials):
    first, second = _data_body(serials, START, MIDDLE), _data_body(serials, MIDDLE, END)
    truth = _values(_post(honest, "/sensor-data", _data_body(serials))[0]["items"])
    with misbehaving(nan_rate=0.1, seed=3) as api:
        a, text = _post(api, "/sensor-data", first)
        b, _ = _post(api, "/sensor-data", second)
        whole, _ = _post(api, "/sensor-data", _data_body(serials))
        _, gnss_text = _post(api, "/sensor-data/gnss", {"startDate": START, "endDate": END})
    assert '"value":NaN' in text and '"lat":NaN' in gnss_text
    va, vb = _values(a["items"]), _values(b["items"])
    merged = {**va, **vb}
    bad = {k for k, v in merged.items() if _isnan(v)}
    assert bad == {k for k, v in _values(whole["items"]).items() if _isnan(v)}
    assert 0.03 < len(bad) / len(merged) < 0.2
    assert all(merged[k] == truth[k] for k in merged if k not in bad)
    overlap = va.keys() & vb.keys()  # the points stamped MIDDLE are in both answers
    assert overlap and any(_isnan(va[k]) for k in overlap)
    assert all(_isnan(va[k]) == _isnan(vb[k]) for k in overlap)


def _isnan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def test_nan_with_rate_one_reaches_every_latest_point(honest):
    with misbehaving(nan_rate=1.0) as api:
        got, text = _post(api, "/sensor-data/latest", {})
    points = [p for item in got["items"] for p in item["data"]]
    assert points and all(math.isnan(p["value"]) for p in points)
    assert text.count('"value":NaN') == len(points)


def test_infinity_has_both_signs_and_is_stable(honest, serials):
    body = _data_body(serials)
    truth = _values(_post(honest, "/sensor-data", body)[0]["items"])
    with misbehaving(infinity_rate=0.2) as api:
        a, text = _post(api, "/sensor-data", body)
        b, _ = _post(api, "/sensor-data", _data_body(serials, orderBy="desc"))
        _, gnss_text = _post(api, "/sensor-data/gnss", {"startDate": START, "endDate": END})
    assert '"value":Infinity' in text and '"value":-Infinity' in text
    assert '"lat":Infinity' in gnss_text or '"lat":-Infinity' in gnss_text
    got = _values(a["items"])
    assert got.keys() == truth.keys() and got == _values(b["items"])
    for k, v in got.items():
        assert v == truth[k] or (isinstance(v, float) and math.isinf(v))


def test_string_numbers_parse_back_to_the_honest_value(honest, serials):
    body, gbody = _data_body(serials), {"startDate": START, "endDate": END}
    truth = _values(_post(honest, "/sensor-data", body)[0]["items"])
    gtruth = _values(_post(honest, "/sensor-data/gnss", gbody)[0]["items"], "eh")
    with misbehaving(string_number_rate=0.2) as api:
        got = _values(_post(api, "/sensor-data", body)[0]["items"])
        ggot = _values(_post(api, "/sensor-data/gnss", gbody)[0]["items"], "eh")
    for honest_values, bad in ((truth, got), (gtruth, ggot)):
        strings = {k: v for k, v in bad.items() if isinstance(v, str)}
        assert strings and all(float(v) == honest_values[k] for k, v in strings.items())
        assert all(v == honest_values[k] for k, v in bad.items() if k not in strings)


@pytest.mark.parametrize("path,body", [
    ("/sensor-data/gnss", {"startDate": START, "endDate": END}),
    ("/sensor-data", None)])
def test_naive_timestamps_lose_only_their_z(honest, serials, path, body):
    body = body or _data_body(serials)
    truth, _ = _post(honest, path, body)
    with misbehaving(naive_timestamp_rate=0.2) as api:
        got, _ = _post(api, path, body)
    stamps = [(g["timestamp"], t["timestamp"])
              for gi, ti in zip(got["items"], truth["items"], strict=True)
              for g, t in zip(gi["data"], ti["data"], strict=True)]
    naive = [(g, t) for g, t in stamps if not g.endswith("Z")]
    assert naive and all(g == t[:-1] and len(g) == 23 for g, t in naive)
    assert all(g == t for g, t in stamps if g.endswith("Z"))


def _without_repeats(data: list) -> tuple[list, list[tuple[dict, dict]]]:
    """The data with each point that follows an equal-timestamp point removed, and the
    (point, repeat) pairs."""
    out, pairs = [], []
    for p in data:
        if out and p["timestamp"] == out[-1]["timestamp"]:
            pairs.append((out[-1], p))
        else:
            out.append(p)
    return out, pairs


@pytest.mark.parametrize("conflict", [False, True])
def test_duplicates_follow_their_point(honest, serials, conflict):
    body, gbody = _data_body(serials), {"startDate": START, "endDate": END}
    truth, _ = _post(honest, "/sensor-data", body)
    gtruth, _ = _post(honest, "/sensor-data/gnss", gbody)
    with misbehaving(duplicate_rate=0.1, duplicate_conflict=conflict) as api:
        got, _ = _post(api, "/sensor-data", body)
        ggot, _ = _post(api, "/sensor-data/gnss", gbody)
    for answer, honest_answer, field, delta in ((got, truth, "value", 1.0),
                                                (ggot, gtruth, "lat", 1e-6)):
        all_pairs = []
        for g, t in zip(answer["items"], honest_answer["items"], strict=True):
            once, pairs = _without_repeats(g["data"])
            assert once == t["data"]
            all_pairs += pairs
        assert all_pairs
        for point, repeat in all_pairs:
            if conflict and point[field] is not None:
                assert repeat[field] == point[field] + delta
                assert {**repeat, field: point[field]} == point
            else:
                assert repeat == point


def test_huge_epoch_ids_are_two_to_the_63_plus_the_id(honest):
    body = {"startDate": START, "endDate": END}
    truth, _ = _post(honest, "/sensor-data/gnss", body)
    with misbehaving(huge_epoch_id_rate=0.3) as api:
        got, text = _post(api, "/sensor-data/gnss", body)
    ids = [(g["id"], t["id"]) for gi, ti in zip(got["items"], truth["items"], strict=True)
           for g, t in zip(gi["data"], ti["data"], strict=True)]
    huge = [(g, t) for g, t in ids if g != t]
    assert huge and all(g == HUGE + t for g, t in huge)
    assert f'"id":{huge[0][0]},' in text  # written exactly, not as a float


def test_huge_legacy_ids_everywhere(honest, serials):
    group = honest.ok("get", "/device-groups")["grouped"][0]["uuid"]
    with misbehaving(huge_legacy_ids=True) as api:
        answers = [api.get("/devices").text, api.get(f"/devices/{serials[0]}").text,
                   api.get(f"/device-groups/{group}").text,
                   api.get("/device-groups", includeDevices="true").text,
                   api.post("/sensor-data/latest", {}).text,
                   api.post("/sensor-data/gnss", {"startDate": START, "endDate": END}).text]
        plain = api.post("/sensor-data", _data_body(serials)).content
    for text in answers:
        ids = _all_values(json.loads(text), "legacyDeviceId")
        assert ids and set(ids) == {HUGE} and '"legacyDeviceId":9223372036854775808' in text
    assert plain == honest.post("/sensor-data", _data_body(serials)).content


def _all_values(node, key: str) -> list:
    if isinstance(node, dict):
        return ([node[key]] if key in node else []) + [v for x in node.values()
                                                       for v in _all_values(x, key)]
    if isinstance(node, list):
        return [v for x in node for v in _all_values(x, key)]
    return []


def test_empty_data_is_sent_as_null(honest):
    body = {"startDate": START, "endDate": END}
    truth, _ = _post(honest, "/sensor-data/gnss", body)
    with misbehaving(null_data_empty=True) as api:
        got, text = _post(api, "/sensor-data/gnss", body)
    assert '"data":null' in text
    for g, t in zip(got["items"], truth["items"], strict=True):
        assert g["data"] == (t["data"] or None)
    assert any(not t["data"] for t in truth["items"])


# ----------------------------------------------------------------------------- CLI

def test_misbehave_settings_parse_to_fields():
    assert parse_setting("cap-points=5000") == ("cap_points", 5000)
    assert parse_setting("cap-keep=newest") == ("cap_keep", "newest")
    assert parse_setting("nan-rate=0.01") == ("nan_rate", 0.01)
    assert parse_setting("exclusive-end=true") == ("exclusive_end", True)
    assert from_settings([("seed", 1), ("seed", 2)]) == Misbehaviour(seed=2)
    for bad in ("cap-points=lots", "nan-rate=2", "cap-keep=middle", "colour=red", "nan-rate",
                "huge-legacy-ids=maybe", "clip-range-days=nan"):
        with pytest.raises(ValueError):
            parse_setting(bad)
    args = cli.build_parser().parse_args(
        ["serve", "--misbehave", "cap-points=5000", "--misbehave", "cap-keep=newest",
         "--misbehave", "nan-rate=0.01"])
    assert serve_config(args).misbehaviour == Misbehaviour(cap_points=5000,
                                                           cap_keep="newest",
                                                           nan_rate=0.01)
    assert serve_config(cli.build_parser().parse_args(["serve"])).misbehaviour \
        == Misbehaviour()


def test_misbehave_bad_value_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "--misbehave", "nan-rate=2"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert line.startswith("devmon serve: error: argument --misbehave:") and "nan-rate" in line
    assert "Traceback" not in err
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "serve", "--port", "0",
                        "--misbehave", "cap-keep=middle"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "cap-keep must be one of oldest, newest, first_items" in r.stderr

