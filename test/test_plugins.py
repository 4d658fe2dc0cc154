"""Every registered plugin against the contract of its kind, in the manner of dm_control's suite test:
spec conformance, finite outputs, the same inputs (seed, actions, frames) give the same result.

One test, parametrised over every entry of every registry (backends, policies, person detectors,
recognizers, metrics), so a new plugin is covered by registering it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from helpers import Server, evolving_records, hand_made_records, typed

import affectsim_nav  # noqa: F401  (registers the shipped policies)
import affectsim_perception  # noqa: F401  (registers the person detectors and recognizers)
from affectsim_bridge.backends.mujoco import fetch_model
from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement, LaserSpec, SimulatorBackend
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.styles import Performer
from affectsim_bridge.world.scene import load_scene
from affectsim_core.actions import Action
from affectsim_core.clips import resize
from affectsim_core.errors import MissingDependency
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo
from affectsim_core.person_tracking import DETECTORS, PersonDetection
from affectsim_core.protocol import EMOTIONS, Outcome
from affectsim_eval.scoring.metrics import METRICS
from affectsim_eval.episode.worlds import SimulatedRobot
from affectsim_nav.active import run_active
from affectsim_nav.policy import POLICIES, create_policy
from affectsim_perception.person_model import clear_pose_cache
from affectsim_perception.recognizers import RECOGNIZERS, ClipInput

START = Pose2D(1.5, 2.5, 0.0)  # living room of test_apartment, facing +x
PLUGINS = ([("backend", n) for n in BACKENDS.names()] + [("policy", n) for n in POLICIES.names()]
           + [("detector", n) for n in DETECTORS.names()] + [("recognizer", n) for n in RECOGNIZERS.names()]
           + [("metric", n) for n in METRICS.names()])


@pytest.fixture(scope="module")
def world():
    """test_apartment with a person performing 2.5 m in front of the robot, on the default backend."""
    m = generate("p", "standing", "happy", Performer.sample("P", np.random.default_rng(2)), 1, scenario="gestures")
    people = (HumanPlacement("target", 4.0, 2.6, math.pi, motion=m, phase=0.2),)
    scene = load_scene("test_apartment")
    b = BACKENDS.create("mujoco")
    b.load(scene, START, people)
    frames = []
    for _ in range(8):
        frames.append(b.render_head_camera().rgb)
        b.apply_action(Action.STOP)
    yield {"scene": scene, "people": people, "frames": frames, "backend": b}
    b.close()


@pytest.fixture(scope="module")
def vlm_server():
    """A local OpenAI-compatible server for ``vlm-openai`` (127.0.0.1 only; answers "neutral")."""
    s = Server()
    old = os.environ.get("AFFECTSIM_VLM_URL")
    os.environ["AFFECTSIM_VLM_URL"] = s.url
    yield s
    if old is None:
        del os.environ["AFFECTSIM_VLM_URL"]
    else:
        os.environ["AFFECTSIM_VLM_URL"] = old
    s.close()


def _backend(name, world):
    try:
        backends = [BACKENDS.create(name), BACKENDS.create(name)]
    except MissingDependency as exc:  # an optional simulator that is not installed: the error must say how
        assert exc.args_[0] == name and "install" in str(exc)
        return
    try:
        runs = []
        for b in backends:
            assert isinstance(b, SimulatorBackend)
            b.load(world["scene"], START, world["people"])
            f = b.render_head_camera()
            k = b.head_intrinsics
            assert f.rgb.shape == (k.height, k.width, 3) and f.rgb.dtype == np.uint8
            assert f.depth.shape == (k.height, k.width) and f.depth.dtype == np.float32
            assert (np.isnan(f.depth) | (f.depth > 0)).all() and np.isfinite(f.depth).mean() > 0.5
            spec = LaserSpec()
            scan = b.laser_scan(spec)
            assert scan.shape == (spec.count,) and not np.isnan(scan).any()
            assert set(fetch_model.TF_TREE) <= set(b.link_transforms())
            cam = f.pose.translation
            near = cam + f.pose.rotation[:, 2] * 0.5  # half a metre ahead of the camera: free space
            behind_wall = np.array([cam[0] - 3.0, cam[1], cam[2]])  # through the living room's west wall
            assert b.line_of_sight(cam, np.stack([near, behind_wall])).tolist() == [True, False]
            poses, images = [], [f.rgb]
            for a in [Action.FORWARD] * 3 + [Action.TURN_LEFT, Action.FORWARD, Action.TURN_RIGHT]:
                r = b.apply_action(a)
                assert all(math.isfinite(v) for v in (r.pose.x, r.pose.y, r.pose.yaw, r.distance_m, r.sim_time))
                poses.append(r.pose)
            images.append(b.render_head_camera().rgb)
            runs.append((poses, images))
        assert runs[0][0] == runs[1][0]  # same actions: same poses
        for x, y in zip(runs[0][1], runs[1][1]):
            assert np.array_equal(x, y)  # and the same images, bit for bit
    finally:
        for b in backends:
            b.close()


def _policy(name, world):
    b = world["backend"]
    grid, origin = b.navigable.occupancy_grid(0.05)
    info = EpisodeInfo.make("plugin", grid, origin, 0.05, (START.x, START.y, START.yaw), b.navigable.radius)
    trajectories = []
    for _ in range(2):
        policy = create_policy(name, lambda: DETECTORS.create("blazepose"))
        try:
            b.load(world["scene"], START, world["people"])
            res = run_active(SimulatedRobot(b), info, policy, n_clip=4, max_actions=20, max_planner_calls=5)
        finally:
            policy.close()
        assert res.outcome in tuple(Outcome) and res.outcome != Outcome.POLICY_ERROR, res.message
        traj = np.array(res.log.trajectory)
        assert np.isfinite(traj).all() and b.navigable.is_free(traj[:, 1:3]).all()
        assert len(res.log.actions) <= 20 + 4  # the budget, then at most the clip
        if res.outcome == Outcome.HANDOFF:
            assert len(res.clip.frames) == 4  # a clip of 4 full-rate frames keeps those 4 (sampled with repeats)
        trajectories.append(res.log.trajectory)
    assert trajectories[0] == trajectories[1]  # same episode: same trajectory


def _detector(name, world):
    det = DETECTORS.create(name)
    try:
        frame = world["frames"][0]
        a, b = det.detect(frame), det.detect(frame)
        assert isinstance(a, PersonDetection), "the person 2.5 m ahead is found"
        h, w = frame.shape[:2]
        assert a.keypoints.shape == (33, 2) and a.visibility.shape == (33,) and a.world.shape == (33, 3)
        assert np.isfinite(a.keypoints).all() and ((a.visibility >= 0) & (a.visibility <= 1)).all()
        x0, y0, x1, y1 = a.box
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert np.array_equal(a.keypoints, b.keypoints) and a.box == b.box
        assert det.detect(np.full((h, w, 3), 128, np.uint8)) is None  # nobody in a blank frame
    finally:
        det.close()


def _recognizer(name, world, vlm_server):
    rec = RECOGNIZERS.create(name)
    try:
        for clip in (ClipInput(np.stack([resize(f) for f in world["frames"]])),
                     ClipInput(np.zeros((8, 224, 224, 3), np.uint8))):
            a = rec.predict(clip)
            clear_pose_cache()  # the second pass computes everything again
            b = rec.predict(clip)
            assert a.probs.shape == (len(EMOTIONS),) and np.isfinite(a.probs).all() and (a.probs >= 0).all()
            assert a.probs.sum() == pytest.approx(1.0)
            assert a.outcome in ("ok", "unparseable", "error")
            assert (a.label in EMOTIONS) == (a.outcome == "ok") and (a.label is None) == (a.outcome != "ok")
            assert np.array_equal(a.probs, b.probs) and a.label == b.label and a.outcome == b.outcome
    finally:
        rec.close()


def _metric(name):
    metric = METRICS.create(name)
    assert metric.name == name and metric.description and "\n" not in metric.description
    records = typed(hand_made_records() + evolving_records())  # evolving ones carry window streams
    out, again = metric.compute(records), metric.compute(records)
    assert out == again

    def leaves(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from leaves(v)
        else:
            yield x

    for v in leaves(out):
        assert v is None or isinstance(v, (int, float))
        if isinstance(v, float) and name != "per_class_recall":  # recall is nan for classes without samples
            assert math.isfinite(v)


@pytest.mark.parametrize("kind, name", PLUGINS, ids=[f"{k}:{n}" for k, n in PLUGINS])
def test_every_registered_plugin_conforms(kind, name, world, vlm_server):
    if kind == "backend":
        _backend(name, world)
    elif kind == "policy":
        _policy(name, world)
    elif kind == "detector":
        _detector(name, world)
    elif kind == "recognizer":
        _recognizer(name, world, vlm_server)
    else:
        _metric(name)
