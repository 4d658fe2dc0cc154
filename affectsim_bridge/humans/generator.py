"""Procedural affective motion: walk, sit down, seated, knock, standing scenarios.

Every clip is periodic by construction (all signals are functions of the cycle phase,
and the root returns to its start), so it replays seamlessly from any phase. Legs are
solved by analytic two-link IK toward planted foot targets, so feet do not slide
during stance. Emotion, performer and take enter only through :class:`Style`.

Motion frame (x forward of the anchor, y left, z up, metres):
- walk: a stadium loop, straight from (0, 0) to (L, 0), back along y = 2 rho;
- seated / sit_down: seat centre at the origin, person facing +x;
- knock: person facing +x, the door plane at x = ``provenance['door_plane_x']``;
- standing: feet around the origin.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from affectsim_bridge.humans.body import BodyShape
from affectsim_bridge.humans.motion import Motion
from affectsim_bridge.humans.skeleton import (
    DOF_HI,
    DOF_INDEX,
    DOF_LO,
    DOFS,
    POINTS,
    forward_kinematics,
    root_rotation,
)
from affectsim_bridge.humans.styles import Performer, Style, style_vad, take_variation

FPS = 30.0
ANKLE_H = 0.039  # fraction of height
I = DOF_INDEX
#: the least ``expand`` that still adducts the arms (0.05 rad off the trunk): a more contracted take
#: bends its elbows and turns its arms in further, but adducting further put a hand into the torso
#: when the arms were folded (arms crossed, self-hug)
ADDUCTION_FLOOR = -0.2


def _smoothstep(u: np.ndarray) -> np.ndarray:
    u = np.clip(u, 0.0, 1.0)
    return u * u * (3 - 2 * u)


def _bump(phase: np.ndarray, center: float, width: float) -> np.ndarray:
    """Periodic smooth bump in [0, 1] centred at ``center`` (rad) with angular ``width`` (rad)."""
    k = 1.0 / max(width, 1e-3) ** 2
    return np.exp(k * (np.cos(phase - center) - 1.0))


def _harmonic_noise(phase: np.ndarray, rng: np.random.Generator, amp: float, k_lo: int, k_hi: int) -> np.ndarray:
    """Periodic noise: harmonics ``k_lo..k_hi`` of the cycle with random phases, RMS about ``amp``."""
    out = np.zeros_like(phase)
    if amp <= 0:
        return out
    for k in range(k_lo, k_hi + 1):
        out += rng.normal() * np.sin(k * phase + rng.uniform(0, 2 * math.pi))
    return amp * out / math.sqrt(max(1, k_hi - k_lo + 1))


# ------------------------------------------------------------------------------ legs


def leg_ik(hip: np.ndarray, ankle: np.ndarray, pelvis_rot: np.ndarray, side: int, l1: float, l2: float):
    """Hip flex, hip abduction, knee flex (rad, (T,)) putting the ankle at ``ankle`` (T, 3) from ``hip`` (T, 3).

    ``pelvis_rot`` (T, 3, 3) is the pelvis orientation in the motion frame; ``side`` +1 left, -1 right.
    Unreachable targets are pulled toward the hip (the leg straightens to 99.5 %).
    """
    v = np.einsum("tji,tj->ti", pelvis_rot, ankle - hip)
    d = np.linalg.norm(v, axis=1)
    reach = 0.995 * (l1 + l2)
    v = v * np.minimum(1.0, reach / np.maximum(d, 1e-9))[:, None]
    d = np.minimum(d, reach)
    cos_k = np.clip((l1 * l1 + l2 * l2 - d * d) / (2 * l1 * l2), -1, 1)
    knee = math.pi - np.arccos(cos_k)
    x0 = -l2 * np.sin(knee)
    z0 = -l1 - l2 * np.cos(knee)
    phi = np.arcsin(np.clip(v[:, 1] / np.abs(z0), -1, 1))  # rotation about +x
    ux, uz = x0, z0 * np.cos(phi)
    flex = np.arctan2(v[:, 2], v[:, 0]) - np.arctan2(uz, ux)
    flex = np.angle(np.exp(1j * flex))
    return flex, side * phi, knee


def _solve_legs(q: np.ndarray, root_pos: np.ndarray, root_rot: np.ndarray, body: BodyShape,
                feet: dict[str, np.ndarray], foot_pitch: dict[str, np.ndarray]) -> None:
    """Fill hip, knee and ankle DoFs of ``q`` so each ankle reaches ``feet[side]`` (T, 3)."""
    H = body.height
    off = body.joint_offsets()
    R = root_rotation(root_rot)
    pitch = root_rot[:, 1]
    for s, sign in (("l", 1), ("r", -1)):
        hip = root_pos + np.einsum("tij,j->ti", R, off[f"hip_{s}"])
        flex, abd, knee = leg_ik(hip, feet[s], R, sign, 0.245 * H, 0.246 * H)
        q[:, I[f"hip_{s}_flex"]] = flex
        q[:, I[f"hip_{s}_abd"]] = abd
        q[:, I[f"knee_{s}_flex"]] = knee
        # foot pitch in the motion frame = pelvis pitch - hip flex + knee - ankle flex
        q[:, I[f"ankle_{s}_flex"]] = pitch - flex + knee - foot_pitch[s]
        q[:, I[f"ankle_{s}_inv"]] = -abd


# ------------------------------------------------------------------------------ upper body


def _upper_body(q: np.ndarray, phase: np.ndarray, st: Style, rng: np.random.Generator, t: np.ndarray,
                duration: float) -> None:
    """Posture, irregularity and tremor on spine, neck, head and arms (adds to ``q``)."""
    q[:, I["spine_lower_flex"]] += 0.4 * st.trunk_flex
    q[:, I["spine_upper_flex"]] += 0.6 * st.trunk_flex
    q[:, I["neck_flex"]] += 0.4 * st.head_flex
    q[:, I["head_flex"]] += 0.6 * st.head_flex
    for s in ("l", "r"):
        q[:, I[f"shoulder_{s}_abd"]] += 0.10 + 0.25 * max(st.expand, ADDUCTION_FLOOR) + st.shoulder_raise
        q[:, I[f"elbow_{s}_flex"]] += 0.25 - 0.2 * st.expand
        q[:, I[f"shoulder_{s}_rot"]] += -0.2 * st.expand
    sway = 0.035 * st.lateral_sway
    q[:, I["spine_lower_lat"]] += sway * np.sin(phase + rng.uniform(0, 6.3))
    if st.jerk > 0:  # irregular: energy in high harmonics of the cycle
        k_lo = max(3, int(duration * 1.5))
        for name in ("spine_upper_flex", "head_flex", "head_rot", "shoulder_l_flex", "shoulder_r_flex",
                     "elbow_l_flex", "elbow_r_flex"):
            q[:, I[name]] += _harmonic_noise(phase, rng, st.jerk, k_lo, k_lo + 6)
    if st.tremor > 0:  # ~8 Hz, an integer harmonic of the cycle
        k = max(1, int(round(8.0 * duration)))
        for name in ("head_rot", "elbow_l_flex", "elbow_r_flex", "wrist_l_flex", "wrist_r_flex"):
            q[:, I[name]] += st.tremor * np.sin(k * phase + rng.uniform(0, 6.3))


GESTURES: dict[str, dict[str, float]] = {  # DoF offsets (rad) at the gesture's apex
    "point": {"shoulder_r_flex": 1.35, "shoulder_r_abd": 0.15, "elbow_r_flex": -0.1},
    "fist_raise": {"shoulder_r_flex": 1.9, "shoulder_r_abd": 0.35, "elbow_r_flex": 1.5, "wrist_r_flex": 0.3},
    "arms_up": {"shoulder_l_flex": 2.6, "shoulder_r_flex": 2.6, "shoulder_l_abd": 0.35, "shoulder_r_abd": 0.35,
                "elbow_l_flex": 0.2, "elbow_r_flex": 0.2, "head_flex": -0.2},
    "open_arms": {"shoulder_l_abd": 1.1, "shoulder_r_abd": 1.1, "shoulder_l_flex": 0.5, "shoulder_r_flex": 0.5,
                  "elbow_l_flex": 0.2, "elbow_r_flex": 0.2},
    "hands_on_hips": {"shoulder_l_abd": 0.55, "shoulder_r_abd": 0.55, "elbow_l_flex": 1.7, "elbow_r_flex": 1.7,
                      "shoulder_l_rot": -0.9, "shoulder_r_rot": -0.9, "shoulder_l_flex": -0.25,
                      "shoulder_r_flex": -0.25},
    "hand_to_face": {"shoulder_r_flex": 1.3, "shoulder_r_abd": 0.1, "shoulder_r_rot": 0.5, "elbow_r_flex": 2.3,
                     "head_flex": 0.35, "spine_upper_flex": 0.15},
    "face_in_hands": {"shoulder_l_flex": 1.2, "shoulder_r_flex": 1.2, "shoulder_l_rot": 0.5, "shoulder_r_rot": 0.5,
                      "elbow_l_flex": 2.4, "elbow_r_flex": 2.4, "head_flex": 0.5, "spine_upper_flex": 0.3},
    "defend": {"shoulder_l_flex": 1.25, "shoulder_r_flex": 1.25, "elbow_l_flex": 1.9, "elbow_r_flex": 1.9,
               "shoulder_l_rot": 0.3, "shoulder_r_rot": 0.3, "spine_lower_flex": -0.18, "head_rot": 0.35},
    "self_hug": {"shoulder_l_flex": 0.8, "shoulder_r_flex": 0.8, "shoulder_l_rot": 0.9, "shoulder_r_rot": 0.9,
                 "elbow_l_flex": 2.0, "elbow_r_flex": 2.0, "spine_upper_flex": 0.15},
    "arms_crossed": {"shoulder_l_flex": 0.6, "shoulder_r_flex": 0.6, "shoulder_l_rot": 1.0, "shoulder_r_rot": 1.0,
                     "elbow_l_flex": 1.9, "elbow_r_flex": 1.9},
    "small_wave": {"shoulder_r_flex": 0.5, "shoulder_r_abd": 0.9, "elbow_r_flex": 1.6},
    "head_scratch": {"shoulder_r_flex": 1.6, "shoulder_r_abd": 0.9, "elbow_r_flex": 2.3, "head_lat": -0.15},
    "shrug": {"shoulder_l_abd": 0.35, "shoulder_r_abd": 0.35, "elbow_l_flex": 1.2, "elbow_r_flex": 1.2,
              "shoulder_l_rot": -0.5, "shoulder_r_rot": -0.5, "head_lat": 0.1},
    "look_around": {"head_rot": 0.9, "spine_upper_rot": 0.3},
}
REPERTOIRE: dict[str, tuple[str, ...]] = {  # overlapping on purpose: no single gesture gives the label away
    "angry": ("point", "fist_raise", "hands_on_hips", "arms_crossed", "open_arms"),
    "happy": ("arms_up", "open_arms", "small_wave", "hands_on_hips", "shrug"),
    "sad": ("hand_to_face", "face_in_hands", "self_hug", "arms_crossed", "head_scratch"),
    "fearful": ("defend", "self_hug", "look_around", "hand_to_face", "shrug"),
    "neutral": ("head_scratch", "small_wave", "arms_crossed", "shrug", "point", "look_around"),
}


def _gestures(q: np.ndarray, phase: np.ndarray, st: Style, emotion: str, rng: np.random.Generator,
              count: int, shaking: bool, period: float) -> list[str]:
    """Add ``count`` gestures from the emotion's repertoire, spread over the cycle of ``period`` s."""
    names = list(rng.choice(REPERTOIRE[emotion], size=count, replace=count > len(REPERTOIRE[emotion])))
    centers = (np.arange(count) + rng.uniform(0.2, 0.8, count)) * 2 * math.pi / count
    width = 0.55 / (count * st.tempo)
    for name, c in zip(names, centers):
        env = _bump(phase, c, width)
        for dof, value in GESTURES[name].items():
            q[:, I[dof]] += env * value * min(1.6, st.gesture_amp) * (st.arm_height if "flex" in dof else 1.0)
        if shaking and name in ("fist_raise", "point"):  # forceful repetition at the apex
            k = max(1, int(round(3.0 * st.tempo * period)))
            q[:, I["elbow_r_flex"]] += env * 0.3 * np.sin(k * phase)
    return names


ROT_MAX = 1.1  # rad of internal shoulder rotation: beyond it summed gestures drive the hands into the chest


def _finish(q: np.ndarray) -> np.ndarray:
    q = np.clip(q, DOF_LO, DOF_HI)
    for s in ("l", "r"):
        q[:, I[f"shoulder_{s}_rot"]] = np.minimum(q[:, I[f"shoulder_{s}_rot"]], ROT_MAX)
    return q


# ------------------------------------------------------------------------------ actions


def _stadium(sigma: np.ndarray, L: float, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Point (N, 2) and heading (N,) at arc length ``sigma`` on the loop (0,0)->(L,0)->(L,2rho)->(0,2rho)."""
    P = 2 * L + 2 * math.pi * rho
    s = np.mod(sigma, P)
    xy = np.zeros((len(s), 2))
    yaw = np.zeros(len(s))
    a = s < L
    xy[a] = np.c_[s[a], np.zeros(a.sum())]
    b = (s >= L) & (s < L + math.pi * rho)
    th = (s[b] - L) / rho
    xy[b] = np.c_[L + rho * np.sin(th), rho - rho * np.cos(th)]
    yaw[b] = th
    c = (s >= L + math.pi * rho) & (s < 2 * L + math.pi * rho)
    xy[c] = np.c_[L - (s[c] - L - math.pi * rho), np.full(c.sum(), 2 * rho)]
    yaw[c] = math.pi
    d = s >= 2 * L + math.pi * rho
    th = (s[d] - 2 * L - math.pi * rho) / rho
    xy[d] = np.c_[-rho * np.sin(th), rho + rho * np.cos(th)]
    yaw[d] = math.pi + th
    return xy, yaw


def walk(emotion: str, performer: Performer, body: BodyShape, st: Style, rng: np.random.Generator,
         length: float = 2.2, rho: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Back and forth along a straight path of ``length`` m (stadium loop with turns of radius ``rho``)."""
    H = body.height
    P = 2 * length + 2 * math.pi * rho
    step_nominal = 0.36 * H * st.stride
    n_steps = max(4, 2 * int(round(P / step_nominal / 2)))  # even: left and right alternate around the loop
    s = P / n_steps
    cadence = performer.cadence * (st.speed / st.stride) ** 0.6  # steps/s
    duration = n_steps / cadence
    T = int(round(duration * FPS))
    t = np.arange(T) / FPS
    v = P / (T / FPS)
    sigma = v * t
    phase = 2 * math.pi * t / (T / FPS)
    center, yaw = _stadium(sigma, length, rho)
    psi = math.pi * sigma / s  # gait phase: left midstance at 0 (mod 2 pi)
    beta = 0.62  # stance fraction
    width = 0.055 * H
    feet, pitch = {}, {}
    for side, sign, off in (("l", 1, 0.0), ("r", -1, s)):
        k = np.floor((sigma - off + beta * s) / (2 * s))  # last footprint planted
        s0 = off + 2 * k * s
        s1 = s0 + 2 * s
        u = (sigma - s0 - beta * s) / (2 * s - 2 * beta * s)  # swing progress, < 0 in stance
        # the foot travels along the path (not the chord, which cuts across turns), lifting first,
        # and bulges outward to clear the stance foot
        w = _smoothstep((u - 0.12) / 0.76)
        along, heading = _stadium(s0 + w * (s1 - s0), length, rho)
        bulge = 0.03 * H * np.where((u > 0) & (u < 1), np.sin(math.pi * np.clip(u, 0, 1)), 0)
        xy = along + np.c_[-np.sin(heading), np.cos(heading)] * (sign * (width + bulge))[:, None]
        lift = 0.045 * H * st.swing_lift * np.where((u > 0) & (u < 1), np.sin(math.pi * np.clip(u, 0, 1)) ** 0.8, 0)
        feet[side] = np.c_[xy, ANKLE_H * H + lift]
        swing = (u > 0) & (u < 1)
        pitch[side] = np.where(swing, 0.35 * np.sin(2 * math.pi * np.clip(u, 0, 1)) * st.swing_lift, 0.0)
    # pelvis: on the path, sways toward the stance foot, as high as the stance legs allow
    lat = 0.02 * H * st.lateral_sway * np.cos(psi)
    root_xy = center + np.c_[-np.sin(yaw), np.cos(yaw)] * lat[:, None]
    nominal = 0.55 * H
    root_rot = np.c_[yaw, np.full(T, 0.04 + 0.3 * max(st.trunk_flex, 0) * 0.3), np.zeros(T)]
    root_pos = np.c_[root_xy, np.full(T, nominal)]
    R = root_rotation(root_rot)
    off = body.joint_offsets()
    leg = 0.491 * H * 0.985
    z = np.full(T, nominal)
    for sd in ("l", "r"):
        hip = root_pos + np.einsum("tij,j->ti", R, off[f"hip_{sd}"])
        horiz = np.linalg.norm(hip[:, :2] - feet[sd][:, :2], axis=1)
        reach = feet[sd][:, 2] + np.sqrt(np.maximum(leg * leg - horiz * horiz, 0)) - (hip[:, 2] - root_pos[:, 2])
        stance = pitch[sd] == 0
        z = np.where(stance, np.minimum(z, reach), z)
    z -= 0.012 * H * st.bounce * (1 - np.cos(2 * psi)) / 2 + st.stomp * H * _bump(2 * psi, math.pi * 0.2, 0.3)
    # periodic low-pass keeps vertical velocity continuous
    spec = np.fft.rfft(z)
    spec[max(2, int(4 * n_steps)):] = 0
    root_pos[:, 2] = np.fft.irfft(spec, T)
    q = np.zeros((T, len(DOFS)))
    _solve_legs(q, root_pos, root_rot, body, feet, pitch)
    a = 0.32 * st.arm_swing
    q[:, I["shoulder_l_flex"]] += a * np.sin(psi)
    q[:, I["shoulder_r_flex"]] -= a * np.sin(psi)
    q[:, I["elbow_l_flex"]] += 0.35 * a * (1 + np.sin(psi))
    q[:, I["elbow_r_flex"]] += 0.35 * a * (1 - np.sin(psi))
    q[:, I["spine_upper_rot"]] -= 0.06 * st.arm_swing * np.sin(psi)
    q[:, I["spine_lower_rot"]] += 0.04 * np.sin(psi)
    q[:, I["head_rot"]] += 0.06 * np.sin(psi)
    _upper_body(q, phase, st, rng, t, T / FPS)
    return root_pos, root_rot, q, {"path_length": length, "turn_radius": rho, "speed": v, "steps": n_steps}


def _standing_feet(T: int, H: float, x: float = 0.0, width: float = 0.06) -> tuple[dict, dict]:
    feet = {s: np.tile([x, sign * width * H, ANKLE_H * H], (T, 1)) for s, sign in (("l", 1), ("r", -1))}
    return feet, {"l": np.zeros(T), "r": np.zeros(T)}


def in_place_period(st: Style, rng: np.random.Generator) -> float:
    """Seconds of one cycle of an in-place performance (the first draw of its ``rng``)."""
    return float(rng.uniform(6.0, 9.0)) / max(0.6, st.tempo) ** 0.5


def in_place(emotion: str, body: BodyShape, st: Style, rng: np.random.Generator, scenario: str, t: np.ndarray,
             period: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict, dict, list[str]]:
    """An in-place scenario performance at times ``t`` (s), periodic with ``period`` s: root position
    and rotation, DoFs without the legs, the planted feet and their pitch (for :func:`_solve_legs`)
    and the gestures performed."""
    H = body.height
    T = len(t)
    phase = 2 * math.pi * t / period
    feet, pitch = _standing_feet(T, H, width=float(rng.uniform(0.045, 0.075)))
    shift = {"weight_shift": 0.05, "gestures": 0.02, "self_touch": 0.015, "arms_crossed": 0.02}[scenario]
    lat = shift * H * st.lateral_sway * np.sin(phase * (2 if scenario == "weight_shift" else 1))
    bounce = 0.01 * H * (st.bounce - 1.0) * 0.5 * (1 - np.cos(8 * phase)) if st.bounce > 1 else 0.0
    root_pos = np.c_[np.full(T, -0.01 * H), lat, 0.548 * H - 2.0 * lat ** 2 / H + bounce]
    root_rot = np.c_[0.05 * np.sin(phase + 1.0), np.full(T, 0.02), -0.5 * lat / H]
    q = np.zeros((T, len(DOFS)))
    count = {"gestures": 3, "weight_shift": 1, "self_touch": 2, "arms_crossed": 1}[scenario]
    if scenario == "arms_crossed":
        env = 0.4 + 0.4 * np.cos(phase - rng.uniform(0, 6.3)) ** 2
        for dof, value in GESTURES["arms_crossed"].items():
            q[:, I[dof]] += env * value
    names = _gestures(q, phase, st, emotion, rng, count, shaking=st.tempo > 1.3, period=period)
    _upper_body(q, phase, st, rng, t, period)
    return root_pos, root_rot, q, feet, pitch, names


def standing(emotion: str, performer: Performer, body: BodyShape, st: Style, rng: np.random.Generator,
             scenario: str = "gestures") -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Scenario performance in place: gestures, weight shifting, self-touch, arms crossed, pacing."""
    if scenario == "pacing":
        return walk(emotion, performer, body, st, rng, length=1.2, rho=0.45)
    T = int(round(in_place_period(st, rng) * FPS))
    root_pos, root_rot, q, feet, pitch, names = in_place(emotion, body, st, rng, scenario, np.arange(T) / FPS, T / FPS)
    _solve_legs(q, root_pos, root_rot, body, feet, pitch)  # sets only leg DoFs, which gestures never touch
    return root_pos, root_rot, q, {"scenario": scenario, "gestures": names}


def seated(emotion: str, performer: Performer, body: BodyShape, st: Style, rng: np.random.Generator,
           seat_height: float = 0.45) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Seated idle with gestures; pelvis on a support of ``seat_height`` m centred at the origin."""
    H = body.height
    duration = float(rng.uniform(6.0, 9.0))
    T = int(round(duration * FPS))
    t = np.arange(T) / FPS
    phase = 2 * math.pi * t / (T / FPS)
    root_pos = np.c_[np.zeros(T), np.zeros(T), np.full(T, seat_height + 0.06 * H)]
    lean = 0.1 * st.trunk_flex + 0.03 * np.sin(phase)
    root_rot = np.c_[0.04 * np.sin(phase + 2.0), -0.15 + lean, np.zeros(T)]
    foot_x = 0.26 * H + float(rng.uniform(-0.03, 0.05)) * H
    feet = {s: np.tile([foot_x, sign * 0.07 * H, ANKLE_H * H], (T, 1)) for s, sign in (("l", 1), ("r", -1))}
    if st.tempo > 1.2:  # restless foot tapping
        k = max(1, int(round(2.0 * st.tempo * duration)))
        feet["r"][:, 2] += 0.012 * H * np.sin(k * phase / 2) ** 2
    q = np.zeros((T, len(DOFS)))
    _solve_legs(q, root_pos, root_rot, body, feet, {"l": np.zeros(T), "r": np.zeros(T)})
    q[:, I["spine_lower_flex"]] += 0.15  # upright trunk over the tilted pelvis
    names = _gestures(q, phase, st, emotion, rng, 2, shaking=st.tempo > 1.3, period=T / FPS)
    _upper_body(q, phase, st, rng, t, T / FPS)
    return root_pos, root_rot, q, {"seat_height": seat_height, "support_xy": [0.0, 0.0], "gestures": names}


def sit_down(emotion: str, performer: Performer, body: BodyShape, st: Style, rng: np.random.Generator,
             seat_height: float = 0.45) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Stand in front of a seat, sit down, stay, stand up, stay (one cycle); seat centred at the origin."""
    H = body.height
    move = 1.6 / st.tempo
    holds = (float(rng.uniform(0.8, 1.4)), float(rng.uniform(1.5, 2.5)))
    duration = 2 * move + sum(holds)
    T = int(round(duration * FPS))
    t = np.arange(T) / FPS
    phase = 2 * math.pi * t / (T / FPS)
    a0, a1 = holds[0], holds[0] + move
    b0, b1 = a1 + holds[1], a1 + holds[1] + move
    down = _smoothstep((t - a0) / move) - _smoothstep((t - b0) / move)  # 0 standing .. 1 seated
    foot_x = 0.27 * H
    stand_x, sit_x = foot_x - 0.02 * H, 0.0
    x = stand_x + (sit_x - stand_x) * down
    z = 0.548 * H + (seat_height + 0.06 * H - 0.548 * H) * down
    transit = np.sin(math.pi * np.clip(down, 0, 1))
    root_pos = np.c_[x, np.zeros(T), z]
    root_rot = np.c_[np.zeros(T), 0.02 + (-0.15 - 0.02) * down + 0.35 * transit, np.zeros(T)]
    feet = {s: np.tile([foot_x, sign * 0.07 * H, ANKLE_H * H], (T, 1)) for s, sign in (("l", 1), ("r", -1))}
    q = np.zeros((T, len(DOFS)))
    _solve_legs(q, root_pos, root_rot, body, feet, {"l": np.zeros(T), "r": np.zeros(T)})
    q[:, I["spine_lower_flex"]] += 0.15 * down + 0.25 * transit
    q[:, I["spine_upper_flex"]] += 0.15 * transit
    for s in ("l", "r"):  # arms reach back toward the seat while sitting
        q[:, I[f"shoulder_{s}_flex"]] += -0.3 * transit
    _upper_body(q, phase, st, rng, t, T / FPS)
    return root_pos, root_rot, q, {"seat_height": seat_height, "support_xy": [sit_x, 0.0],
                                   "stand_x": stand_x, "sit_interval": [a0, b1]}


def knock(emotion: str, performer: Performer, body: BodyShape, st: Style, rng: np.random.Generator,
          door_x: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Knock with the right hand on a door in front; bouts of knocks separated by waiting.

    With ``door_x`` (m) the performer stands so that the knuckles meet the plane x = door_x.
    """
    H = body.height
    rate = 2.6 * st.knock_rate  # knocks per second
    knocks = int(rng.integers(3, 6))
    bout = knocks / rate
    wait = float(rng.uniform(1.5, 2.5)) / max(st.tempo, 0.5)
    raise_t = 0.5 / st.tempo
    duration = bout + wait + 2 * raise_t
    T = int(round(duration * FPS))
    t = np.arange(T) / FPS
    phase = 2 * math.pi * t / (T / FPS)
    up = _smoothstep(t / raise_t) - _smoothstep((t - raise_t - bout) / raise_t)
    hit = np.where((t > raise_t) & (t < raise_t + bout), 0.5 - 0.5 * np.cos(2 * math.pi * rate * (t - raise_t)), 0)
    feet, pitch = _standing_feet(T, H)
    root_pos = np.c_[np.zeros(T), np.zeros(T), np.full(T, 0.548 * H)]
    root_rot = np.c_[np.zeros(T), np.full(T, 0.03), np.zeros(T)]
    q = np.zeros((T, len(DOFS)))
    _solve_legs(q, root_pos, root_rot, body, feet, pitch)
    rng_elbow = 0.45 * st.knock_range
    arm = 1.15 * st.arm_height
    q[:, I["shoulder_r_flex"]] += up * arm
    q[:, I["shoulder_r_abd"]] += up * 0.15
    q[:, I["shoulder_r_rot"]] += up * 0.3
    q[:, I["elbow_r_flex"]] += up * (0.5 + rng_elbow * (1 - hit))
    q[:, I["wrist_r_flex"]] += up * 0.4
    _upper_body(q, phase, st, rng, t, T / FPS)
    q = _finish(q)
    pts, _ = forward_kinematics(H, root_pos, root_rot, q, body.joint_offsets())
    hand = pts[:, POINTS.index("hand_r")]
    reach = float(hand[:, 0].max())
    if door_x is not None:  # step so that the reach meets the given plane
        root_pos[:, 0] += door_x - reach
        reach = door_x
    return root_pos, root_rot, q, {"door_plane_x": reach, "knocks": knocks, "rate_hz": rate}


ACTION_FUNCS = {"walk": walk, "standing": standing, "seated": seated, "sit_down": sit_down, "knock": knock}


def generate(mid: str, action: str, emotion: str, performer: Performer, take: int, intensity: float = 1.0,
             **params) -> Motion:
    """One clip, determined by (performer, action, emotion, take, params): same inputs, same clip."""
    key = f"{action}|{emotion}|{take}|{sorted(params.items())}".encode()
    rng = np.random.default_rng([performer.seed, zlib.crc32(key)])  # stable across processes (not hash())
    body = BodyShape.random(np.random.default_rng(performer.seed))
    style = take_variation(performer.style(emotion, intensity), rng)
    root_pos, root_rot, q, info = ACTION_FUNCS[action](emotion, performer, body, style, rng, **params)
    prov = {"generator": "affectsim procedural v1", "performer_expressiveness": performer.expressiveness, **info}
    vad = np.tile(style_vad(performer, emotion, intensity, style), (len(root_pos), 1))
    return Motion(mid, emotion, action, performer.id, take, FPS, root_pos, root_rot, _finish(q), body, intensity, prov,
                  vad=vad)
