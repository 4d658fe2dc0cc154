"""Every registered plugin against the contract of its kind, in the manner of dm_control's suite test:
spec conformance, finite outputs, the same inputs (seed, actions, frames) give the same result.

One test, parametrised over every entry of every registry (backends, policies, person detectors,
recognizers, metrics, noise models), so a new plugin is covered by registering it (users' plugins
too: ``conftest.py`` loads them first). Trainers and benches have theirs in ``test_registries.py`` and
``test_benches.py``; every registry of the packages must have one. The examples of
``docs/extending.md`` are loaded as the plugins they are and checked the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import Server, evolving_records, hand_made_records, typed

import affectsim_nav  # noqa: F401  (registers the shipped policies)
import affectsim_perception  # noqa: F401  (registers the person detectors and recognizers)
from affectsim_bridge.backends.mujoco import fetch_model
from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement, LaserSpec, SimulatorBackend
from affectsim_bridge.world.noise import NOISE_MODELS, STREAMS, NoiseModel, NoiseSet, model_rng
from affectsim_bridge.humans.generator import generate
from affectsim_bridge.humans.styles import Performer
from affectsim_bridge.world.scene import load_scene
from affectsim_core.actions import Action
from affectsim_core.clips import resize
from affectsim_core.errors import MissingDependency
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo
from affectsim_core.person_tracking import DETECTORS, PersonDetection
from affectsim_core import plugins
from affectsim_core.protocol import EMOTIONS, FORWARD_M, TURN_RAD, Outcome
from affectsim_eval.scoring.metrics import METRICS
from affectsim_eval.episode.worlds import SimulatedRobot
from affectsim_nav.active import run_active
from affectsim_nav.policy import POLICIES, create_policy
from affectsim_perception.person_model import clear_pose_cache
from affectsim_eval.gym.rewards import REWARDS
from affectsim_eval.run.runner import loop_recognizer
from affectsim_eval.training.train import TRAINERS
from affectsim_perception.recognizers import RECOGNIZERS, ClipInput
from affectsim_ros.benches import BENCHES

ROOT = Path(__file__).resolve().parents[1]
START = Pose2D(1.5, 2.5, 0.0)  # living room of test_apartment, facing +x
FX = 554.0  # px, the Fetch head camera at 640x480
PLUGINS = ([("backend", n) for n in BACKENDS.names()] + [("policy", n) for n in POLICIES.names()]
           + [("detector", n) for n in DETECTORS.names()] + [("recognizer", n) for n in RECOGNIZERS.names()]
           + [("metric", n) for n in METRICS.names()] + [("noise", n) for n in NOISE_MODELS.names()])
#: Every registry of the packages -> where its test over every entry is: a kind of PLUGINS, or test::function.
CONFORMANCE = {"BACKENDS": "backend", "POLICIES": "policy", "DETECTORS": "detector", "RECOGNIZERS": "recognizer",
               "METRICS": "metric", "NOISE_MODELS": "noise",
               "TRAINERS": "test_registries.py::test_every_trainer_conforms",
               "BENCHES": "test_benches.py::test_a_bench_lists_and_takes_only_its_own_options",
               "REWARDS": "test_gym_env.py::test_every_reward_conforms"}
REGISTRIES = (BACKENDS, POLICIES, DETECTORS, RECOGNIZERS, METRICS, NOISE_MODELS, TRAINERS, BENCHES, REWARDS)


@pytest.fixture(scope="module")
def world():
    """test_apartment with a person performing 2.5 m in front of the robot, on the default backend.
    The performer is one whose take BlazePose finds in all 8 frames: at this framing (legs cut at the
    knees) it misses some frames of other takes, e.g. 5 of 8 of the performer drawn from seed 2."""
    m = generate("p", "standing", "happy", Performer.sample("P", np.random.default_rng(5)), 1, scenario="gestures")
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
    info = EpisodeInfo.make(grid, origin, 0.05, (START.x, START.y, START.yaw), b.navigable.radius)
    trajectories = []
    for _ in range(2):
        policy = create_policy(name, lambda: DETECTORS.create("blazepose"), loop_recognizer)
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
    return res


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


def _poses(poses) -> np.ndarray:
    return np.array([[p.x, p.y, p.yaw] for p in poses])


def _through(noise: NoiseSet, stream: str) -> tuple:
    """(input, what ``noise`` makes of it) for a typical input of ``stream``, as the bridge calls it;
    checks that the output is of the stream's type."""
    rng = np.random.default_rng(0)
    if stream in ("depth", "rgb", "laser"):
        if stream == "depth":
            x = rng.uniform(0.5, 6.0, (48, 64)).astype(np.float32)
            x[:4, :4] = np.nan  # no return
            y = noise.apply_depth(x, FX)
            assert y.dtype == np.float32 and (np.isnan(y) | (y > 0)).all()
        elif stream == "rgb":
            x = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            y = noise.apply_rgb(x, np.array([0.0, 0.5, 0.0]), FX, FX)  # panning at 0.5 rad/s
            assert y.dtype == np.uint8
        else:
            x = rng.uniform(0.1, 20.0, 200).astype(np.float32)
            x[:5] = np.inf  # no echo
            y = noise.apply_laser(x, 0.05, 25.0)
            assert y.dtype == np.float32 and (np.isinf(y) | ((y >= 0.05) & (y <= 25.0))).all()
        assert y.shape == x.shape
        return x, y
    if stream == "odometry":
        true = [Pose2D(0.1 * i, 0.02 * i, 0.05 * i) for i in range(20)]
        est = [noise.odometry(p) for p in true]
        assert all(isinstance(p, Pose2D) and p.is_finite() for p in est)
        return _poses(true), _poses(est)
    if stream == "actuation":
        asked = [(FORWARD_M, 0.0), (0.0, TURN_RAD), (0.0, -TURN_RAD)] * 4
        done = np.array([noise.realise(*a) for a in asked], float)
        assert done.shape == (12, 2) and np.isfinite(done).all()
        assert noise.realise(0.0, 0.0) == (0.0, 0.0)  # STOP stays still
        return np.array(asked), done
    assert stream == "latency"
    captured = np.arange(10) / 15.0
    model = noise.get("latency")
    if model is None:
        return captured, captured
    delivered = np.array([model.push(float(t), k) for k, t in enumerate(captured)])
    assert (delivered >= captured).all() and (np.diff(delivered) >= 0).all()  # after capture, in order
    assert model.due(float(delivered[-1])) == [(float(t), k) for k, t in enumerate(captured)]  # capture stamps kept
    return captured, delivered


def _noise(name):
    cls = NOISE_MODELS.get(name)
    assert isinstance(cls, type) and issubclass(cls, NoiseModel) and cls.name == name
    assert cls.stream in STREAMS, f"noise model {name!r}: stream {cls.stream!r} is not one of {list(STREAMS)}"
    for method in re.findall(r"(?:^|; )(\w+)\(", STREAMS[cls.stream]):
        assert callable(getattr(cls, method, None)), f"a {cls.stream} noise model has {method}"
    assert cls.summary and "\n" not in cls.summary and cls.__doc__
    params = [p.name for p in cls.PARAMS]
    assert len(params) == len(set(params)) and "enabled" not in params
    for p in cls.PARAMS:
        assert p.bounds[0] <= p.default <= p.bounds[1] and p.check(name, p.default) == p.default

    off = NoiseSet.from_config({f"noise_{name}_enabled": False, **{p.key(name): p.default for p in cls.PARAMS}})
    x, y = _through(off, cls.stream)
    assert y is x or np.array_equal(y, x), "a model that is off changes nothing"
    if cls.stream in ("depth", "rgb", "laser"):
        assert y is x  # not even a copy

    on = {f"noise_{name}_enabled": True}
    first = NoiseSet.from_config(on, seed=7)
    assert list(first.models) == [name] and cls.stream in first
    x, a = _through(first, cls.stream)
    assert not np.array_equal(a, x, equal_nan=True), "a model that is on changes its input"
    assert np.array_equal(_through(NoiseSet.from_config(on, seed=7), cls.stream)[1], a, equal_nan=True)
    drew = first.models[name].rng.bit_generator.state != model_rng(7, name).bit_generator.state
    first.reseed(7)  # a new episode: the same noise again
    assert np.array_equal(_through(first, cls.stream)[1], a, equal_nan=True)
    if drew:  # a model that draws gives other noise with another seed: at its defaults or mid-range
        mid = {p.key(name): type(p.default)((p.bounds[0] + p.bounds[1]) / 2) for p in cls.PARAMS}

        def differs(config):
            return not np.array_equal(_through(NoiseSet.from_config(config, seed=7), cls.stream)[1],
                                      _through(NoiseSet.from_config(config, seed=8), cls.stream)[1], equal_nan=True)

        assert differs(on) or differs({**on, **mid})


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
    elif kind == "noise":
        _noise(name)
    else:
        _metric(name)


def _parametrised(test) -> list:
    """The values a test is parametrised over (its one ``parametrize`` mark)."""
    (mark,) = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    return list(mark.args[1])


def test_every_registry_has_a_conformance_test():
    """Each ``Registry(...)`` of the packages is listed in CONFORMANCE, with a test over all its names."""
    found = {}
    for path in sorted(ROOT.glob("affectsim_*/**/*.py")):
        for m in re.finditer(r"^([A-Z][A-Z0-9_]*)\b[^=\n]*=\s*Registry\(", path.read_text(), re.M):
            found[m.group(1)] = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    assert set(found) == set(CONFORMANCE), "a registry without a conformance test here, or one listed that is gone"
    for var, module in found.items():
        registry = getattr(importlib.import_module(module), var)
        assert registry in REGISTRIES
        where = CONFORMANCE[var]
        if "::" in where:
            file, test = where.split("::")
            covered = _parametrised(getattr(importlib.import_module(file.removesuffix(".py")), test))
        else:
            covered = [n for k, n in PLUGINS if k == where]
        assert covered == registry.names() and covered, var


# ---------------------------------------------------------------------------------------------- docs/extending.md
def _examples() -> dict[str, tuple[str, str]]:
    """Section of ``docs/extending.md`` -> (file, source) of each python block whose first line is
    ``# path/of/the/file.py``."""
    out = {}
    for section in re.split(r"^## ", (ROOT / "docs" / "extending.md").read_text(), flags=re.M)[1:]:
        for block in re.findall(r"```python\n(.*?)```", section, re.S):
            first = block.splitlines()[0]
            if re.fullmatch(r"# [\w/]+\.py", first):
                out[section.splitlines()[0]] = (first[2:], block)
    return out


EXAMPLES = _examples()


@pytest.fixture
def example_plugin(tmp_path, monkeypatch):
    """Loads an example file as the plugin it is (a module named by $AFFECTSIM_PLUGINS, or a bench
    module of ``affectsim_ros.benches``) beside the shipped entries (not users' plugins, which may be the
    same example); what it registered, and the modules, are gone afterwards."""
    for reg in REGISTRIES:
        monkeypatch.setattr(reg, "_entries", {n: f for n, f in reg._entries.items()
                                              if getattr(f, "__module__", "").startswith("affectsim_")})
    before = set(sys.modules)

    def load(path: str, source: str) -> dict[str, list[str]]:
        names = {id(reg): reg.names() for reg in REGISTRIES}
        module = path.removesuffix(".py").replace("/", ".")
        file = tmp_path / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(source)
        if module.startswith("affectsim_ros.benches."):  # a bench: a module of the package
            spec = importlib.util.spec_from_file_location(module, file)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[module] = mod
            spec.loader.exec_module(mod)
        else:  # a user's plugin, found as users' plugins are (a copy already imported is set aside)
            parts = module.split(".")
            for k in range(1, len(parts) + 1):
                monkeypatch.delitem(sys.modules, ".".join(parts[:k]), raising=False)
            monkeypatch.syspath_prepend(str(tmp_path))
            monkeypatch.setenv(plugins.ENV, module)
            monkeypatch.setattr(plugins, "_LOADED", {})
            assert module in plugins.load_plugins()
        return {reg.kind: [n for n in reg.names() if n not in names[id(reg)]] for reg in REGISTRIES
                if reg.names() != names[id(reg)]}

    yield load
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_extending_md_has_an_example_file_per_kind():
    assert set(EXAMPLES) >= {"A policy", "A frozen recognizer", "A person detector", "A simulator backend",
                             "A noise model", "A bench"}


@pytest.mark.parametrize("section", sorted(EXAMPLES))
def test_every_example_of_extending_md_conforms(section, example_plugin, world, vlm_server, capsys, tmp_path):
    path, source = EXAMPLES[section]
    added = example_plugin(path, source)
    ((kind, (name,)),) = added.items()  # one entry of one registry
    if kind == "policy":
        assert _policy(name, world).outcome == Outcome.HANDOFF  # the person 2.5 m ahead is seen at once
    elif kind == "recognizer":
        _recognizer(name, world, vlm_server)
        rec = RECOGNIZERS.create(name)
        still = rec.predict(ClipInput(np.zeros((8, 224, 224, 3), np.uint8)))
        moving = rec.predict(ClipInput(np.stack([resize(f) for f in world["frames"]])))
        assert still.label == "neutral" and moving.probs[EMOTIONS.index("happy")] > still.probs[EMOTIONS.index("happy")]
    elif kind == "person detector":
        _detector(name, world)
        full, near, far = DETECTORS.create("blazepose"), DETECTORS.create(name), DETECTORS.create(name, 10_000)
        a, b = full.detect(world["frames"][0]), near.detect(world["frames"][0])
        assert np.array_equal(a.keypoints, b.keypoints) and far.detect(world["frames"][0]) is None
        for d in (full, near, far):
            d.close()
    elif kind == "simulator backend":
        _backend(name, world)
        frames = []
        for n in ("mujoco", name):
            b = BACKENDS.create(n)
            b.load(world["scene"], START, world["people"])
            frames.append(b.render_head_camera().rgb)
            b.close()
        assert np.array_equal(frames[1], frames[0] // 3)
    elif kind == "noise model":
        _noise(name)
        from affectsim_bridge.bridge_node import node_params

        assert {f"noise_{name}_enabled", f"noise_{name}_fraction"} <= {p.name for p in node_params()}
        both = NoiseSet.from_config({"noise_rgb_enabled": True, f"noise_{name}_enabled": True}, seed=3)
        assert [m.name for m in both.streams["rgb"]] == ["rgb", name]  # the shipped model first
        img = np.full((48, 64, 3), 200, np.uint8)
        out = both.apply_rgb(img, np.zeros(3), FX, FX)
        dead = (out == 0).all(axis=2)
        assert 0 < dead.mean() < 0.05 and (out[~dead] > 150).all()  # black pixels, the rest noisy but bright
    else:
        assert kind == "bench"
        import test_benches
        from affectsim_ros import cli

        test_benches.test_a_bench_lists_and_takes_only_its_own_options(name, capsys)
        assert cli.main(["bench", name, "--frames", "2", "--out", str(tmp_path / "out.json")]) == 0
        out = json.loads((tmp_path / "out.json").read_text())
        assert set(out) == set(DETECTORS.names()) and out["blazepose"]["found"] == 1.0
        assert out["blazepose"]["ms_per_frame"] > 0 and "blazepose: " in capsys.readouterr().out
