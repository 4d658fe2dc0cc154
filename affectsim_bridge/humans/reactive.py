"""Reactive humans: people who notice the physical robot and respond according to their emotion.

With ``humans="reactive"`` a backend owns one :class:`Reactions` per loaded world. Each person
keeps a small state (motion clock, displacement from the scripted anchor, body turn, head
orientation, overlay weight) that is integrated in fixed sub-steps of :data:`SUBSTEP_S` seconds of
sim time from the robot's trajectory. The scripted motion keeps playing underneath; a reaction is
blended onto it (root displacement and body turn, a head/upper-body overlay, a playback rate), so
the emotion of the motion is the emotion the reaction expresses.

Attention (:class:`Attention`): the robot's body must be within range of the person's head,
inside the field of view of the head's facing and in line of sight (walls and furniture occlude)
for a seeded latency before the person notices it. Only the physical robot is noticed: the
passive settings' virtual cameras never enter this module. Reactions per emotion are one table,
:data:`REACTIONS` (sources in docs/reactive_humans.md). Every displacement stays inside a room,
clear of furniture and walls, off the robot and off the other person; a blocked step is not taken
and is counted in the person's summary.

Determinism: all random draws are made when the world is loaded, from ``seed`` and the person's
index, so the same episode, seed and robot trajectory give the same human trajectory bit for bit.
Frames and units: ``map`` (z up), metres, radians, seconds of sim time. Distances in the table are
surface to surface: the robot's round footprint to the person's disc of :data:`PERSON_RADIUS_M`.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from affectsim_bridge.humans.skeleton import DOF_HI, DOF_INDEX, DOF_LO
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.protocol import EMOTIONS

HUMANS_MODES = ("scripted", "reactive")  # the `humans` option: scripted replays the paper's protocol
SUBSTEP_S = 0.05  # s of sim time per integration step (a lockstep action is 5)
PERSON_RADIUS_M = 0.25  # a person as an obstacle (disc around the pelvis); the backend's value
HISTORY_S = 600.0  # s of reaction history kept for renders of past instants
STATIC_ACTIONS = ("seated", "sit_down")  # performances whose root never moves: upper body and head only
HEAD_ABOVE_PELVIS = 0.38  # the eyes above the pelvis, fraction of body height (0.93 H - 0.55 H)
ROBOT_EYES_M = (0.4, 1.05)  # heights (m) of the robot points a person can see: base and head
WALL_CLEARANCE_M = 0.2  # a displaced pelvis keeps this distance to furniture and walls
RETURN_SPEED_MPS = 0.5  # back to the scripted anchor once the reaction is over
HEAD_RATE = math.radians(240.0)  # rad/s the head turns at
BLEND_S = 0.3  # s to blend an overlay in or out


def _check(field: str, value: float, lo: float, hi: float, unit: str) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and lo <= value <= hi):
        raise InvalidInput(field, value, f"a number in [{lo:g}, {hi:g}]{' ' + unit if unit else ''}")


@dataclass(frozen=True)
class Attention:
    """When a person notices the robot: within ``range_m`` (surface to surface, from the head's floor
    point), within ``half_fov_rad`` of the head's facing, in line of sight, for a latency drawn once
    per person from a normal (``latency_mean_s``, ``latency_sd_s``) clipped to
    [``latency_min_s``, ``latency_max_s``]. A noticed robot is forgotten after ``forget_s`` s out of
    range or sight (the person tracks it, so the field of view no longer applies)."""

    range_m: float = 3.5
    half_fov_rad: float = math.radians(100.0)
    latency_mean_s: float = 0.5
    latency_sd_s: float = 0.15
    latency_min_s: float = 0.2
    latency_max_s: float = 1.0
    forget_s: float = 2.0

    def validate(self) -> "Attention":
        _check("attention.range_m", self.range_m, 0.5, 10.0, "m")
        _check("attention.half_fov_rad", self.half_fov_rad, 0.1, math.pi, "rad")
        _check("attention.latency_min_s", self.latency_min_s, 0.0, 5.0, "s")
        _check("attention.latency_max_s", self.latency_max_s, self.latency_min_s, 5.0, "s")
        _check("attention.latency_mean_s", self.latency_mean_s, self.latency_min_s, self.latency_max_s, "s")
        _check("attention.latency_sd_s", self.latency_sd_s, 0.0, 2.0, "s")
        _check("attention.forget_s", self.forget_s, 0.0, 30.0, "s")
        return self


GESTURES: dict[str, dict[str, float]] = {
    # upper-body overlays (target joint angles, degrees), blended in with the reaction's weight
    "none": {},
    "wave": {"shoulder_r_abd": 135.0, "shoulder_r_flex": 20.0, "elbow_r_flex": 60.0},  # happy: hand raised
    "thrust": {"shoulder_r_flex": 75.0, "shoulder_r_abd": 10.0, "elbow_r_flex": 10.0,  # angry: arm thrust
               "elbow_l_flex": 95.0, "spine_upper_flex": 10.0},
    "guard": {"shoulder_l_flex": 30.0, "shoulder_r_flex": 30.0, "elbow_l_flex": 115.0,  # fearful: hands at
              "elbow_r_flex": 115.0, "spine_upper_flex": -8.0},  # the chest, trunk back
    "slump": {"spine_upper_flex": 12.0, "neck_flex": 12.0, "shoulder_l_flex": 0.0, "shoulder_r_flex": 0.0},  # sad
}
WAVE_HZ, WAVE_DEG = 2.0, 25.0  # the happy wave: elbow oscillation


@dataclass(frozen=True)
class Reaction:
    """How one emotion responds to a noticed robot (distances surface to surface, m; speeds m/s).

    ``probability``: of reacting once the robot is noticed (drawn once per person).
    ``duration_s``: a transient reaction's length, after which the person resumes; None: it lasts
    while the robot is noticed. ``head``: +1 looks at the robot, -1 averts (by ``avert_rad``);
    ``head_pitch_rad``: + down. ``body_turn`` >= 0: fraction of the bearing to the robot the body
    turns toward it (1 faces it); < 0: the body turns away until the robot is at least
    ``|body_turn|`` * pi to its side; at ``turn_rate`` rad/s. ``keep_m``: retreat while the robot is
    closer (0: never); ``approach_to_m``: step toward it until this gap (0: never), taken with
    ``move_probability``; ``max_shift_m``: farthest from the scripted anchor; ``speed_mps`` plus
    ``speed_gain`` per m/s the robot approaches. ``playback``: motion clock rate while reacting
    (0 stops the motion). ``gesture``: a :data:`GESTURES` overlay."""

    emotion: str
    probability: float
    duration_s: float | None
    head: float
    head_pitch_rad: float
    body_turn: float
    turn_rate: float
    keep_m: float
    approach_to_m: float
    move_probability: float
    max_shift_m: float
    speed_mps: float
    speed_gain: float
    playback: float
    gesture: str
    avert_rad: float = math.radians(50.0)

    def validate(self) -> "Reaction":
        w = f"reactions.{self.emotion}"
        if self.emotion not in EMOTIONS:
            raise InvalidInput("reactions emotion", self.emotion, f"one of {', '.join(EMOTIONS)}")
        _check(f"{w}.probability", self.probability, 0.0, 1.0, "")
        if self.duration_s is not None:
            _check(f"{w}.duration_s", self.duration_s, 0.1, 60.0, "s")
        _check(f"{w}.head", self.head, -1.0, 1.0, "")
        _check(f"{w}.head_pitch_rad", self.head_pitch_rad, -0.7, 0.7, "rad")
        _check(f"{w}.body_turn", self.body_turn, -1.0, 1.0, "")
        _check(f"{w}.turn_rate", self.turn_rate, 0.0, 6.0, "rad/s")
        _check(f"{w}.keep_m", self.keep_m, 0.0, 5.0, "m")
        _check(f"{w}.approach_to_m", self.approach_to_m, 0.0, 5.0, "m")
        _check(f"{w}.move_probability", self.move_probability, 0.0, 1.0, "")
        _check(f"{w}.max_shift_m", self.max_shift_m, 0.0, 5.0, "m")
        _check(f"{w}.speed_mps", self.speed_mps, 0.0, 2.0, "m/s")
        _check(f"{w}.speed_gain", self.speed_gain, 0.0, 3.0, "")
        _check(f"{w}.playback", self.playback, 0.0, 2.0, "")
        _check(f"{w}.avert_rad", self.avert_rad, 0.0, 1.2, "rad")
        if self.gesture not in GESTURES:
            raise InvalidInput(f"{w}.gesture", self.gesture, f"one of {', '.join(GESTURES)}")
        return self


D = math.radians
REACTIONS: dict[str, Reaction] = {r.emotion: r.validate() for r in (
    #        emotion   p    dur   head pitch    turn  rate    keep approach p_move shift speed gain play gesture
    Reaction("fearful", 1.0, None, 1.0, D(-5), 0.3, D(120), 2.0, 0.0, 1.0, 2.5, 0.7, 0.8, 0.0, "guard"),
    Reaction("angry", 1.0, 3.0, 1.0, D(-5), 1.0, D(150), 0.0, 1.2, 0.7, 1.0, 0.5, 0.0, 0.0, "thrust"),
    Reaction("happy", 1.0, 2.5, 1.0, D(-5), 0.6, D(90), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, "wave"),
    Reaction("sad", 1.0, None, -1.0, D(15), -0.5, D(45), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, "slump"),
    Reaction("neutral", 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, "none"),
)}
ATTENTION = Attention().validate()


@dataclass
class PersonState:
    """One person's reaction state at a sub-step (map frame; angles rad; times s)."""

    clock: float = 0.0  # motion time (s, before the placement's phase)
    shift: tuple[float, float] = (0.0, 0.0)  # m from the scripted root
    turn: float = 0.0  # body yaw added to the scripted one
    head_yaw: float = 0.0  # relative to the body
    head_pitch: float = 0.0
    weight: float = 0.0  # overlay blend in [0, 1]
    rate: float = 1.0  # playback rate in effect
    seen_s: float = 0.0  # the robot has been perceivable this long (toward the latency)
    unseen_s: float = 0.0  # a noticed robot has been out of sight this long
    noticed: bool = False
    reacting: bool = False
    react_s: float = 0.0  # since the reaction began
    habituated: bool = False  # a transient reaction is over; again only after the robot is forgotten


@dataclass
class PersonSummary:
    """What a person did over an episode (stored in the record)."""

    noticed_at: float | None = None  # s of sim time
    reacting_s: float = 0.0
    path_m: float = 0.0  # length of the displacement the robot caused
    max_shift_m: float = 0.0
    blocked_steps: int = 0  # displacement steps refused (wall, furniture, robot, partner, out of rooms)

    def to_dict(self) -> dict:
        return {"noticed_at": self.noticed_at, "reacting_s": round(self.reacting_s, 3),
                "path_m": round(self.path_m, 4), "max_shift_m": round(self.max_shift_m, 4),
                "blocked_steps": self.blocked_steps}


@dataclass(frozen=True)
class Draws:
    """A person's random draws, made once at load: attention latency (s) and two uniforms."""

    latency_s: float
    react_u: float
    move_u: float


class Reactions:
    """The reaction state of every person of one loaded world, driven by the physical robot.

    ``people``: the world's :class:`~affectsim_bridge.backends.base.HumanPlacement` list; ``nav``: its
    :class:`~affectsim_bridge.world.navigable.NavigableSpace` (robot radius = ``nav.radius``);
    ``line_of_sight``: the backend's visibility query; ``robot``: the start pose (sim time 0).
    """

    def __init__(self, people: Sequence, nav, line_of_sight: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 robot: Pose2D, seed: int, attention: Attention = ATTENTION,
                 table: dict[str, Reaction] | None = None) -> None:
        self.people = tuple(people)
        self.nav, self.los = nav, line_of_sight
        self.attention = attention.validate()
        self.table = {e: r.validate() for e, r in (table or REACTIONS).items()}
        missing = [p.motion.emotion for p in self.people if p.motion is not None and p.motion.emotion not in self.table]
        if missing:
            raise InvalidInput("reactions", sorted(set(missing)), "a reaction for every emotion in the world")
        self.draws = tuple(self._draw(int(seed), k) for k in range(len(self.people)))
        self.t = 0.0
        self.robot = robot
        self.states = [PersonState() for _ in self.people]
        self.summaries = [PersonSummary() for _ in self.people]
        self.history: deque[tuple[float, tuple[PersonState, ...]]] = deque(maxlen=int(HISTORY_S / SUBSTEP_S))
        self.history.append((0.0, tuple(replace(s) for s in self.states)))
        self._continuation: Reactions | None = None

    def _draw(self, seed: int, k: int) -> Draws:
        rng = np.random.default_rng([seed & 0xFFFFFFFF, k, 17])
        a = self.attention
        lat = float(np.clip(rng.normal(a.latency_mean_s, a.latency_sd_s), a.latency_min_s, a.latency_max_s))
        return Draws(lat, float(rng.random()), float(rng.random()))

    # ------------------------------------------------------------------ time
    def advance(self, t_end: float, robot_end: Pose2D) -> None:
        """Integrate to sim time ``t_end`` (s) while the robot moves linearly from its last pose to
        ``robot_end`` (m, rad, map), in whole sub-steps: a remainder shorter than one waits for the next
        call (the robot's pose at the reactions' clock is kept)."""
        if not (math.isfinite(t_end) and t_end >= self.t - 1e-9):
            raise InvalidInput("sim_time", t_end, f"seconds >= the reactions' clock {self.t:.3f}")
        start, t0 = self.robot, self.t
        n = int(math.floor((t_end - t0) / SUBSTEP_S + 1e-6))
        span = max(t_end - t0, 1e-9)
        prev = start
        for i in range(1, n + 1):
            now = _lerp(start, robot_end, i * SUBSTEP_S / span)
            self._step(now, prev)
            self.history.append((self.t, tuple(replace(s) for s in self.states)))
            prev = now
        self.robot = prev
        self._continuation = None

    def _step(self, robot: Pose2D, robot_prev: Pose2D) -> None:
        self.t = round(self.t + SUBSTEP_S, 9)
        for k, p in enumerate(self.people):
            self._step_person(k, p, robot, robot_prev)

    def state_at(self, t: float) -> list[PersonState]:
        """Every person's state at sim time ``t``: from the history for past instants (the motion clock
        carried on at its rate between sub-steps), else continued from now with the robot standing
        where it is (a continuation kept until the next :meth:`advance`)."""
        history = self.history
        if t > self.t + 1e-9:
            if self._continuation is None:
                self._continuation = self.copy()
            c = self._continuation
            whole = c.t + SUBSTEP_S * math.floor((t - c.t) / SUBSTEP_S + 1e-6)
            if whole > c.t + 1e-9:
                c.advance(whole, c.robot)
            history = c.history
        oldest = history[0][0]
        if t < oldest - 1e-9:
            raise InvalidInput("sim_time", t, f"an instant within the kept reaction history ({oldest:.2f} s on)")
        i = min(len(history) - 1, int(math.floor((t - oldest) / SUBSTEP_S + 1e-6)))
        ts, snap = history[i]
        return [replace(s, clock=s.clock + (t - ts) * s.rate) for s in snap]

    def copy(self) -> "Reactions":
        """An independent continuation of this state (same draws)."""
        c = object.__new__(Reactions)
        c.people, c.nav, c.los, c.attention, c.table, c.draws = (
            self.people, self.nav, self.los, self.attention, self.table, self.draws)
        c.t, c.robot = self.t, self.robot
        c.states = [replace(s) for s in self.states]
        c.summaries = [replace(s) for s in self.summaries]
        c.history = deque([(self.t, tuple(replace(s) for s in self.states))], maxlen=self.history.maxlen)
        c._continuation = None
        return c

    # ------------------------------------------------------------------ poses
    def pose(self, k: int, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Person ``k``'s root position (m, map), yaw-pitch-roll (rad) and DoFs (rad) at sim time ``t``."""
        return self.compose(k, self.state_at(t)[k])

    def compose(self, k: int, s: PersonState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The scripted pose at the state's motion clock with the reaction blended on."""
        p = self.people[k]
        pos, rot, q = p.pose_at(s.clock)
        pos = pos + np.array([s.shift[0], s.shift[1], 0.0])
        rot = rot + np.array([s.turn, 0.0, 0.0])
        q = q.copy()
        w = s.weight
        if w > 0 and p.motion is not None:
            r = self.table[p.motion.emotion]
            for name, deg in GESTURES[r.gesture].items():
                i = DOF_INDEX[name]
                q[i] += w * (math.radians(deg) - q[i])
            if r.gesture == "wave":
                q[DOF_INDEX["elbow_r_flex"]] += w * math.radians(WAVE_DEG) * math.sin(2 * math.pi * WAVE_HZ * s.react_s)
        head_rot = max(-D(70), min(D(70), s.head_yaw))
        q[DOF_INDEX["head_rot"]] += head_rot
        q[DOF_INDEX["spine_upper_rot"]] += max(-D(40), min(D(40), s.head_yaw - head_rot))
        q[DOF_INDEX["head_flex"]] += s.head_pitch
        return pos, rot, np.clip(q, DOF_LO, DOF_HI)

    # ------------------------------------------------------------------ one person, one sub-step
    def _perceives(self, k: int, s: PersonState, robot: Pose2D, pos: np.ndarray, yaw: float) -> tuple[bool, float, float]:
        """(perceivable, surface gap m, bearing of the robot from the body's facing rad)."""
        height = self.people[k].body_shape().height
        d = np.array([robot.x - pos[0], robot.y - pos[1]])
        centre = float(np.hypot(*d))
        gap = centre - self.nav.radius - PERSON_RADIUS_M
        bearing = wrap_angle(math.atan2(d[1], d[0]) - yaw)
        a = self.attention
        if gap > a.range_m:
            return False, gap, bearing
        if not s.noticed and abs(wrap_angle(bearing - s.head_yaw)) > a.half_fov_rad:
            return False, gap, bearing
        eye = np.array([pos[0], pos[1], pos[2] + HEAD_ABOVE_PELVIS * height])
        targets = np.array([[robot.x, robot.y, z] for z in ROBOT_EYES_M])
        return bool(np.any(self.los(eye, targets))), gap, bearing

    def _step_person(self, k: int, p, robot: Pose2D, robot_prev: Pose2D) -> None:
        s, summ, dt, a = self.states[k], self.summaries[k], SUBSTEP_S, self.attention
        if p.motion is None:
            return
        r = self.table[p.motion.emotion]
        pos, rot, _ = self.compose(k, s)
        yaw = float(rot[0])
        seen, gap, bearing = self._perceives(k, s, robot, pos, yaw)
        # attention: latency to notice, forgetting after forget_s out of sight
        if seen:
            s.unseen_s = 0.0
            s.seen_s += dt
            if not s.noticed and s.seen_s >= self.draws[k].latency_s - 1e-9:
                s.noticed = True
                if summ.noticed_at is None:
                    summ.noticed_at = round(self.t, 6)
        else:
            s.seen_s = 0.0
            if s.noticed:
                s.unseen_s += dt
                if s.unseen_s >= a.forget_s - 1e-9:
                    s.noticed, s.habituated, s.unseen_s = False, False, 0.0
        # reaction onset and end
        if s.noticed and not s.reacting and not s.habituated and self.draws[k].react_u < r.probability:
            s.reacting, s.react_s = True, 0.0
        if s.reacting and ((r.duration_s is not None and s.react_s >= r.duration_s) or not s.noticed):
            s.reacting = False
            s.habituated = s.noticed
        if s.reacting:
            s.react_s += dt
            summ.reacting_s += dt
        on = s.reacting
        s.weight = _toward(s.weight, 1.0 if on else 0.0, dt / BLEND_S)
        s.rate = r.playback if on else 1.0
        s.clock += s.rate * dt
        if s.rate > 0:  # the person's own motion never walks them into the robot: they wait
            xy = self.compose(k, s)[0][:2]
            ahead = float(np.hypot(xy[0] - robot.x, xy[1] - robot.y)) - self.nav.radius - PERSON_RADIUS_M
            if ahead < 0.0 and ahead < gap:
                s.clock -= s.rate * dt
                summ.blocked_steps += 1
        # body turn (from the scripted facing) and head (relative to the body)
        scripted_bearing = wrap_angle(bearing + s.turn)
        if on and r.body_turn >= 0:
            target_turn = r.body_turn * scripted_bearing
        elif on:  # turn away until the robot is at least |body_turn| * pi to the side
            side = math.copysign(max(abs(scripted_bearing), abs(r.body_turn) * math.pi), scripted_bearing)
            target_turn = wrap_angle(scripted_bearing - side)
        else:
            target_turn = 0.0
        s.turn = _toward(s.turn, target_turn, (r.turn_rate if on else D(90)) * dt)
        if on:
            look = bearing if r.head >= 0 else -math.copysign(r.avert_rad, bearing)
            target_head, target_pitch = abs(r.head) * look, r.head_pitch_rad
        else:
            target_head, target_pitch = 0.0, 0.0
        s.head_yaw = _toward(s.head_yaw, max(-D(110), min(D(110), target_head)), HEAD_RATE * dt)
        s.head_pitch = _toward(s.head_pitch, target_pitch, HEAD_RATE * dt)
        # displacement
        if p.motion.action in STATIC_ACTIONS:
            return
        step = self._displacement(k, s, r, robot, robot_prev, pos, gap, on)
        if step is None:
            return
        new = self._free_step(k, pos, step, robot)
        if new is None:
            summ.blocked_steps += 1
            return
        s.shift = (s.shift[0] + new[0], s.shift[1] + new[1])
        summ.path_m += float(np.hypot(*new))
        summ.max_shift_m = max(summ.max_shift_m, float(np.hypot(*s.shift)))

    def _displacement(self, k: int, s: PersonState, r: Reaction, robot: Pose2D, robot_prev: Pose2D,
                      pos: np.ndarray, gap: float, on: bool) -> np.ndarray | None:
        """This sub-step's wanted displacement (m, map), or None."""
        dt = SUBSTEP_S
        away = np.array([pos[0] - robot.x, pos[1] - robot.y])
        away = away / max(float(np.hypot(*away)), 1e-9)
        shift = np.array(s.shift)
        if on and r.keep_m > 0 and gap < r.keep_m:
            closing = float(np.dot([robot.x - robot_prev.x, robot.y - robot_prev.y], away)) / dt
            speed = min(2.0, r.speed_mps + r.speed_gain * max(0.0, closing))
            step = away * speed * dt
            if float(np.hypot(*(shift + step))) > r.max_shift_m:
                return None
            return step
        if on and r.approach_to_m > 0 and self.draws[k].move_u < r.move_probability and gap > r.approach_to_m:
            step = -away * min(r.speed_mps * dt, gap - r.approach_to_m)
            if float(np.hypot(*(shift + step))) > r.max_shift_m:
                return None
            return step
        norm = float(np.hypot(*shift))
        if not on and norm > 1e-6:
            return -shift / norm * min(norm, RETURN_SPEED_MPS * dt)
        return None

    def _free_step(self, k: int, pos: np.ndarray, step: np.ndarray, robot: Pose2D) -> np.ndarray | None:
        """``step``, or a sidestep rotated by 45 or 90 degrees, that keeps the pelvis in a room, clear of
        furniture and walls, off the robot and off every other person; None if all are blocked."""
        here = np.asarray(pos[:2], float)
        others = [self.compose(j, self.states[j])[0][:2] for j in range(len(self.people)) if j != k]
        for ang in (0.0, D(45), -D(45), D(90), -D(90)):
            c, sn = math.cos(ang), math.sin(ang)
            st = np.array([c * step[0] - sn * step[1], sn * step[0] + c * step[1]])
            to = here + st
            if not self.nav.in_rooms(to[None])[0]:
                continue
            if self.nav.clearance(to[None])[0] < min(WALL_CLEARANCE_M, float(self.nav.clearance(here[None])[0])) - 1e-9:
                continue
            robot_gap = float(np.hypot(to[0] - robot.x, to[1] - robot.y)) - self.nav.radius - PERSON_RADIUS_M
            if robot_gap < 0.0:
                continue
            if any(float(np.hypot(*(to - o))) < min(2 * PERSON_RADIUS_M, float(np.hypot(*(here - o)))) for o in others):
                continue
            return st
        return None

    def summary(self) -> list[dict]:
        """Per person (in the world's order): id, emotion and :class:`PersonSummary` fields."""
        return [{"id": p.id, "emotion": p.motion.emotion if p.motion else None, **sm.to_dict()}
                for p, sm in zip(self.people, self.summaries)]


def _lerp(a: Pose2D, b: Pose2D, u: float) -> Pose2D:
    u = max(0.0, min(1.0, u))
    return Pose2D(a.x + u * (b.x - a.x), a.y + u * (b.y - a.y), wrap_angle(a.yaw + u * wrap_angle(b.yaw - a.yaw)))


def _toward(x: float, target: float, max_step: float) -> float:
    """``x`` moved toward ``target`` by at most ``max_step``."""
    return target if abs(target - x) <= max_step else x + math.copysign(max_step, target - x)
