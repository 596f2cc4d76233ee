"""JSON for the large answers, built column-wise.

A data answer holds up to 100 000 points or 10 000 nested epochs.  Building one Python dict
per point and then encoding it costs several times more than the encoding itself, so each
column is encoded once by orjson, split into its JSON tokens (numbers, null and ISO timestamps
contain no commas) and the tokens are spliced into a byte template per row.  The result is an
``orjson.Fragment`` that ``orjson.dumps`` embeds verbatim: byte-identical to encoding the dicts.
"""

from __future__ import annotations

import numpy as np
import orjson

from devmon_sync.server import gnss
from devmon_sync.server.clock import iso_array

_EMPTY = orjson.Fragment(b"[]")


def tokens(values: list) -> list[bytes]:
    """JSON text of each item of a flat list of numbers, None and comma-free strings."""
    if not values:
        return []
    return orjson.dumps(values)[1:-1].split(b",")


def float_tokens(a: np.ndarray, decimals: int | None = None) -> list[bytes]:
    """JSON text of each float, NaN as null, optionally rounded first."""
    a = a.astype(np.float64)
    if decimals is not None:
        a = np.round(a, decimals)
    return tokens(np.where(np.isnan(a), None, a).tolist())


def points(stamps: list[bytes], v: np.ndarray) -> orjson.Fragment:
    """The ``data`` array of a reading series: ``[{timestamp, value}, ...]``."""
    if not stamps:
        return _EMPTY
    row = b'{"timestamp":%b,"value":%b}'
    return orjson.Fragment(b"[" + b",".join(
        [row % pair for pair in zip(stamps, float_tokens(v), strict=True)]) + b"]")


def timestamp_tokens(t: np.ndarray) -> list[bytes]:
    """JSON strings of the API timestamps of Unix seconds ``t``."""
    return tokens(iso_array(t))


_EPOCH = (b'{"id":%b,"timestamp":%b,"bs":%b,"lat":%b,"lon":%b,"eh":%b,"oh":%b,'
          b'"quality":{"sdn":%b,"sde":%b,"sdu":%b,"q":%b,"ns":%b,"ar":%b},'
          b'"roll":%b,"pitch":%b,"dE":%b,"dN":%b,"dU":%b,"d2d":%b,"d3d":%b,'
          b'"vE":%b,"vN":%b,"vU":%b,"proj":{%b},'
          b'"debug":{"ps":%b,"err":%b,"at":%b,"gw":%b,"gd":%b,"gt":%b,'
          b'"log":"rtk bs=%b ns=%b ratio=%b"}}')
# Served precision of each field: 1e-10 deg is 0.01 mm; 1e-5 m is 0.01 mm.
_DECIMALS = (("lat", 10), ("lon", 10), ("eh", 5), ("oh", 5), ("sdn", 5), ("sde", 5),
             ("sdu", 5), ("roll", 4), ("pitch", 4), ("dE", 5), ("dN", 5), ("dU", 5),
             ("d2d", 5), ("d3d", 5), ("vE", 3), ("vN", 3), ("vU", 3), ("ar", 1))


def epochs(ep: gnss.Epochs, descending: bool) -> orjson.Fragment:
    """The ``data`` array of a GNSS solution item: epoch objects of spec 2.8."""
    if len(ep) == 0:
        return _EMPTY
    col = {name: float_tokens(ep.cols[name], n) for name, n in _DECIMALS}
    q = ep.cols["q"]
    week, day, tow = gnss.gps_time(ep.t)
    fixed = q == 1
    proj = _proj_tokens(ep)
    rows = zip(tokens(ep.ids.tolist()), timestamp_tokens(ep.t), tokens(ep.bs.tolist()),
               col["lat"], col["lon"], col["eh"], col["oh"], col["sdn"], col["sde"],
               col["sdu"], tokens(q.tolist()), tokens(ep.cols["ns"].tolist()), col["ar"],
               col["roll"], col["pitch"], col["dE"], col["dN"], col["dU"], col["d2d"],
               col["d3d"], col["vE"], col["vN"], col["vU"], proj,
               [b'"fixed"' if f else b'"float"' for f in fixed.tolist()],
               [b"null" if f else b"3" for f in fixed.tolist()],
               timestamp_tokens(ep.t + 240), tokens(week.tolist()), tokens(day.tolist()),
               tokens(tow.tolist()), strict=True)
    text = [_EPOCH % (*r, r[2], r[11], r[12]) for r in rows]
    if descending:
        text.reverse()
    return orjson.Fragment(b"[" + b",".join(text) + b"]")


def _proj_tokens(ep: gnss.Epochs) -> list[bytes]:
    """The inside of each epoch's ``proj`` object: ``"id":{"e":..,"n":..,"h":..},...``."""
    parts = []
    for pid, (e, n, h) in ep.proj.items():
        head = b'"%d":{"e":%%b,"n":%%b,"h":%%b}' % pid
        parts.append([head % trio for trio in zip(float_tokens(e, 5), float_tokens(n, 5),
                                                   float_tokens(h, 5), strict=True)])
    return [b",".join(row) for row in zip(*parts, strict=True)] if parts else [b""] * len(ep)
