"""Noise models (affectsim_bridge.world.noise): statistics, determinism, ranges, and the bridge's refusals."""

import math
import subprocess
import sys
import threading

import numpy as np
import pytest

from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_bridge.world.noise import (
    NOISE_MODELS,
    ActuationNoise,
    CameraLatency,
    DepthNoise,
    LaserNoise,
    NoiseSet,
    OdometryDrift,
    RgbNoise,
    config_params,
    model_class,
    model_rng,
)
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D
from affectsim_core.protocol import FORWARD_M, TURN_RAD
from affectsim_core.ros.env import loopback_env, pick_domain_id
from helpers import box_room

FX = 554.0  # px, the Fetch head camera at 640x480 (46.83 deg vertical field of view)


def _depth(seed=1, **kw):
    return DepthNoise(model_rng(seed, "depth"), **kw)


# ------------------------------------------------------------------ every registered model
def _inputs(name: str) -> tuple:
    """A typical input of model ``name`` (of its stream) and the call producing its output."""
    rng = np.random.default_rng(0)
    depth = rng.uniform(0.5, 6.0, (48, 64)).astype(np.float32)
    rgb = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    ranges = rng.uniform(0.1, 20.0, 200)
    return {
        "depth": lambda m: m.apply(depth, FX),
        "rgb": lambda m: m.apply(rgb, np.array([0.1, 1.0, 0.0]), FX, FX),
        "laser": lambda m: m.apply(ranges, 0.05, 25.0),
        "odometry": lambda m: np.array([[*(p := m.update(Pose2D(0.1 * i, 0.02 * i, 0.05 * i))).xy, p.yaw]
                                        for i in range(20)]),
        "actuation": lambda m: np.array([m.realise(FORWARD_M, 0.0) for _ in range(10)]),
        "latency": lambda m: np.array([m.push(t / 15.0, t) for t in range(10)]),
    }[model_class(name).stream]


def test_every_model_is_registered_and_documented():
    shipped = {n for n in NOISE_MODELS.names() if model_class(n).__module__.startswith("affectsim_")}  # not plugins
    assert shipped == {"depth", "rgb", "laser", "odometry", "actuation", "latency"}
    for name in NOISE_MODELS.names():
        cls = model_class(name)
        assert cls.name == name and cls.summary and cls.__doc__ and cls.PARAMS
    keys = [k for k, *_ in config_params()]
    assert len(keys) == len(set(keys)) and all(k.startswith("noise_") for k in keys)
    assert all(d is False for k, d, _, _ in config_params() if k.endswith("_enabled"))  # all off by default
    with pytest.raises(KeyError, match="already registered"):
        NOISE_MODELS.register("depth")(DepthNoise)


@pytest.mark.parametrize("name", NOISE_MODELS.names())
def test_same_seed_same_noise_other_seed_other_noise(name):
    cls, call = model_class(name), _inputs(name)
    kw = {"jitter_s": 0.02} if name == "latency" else {}  # the latency model draws only with jitter
    a = call(cls(model_rng(7, name), **kw))
    b = call(cls(model_rng(7, name), **kw))
    c = call(cls(model_rng(8, name), **kw))
    assert np.array_equal(a, b, equal_nan=True)
    assert not np.array_equal(a, c, equal_nan=True)
    m = cls(model_rng(7, name), **kw)  # reseeding restarts the stream and the episode state
    call(m)
    m.reseed(model_rng(7, name))
    assert np.array_equal(call(m), a, equal_nan=True)


@pytest.mark.parametrize("key, default, bounds", [(k, d, b) for k, d, b, _ in config_params() if b is not None])
def test_a_parameter_out_of_range_is_named(key, default, bounds):
    name = next(n for n in NOISE_MODELS.names() if key.startswith(f"noise_{n}_"))
    param = key[len(f"noise_{name}_"):]
    cls = model_class(name)
    assert bounds[0] <= default <= bounds[1]
    cls(**{param: bounds[0]}), cls(**{param: bounds[1]})  # the bounds themselves are accepted
    for bad in (bounds[0] - 1.0, bounds[1] + 1.0, float("nan"), "0.1", True):
        with pytest.raises(InvalidInput) as err:
            cls(**{param: bad})
        assert err.value.field == key and key in str(err.value)
        with pytest.raises(InvalidInput, match=key):
            NoiseSet.from_config({key: bad})  # checked even while the model is off


# ------------------------------------------------------------------ depth
def test_depth_sigma_grows_with_the_square_of_the_distance():
    m = _depth(disparity_step_px=0.0, edge_dropout=0.0)
    sig = {}
    for z in (1.0, 3.0):
        out = m.apply(np.full((200, 200), z, np.float32), FX).astype(np.float64)
        sig[z] = out.std()
        assert abs(out.mean() - z) < 4 * sig[z] / 200  # unbiased
        assert sig[z] == pytest.approx(0.0016 * z * z, rel=0.03)
    assert sig[3.0] / sig[1.0] == pytest.approx(9.0, rel=0.05)


def test_depth_is_quantised_in_disparity_steps():
    m = _depth(sigma_k=0.0)
    z = np.linspace(2.8, 3.2, 400, dtype=np.float32)[None].repeat(2, 0)
    out = m.apply(z, FX)
    levels = np.unique(out)
    n = FX * 0.075 / (levels * 0.125)  # disparity in steps: whole numbers
    assert np.allclose(n, np.round(n), atol=1e-3)
    i = int(np.searchsorted(levels, 3.0))
    step = levels[i] - levels[i - 1]
    assert step == pytest.approx(3.0 ** 2 * 0.125 / (FX * 0.075), rel=0.05)  # ~2.7 cm at 3 m
    assert np.abs(out - z).max() <= step  # the nearest level


def test_depth_pixels_are_lost_at_edges_not_on_flat_surfaces():
    img = np.full((200, 200), 3.0, np.float32)
    img[:, 100:] = 1.5  # a depth edge between columns 99 and 100
    img[:20, :20] = np.nan  # no return: its border is an edge too
    out = _depth(seed=3).apply(img, FX)
    band = np.isnan(out[30:, 98:102])  # within edge_width_px = 2 of the edge
    assert band.mean() == pytest.approx(0.5, abs=0.07)
    assert not np.isnan(out[30:, 10:90]).any() and not np.isnan(out[30:, 110:190]).any()
    assert np.isnan(out[:20, :20]).all() and np.isnan(out[20:22, :20]).any()
    everywhere = _depth(seed=3, dropout=0.1).apply(img, FX)
    assert np.isnan(everywhere[30:, 110:190]).mean() == pytest.approx(0.1, abs=0.02)
    assert not np.isnan(_depth(edge_dropout=0.0).apply(img, FX)[20:]).any()


# ------------------------------------------------------------------ rgb
def test_rgb_noise_spread_follows_read_and_shot_noise():
    m = RgbNoise(model_rng(1, "rgb"), read_sigma=2.0, shot_gain=0.5, exposure_s=0.0)
    for level in (20, 200):
        out = m.apply(np.full((200, 200, 3), level, np.uint8), np.zeros(3), FX, FX).astype(np.float64)
        assert out.mean() == pytest.approx(level, abs=0.1)
        assert out.std() == pytest.approx(math.sqrt(2.0 ** 2 + 0.5 * level), rel=0.05)


def test_motion_blur_length_is_angular_velocity_times_exposure_times_focal_length():
    m = RgbNoise(model_rng(1, "rgb"), read_sigma=0.0, shot_gain=0.0, exposure_s=0.02)
    line = np.zeros((40, 200, 3), np.uint8)
    line[:, 100] = 255  # a vertical bright line
    widths = []
    for w in (0.0, 0.5, 1.0, 1.5):
        out = m.apply(line, np.array([0.0, w, 0.0]), FX, FX)  # turning about the optical y axis (the base's yaw)
        widths.append(int((out[20, :, 0] > 0).sum()))
        assert abs(widths[-1] - max(1.0, w * 0.02 * FX)) <= 2.0
        assert out[:, :, 0].sum() == pytest.approx(line[:, :, 0].sum(), rel=0.05)  # blur keeps the light
    assert widths == sorted(widths) and widths[-1] > 15
    tilt = m.apply(line.transpose(1, 0, 2).copy(), np.array([1.0, 0.0, 0.0]), FX, FX)  # tilting: vertical blur
    assert abs(int((tilt[:, 20, 0] > 0).sum()) - 0.02 * FX) <= 2.0
    assert np.array_equal(m.apply(line, np.zeros(3), FX, FX), line)


# ------------------------------------------------------------------ laser
def test_laser_noise_is_zero_mean_sigma_two_centimetres_and_within_limits():
    m = LaserNoise(model_rng(1, "laser"))
    r = np.full(40000, 5.0)
    r[:100] = np.inf
    r[100:200] = 0.06
    out = m.apply(r, 0.05, 25.0).astype(np.float64)
    err = out[200:] - 5.0
    assert abs(err.mean()) < 4 * 0.02 / math.sqrt(err.size)
    assert err.std() == pytest.approx(0.02, rel=0.03)
    assert np.isinf(out[:100]).all() and out[100:200].min() >= 0.05 and out[:200][np.isfinite(out[:200])].max() < 25
    lost = LaserNoise(model_rng(1, "laser"), dropout=0.25).apply(r, 0.05, 25.0)
    assert np.isinf(lost[200:]).mean() == pytest.approx(0.25, abs=0.02)


# ------------------------------------------------------------------ odometry
def _drive(m: OdometryDrift, metres: float, steps: int) -> Pose2D:
    """Straight along x from the origin in ``steps`` updates; the last estimate."""
    est = m.update(Pose2D(0.0, 0.0, 0.0))
    for i in range(1, steps + 1):
        est = m.update(Pose2D(metres * i / steps, 0.0, 0.0))
    return est


def test_odometry_scale_error_is_proportional_to_distance_and_independent_of_the_update_rate():
    only_scale = dict(turn_scale_sigma=0.0, yaw_per_m_sigma=0.0, trans_walk=0.0, rot_walk=0.0)
    errs = {d: np.array([_drive(OdometryDrift(model_rng(s, "odometry"), **only_scale), d, 10).x - d
                         for s in range(300)]) for d in (2.0, 8.0)}
    assert errs[2.0].std() / 2.0 == pytest.approx(0.01, rel=0.15)
    assert np.allclose(errs[8.0], 4.0 * errs[2.0])  # the same seeds, four times the distance
    coarse = _drive(OdometryDrift(model_rng(5, "odometry"), **only_scale), 8.0, 4)
    fine = _drive(OdometryDrift(model_rng(5, "odometry"), **only_scale), 8.0, 400)
    assert coarse.x == pytest.approx(fine.x, abs=1e-9)


def test_odometry_drift_grows_with_distance_travelled_and_angle_turned():
    def pos_err(d):
        return np.mean([math.hypot(*(_drive(OdometryDrift(model_rng(s, "odometry")), d, 40).xy - [d, 0.0]))
                        for s in range(200)])

    assert pos_err(8.0) > 3.0 * pos_err(2.0) > 0.0  # heading drift makes it grow faster than the distance
    first = OdometryDrift(model_rng(1, "odometry"))
    assert first.update(Pose2D(1.0, 2.0, 0.5)) == Pose2D(1.0, 2.0, 0.5)  # an episode starts at the truth

    def yaw_err(turns):
        out = []
        for s in range(300):
            m = OdometryDrift(model_rng(s, "odometry"), trans_walk=0.0, rot_walk=0.0)
            est = m.update(Pose2D(0.0, 0.0, 0.0))
            for i in range(1, turns + 1):
                est = m.update(Pose2D(0.0, 0.0, ((i * TURN_RAD + math.pi) % (2 * math.pi)) - math.pi))
            true = ((turns * TURN_RAD + math.pi) % (2 * math.pi)) - math.pi
            out.append(((est.yaw - true + math.pi) % (2 * math.pi)) - math.pi)
        return np.std(out)

    assert yaw_err(12) / (12 * TURN_RAD) == pytest.approx(0.02, rel=0.15)  # turn_scale_sigma
    assert yaw_err(12) == pytest.approx(3.0 * yaw_err(4), rel=0.01)


# ------------------------------------------------------------------ actuation
def test_actuation_error_mean_and_spread_of_each_primitive_action():
    m = ActuationNoise(model_rng(1, "actuation"))
    fwd = np.array([m.realise(FORWARD_M, 0.0) for _ in range(20000)])
    assert fwd[:, 0].mean() == pytest.approx(FORWARD_M, abs=3e-4)
    assert fwd[:, 0].std() == pytest.approx(math.hypot(FORWARD_M * 0.02, 0.005), rel=0.04)
    assert abs(fwd[:, 1].mean()) < 2e-4 and fwd[:, 1].std() == pytest.approx(0.005, rel=0.04)
    turn = np.array([m.realise(0.0, -TURN_RAD) for _ in range(20000)])
    assert turn[:, 1].mean() == pytest.approx(-TURN_RAD, abs=3e-4)
    assert turn[:, 1].std() == pytest.approx(math.hypot(TURN_RAD * 0.02, 0.005), rel=0.04)
    assert turn[:, 0].std() == pytest.approx(0.005, rel=0.04)  # a turn creeps
    assert m.realise(0.0, 0.0) == (0.0, 0.0)  # STOP stays still


class _KinematicBackend(SimulatorBackend):
    """Motion only: the shared kinematics of SimulatorBackend, nothing rendered."""

    def _load_scene(self, scene):
        pass

    def _sync(self):
        pass

    def render_head_camera(self):
        raise NotImplementedError

    def render_camera(self, pose, intrinsics, top_down=False):
        raise NotImplementedError

    def laser_scan(self, spec):
        raise NotImplementedError

    def line_of_sight(self, origin, points):
        raise NotImplementedError

    def link_transforms(self):
        raise NotImplementedError

    @property
    def head_intrinsics(self):
        raise NotImplementedError


def test_a_realised_motion_replaces_the_nominal_one_and_is_clipped_by_walls():
    b, room = _KinematicBackend(), box_room()
    b.load(room, Pose2D(3.0, 2.0, 0.0))
    r = b.apply_action(1, realised=(0.3, 0.1))
    assert r.pose.x == pytest.approx(3.0 + 0.3 * math.cos(0.05)) and r.pose.y == pytest.approx(0.3 * math.sin(0.05) + 2)
    assert r.pose.yaw == pytest.approx(0.1) and r.distance_m == pytest.approx(0.3) and r.sim_time == 0.25
    nominal = b.apply_action(1)
    assert nominal.distance_m == pytest.approx(FORWARD_M) and nominal.pose.yaw == r.pose.yaw
    b.load(room, Pose2D(5.5, 2.0, 0.0))
    assert b.apply_action(1, realised=(0.4, 0.0)).clipped  # into the east wall


# ------------------------------------------------------------------ latency
def test_camera_frames_arrive_after_the_latency_with_their_capture_stamp():
    m = CameraLatency(model_rng(1, "latency"), delay_s=0.1)
    captured = [i / 15.0 for i in range(6)]
    delivered = []
    for tick in range(60):  # 60 Hz ticks
        t = tick / 60.0
        if tick % 4 == 0 and tick // 4 < len(captured):
            m.push(captured[tick // 4], f"frame{tick // 4}")
        delivered += [(t, tc, f) for tc, f in m.due(t)]
    assert [f for *_, f in delivered] == [f"frame{i}" for i in range(6)]
    for t, tc, f in delivered:
        assert tc == captured[int(f[5:])]  # the capture stamp, not the delivery time
        assert tc + 0.1 - 1e-9 <= t < tc + 0.1 + 1.0 / 60.0  # the first tick at or after capture + latency
    jittery = CameraLatency(model_rng(1, "latency"), delay_s=0.05, jitter_s=0.05)
    times = [jittery.push(i / 30.0, i) for i in range(200)]
    assert times == sorted(times) and min(np.diff(times)) >= 0.0  # delivered in order
    assert len(jittery) == 200
    jittery.reseed(model_rng(2, "latency"))
    assert len(jittery) == 0 and jittery.due(1e9) == []


# ------------------------------------------------------------------ the container
def test_a_noise_set_with_nothing_enabled_returns_its_inputs():
    off = NoiseSet.from_config({"noise_depth_sigma_k": 0.002, "noise_seed": 5, "mode": "lockstep"}, seed=3)
    depth, rgb, ranges = np.ones((4, 4), np.float32), np.zeros((4, 4, 3), np.uint8), np.ones(5)
    pose = Pose2D(1.0, 2.0, 0.3)
    assert off.apply_depth(depth, FX) is depth and off.apply_rgb(rgb, np.ones(3), FX, FX) is rgb
    assert off.apply_laser(ranges, 0.05, 25.0) is ranges and off.odometry(pose) is pose
    assert off.realise(FORWARD_M, 0.0) == (FORWARD_M, 0.0) and off.get("latency") is None and not off.models


def test_models_of_a_set_are_independent_and_reseeded_per_episode():
    img = np.full((60, 80), 2.0, np.float32)
    one = NoiseSet.from_config({"noise_depth_enabled": True}, seed=11)
    two = NoiseSet.from_config({"noise_depth_enabled": True, "noise_laser_enabled": True}, seed=11)
    two.apply_laser(np.ones(100), 0.05, 25.0)  # the laser's draws do not shift the depth model's
    a = one.apply_depth(img, FX)
    assert np.array_equal(a, two.apply_depth(img, FX), equal_nan=True)
    assert not np.array_equal(a, one.apply_depth(img, FX), equal_nan=True)  # the stream moves on
    one.reseed(11)
    assert np.array_equal(a, one.apply_depth(img, FX), equal_nan=True)
    one.reseed(12)
    assert not np.array_equal(a, one.apply_depth(img, FX), equal_nan=True)
    assert NoiseSet.from_config({"noise_depth_enabled": True, "noise_depth_sigma_k": 0.01}).get("depth").sigma_k == 0.01
    for config, key in (({"noise_sonar_enabled": True}, "noise_sonar_enabled"),
                        ({"noise_depth_colour": 1.0}, "noise_depth_colour"),
                        ({"noise_depth_enabled": "yes"}, "noise_depth_enabled")):
        with pytest.raises(InvalidInput, match=key):
            NoiseSet.from_config(config)
    with pytest.raises(InvalidInput, match="noise_seed"):
        one.reseed(-1)


def test_models_of_one_stream_are_applied_in_registration_order_and_one_latency_model_at_most(monkeypatch):
    """A model registered after the shipped ones (a user's plugin) is applied by the set, after them."""
    from affectsim_bridge.bridge_node import PARAMS, node_params, noise_set
    from affectsim_bridge.world.noise import NoiseModel, register_model

    monkeypatch.setattr(NOISE_MODELS, "_entries", dict(NOISE_MODELS._entries))

    @register_model("laser_offset")
    class Offset(NoiseModel):
        """Every range 1 m longer."""

        stream = "laser"
        summary = "laser offset"

        def apply(self, ranges, range_min, range_max):
            return np.asarray(ranges, np.float32) + 1.0

    @register_model("late")
    class Late(CameraLatency):
        stream = "latency"

    ranges = np.full(50, 3.0)
    both = NoiseSet.from_config({"noise_laser_offset_enabled": True, "noise_laser_enabled": True,
                                 "noise_laser_sigma_m": 0.0}, seed=1)
    assert [m.name for m in both.streams["laser"]] == ["laser", "laser_offset"] and "laser" in both
    assert np.array_equal(both.apply_laser(ranges, 0.05, 2.5), np.full(50, 3.5, np.float32))  # clipped, then +1
    assert "noise_laser_offset_enabled" in {p.name for p in node_params()} - {p.name for p in PARAMS}
    with pytest.raises(InvalidInput, match="noise_late_enabled=True is invalid; expected false while "
                                           "noise_latency_enabled is true"):
        NoiseSet.from_config({"noise_latency_enabled": True, "noise_late_enabled": True})
    p = {q.name: q.default for q in node_params()}
    with pytest.raises(InvalidInput, match="parameter noise_late_enabled=True is invalid; expected false with mode=lockstep"):
        noise_set({**p, "noise_late_enabled": True})  # a latency model, whatever its name: free_run only


# ------------------------------------------------------------------ the bridge node
def test_the_bridge_refuses_noise_models_in_a_mode_they_do_not_apply_to():
    from affectsim_bridge.bridge_node import PARAMS, noise_set

    p = {q.name: q.default for q in PARAMS}
    assert not noise_set(p).models  # defaults: all off
    lockstep = "parameter noise_latency_enabled=True is invalid; expected false with mode=lockstep"
    with pytest.raises(InvalidInput, match=lockstep):
        noise_set({**p, "noise_latency_enabled": True})  # lockstep
    assert "latency" in noise_set({**p, "noise_latency_enabled": True, "mode": "free_run"})
    with pytest.raises(InvalidInput, match="noise_actuation_enabled"):
        noise_set({**p, "noise_actuation_enabled": True, "mode": "free_run"})


@pytest.mark.parametrize("arg, message", [
    ("noise_depth_sigma_k:=0.5", "parameter noise_depth_sigma_k=0.5 is invalid; expected a number in [0, 0.05]"),
    ("noise_latency_enabled:=true", "parameter noise_latency_enabled=True is invalid; expected false with "
                                    "mode=lockstep"),
])
def test_the_bridge_node_stops_naming_a_bad_noise_parameter(arg, message):
    proc = subprocess.run([sys.executable, "-m", "affectsim_ros.nodes", "bridge", "--ros-args", "-p", arg],
                          env=loopback_env(pick_domain_id()), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def _call(cli, req, timeout=60.0):
    """A service reply (the client's node is spun by the BridgeClient's executor)."""
    done = threading.Event()
    fut = cli.call_async(req)
    fut.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no answer"
    return fut.result()


def test_noisy_bridge_publishes_noisy_sensors_and_noise_free_ground_truth_and_views(tmp_path):
    """One bridge with depth, RGB, laser, odometry and actuation noise on, over DDS."""
    import rclpy
    from geometry_msgs.msg import Pose2D as Pose2DMsg
    from geometry_msgs.msg import PoseStamped

    from affectsim_core.actions import Action
    from affectsim_core.ros.bridge_client import BridgeClient
    from affectsim_core.ros.conversions import from_time, image_to_array
    from affectsim_core.ros.env import ensure_loopback
    from affectsim_core.ros.topics import SERVICES, TOPICS
    from affectsim_interfaces.srv import RenderViews
    from affectsim_ros.launcher import GraphProcesses

    on = {f"noise_{n}_enabled": True for n in ("depth", "rgb", "laser", "odometry", "actuation")}
    with GraphProcesses("bench", nodes=("bridge",), args={"mode": "lockstep"}, log_dir=tmp_path,
                        extra_params={"bridge": on}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("noise_test_client", topics=("rgb", "depth", "scan", "odom"))
        truth: dict[float, PoseStamped] = {}
        arrived = threading.Condition()

        def on_truth(m):
            with arrived:
                truth[round(from_time(m.header.stamp), 6)] = m
                arrived.notify_all()

        client.node.create_subscription(PoseStamped, TOPICS["gt_robot"], on_truth, 10)
        render = client.node.create_client(RenderViews, SERVICES["render_views"])
        try:
            client.wait_for_bridge(90)

            def episode(seed):
                assert client.load("test_apartment", 1.0, 2.5, 0.0, noise_seed=seed).success
                res, rgb, depth = client.step_and_frame(Action.STOP)
                scan = client.wait_for_stamp("scan", res.stamp)
                return res, image_to_array(rgb), image_to_array(depth), np.array(scan.ranges)

            r1, rgb1, d1, s1 = episode(1)
            _, rgb1b, d1b, s1b = episode(1)
            _, rgb2, d2, s2 = episode(2)
            assert np.array_equal(d1, d1b, equal_nan=True) and np.array_equal(rgb1, rgb1b) and np.array_equal(s1, s1b)
            assert not np.array_equal(d1, d2, equal_nan=True) and not np.array_equal(rgb1, rgb2)
            assert not np.array_equal(s1, s2)
            both = np.isfinite(d1) & np.isfinite(d2)
            assert both.mean() > 0.8 and np.median(np.abs(d1[both] - d2[both])) < 0.05  # noise, not another view

            # the privileged view of the same state is noise-free: not the published frame, but close to it
            assert render.wait_for_service(30)
            req = RenderViews.Request(size=0, times=[from_time(r1.stamp)], head_tilts=[0.0],
                                      robot_poses=[Pose2DMsg(x=r1.pose.x, y=r1.pose.y, theta=r1.pose.theta)])
            views = [image_to_array(_call(render, req).frames[0]) for _ in range(2)]
            assert np.array_equal(views[0], views[1]) and not np.array_equal(views[0], rgb1)
            assert 0.5 < np.abs(views[0].astype(int) - rgb1).mean() < 6.0

            # actuation noise moves the robot off the nominal 4 x 0.25 m; ground truth follows the real motion,
            # odometry (map -> odom is the start pose) drifts from it
            assert client.load("test_apartment", 1.0, 2.5, 0.0, noise_seed=3).success
            for _ in range(4):
                res = client.apply(Action.FORWARD)
                assert res.success and not res.clipped
            t = round(from_time(res.stamp), 6)
            odom = client.wait_for_stamp("odom", res.stamp).pose.pose.position
            with arrived:
                assert arrived.wait_for(lambda: t in truth, timeout=10), "no ground truth at the action's stamp"
                gt = truth[t].pose.position
            assert (gt.x, gt.y) == pytest.approx((res.pose.x, res.pose.y), abs=1e-9)
            assert abs(res.pose.x - 2.0) > 1e-4
            assert 1e-6 < math.hypot(odom.x + 1.0 - gt.x, odom.y + 2.5 - gt.y) < 0.1
        finally:
            client.close()
            rclpy.shutdown()
        assert g.poll()["bridge"] is None, (tmp_path / "bridge.log").read_text()
