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


@pytest.mark.parametrize("action", ["seated", "sit_down", "knock"])
def test_action_grounded_placements_use_scene_geometry(ctx, performer, action):
    m = generate("a", action, "sad", performer, 1)
    place, info = place_target(ctx, m, np.random.default_rng(1))
    if action == "knock":
        door = {d.id: d for d in ctx.scene.doors()}[info["door"]]
        hand = ctx.body_points(place, 0.0)  # over the clip, the knuckles reach the panel face
        ts = np.linspace(0, m.duration, 60, endpoint=False)
        from affectsim_bridge.humans.skeleton import POINTS

        fp = door.footprint
        n = np.array([-math.sin(fp.yaw), math.cos(fp.yaw)])
        dist = [abs((ctx.body_points(place, t)[POINTS.index("hand_r"), :2] - [fp.cx, fp.cy]) @ n) for t in ts]
        assert min(dist) == pytest.approx(fp.hy, abs=0.02)
        assert hand.shape == (41, 3)
    else:
        sup = {s.furniture_id: s for s in ctx.scene.supports()}[info["support"]]
        assert abs(sup.height - m.provenance["seat_height"]) <= 0.06
        assert math.hypot(place.x - sup.x, place.y - sup.y) <= sup.half_length


def test_description_is_non_privileged(performer):
    m = generate("d", "standing", "angry", performer, 1, scenario="gestures")
    text = describe(m)
    assert "top" in text and "trousers" in text and "angry" not in text


def test_episode_schema_rejects_bad_fields():
    ep = {"episode_id": "e1", "scene_id": "scene_000", "start_position": [1.0, 2.0, 0.0],
          "start_rotation": list(quat_from_yaw(0.3)), "family": "observation_controlled", "challenge": "rear_view",
          "emotion": "sad", "humans": [{"role": "target", "motion_id": "m", "x": 0.0, "y": 0.0, "yaw": 0.0,
                                         "phase": 0.0}], "seed": 1}
    assert Episode.from_dict(ep, "t").to_dict() == {**ep, "action": "", "group": "", "monitor_room": None,
                                                     "placement": {}, "measures": {},
                                                     "humans": [{**ep["humans"][0], "description": ""}]}
    for field, value, msg in (("challenge", "upside_down", "challenge"), ("emotion", "bored", "emotion"),
                              ("start_rotation", [1, 1, 0, 0], "start_rotation"), ("family", "x", "family")):
        with pytest.raises(InvalidInput, match=f"episode e1.*{msg}"):
            Episode.from_dict(dict(ep, **{field: value}), "t")
    with pytest.raises(InvalidInput, match="only the fields"):
        Episode.from_dict(dict(ep, surprise=1), "t")
    assert set(CRITERIA) == {None, *CHALLENGES}
