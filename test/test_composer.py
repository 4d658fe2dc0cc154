"""Episode composer: placements fit the scene and every challenge is realised as defined."""

import math
from dataclasses import replace

import numpy as np
import pytest

from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.styles import Performer
from affectsim_bridge.world.scene import load_scene
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import quat_from_yaw
from affectsim_core.protocol import CHALLENGES
from affectsim_eval.dataset.composer import (
    CRITERIA,
    Measures,
    SceneContext,
    describe,
    place_target,
    realised,
    robot_start,
)


@pytest.fixture(scope="module")
def ctx():
    c = SceneContext(load_scene("test_apartment"))
    yield c
    c.close()


@pytest.fixture(scope="module")
def performer():
    return Performer.sample("C", np.random.default_rng(3))


@pytest.mark.parametrize("challenge", [None, "far_visible", "rear_view", "partial_occlusion", "obstacle_detour"])
def test_challenges_are_realised_and_remeasured(ctx, performer, challenge):
    rng = np.random.default_rng(7)
    m = generate("s", "standing", "happy", performer, 1, scenario="gestures")
    for _ in range(40):  # some placements admit no start of this challenge (obstacle_detour: most)
        place, _ = place_target(ctx, m, rng)
        place = replace(place, phase=float(rng.uniform(0, m.duration)))
        found = robot_start(ctx, place, 0.0, challenge, challenge is None, rng)
        if found:
            break
    assert found, f"no start realising {challenge}"
    robot, me = found
    assert realised(challenge, me)
    again = ctx.measure(robot, place, 0.0, detour=challenge == "obstacle_detour")  # as validation re-measures
    assert again.as_dict() == me.as_dict()
    assert ctx.nav.is_navigable(np.array([robot.x, robot.y]))[0]
    if challenge == "rear_view":
        assert me.rear_frames >= 0.75  # seen from behind through most of the clip, not only at its start
    if challenge == "partial_occlusion":  # partly hidden through most of the clip, not only at its start
        assert me.occluded_frames >= 0.75
    if challenge == "far_visible":  # far in every frame of the clip
        assert me.min_distance >= 4.5
    if challenge == "obstacle_detour":  # visible from the start, yet every informative viewpoint needs a detour
        assert me.visible_frames > 0.5 and me.detour_ratio >= 1.5
        views = ctx.informative_viewpoints(place, 0.0)
        start = np.array([robot.x, robot.y])
        for v in views:
            assert ctx.nav.geodesic_distance(start, v) >= 1.5 * np.linalg.norm(v - start) - 1e-9


def test_challenge_definitions_reject_what_they_exclude():
    base = Measures(3.0, math.radians(170), 0.8, 0.9, 4.0, 3.0, False, rear_frames=1.0, visible_frames=1.0,
                    detour_ratio=2.0)
    assert realised("rear_view", base) and not realised("rear_view", replace(base, rear_frames=0.5))
    assert realised("obstacle_detour", base)
    assert not realised("obstacle_detour", replace(base, detour_ratio=1.3))  # a viewpoint nearly straight ahead
    assert not realised("obstacle_detour", replace(base, visible_frames=0.5))  # hidden half the clip: search
    assert not realised("obstacle_detour", replace(base, detour_ratio=math.nan))  # no viewpoint reachable
    assert base.as_dict()["detour_ratio"] == 2.0 and replace(base, detour_ratio=math.nan).as_dict()["detour_ratio"] is None
    far = replace(base, initial_distance=6.0, min_distance=6.0)
    assert realised("far_visible", far)
    assert not realised("far_visible", replace(far, min_distance=4.0))  # far at the start, near later in the clip
    hidden = replace(base, unoccluded_fraction=0.4, occluded_frames=0.75)
    assert realised("partial_occlusion", hidden)
    assert not realised("partial_occlusion", replace(hidden, occluded_frames=0.625))  # out of range in 3 of 8 frames
    assert not realised("partial_occlusion", replace(hidden, unoccluded_fraction=0.7))


def test_far_visible_follows_a_performer_walking_towards_the_robot(ctx, performer):
    """``min_distance`` is the least camera-to-pelvis distance over every full-rate frame of the clip
    (two cycles of a walk), not the distance at its start."""
    from affectsim_core.clips import clip_times
    from affectsim_core.geometry import Pose2D

    rng = np.random.default_rng(2)
    m = generate("w", "walk", "angry", performer, 1)
    place = next(p for p in (place_target(ctx, m, rng) for _ in range(20)) if p is not None)[0]
    xy = ctx.nav.sample(1, rng)[0]
    robot = Pose2D(float(xy[0]), float(xy[1]), 0.0)
    me = ctx.measure(robot, place, 0.0, paths=False)
    cam, _ = ctx.camera(robot)
    every = [float(np.linalg.norm(place.pose_at(float(t))[0] - cam)) for t in clip_times(m.duration)]
    assert me.min_distance == pytest.approx(min(every), abs=1e-9)
    assert max(every) - min(every) > 0.5  # the walk changes the distance: the start alone would not tell
    assert math.isnan(me.occluded_frames)  # measured with the paths only
