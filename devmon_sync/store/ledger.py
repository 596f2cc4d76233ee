"""The coverage ledger: what each committed answer proved, what is still unproved, what was
quarantined, and what was learned of the service.  SQL only; the sync decides, this records.

Every function here runs inside the caller's transaction (``Mirror.commit_*``), so data,
proof, gaps and cursors commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import duckdb
import numpy as np
import pyarrow as pa

from devmon_sync.printable import fit

_MS = timedelta(milliseconds=1)  # the finest step of a window bound
_UTC_US = pa.timestamp("us", tz="UTC")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)



@dataclass(frozen=True)
class WindowProof:
    """What one answer showed and proved, per stream (lists aligned with ``keys``)."""

    kind: str  # readings | gnss
    keys: list[str]
    start: datetime
    end: datetime
    rows: list[int]
    first: Sequence[datetime | None] | np.ndarray
    last: Sequence[datetime | None] | np.ndarray
    """Per stream, the first and last point received: datetimes (None: none), or float
    milliseconds since 1970 (NaN: none), as the completeness judgement holds them."""
    unproven: dict[str, list[tuple[datetime, datetime, str]]] = field(default_factory=dict)
    """Per stream, the ranges (from, to, why) the answer could not prove; they become
    ``sync_gaps``."""
    gaps_may_exist: bool = True
    """False when the caller knows ``sync_gaps`` is empty (nothing to close)."""
    cursor_limit: datetime | None = None
    """The latest time a cursor may take (the service's now at the commit, with a
    tolerance): a point stamped later (a logger's wrong clock) is stored, but moving the
    cursor to it would skip every point stamped right after it (``sync.future_points``)."""
    on_time_last: np.ndarray | None = None
    """Per stream, the newest point received at or before ``cursor_limit`` (float ms, NaN:
    none), when some point came later; None: ``last`` is."""

    def proven(self) -> list[tuple[str, datetime, datetime]]:
        """(key, from, to) of what this answer proved: the window, less each stream's
        unproved ranges inside it."""
        out = []
        for k in self.keys:
            t = self.start
            for a, b, _ in sorted(_ranges(self.unproven.get(k))):
                if b < t or a > self.end:
                    continue
                if a > t:
                    out.append((k, t, a - _MS))
                t = max(t, b + _MS)
            if t <= self.end:
                out.append((k, t, self.end))
        return out

    def verdicts(self) -> list[str]:
        """complete, unless an unproved range of the stream lies inside this window."""
        if not self.unproven:
            return ["complete"] * len(self.keys)  # the usual case
        return ["unverified" if any(b >= self.start and a <= self.end
                                    for a, b, _ in _ranges(self.unproven.get(k)))
                else "complete" for k in self.keys]

    def reason(self, key: str) -> str | None:
        ranges = _ranges(self.unproven.get(key))
        return ranges[0][2] if ranges else None


def _ranges(value) -> list[tuple[datetime, datetime, str]]:
    """A stream's unproved ranges, given as a list or as one (from, to, why)."""
    if not value:
        return []
    return [value] if isinstance(value, tuple) else list(value)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def record_window(con: duckdb.DuckDBPyConnection, run_id: int, proof: WindowProof,
                  requests: int | None = None, known: Container[str] | None = None) -> int:
    """``record_windows`` of one window.  ``known`` (the streams a caller believed to have a
    cursor row) is no longer needed: the cursors are read, so any list gives the same
    rows."""
    return record_windows(con, run_id, [proof], requests)


def record_windows(con: duckdb.DuckDBPyConnection, run_id: int, proofs: Sequence[WindowProof],
                   requests: int | None = None) -> int:
    """Ledger rows, cursors (the newest point *received* by each ``cursor_limit``), gaps
    closed and opened, and the run's counts (its rows, and ``requests`` sent so far when
    given) of the windows of one transaction, in their order; returns the rows committed.
    Set-based, once per transaction whatever the number of windows (issue 31: a statement
    per table and window cost ~6 ms a window): one INSERT of every window's rows, the
    cursors read once, moved window by window here and written by one UPDATE and one
    INSERT, one UPDATE of the run.  A cursor an older devmon moved past the limit gives
    way to the one an answer sets."""
    if not proofs:
        return 0
    committed_at = _utcnow()
    window_rows = pa.concat_tables([_proof_rows(proof) for proof in proofs])
    con.execute("INSERT INTO sync_windows (stream, window_start, window_end, rows, run_id, "
                "committed_at, first_ts, last_ts, verdict, reason) SELECT stream, "
                "window_start, window_end, rows, ?, ?, first_ts, last_ts, verdict, reason "
                "FROM window_rows", [run_id, committed_at])
    _move_cursors(con, run_id, proofs, window_rows)
    for proof in proofs:  # (the usual window has neither: no statement)
        if proof.gaps_may_exist:
            _close_gaps(con, proof.kind, proof.proven())
        open_gaps(con, run_id, proof.kind, proof.unproven)
    readings = sum(sum(p.rows) for p in proofs if p.kind == "readings")
    epochs = sum(sum(p.rows) for p in proofs if p.kind != "readings")
    con.execute("UPDATE sync_runs SET readings_rows = readings_rows + ?, epoch_rows = "
                "epoch_rows + ?, requests = coalesce(?, requests) WHERE run_id = ?",
                [int(readings), int(epochs), requests, run_id])
    return int(readings + epochs)


def _proof_rows(proof: WindowProof) -> pa.Table:
    """One window's ``sync_windows`` rows (and the cursor each stream is moved to), as
    Arrow: binding hundreds of Python datetimes as list parameters cost more than the
    statements themselves."""
    verdicts = proof.verdicts()
    n = len(proof.keys)
    return pa.table({
        "stream": pa.array([f"{proof.kind}:{k}" for k in proof.keys], pa.string()),
        "window_start": pa.array([proof.start] * n, _UTC_US),
        "window_end": pa.array([proof.end] * n, _UTC_US),
        "rows": pa.array(proof.rows, pa.int64()),
        "first_ts": _timestamps(proof.first), "last_ts": _timestamps(proof.last),
        "cursor_ts": _timestamps(proof.last if proof.on_time_last is None
                                 else proof.on_time_last),
        "verdict": pa.array(verdicts, pa.string()),
        "reason": pa.array([proof.reason(k) if v == "unverified" else None
                            for k, v in zip(proof.keys, verdicts)] if proof.unproven
                           else [None] * n, pa.string())})


_NONE = np.iinfo(np.int64).min  # no time (NULL), in the cursors' microseconds below


def _move_cursors(con: duckdb.DuckDBPyConnection, run_id: int, proofs: Sequence[WindowProof],
                  windows: pa.Table) -> None:
    """Every stream's cursor moved as each window of ``windows`` (their rows, in order)
    would move it by its own upsert: to the newest point received, unless none was (kept);
    an older cursor past the window's limit gives way to it; ``covered_until`` to the
    greatest window end.  The streams' rows are read once, the windows applied in numpy,
    one window at a time (vectorised over its streams), and written by one UPDATE of the
    rows that exist and one INSERT of the others."""
    stream = windows.column("stream").to_numpy(zero_copy_only=False)
    names, at = np.unique(stream, return_inverse=True)
    held = pa.table({"stream": pa.array(names, pa.string())})  # noqa: F841 (read by name)
    found = con.execute(
        "SELECT c.stream, epoch_us(c.cursor_ts), epoch_us(c.covered_until) FROM "
        "sync_cursors c JOIN held h ON c.stream = h.stream").fetchall()
    index = {s: i for i, s in enumerate(names.tolist())}
    exists = np.zeros(len(names), bool)
    cursor = np.full(len(names), _NONE, np.int64)
    covered = np.full(len(names), _NONE, np.int64)
    for s, c, v in found:
        i = index[s]
        exists[i] = True
        cursor[i] = _NONE if c is None else c
        covered[i] = _NONE if v is None else v
    new_ts = _us_or_none(windows.column("cursor_ts"))
    row = 0
    for proof in proofs:
        rows = slice(row, row + len(proof.keys))
        row = rows.stop
        i, n = at[rows], new_ts[rows]
        c = cursor[i]
        limit = _NONE if proof.cursor_limit is None else _us(proof.cursor_limit)
        past = (c != _NONE) & (c > limit) if limit != _NONE else np.zeros(len(c), bool)
        moved = np.where((c == _NONE) | past, n, np.maximum(n, c))
        cursor[i] = np.where(n == _NONE, c, moved)
        covered[i] = np.maximum(covered[i], _us(proof.end))
    moved_rows = pa.table({  # noqa: F841 (read by name: a replacement scan, staged.py)
        "stream": pa.array(names, pa.string()), "exists": pa.array(exists),
        "kind": pa.array([s.split(":", 1)[0] for s in names.tolist()], pa.string()),
        "key": pa.array([s.split(":", 1)[1] for s in names.tolist()], pa.string()),
        "cursor_ts": _stamps_of_us(cursor), "covered_until": _stamps_of_us(covered)})
    if exists.any():
        con.execute("UPDATE sync_cursors c SET cursor_ts = n.cursor_ts, run_id = ?, "
                    "covered_until = n.covered_until FROM moved_rows n "
                    "WHERE n.exists AND c.stream = n.stream", [run_id])
    if not exists.all():
        con.execute("INSERT INTO sync_cursors (stream, kind, key, cursor_ts, run_id, "
                    "covered_until) SELECT stream, kind, key, cursor_ts, ?, covered_until "
                    "FROM moved_rows WHERE NOT exists", [run_id])


def _us(ts: datetime) -> int:
    """Microseconds since 1970 of an aware datetime."""
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _us_or_none(column: pa.ChunkedArray) -> np.ndarray:
    """Microseconds of a timestamp column, ``_NONE`` for NULL."""
    us = column.combine_chunks().cast(pa.int64())
    return np.asarray(us.fill_null(_NONE).to_numpy(zero_copy_only=False), np.int64)


def _stamps_of_us(us: np.ndarray) -> pa.Array:
    """UTC timestamps of microseconds (``_NONE``: NULL)."""
    return pa.array(np.where(us == _NONE, 0, us), _UTC_US, mask=us == _NONE)


def _timestamps(values) -> pa.Array:
    """UTC timestamps of datetimes (None: null) or of float ms since 1970 (NaN: null)."""
    if isinstance(values, np.ndarray):
        missing = np.isnan(values)
        us = np.where(missing, 0, values).astype(np.int64) * 1000
        return pa.array(us, pa.timestamp("us", tz="UTC"), mask=missing)
    return pa.array(list(values), pa.timestamp("us", tz="UTC"))


def _close_gaps(con, kind: str, proven: list[tuple[str, datetime, datetime]]) -> None:
    """Answers proved these (key, from, to) ranges: the gaps they cover are closed, the gaps
    they overlap are trimmed."""
    if not proven or not con.execute("SELECT count(*) FROM sync_gaps").fetchall()[0][0]:
        return  # the usual case: nothing to close (three statements saved per window)
    ranges = [[f"{kind}:{k}" for k, _, _ in proven], [a for _, a, _ in proven],
              [b for _, _, b in proven]]
    r = ("(SELECT unnest(?::VARCHAR[]) AS s, unnest(?::TIMESTAMPTZ[]) AS a, "
         "unnest(?::TIMESTAMPTZ[]) AS b) r")
    con.execute(f"DELETE FROM sync_gaps g USING {r} WHERE g.stream = r.s "
                f"AND g.gap_start >= r.a AND g.gap_end <= r.b", ranges)
    con.execute(f"UPDATE sync_gaps g SET gap_end = r.a - INTERVAL 1 MILLISECOND FROM {r} "
                f"WHERE g.stream = r.s AND g.gap_start < r.a AND g.gap_end BETWEEN r.a AND r.b",
                ranges)
    con.execute(f"UPDATE sync_gaps g SET gap_start = r.b + INTERVAL 1 MILLISECOND FROM {r} "
                f"WHERE g.stream = r.s AND g.gap_end > r.b AND g.gap_start BETWEEN r.a AND r.b",
                ranges)


def open_gaps(con, run_id: int | None, kind: str, unproven: dict) -> None:
    """Record ranges no answer has proved yet (merging a range already recorded)."""
    flat = [(k, a, b, why) for k, v in (unproven or {}).items() for a, b, why in _ranges(v)]
    if not flat:
        return
    keys = [x[0] for x in flat]
    rows = [[f"{kind}:{k}" for k in keys], kind, keys, [x[1] for x in flat],
            [x[2] for x in flat], [x[3] for x in flat], run_id, _utcnow()]
    con.execute("DELETE FROM sync_gaps g USING (SELECT unnest(?::VARCHAR[]) s, "
                "unnest(?::TIMESTAMPTZ[]) a, unnest(?::TIMESTAMPTZ[]) b) n "
                "WHERE g.stream = n.s AND g.gap_start >= n.a AND g.gap_end <= n.b",
                [rows[0], rows[3], rows[4]])
    con.execute("INSERT INTO sync_gaps SELECT unnest(?::VARCHAR[]), ?, unnest(?::VARCHAR[]), "
                "unnest(?::TIMESTAMPTZ[]), unnest(?::TIMESTAMPTZ[]), unnest(?::VARCHAR[]), ?, ?",
                rows)


def record_quarantine(con, run_id: int, kind: str, table: pa.Table) -> int:
    """Keep every value that could not be read, raw, with the reason."""
    if table is None or table.num_rows == 0:
        return 0
    con.register("staging_quarantine", table)
    try:
        con.execute("INSERT INTO quarantine SELECT ?, ?, key, ts, ts_text, raw, reason, ? "
                    "FROM staging_quarantine", [run_id, kind, _utcnow()])
    finally:
        con.unregister("staging_quarantine")
    return table.num_rows


def stored_edges(con, kind: str, keys: list[str], start: datetime,
                 reach: timedelta) -> tuple[dict[str, datetime], set[str]]:
    """Per stream, the newest stored point in [start - reach, start], and the streams whose
    committed coverage runs up to ``start`` (what the next answer must continue).  A point
    at ``start`` itself counts: a window that starts on the newest stored point (no
    look-back) continues it."""
    if kind == "readings":
        sql = ("SELECT parameter_uuid::VARCHAR, max(ts) FROM readings WHERE "
               "list_contains(?::UUID[], parameter_uuid) AND ts >= ? AND ts <= ? GROUP BY 1")
    else:
        sql = ("SELECT sensor_uuid::VARCHAR, max(ts) FROM gnss_epochs WHERE "
               "list_contains(?::UUID[], sensor_uuid) AND ts >= ? AND ts <= ? GROUP BY 1")
    before = dict(con.execute(sql, [keys, start - reach, start]).fetchall())
    covered = {r[0] for r in con.execute(
        "SELECT key FROM sync_cursors WHERE kind = ? AND list_contains(?::VARCHAR[], key) "
        "AND covered_until >= ?", [kind, keys, start - timedelta(milliseconds=1)]).fetchall()}
    return before, covered


def proved_spacing_ms(con, kind: str, keys: list[str], before: datetime) -> dict[str, float]:
    """Per stream, the mean spacing (ms) of its points in the newest window proved complete
    that ended before ``before`` (five points at least): the stream's own density, as the
    service answered it whole."""
    streams = [f"{kind}:{k}" for k in keys]
    rows = con.execute("""
        SELECT substr(stream, strpos(stream, ':') + 1),
               (epoch_ms(last_ts) - epoch_ms(first_ts)) / (rows - 1)
        FROM sync_windows
        WHERE list_contains(?::VARCHAR[], stream) AND verdict = 'complete' AND rows >= 5
          AND window_end < ?
        QUALIFY row_number() OVER (PARTITION BY stream ORDER BY window_end DESC) = 1""",
                       [streams, before]).fetchall()
    return {k: float(v) for k, v in rows}


def stored_after(con, kind: str, keys: list[str], end: datetime,
                 reach: timedelta) -> dict[str, datetime]:
    """Per stream, the oldest stored point in (end, end + reach]."""
    table, key = ("readings", "parameter_uuid") if kind == "readings" else \
        ("gnss_epochs", "sensor_uuid")
    return dict(con.execute(
        f"SELECT {key}::VARCHAR, min(ts) FROM {table} WHERE list_contains(?::UUID[], {key}) "
        f"AND ts > ? AND ts <= ? GROUP BY 1", [keys, end, end + reach]).fetchall())


def gaps_to_heal(con) -> list[tuple[str, str, datetime, datetime]]:
    """Every unproved range: (kind, key, from, to), oldest first."""
    return con.execute("SELECT kind, key, gap_start, gap_end FROM sync_gaps "
                       "ORDER BY kind, gap_start, key").fetchall()


def note_newest(con, kind: str, newest: dict[str, datetime]) -> None:
    """Remember each stream's newest point by /latest (what `devmon status` compares with)."""
    _set_cursor_times(con, kind, "newest_seen", newest)


def _set_cursor_times(con, kind: str, column: str, times: dict[str, datetime]) -> None:
    """Set one time column of existing cursor rows, per stream key, in one statement."""
    if not times:
        return
    keys = list(times)
    con.execute(f"UPDATE sync_cursors c SET {column} = n.t FROM (SELECT "
                "unnest(?::VARCHAR[]) k, unnest(?::TIMESTAMPTZ[]) t) n "
                "WHERE c.kind = ? AND c.key = n.k", [keys, [times[k] for k in keys], kind])


def note_history_searched(con, kind: str, searched_to: dict[str, datetime]) -> None:
    """Remember that the search for the start of each stream's history ended: nothing of it
    lies in [searched_to, its oldest point) (the ledger's windows over that range say so).
    Only streams with a committed window are marked: one whose windows were all refused (a
    403) has no cursor row and is searched again when it can be read."""
    _set_cursor_times(con, kind, "history_searched_to", searched_to)


SYNCS_ONLY = "coalesce(json_extract_string(options, '$.verify'), 'false') <> 'true'"
"""SQL: the ``sync_runs`` rows of syncs (``devmon verify`` keeps its runs there too)."""


def note_lateness(con, kind: str, lateness_days: dict[str, float]) -> None:
    """Keep, per stream, the greatest lateness seen (``sync_cursors.lateness_days``)."""
    if not lateness_days:
        return
    keys = list(lateness_days)
    con.execute("UPDATE sync_cursors c SET lateness_days = greatest(coalesce(c.lateness_days, "
                "0), n.d) FROM (SELECT unnest(?::VARCHAR[]) k, unnest(?::DOUBLE[]) d) n "
                "WHERE c.kind = ? AND c.key = n.k",
                [keys, [lateness_days[k] for k in keys], kind])


def lateness_by_device(con) -> dict[str, float]:
    """The greatest lateness seen of any stream of each device (devices with none left out)."""
    return dict(con.execute("""
        SELECT serial, max(c.lateness_days) FROM sync_cursors c JOIN (
            SELECT uuid::VARCHAR AS key, 'readings' AS kind, device_serial_number AS serial
            FROM parameters
            UNION ALL SELECT uuid::VARCHAR, 'gnss', device_serial_number FROM sensors) s
          ON s.key = c.key AND s.kind = c.kind
        WHERE c.lateness_days IS NOT NULL GROUP BY 1""").fetchall())


def note_rolled(con, run_id: int, start: datetime, end: datetime) -> None:
    """Widen the run's step of the rolling re-check to [start, end]."""
    con.execute("UPDATE sync_runs SET rolled_from = least(coalesce(rolled_from, ?), ?), "
                "rolled_to = greatest(coalesce(rolled_to, ?), ?) WHERE run_id = ?",
                [start, start, end, end, run_id])


def rolling_state(con, run_id: int, scope: str | None = None) -> tuple[datetime | None, int]:
    """(where the rolling sweep of the runs of ``scope`` (the run options' ``scope``; None:
    the whole mirror) stands: the start of their last step before ``run_id``, or None; how
    many of them re-checked the settling window since that step).  A scoped run re-checked
    its devices only: the sweep of another scope goes on from its own step."""
    same = "coalesce(json_extract_string(options, '$.scope'), '') = ?"
    key = scope or ""
    row = con.execute(
        f"SELECT run_id, rolled_from FROM sync_runs WHERE rolled_from IS NOT NULL AND "
        f"run_id < ? AND {same} ORDER BY run_id DESC LIMIT 1", [run_id, key]).fetchone()
    last_id, at = row if row else (-1, None)
    since = con.execute(f"SELECT count(*) FROM sync_runs WHERE run_id > ? AND run_id < ? "
                        f"AND recheck_requests > 0 AND {same}",
                        [last_id, run_id, key]).fetchone()[0]
    return at, since


def recheck_lines(con) -> list[str]:
    """What the re-check of the past has covered (for ``devmon status``): the last re-check,
    how far back the rolling sweep stands, devices with a longer settling window."""
    last, runs = con.execute("SELECT max(started_at) FILTER (WHERE recheck_requests > 0), "
                             "count(*) FILTER (WHERE recheck_requests > 0) FROM sync_runs"
                             ).fetchone()
    if not runs:
        return []
    lines = ["", f"Past re-checked (the service's daily counts and sums): by {runs} runs, "
                 f"the last on {last:%Y-%m-%d %H:%M} UTC."]
    step = con.execute("SELECT rolled_from, rolled_to, started_at FROM sync_runs WHERE "
                       "rolled_from IS NOT NULL ORDER BY run_id DESC LIMIT 1").fetchone()
    if step:
        lines.append(f"  Older history: the sweep re-checked {step[0]:%Y-%m-%d} to "
                     f"{step[1]:%Y-%m-%d} on {step[2]:%Y-%m-%d}; it goes back a span a turn, "
                     f"then starts again.")
    late = lateness_by_device(con)
    if late:
        lines.append(f"  {len(late)} devices changed late (up to {max(late.values()):.0f} days "
                     f"after the day): their settling window is longer.")
    return lines


def note_service_start(con, run_id: int, service_now: datetime) -> None:
    """Keep the service's clock at the start of the run's data (``service_started_at``)."""
    con.execute("UPDATE sync_runs SET service_started_at = ? WHERE run_id = ?",
                [service_now, run_id])


def previous_run_start(con, run_id: int) -> datetime | None:
    """When, by the service's clock, the data of the last run before ``run_id`` that made
    requests started (by this machine's, for runs of a devmon that did not keep it)."""
    row = con.execute("SELECT coalesce(service_started_at, started_at) FROM sync_runs WHERE "
                      f"run_id < ? AND coalesce(requests, 0) > 0 AND {SYNCS_ONLY} "
                      "ORDER BY run_id DESC LIMIT 1", [run_id]).fetchone()
    return row[0] if row else None


def proved_starts(con, kind: str, keys: list[str]) -> dict[str, datetime]:
    """Each stream's oldest window proved complete (its start)."""
    return dict(con.execute(
        "SELECT substr(stream, strpos(stream, ':') + 1), min(window_start) FROM sync_windows "
        "WHERE verdict = 'complete' AND list_contains(?::VARCHAR[], stream) GROUP BY 1",
        [[f"{kind}:{k}" for k in keys]]).fetchall())


def first_points(con, kind: str, keys: list[str]) -> dict[str, datetime]:
    """Each stream's oldest point (``stream_stats``, kept by every commit)."""
    return dict(con.execute("SELECT key::VARCHAR, first_ts FROM stream_stats WHERE kind = ? "
                            "AND list_contains(?::UUID[], key) AND first_ts IS NOT NULL",
                            [kind, keys]).fetchall())


def load_profile(con, base_url: str) -> str | None:
    rows = con.execute("SELECT profile FROM service_profiles WHERE base_url = ?",
                       [base_url]).fetchall()
    return rows[0][0] if rows else None


def save_profile(con, base_url: str, text: str) -> None:
    con.execute("INSERT INTO service_profiles VALUES (?, ?, ?) ON CONFLICT (base_url) DO UPDATE "
                "SET profile = excluded.profile, updated_at = excluded.updated_at",
                [base_url, text, _utcnow()])


def coverage_lines(con, limit: int = 20) -> list[str]:
    """What `devmon status` says of proof: unverified ranges per device and parameter,
    streams behind the service's newest point, quarantined values."""
    lines: list[str] = []
    gaps = con.execute("""
        SELECT g.kind, coalesce(p.device_serial_number, s.device_serial_number, '?'),
               coalesce(p.name, CASE WHEN g.kind = 'gnss' THEN 'GNSS epochs' END, g.key),
               strftime(g.gap_start, '%Y-%m-%d %H:%M'), strftime(g.gap_end, '%Y-%m-%d %H:%M'),
               g.reason
        FROM sync_gaps g
        LEFT JOIN parameters p ON g.kind = 'readings' AND p.uuid::VARCHAR = g.key
        LEFT JOIN gnss_solutions s ON g.kind = 'gnss' AND s.sensor_uuid::VARCHAR = g.key
        ORDER BY 2, 3, g.gap_start""").fetchall()
    if gaps:
        streams = len({(k, d, n) for k, d, n, *_ in gaps})
        lines += ["", f"Unverified ranges: {streams} streams have {len(gaps)} unverified ranges "
                      f"(the service may hold data the mirror lacks); run `devmon sync` to "
                      f"fill them:"]
        lines += [f"  {d:14} {fit(n, 30)} {a} to {b} UTC  ({why})"
                  for _, d, n, a, b, why in gaps[:limit]]
        if len(gaps) > limit:
            lines.append(f"  ... and {len(gaps) - limit} more (SELECT * FROM sync_gaps)")
    behind = con.execute("SELECT count(*) FROM sync_cursors WHERE newest_seen IS NOT NULL "
                         "AND (cursor_ts IS NULL OR cursor_ts < newest_seen)").fetchall()[0][0]
    if behind:
        lines += ["", f"Behind the service: {behind} streams end before the newest point the "
                      f"service reported at the last sync; run `devmon sync` to fetch the rest."]
    quarantined = con.execute("SELECT kind, reason, count(*) FROM quarantine GROUP BY ALL "
                              "ORDER BY 3 DESC").fetchall()
    if quarantined:
        total = sum(r[2] for r in quarantined)
        lines += ["", f"Quarantine: {total} values could not be read; they are kept raw in the "
                      f"quarantine table, not in the data:"]
        lines += [f"  {n:6} {kind:8} {reason}" for kind, reason, n in quarantined[:limit]]
    return lines


_LEGACY_EDGES = """
    WITH w AS (
        SELECT rowid AS wid, stream, split_part(stream, ':', 1) AS kind,
               substr(stream, strpos(stream, ':') + 1) AS key, window_start, window_end
        FROM sync_windows WHERE verdict = 'legacy' AND split_part(stream, ':', 1) = ?),
    pts AS (
        SELECT {key}::VARCHAR AS key, ts FROM {table}
        WHERE {key}::VARCHAR IN (SELECT key FROM w)),
    hit AS (
        SELECT w.wid, min(p.ts) AS first_ts, max(p.ts) AS last_ts
        FROM pts p ASOF JOIN w ON p.key = w.key AND p.ts >= w.window_start
        WHERE p.ts <= w.window_end GROUP BY w.wid)
    SELECT w.wid, w.key, w.window_start, w.window_end, h.first_ts, h.last_ts, c.cursor_ts,
           {period} AS period_s,
           w.window_start = min(w.window_start) OVER (PARTITION BY w.key) AS first_window
    FROM w LEFT JOIN hit h USING (wid)
    LEFT JOIN sync_cursors c ON c.stream = w.stream
    {period_join}"""


def audit_legacy(con, run_id: int) -> int:
    """Windows committed by a devmon without completeness checks (schema < 4) are judged
    from what the mirror holds: a window whose stored points reach both its edges (within
    1.5 sampling periods; its newest point exactly when it ended on the cursor) counts as
    proved, any other edge becomes an unverified range for the next sync to fetch.  Returns
    the ranges opened."""
    opened = 0
    for kind, table, key, period, join in (
            ("readings", "readings", "parameter_uuid", "d.sampling_period_s",
             "LEFT JOIN parameters pa ON pa.uuid::VARCHAR = w.key "
             "LEFT JOIN devices d ON d.serial_number = pa.device_serial_number"),
            ("gnss", "gnss_epochs", "sensor_uuid", "coalesce(d.sampling_period_s, 3600)",
             "LEFT JOIN gnss_solutions g ON g.sensor_uuid::VARCHAR = w.key "
             "LEFT JOIN devices d ON d.serial_number = g.device_serial_number")):
        rows = con.execute(_LEGACY_EDGES.format(key=key, table=table, period=period,
                                                period_join=join), [kind]).fetchall()
        gaps: dict[str, tuple[datetime, datetime, str]] = {}
        unproved: list[int] = []
        for wid, k, start, end, first, last, cursor, period_s, first_window in rows:
            if cursor is not None and cursor < end:  # an older cursor is the newest point
                end = max(start, cursor)  # planned: nothing was due after it
            gap = _legacy_gap(start, end, first, last, cursor, period_s, first_window)
            if gap is not None:
                unproved.append(wid)
                a, b = gaps.get(k, gap)[:2]
                gaps[k] = (min(a, gap[0]), max(b, gap[1]), gap[2])
        open_gaps(con, run_id, kind, gaps)
        opened += len(gaps)
        con.execute("UPDATE sync_windows SET verdict = CASE WHEN list_contains(?::BIGINT[], "
                    "rowid) THEN 'unverified' ELSE 'complete' END, reason = CASE WHEN "
                    "list_contains(?::BIGINT[], rowid) THEN 'synced by an older devmon; its "
                    "stored data does not reach its edges' END WHERE verdict = 'legacy' AND "
                    "split_part(stream, ':', 1) = ?", [unproved, unproved, kind])
    return opened


def _legacy_gap(start, end, first, last, cursor, period_s, first_window):
    """The unproved part of one legacy window, or None when its stored data proves it."""
    slack = timedelta(seconds=1.5 * (period_s or 86400.0))
    why = "synced by an older devmon without completeness checks; not provable from the mirror"
    if first is None:
        return start, end, why
    if cursor is not None and end == cursor and last < end:
        return last + _MS, end, why
    if last < end - slack:
        return last + _MS, end, why
    if first > start + slack and not first_window:
        return start, first - _MS, why
    return None
