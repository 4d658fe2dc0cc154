"""``viewpoint``: the baseline's search and handoff, with the head framing the whole body.

The baseline (:mod:`affectsim_nav.baseline`) hands off after three stable detections from wherever
it first sees the person (0.8-5 m, 8 of 13 body keypoints), with the head level, and plans around the
tracked person only. Which views the recognizers read best was measured on the val split's rendered
clips (``tools/view_readability.py``, docs/observation.md): the whole body in frame first, then 2-2.5 m
from the person (nearer cuts the body, beyond 4 m it is small), the angle last (three-quarter views
best, with overlapping intervals). This policy keeps the baseline's search, handoff rule and follower
and adds:

- **the head framing the whole body** (:class:`~affectsim_nav.head.HeadPointer`): every decision
  while a person is tracked, sighted or recently seen tilts the head so that the span from the floor to
  the top of the person's head (measured by depth, :func:`~affectsim_nav.head.body_top`) is centred in
  the image, or, when it cannot fit, the head stays in it; level while searching. On 480 val episodes
  the head alone raised the group's A-Obs by 3.4 points [-0.1, +6.6] and E-SPL@1 by 3.9 [+0.8, +7.1]
  over the baseline; moving into a 1.6-2.5 m band before the handoff (this policy until then) gave
  +2.4 / -2.4 with the head and +2.6 / -4.1 without it: the extra path bought nothing the head did
  not (docs/observation.md);
- **the person faced on arriving** at a viewpoint of them (the baseline looks around instead); once per
  place where nobody is seen: no second viewpoint of it is planned until someone is seen, the search goes on;
- **a person lost from view waited for**: facing where they were last seen, the robot stays
  :data:`LOST_WAIT_STEPS` steps before it moves to a viewpoint of that place (the baseline turns away to
  one at the first missed frame, often behind it); and with someone seen but no viewpoint of them, it stays
  facing them, up to :data:`NO_VIEW_WAIT_STEPS` steps an episode, before searching elsewhere. On 480 val
  episodes, with the wider band below, the mean path fell from 1.66 to 1.13 m (single episodes from
  17-44 m to under 3 m) and group A-Obs and E-SPL@1 moved by -0.7 [-2.3, +0.9] and -0.2 [-1.6, +1.2]
  (undetermined): kept for the behaviour (no drive through the home past a person standing in front of
  the robot), not for a measured gain;
- **a look before leaving**: for the first :data:`START_LOOK_S` of an episode, with nobody to go to or look for
  (no person seen yet; or one seen, lost, and no view of where they were found), the robot stays where it
  starts instead of making its first search move: BlazePose misses a near person, seen in profile or cut
  by the frame, in some frames, and the baseline's search leaves at the first miss. Leaving so, this policy
  drove 17.6 m on average in the 34 of 480 val episodes where it drove over 2 m more than it needed; with
  the look, on those 480, the group's E-SPL@1 rose from 42.2 to 43.3, A-Obs from 45.3 to 45.8, the mean
  path fell from 1.73 to 1.38 m and handoffs rose from 97.3 to 99.0 % (clipped translations from 11.0 to
  14.8 % of the fewer attempted);
- **viewpoints chosen by predicted evidence** (:meth:`ViewpointPolicy._approach`, wherever the baseline
  approaches a person seen too far or too occluded): among the reachable cells
  :attr:`ViewpointPolicy.approach_band` from the person with a clear line of sight (on the map, and past
  every other person seen; :data:`WIDE_BAND_M` where that band has none: a person in a small room or
  corner), the one with the least path length minus :data:`ANGLE_WEIGHT_M` x how close
  it is to a three-quarter view of the person's body axis (:func:`three_quarter`; a light weight, as
  measured). The axis is the normal of the shoulder line from the detector's 3-D keypoints (BlazePose's
  world landmarks), averaged over the sightings of the tracked person (:func:`body_axis_in_map`); front
  and back are not told apart (BlazePose puts the chest on the wrong side in a quarter of rendered views);
- **every person planned around**: other people seen (the second person of a dyadic episode) are kept
  :data:`SOCIAL_MARGIN_M` away and must not stand in the line of sight;
- **blocked moves remembered**: a goal given up after two moves that left the base where it was (something
  the map does not show stands ahead: a person too near to be detected, one who stepped into the path) leaves
  a disc :data:`BLOCKED_AHEAD_M` ahead of the base that paths and viewpoints keep out of for
  :data:`BLOCKED_STEPS`; after :data:`BACK_OFF_AFTER` goals given up so from one place the robot first
  backs off, :data:`BACK_OFF_BAND_M` the other way (:meth:`ViewpointPolicy._back_off`: a person pressing
  against its flank blocks every path that sets off past them); and the follower, once a move from a pose
  was blocked, does not push forward again from that pose (the baseline pushes every other step), nor
  toward a wall or furniture on the map (:meth:`ViewpointPolicy._clear_ahead`). Among
  reactive people the baseline and this policy otherwise pushed into a person for hundreds of moves, or
  stood re-planning beside one (docs/observation.md);
- **something off the map seen in depth** (:class:`~affectsim_nav.obstacles.UnmappedObstacles`): a goal is
  given up before a move into what the depth image shows within the next move and the map does not (a
  person too near for the detector), the place kept out of as a blocked one; the follower does not move
  into it either.

``viewpoint-fit`` (:class:`FitViewpointPolicy`) adds the view-quality stop: no handoff to a person too
near for the whole body to fit before stepping back from them (once an episode). ``viewpoint-angle``
(:class:`AngleViewpointPolicy`) adds the view-angle stop: no handoff to a person standing still seen
square-on (front or back, within :data:`SQUARE_ON_RAD` of the body axis) before a move to the nearest
three-quarter viewpoint of them (once an episode): `viewpoint`'s views from behind read worse than P-Ref's
on the same episodes (docs/observation.md), and a three-quarter view of the axis is a good angle from the
front and from the back alike.

Only the robot's observation, the map and the dyadic target description are used (no recognizer).
The constants were chosen on the val split (``affectsim bench policies --split val``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from affectsim_core.actions import Action
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import SHOULDERS, Person, PersonDetection
from affectsim_core.protocol import FORWARD_M, STEP_SECONDS
from affectsim_nav.active import STUCK_M
from affectsim_nav.baseline import CONSISTENT_M, FrontierSearchPolicy, _sighting
from affectsim_nav.head import BODY_TOP_M, HeadPointer, body_top, fit_distance, vertical_fov
from affectsim_nav.obstacles import UnmappedObstacles
from affectsim_nav.planner import GridPlanner
from affectsim_nav.policy import POLICIES, Decision

MIN_SHOULDER_M = 0.12  # m: a shoulder line shorter than this (in the floor plane) gives no direction
AXIS_VOTES = 6  # sightings averaged for the body axis
MIN_AGREEMENT = 0.5  # mean resultant length of the doubled-angle votes below which the axis is not trusted
ANGLE_WEIGHT_M = 1.0  # m of path worth a three-quarter view instead of the front, back or profile
SOCIAL_MARGIN_M = 1.0  # m kept from another person seen (robot centre to their located position)
SIGHT_CLEARANCE_M = 0.35  # m another person must stand off the line of sight
SIGHT_SHORT_M = 0.3  # m before the person where the line of sight check stops (they are not on the map)
FIT_MARGIN_RAD = math.radians(4.0)  # of the vertical field of view kept free when judging whether a body fits
WIDE_BAND_M = (1.2, 3.0)  # m from the person: where viewpoints are looked for when the approach band has none
LOST_WAIT_STEPS = 3  # steps (0.75 s) a person lost from view is waited for, facing where they were, before moving
NO_VIEW_WAIT_STEPS = 8  # steps (2 s) an episode waited with someone seen and no viewpoint of them
STEP_BACK_BAND_M = 0.6  # m beyond the fit distance where a step back may end
SQUARE_ON_RAD = math.radians(25.0)  # off the body axis (front or back) within which a view is square-on
QUARTER_MIN = 0.8  # three_quarter() of the viewpoint a square-on view moves to: 36-54 deg off the axis
STILL_M = 0.3  # m within which the stable sightings of a person standing still lie
BLOCKED_AHEAD_M = 0.5  # m ahead of the base centre where whatever blocked its moves is placed (map)
BLOCKED_RADIUS_M = 0.45  # m around that place kept out of
BLOCKED_STEPS = 40  # steps (10 s) a blocked place is kept out of: a person standing there may leave
SAME_HEADING_RAD = math.radians(1.0)  # a blocked move leaves the heading as it was
BACK_OFF_AFTER = 3  # goals given up from one place (each after two blocked moves) before backing off from it
BACK_OFF_BAND_M = (0.75, 1.5)  # m from the base where a back-off may end
START_LOOK_S = 2.0  # s watched from the start before the first search move
START_LOOK_STEPS = round(START_LOOK_S / STEP_SECONDS)


class Blocked(NamedTuple):
    """A place kept out of: (``x``, ``y``) m, ``map``, until step ``until``; noted with the base at ``base`` (m, ``map``)."""

    x: float
    y: float
    until: int
    base: tuple[float, float]


def body_axis_in_map(det: PersonDetection, camera_pose: np.ndarray) -> float | None:
    """Direction (rad, ``map``, modulo pi) of the normal of the person's shoulder line, from BlazePose's world
    landmarks (metres around the hips, axes those of the camera: x right, y down, z away) and ``camera_pose``
    (4x4, ``map`` <- optical); front and back are not told apart. None when a shoulder is not visible or
    the line is too short in the floor plane."""
    left, right = SHOULDERS
    if min(det.visibility[left], det.visibility[right]) < 0.5:
        return None
    s = det.world[left] - det.world[right]
    sx, sz = float(s[0]), float(s[2])
    if math.hypot(sx, sz) < MIN_SHOULDER_M:
        return None
    fx, fz = sz, -sx  # the line turned a quarter: (for a person facing the camera, -z)
    v = fx * camera_pose[:3, 0] + fz * camera_pose[:3, 2]
    if math.hypot(float(v[0]), float(v[1])) < 1e-9:
        return None
    return math.remainder(math.atan2(float(v[1]), float(v[0])), math.pi)


@POLICIES.register("viewpoint")
class ViewpointPolicy(FrontierSearchPolicy):
    """The baseline choosing its view: see the module docstring."""

    approach_band = (1.8, 2.3)  # m from the located person: the distance read best (2-2.5 m from the camera)
    lost_wait = LOST_WAIT_STEPS
    step_back = False  # the view-quality stop: no handoff before stepping back from a person too near to fit
    turn_square = False  # the view-angle stop: no handoff from square-on to a person standing still

    def reset(self, info: EpisodeInfo, planner: GridPlanner) -> None:
        super().reset(info, planner)
        self.votes: list[float] = []  # body-axis estimates of the tracked person (rad, map, modulo pi)
        self.tops: list[float] = []  # top-of-head heights of that person (m above the floor)
        self.voted_at: tuple[float, float] | None = None  # where that person was last sighted
        self.others: list[tuple[float, float]] = []  # other people seen (map), never the target
        self.head = HeadPointer()
        self.stepped_back = False  # a step back was considered (once an episode)
        self.squared = False  # a move off a square-on view was considered (once an episode)
        self.backing = False  # a step back is under way
        self.view_of: tuple[float, float] | None = None  # the person (map) the current goal is a viewpoint of
        self.arrived_for: tuple[float, float] | None = None  # that goal was just reached: the person to turn to
        self.turned_to: tuple[float, float] | None = None  # the last place turned to on arriving; None once anyone is seen
        self.blocked: list[Blocked] = []  # places kept out of
        self.backed_off = -1  # the step of the last back-off (blocks noted before it do not count towards another)
        self.recent: list[tuple[tuple[float, float, float], bool]] = []  # (pose, following a goal) of the last 2 acts
        self.goal_failed = False  # the executor gave up a goal since the last act
        self.no_push: tuple[float, float, float] | None = None  # the pose a follow move was last blocked from
        self.no_view_waits = 0  # steps waited with someone seen and no viewpoint of them
        self.unmapped = UnmappedObstacles(info)  # what stands ahead in depth, off the map

    # ------------------------------------------------------------------ perception
    def _target(self, obs: Observation) -> Person | None:
        target = super()._target(obs)
        others = [p.xy for p in self.people if p is not target]
        if others:  # keep those seen before that are not where someone is seen now
            self.others = others + [o for o in self.others if min(math.dist(o, n) for n in others) > CONSISTENT_M]
        if target is not None:
            if self.voted_at is not None and math.dist(self.voted_at, target.xy) > CONSISTENT_M:
                self.votes, self.tops = [], []  # someone else, or the same person gone elsewhere: start again
            self.voted_at = target.xy
            a = body_axis_in_map(target.detection, obs.camera_pose)
            if a is not None:
                self.votes = (self.votes + [a])[-AXIS_VOTES:]
            top = body_top(target.detection, obs)
            if top is not None:
                self.tops = (self.tops + [top])[-AXIS_VOTES:]
        return target

    def top(self) -> float:
        """The tracked person's top of the head (m above the floor): the median of the recent
        measurements, :data:`~affectsim_nav.head.BODY_TOP_M` before any."""
        return float(np.median(self.tops)) if self.tops else BODY_TOP_M

    def axis(self) -> float | None:
        """The tracked person's body axis (rad, map, modulo pi) when the recent estimates agree, else None
        (a circular mean of the doubled angles)."""
        if len(self.votes) < 2:
            return None
        c, s = float(np.mean(np.cos(2 * np.array(self.votes)))), float(np.mean(np.sin(2 * np.array(self.votes))))
        return math.atan2(s, c) / 2 if math.hypot(c, s) >= MIN_AGREEMENT else None

    # ------------------------------------------------------------------ decisions
    def act(self, obs: Observation) -> Decision:
        self._note_blocked(obs)
        if self.arrived_for is not None:  # at a viewpoint of a person: turn to them, not look around
            self.last_seen, self.look_turns, self.turned_to = (self.arrived_for, obs.step), 0, self.arrived_for
            self.arrived_for = None
        if self.backing:  # a step back under way (the base would stop it to centre the person): go on
            self._update_seen(obs)
            target = self._target(obs)
            decision = Decision.CONTINUE
            person = None
            if target is not None:
                person, self.last_seen = target.xy, (target.xy, obs.step)
                decision = replace(decision, sighting=_sighting(target))
        else:
            lost = self.last_seen  # the base forgets where a lost person was when it plans a view of there
            decision = super().act(obs)
            if decision.goal is not None and decision.stage != "handoff":
                self.view_of = None  # a search goal
            elif decision.goal is not None:  # a viewpoint of the person sighted, or of where one was lost
                self.view_of = decision.sighting.xy if decision.sighting else None if lost is None else lost[0]
            person = self.track if self.handed_off else None if decision.sighting is None else decision.sighting.xy
        if decision.sighting is not None:
            self.turned_to = None
        # nobody seen now (person None): the head stays on the last one for a while
        tilt = self.head.command(obs.camera_pose, obs.step, person, self.top(), vertical_fov(obs))
        self.recent = (self.recent + [(obs.pose, self.goal is not None and decision.action is None)])[-2:]
        return decision if tilt is None else replace(decision, head_tilt=tilt)

    def _note_blocked(self, obs: Observation) -> None:
        """Forget blocked places past their time; add one :data:`BLOCKED_AHEAD_M` ahead when the goal the robot
        followed in the last two acts was given up with the base where it stood at both (two blocked moves)."""
        self.blocked = [b for b in self.blocked if b.until > obs.step]
        if (self.goal_failed and len(self.recent) == 2 and all(following for _, following in self.recent)
                and all(_same_pose(p, obs.pose) for p, _ in self.recent)):
            x, y, yaw = obs.pose
            self.blocked.append(Blocked(x + BLOCKED_AHEAD_M * math.cos(yaw), y + BLOCKED_AHEAD_M * math.sin(yaw),
                                        obs.step + BLOCKED_STEPS, (x, y)))
        self.goal_failed = False

    def way_clear(self, obs: Observation) -> bool:
        """False when something off the map stands within the next forward move in depth
        (:meth:`~affectsim_nav.obstacles.UnmappedObstacles.ahead`): the follower gives the goal up before the
        move, and the place is kept out of as one two blocked moves leave, toward what was seen and at least
        :data:`BLOCKED_AHEAD_M` ahead (the base outside it: plans start where it stands)."""
        hit = self.unmapped.ahead(obs)
        if hit is not None:
            x, y = obs.pose[0], obs.pose[1]
            d = math.dist(hit, (x, y))  # > the robot's radius: the footprint is not looked in
            k = max(d, BLOCKED_AHEAD_M) / d
            self.blocked.append(Blocked(x + k * (hit[0] - x), y + k * (hit[1] - y), obs.step + BLOCKED_STEPS, (x, y)))
        return hit is None

    def _search_avoid(self) -> tuple[tuple[float, float, float], ...]:
        """The blocked places kept out of (x, y, :data:`BLOCKED_RADIUS_M`; m, ``map``)."""
        return tuple((b.x, b.y, BLOCKED_RADIUS_M) for b in self.blocked)

    def _back_off(self, obs: Observation) -> tuple[float, float, float] | None:
        """After :data:`BACK_OFF_AFTER` goals given up from where the base stands (since the last back-off),
        a goal away from them: the reachable cell :data:`BACK_OFF_BAND_M` from the base most opposite the mean
        direction of their blocked places, a detour counted against it (one planner call). Around a person
        pressing against the robot's flank, a path around the places ahead still sets off into them; None
        otherwise, or with no such cell."""
        here = [b for b in self.blocked if math.dist(b.base, obs.pose[:2]) < STUCK_M
                and b.until - BLOCKED_STEPS > self.backed_off]
        if len(here) < BACK_OFF_AFTER:
            return None
        self.backed_off = obs.step
        x, y = float(obs.pose[0]), float(obs.pose[1])
        ux, uy = sum(b.x - x for b in here), sum(b.y - y for b in here)
        norm = math.hypot(ux, uy)
        if norm < 1e-9:  # blocked all round evenly: no side to back off to
            return None
        p = self.planner
        field = p.plan_from((x, y), avoid=self._search_avoid())
        if field is None:
            return None
        gx, gy = p.centres()
        r = np.hypot(gx - x, gy - y)
        ii, jj = np.nonzero(p.traversable & np.isfinite(field.dist) & (r >= BACK_OFF_BAND_M[0])
                            & (r <= BACK_OFF_BAND_M[1]))
        if not len(ii):
            return None
        dx, dy, dist = gx[ii, jj] - x, gy[ii, jj] - y, r[ii, jj]
        cost = (dx * ux + dy * uy) / (dist * norm) + field.dist[ii, jj] / dist  # toward the blocks, detour
        k = int(np.argmin(cost))
        return float(gx[ii[k], jj[k]]), float(gy[ii[k], jj[k]]), math.atan2(float(dy[k]), float(dx[k]))

    def _may_push(self, obs: Observation) -> bool:
        """The baseline's rule, never again from a pose a move was blocked from, and only with the way ahead
        clear on the map (:meth:`_clear_ahead`) and in depth (:attr:`unmapped`)."""
        if self._forward_blocked(obs):
            self.no_push = obs.pose
        return (super()._may_push(obs) and not (self.no_push is not None and _same_pose(self.no_push, obs.pose))
                and self._clear_ahead(obs) and self.unmapped.ahead(obs) is None)

    def _clear_ahead(self, obs: Observation) -> bool:
        """Whether the base's centre can go :data:`~affectsim_core.protocol.FORWARD_M` straight ahead without
        coming nearer a map obstacle than its radius, or than it is now where it is nearer already: the follower
        pushed a robot facing a wall or furniture into it, every move clipped or sliding along it (the
        baseline does)."""
        x, y, yaw = obs.pose
        p = self.planner
        need = min(self.info.robot_radius, float(p.clearance[p.cell((x, y))]))
        steps = max(1, math.ceil(FORWARD_M / (p.res / 2)))
        return all(p.clearance[p.cell((x + FORWARD_M * k / steps * math.cos(yaw), y + FORWARD_M * k / steps
                                       * math.sin(yaw)))] >= need for k in range(1, steps + 1))

    def _before_handoff(self, obs: Observation, target: Person) -> Decision | None:
        """With :attr:`step_back`, step back first when the person is too near for the whole body to fit in
        the image (:func:`~affectsim_nav.head.fit_distance` of their measured height, less
        :data:`FIT_MARGIN_RAD`): to a viewpoint up to :data:`STEP_BACK_BAND_M` beyond that distance, once an
        episode. With :attr:`turn_square`, move first when the robot sees a person standing still (the stable
        sightings within :data:`STILL_M`) square-on, within :data:`SQUARE_ON_RAD` of their body axis (front or
        back: the two are not told apart), to the nearest three-quarter viewpoint of them (at least
        :data:`QUARTER_MIN` of :func:`three_quarter`), once an episode."""
        if self.step_back and not self.stepped_back and (band := self._step_back_band(obs, target)) is not None:
            self.stepped_back = True
            return self._move_to_view(self._approach(obs, target.xy, band), target)
        if self.turn_square and not self.squared and self._square_on(obs, target):
            self.squared = True
            return self._move_to_view(self._approach(obs, target.xy, min_quarter=QUARTER_MIN), target)
        return None

    def _square_on(self, obs: Observation, target: Person) -> bool:
        """Whether the stable sightings of ``target`` lie within :data:`STILL_M` of each other (standing still)
        and the base within :data:`SQUARE_ON_RAD` of their body axis (front or back); False without an axis."""
        axis = self.axis()
        return (axis is not None and max(math.dist(a.xy, b.xy) for a in self.streak for b in self.streak) <= STILL_M
                and bool(off_axis(axis, target.xy, obs.pose[:2]) < SQUARE_ON_RAD))

    def _step_back_band(self, obs: Observation, target: Person) -> tuple[float, float] | None:
        """Where the base may stand (m from ``target``) to see the whole body: from the fit distance (from
        the camera, :func:`~affectsim_nav.head.fit_distance` less :data:`FIT_MARGIN_RAD`, plus how far the
        camera sits ahead of the base) to :data:`STEP_BACK_BAND_M` beyond; None when the body fits from here."""
        fit = fit_distance(float(obs.camera_pose[2, 3]), self.top(), vertical_fov(obs) - FIT_MARGIN_RAD)
        if target.distance >= fit:
            return None
        ahead = math.dist(obs.camera_pose[:2, 3], obs.pose[:2])
        return fit + ahead, fit + ahead + STEP_BACK_BAND_M

    def _move_to_view(self, goal: tuple[float, float, float] | None, target: Person) -> Decision | None:
        """Go to ``goal``, a viewpoint of ``target`` chosen before handing off, without stopping on the way to
        centre them (None: no goal, hand off)."""
        if goal is None:
            return None
        self.goal, self.goal_person, self.backing = goal, target.xy, True  # act() notes whom it is a view of
        return Decision(goal=goal, stage="handoff", sighting=_sighting(target))

    def _search(self, obs: Observation) -> Decision:
        """The baseline's search, after the look before leaving (the base's ``last_seen`` is None: nobody
        seen, or a lost person's place already planned for), and, with someone seen now but no viewpoint of
        them, after waiting for a better sighting (up to :data:`NO_VIEW_WAIT_STEPS` an episode)."""
        if self.goal is None and self.last_seen is None and obs.step < START_LOOK_STEPS:
            return Decision(Action.STOP, stage="search")
        if (self.goal is None and self.last_seen is not None and self.last_seen[1] == obs.step
                and self.no_view_waits < NO_VIEW_WAIT_STEPS):
            self.no_view_waits += 1
            return Decision(Action.STOP, stage="handoff")
        if self.goal is None and (away := self._back_off(obs)) is not None:
            self.goal = away
            return Decision(goal=away, stage="search")
        return super()._search(obs)

    def on_goal_result(self, reached: bool) -> None:
        self.goal_failed = self.goal_failed or not reached
        if reached and self.view_of is not None and not (  # not a second time for a place nobody was seen at
                self.turned_to is not None and math.dist(self.turned_to, self.view_of) <= CONSISTENT_M):
            self.arrived_for = self.view_of
        self.backing, self.view_of = False, None
        super().on_goal_result(reached)

    def _avoid(self, person: tuple[float, float]) -> tuple[tuple[float, float, float], ...]:
        return ((person[0], person[1], self.person_clearance), *((x, y, SOCIAL_MARGIN_M) for x, y in self.others),
                *self._search_avoid())

    def _approach(self, obs: Observation, person: tuple[float, float], band: tuple[float, float] | None = None,
                  min_move: float = 0.0, min_quarter: float = 0.0) -> tuple[float, float, float] | None:
        """The viewpoint ``band`` (m; default :attr:`approach_band`, then :data:`WIDE_BAND_M` where it has none)
        from ``person`` with the least path length minus :data:`ANGLE_WEIGHT_M` x :func:`three_quarter`, in
        sight of the person, around every person seen, at least ``min_move`` (m) from the base and, with the
        body axis known, at least ``min_quarter`` of :func:`three_quarter` (one planner call)."""
        p = self.planner
        field = p.plan_from(obs.pose[:2], avoid=self._avoid(person))
        if field is None:
            return None
        gx, gy = p.centres()
        d = np.hypot(gx - person[0], gy - person[1])
        reachable = p.traversable & np.isfinite(field.dist)
        if min_move > 0:
            reachable &= np.hypot(gx - obs.pose[0], gy - obs.pose[1]) >= min_move
        for i, j in self.failed_goals:  # viewpoints that could not be reached
            reachable[max(0, i - 3):i + 4, max(0, j - 3):j + 4] = False
        axis = self.axis()
        for lo, hi in (band,) if band else (self.approach_band, WIDE_BAND_M):
            ii, jj = np.nonzero(reachable & (d >= lo) & (d <= hi))
            cx, cy = gx[ii, jj], gy[ii, jj]
            cost = field.dist[ii, jj].copy()
            if axis is not None:
                quarter = three_quarter(axis, person, (cx, cy))
                cost -= ANGLE_WEIGHT_M * quarter
                cost[quarter < min_quarter] = np.inf
            cost[~self._in_sight(cx, cy, person)] = np.inf
            if len(cost) and np.isfinite(cost.min()):
                k = int(np.argmin(cost))
                return float(cx[k]), float(cy[k]), math.atan2(person[1] - cy[k], person[0] - cx[k])
        return None

    def _in_sight(self, xs: np.ndarray, ys: np.ndarray, person: tuple[float, float]) -> np.ndarray:
        """Per candidate (x, y) whether the segment to ``person`` (less :data:`SIGHT_SHORT_M`) crosses no
        map obstacle and passes :data:`SIGHT_CLEARANCE_M` clear of every other person seen."""
        info = self.info  # the map at full resolution: the planning grid may step over a thin wall
        vx, vy = person[0] - xs, person[1] - ys
        length = np.hypot(vx, vy)
        t = np.linspace(0.0, 1.0, max(2, int(math.ceil(float(length.max(initial=0.0)) / (info.resolution / 2)))))
        frac = np.clip((length - SIGHT_SHORT_M) / np.maximum(length, 1e-9), 0.0, 1.0)[:, None] * t[None, :]
        px, py = xs[:, None] + vx[:, None] * frac, ys[:, None] + vy[:, None] * frac
        h, w = info.occupancy.shape
        i = np.clip(np.floor((py - info.origin[1]) / info.resolution).astype(int), 0, h - 1)
        j = np.clip(np.floor((px - info.origin[0]) / info.resolution).astype(int), 0, w - 1)
        ok = (info.occupancy[i, j] == 0).all(axis=1)
        for ox, oy in self.others:  # distance from the other person to each segment
            u = np.clip(((ox - xs) * vx + (oy - ys) * vy) / np.maximum(length ** 2, 1e-9), 0.0, 1.0)
            ok &= np.hypot(xs + u * vx - ox, ys + u * vy - oy) >= SIGHT_CLEARANCE_M
        return ok


def _same_pose(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """Whether poses (x, y m, yaw rad) differ by less than a move that made no progress."""
    return math.dist(a[:2], b[:2]) < STUCK_M and abs(math.remainder(a[2] - b[2], math.tau)) < SAME_HEADING_RAD


def off_axis(axis: float, person: tuple[float, float], viewer):
    """The angle (rad, 0 to pi/2) between the body axis ``axis`` (rad, ``map``, modulo pi) of a person at
    ``person`` and the direction from them to ``viewer`` (map; arrays allowed): 0 square-on (front or back),
    pi/2 in profile."""
    dx, dy = np.asarray(viewer[0], float) - person[0], np.asarray(viewer[1], float) - person[1]
    return np.abs(np.remainder(np.arctan2(dy, dx) - axis + math.pi / 2, math.pi) - math.pi / 2)


def three_quarter(axis: float, person: tuple[float, float], viewer):
    """How close ``viewer`` (map; arrays allowed) is to a three-quarter view of a person whose body axis is
    ``axis`` (rad, modulo pi): 1 at 45 deg off the axis (front or back), 0 square-on or in profile."""
    return 1.0 - np.abs(off_axis(axis, person, viewer) - math.pi / 4) / (math.pi / 4)


@POLICIES.register("viewpoint-fit")
class FitViewpointPolicy(ViewpointPolicy):
    """``viewpoint`` with the view-quality stop: three stable sightings hand off only when the person's
    whole body fits in the image from there; a person nearer is first stepped back from, once an episode
    (:meth:`ViewpointPolicy._before_handoff`)."""

    step_back = True


@POLICIES.register("viewpoint-angle")
class AngleViewpointPolicy(ViewpointPolicy):
    """``viewpoint`` with the view-angle stop: three stable sightings of a person standing still, seen
    square-on to their body axis (front or back), hand off only after a move to the nearest three-quarter
    viewpoint of them, once an episode (:meth:`ViewpointPolicy._before_handoff`)."""

    turn_square = True
