"""The transform buffer: history per edge, interpolation, static frames from many publishers, waits,
extrapolation limits, time going backwards and future stamps (ROS-free)."""

import math
import threading

import numpy as np
import pytest

from affectsim_core.geometry import Pose2D, Transform
from affectsim_core.tf_buffer import EXTRAPOLATION_S, HISTORY_S, TfBuffer, TransformError, slerp


def _yaw(tf: Transform) -> float:
    return math.atan2(tf.rotation[1, 0], tf.rotation[0, 0])


def _robot(buf: TfBuffer, stamps, x=lambda t: t, yaw=lambda t: 0.0, now=None):
    for t in stamps:
        assert buf.set_transform("odom", "base_link", t, Transform.from_pose2d(Pose2D(x(t), 0.0, yaw(t))), now=now)


def test_lookups_interpolate_between_stamps_and_return_stored_ones_unchanged():
    buf = TfBuffer()
    buf.set_transform("map", "odom", 0.0, Transform.from_pose2d(Pose2D(1.0, 2.0, 0.0)), static=True)
    _robot(buf, [0.0, 0.1, 0.2], x=lambda t: 10 * t, yaw=lambda t: 5 * t)  # 1 m/s... 0.5 rad per 0.1 s
    at = buf.lookup("map", "base_link", 0.15)
    assert at.translation[0] == pytest.approx(1.0 + 1.5) and at.translation[1] == pytest.approx(2.0)
    assert _yaw(at) == pytest.approx(0.75)  # slerp halfway between 0.5 and 1.0 rad
    stored = Transform.from_pose2d(Pose2D(1.0, 0.0, 0.5))
    exact = buf.lookup("odom", "base_link", 0.1)
    assert np.array_equal(exact.rotation, stored.rotation) and np.array_equal(exact.translation, stored.translation)
    inverse = buf.lookup("base_link", "map", 0.1)  # target below source: through the common ancestor
    assert np.allclose(inverse.compose(buf.lookup("map", "base_link", 0.1)).matrix(), np.eye(4))
    q0, q1 = np.array([1.0, 0, 0, 0]), np.array([0.0, 0, 0, 1])  # 0 and pi about z
    assert slerp(q0, q1, 0.5) == pytest.approx([math.sqrt(0.5), 0, 0, math.sqrt(0.5)])


def test_static_frames_from_several_publishers_are_kept_per_child():
    buf = TfBuffer()
    # robot_state_publisher, then the camera driver, then the laser driver: each latches its own frames
    buf.set_transform("base_link", "head_link", 0.0, Transform.from_pose2d(Pose2D(0.1, 0, 0), z=1.0), static=True)
    buf.set_transform("head_link", "camera_optical", 0.0, Transform.from_pose2d(Pose2D(0.05, 0, 0)), static=True)
    buf.set_transform("base_link", "laser", 0.0, Transform.from_pose2d(Pose2D(0.2, 0, math.pi)), static=True)
    _robot(buf, [5.0])
    cam = buf.lookup("odom", "camera_optical", 5.0)
    assert cam.translation == pytest.approx([5.0 + 0.15, 0.0, 1.0])
    assert buf.frames() == {"head_link": "base_link", "camera_optical": "head_link", "laser": "base_link",
                            "base_link": "odom"}
    assert not buf.set_transform("x", "head_link", 6.0, Transform.identity())  # /tf cannot move a static frame
    assert "static frame" in buf.last_refusal


def test_errors_name_the_broken_edge_and_the_range_held():
    buf = TfBuffer()
    _robot(buf, [1.0, 1.1, 1.2])
    with pytest.raises(TransformError, match=r"no TF path from 'base_link' to 'map': broken at 'odom'"):
        buf.lookup("map", "base_link", 1.1)
    with pytest.raises(TransformError, match=r"odom -> base_link at t=2.000 s: the buffer holds \[1.000, 1.200\] s, "
                                             r"0.800 s past its newest \(extrapolation limit 0.20 s\)"):
        buf.lookup("odom", "base_link", 2.0)
    with pytest.raises(TransformError, match="before its oldest"):
        buf.lookup("odom", "base_link", 0.5)
    held = buf.lookup("odom", "base_link", 1.2 + EXTRAPOLATION_S * 0.9)  # a slow localiser: held, not extrapolated
    assert held.translation[0] == pytest.approx(1.2)


def test_a_lookup_waits_for_late_transforms_within_its_timeout():
    buf = TfBuffer()
    _robot(buf, [0.0, 0.1])
    late = threading.Timer(0.2, lambda: _robot(buf, [0.3]))  # odometry 50 ms late and at 10 Hz
    late.start()
    try:
        at = buf.lookup("odom", "base_link", 0.25, timeout=30.0)  # returns once 0.3 arrived: state, not time
    finally:
        late.join()
    assert at.translation[0] == pytest.approx(0.25)
    assert buf.can_transform("odom", "base_link", 0.3) and not buf.can_transform("odom", "base_link", 0.31)


def test_time_going_backwards_clears_the_history_and_future_stamps_are_refused():
    buf = TfBuffer()
    _robot(buf, np.arange(0.0, 30.0, 0.25))  # an episode of 30 s
    assert buf.lookup("odom", "base_link", 20.0).translation[0] == pytest.approx(20.0)
    with pytest.raises(TransformError, match="before its oldest"):  # only HISTORY_S is kept
        buf.lookup("odom", "base_link", 29.75 - HISTORY_S - 0.5)
    _robot(buf, [0.0], x=lambda t: 7.0)  # a new episode: sim time restarts at 0
    assert buf.cleared == 1
    assert buf.lookup("odom", "base_link", 0.0).translation[0] == 7.0  # the new episode's, not the old one's
    with pytest.raises(TransformError, match="past its newest"):
        buf.lookup("odom", "base_link", 0.25)  # the old episode's 0.25 s is gone
    for k in range(60):  # a publisher with a broken clock: refused, the history stays usable
        assert not buf.set_transform("odom", "base_link", 1e6 + k, Transform.identity(), now=0.1)
    assert buf.refused == 60 and "beyond the future tolerance" in buf.last_refusal
    _robot(buf, [0.25], x=lambda t: 7.5, now=0.25)
    assert buf.lookup("odom", "base_link", 0.25).translation[0] == 7.5


def test_bad_transforms_are_refused_with_a_reason():
    buf = TfBuffer()
    bad = Transform(np.full((3, 3), np.nan), np.zeros(3))
    assert not buf.set_transform("odom", "base_link", 0.0, bad) and "non-finite" in buf.last_refusal
    assert not buf.set_transform("a", "a", 0.0, Transform.identity()) and "different child" in buf.last_refusal
    assert buf.set_transform("a", "b", 0.0, Transform.identity())
    assert not buf.set_transform("b", "a", 0.0, Transform.identity()) and "cycle" in buf.last_refusal
    with pytest.raises(ValueError, match="extrapolation=-1"):
        TfBuffer(extrapolation=-1)


def test_rgb_and_depth_pair_approximately_each_depth_once():
    from affectsim_core.sync import ApproximatePairs

    pairs = ApproximatePairs(slop=0.02)
    assert pairs.add("rgb", 1.000, "r1") == []  # no depth yet
    assert pairs.add("depth", 0.997, "d0") == []  # 3 ms early: a nearer one could still come
    assert pairs.add("depth", 1.004, "d1") == [("r1", "d0")]  # now final: d0 (3 ms) is nearer than d1 (4 ms)
    assert pairs.add("rgb", 1.067, "r2") == []
    assert pairs.add("depth", 1.070, "d2") == [("r2", "d2")]
    assert pairs.add("rgb", 2.0, "r3") == [] and pairs.add("depth", 2.1, "d3") == []  # 100 ms apart: no pair
    assert pairs.dropped == 1
    assert pairs.add("rgb", 0.0, "new") == [] and pairs.add("depth", 0.0, "new_d") == [("new", "new_d")]  # exact
