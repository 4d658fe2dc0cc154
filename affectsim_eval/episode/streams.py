"""Window streams of evolving episodes (docs/affect.md): every setting observes the same interval.

An episode whose target performs an evolving clip is observed, in every setting, by a stream of
frames at the protocol's rate (one per 0.25 s of sim time, the action rate) from the episode's
start until :data:`TAIL_S` after the clip has settled into its final state, so that the stream
spans every transition. P-Init, P-Ref and P-Mon render their views at the stream's times; A-Obs
is the robot's own head camera at every step (searching, then following after the handoff).
Every recognizer labels a window of 8 consecutive frames every 0.5 s (``Recognizer.predict_stream``
with :data:`~affectsim_core.protocol.STREAM_STRIDE`); the
record keeps, per window centre, the labels, the VAD estimates of recognizers that make them, and
the truth (segments in episode time, VAD per window). A setting whose stream ends early (an A-Obs
acquisition that stopped) has no label for the windows it did not see.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from affectsim_bridge.backends.base import HumanPlacement
from affectsim_core.affect import Segment, clip_segments
from affectsim_core.protocol import CLIP_FRAMES, SETTINGS, STEP_SECONDS, STREAM_STRIDE
from affectsim_core.record import AffectStreams
from affectsim_perception.recognizers.base import Prediction

TAIL_S = 2.0  # s of the held final state each stream includes


def is_evolving(target: HumanPlacement) -> bool:
    """Whether the target's clip changes emotion (it has segments)."""
    return target.motion is not None and len(target.motion.segments) > 1


def stream_times(target: HumanPlacement) -> np.ndarray:
    """Frame times (s, episode clock) of the settings' streams: every 0.25 s from 0 until
    :data:`TAIL_S` after the target's clip settles (its held cycle begins), at least 8 frames."""
    m = target.motion
    settled = m.loop_start / m.fps - target.phase
    n = max(CLIP_FRAMES, math.ceil((settled + TAIL_S) / STEP_SECONDS - 1e-9))
    return np.arange(n) * STEP_SECONDS


def window_times(times: np.ndarray) -> np.ndarray:
    """Centre (s) of every window of 8 consecutive stream frames, one every :data:`STREAM_STRIDE` frames."""
    return np.array([0.5 * (times[i] + times[i + CLIP_FRAMES - 1])
                     for i in range(0, len(times) - CLIP_FRAMES + 1, STREAM_STRIDE)])


def true_segments(target: HumanPlacement, start: float, end: float) -> tuple[Segment, ...]:
    """The target's emotion segments in episode time (clip time minus its phase) over [start, end)."""
    shifted = tuple(Segment(s.start - target.phase, s.end - target.phase, s.emotion) for s in target.motion.segments)
    return clip_segments(shifted, start, end)


def _r(x: float, nd: int = 6) -> float:
    return round(float(x), nd)


def _vad(v) -> tuple[float, float, float]:
    return tuple(_r(np.float32(x)) for x in v)


def streams_record(target: HumanPlacement, times: np.ndarray,
                   predictions: Mapping[str, Mapping[str, Sequence[tuple[float, Prediction]]]],
                   vad_recognizers: Sequence[str]) -> AffectStreams:
    """The record's streams from ``predictions[setting][recognizer]`` = (window centre, prediction)
    in time order (a shorter list: the setting's stream ended early); floats rounded as records are."""
    centres = window_times(times)
    end = float(times[-1] + STEP_SECONDS)
    names = sorted(next(iter(predictions.values())))
    labels: dict = {n: {} for n in names}
    pred_vad: dict = {n: {} for n in names if n in vad_recognizers}
    for s in SETTINGS:
        for n in names:
            got = {round(t, 6): p for t, p in predictions[s][n]}
            row = [got.get(round(float(c), 6)) for c in centres]
            labels[n][s] = [None if p is None else p.label for p in row]
            if n in pred_vad:
                pred_vad[n][s] = [None if p is None or p.vad is None else list(_vad(p.vad)) for p in row]
    truth = [list(_vad(v)) for v in target.motion.vad_at(centres + target.phase)]
    segs = true_segments(target, 0.0, end)
    return AffectStreams.from_dict({"start": 0.0, "end": _r(end), "times": [_r(c) for c in centres],
                                    "segments": [s.to_list() for s in segs], "vad": truth, "labels": labels,
                                    "pred_vad": pred_vad})
