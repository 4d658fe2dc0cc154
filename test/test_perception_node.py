"""The perception node over DDS: identical predictions to in-process recognizers, bad clips
rejected while it keeps serving, and person detections from the camera stream."""

import math
import os
import threading

import numpy as np
import pytest
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy

from affectsim_bridge.content.library import Library, build
from affectsim_core.actions import Action
from affectsim_core.person_tracking import locate
from affectsim_core.ros.action_client import ActionClient
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time, image_msg, to_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.sensors import observation_from_msgs
from affectsim_interfaces.action import Recognize
from affectsim_interfaces.msg import PersonDetections
from affectsim_perception.person_model import BlazePose
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS, RECOGNIZERS, ClipInput
from affectsim_ros.launcher import GraphProcesses
from waiting import wait_until

NAMES = os.environ.get("AFFECTSIM_TEST_RECOGNIZERS", ",".join(DEFAULT_RECOGNIZERS)).split(",")


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    lib = tmp_path_factory.mktemp("lib") / "motions"
    build(lib, seed=0, log=lambda s: None, ag_performers=1, ag_takes=1, oc_performances=5, oc_performers=1, dyadic=0,
          ev_performers=0)
    logs = tmp_path_factory.mktemp("logs")
    with GraphProcesses("bench", nodes=("bridge", "perception"), args={"mode": "lockstep", "detections": "on"},
                        log_dir=logs,
                        extra_params={"bridge": {"motion_library": str(lib)}, "perception": {"recognizers": NAMES}}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("perception_test_client", topics=("rgb", "depth", "rgb_info", "tf", "tf_static"))
        detections = []
        client.node.create_subscription(PersonDetections, "/affectsim/person_detections", detections.append,
                                        QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
        action = ActionClient(client.node, Recognize, "/affectsim/recognize")
        client.wait_for_bridge(90)
        assert action.wait_for_server(90), (logs / "perception.log").read_text()
        yield client, action, detections, lib
        client.close()
        rclpy.shutdown()
        assert g.poll()["perception"] is None, (logs / "perception.log").read_text()


def _recognize(action, frames, names=()):
    return _send(action, Recognize.Goal(frames=[image_msg(f, "rgb8", "clip", to_time(0.0)) for f in frames],
                                        recognizers=list(names)))


def _send(action, goal):
    done = threading.Event()
    fut = action.send_goal_async(goal)
    fut.add_done_callback(lambda f: done.set())
    assert done.wait(30)
    rdone = threading.Event()
    rf = fut.result().get_result_async()
    rf.add_done_callback(lambda f: rdone.set())
    assert rdone.wait(120)
    return rf.result()


def _clip(client, lib):
    """8 frames of a person in front of the robot, through the bridge, resized to 224x224."""
    from affectsim_core.clips import resize
    from affectsim_core.ros.conversions import image_to_array

    mid = sorted(i for i, e in Library(lib).entries.items() if e["action"] == "standing")[0]
    humans = [{"id": "target", "x": 3.8, "y": 2.5, "yaw": math.pi, "appearance": 0, "is_target": True,
               "motion_id": mid, "phase": 0.0}]
    assert client.load("test_apartment", 1.5, 2.5, 0.0, humans=humans).success
    frames = []
    for _ in range(8):
        _, rgb, _ = client.step_and_frame(Action.STOP)
        frames.append(resize(image_to_array(rgb)))
    return np.stack(frames)


def test_predictions_match_in_process_recognizers(graph):
    client, action, _, lib = graph
    frames = _clip(client, lib)
    res = _recognize(action, frames)
    from action_msgs.msg import GoalStatus

    assert res.status == GoalStatus.STATUS_SUCCEEDED
    got = {p.recognizer: p for p in res.result.predictions}
    assert list(got) == NAMES
    for name in NAMES:
        rec = RECOGNIZERS.create(name)
        want = rec.predict(ClipInput(frames))
        rec.close()
        assert got[name].label == want.label and got[name].outcome == "ok"
        assert np.array_equal(np.array(got[name].probs, np.float32), want.probs.astype(np.float32))
        assert got[name].seconds >= 0


def test_bad_clips_are_rejected_and_the_node_keeps_serving(graph):
    _, action, _, _ = graph
    from action_msgs.msg import GoalStatus

    res = _recognize(action, np.zeros((7, 224, 224, 3), np.uint8))
    assert res.status == GoalStatus.STATUS_ABORTED and "frames='7 frames' is invalid; expected 8" in res.result.message
    res = _recognize(action, np.zeros((400, 224, 224, 3), np.uint8))  # refused before any frame is converted
    assert res.status == GoalStatus.STATUS_ABORTED and "400 frames" in res.result.message
    bad = Recognize.Goal(frames=[image_msg(np.zeros((224, 224, 3), np.uint8), "rgb8", "clip", to_time(0.0))
                                 for _ in range(8)])
    bad.frames[3].data = bad.frames[3].data[:100]  # a header that lies about the pixel data
    res = _send(action, bad)
    assert res.status == GoalStatus.STATUS_ABORTED and "frames[3]" in res.result.message and "100 bytes" in res.result.message
    res = _recognize(action, np.zeros((8, 100, 100, 3), np.uint8))
    assert res.status == GoalStatus.STATUS_ABORTED and "224" in res.result.message
    res = _recognize(action, np.zeros((8, 224, 224, 3), np.uint8), names=["nope"])
    assert res.status == GoalStatus.STATUS_ABORTED and "nope" in res.result.message
    res = _recognize(action, np.zeros((8, 224, 224, 3), np.uint8), names=["uniform"])
    assert res.status == GoalStatus.STATUS_SUCCEEDED and res.result.predictions[0].recognizer == "uniform"


def test_streams_are_labelled_per_window_as_in_process_and_bad_streams_refused(graph):
    client, action, _, lib = graph
    from action_msgs.msg import GoalStatus

    from affectsim_perception.recognizers.base import StreamInput

    frames = np.concatenate([_clip(client, lib), _clip(client, lib)[:3]])  # 11 frames: 4 windows
    times = np.arange(len(frames)) * 0.25
    goal = Recognize.Goal(frames=[image_msg(f, "rgb8", "clip", to_time(float(t))) for f, t in zip(frames, times)],
                          stamps=[to_time(float(t)) for t in times], recognizers=["pose-temporal", "majority"],
                          stream=True)
    res = _send(action, goal)
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    assert list(res.result.window_times) == pytest.approx([0.875, 1.125, 1.375, 1.625])
    got = [(p.recognizer, p.label, p.estimates_vad, list(p.vad)) for p in res.result.predictions]
    assert [g[0] for g in got] == ["pose-temporal", "majority"] * 4  # window-major
    rec = RECOGNIZERS.create("pose-temporal")
    want = rec.predict_stream(StreamInput(frames, times))
    rec.close()
    assert [g[1] for g in got[::2]] == [p.label for _, p in want]
    assert rec.estimates_vad and all(g[2] for g in got[::2])  # the shipped checkpoint has a VAD head
    assert np.allclose([g[3] for g in got[::2]], [p.vad for _, p in want], atol=1e-6)
    goal.stride = 2  # a window every 2 frames
    res = _send(action, goal)
    assert list(res.result.window_times) == pytest.approx([0.875, 1.375])
    goal.stride = 12  # longer than the stream
    res = _send(action, goal)
    assert res.status == GoalStatus.STATUS_ABORTED and "stride" in res.result.message
    goal.stride = 0
    goal.stamps = goal.stamps[:5]  # a stream needs one stamp per frame
    res = _send(action, goal)
    assert res.status == GoalStatus.STATUS_ABORTED and "frames/stamps" in res.result.message
    res = _recognize(action, np.zeros((8, 224, 224, 3), np.uint8), names=["uniform"])
    assert res.status == GoalStatus.STATUS_SUCCEEDED  # and the node keeps serving


def test_person_detections_follow_the_camera_stream(graph):
    client, _, detections, lib = graph
    _clip(client, lib)
    res, _, _ = client.step_and_frame(Action.STOP)
    t = from_time(res.stamp)
    hits = wait_until(lambda: [d for d in detections if abs(from_time(d.header.stamp) - t) < 1e-6], 10,
                      "detections for the newest frame")
    d = hits[0]
    assert d.header.frame_id == "head_camera_rgb_optical_frame" and len(d.people) == 1
    p = d.people[0]
    assert len(p.keypoints) == 99 and p.x0 < p.x1 and p.y0 < p.y1
    assert math.hypot(p.position.x - 3.8, p.position.y - 2.5) < 0.4 and p.position.z == 0.0  # map floor position
    # the node locates people with the policies' code: the same frame located here gives the same position
    match = lambda m: abs(from_time(m.header.stamp) - t) < 1e-6  # noqa: E731
    obs = observation_from_msgs(client.wait_for("rgb", match), client.wait_for("depth", match),
                                client.wait_for("rgb_info", match), client.tf, 0, timeout=10.0)
    here = locate(BlazePose().detect(np.array(obs.rgb)), obs)
    assert (p.position.x, p.position.y) == pytest.approx(here.xy, abs=1e-6)


def test_tf_stamps_are_checked_against_the_clock_not_the_newest_camera_frame(tmp_path):
    """Frames wait behind the detector, so the newest camera stamp lags: under load make bench's
    map -> odom was refused as 2.25 s future-dated. A transform 1 s after /clock is accepted though
    the last frame is 90 s older; one 3.5 s after /clock is refused."""
    from pathlib import Path

    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import TransformStamped
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Image
    from tf2_msgs.msg import TFMessage

    with GraphProcesses("stack", nodes=("perception",), args={"mode": "lockstep"}, log_dir=tmp_path,
                        extra_params={"perception": {"recognizers": ["majority"]}}) as g:
        ensure_loopback(g.domain_id)
        ctx = rclpy.Context()  # its own context: the module's graph may hold the default one
        rclpy.init(context=ctx, domain_id=g.domain_id)
        node = rclpy.create_node("clock_test", context=ctx)
        pubs = {k: node.create_publisher(t, f"/{k}" if k != "rgb" else "/head_camera/rgb/image_raw", 10)
                for k, t in (("clock", Clock), ("tf", TFMessage), ("rgb", Image))}
        log = Path(g._logs[0].name)

        def tf(sec: float) -> TFMessage:
            t = TransformStamped()
            t.header.stamp = Time(sec=int(sec), nanosec=int(round(sec % 1 * 1e9)))
            t.header.frame_id, t.child_frame_id = "map", "odom"
            t.transform.rotation.w = 1.0
            return TFMessage(transforms=[t])

        wait_until(lambda: "perception ready" in log.read_text(), 180, "the perception node ready", 0.5)
        wait_until(lambda: node.count_subscribers("/tf") > 0, 60, "its /tf subscription", 0.2)
        frame = Image(height=1, width=1, encoding="rgb8", step=3, data=bytes(3))
        frame.header.stamp = Time(sec=10)
        pubs["rgb"].publish(frame)  # the newest frame the node has seen: 90 s before the clock
        refused = lambda: "refused" in log.read_text()  # noqa: E731
        for _ in range(5):
            pubs["clock"].publish(Clock(clock=Time(sec=100)))
            pubs["tf"].publish(tf(101.0))
        # one reliable publisher keeps its order: once 103.5 s is refused, every 101 s one was handled before it
        def offered_until_refused() -> bool:
            pubs["clock"].publish(Clock(clock=Time(sec=100)))
            pubs["tf"].publish(tf(103.5))
            return refused()

        wait_until(offered_until_refused, 180, "the transform 3.5 s ahead of the clock refused", 0.2)
        text = log.read_text()
        assert "103.500 s, 3.500 s after now (100.000 s)" in text and "stamped 101.000" not in text, text[-2000:]
        node.destroy_node()
        ctx.shutdown()
