"""The A-Obs baseline (docs/protocol.md §6): frontier search -> stable handoff -> following.

Inputs are only the policy's :class:`Observation` (head RGB-D, intrinsics, localised pose) and
:class:`EpisodeInfo` (static occupancy map, start pose, dyadic clothing description), plus the
frozen BlazePose detector. Stages:

- *search*: an explored-area model marks map cells the head camera has seen (depth-limited
  rays, up to :data:`SENSE_RANGE`); frontier cells (free, unseen, next to seen) are clustered and
  the next viewpoint is the cluster with the best size / path-distance trade-off (one counted
  planner call per choice); on arrival the robot turns toward the largest unseen sector.
- *handoff* (the rule): the target is detected in :data:`HANDOFF_STEPS` consecutive steps, each
  time with at least :data:`MIN_KEYPOINTS` of 13 body keypoints visible, located by depth at
  :data:`HANDOFF_RANGE` metres and inside the image, the located positions within
  :data:`CONSISTENT_M` of each other. While it is not yet stable the robot centres the person and
  approaches if they are far.
- *follow*: keep the tracked person within :data:`CENTRE_TOL` of the optical axis (turns) and
  closer than :data:`FOLLOW_MAX` (forward moves), stop otherwise.
- dyadic episodes: up to two people are detected per frame and the target is the one whose
  clothing colours match ``target_description`` (never ground truth).

``baseline-social`` (:class:`SocialBaseline`) is the same policy keeping :attr:`SocialBaseline.keep_m`
from the person it tracks: its viewpoints lie at least that far from them, it plans around them at
that distance, and it never moves forward to closer. A subclass with another ``keep_m``, registered
under its own name, is the same policy at another distance.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from affectsim_core.actions import Action
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import Person, PersonDetector, clothing_distance, detect_people
from affectsim_core.protocol import FORWARD_M
from affectsim_nav.active import STUCK_M
from affectsim_nav.executor import heading_to
from affectsim_nav.planner import GridPlanner
from affectsim_nav.policy import POLICIES, Decision, Policy, Sighting

SENSE_RANGE = 5.0  # m, how far the explored-area model trusts a depth ray
HANDOFF_STEPS = 3
MIN_KEYPOINTS = 8
HANDOFF_RANGE = (0.8, 5.0)  # m
CONSISTENT_M = 1.0
CENTRE_TOL = math.radians(10.0)
FOLLOW_MAX = 3.2  # m
CLOTHING_MAX = 0.6  # clothing_distance above which a person is not the described target
MIN_FRONTIER = 6  # cells
LOST_STEPS = 12  # a person lost from view this recently is looked for where they were seen
PERSON_CLEARANCE = 0.6  # m between a seen person and the robot centre when planning around them


@POLICIES.register("baseline")
class FrontierSearchPolicy(Policy):
    """Frontier search, stable handoff and a following controller; see the module docstring."""

    uses_detector = True
    approach_band = (1.5, 3.0)  # m from the person: the viewpoints _approach chooses among
    person_clearance = PERSON_CLEARANCE  # m kept from a seen person when planning
    keep_m = 0.0  # m: no forward move that would end closer to the tracked person (0: none)
    lost_wait = 0  # steps a person lost from view, with the robot facing where they were, is waited for (0: none)

    def __init__(self, detector: PersonDetector) -> None:
        self.detector = detector

    def reset(self, info: EpisodeInfo, planner: GridPlanner) -> None:
        self.info, self.planner = info, planner
        self.seen = np.zeros(planner.shape, bool)
        self.streak: list[Person] = []
        self.people: list[Person] = []  # everyone detected in the last observation, the target among them
        self.handed_off = False
        self.track: tuple[float, float] | None = None
        self.goal: tuple[float, float, float] | None = None
        self.look_turns = 0  # turns left in the look-around after reaching a viewpoint
        self.look_dir = 1
        self.failed_goals: list[tuple[int, int]] = []
        self.goal_person: tuple[float, float] = (math.inf, math.inf)
        self.last_seen: tuple[tuple[float, float], int] | None = None
        self._last_forward: tuple[float, float] | None = None  # where the last follow FORWARD started

    def close(self) -> None:
        self.detector.close()

    # ------------------------------------------------------------------ perception
    def _target(self, obs: Observation) -> Person | None:
        desc = self.info.target_description
        people = self.people = detect_people(self.detector, obs, 2 if desc else 1)
        if not desc:
            return people[0] if people else None
        scored = [(clothing_distance(p, desc), k, p) for k, p in enumerate(people)]
        scored = [s for s in scored if s[0] <= CLOTHING_MAX]
        return min(scored)[2] if scored else None

    def _update_seen(self, obs: Observation) -> None:
        """Mark planning cells seen along depth rays of every 16th image column (explored-area model)."""
        fx, fy, cx, cy = obs.intrinsics
        h, w = obs.depth.shape
        cols = np.arange(8, w, 16)
        band = obs.depth[h // 3: 2 * h // 3, cols]
        with np.errstate(invalid="ignore"):
            rng = np.where(np.isfinite(band), band, np.inf).max(axis=0)  # farthest surface in the column
        ang = np.arctan2(cols - cx, fx)
        rng = np.minimum(np.where(np.isfinite(rng), rng, SENSE_RANGE) / np.cos(ang), SENSE_RANGE)
        cam = obs.camera_pose[:3, 3]
        fwd = obs.camera_pose[:3, 2]
        heading = math.atan2(fwd[1], fwd[0])
        dirs = heading - ang  # image x grows to the right = clockwise
        t = np.linspace(0.0, 1.0, int(SENSE_RANGE / (self.planner.res / 2)))
        xs = cam[0] + np.outer(rng * np.cos(dirs), t)
        ys = cam[1] + np.outer(rng * np.sin(dirs), t)
        p = self.planner
        j = np.clip(np.round((xs - p.origin[0] - p._offset) / p.res).astype(int), 0, p.shape[1] - 1)
        i = np.clip(np.round((ys - p.origin[1] - p._offset) / p.res).astype(int), 0, p.shape[0] - 1)
        self.seen[i, j] = True

    # ------------------------------------------------------------------ decisions
    def act(self, obs: Observation) -> Decision:
        self._update_seen(obs)
        target = self._target(obs)
        hfov = horizontal_fov(obs)
        if self.handed_off:
            return self._follow(obs, target)
        ok = (target is not None and target.n_visible >= MIN_KEYPOINTS
              and HANDOFF_RANGE[0] <= target.distance <= HANDOFF_RANGE[1] and abs(target.bearing) <= hfov / 2)
        if ok and self.streak and math.dist(self.streak[0].xy, target.xy) > CONSISTENT_M:
            self.streak = []
        self.streak = self.streak + [target] if ok else []
        if len(self.streak) >= HANDOFF_STEPS:
            instead = self._before_handoff(obs, target)
            if instead is not None:
                self.streak = []
                return instead
            self.handed_off, self.track, self.goal = True, target.xy, None
            return Decision(self._centre(target, hfov), stage="follow", handoff=True, sighting=_sighting(target))
        if target is not None:
            self.last_seen = (target.xy, obs.step)
            if ok:  # qualifies, not yet stable: hold it centred
                self.goal = None
                return Decision(self._centre(target, hfov), stage="handoff", sighting=_sighting(target))
            if self.goal is not None and math.dist(self.goal_person, target.xy) <= CONSISTENT_M:
                return Decision.CONTINUE  # already moving to a better view of this person
            if abs(target.bearing) > CENTRE_TOL:
                return Decision(self._centre(target, hfov), stage="handoff", sighting=_sighting(target))
            goal = self._approach(obs, target.xy)  # seen but too far or too occluded: get a better view
            if goal is None:  # no reachable viewpoint around them from here: keep exploring
                return self._search(obs)
            self.goal, self.goal_person = goal, target.xy
            return Decision(goal=goal, stage="handoff", sighting=_sighting(target))
        if self.goal is None and self.last_seen is not None and obs.step - self.last_seen[1] <= LOST_STEPS:
            err = heading_to(obs.pose, self.last_seen[0])  # lost from view: look where it was seen,
            if abs(err) > CENTRE_TOL:  # then go to a viewpoint of that place
                return Decision(Action.TURN_LEFT if err > 0 else Action.TURN_RIGHT, stage="handoff")
            if obs.step - self.last_seen[1] <= self.lost_wait:
                return Decision(Action.STOP, stage="handoff")
            goal = self._approach(obs, self.last_seen[0])
            self.last_seen = None
            if goal is not None:
                self.goal, self.goal_person = goal, goal[:2]
                return Decision(goal=goal, stage="handoff")
        return self._search(obs)

    def _before_handoff(self, obs: Observation, target: Person) -> Decision | None:
        """A decision to take instead of handing off to ``target`` now (a subclass's better view); None: hand off."""
        return None

    def _approach(self, obs: Observation, person: tuple[float, float]) -> tuple[float, float, float] | None:
        """The reachable viewpoint :attr:`approach_band` from ``person`` with the shortest path (one planner
        call) that keeps :attr:`person_clearance` from the person (who is not on the map)."""
        field = self.planner.plan_from(obs.pose[:2], avoid=((person[0], person[1], self.person_clearance),))
        if field is None:
            return None
        gx, gy = self.planner.centres()
        d = np.hypot(gx - person[0], gy - person[1])
        lo, hi = self.approach_band
        cost = np.where((d >= lo) & (d <= hi) & self.planner.traversable, field.dist, np.inf)
        for i, j in self.failed_goals:  # viewpoints that could not be reached (blocked by the person, ...)
            cost[max(0, i - 3):i + 4, max(0, j - 3):j + 4] = np.inf
        k = int(np.argmin(cost))
        if not np.isfinite(cost.flat[k]):
            return None
        xy = self.planner.centre(*np.unravel_index(k, cost.shape))
        return float(xy[0]), float(xy[1]), math.atan2(person[1] - xy[1], person[0] - xy[0])

    @staticmethod
    def _centre(target: Person, hfov: float) -> Action:
        if abs(target.bearing) > CENTRE_TOL:
            return Action.TURN_LEFT if target.bearing > 0 else Action.TURN_RIGHT
        return Action.STOP

    def _follow(self, obs: Observation, target: Person | None) -> Decision:
        if target is not None and (self.track is None or math.dist(target.xy, self.track) < 1.5):
            self.track = target.xy
        assert self.track is not None
        err = heading_to(obs.pose, self.track)
        dist = math.dist(obs.pose[:2], self.track)
        may_push = self._may_push(obs)
        self._last_forward = None
        if abs(err) > CENTRE_TOL:
            action = Action.TURN_LEFT if err > 0 else Action.TURN_RIGHT
        elif dist > max(FOLLOW_MAX, self.keep_m + FORWARD_M) and may_push:  # never to closer than keep_m
            action = Action.FORWARD
            self._last_forward = obs.pose[:2]
        else:
            action = Action.STOP
        return Decision(action, stage="follow", sighting=_sighting(target) if target else None)

    def _forward_blocked(self, obs: Observation) -> bool:
        """Whether the follower's last FORWARD left the base where it was (it made no progress)."""
        return self._last_forward is not None and math.dist(self._last_forward, obs.pose[:2]) < STUCK_M

    def _may_push(self, obs: Observation) -> bool:
        """Whether the follower may move forward from here: not right after a FORWARD that made no progress (no
        second push against whatever stopped it). Called once a follow step, before that move is forgotten."""
        return not self._forward_blocked(obs)

    def on_goal_result(self, reached: bool) -> None:
        if not reached and self.goal is not None:
            self.failed_goals.append(self.planner.cell(self.goal))
        self.goal = None
        self.look_turns = 6 if reached else 0

    def _search(self, obs: Observation) -> Decision:
        if self.goal is not None:
            return Decision.CONTINUE
        if self.look_turns > 0:
            self.look_turns -= 1
            if self.look_turns == 5:
                self.look_dir = self._unseen_side(obs)
            return Decision(Action.TURN_LEFT if self.look_dir > 0 else Action.TURN_RIGHT, stage="search")
        goal = self._next_viewpoint(obs)
        if goal is None:  # everything seen (or unreachable): people move, so explore again from scratch
            self.seen[:] = False
            self.failed_goals.clear()
            self._update_seen(obs)
            goal = self._next_viewpoint(obs)
        if goal is None:
            return Decision(Action.TURN_LEFT, stage="search")
        self.goal = goal
        return Decision(goal=goal, stage="search")

    def _search_avoid(self) -> tuple[tuple[float, float, float], ...]:
        """Discs (x, y, radius m, ``map``) the search's paths keep out of (a subclass's unmapped obstacles); none."""
        return ()

    def _unseen_side(self, obs: Observation) -> int:
        gx, gy = self.planner.centres()
        d = np.hypot(gx - obs.pose[0], gy - obs.pose[1])
        cand = self.planner.free & ~self.seen & (d < SENSE_RANGE)
        if not cand.any():
            return 1
        ang = np.arctan2(gy[cand] - obs.pose[1], gx[cand] - obs.pose[0]) - obs.pose[2]
        return 1 if np.sin(ang).sum() >= 0 else -1

    def _next_viewpoint(self, obs: Observation) -> tuple[float, float, float] | None:
        p = self.planner
        unseen = p.free & ~self.seen
        frontier = unseen & ndimage.binary_dilation(self.seen & p.free, np.ones((3, 3)))
        labels, n = ndimage.label(frontier, np.ones((3, 3)))
        if n == 0:
            return None
        field = p.plan_from(obs.pose[:2], avoid=self._search_avoid())
        if field is None:
            return None
        sizes = ndimage.sum(frontier, labels, np.arange(1, n + 1))
        centroids = ndimage.center_of_mass(frontier, labels, np.arange(1, n + 1))
        ti, tj = np.nonzero(p.traversable & np.isfinite(field.dist))
        if len(ti) == 0:
            return None
        best, best_score = None, -math.inf
        for size, (ci, cj) in zip(sizes, centroids):
            if size < MIN_FRONTIER:
                continue
            k = int(np.argmin((ti - ci) ** 2 + (tj - cj) ** 2))
            cell = (int(ti[k]), int(tj[k]))
            if any(abs(cell[0] - a) + abs(cell[1] - b) <= 3 for a, b in self.failed_goals):
                continue
            travel = float(field.dist[cell])
            score = math.sqrt(size) / (1.0 + travel)
            if travel < 0.3:  # already there: the look-around covers it
                continue
            if score > best_score:
                best, best_score = cell, score
        if best is None:
            return None
        xy = p.centre(*best)
        return float(xy[0]), float(xy[1]), math.atan2(xy[1] - obs.pose[1], xy[0] - obs.pose[0])


@POLICIES.register("baseline-social")
class SocialBaseline(FrontierSearchPolicy):
    """The baseline keeping :attr:`keep_m` (m, robot centre to the person's located position) from the
    person it tracks: 2.0 m leaves the robot's footprint ~1.45 m from the person's body, outside the
    personal zone (< 1.2 m)."""

    keep_m = 2.0
    approach_band = (2.0, 3.5)
    person_clearance = 1.5  # paths pass the person outside the personal zone (gap ~0.95 m)


def horizontal_fov(obs: Observation) -> float:
    """The horizontal field of view (rad) of the camera of ``obs``."""
    return 2.0 * math.atan2(obs.intrinsics[2], obs.intrinsics[0])


def _sighting(p: Person) -> Sighting:
    return Sighting(p.xy, p.distance, p.bearing, p.detection.box)
