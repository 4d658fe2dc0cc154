"""Something the map does not show, seen in depth: the check (:class:`UnmappedObstacles`) on depth images
rendered here from a box standing on the floor, what ``viewpoint`` does with it (gives a goal up before the
move into it, keeps the follower from pushing into it), and the built-in follower asking before each move
with a person in the simulator."""

import math

import numpy as np
import pytest

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.reactive import PERSON_RADIUS_M
from affectsim_bridge.humans.styles import Performer
from affectsim_bridge.world.scene import load_scene
from affectsim_core.actions import Action
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_eval.episode.worlds import SimulatedRobot
from affectsim_nav.active import ActiveEpisode
from affectsim_nav.baseline import FrontierSearchPolicy
from affectsim_nav.obstacles import UnmappedObstacles
from affectsim_nav.planner import GridPlanner
from affectsim_nav.policy import Decision, Policy
from affectsim_nav.viewpoint import BLOCKED_AHEAD_M, BLOCKED_STEPS, ViewpointPolicy

W, H, F = 160, 120, 138.5  # pixels; 2 atan(60 / 138.5) = 46.8 deg vertical field of view, the Fetch head camera's
CAMERA_AHEAD_M, CAMERA_UP_M = 0.1, 1.1  # the camera's place on the base (m ahead of its centre, m up)


def _room(wall_at: tuple[float, float] | None = None) -> EpisodeInfo:
    """An empty 10 x 10 m room (5 cm cells), optionally a 0.6 x 0.6 m block centred at ``wall_at`` (m)."""
    occ = np.zeros((200, 200), np.int8)
    occ[:2, :] = occ[-2:, :] = occ[:, :2] = occ[:, -2:] = 100
    if wall_at is not None:
        i, j = int(wall_at[1] / 0.05), int(wall_at[0] / 0.05)
        occ[i - 6:i + 6, j - 6:j + 6] = 100
    return EpisodeInfo.make(occ, (0.0, 0.0), 0.05, (2.0, 5.0, 0.0), 0.3)


def _seen(x: float, y: float, box_ahead: float | None, box_side: float = 0.0, step: int = 0) -> Observation:
    """The level head camera of a base at (x, y) facing +x, seeing the floor and, when ``box_ahead`` is given,
    a 0.5 m wide, 1.7 m tall box whose face stands ``box_ahead`` m ahead of the camera and ``box_side`` m
    to its left (a person): depth rendered by intersecting each pixel's ray with them."""
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    right, down = (u - W / 2) / F, (v - H / 2) / F  # ray per metre of depth, optical axes
    depth = np.full((H, W), np.nan, np.float32)
    floor = down > 1e-6
    depth[floor] = CAMERA_UP_M / down[floor]
    if box_ahead is not None:
        left_m, up_m = -right * box_ahead, CAMERA_UP_M - down * box_ahead
        on_box = (np.abs(left_m - box_side) <= 0.25) & (up_m >= 0.0) & (up_m <= 1.7)
        depth[on_box] = box_ahead
    camera = np.array([[0.0, 0.0, 1.0, x + CAMERA_AHEAD_M], [-1.0, 0.0, 0.0, y], [0.0, -1.0, 0.0, CAMERA_UP_M],
                       [0.0, 0.0, 0.0, 1.0]])
    return Observation.make(np.zeros((H, W, 3), np.uint8), depth, (F, F, W / 2, H / 2), camera, (x, y, 0.0),
                            0.25 * step, step)


def test_something_off_the_map_within_the_next_move_is_found_where_it_stands():
    """The box's face 0.45 m ahead of the camera is 0.55 m ahead of the base centre: a 0.25 m move of a 0.3 m
    radius base reaches it. Farther, beside the path, on the map, or only the floor: nothing."""
    check = UnmappedObstacles(_room())
    hit = check.ahead(_seen(2.0, 5.0, 0.45))
    assert hit is not None and hit == pytest.approx((2.0 + CAMERA_AHEAD_M + 0.45, 5.0), abs=0.05)
    assert check.ahead(_seen(2.0, 5.0, 0.8)) is None  # beyond the move
    assert check.ahead(_seen(2.0, 5.0, 0.45, box_side=0.8)) is None  # beside the swept disc
    assert check.ahead(_seen(2.0, 5.0, None)) is None  # the floor only
    assert UnmappedObstacles(_room(wall_at=(2.85, 5.0))).ahead(_seen(2.0, 5.0, 0.45)) is None  # mapped
    assert check.ahead(_seen(2.0, 5.0, 0.8), reach=0.6) is not None  # a longer move reaches it


@pytest.mark.parametrize("box_ahead", [0.45, 0.25])
def test_the_way_is_not_clear_into_something_off_the_map_and_its_place_is_kept_out_of(box_ahead):
    """A person 0.55 or 0.35 m ahead (too near for the detector): the way is not clear, and a place toward them
    at least BLOCKED_AHEAD_M ahead is kept out of for BLOCKED_STEPS, so the next plan goes round them from where
    the robot stands (a disc around the base would leave it nowhere to go); 1.6 m ahead the way is clear."""
    policy = ViewpointPolicy(detector=None)
    policy.reset(_room(), GridPlanner(_room()))
    assert policy.way_clear(_seen(2.0, 5.0, 1.5, step=7)) and policy.blocked == []
    assert not policy.way_clear(_seen(2.0, 5.0, box_ahead, step=7))
    (x, y, r), = policy._search_avoid()
    ahead = max(CAMERA_AHEAD_M + box_ahead, BLOCKED_AHEAD_M)
    assert (x, y) == pytest.approx((2.0 + ahead, 5.0), abs=0.05) and policy.blocked[0].until == 7 + BLOCKED_STEPS
    field = policy.planner.plan_from((2.0, 5.0), avoid=policy._search_avoid())
    assert not np.isfinite(field.dist[policy.planner.cell((2.0 + ahead, 5.0))])
    assert np.isfinite(field.dist[policy.planner.cell((2.0, 6.0))])  # round them


def test_the_follower_does_not_push_into_something_off_the_map():
    """Following a person 5 m ahead while someone else stands 0.55 m in front: the baseline pushes, this policy
    stays, and moves when the way is clear."""
    def first(cls, box_ahead):
        policy = cls(detector=None)
        policy.reset(_room(), GridPlanner(_room()))
        policy._target = lambda o: None
        policy.handed_off, policy.track = True, (7.0, 5.0)
        return policy.act(_seen(2.0, 5.0, box_ahead)).action
    assert first(FrontierSearchPolicy, 0.45) == Action.FORWARD
    assert first(ViewpointPolicy, 0.45) == Action.STOP
    assert first(ViewpointPolicy, 1.5) == Action.FORWARD


class _Straight(Policy):
    """One goal 2 m straight ahead, then keep going; the way checked by ``check`` (None: always clear)."""

    def __init__(self, check: UnmappedObstacles | None) -> None:
        self.check, self.results, self.asked = check, [], 0

    def reset(self, info, planner):
        self.sent = False

    def act(self, obs):
        if not self.sent:
            self.sent = True
            return Decision(goal=(obs.pose[0] + 2.0, obs.pose[1], 0.0))
        return Decision.CONTINUE if not self.results else Decision(Action.STOP)

    def on_goal_result(self, reached):
        self.results.append(reached)

    def way_clear(self, obs):
        self.asked += 1
        return self.check is None or self.check.ahead(obs) is None


@pytest.fixture(scope="module")
def backend():
    b = BACKENDS.create("mujoco")
    yield b
    b.close()


def test_the_follower_gives_a_goal_up_before_moving_into_a_person_seen_in_depth(backend):
    """A person stands 1 m ahead of the robot in the simulator, on a path the map shows free: the follower moves
    until the rendered depth shows them within the next move, then gives the goal up, unclipped and out of
    contact; a policy whose way is always clear drives into them (clipped moves)."""
    start = Pose2D(1.5, 2.5, 0.0)  # test_apartment's living room, facing +x
    m = generate("s", "standing", "neutral", Performer.sample("N", np.random.default_rng(5)), 1, scenario="gestures")
    scene = load_scene("test_apartment")
    runs = {}
    for guarded in (True, False):
        backend.load(scene, start, (HumanPlacement("target", 2.5, 2.5, math.pi, is_target=True, motion=m, phase=0.3),))
        grid, origin = backend.navigable.occupancy_grid(0.05)
        info = EpisodeInfo.make(grid, origin, 0.05, (start.x, start.y, start.yaw), 0.3)
        policy = _Straight(UnmappedObstacles(info) if guarded else None)
        ep = ActiveEpisode(SimulatedRobot(backend), info, policy)
        for _ in range(12):
            ep.step("handoff")
        runs[guarded] = (policy, ep.log, ep.obs.pose)
    policy, log, pose = runs[True]
    assert policy.results == [False] and policy.asked == log.attempted_translations + 1 >= 2
    assert log.clipped_translations == 0 and 2.5 - pose[0] >= PERSON_RADIUS_M + info.robot_radius
    assert runs[False][1].clipped_translations >= 1  # the check is what kept it out
