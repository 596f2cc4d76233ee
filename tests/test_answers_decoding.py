"""Decoding of the data answers (``store/answers.py``): real bytes in, Arrow tables out.

The rule under test: each point is read on its own; a point that cannot be read as the API
defines it goes to the answer's quarantine table (raw JSON text, timestamp, reason) and
every other point of the answer is kept; nothing is silently changed; a point sent twice is
kept once, the last copy winning.  Clean answers must give exactly the tables a
straightforward decode gives, through the fast path and through the slow one alike.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from devmon_sync.store import answers
from devmon_sync.store.answers import gnss as gnss_answers
from devmon_sync.store.answers import readings as readings_answers

P1, P2, P3 = ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
              "33333333-3333-4333-8333-333333333333")
S1, S2 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
UTC = timezone.utc


def stamp(minute: int) -> str:
    return f"2026-01-01T00:{minute:02d}:00.000Z"


def when(minute: int) -> datetime:
    return datetime(2026, 1, 1, 0, minute, tzinfo=UTC)


def point(minute: int, value: float | None) -> str:
    return json.dumps({"timestamp": stamp(minute), "value": value}, separators=(",", ":"))


def series_body(*items: tuple[str, list[str] | None]) -> bytes:
    """A /sensor-data answer from (parameterUuid, [point JSON text, ...]) pairs; the point
    texts are spliced in verbatim so they may hold what json.dumps would never write."""
    parts = []
    for key, points in items:
        data = "null" if points is None else "[" + ",".join(points) + "]"
        parts.append(f'{{"parameterUuid":"{key}","unit":"mm","data":{data}}}')
    return ('{"items":[' + ",".join(parts) + "]}").encode()


def reference_readings(body: bytes) -> pa.Table:
    """What a plain decode of a clean answer gives: one row per point, in answer order."""
    items = json.loads(body)["items"]
    keys = list(dict.fromkeys(item["parameterUuid"] for item in items))
    codes, ts, values = [], [], []
    for item in items:
        for p in item["data"] or []:
            codes.append(keys.index(item["parameterUuid"]))
            ts.append(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")))
            values.append(None if p["value"] is None else float(p["value"]))
    return pa.table({"parameter_uuid": pa.DictionaryArray.from_arrays(
                         pa.array(codes, pa.int32()), pa.array(keys, pa.string())),
                     "ts": pa.array(ts, answers.UTC_TIMESTAMP),
                     "value": pa.array(values, pa.float64())})


def rows(table: pa.Table) -> list[tuple]:
    return [tuple(r.values()) for r in table.to_pylist()]


def both_paths(body: bytes) -> answers.ReadingsAnswer:
    """The decoded answer, checked to be the one the slow path alone gives."""
    out = answers.readings_from_json(body)
    slow = answers.readings_lenient(body)
    assert out.table.equals(slow.table)
    assert out.quarantine.equals(slow.quarantine)
    assert (out.parsed_strings, out.duplicates_dropped, out.null_series, out.keys) == \
        (slow.parsed_strings, slow.duplicates_dropped, slow.null_series, slow.keys)
    return out


# ----------------------------------------------------------------------------- clean answers

def test_clean_answer_gives_todays_table_on_both_paths():
    body = series_body((P1, [point(m, m * 1.5) for m in range(5)]),
                       (P2, [point(m, None if m == 2 else -m) for m in range(3)]),
                       (P3, []))
    out = both_paths(body)
    assert out.table.equals(reference_readings(body))
    assert out.table.schema == pa.schema([("parameter_uuid", answers.KEY_TYPE),
                                          ("ts", answers.UTC_TIMESTAMP), ("value", pa.float64())])
    assert out.quarantine.num_rows == 0 and out.quarantine.schema == answers.QUARANTINE_SCHEMA
    assert (out.parsed_strings, out.duplicates_dropped, out.null_series) == (0, 0, ())
    assert out.keys == (P1, P2, P3)
    assert out.table.column("value")[7].as_py() is None  # null stays NULL: a faulty point


def test_real_server_answers_are_decoded_as_before(api, all_devices):
    serials = [d["serialNumber"] for d in all_devices][:4]
    r = api.post("/sensor-data", {"deviceSerialNumbers": serials,
                                  "startDate": "2025-12-30T00:00:00Z",
                                  "endDate": "2026-01-01T00:00:00Z"})
    assert r.status_code == 200
    out = both_paths(r.content)
    assert out.table.num_rows > 100 and out.table.equals(reference_readings(r.content))
    g = api.post("/sensor-data/gnss", {"startDate": "2025-12-30T00:00:00Z",
                                       "endDate": "2026-01-01T00:00:00Z"})
    assert g.status_code == 200
    fast, slow = answers.gnss_from_json(g.content), answers.gnss_lenient(g.content)
    assert fast.epochs.num_rows > 100 and fast.projected.num_rows > 0
    assert fast.epochs.equals(slow.epochs) and fast.projected.equals(slow.projected)
    assert fast.solutions == slow.solutions and fast.quarantine.num_rows == 0
    check_gnss_reference(g.content, fast)


def test_descending_answers_are_not_taken_for_duplicates():
    body = series_body((P1, [point(m, m) for m in range(9, -1, -1)]))
    out = both_paths(body)
    assert out.table.equals(reference_readings(body)) and out.duplicates_dropped == 0


# ----------------------------------------------------------------------------- bad points

BAD_POINTS = [  # (point text, reason, timestamp readable)
    ('{"timestamp":"%s","value":NaN}', "value NaN is not a number the API allows", True),
    ('{"timestamp":"%s","value":Infinity}', "value Infinity is not a number the API allows",
     True),
    ('{"timestamp":"%s","value":-Infinity}', "value -Infinity is not a number the API allows",
     True),
    ('{"timestamp":"%s","value":1e999}', "value 1e999 is not a finite number", True),
    ('{"timestamp":"%s","value":"NaN"}', "value 'NaN' is not a number", True),
    ('{"timestamp":"%s","value":"abc"}', "value 'abc' is not a number", True),
    ('{"timestamp":"%s","value":" 3 "}', "value ' 3 ' is not a number", True),
    ('{"timestamp":"%s","value":"1_000"}', "value '1_000' is not a number", True),
    ('{"timestamp":"%s","value":"inf"}', "value 'inf' is not a number", True),
    ('{"timestamp":"%s","value":"1e999"}', "value '1e999' is not a finite number", True),
    ('{"timestamp":"%s","value":true}', "value true is not a number", True),
    ('{"timestamp":"%s","value":{"v":1}}', 'value {"v":1} is not a number', True),
    ('{"timestamp":"%s","value":[1.5]}', "value [1.5] is not a number", True),
    ('{"timestamp":"%s","value":1' + "0" * 400 + "}", "is beyond the float range", True),
]


@pytest.mark.parametrize("text,reason,readable", BAD_POINTS)
def test_a_bad_value_is_quarantined_and_the_rest_kept(text, reason, readable):
    bad = text % stamp(1)
    body = series_body((P1, [point(0, 1.0), bad, point(2, 3.0)]), (P2, [point(1, 7.0)]))
    out = both_paths(body)
    assert rows(out.table) == [(P1, when(0), 1.0), (P1, when(2), 3.0), (P2, when(1), 7.0)]
    assert out.quarantine.to_pylist() == [{"key": P1, "ts": when(1), "ts_text": stamp(1),
                                           "raw": bad, "reason": out.quarantine["reason"][0]
                                           .as_py()}]
    assert reason in out.quarantine["reason"][0].as_py()


BAD_TIMES = [  # (timestamp JSON, ts_text, reason)
    ('"2026-01-01T00:01:00"', "2026-01-01T00:01:00",
     "timestamp '2026-01-01T00:01:00' has no timezone"),
    ('"yesterday"', "yesterday", "timestamp 'yesterday' is not a date-time"),
    ('"2026-13-01T00:00:00Z"', "2026-13-01T00:00:00Z", "is not a date-time"),
    ('"0001-01-01T00:00:00+01:00"', "0001-01-01T00:00:00+01:00", "is out of range"),
    ('"9999-12-31T23:59:59-01:00"', "9999-12-31T23:59:59-01:00", "is out of range"),
    ("1767225660", "1767225660", "timestamp 1767225660 is not a date-time"),
    ("null", None, "timestamp is missing"),
]


@pytest.mark.parametrize("ts_json,ts_text,reason", BAD_TIMES)
def test_a_bad_timestamp_is_quarantined_whatever_the_value(ts_json, ts_text, reason):
    bad = '{"timestamp":%s,"value":1.5}' % ts_json
    body = series_body((P1, [point(0, 1.0), bad, point(2, 3.0)]))
    out = both_paths(body)
    assert rows(out.table) == [(P1, when(0), 1.0), (P1, when(2), 3.0)]
    q = out.quarantine.to_pylist()
    assert q == [{"key": P1, "ts": None, "ts_text": ts_text, "raw": bad, "reason": reason}] \
        or (len(q) == 1 and reason in q[0]["reason"] and q[0]["raw"] == bad
            and q[0]["ts"] is None and q[0]["ts_text"] == ts_text)


def test_points_with_several_problems_or_no_shape_are_quarantined_with_all_reasons():
    naive_nan = '{"timestamp":"2026-01-01T00:01:00","value":NaN}'
    body = series_body((P1, [naive_nan, '{"value":2}', "5", point(3, 4.0)]))
    out = both_paths(body)
    assert rows(out.table) == [(P1, when(3), 4.0)]
    assert out.quarantine.to_pylist() == [
        {"key": P1, "ts": None, "ts_text": "2026-01-01T00:01:00", "raw": naive_nan,
         "reason": "timestamp '2026-01-01T00:01:00' has no timezone; "
                   "value NaN is not a number the API allows"},
        {"key": P1, "ts": None, "ts_text": None, "raw": '{"value":2}',
         "reason": "timestamp is missing"},
        {"key": P1, "ts": None, "ts_text": None, "raw": "5", "reason": "point is not an object"}]


def test_other_timestamp_forms_are_read_as_on_the_fast_path():
    forms = ["2026-01-01T01:00:00+01:00", "2026-01-01T00:01:00.123456789Z",
             "2026-01-01 00:02:00Z", "2026-01-01T00:03Z"]
    body = series_body((P1, ['{"timestamp":"%s","value":%d}' % (f, i)
                             for i, f in enumerate(forms)]))
    out = both_paths(body)
    assert out.quarantine.num_rows == 0
    assert out.table["ts"].to_pylist() == [
        when(0), datetime(2026, 1, 1, 0, 1, 0, 123456, tzinfo=UTC), when(2), when(3)]
    # The same forms beside a NaN (slow path) are read the same way.
    mixed = both_paths(series_body((P1, ['{"timestamp":"%s","value":%d}' % (f, i)
                                         for i, f in enumerate(forms)] +
                                    ['{"timestamp":"%s","value":NaN}' % stamp(9)])))
    assert mixed.table.equals(out.table) and mixed.quarantine.num_rows == 1


def test_numeric_strings_are_read_and_counted():
    texts = ['"1.5"', '"-2e-3"', '"+4"', '".5"', '"7"']
    body = series_body((P1, ['{"timestamp":"%s","value":%s}' % (stamp(i), t)
                             for i, t in enumerate(texts)] + [point(9, 1.0)]))
    out = both_paths(body)
    assert out.table["value"].to_pylist() == [1.5, -0.002, 4.0, 0.5, 7.0, 1.0]
    assert out.parsed_strings == 5 and out.quarantine.num_rows == 0


# ----------------------------------------------------------------------------- duplicates

def test_identical_repeats_are_dropped_and_counted_on_the_fast_path():
    body = series_body((P1, [point(0, 1.0), point(1, 2.0), point(1, 2.0), point(2, None),
                             point(2, None)]), (P2, [point(0, 5.0)]), (P1, [point(0, 1.0)]))
    out = both_paths(body)
    # The copy kept is the last: (P1, 0) now stands where its last copy stood.
    assert rows(out.table) == [(P1, when(1), 2.0), (P1, when(2), None), (P2, when(0), 5.0),
                               (P1, when(0), 1.0)]
    assert out.duplicates_dropped == 3 and out.quarantine.num_rows == 0
    assert out.keys == (P1, P2)


def test_conflicting_repeats_keep_the_last_and_quarantine_the_others():
    body = series_body((P1, [point(0, 1.5), point(1, 9.0), point(0, 2.5), point(2, 1.0)]),
                       (P2, [point(0, None)]), (P2, [point(0, 4.0), point(3, 3.0)]))
    out = both_paths(body)
    assert rows(out.table) == [(P1, when(1), 9.0), (P1, when(0), 2.5), (P1, when(2), 1.0),
                               (P2, when(0), 4.0), (P2, when(3), 3.0)]
    assert out.quarantine.to_pylist() == [
        {"key": P1, "ts": when(0), "ts_text": stamp(0), "raw": point(0, 1.5),
         "reason": "duplicate timestamp in one answer: kept value 2.5, dropped 1.5"},
        {"key": P2, "ts": when(0), "ts_text": stamp(0), "raw": point(0, None),
         "reason": "duplicate timestamp in one answer: kept value 4.0, dropped null"}]
    assert out.duplicates_dropped == 0


def test_the_same_instant_written_two_ways_is_one_point():
    body = series_body((P1, ['{"timestamp":"2026-01-01T01:00:00+01:00","value":1}',
                             point(0, 2.0)]))
    out = both_paths(body)
    assert rows(out.table) == [(P1, when(0), 2.0)]
    assert "kept value 2.0, dropped 1.0" in out.quarantine["reason"][0].as_py()


def test_a_bad_last_copy_does_not_hide_the_readable_one():
    """Duplicates are resolved among readable points; the unreadable copy is quarantined."""
    body = series_body((P1, [point(0, 1.0), '{"timestamp":"%s","value":NaN}' % stamp(0)]))
    out = both_paths(body)
    assert rows(out.table) == [(P1, when(0), 1.0)] and out.quarantine.num_rows == 1


# ----------------------------------------------------------------------------- shape

def test_null_data_is_an_empty_series():
    body = series_body((P1, None), (P2, [point(0, 1.0)]), (P1, None))
    out = both_paths(body)
    assert out.null_series == (P1,) and out.keys == (P1, P2)
    assert rows(out.table) == [(P2, when(0), 1.0)]
    assert out.table["parameter_uuid"].chunk(0).dictionary.to_pylist() == [P1, P2]


@pytest.mark.parametrize("body", [
    b"", b"<html><body>502 Bad Gateway</body></html>", b'{"items":[{"parameterUuid":"x",',
    b'{"message":"busy"}', b"[]", b'{"items":[{"data":[]}]}', b'{"items":{"a":1}}',
    b'{"items":[{"parameterUuid":"x","data":5}]}', b"\xff\xfe{", b"NaN"])
def test_a_body_that_is_not_an_answer_raises_value_error(body):
    with pytest.raises(ValueError):
        answers.readings_from_json(body)
    with pytest.raises(ValueError):
        answers.gnss_from_json(body.replace(b"parameterUuid", b"sensorUuid"))


# ----------------------------------------------------------------------------- property

ALL_KINDS = ["float", "float", "float", "null", "string", "nan", "naive", "abc", "offset",
             "repeat"]
CLEAN_KINDS = ["float", "float", "null", "offset", "repeat", "repeat"]  # the fast path's


def random_answer(rng: np.random.Generator, kinds: list[str] = ALL_KINDS
                  ) -> tuple[bytes, list[tuple[str, int, object]]]:
    """A random answer and, per point in answer order, (key, minute, read): read is the
    value read (float or None) for a good point, ``"bad"`` for one to be quarantined."""
    keys = [P1, P2, P3][:rng.integers(1, 4)]
    items, expected = [], []
    for _ in range(rng.integers(1, 5)):
        key = keys[rng.integers(len(keys))]
        points = []
        for _ in range(rng.integers(0, 12)):
            minute = int(rng.integers(0, 8))  # few times: repeats are common
            kind = rng.choice(kinds)
            value = round(float(rng.normal()), 3)
            if kind == "repeat" and expected:
                k, m, v = expected[-1]
                if k == key and v != "bad" and points:
                    points.append(points[-1])
                    expected.append((k, m, v))
                    continue
                kind = "float"
            text, read = {
                "float": (point(minute, value), value),
                "null": (point(minute, None), None),
                "string": ('{"timestamp":"%s","value":"%r"}' % (stamp(minute), value), value),
                "nan": ('{"timestamp":"%s","value":%s}' % (
                    stamp(minute), rng.choice(["NaN", "Infinity", "-Infinity"])), "bad"),
                "naive": ('{"timestamp":"%s","value":1}' % stamp(minute)[:-1], "bad"),
                "abc": ('{"timestamp":"%s","value":"abc"}' % stamp(minute), "bad"),
                "offset": ('{"timestamp":"2026-01-01T01:%02d:00+01:00","value":%r}'
                           % (minute, value), value),
                "repeat": (point(minute, value), value),
            }[kind]
            points.append(text)
            expected.append((key, minute, read))
        items.append((key, points))
    return series_body(*items), expected


def model(expected: list[tuple[str, int, object]]) -> tuple[dict, int, int, int]:
    """The rule, written plainly: the last readable copy of each (key, minute) wins."""
    good = [(k, m, v) for k, m, v in expected if v != "bad"]
    last = {(k, m): v for k, m, v in good}
    same = differ = 0
    seen: dict = {}
    for k, m, v in good:
        seen[(k, m)] = seen.get((k, m), 0) + 1
    remaining = dict(seen)
    for k, m, v in good:
        remaining[(k, m)] -= 1
        if remaining[(k, m)] == 0:
            continue  # the winner
        if v == last[(k, m)]:
            same += 1
        else:
            differ += 1
    bad = len(expected) - len(good)
    return last, same, differ, bad


@pytest.mark.parametrize("seed,kinds", [(s, ALL_KINDS) for s in range(300)] +
                         [(s, CLEAN_KINDS) for s in range(300, 400)])
def test_random_answers_lose_no_point(seed, kinds):
    """Every point is in the table, in quarantine, or counted as an identical repeat; no
    (key, time) twice in the table; the values kept are the model's."""
    body, expected = random_answer(np.random.default_rng(seed), kinds)
    out = both_paths(body)
    last, same, differ, bad = model(expected)
    table = rows(out.table)
    assert out.table.num_rows + out.quarantine.num_rows + out.duplicates_dropped == \
        len(expected)
    assert len({(k, t) for k, t, _ in table}) == len(table)
    assert {(k, t): v for k, t, v in table} == {(k, when(m)): v for (k, m), v in last.items()}
    assert (out.duplicates_dropped, out.quarantine.num_rows) == (same, differ + bad)


# ----------------------------------------------------------------------------- GNSS

def epoch(i: int, minute: int | None = None, **changes) -> dict:
    """An epoch of spec 2.8, shaped as the reference server writes it."""
    e = {"id": i, "timestamp": stamp(i if minute is None else minute), "bs": 102,
         "lat": 46.30203 + i * 1e-7, "lon": 7.62809, "eh": 1100.5, "oh": 1050.25,
         "quality": {"sdn": 0.002, "sde": 0.002, "sdu": 0.004, "q": 1, "ns": 17, "ar": 3.2},
         "roll": 0.1, "pitch": -0.2, "dE": 0.001, "dN": -0.002, "dU": 0.003, "d2d": 0.002,
         "d3d": 0.004, "vE": None, "vN": 0.5, "vU": -0.25,
         "proj": {"1": {"e": 2600000.5 + i, "n": 1200000.25, "h": 1050.25},
                  "2": {"e": 100.5, "n": 200.25 + i, "h": None}},
         "debug": {"ps": "fixed", "err": None, "at": stamp(59), "gw": 2400, "gd": 4,
                   "gt": 345600, "log": "rtk bs=102 ns=17 ratio=3.2"}}
    e.update(changes)
    return e


def gnss_body(*items: tuple[str, list | None]) -> bytes:
    doc = {"items": [{"sensorUuid": key, "deviceSerialNumber": f"SN-{key[:4]}", "srid": 4326,
                      "legacyDeviceId": 2**63, "units": {"lat": "deg"},
                      "projectionMetadata": [{"id": 1}], "baseStations": [], "data": data}
                     for key, data in items]}
    return json.dumps(doc, allow_nan=True, separators=(",", ":")).encode()


def epoch_rows(out: answers.GnssAnswer) -> list[tuple[str, int]]:
    return [(r["sensor_uuid"], r["epoch_id"]) for r in out.epochs.to_pylist()]


def projected_rows(out: answers.GnssAnswer) -> list[tuple]:
    return [(r["sensor_uuid"], r["epoch_id"], r["projection_id"]) for r in
            out.projected.to_pylist()]


def both_gnss(body: bytes) -> answers.GnssAnswer:
    out, slow = answers.gnss_from_json(body), answers.gnss_lenient(body)
    for name in ("epochs", "projected", "quarantine"):
        assert getattr(out, name).equals(getattr(slow, name)), name
    assert out.solutions == slow.solutions
    assert (out.parsed_strings, out.duplicates_dropped, out.null_series, out.keys) == \
        (slow.parsed_strings, slow.duplicates_dropped, slow.null_series, slow.keys)
    return out


def check_gnss_reference(body: bytes, out: answers.GnssAnswer) -> None:
    """The epochs table of a clean answer, field by field, against the JSON."""
    items = json.loads(body)["items"]
    want = []
    for item in items:
        for e in item["data"]:
            q, d = e.get("quality") or {}, e.get("debug") or {}
            row = {"sensor_uuid": item["sensorUuid"], "epoch_id": e["id"],
                   "device_serial_number": item.get("deviceSerialNumber"),
                   "ts": datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")),
                   "base_station_id": e.get("bs")}
            row.update({k: e.get(answers._JSON_NAME.get(k, k)) for k in answers.EPOCH_NUMBERS})
            row.update({k: q.get(k) for k in answers.QUALITY_NUMBERS})
            at, err = d.get("at"), d.get("err")
            err = err if err is None or isinstance(err, str) else json.dumps(err)
            row.update({"debug_ps": d.get("ps"), "debug_err": err,
                        "debug_at": at and datetime.fromisoformat(at.replace("Z", "+00:00")),
                        **{f"debug_{k}": d.get(k) for k in answers.DEBUG_NUMBERS},
                        "debug_log": d.get("log")})
            want.append(row)
    got = out.epochs.to_pylist()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for k in w:
            assert g[k] == w[k] or (isinstance(w[k], (int, float)) and g[k] == float(w[k])), k
    n_proj = sum(len(e.get("proj") or {}) for item in items for e in item["data"])
    assert out.projected.num_rows == n_proj


def test_clean_gnss_answer_on_both_paths():
    body = gnss_body((S1, [epoch(i) for i in range(4)]), (S2, [epoch(i) for i in range(2)]))
    out = both_gnss(body)
    check_gnss_reference(body, out)
    assert out.keys == (S1, S2) and out.quarantine.num_rows == 0
    assert projected_rows(out)[:2] == [(S1, 0, 1), (S1, 0, 2)] and out.projected.num_rows == 12
    assert out.solutions[0]["srid"] == 4326 and out.solutions[0]["units"] == '{"lat":"deg"}'


def test_gnss_bad_epochs_are_quarantined_whole_with_their_projections():
    bad = [epoch(1, lat=math.nan), epoch(2, id=2**63), epoch(3, timestamp="2026-01-01T00:03:00"),
           epoch(4, quality=dict(epoch(4)["quality"], q="abc")),
           {k: v for k, v in epoch(5).items() if k != "id"}, epoch(6, id="6.5"),
           epoch(7, proj={"x": {"e": 1, "n": 2, "h": 3}}), epoch(8, lon=True),
           epoch(9, debug=dict(epoch(9)["debug"], at="soon")), epoch(10, bs=2**64)]
    body = gnss_body((S1, [epoch(0)] + bad + [epoch(11)]))
    out = both_gnss(body)
    assert epoch_rows(out) == [(S1, 0), (S1, 11)]
    assert projected_rows(out) == [(S1, 0, 1), (S1, 0, 2), (S1, 11, 1), (S1, 11, 2)]
    q = out.quarantine.to_pylist()
    assert [r["reason"] for r in q] == [
        "lat NaN is not a number the API allows",
        "epoch id 9223372036854775808 is outside int64",
        "timestamp '2026-01-01T00:03:00' has no timezone",
        "quality.q 'abc' is not a number",
        "epoch id is missing",
        "epoch id '6.5' is not a whole number",
        "proj key 'x' is not a projection id",
        "lon true is not a number",
        "debug.at 'soon' is not a date-time",
        "bs 18446744073709551616 is outside int64"]
    assert all(r["key"] == S1 for r in q)
    assert '"lat":NaN' in q[0]["raw"] and '"id":9223372036854775808' in q[1]["raw"]
    assert json.loads(q[1]["raw"]) == bad[1]
    assert q[1]["ts"] == when(2) and q[2]["ts"] is None
    assert q[2]["ts_text"] == "2026-01-01T00:03:00"


def test_gnss_numeric_strings_are_read_and_counted():
    body = gnss_body((S1, [epoch(0, eh="1100.5", bs="102"), epoch(1)]))
    out = both_gnss(body)
    assert out.parsed_strings == 2 and out.quarantine.num_rows == 0
    assert out.epochs["eh"].to_pylist() == [1100.5, 1100.5]
    assert out.epochs["base_station_id"].to_pylist() == [102, 102]


def test_gnss_duplicates_keep_the_last_and_projections_follow():
    changed = epoch(1, lat=1.0, proj={"1": {"e": 5.0, "n": 6.0, "h": 7.0}})
    body = gnss_body((S1, [epoch(0), epoch(1), epoch(1), epoch(2)]),
                     (S2, [epoch(0)]), (S1, [changed, epoch(0)]))
    out = both_gnss(body)
    assert epoch_rows(out) == [(S1, 2), (S2, 0), (S1, 1), (S1, 0)]
    assert out.duplicates_dropped == 1  # epoch 0 of S1 twice the same
    assert out.epochs["lat"].to_pylist()[2] == 1.0
    assert sorted(projected_rows(out)) == sorted(
        [(S1, 2, 1), (S1, 2, 2), (S2, 0, 1), (S2, 0, 2), (S1, 1, 1), (S1, 0, 1), (S1, 0, 2)])
    q = out.quarantine.to_pylist()
    assert len(q) == 2 and all(r["key"] == S1 and r["ts"] == when(1) for r in q)
    assert q[0]["reason"] == ("duplicate epoch id 1 in one answer: kept the last copy, "
                              "dropped one differing in lat, proj")
    assert json.loads(q[0]["raw"]) == epoch(1)


def test_gnss_identical_duplicates_take_the_fast_path(monkeypatch):
    body = gnss_body((S1, [epoch(0), epoch(1), epoch(1)]))
    monkeypatch.setattr(gnss_answers, "gnss_lenient", lambda b: pytest.fail("slow path taken"))
    out = answers.gnss_from_json(body)
    assert epoch_rows(out) == [(S1, 0), (S1, 1)] and out.duplicates_dropped == 1
    assert out.projected.num_rows == 4


def test_gnss_null_data_and_only():
    body = gnss_body((S1, None), (S2, [epoch(0), epoch(1, lat=math.inf)]))
    out = both_gnss(body)
    assert out.null_series == (S1,) and out.keys == (S1, S2)
    assert epoch_rows(out) == [(S2, 0)] and out.quarantine.num_rows == 1
    part = out.only([S1])
    assert part.epochs.num_rows == 0 and part.quarantine.num_rows == 0
    assert part.keys == (S1,) and part.null_series == (S1,)
    assert [s["sensor_uuid"] for s in part.solutions] == [S1]
    other = out.only({S2})
    assert other.quarantine.num_rows == 1 and other.keys == (S2,) and other.null_series == ()
    assert other.epochs.schema == out.epochs.schema
    every = out.only([S1, S2, P1])  # every sensor of the answer, and one it does not hold
    assert every.epochs.equals(out.epochs) and every.projected.equals(out.projected)
    assert every.quarantine.equals(out.quarantine) and every.solutions == out.solutions
    assert (every.keys, every.null_series) == (out.keys, out.null_series)
    two = both_gnss(gnss_body((S1, [epoch(0)]), (S2, [epoch(0), epoch(1)])))
    assert epoch_rows(two.only([S2])) == [(S2, 0), (S2, 1)]
    assert two.only([S2]).projected.num_rows == 2 * two.projected.num_rows // 3


def test_gnss_repeated_items_give_one_solution_each():
    out = both_gnss(gnss_body((S1, [epoch(0)]), (S1, [epoch(1)])))
    assert [s["sensor_uuid"] for s in out.solutions] == [S1] and out.keys == (S1,)
    assert epoch_rows(out) == [(S1, 0), (S1, 1)]


def test_clean_gnss_path_is_taken_for_clean_answers(monkeypatch):
    monkeypatch.setattr(gnss_answers, "gnss_lenient", lambda b: pytest.fail("slow path taken"))
    monkeypatch.setattr(readings_answers, "readings_lenient",
                        lambda b: pytest.fail("slow path taken"))
    answers.gnss_from_json(gnss_body((S1, [epoch(i) for i in range(3)]), (S2, None)))
    answers.readings_from_json(series_body((P1, [point(m, m) for m in range(3)]), (P2, None),
                                           (P1, [point(0, 0.0)])))
