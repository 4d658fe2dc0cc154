"""How emotion, performer and take shape motion (grounded in docs/affective_motion.md).

Each emotion is a set of multipliers and offsets relative to neutral. A performer has
an idiosyncratic baseline (their own neutral) and an expressiveness that scales how far
each emotion departs from it; a take adds small variation. Directions, relative to neutral:

| parameter | angry | fearful | happy | sad |
|---|---|---|---|---|
| speed, stride | up, long | short steps, fast cadence | up, long | slowest, short |
| arm swing | up | down | up | down (whole arm) |
| vertical bounce | heavy strike | low | up ("bouncing") | down |
| trunk / head | forward, expansive | retracted, contracted | head up | slumped, head down, lateral sway |
| smoothness | smooth, forceful | tremor | smooth | least smooth (more jerk) |
| knocking | largest range, arm high | short quick | rhythmic | smallest range, slow |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from affectsim_core.affect import motion_vad


@dataclass(frozen=True)
class Style:
    speed: float = 1.0  # walking speed factor
    stride: float = 1.0  # step length factor
    arm_swing: float = 1.0  # arm swing amplitude factor
    bounce: float = 1.0  # vertical pelvis motion factor
    swing_lift: float = 1.0  # foot clearance factor
    trunk_flex: float = 0.03  # rad, + forward / slumped
    head_flex: float = 0.0  # rad, + down
    expand: float = 0.0  # arm abduction and elbow opening (+ expansive, - contracted)
    shoulder_raise: float = 0.0  # rad of shoulder abduction toward the ears (tension)
    lateral_sway: float = 1.0  # factor on trunk lateral sway
    jerk: float = 0.0  # amplitude of high-harmonic irregularity (rad)
    tremor: float = 0.0  # amplitude of ~8 Hz tremor (rad)
    tempo: float = 1.0  # speed of gestures
    gesture_amp: float = 1.0  # size of gestures
    stomp: float = 0.0  # extra heel-strike drop (fraction of height)
    knock_range: float = 1.0  # elbow range in knocking
    knock_rate: float = 1.0  # knocks per second factor
    arm_height: float = 1.0  # how high the arm is raised for knocking and gestures


NEUTRAL = Style()
EMOTION_STYLES: dict[str, Style] = {
    "neutral": NEUTRAL,
    "happy": Style(speed=1.22, stride=1.12, arm_swing=1.45, bounce=1.6, swing_lift=1.3, trunk_flex=-0.02,
                   head_flex=-0.16, expand=0.35, tempo=1.25, gesture_amp=1.3, knock_rate=1.3, arm_height=1.1),
    "angry": Style(speed=1.28, stride=1.18, arm_swing=1.55, bounce=1.0, swing_lift=1.2, trunk_flex=0.14,
                   head_flex=0.06, expand=0.45, jerk=0.0, tempo=1.5, gesture_amp=1.45, stomp=0.012, knock_range=1.6,
                   knock_rate=1.5, arm_height=1.3),
    "sad": Style(speed=0.68, stride=0.78, arm_swing=0.35, bounce=0.45, swing_lift=0.55, trunk_flex=0.24,
                 head_flex=0.42, expand=-0.3, lateral_sway=1.8, jerk=0.05, tempo=0.6, gesture_amp=0.6,
                 knock_range=0.5, knock_rate=0.55, arm_height=0.8),
    "fearful": Style(speed=1.02, stride=0.74, arm_swing=0.5, bounce=0.7, swing_lift=0.8, trunk_flex=0.12,
                     head_flex=0.08, expand=-0.6, shoulder_raise=0.08, jerk=0.02, tremor=0.035, tempo=1.3,
                     gesture_amp=0.8, knock_range=0.6, knock_rate=1.6, arm_height=0.9),
}


@dataclass(frozen=True)
class Performer:
    """A virtual actor: id, own neutral style, expressiveness, cadence (steps/s) and body seed."""

    id: str
    base: Style
    expressiveness: float
    cadence: float
    seed: int

    @staticmethod
    def sample(pid: str, rng: np.random.Generator) -> "Performer":
        n = lambda s: float(rng.normal(1.0, s))  # noqa: E731
        base = Style(speed=n(0.08), stride=n(0.07), arm_swing=float(rng.uniform(0.6, 1.45)), bounce=n(0.25),
                     swing_lift=n(0.15), trunk_flex=float(rng.normal(0.04, 0.05)), head_flex=float(rng.normal(0, 0.08)),
                     expand=float(rng.normal(0, 0.15)), lateral_sway=float(rng.uniform(0.6, 1.5)),
                     jerk=float(abs(rng.normal(0, 0.01))), tempo=n(0.15), gesture_amp=n(0.2), knock_range=n(0.15),
                     knock_rate=n(0.15), arm_height=n(0.08))
        return Performer(pid, base, float(rng.uniform(0.55, 1.15)), float(rng.uniform(1.75, 2.05)),
                         int(rng.integers(2**31)))

    def style(self, emotion: str, intensity: float) -> Style:
        """Performer baseline moved by the emotion's deviation from neutral, scaled by expressiveness."""
        emo = EMOTION_STYLES[emotion]
        out = {}
        for f in fields(Style):
            b, e, nv = getattr(self.base, f.name), getattr(emo, f.name), getattr(NEUTRAL, f.name)
            w = self.expressiveness * intensity
            multiplicative = f.name in ("speed", "stride", "arm_swing", "bounce", "swing_lift", "lateral_sway",
                                        "tempo", "gesture_amp", "knock_range", "knock_rate", "arm_height")
            out[f.name] = b * (1 + w * (e / nv - 1)) if multiplicative else b + w * (e - nv)
        return Style(**out)


#: A take's own expression, beyond its emotion (issue 27: a clip's VAD must carry information of its
#: own): how energetically (log-factor on tempo and gesture size, half of it on walking speed) and how
#: expansively (offset on ``expand``) this take is performed. Draws are cut at two standard deviations.
TAKE_ENERGY_SD = 0.25
TAKE_EXPANSION_SD = 0.3
EXPAND_LIMITS = (-0.8, 1.0)  # the generator's arm and trunk expansion stays a plausible posture


def take_variation(style: Style, rng: np.random.Generator, scale: float = 0.06) -> Style:
    """Small per-take changes of every parameter, then the take's own energy and expansion draws
    (:data:`TAKE_ENERGY_SD`, :data:`TAKE_EXPANSION_SD`)."""
    style = replace(style, **{f.name: getattr(style, f.name) * float(rng.normal(1, scale)) if getattr(style, f.name)
                              else getattr(style, f.name) for f in fields(Style)})
    energy = float(np.clip(rng.normal(0.0, TAKE_ENERGY_SD), -2 * TAKE_ENERGY_SD, 2 * TAKE_ENERGY_SD))
    spread = float(np.clip(rng.normal(0.0, TAKE_EXPANSION_SD), -2 * TAKE_EXPANSION_SD, 2 * TAKE_EXPANSION_SD))
    return replace(style, speed=style.speed * math.exp(energy / 2), tempo=style.tempo * math.exp(energy),
                   gesture_amp=style.gesture_amp * math.exp(energy),
                   expand=float(np.clip(style.expand + spread, *EXPAND_LIMITS)))


def style_vad(performer: Performer, emotion: str, intensity: float, style: Style) -> np.ndarray:
    """VAD (3,) of a take performed with ``style`` (``affectsim_core.affect.motion_vad``): strength =
    expressiveness x intensity; energy = mean log-ratio of speed, tempo and gesture size over the
    performer's neutral; expansion = ``expand`` over the performer's neutral."""
    base = performer.base
    energy = float(np.mean([math.log(getattr(style, k) / getattr(base, k)) for k in ("speed", "tempo", "gesture_amp")]))
    return motion_vad(emotion, performer.expressiveness * intensity, energy, style.expand - base.expand)
