"""A time-indexed transform buffer: the part of tf2's ``Buffer`` the nav and perception nodes need.

ROS-free (the ROS adapter is :mod:`affectsim_core.ros.tf_tree`). Frames form a tree; each edge
(child frame -> its parent) is either **static** (``/tf_static``: one transform per child frame,
kept whatever publisher sent it, for ever) or **dynamic** (``/tf``: a history of stamped
transforms, :data:`HISTORY_S` long). A lookup gives the pose of a source frame in a target frame at
a time ``t`` (seconds, the stamps' clock), composing every edge on the path at that time:

- between two stamps of an edge: translation interpolated linearly, rotation by slerp; at a stored
  stamp (within :data:`SAME_STAMP_S`) the stored transform itself, unchanged (lockstep runs stay
  bit-identical);
- after an edge's newest stamp: that transform held for at most ``extrapolation`` s (a localiser
  at a few Hz, AMCL's ``map -> odom`` between its updates), never beyond; before its oldest stamp:
  never (the data is gone or not yet there);
- a lookup may wait (``timeout``) until every edge has data at or after ``t``, as tf2's
  ``lookup_transform(..., timeout)`` does.

Time going backwards (a new simulated episode, a ``/clock`` reset, a bag replayed again), seen as a
stamp older than its edge's newest (one publisher's transforms of one edge arrive in order), clears
the dynamic history, as tf2 does on a time jump; so does :meth:`TfBuffer.clear`. A stamp more than ``future_tolerance`` s after the caller's ``now``
is refused (a clock or a publisher gone wrong must not occupy the history). Errors name the broken
edge and the time range the buffer holds for it.
"""

from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass, field

import numpy as np

from affectsim_core.geometry import Transform, matrix_to_quat, quat_to_matrix

HISTORY_S = 10.0  # s of /tf history kept per edge (tf2's default cache time)
MAX_EDGE_ENTRIES = 2_000  # per edge: 10 s at 200 Hz; older entries go first
MAX_FRAMES = 1_000  # frames the buffer accepts; a transform naming a further new frame is refused
EXTRAPOLATION_S = 0.2  # s an edge's newest transform is held after its stamp (a 10 Hz localiser, latency)
FUTURE_TOLERANCE_S = 2.0  # s a stamp may lie after the caller's "now" (AMCL future-dates by its tolerance, 1 s)
SAME_STAMP_S = 1e-9  # s: stamps this close are the same stamp


class TransformError(LookupError):
    """No transform for a lookup: names the broken edge and the time range the buffer holds."""


def slerp(q0: np.ndarray, q1: np.ndarray, s: float) -> np.ndarray:
    """Spherical linear interpolation of unit quaternions (w, x, y, z) at fraction ``s`` in [0, 1]."""
    d = float(np.dot(q0, q1))
    if d < 0.0:  # the shorter way round
        q1, d = -q1, -d
    if d > 0.9995:  # nearly equal: linear, then normalised
        q = q0 + s * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = math.acos(min(1.0, d))
    return (math.sin((1.0 - s) * theta) * q0 + math.sin(s * theta) * q1) / math.sin(theta)


def interpolate(a: Transform, b: Transform, s: float) -> Transform:
    """The transform at fraction ``s`` from ``a`` to ``b`` (translation linear, rotation slerp)."""
    q = slerp(matrix_to_quat(a.rotation), matrix_to_quat(b.rotation), s)
    return Transform(quat_to_matrix(q), a.translation + s * (b.translation - a.translation))


@dataclass
class _Edge:
    parent: str
    static: bool
    stamps: list[float] = field(default_factory=list)  # ascending; one entry for a static edge
    transforms: list[Transform] = field(default_factory=list)  # parent <- child at each stamp

    def span(self) -> str:
        if self.static:
            return "static"
        return f"[{self.stamps[0]:.3f}, {self.stamps[-1]:.3f}] s" if self.stamps else "nothing"


class TfBuffer:
    """Thread-safe transform buffer (module docstring). ``extrapolation`` (s): how long an edge's
    newest transform is held after its stamp; ``future_tolerance`` (s): how far after ``now`` a
    stamp may lie; ``history`` (s): the dynamic history kept per edge."""

    def __init__(self, history: float = HISTORY_S, extrapolation: float = EXTRAPOLATION_S,
                 future_tolerance: float = FUTURE_TOLERANCE_S) -> None:
        for name, v in (("history", history), ("extrapolation", extrapolation), ("future_tolerance", future_tolerance)):
            if not (math.isfinite(v) and v >= 0.0):
                raise ValueError(f"{name}={v!r} is invalid; expected a finite number of seconds >= 0")
        self.history, self.extrapolation, self.future_tolerance = history, extrapolation, future_tolerance
        self._edges: dict[str, _Edge] = {}
        self._cv = threading.Condition()
        self.cleared = 0  # times time went backwards and the dynamic history was cleared
        self.refused = 0  # transforms refused (future stamp, non-finite values, a cycle, too many frames)
        self.last_refusal = ""

    # ------------------------------------------------------------------ input
    def set_transform(self, parent: str, child: str, stamp: float, tf: Transform, static: bool = False,
                      now: float | None = None) -> bool:
        """Store ``parent <- child`` at ``stamp`` (s). Returns False, with :attr:`last_refusal` saying
        why, for a stamp beyond ``now + future_tolerance``, non-finite values, an edge that would close
        a cycle or change a static edge to a dynamic one, or a frame beyond :data:`MAX_FRAMES`."""
        with self._cv:
            why = self._refusal(parent, child, stamp, tf, static, now)
            if why:
                self.refused += 1
                self.last_refusal = why
                return False
            edge = self._edges.get(child)
            if edge is None or edge.parent != parent or edge.static != static:
                edge = self._edges[child] = _Edge(parent, static)
            if static:
                edge.stamps, edge.transforms = [stamp], [tf]
            else:
                self._insert(edge, stamp, tf)
            self._cv.notify_all()
            return True

    def _refusal(self, parent: str, child: str, stamp: float, tf: Transform, static: bool, now: float | None) -> str:
        edge = f"{parent} -> {child}"
        if not parent or not child or parent == child:
            return f"transform {edge!r}: a parent and a different child frame are required"
        if not (math.isfinite(stamp) and np.isfinite(tf.rotation).all() and np.isfinite(tf.translation).all()):
            return f"transform {edge}: non-finite stamp or values"
        if not static and now is not None and stamp > now + self.future_tolerance:
            return (f"transform {edge} stamped {stamp:.3f} s, {stamp - now:.3f} s after now ({now:.3f} s): beyond the "
                    f"future tolerance of {self.future_tolerance:.2f} s")
        known = self._edges.get(child)
        if known is not None and known.static and not static:
            return f"transform {edge} on /tf: {child!r} is a static frame (of {known.parent!r})"
        if known is None and len(self._edges) >= MAX_FRAMES:
            return f"transform {edge}: the buffer holds {MAX_FRAMES} frames already"
        frame, seen = parent, {child}
        while frame in self._edges:  # the new edge must not close a cycle
            if frame in seen:
                break
            seen.add(frame)
            frame = self._edges[frame].parent
            if frame == child:
                return f"transform {edge} would close a cycle through {child!r}"
        return ""

    def _insert(self, edge: _Edge, stamp: float, tf: Transform) -> None:
        if edge.stamps and stamp < edge.stamps[-1] - SAME_STAMP_S:  # time went backwards: a new time line
            self._clear_dynamic()  # (this edge too: the stamp starts its new history)
        i = bisect.bisect_left(edge.stamps, stamp - SAME_STAMP_S)
        if i < len(edge.stamps) and abs(edge.stamps[i] - stamp) <= SAME_STAMP_S:
            edge.transforms[i] = tf  # the same stamp again: the newer message wins
        else:
            edge.stamps.insert(i, stamp)
            edge.transforms.insert(i, tf)
        cut = bisect.bisect_left(edge.stamps, edge.stamps[-1] - self.history)
        cut = max(cut, len(edge.stamps) - MAX_EDGE_ENTRIES)
        if cut > 0:
            del edge.stamps[:cut], edge.transforms[:cut]

    def _clear_dynamic(self) -> None:
        for e in self._edges.values():
            if not e.static:
                e.stamps.clear()
                e.transforms.clear()
        self.cleared += 1

    def clear(self) -> None:
        """Forget every dynamic transform (static ones stay), e.g. when the clock jumps back."""
        with self._cv:
            self._clear_dynamic()

    # ------------------------------------------------------------------ queries
    def frames(self) -> dict[str, str]:
        """child frame -> parent frame, for every edge known."""
        with self._cv:
            return {c: e.parent for c, e in self._edges.items()}

    def lookup(self, target: str, source: str, t: float, timeout: float = 0.0) -> Transform:
        """Pose of ``source`` in ``target`` at time ``t`` (``p_target = T @ p_source``); waits up to
        ``timeout`` s (wall clock) for data at or after ``t`` on every edge of the path, then uses what
        the buffer holds (extrapolation limits apply). Raises :class:`TransformError`."""
        with self._cv:
            self._cv.wait_for(lambda: self._ready(target, source, t), max(0.0, timeout))
            up_src, up_tgt = self._chain(source), self._chain(target)
            common = self._common(target, source, up_src, up_tgt)
            src = Transform.identity()
            for c in up_src[:up_src.index(common)]:
                src = self._at(c, t).compose(src)
            if common == target:
                return src
            tgt = Transform.identity()
            for c in up_tgt[:up_tgt.index(common)]:
                tgt = self._at(c, t).compose(tgt)
            return tgt.inverse().compose(src)

    def can_transform(self, target: str, source: str, t: float) -> bool:
        """Whether every edge between the frames holds data at or after ``t`` (no extrapolation needed)."""
        with self._cv:
            return self._ready(target, source, t)

    def _ready(self, target: str, source: str, t: float) -> bool:
        up_src, up_tgt = self._chain(source), self._chain(target)
        try:
            common = self._common(target, source, up_src, up_tgt)
        except TransformError:
            return False
        path = up_src[:up_src.index(common)] + up_tgt[:up_tgt.index(common)]
        return all(self._edges[c].static or (bool(self._edges[c].stamps) and self._edges[c].stamps[-1] >= t
                                             - SAME_STAMP_S) for c in path)

    def _chain(self, frame: str) -> list[str]:
        """``frame`` and its ancestors up to the root, in order."""
        out = [frame]
        while out[-1] in self._edges and len(out) <= len(self._edges) + 1:
            out.append(self._edges[out[-1]].parent)
        return out

    def _common(self, target: str, source: str, up_src: list[str], up_tgt: list[str]) -> str:
        """The nearest frame both chains reach; TransformError naming where they break if none."""
        tgt = set(up_tgt)
        common = next((f for f in up_src if f in tgt), None)
        if common is not None:
            return common
        known = ", ".join(sorted(self._edges)) or "none"
        raise TransformError(f"no TF path from {source!r} to {target!r}: broken at {up_src[-1]!r} ({source!r} reaches "
                             f"{up_src[-1]!r} and {target!r} reaches {up_tgt[-1]!r}, and no transform names "
                             f"{up_src[-1]!r} as a child frame; child frames known: {known})")

    def _at(self, child: str, t: float) -> Transform:
        """The edge ``parent <- child`` at ``t`` (module docstring)."""
        e = self._edges[child]
        if e.static:
            return e.transforms[0]
        s = e.stamps
        name = f"{e.parent} -> {child}"
        if not s:
            raise TransformError(f"no transform {name} at t={t:.3f} s: the buffer holds nothing for this edge yet")
        i = bisect.bisect_left(s, t - SAME_STAMP_S)
        if i < len(s) and abs(s[i] - t) <= SAME_STAMP_S:
            return e.transforms[i]
        if i == len(s):  # after the newest
            if t - s[-1] <= self.extrapolation + SAME_STAMP_S:
                return e.transforms[-1]
            raise TransformError(f"no transform {name} at t={t:.3f} s: the buffer holds {e.span()}, {t - s[-1]:.3f} s "
                                 f"past its newest (extrapolation limit {self.extrapolation:.2f} s)")
        if i == 0:
            raise TransformError(f"no transform {name} at t={t:.3f} s: the buffer holds {e.span()}, {s[0] - t:.3f} s "
                                 "before its oldest")
        s0, s1 = s[i - 1], s[i]
        return interpolate(e.transforms[i - 1], e.transforms[i], (t - s0) / (s1 - s0))
