"""Evolving affect: one in-place performance whose emotion changes once or twice in response to an event.

A clip is scripted as a sequence of emotions and the events between them (:class:`Script`).
Each emotion is performed as its own in-place track (``generator.in_place``: the performer's
style for that emotion, the same scenario and planted feet) over the whole clip; the clip
blends the tracks with C2-smooth weights across each transition, adds the performer's visible
reaction to the event (an orienting turn, a phone held to the ear, a startle looking down) and
solves the legs once for the blended pelvis, so the feet stay planted. Because every input is
smooth, pose, velocity and acceleration stay continuous through a transition (the validator
checks it).

Timeline (s of clip time): the event at ``event``; the reaction cue starts 0.15 s later (an
orienting response); the style transition starts after a reaction latency of 0.4-0.8 s and lasts
1-2 s; the emotion label changes at the transition's middle. The next event comes 3-4.5 s after
a transition ends. After the last transition and cue the clip holds its final state: its last
cycle is one full period of the final track, so replay repeats it seamlessly
(``Motion.loop_start``) instead of freezing or jumping back to the first emotion.

Per-frame labels: the emotion segments and a VAD per frame, blended with the same weights as the
styles (``styles.style_vad`` of each track's take).
"""

from __future__ import annotations

import itertools
import math
import zlib
from dataclasses import dataclass

import numpy as np

from affectsim_bridge.humans.body import BodyShape
from affectsim_bridge.humans.generator import (
    FPS,
    I,
    _finish,
    _solve_legs,
    in_place,
    in_place_period,
)
from affectsim_bridge.humans.motion import TRANSITION_LIMITS, Motion, transition_error
from affectsim_bridge.humans.styles import Performer, style_vad, take_variation
from affectsim_core.affect import Segment
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS

IN_PLACE = ("gestures", "weight_shift", "self_touch", "arms_crossed")
#: event -> (additive DoF offsets at the cue's apex, rise s, hold s, fall s); "side" DoFs are
#: multiplied by the event's side (+1 left, -1 right): where the door, the partner or the sound is.
EVENTS: dict[str, tuple[dict[str, float], float, float, float]] = {
    "knock_answered": ({"head_rot": 0.8, "spine_upper_rot": 0.35, "spine_lower_rot": 0.1}, 0.7, 1.2, 0.8),
    "partner_arrives": ({"head_rot": 0.6, "spine_upper_rot": 0.25, "head_flex": -0.1}, 0.7, 1.5, 0.8),
    "partner_leaves": ({"head_rot": 0.7, "spine_upper_rot": 0.3}, 0.8, 2.0, 1.0),
    "object_dropped": ({"head_flex": 0.5, "neck_flex": 0.2, "spine_upper_flex": 0.25, "spine_lower_flex": 0.12,
                        "shoulder_l_abd": 0.15, "shoulder_r_abd": 0.15}, 0.4, 0.8, 0.7),
    "phone_call": ({"head_lat": -0.12, "head_flex": 0.08}, 0.8, 0.0, 0.8),  # held through the transition
}
SIDED = ("head_rot", "spine_upper_rot", "spine_lower_rot")
#: the right arm's pose while holding a phone to the ear (rad; replaces the track's right arm)
PHONE_ARM = {"shoulder_r_flex": 1.25, "shoulder_r_abd": 0.5, "shoulder_r_rot": 0.35, "elbow_r_flex": 2.3,
             "wrist_r_flex": 0.2}
CUE_DELAY = 0.15  # s from the event to the start of the visible reaction
LATENCY = (0.4, 0.8)  # s from the event to the start of the style transition
TRANSITION = (1.0, 2.0)  # s of a style transition
FIRST_EVENT = (3.0, 4.5)  # s into the clip
GAP = (3.0, 4.5)  # s from the end of a transition to the next event
HOLD_MARGIN = 0.3  # s between the last cue or transition and the held cycle


@dataclass(frozen=True)
class Script:
    """What happens in one evolving clip: emotions (2 or 3, consecutive ones differ), the event
    before each change, each event's time and side, and each transition's interval (s)."""

    emotions: tuple[str, ...]
    events: tuple[str, ...]
    event_times: tuple[float, ...]
    sides: tuple[int, ...]
    transitions: tuple[tuple[float, float], ...]
    cue_ends: tuple[float, ...]

    @staticmethod
    def draw(emotions: tuple[str, ...], events: tuple[str, ...], rng: np.random.Generator) -> Script:
        if not 2 <= len(emotions) <= 3 or len(events) != len(emotions) - 1:
            raise InvalidInput("emotions/events", (emotions, events), "2-3 emotions and one event per change")
        for a, b in itertools.pairwise(emotions):
            if a == b or a not in EMOTIONS or b not in EMOTIONS:
                raise InvalidInput("emotions", emotions, f"emotions of {EMOTIONS}, consecutive ones different")
        for e in events:
            if e not in EVENTS:
                raise InvalidInput("event", e, f"one of {tuple(EVENTS)}")
        times, sides, trans, cues = [], [], [], []
        t = float(rng.uniform(*FIRST_EVENT))
        for e in events:
            a = t + float(rng.uniform(*LATENCY))
            b = a + float(rng.uniform(*TRANSITION))
            _, rise, hold, fall = EVENTS[e]
            if e == "phone_call":  # the call lasts past the change
                hold = b - (t + CUE_DELAY + rise) + float(rng.uniform(0.5, 1.5))
            times.append(t)
            sides.append(1 if rng.uniform() < 0.5 else -1)
            trans.append((a, b))
            cues.append(t + CUE_DELAY + rise + hold + fall)
            t = max(b, cues[-1]) + float(rng.uniform(*GAP))
        return Script(tuple(emotions), tuple(events), tuple(times), tuple(sides), tuple(trans), tuple(cues))

    @property
    def settled(self) -> float:
        """When the last transition and cue have ended (s)."""
        return max(self.transitions[-1][1], self.cue_ends[-1]) + HOLD_MARGIN

    def segments(self, duration: float) -> tuple[Segment, ...]:
        cuts = [0.0] + [0.5 * (a + b) for a, b in self.transitions] + [duration]
        return tuple(Segment(cuts[k], cuts[k + 1], e) for k, e in enumerate(self.emotions))


def _smooth(u: np.ndarray) -> np.ndarray:
    """C2 step 0 -> 1 over u in [0, 1] (quintic)."""
    u = np.clip(u, 0.0, 1.0)
    return u * u * u * (u * (6 * u - 15) + 10)


def weights(script: Script, t: np.ndarray) -> np.ndarray:
    """(K, T) blend weight of each emotion's track at times ``t``; they sum to 1."""
    s = [_smooth((t - a) / (b - a)) for a, b in script.transitions]
    w, before = [], np.ones_like(t)
    for k in range(len(script.emotions)):
        nxt = s[k] if k < len(s) else np.zeros_like(t)
        w.append(before * (1 - nxt))
        before = before * nxt
    return np.array(w)


def _envelope(t: np.ndarray, start: float, rise: float, hold: float, fall: float) -> np.ndarray:
    return _smooth((t - start) / rise) - _smooth((t - start - rise - hold) / fall)


def _cues(q: np.ndarray, script: Script, t: np.ndarray) -> None:
    """Add each event's visible reaction to ``q``; a phone call moves the right arm to the ear."""
    for e, te, side, end in zip(script.events, script.event_times, script.sides, script.cue_ends):
        offsets, rise, _, fall = EVENTS[e]
        start = te + CUE_DELAY
        env = _envelope(t, start, rise, end - start - rise - fall, fall)
        for dof, value in offsets.items():
            q[:, I[dof]] += env * value * (side if dof in SIDED else 1)
        if e == "phone_call":
            for dof, value in PHONE_ARM.items():
                q[:, I[dof]] = (1 - env) * q[:, I[dof]] + env * value


ATTEMPTS = 24  # timelines drawn per clip until its transitions pass the validator's continuity check


def evolving(mid: str, performer: Performer, take: int, emotions: tuple[str, ...], events: tuple[str, ...],
             scenario: str = "gestures", intensity: float = 1.0) -> Motion:
    """One evolving clip, determined by its arguments (same inputs, same clip).

    A timeline whose transition falls on a fast gesture of one style (the blend then moves faster
    than the performer does anywhere else) is redrawn from the same seeded stream, up to
    :data:`ATTEMPTS` times; the last draw is kept either way and the validator reports it."""
    if scenario not in IN_PLACE:
        raise InvalidInput("scenario", scenario, f"an in-place scenario of {IN_PLACE}")
    key = f"evolving|{'-'.join(emotions)}|{'-'.join(events)}|{scenario}|{take}".encode()
    seed = [performer.seed, zlib.crc32(key)]
    timeline = np.random.default_rng(seed)
    for _ in range(ATTEMPTS):
        m = _compose(mid, performer, take, Script.draw(tuple(emotions), tuple(events), timeline), scenario,
                     intensity, seed)
        pose, vel = transition_error(m)
        if pose <= TRANSITION_LIMITS[0] and vel <= TRANSITION_LIMITS[1]:
            break
    return m


def _compose(mid: str, performer: Performer, take: int, script: Script, scenario: str, intensity: float,
             seed: list[int]) -> Motion:
    emotions = script.emotions
    body = BodyShape.random(np.random.default_rng(performer.seed))
    rngs = [np.random.default_rng([*seed, k]) for k in range(len(emotions))]
    styles = [take_variation(performer.style(e, intensity), r) for e, r in zip(emotions, rngs)]
    periods = [round(in_place_period(st, r) * FPS) / FPS for st, r in zip(styles, rngs)]
    loop_start = math.ceil(script.settled * FPS)
    T = loop_start + round(periods[-1] * FPS)  # the held cycle: one period of the final track
    t = np.arange(T) / FPS
    tracks = [in_place(e, body, st, r, scenario, t, p) for e, st, r, p in zip(emotions, styles, rngs, periods)]
    w = weights(script, t)
    root_pos = sum(wk[:, None] * tr[0] for wk, tr in zip(w, tracks))
    root_rot = sum(wk[:, None] * tr[1] for wk, tr in zip(w, tracks))
    q = sum(wk[:, None] * tr[2] for wk, tr in zip(w, tracks))
    _cues(q, script, t)
    feet, pitch = tracks[0][3], tracks[0][4]
    _solve_legs(q, root_pos, root_rot, body, feet, pitch)
    vad = sum(wk[:, None] * style_vad(performer, e, intensity, st)[None, :] for wk, e, st in zip(w, emotions, styles))
    prov = {"generator": "affectsim evolving v1", "performer_expressiveness": performer.expressiveness,
            "scenario": scenario, "events": [{"event": e, "time": round(te, 4), "side": sd}
                                             for e, te, sd in zip(script.events, script.event_times, script.sides)],
            "transitions": [[round(a, 4), round(b, 4)] for a, b in script.transitions],
            "gestures": [tr[5] for tr in tracks]}
    return Motion(mid, emotions[-1], "standing", performer.id, take, FPS, root_pos, root_rot, _finish(q), body,
                  intensity, prov, cyclic=False, vad=np.clip(vad, -1, 1), segments=script.segments(T / FPS),
                  loop_start=loop_start)
