"""Placing a site plan's scale key and labels when the plan is drawn (``PlanLayout``,
an artist of ``analysis.plan_figure``'s plan), for the canvas and size it is drawn at: the
report's page, the GUI's pane after a resize or a zoom.

A label is tried at 8 directions x 5 distances around its point, every place scored at once
(numpy over places x obstacles: ``_Scene``); where its full name does not fit, its short
form (the point number, or ``distinctive_ends``) is tried.  The 1-2-5 values of the plan's
scale live here too (``nice``, ``nice_near``), since the key is sized at draw time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from matplotlib.artist import Artist, allow_rasterization
from matplotlib.text import Text
from matplotlib.transforms import Bbox

PLAN_KEY_MAX = 0.2  # the scale key's arrow at most this fraction of the axes width


def distinctive_ends(names: Sequence[str]) -> list[str]:
    """The shortest end of each name (whole words) that no other of ``names`` ends with, at
    least two words when the last is a bare number ("rover 123", not "123"): a crowded
    plan's label where the full name does not fit and the point has no number."""
    words = [n.split() for n in names]
    out = []
    for own in words:
        for k in range(1, len(own) + 1):
            end = own[-k:]
            if k == 1 and end[0].isdigit() and len(own) > 1:
                continue
            if sum(w[-k:] == end for w in words) == 1:
                break
        out.append(" ".join(own[-k:]) if own else "")
    return out


def nice(value: float) -> float:
    """The largest of 1, 2, 5 x 10^n not above ``value`` (positive)."""
    exp = math.floor(math.log10(value))
    for m in (5.0, 2.0, 1.0):
        if m * 10.0 ** exp <= value * (1 + 1e-9):
            return m * 10.0 ** exp
    return 10.0 ** exp


def nice_near(value: float, most: float) -> float:
    """The 1, 2, 5 x 10^n nearest ``value`` (by ratio) not above ``most`` (positive)."""
    down = nice(max(min(value, most), 1e-9))
    up = nice(2.5 * down * (1 + 1e-9))  # the next 1-2-5 value above ``down``
    return up if up <= most * (1 + 1e-9) and up / value < value / down else down


class PlanLayout(Artist):
    """Draws nothing; drawn first in the plan's axes (when the layout, the figure's size and
    the view are final, on whatever canvas: Agg, PDF or the GUI's Qt canvas, after a resize
    or a zoom) it sizes and places the scale key and places the labels.

    The key: the 1-2-5 value nearest ``auto_mm`` (the plan's reference displacement) whose
    arrow is at most ``PLAN_KEY_MAX`` of the axes width (a given ``scale_mm``, auto_mm None,
    is kept), its right end at 96 % of the width.  The labels, in turn (the most
    crowded points first, then the notes of shortened arrows): the first of 8 directions x
    5 distances around the anchor that overlaps no label placed before, stays in the axes
    and clear of the points, arrows, scale key and north arrow (the side away from the
    point's arrow first, the nearest ring first; ellipses, half transparent, count little).
    A label further than the first ring gets a leader line to its anchor.

    A label must name its own point: a person reads a label as the nearest point's, so a
    place where another point is less than ``LINK_RATIO`` times as far from the label as
    its own point is taken only with a leader line (at the outer rings, which have one), or,
    when nothing better is free, gets a leader line where it is (issue 30: at the GUI's pane
    size "Illgraben GNSS outliers 06" ended beside another rover's red dot, without one)."""

    RINGS_PT = (5.0, 12.0, 22.0, 35.0, 52.0)
    MARKER_PT = 5.0  # a point's marker (7 pt) with its white edge, plus a gap
    LEADER_RING = 2  # labels placed on this ring or further out get a leader line
    LINK_RATIO = 2.5  # another point nearer than this times its own: ambiguous

    def __init__(self, key, labels, points, arrows, ellipses, north, auto_mm, m_per_mm):
        super().__init__()
        self.set_zorder(-10)
        self.set_in_layout(False)
        self.key, self.labels, self.north = key, labels, north
        self.points, self.arrows, self.ellipses = points, arrows, ellipses
        self.auto_mm, self.m_per_mm = auto_mm, m_per_mm

    @allow_rasterization
    def draw(self, renderer):
        if self.get_visible():
            self._place_key()
            self._place_labels(renderer)
        self.stale = False

    def _place_key(self) -> None:
        ax, key = self.axes, self.key
        width = abs(ax.viewLim.width)
        if self.auto_mm is not None and width > 0:
            value = nice_near(self.auto_mm, PLAN_KEY_MAX * width / self.m_per_mm)
            if value != key.U:
                key.U = value
                key.text.set_text(f"{value:g} mm")
        frac = key.U * self.m_per_mm / width if width > 0 else 0.0
        key.X = max(0.96 - frac / 2, 0.5 * frac + 0.02) if frac < 0.92 else 0.5

    def _place_labels(self, renderer) -> None:
        ax = self.axes
        px = renderer.points_to_pixels(1.0)
        to_px = ax.transData.transform
        points = to_px(self.points) if len(self.points) else np.zeros((0, 2))
        scene = _Scene(
            frame=np.array(ax.bbox.extents),
            hard=np.array([self._key_box(renderer).extents,
                           self.north.get_window_extent(renderer).padded(2 * px).extents]),
            soft=np.array([e.get_window_extent(renderer).extents for e in self.ellipses]
                          ).reshape(-1, 4),
            arrows=np.array([np.concatenate([to_px(a), to_px(b)]) for a, b in self.arrows]
                            ).reshape(-1, 4),
            marker=self.MARKER_PT * px, pad=1.5 * px)
        crowd = [int(np.sum(np.hypot(*(points - p).T) < 80 * px)) for p in points]
        order = sorted(range(len(self.labels)), key=lambda i: (
            self.labels[i][3] >= len(crowd),  # the points' labels first
            -crowd[self.labels[i][3]] if self.labels[i][3] < len(crowd) else 0, i))
        for i in order:
            text, anchor_xy, away, own, leader, wordings = self.labels[i]
            anchor = to_px(anchor_xy)
            # the other points: a label must keep clear of them, and of its own marker only
            # by its ring (a note, about an arrow, names no point and keeps clear of all)
            others = np.delete(points, own, axis=0) if leader is not None else points
            rivals = others if leader is not None else np.zeros((0, 2))
            candidates = _candidates(self.RINGS_PT, away) * [px, px, 1, 1]
            best = None
            for words in wordings:  # the full label, then its short form where it fits
                if best is not None and best[0] < _Scene.ON_ARROW:
                    break
                text.set_text(words)
                w, h = _text_size(text, renderer)
                place = scene.best(anchor, candidates, w, h, others, rivals,
                                   self.LINK_RATIO, self.LEADER_RING)
                if best is None or place[0] < best[0]:
                    best = (*place, words)
            _, k, box, ambiguous, words = best
            dx, dy, ring, _ = candidates[k]
            text.set_text(words)
            text.xyann = (dx / px, dy / px)
            text.set_horizontalalignment(_ALIGN_X[int(np.sign(np.round(dx, 6)))])
            text.set_verticalalignment(_ALIGN_Y[int(np.sign(np.round(dy, 6)))])
            scene.placed.append(box)
            if leader is not None:
                joined = ring >= self.LEADER_RING or ambiguous
                leader.set_visible(joined)
                if joined:
                    end = _nearest_on_box(Bbox.from_extents(*box), anchor)
                    start = anchor + (end - anchor) * min(1.0, scene.marker / max(
                        float(np.hypot(*(end - anchor))), 1e-9))
                    leader.set_data(*ax.transData.inverted().transform([start, end]).T)

    def _key_box(self, renderer) -> Bbox:
        ax, key = self.axes, self.key
        frac = key.U * self.m_per_mm / abs(ax.viewLim.width)
        x0, y0 = ax.transAxes.transform((key.X - frac / 2, key.Y))
        x1, _ = ax.transAxes.transform((key.X + frac / 2, key.Y))
        w, h, _ = renderer.get_text_width_height_descent(
            key.text.get_text(), key.text.get_fontproperties(), ismath=False)
        pad = renderer.points_to_pixels(4.0)
        top = y0 + key.labelsep + h
        return Bbox([[min(x0, (x0 + x1 - w) / 2) - pad, y0 - pad],
                     [max(x1, (x0 + x1 + w) / 2) + pad, top + pad]])


_ALIGN_X = {1: "left", 0: "center", -1: "right"}  # by the sign of a label's x offset
_ALIGN_Y = {1: "bottom", 0: "center", -1: "top"}


def _candidates(rings_pt: Sequence[float], away: np.ndarray | None) -> np.ndarray:
    """The places tried for a label, nearest ring first: rows (dx_pt, dy_pt, ring, turn),
    8 directions per ring, the one nearest ``away`` (a display direction) first, then by
    their angle from it (up-right first without one)."""
    angles = np.radians([45, 0, 90, 135, 180, 225, 270, 315])
    if away is not None and np.all(np.isfinite(away)) and np.any(away):
        off = np.abs(np.remainder(angles - math.atan2(away[1], away[0]) + np.pi, 2 * np.pi)
                     - np.pi)
        angles = angles[np.argsort(np.round(off, 6), kind="stable")]
    unit = np.round(np.column_stack([np.cos(angles), np.sin(angles)]), 12)
    return np.vstack([np.column_stack([unit * r, np.full(8, ring), np.arange(8)])
                      for ring, r in enumerate(rings_pt)])


def _text_size(text: Text, renderer) -> tuple[float, float]:
    """Width and height (display units) of ``text`` as drawn: the same at any offset and
    alignment, so one measure serves every place tried."""
    box = Text.get_window_extent(text, renderer)
    return box.width, box.height


@dataclass
class _Scene:
    """What a plan's labels must keep clear of (display units; boxes as x0, y0, x1, y1
    rows) and the labels placed so far.  ``best`` scores every place tried for one label at
    once (numpy over places x obstacles: the GUI lays its plan out again on each zoom)."""

    frame: np.ndarray
    hard: np.ndarray  # the scale key and the north arrow
    soft: np.ndarray  # the error ellipses (half transparent: they count little)
    arrows: np.ndarray  # x0, y0, x1, y1 of each displacement arrow
    marker: float
    pad: float
    placed: list = field(default_factory=list)

    OFF_AXES = 2e6  # worse than touching one label: a label off the axes is cut or astray
    ON_LABEL = 1e6
    ON_POINT = 1e5  # hides a point, and reads as its label
    ON_KEY = 1e4
    ON_ARROW = 1e3

    def best(self, anchor: np.ndarray, candidates: np.ndarray, w: float, h: float,
             others: np.ndarray, rivals: np.ndarray, link_ratio: float,
             leader_ring: int) -> tuple[float, int, np.ndarray, bool]:
        """(cost, index into ``candidates``, box, ambiguous) of the best place for a ``w`` x
        ``h`` label of ``anchor``: the nearest ring holding a place that costs less than
        touching an arrow, else the cheapest place anywhere.  ``candidates``: rows (dx, dy,
        ring, turn), offsets in display units."""
        dx, dy, ring, turn = candidates.T
        x0 = anchor[0] + dx - w * (1 - np.sign(np.round(dx, 6))) / 2
        y0 = anchor[1] + dy - h * (1 - np.sign(np.round(dy, 6))) / 2
        boxes = np.column_stack([x0, y0, x0 + w, y0 + h])
        room = boxes + [-self.pad, -self.pad, self.pad, self.pad]
        f = self.frame
        inside = ((boxes[:, 0] >= f[0]) & (boxes[:, 1] >= f[1]) & (boxes[:, 2] <= f[2])
                  & (boxes[:, 3] <= f[3]))
        cost = (self.OFF_AXES * ~inside
                + self.ON_LABEL * _overlaps(room, np.reshape(self.placed, (-1, 4)))
                + self.ON_KEY * _overlaps(room, self.hard)
                + self.ON_POINT * _near(room, others, self.marker)
                + self.ON_ARROW * _crosses(room, self.arrows)
                + 30 * _overlaps(room, self.soft))
        # read as another point's label: a rival less than link_ratio times as far from
        # the label as its own point; without a leader as bad as covering a point
        ambiguous = (_gaps(boxes, rivals).min(axis=1, initial=np.inf)
                     < link_ratio * _gaps(boxes, anchor[None, :])[:, 0])
        cost += np.where(ring < leader_ring, 2e3, 50) * ambiguous + 10 * ring + turn
        good = np.flatnonzero(cost < self.ON_ARROW)
        k = int(good[np.argmin(ring[good] * 1e9 + cost[good])] if good.size
                else np.argmin(cost))
        return float(cost[k]), k, boxes[k], bool(ambiguous[k])


def _overlaps(boxes: np.ndarray, others: np.ndarray) -> np.ndarray:
    """How many of ``others`` each of ``boxes`` overlaps (rows x0, y0, x1, y1)."""
    b, o = boxes[:, None, :], others[None, :, :]
    return np.sum((b[..., 0] <= o[..., 2]) & (o[..., 0] <= b[..., 2])
                  & (b[..., 1] <= o[..., 3]) & (o[..., 1] <= b[..., 3]), axis=1)


def _near(boxes: np.ndarray, points: np.ndarray, r: float) -> np.ndarray:
    """How many ``points`` lie within ``r`` of each box."""
    x, y = points[None, :, 0], points[None, :, 1]
    b = boxes[:, None, :]
    return np.sum((b[..., 0] - r < x) & (x < b[..., 2] + r)
                  & (b[..., 1] - r < y) & (y < b[..., 3] + r), axis=1)


def _gaps(boxes: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Distances (boxes x points) from each box's nearest edge to each point (0 inside)."""
    x, y = points[None, :, 0], points[None, :, 1]
    b = boxes[:, None, :]
    return np.hypot(np.maximum(np.maximum(b[..., 0] - x, 0.0), x - b[..., 2]),
                    np.maximum(np.maximum(b[..., 1] - y, 0.0), y - b[..., 3]))


def _crosses(boxes: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """How many ``segments`` (rows x0, y0, x1, y1) pass through each box (Liang-Barsky
    clipping, boxes x segments at once)."""
    a, d = segments[None, :, :2], segments[None, :, 2:] - segments[None, :, :2]
    b = boxes[:, None, :]
    t0 = np.zeros(b.shape[:1] + segments.shape[:1])
    t1 = np.ones_like(t0)
    hit = np.ones_like(t0, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, q in ((-d[..., 0], a[..., 0] - b[..., 0]), (d[..., 0], b[..., 2] - a[..., 0]),
                     (-d[..., 1], a[..., 1] - b[..., 1]), (d[..., 1], b[..., 3] - a[..., 1])):
            p = np.broadcast_to(p, t0.shape)
            t = q / p
            hit &= (p != 0) | (q >= 0)
            t0 = np.where(p < 0, np.maximum(t0, t), t0)
            t1 = np.where(p > 0, np.minimum(t1, t), t1)
    return np.sum(hit & (t0 <= t1), axis=1)


def _nearest_on_box(box: Bbox, p: np.ndarray) -> np.ndarray:
    return np.array([min(max(p[0], box.x0), box.x1), min(max(p[1], box.y0), box.y1)])
