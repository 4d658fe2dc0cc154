"""Continuous affect (valence, arousal, dominance) and emotion segments, ROS-free.

VAD: three numbers in [-1, 1] per frame (valence: unpleasant .. pleasant, arousal: calm .. excited,
dominance: submissive .. in control). The five classes' positions, :data:`VAD_PROTOTYPES`, are the
pleasure-arousal-dominance ratings of Russell & Mehrabian (1977, J. Research in Personality 11:
273-294; the same values are ALMA's for anger and fear, Gebhard 2005), neutral at the origin. A
motion's own VAD (:func:`motion_vad`) moves the prototype by how the performance is performed
(docs/affect.md gives the sources):

- strength: the prototype is scaled by the expression's strength (performer expressiveness x
  intensity, at most 1): a faint performance lies nearer neutral;
- arousal is 30 % prototype, 70 % movement energy (speed, tempo and gesture size relative to the
  performer's own neutral): perceived arousal follows movement speed (Pollick et al. 2001,
  Cognition 82: B51-B61; Roether et al. 2009);
- dominance is 30 % prototype, 70 % posture expansion (expansive vs contracted arms and trunk:
  Tiedens & Fragale 2003, J. Personality and Social Psychology 84: 558-568);
- valence is the scaled prototype (no kinematic measure predicts it reliably: Pollick et al.).

Segments: an emotion held over an interval of clip time ``[start, end)`` (s). A clip's segments
cover it without gaps; in an evolving clip consecutive segments differ and meet at the middle of
the transition between their styles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS

VAD_DIMENSIONS: tuple[str, ...] = ("valence", "arousal", "dominance")
VAD_PROTOTYPES: dict[str, tuple[float, float, float]] = {
    "angry": (-0.51, 0.59, 0.25),
    "fearful": (-0.64, 0.60, -0.43),
    "happy": (0.81, 0.51, 0.46),
    "neutral": (0.0, 0.0, 0.0),
    "sad": (-0.63, -0.27, -0.33),
}
KINEMATIC_SHARE = 0.7  # of arousal (movement energy) and dominance (posture expansion)
KINEMATIC_GAIN = 2.0  # tanh(gain * log-ratio): a 1.5x faster performance moves arousal by about +0.36


def prototype(emotion: str) -> np.ndarray:
    """The class's VAD position (3,)."""
    if emotion not in VAD_PROTOTYPES:
        raise InvalidInput("emotion", emotion, f"one of {EMOTIONS}")
    return np.array(VAD_PROTOTYPES[emotion], float)


def motion_vad(emotion: str, strength: float, energy: float, expansion: float) -> np.ndarray:
    """VAD (3,) of a performance: ``strength`` of the expression (>= 0, capped at 1), ``energy`` the
    mean log-ratio of speed, tempo and gesture size over the performer's neutral, ``expansion`` the
    change of arm and trunk expansion from the performer's neutral (the generator's ``expand``)."""
    for name, v in (("strength", strength), ("energy", energy), ("expansion", expansion)):
        if not math.isfinite(v):
            raise InvalidInput(name, v, "a finite number")
    s = min(1.0, max(0.0, strength))
    v, a, d = s * prototype(emotion)
    k = KINEMATIC_SHARE
    a = (1 - k) * a + k * math.tanh(KINEMATIC_GAIN * energy)
    d = (1 - k) * d + k * math.tanh(KINEMATIC_GAIN * expansion)
    return np.clip([v, a, d], -1.0, 1.0)


def check_vad(vad: Any, frames: int, where: str = "") -> np.ndarray:
    """``vad`` as a (frames, 3) float array in [-1, 1]; anything else raises naming what it got."""
    arr = np.asarray(vad, float) if isinstance(vad, (list, tuple, np.ndarray)) else None
    if arr is None or arr.shape != (frames, 3):
        raise InvalidInput("vad", getattr(arr, "shape", type(vad).__name__), f"shape ({frames}, 3)", where=where)
    if not np.isfinite(arr).all() or np.abs(arr).max(initial=0) > 1.0 + 1e-6:
        raise InvalidInput("vad", f"range [{np.nanmin(arr):.3f}, {np.nanmax(arr):.3f}]", "finite values in [-1, 1]",
                           where=where)
    return arr


@dataclass(frozen=True)
class Segment:
    """One emotion over ``[start, end)`` s of clip (or episode) time."""

    start: float
    end: float
    emotion: str

    @property
    def duration(self) -> float:
        return self.end - self.start

    def to_list(self) -> list:
        return [round(self.start, 4), round(self.end, 4), self.emotion]


def parse_segments(raw: Any, duration: float | None = None, where: str = "segments") -> tuple[Segment, ...]:
    """Segments from ``[[start, end, emotion], ...]``, checked: ordered, contiguous, emotions valid,
    consecutive emotions different, covering ``[0, duration]`` when ``duration`` is given."""
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InvalidInput("segments", raw, "a non-empty list of [start, end, emotion]", where=where)
    out = []
    for i, s in enumerate(raw):
        ok = isinstance(s, (list, tuple)) and len(s) == 3 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in s[:2])
        if not ok or s[2] not in EMOTIONS or not s[0] < s[1]:
            raise InvalidInput(f"segments[{i}]", s, f"[start, end, emotion] with start < end (s) and an emotion "
                               f"of {EMOTIONS}", where=where)
        if out and (abs(out[-1].end - s[0]) > 1e-3 or out[-1].emotion == s[2]):
            raise InvalidInput(f"segments[{i}]", s, f"to start where segment {i - 1} ends ({out[-1].end}) with "
                               "another emotion", where=where)
        out.append(Segment(float(s[0]), float(s[1]), str(s[2])))
    if duration is not None and (abs(out[0].start) > 1e-3 or abs(out[-1].end - duration) > 1e-3):
        raise InvalidInput("segments", [out[0].start, out[-1].end], f"to cover [0, {duration:.4f}] s", where=where)
    return tuple(out)


def label_at(segments: Sequence[Segment], t: float | np.ndarray) -> np.ndarray:
    """Class index (0..4) at time(s) ``t``: the segment containing it; before the first segment its
    emotion, after the last the last one's (a clip holds its final state)."""
    t = np.atleast_1d(np.asarray(t, float))
    starts = np.array([s.start for s in segments[1:]])
    k = np.searchsorted(starts, t, side="right")
    return np.array([EMOTIONS.index(segments[i].emotion) for i in k], int)


def clip_segments(segments: Sequence[Segment], start: float, end: float) -> tuple[Segment, ...]:
    """The segments restricted to ``[start, end)`` (what an observer of that interval could see);
    the first and last are extended to the interval's ends (a clip holds its states)."""
    if not end > start:
        raise InvalidInput("interval", [start, end], "start < end (s)")
    out = []
    for i, s in enumerate(segments):
        lo = start if i == 0 else s.start
        hi = end if i == len(segments) - 1 else s.end
        lo, hi = max(lo, start), min(hi, end)
        if hi > lo:
            out.append(Segment(lo, hi, s.emotion))
    return tuple(out)


def segments_from_windows(times: Sequence[float], labels: Sequence[int | None], start: float, end: float,
                          min_duration: float = 0.0) -> tuple[Segment, ...]:
    """Predicted segments from one label per window centre ``times`` (s, increasing) over the observed
    interval ``[start, end)``: runs of equal labels, boundaries halfway between window centres.
    Windows without a label (None / -1) take the label before them (the first labelled one at the
    start); runs shorter than ``min_duration`` s are merged into the run before (the first into the
    next). Empty when no window has a label."""
    t = np.asarray(times, float)
    if t.ndim != 1 or len(t) != len(labels) or len(t) == 0 or (np.diff(t) <= 0).any():
        raise InvalidInput("times", list(t) if t.ndim == 1 else t.shape, f"{len(labels)} increasing window times")
    lab = [None if (x is None or x == -1) else int(x) for x in labels]
    known = [x for x in lab if x is not None]
    if not known:
        return ()
    last = known[0]
    filled = []
    for x in lab:
        last = last if x is None else x
        filled.append(last)
    cuts = [start] + [0.5 * (t[i] + t[i + 1]) for i in range(len(t) - 1)] + [end]
    runs: list[list] = []  # [start, end, label]
    for i, x in enumerate(filled):
        if runs and runs[-1][2] == x:
            runs[-1][1] = cuts[i + 1]
        else:
            runs.append([cuts[i], cuts[i + 1], x])
    merged = True
    while merged and len(runs) > 1:
        merged = False
        for i, r in enumerate(runs):
            if r[1] - r[0] < min_duration:
                j = i - 1 if i > 0 else 1
                lo, hi = min(runs[j][0], r[0]), max(runs[j][1], r[1])
                runs[j] = [lo, hi, runs[j][2]]
                del runs[i]
                k = 1  # neighbours with equal labels join
                while k < len(runs):
                    if runs[k][2] == runs[k - 1][2]:
                        runs[k - 1][1] = runs[k][1]
                        del runs[k]
                    else:
                        k += 1
                merged = True
                break
    return tuple(Segment(float(a), float(b), EMOTIONS[x]) for a, b, x in runs if b > a)
