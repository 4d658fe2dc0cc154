"""The ``viewpoint`` policy's parts: the body axis from 3-D keypoints (and how well it is estimated on
rendered people), three-quarter viewpoints in sight, other people kept out of the line of sight, the
head framing the person (the framing itself: test_head.py), the step back from a person too near
for the whole body, the move off a square-on view, and moves that were blocked by something the map
does not show."""

import math
from dataclasses import replace

import numpy as np
import pytest

from affectsim_core.actions import Action
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import Person, PersonDetection
from affectsim_core.protocol import STEP_SECONDS
from affectsim_nav.baseline import HANDOFF_STEPS, FrontierSearchPolicy
from affectsim_nav.executor import heading_to
from affectsim_nav.head import BODY_TOP_M, fit_distance, framing_tilt, vertical_fov
from affectsim_nav.planner import GridPlanner
from affectsim_nav.viewpoint import (ANGLE_WEIGHT_M, BACK_OFF_AFTER, BACK_OFF_BAND_M, BLOCKED_AHEAD_M, BLOCKED_RADIUS_M, BLOCKED_STEPS, FIT_MARGIN_RAD,
                                     LOST_WAIT_STEPS, NO_VIEW_WAIT_STEPS, QUARTER_MIN, SQUARE_ON_RAD, START_LOOK_STEPS,
                                     STEP_BACK_BAND_M, STILL_M, WIDE_BAND_M, AngleViewpointPolicy, FitViewpointPolicy,
                                     ViewpointPolicy,
                                     body_axis_in_map, off_axis, three_quarter)

# a head camera at the map origin looking along map +x: optical x (right) = map -y, optical y (down) = map -z
CAMERA = np.array([[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 1.1], [0.0, 0.0, 0.0, 1.0]])


def _detection(left, right, visible=1.0) -> PersonDetection:
    world = np.zeros((33, 3))
    world[11], world[12] = left, right
    vis = np.ones(33)
    vis[11] = visible
    return PersonDetection(np.zeros((33, 2)), vis, (0.0, 0.0, 1.0, 1.0), world)


@pytest.mark.parametrize("left, right, axis", [
    ((0.2, 0, 0), (-0.2, 0, 0), 0.0),  # left shoulder on the image's right: facing the camera (-x in map)
    ((-0.2, 0, 0), (0.2, 0, 0), 0.0),  # the back seen: the same axis
    ((0, 0, -0.2), (0, 0, 0.2), math.pi / 2),  # profile
    ((0.1, 0, 0.1), (-0.1, 0, -0.1), math.pi / 4),  # half turned
])
def test_the_body_axis_is_the_normal_of_the_shoulder_line_in_map(left, right, axis):
    got = body_axis_in_map(_detection(left, right), CAMERA)
    assert abs(math.remainder(got - axis, math.pi)) < 1e-9, got


def test_no_axis_without_both_shoulders_or_from_a_foreshortened_line():
    assert body_axis_in_map(_detection((0.2, 0, 0), (-0.2, 0, 0), visible=0.3), CAMERA) is None
    assert body_axis_in_map(_detection((0.02, -0.3, 0.0), (-0.02, 0.0, 0.03)), CAMERA) is None  # 5 cm in the floor plane


def test_three_quarter_peaks_at_45_degrees_off_the_axis_front_or_back():
    person = (0.0, 0.0)
    for viewer in ((1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)):  # the four three-quarter views
        assert three_quarter(0.0, person, viewer) == pytest.approx(1.0)
    for viewer in ((2.0, 0.0), (-2.0, 0.0), (0.0, 3.0)):  # square-on (front, back) and profile
        assert three_quarter(0.0, person, viewer) == pytest.approx(0.0, abs=1e-12)
    assert three_quarter(0.0, person, (math.cos(math.radians(22.5)), math.sin(math.radians(22.5)))) == pytest.approx(0.5)
    assert three_quarter(math.pi / 4, person, (1.0, 0.0)) == pytest.approx(1.0)  # the axis turned, arrays allowed
    np.testing.assert_allclose(three_quarter(0.0, person, (np.array([1.0, 2.0]), np.array([1.0, 0.0]))), [1.0, 0.0],
                               atol=1e-12)


def test_the_axis_is_the_circular_mean_of_votes_across_the_half_turn():
    policy = ViewpointPolicy(detector=None)
    policy.votes = [math.radians(85), math.radians(-85)]  # both near pi/2: one wrapped
    assert abs(math.remainder(policy.axis() - math.pi / 2, math.pi)) < 1e-9
    policy.votes = [0.0, math.pi / 2]  # disagreeing votes: no axis
    assert policy.axis() is None


@pytest.mark.slow
def test_the_body_axis_of_rendered_people_is_mostly_within_45_degrees():
    """3 performers x 12 headings in front of the robot: BlazePose's chest side is often wrong, the axis mostly not."""
    from affectsim_bridge.backends import BACKENDS
    from affectsim_bridge.backends.base import HumanPlacement
    from affectsim_bridge.humans.generator import generate
    from affectsim_bridge.humans.styles import Performer
    from affectsim_bridge.world.scene import load_scene
    from affectsim_core.geometry import Pose2D
    from affectsim_eval.episode.worlds import SimulatedRobot
    from affectsim_perception.person_model import BlazePose

    backend, detector, scene = BACKENDS.create("mujoco"), BlazePose(), load_scene("test_apartment")
    errors = []
    try:
        for k, emotion in enumerate(("happy", "sad", "angry")):
            motion = generate("s", "standing", emotion, Performer.sample("N", np.random.default_rng(k)), 1,
                              scenario="gestures")
            for deg in range(0, 360, 30):
                yaw = math.radians(deg)
                backend.load(scene, Pose2D(1.5, 2.5, 0.0),
                             (HumanPlacement("t", 4.0, 2.5, yaw, is_target=True, motion=motion, phase=0.3),))
                obs = SimulatedRobot(backend).observe(0)
                det = detector.detect(np.array(obs.rgb))
                axis = body_axis_in_map(det, obs.camera_pose) if det is not None else None
                if axis is not None:
                    errors.append(abs(math.degrees(math.remainder(axis - yaw, math.pi))))
    finally:
        detector.close()
        backend.close()
    # dataset 1a63e6736343's takes: 30 axes, median 20 deg, 28 within 45 deg (46 and 84 deg the others); the
    # policy averages 6 sightings and weighs the angle lightly
    assert len(errors) >= 30 and np.median(errors) <= 25.0 and np.mean(np.array(errors) <= 45.0) >= 0.9, errors


def _room(wall_x: float | None = None) -> EpisodeInfo:
    """An empty 10 x 10 m room (5 cm cells, origin (0, 0)), optionally a wall at x = ``wall_x`` from y = 1 to 9 m."""
    occ = np.zeros((200, 200), np.int8)
    occ[:2, :] = occ[-2:, :] = occ[:, :2] = occ[:, -2:] = 100
    if wall_x is not None:
        j = int(wall_x / 0.05)
        occ[20:180, j:j + 2] = 100
    return EpisodeInfo.make(occ, (0.0, 0.0), 0.05, (2.0, 5.0, 0.0), 0.3)


def _policy(info: EpisodeInfo, axis=None, others=(), cls=ViewpointPolicy) -> ViewpointPolicy:
    policy = cls(detector=None)
    policy.reset(info, GridPlanner(info))
    if axis is not None:
        policy.votes = [axis, axis]
    policy.others = list(others)
    return policy


def _obs(x: float, y: float, step: int = 0) -> Observation:
    return Observation.make(np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), np.float32), (2.0, 2.0, 2.0, 2.0),
                            np.eye(4), (x, y, 0.0), STEP_SECONDS * step, step)


def test_a_three_quarter_viewpoint_is_worth_at_most_the_angle_weight_of_path():
    person, start = (5.0, 5.0), _obs(5.0, 1.5)  # the robot on the person's profile side (their chest along x)
    near = _policy(_room())._approach(start, person)  # no axis known: the nearest viewpoint (below them)
    assert near[1] < person[1] and three_quarter(0.0, person, near[:2]) < 0.2
    view = _policy(_room(), axis=0.0)._approach(start, person)
    assert three_quarter(0.0, person, view[:2]) >= three_quarter(0.0, person, near[:2]) + 0.1, (near, view)
    path = lambda goal: _policy(_room()).planner.plan_from(start.pose[:2]).dist[  # noqa: E731
        _policy(_room()).planner.cell(goal[:2])]
    assert path(view) - path(near) <= ANGLE_WEIGHT_M + 1e-6
    assert 1.8 - 0.1 <= math.dist(view[:2], person) <= 2.3 + 0.1
    assert abs(math.remainder(view[2] - math.atan2(person[1] - view[1], person[0] - view[0]), 2 * math.pi)) < 1e-9


def test_a_viewpoint_behind_a_wall_is_not_chosen():
    person = (5.0, 5.0)
    policy = _policy(_room(wall_x=6.5), axis=0.0)  # on their +x side a wall from y 1 to 9 m
    view = policy._approach(_obs(8.0, 5.0), person)  # the robot starts behind that wall
    assert view[0] < 6.5, view  # on the person's side of the wall: the far side sees only the wall


def test_another_person_is_kept_off_the_line_of_sight_and_away_from_the_robot():
    person, other = (5.0, 5.0), (7.0, 5.0)  # the other person stands where one square-on view would be
    policy = _policy(_room(), axis=0.0, others=[other])
    view = policy._approach(_obs(8.5, 5.0), person)
    assert math.dist(view[:2], other) >= 1.0, view
    sight = policy._in_sight(np.array([8.0, 5.0]), np.array([5.0, 7.5]), person)
    assert not sight[0]  # from (8, 5) the other person at (7, 5) stands on the line to (5, 5)
    assert sight[1]


def _box(half: float) -> EpisodeInfo:
    """A square room ``2 * half`` m wide around (5, 5) m, walls everywhere else (5 cm cells)."""
    occ = np.full((200, 200), 100, np.int8)
    lo, hi = int((5.0 - half) / 0.05), int((5.0 + half) / 0.05)
    occ[lo:hi, lo:hi] = 0
    return EpisodeInfo.make(occ, (0.0, 0.0), 0.05, (4.0, 5.0, 0.0), 0.3)


def test_with_no_viewpoint_in_the_approach_band_one_in_the_wide_band_is_chosen():
    """A person 1 m away in a 3 m wide room: no place 1.8-2.3 m from them fits the robot; one
    :data:`WIDE_BAND_M` away does (the baseline's search left such a person to look elsewhere)."""
    person = (5.0, 5.0)
    view = _policy(_box(1.5))._approach(_obs(4.0, 5.0), person)
    assert view is not None and WIDE_BAND_M[0] - 0.05 <= math.dist(view[:2], person) < 1.8, view
    assert _policy(_box(1.5))._approach(_obs(4.0, 5.0), person, band=(1.8, 2.3)) is None  # an explicit band is kept


def test_someone_seen_with_no_viewpoint_of_them_is_waited_for_a_while_an_episode():
    """Seen 0.9 m away with too few keypoints to hand off, in a room too small for any viewpoint of them:
    the robot stays facing them :data:`NO_VIEW_WAIT_STEPS` steps an episode (a sighting may improve), then
    searches."""
    policy, person = _policy(_box(1.0)), (5.0, 5.0)
    seen = _person(person, (4.1, 5.0))
    policy._target = lambda o: replace(seen, n_visible=5)
    decisions = [policy.act(_obs(4.1, 5.0, k)) for k in range(START_LOOK_STEPS, START_LOOK_STEPS + NO_VIEW_WAIT_STEPS + 1)]
    assert all((d.action, d.stage) == (Action.STOP, "handoff") for d in decisions[:-1]), decisions
    assert decisions[-1].stage == "search", decisions[-1]


def test_the_head_frames_the_tracked_person_with_one_command():
    policy, obs = _policy(_room()), _obs(2.0, 5.0)
    policy.handed_off, policy.track = True, (4.2, 5.0)  # following a person 2.2 m ahead
    policy._target = lambda o: None  # the detector misses them this step
    first = policy.act(obs)
    assert first.head_tilt == pytest.approx(framing_tilt(obs.camera_pose, (4.2, 5.0)))
    assert policy.act(obs).head_tilt is None  # already pointing there: nothing sent again


def _person(xy, robot_xy) -> Person:
    det = PersonDetection(np.zeros((33, 2)), np.ones(33), (0.0, 0.0, 1.0, 1.0), np.zeros((33, 3)))
    return Person(xy, math.dist(xy, robot_xy), 0.0, 13, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), det)


def test_a_person_too_near_for_the_whole_body_is_stepped_back_from_once_then_faced():
    """Three stable sightings 1.4 m away (a standing adult fits from about 2.2 m): instead of the
    handoff a viewpoint beyond the fit distance; the step back goes on while the person is in sight;
    on arrival the robot turns to them rather than looking around; the next time it hands off."""
    policy, person = _policy(_room(), cls=FitViewpointPolicy), (3.4, 5.0)
    camera = CAMERA.copy()
    camera[:2, 3] = 2.0, 5.0  # 1.1 m up, looking along +x at the person
    f = 2.0 / math.tan(math.radians(46.83) / 2)  # the Fetch head camera's field of view on a 4 x 4 image
    start = Observation.make(np.zeros((4, 4, 3), np.uint8), np.ones((4, 4), np.float32), (f, f, 2.0, 2.0), camera,
                             (2.0, 5.0, 0.0), 0.0, 0)
    policy._target = lambda o: _person(person, o.pose[:2])
    decisions = [policy.act(start) for _ in range(HANDOFF_STEPS)]
    assert not any(d.handoff for d in decisions)
    goal = decisions[-1].goal
    fit = fit_distance(1.1, BODY_TOP_M, vertical_fov(start) - FIT_MARGIN_RAD)
    assert 2.0 < fit < 2.6
    assert goal is not None and fit <= math.dist(goal[:2], person) <= fit + STEP_BACK_BAND_M + 0.1, goal
    going = policy.act(start)  # still in sight: the base alone would stop to centre them
    assert going.keep_going and going.sighting is not None and going.sighting.xy == person
    policy.on_goal_result(True)
    away = Observation.make(start.rgb, start.depth, start.intrinsics, start.camera_pose, (goal[0], goal[1], 2.0),
                            0.0, 40)  # long after the person was last seen, facing away from them
    policy._target = lambda o: None
    turn = policy.act(away)
    toward = Action.TURN_LEFT if heading_to(away.pose, person) > 0 else Action.TURN_RIGHT
    assert (turn.action, turn.stage) == (toward, "handoff")  # not the search's look-around
    policy._target = lambda o: _person(person, o.pose[:2])
    last = [policy.act(start) for _ in range(HANDOFF_STEPS)][-1]
    assert last.handoff  # once an episode: the person is then observed from where they are seen
    plain = _policy(_room())  # viewpoint itself hands off where the baseline does
    plain._target = lambda o: _person(person, o.pose[:2])
    assert [plain.act(start) for _ in range(HANDOFF_STEPS)][-1].handoff


def _square_policy(axis: float) -> ViewpointPolicy:
    return _policy(_room(), axis=axis, cls=AngleViewpointPolicy)


def test_a_person_standing_still_seen_square_on_is_first_moved_around_to_a_three_quarter_view():
    """Three stable sightings of a person 2.2 m ahead whose body axis points at the robot (front or back):
    instead of the handoff the nearest three-quarter viewpoint of them, in the approach band; from there,
    the handoff (once an episode). Seen in profile, or moving, the person is handed off at once."""
    person, start = (4.2, 5.0), _obs(2.0, 5.0)
    assert off_axis(0.0, person, start.pose[:2]) < SQUARE_ON_RAD
    policy = _square_policy(0.0)
    policy._target = lambda o: _person(person, o.pose[:2])
    decisions = [policy.act(start) for _ in range(HANDOFF_STEPS)]
    assert not any(d.handoff for d in decisions)
    goal = decisions[-1].goal
    assert goal is not None and three_quarter(0.0, person, goal[:2]) >= QUARTER_MIN, goal
    assert 1.8 - 0.1 <= math.dist(goal[:2], person) <= 2.3 + 0.1, goal
    assert policy.act(start).keep_going  # on the way, the person in sight: no stop to centre them
    policy.on_goal_result(True)
    there = _obs(goal[0], goal[1], 20)
    last = [policy.act(there) for _ in range(HANDOFF_STEPS + 1)]
    assert any(d.handoff for d in last), last  # turned to them on arriving, then handed off
    policy = _square_policy(0.0)  # the same square-on view, once more from the start: handed off from there now
    policy.squared = True
    policy._target = lambda o: _person(person, o.pose[:2])
    assert [policy.act(start) for _ in range(HANDOFF_STEPS)][-1].handoff
    profile = _square_policy(math.pi / 2)
    profile._target = lambda o: _person(person, o.pose[:2])
    assert [profile.act(start) for _ in range(HANDOFF_STEPS)][-1].handoff
    walking = _square_policy(0.0)  # located STILL_M + 0.1 m further each step: not standing still
    places = iter([(person[0] + k * (STILL_M + 0.1), person[1]) for k in range(HANDOFF_STEPS)])
    walking._target = lambda o: _person(next(places), o.pose[:2])
    assert [walking.act(start) for _ in range(HANDOFF_STEPS)][-1].handoff
    plain = _policy(_room(), axis=0.0)  # viewpoint itself hands off where the baseline does
    plain._target = lambda o: _person(person, o.pose[:2])
    assert [plain.act(start) for _ in range(HANDOFF_STEPS)][-1].handoff


def test_a_viewpoint_of_a_person_lost_from_view_ends_facing_where_they_were():
    """Lost from view, the person is waited for, facing where they were last seen (the detector misses a
    near person in single frames), then a viewpoint of that place is planned; arriving there the robot turns
    to that place (not to the viewpoint it stands on)."""
    policy, person = _policy(_room()), (6.0, 5.0)
    policy._target = lambda o: None
    policy.last_seen = (person, 0)  # seen at step 0 straight ahead, lost since
    for k in range(LOST_WAIT_STEPS + 1):
        wait = policy.act(_obs(2.0, 5.0, k))
        assert (wait.action, wait.stage) == (Action.STOP, "handoff"), (k, wait)
    start = _obs(2.0, 5.0, LOST_WAIT_STEPS + 1)
    goal = policy.act(start).goal
    assert goal is not None and 1.8 - 0.1 <= math.dist(goal[:2], person) <= 2.3 + 0.1, goal
    policy.on_goal_result(True)
    there = Observation.make(start.rgb, start.depth, start.intrinsics, start.camera_pose,
                             (goal[0] + 0.1, goal[1], math.pi / 2), 0.0, 30)  # just past the goal, facing +y
    turn = policy.act(there)
    assert heading_to(there.pose, person) < 0 < heading_to(there.pose, goal[:2])  # the two lie on opposite sides
    toward = Action.TURN_LEFT if heading_to(there.pose, person) > 0 else Action.TURN_RIGHT
    assert (turn.action, turn.stage) == (toward, "handoff")


def test_a_place_looked_at_from_its_viewpoint_with_nobody_there_is_not_planned_for_again():
    """Arriving at a viewpoint of where a person was lost, the robot turns to that place once (and waits
    there as for anyone lost); nobody there, it plans no second viewpoint of it and searches. (It planned the same one again, reached where it
    stood, every step to the end of the budget: in 3 and 5 of 240 test episodes with reactive people, for
    `viewpoint` and `viewpoint-fit`; in two a person waited beside it to pass.) Seeing anyone makes the
    place count again."""
    policy, person = _policy(_room()), (6.0, 5.0)
    policy._target = lambda o: None
    policy.last_seen = (person, START_LOOK_STEPS)
    stages, end = [], START_LOOK_STEPS + 2 * LOST_WAIT_STEPS + 8
    for k in range(START_LOOK_STEPS, end):
        decision = policy.act(_obs(4.0, 5.0, k))  # facing the place 2 m ahead: its viewpoint is where the robot is
        stages.append("goal" if decision.goal is not None else decision.stage)
        if decision.goal is not None:
            assert math.dist(decision.goal[:2], (4.0, 5.0)) < 0.1, decision.goal
            policy.on_goal_result(True)
    waits = ["handoff"] * (LOST_WAIT_STEPS + 1)
    assert stages == waits + ["goal"] + waits + ["goal"] + ["search"] * 4, stages
    policy._target = lambda o: _person(person, o.pose[:2])
    policy.act(_obs(4.0, 5.0, end))
    assert policy.turned_to is None


def test_nobody_seen_yet_the_robot_watches_from_its_start_before_searching():
    """The detector misses the person in the first frames: the robot stays where it started for
    START_LOOK_STEPS, then searches; a person seen during the look is handed off to from the start."""
    policy = _policy(_room())
    policy._target = lambda o: None
    still = [policy.act(_obs(2.0, 5.0, k)) for k in range(START_LOOK_STEPS)]
    assert all(d.action == Action.STOP and d.goal is None and d.stage == "search" for d in still), still
    base = _policy(_room(), cls=FrontierSearchPolicy)
    base._target = lambda o: None
    first = base.act(_obs(2.0, 5.0))
    assert first.action != Action.STOP or first.goal is not None  # the baseline searches at once
    after = policy.act(_obs(2.0, 5.0, START_LOOK_STEPS))
    assert (after.action, after.goal) == (first.action, first.goal)  # this policy, after looking
    found, person = _policy(_room()), (4.2, 5.0)
    found._target = lambda o: None
    found.act(_obs(2.0, 5.0))  # a miss at the start
    found._target = lambda o: _person(person, o.pose[:2])
    assert [found.act(_obs(2.0, 5.0, k)) for k in (1, 2, 3)][-1].handoff


def test_a_goal_given_up_after_two_blocked_moves_is_kept_out_of_for_a_while():
    """The executor gives a goal up after two moves that left the base where it was: the place ahead is
    kept out of by the search's paths and by viewpoints for BLOCKED_STEPS, then forgotten. A goal given
    up at once (no path), or after moves that went somewhere, leaves nothing."""
    def going(poses):
        """A policy that set off to a viewpoint of a person lost 4 m ahead and stood at ``poses``."""
        policy = _policy(_room())
        policy._target = lambda o: None
        policy.last_seen = ((6.0, 5.0), -LOST_WAIT_STEPS - 1)  # lost, and waited for
        decisions = [policy.act(_obs(x, 5.0, k)) for k, x in enumerate(poses)]
        assert decisions[0].goal is not None and all(d.keep_going for d in decisions[1:])
        policy.on_goal_result(False)  # the executor gives it up
        policy.act(_obs(poses[-1], 5.0, len(poses)))
        return policy
    policy = going([2.0, 2.0])
    (x, y, r), = policy._search_avoid()
    assert (x, y, r) == pytest.approx((2.0 + BLOCKED_AHEAD_M, 5.0, BLOCKED_RADIUS_M))
    assert (x, y, r) in policy._avoid((5.0, 5.0))  # viewpoints of a person keep out of it
    policy.seen[:] = False
    policy.seen[:, :policy.planner.cell((3.0, 5.0))[1]] = True  # a frontier 1 m ahead, the path to it blocked
    policy.failed_goals.clear()
    goal = policy._next_viewpoint(_obs(2.0, 5.0, 3))
    field = policy.planner.plan_from((2.0, 5.0))  # the plan the goal was chosen on
    assert goal is not None and np.isfinite(field.dist[policy.planner.cell(goal[:2])])
    assert not np.isfinite(field.dist[policy.planner.cell((x, y))])
    policy.act(_obs(2.0, 5.0, 2 + BLOCKED_STEPS))
    assert policy._search_avoid() == ()
    assert going([2.0])._search_avoid() == ()  # no path: given up before any move
    assert going([2.0, 2.25])._search_avoid() == ()  # the base moved


def test_the_follower_does_not_push_into_a_wall_on_the_map():
    """Following a person 5 m ahead with a wall 0.5 m ahead of the base: a forward move would end in it (the
    map inflated by the robot's 0.3 m radius); the baseline pushes, this policy stays, and moves on when the
    way is clear."""
    def first(cls, wall_x):
        policy = _policy(_room(wall_x), cls=cls)
        policy._target = lambda o: None
        policy.handed_off, policy.track = True, (7.0, 5.0)
        return policy.act(_obs(2.0, 5.0)).action
    assert first(FrontierSearchPolicy, 2.5) == Action.FORWARD
    assert first(ViewpointPolicy, 2.5) == Action.STOP
    assert first(ViewpointPolicy, 2.9) == Action.FORWARD  # 0.25 m ahead the base still keeps 0.3 m clear
    assert first(ViewpointPolicy, None) == Action.FORWARD


def test_goals_given_up_from_one_place_three_times_send_the_robot_away_from_where_they_were_blocked():
    """A person pressing against the robot's flank blocks every path that sets off past them: after
    BACK_OFF_AFTER goals given up from one place, each after two blocked moves toward headings east
    (-20, 0, +20 deg), the next goal lies BACK_OFF_BAND_M away on the other side, reachable; the blocks
    noted before it do not count towards another back-off, and fewer give none."""
    policy = _policy(_room())
    policy._target = lambda o: None
    step = START_LOOK_STEPS

    def blocked_at(yaw: float):
        """A goal followed for two moves that left the base at (5, 5) heading ``yaw``, then given up."""
        nonlocal step
        policy.goal = (9.0, 5.0, 0.0)
        for _ in range(2):
            assert policy.act(replace(_obs(5.0, 5.0, step), pose=(5.0, 5.0, yaw))).keep_going
            step += 1
        policy.on_goal_result(False)
        return policy.act(replace(_obs(5.0, 5.0, step), pose=(5.0, 5.0, yaw)))

    here = lambda: replace(_obs(5.0, 5.0, step), pose=(5.0, 5.0, 0.0))  # noqa: E731
    for a in (-20, 0):
        blocked_at(math.radians(a))
    assert policy._back_off(here()) is None  # two: the search goes on
    away = blocked_at(math.radians(20)).goal
    assert len(policy.blocked) == BACK_OFF_AFTER
    assert away is not None and BACK_OFF_BAND_M[0] - 0.05 <= math.dist(away[:2], (5.0, 5.0)) <= BACK_OFF_BAND_M[1] + 0.05
    assert away[0] < 5.0 - 0.7 and abs(away[1] - 5.0) < 0.3, away  # west, opposite the blocks
    assert np.isfinite(policy.planner.plan_from((5.0, 5.0), avoid=policy._search_avoid()).dist[
        policy.planner.cell(away[:2])])
    policy.goal = None
    assert policy._back_off(here()) is None  # the same blocks: no second back-off


def test_the_follower_does_not_push_again_from_where_a_move_was_blocked():
    """Following a person beyond FOLLOW_MAX whose way is blocked: the baseline moves forward every other
    step; this policy once, then only from another pose."""
    def follow(cls, poses):
        policy = _policy(_room(), cls=cls)
        policy._target = lambda o: None
        policy.handed_off, policy.track = True, (7.0, 5.0)  # 5 m straight ahead
        return [policy.act(_obs(x, 5.0, k)).action for k, x in enumerate(poses)]
    blocked = [2.0] * 5
    assert follow(FrontierSearchPolicy, blocked) == [Action.FORWARD, Action.STOP] * 2 + [Action.FORWARD]
    assert follow(ViewpointPolicy, blocked) == [Action.FORWARD] + [Action.STOP] * 4
    assert follow(ViewpointPolicy, blocked[:3] + [2.1]) == [Action.FORWARD] + [Action.STOP] * 2 + [Action.FORWARD]
