"""Recordings a viewer can replay (docs/evaluation.md, "Recording"): one episode recorded through the real
bench graph on the small dataset, read back with an independent MCAP reader (``test/mcap_check.py``:
the mcap package decoding from the file's own schemas; nothing of the project or of rosbags). Every
expected topic is there, ``/map`` once, every camera frame can be placed in ``map`` through the recorded
TF alone, the people have markers; a recording without depth has no depth topic and one with a small
size budget stays within it; a killed evaluator leaves no recording under its final name. A robot session
(``affectsim observe --record`` against the independent stand-in robot, ``test/standin_robot.py``) is
recorded the same way, without ground truth."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from affectsim_core.ros.env import loopback_env, pick_domain_id
from affectsim_core.ros.topics import TOPICS
from affectsim_eval.episode.recording import CLIP_TOPIC, MARKERS_TOPIC, PREDICTIONS_TOPIC
from affectsim_eval.episode.recording_viz import DETECTIONS_NS, GROUND_TRUTH_NS, PATH_NS
from affectsim_eval.run.store import ResultsStore
from affectsim_ros.launcher import GraphProcesses
from mcap_check import Tf, read
from helpers import episode_ids
from waiting import wait_until

ARGS = {"episodes": "0", "recognizers": "majority", "record": "true",
        "allow_dataset_mismatch": "true"}  # the small test dataset is not the one the checkpoints were trained on
SMALL_MB = 5  # record_max_mb of the run with a small budget: about 5 RGB frames
SENSOR = ("rgb", "rgb_info", "depth", "depth_info", "scan", "odom", "tf", "tf_static", "map", "person_detections")
HERE = Path(__file__).resolve().parent
LAYOUT = HERE.parent / "config" / "foxglove_layout.json"


def _graph(small_data, run, logs, **args):
    """A bench graph recording the episode into ``run`` (its evaluator's log under ``logs``)."""
    data, _ = small_data
    return GraphProcesses("bench", args={**ARGS, "episode_ids": episode(small_data), "output_dir": str(run), **args},
                          log_dir=logs, extra_params={"bridge": {"motion_library": str(data / "motions")},
                                                      "evaluator": {"data_dir": str(data)}})


def _evaluated(graph, logs) -> tuple[str, int]:
    """The evaluator's log and exit code once it is done."""
    wait_until(lambda: graph.poll()["evaluator"] is not None, 300, "the evaluator done", 0.5)
    return (logs / "evaluator.log").read_text(), graph.poll()["evaluator"]


@pytest.fixture(scope="module")
def full_run(small_data, tmp_path_factory):
    """The run directory of the episode recorded in full by one bench graph."""
    tmp = tmp_path_factory.mktemp("recording")
    with _graph(small_data, tmp / "full", tmp / "logs") as g:
        log, code = _evaluated(g, tmp / "logs")
    assert code == 0, log
    return tmp / "full"


@pytest.fixture(scope="module")
def full(full_run, small_data):
    return read(full_run / "recordings" / episode(small_data))


@pytest.fixture(scope="module")
def variants(small_data, tmp_path_factory):
    """The episode recorded by a bench graph without depth and with a budget of SMALL_MB, then by a second
    evaluator on that graph, killed while it records. {name: (run dir, evaluator log, exit code)}."""
    data, _ = small_data
    tmp = tmp_path_factory.mktemp("recording")
    out = {}
    with _graph(small_data, tmp / "small", tmp / "logs_small", record_depth="false",
                record_max_mb=str(SMALL_MB)) as g:
        out["small"] = (tmp / "small", *_evaluated(g, tmp / "logs_small"))
        rec_dir = tmp / "killed" / "recordings"
        with GraphProcesses("bench", nodes=("evaluator",), domain_id=g.domain_id, log_dir=tmp / "logs_killed",
                            args={**ARGS, "episode_ids": episode(small_data), "output_dir": str(tmp / "killed")},
                            extra_params={"evaluator": {"data_dir": str(data)}}) as ev:
            # killed once its recording holds data (the temporary bag has grown past its header)
            wait_until(lambda: rec_dir.is_dir() and any(f.stat().st_size > 1_000_000 for f in rec_dir.rglob("*.mcap")),
                       300, "a recording under way")
            ev.procs["evaluator"].kill()
            ev.procs["evaluator"].wait(30)
            out["killed"] = (tmp / "killed", "", ev.poll()["evaluator"])
    return out


def episode(small_data) -> str:
    """The recorded episode: the first dyadic test episode of the small dataset."""
    return episode_ids(small_data[0], "dyadic")[0]


def test_a_recording_holds_every_topic_a_viewer_needs(full, full_run):
    for key in SENSOR:
        assert full.count(TOPICS[key]) >= 1, (key, {t: full.count(t) for t in full.messages})
    assert TOPICS["cmd_vel"] in full.messages  # recorded (lockstep commands none: its count may be 0)
    assert full.count(TOPICS["map"]) == 1
    for topic, (schema, encoding, msg_encoding) in full.types.items():
        assert (encoding, msg_encoding) == ("ros2msg", "cdr"), (topic, encoding, msg_encoding)
    assert full.types[MARKERS_TOPIC][0] == "visualization_msgs/msg/MarkerArray"
    with ResultsStore.open(full_run / "results.sqlite") as st:
        (record,) = st.records(None)
    if not record["a_obs"]["fallback"]:  # the acquired clip and the recognizer's scores for it
        assert full.count(CLIP_TOPIC) == 8
        preds = full.of(PREDICTIONS_TOPIC)
        assert [p.recognizer for p in preds] == ["majority"] and len(preds[0].probs) == 5
        assert abs(sum(preds[0].probs) - 1.0) < 1e-4
    else:
        assert full.count(CLIP_TOPIC) == 0 and full.count(PREDICTIONS_TOPIC) == 0


def test_every_camera_frame_is_placed_in_map_through_the_recorded_tf_alone(full):
    tf = Tf(full)
    n = 0
    for topic in (TOPICS["rgb"], TOPICS["depth"], CLIP_TOPIC):
        for img in full.of(topic):
            pose = tf.in_map(img.header.frame_id, img.header.stamp, tolerance_s=1e-3)  # lockstep: same stamps
            assert 0.8 < pose[2, 3] < 1.8, (topic, pose[:3, 3])  # the Fetch's head camera above the floor
            assert pose[2, 2] < 0.5  # optical z (forward) roughly level
            n += 1
    assert n >= full.count(TOPICS["rgb"]) + full.count(TOPICS["depth"]) >= 2
    # the path marker follows the base in map as the recorded TF puts it
    odom = full.of(TOPICS["odom"])[-1]
    base = tf.in_map("base_link", odom.header.stamp, tolerance_s=1e-3)[:2, 3]
    paths = [m for arr in full.of(MARKERS_TOPIC) for m in arr.markers if m.ns == PATH_NS and m.points]
    end = paths[-1].points[-1]
    assert np.hypot(end.x - base[0], end.y - base[1]) < 0.1, (end, base)


def test_people_are_markers_ground_truth_in_its_own_namespace(full):
    markers = [m for arr in full.of(MARKERS_TOPIC) for m in arr.markers]
    truth = [m for m in markers if m.ns == GROUND_TRUTH_NS and m.action == 0]
    assert truth and all(m.header.frame_id == "map" for m in truth)
    assert {m.ns for m in markers} <= {GROUND_TRUTH_NS, DETECTIONS_NS, PATH_NS}
    located = [p.position for d in full.of(TOPICS["person_detections"]) for p in d.people
               if np.isfinite(p.position.x)]
    seen = [m for m in markers if m.ns == DETECTIONS_NS and m.action == 0]
    assert len(seen) == len(located)
    if located:  # a located person is near a true one
        last = truth[-1]
        assert min(np.hypot(p.x - last.pose.position.x, p.y - last.pose.position.y) for p in located) < 3.0


@pytest.mark.slow  # a second graph run (~30 s); the full recording above stays in `make test`
def test_without_depth_and_with_a_small_budget(variants, full, small_data):
    run, log, code = variants["small"]
    assert code == 0, log
    rec = read(run / "recordings" / episode(small_data))
    assert TOPICS["depth"] not in rec.messages and TOPICS["depth_info"] not in rec.messages
    assert f"{SMALL_MB} MB reached (record_max_mb)" in log and "camera images left out" in log, log
    image_bytes = sum(len(m.data) for m in rec.of(TOPICS["rgb"]))
    assert 0 < image_bytes <= SMALL_MB * 1_000_000
    assert rec.count(TOPICS["rgb"]) < full.count(TOPICS["rgb"])
    # the small topics are all written (± the one message in flight when the acquisition ends its capture)
    assert abs(rec.count(TOPICS["odom"]) - full.count(TOPICS["odom"])) <= 1
    assert rec.path.stat().st_size <= SMALL_MB * 1_000_000


@pytest.mark.slow  # shares the graph run of the test above
def test_a_killed_evaluator_leaves_no_recording_under_its_final_name(variants, small_data):
    run, _, code = variants["killed"]
    assert code is not None and code != 0
    rec_dir = run / "recordings"
    assert not (rec_dir / episode(small_data)).exists()
    assert [p.name for p in rec_dir.iterdir() if not p.name.startswith(".")] == []


def test_the_foxglove_layout_shows_recorded_topics(full):
    layout = json.loads(LAYOUT.read_text())
    panels = layout["configById"]
    kinds = {k.split("!")[0] for k in panels}
    assert {"3D", "Image", "Plot"} <= kinds, kinds
    text = json.dumps(panels)
    for topic in (TOPICS["rgb"], TOPICS["depth"], MARKERS_TOPIC, PREDICTIONS_TOPIC):
        assert topic in text and topic in full.messages, topic


@pytest.mark.serial  # the stand-in robot's 50 Hz /tf keeps wall-clock time; the images need one within 50 ms
def test_a_robot_session_is_recorded_without_ground_truth(tmp_path):
    """``affectsim observe --record`` on the robot graph (nav, perception) driving the stand-in robot."""
    domain = pick_domain_id()
    env = loopback_env(domain, robot=True)
    ready = tmp_path / "standin.ready"
    with open(tmp_path / "standin.out", "w") as out:
        standin = subprocess.Popen([sys.executable, str(HERE / "standin_robot.py"), "--ready-file", str(ready)],
                                   env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: ready.exists() or standin.poll() is not None, 60, "the stand-in ready")
            assert standin.poll() is None, (tmp_path / "standin.out").read_text()
            with GraphProcesses("robot", args={"recognizers": "majority"}, domain_id=domain,
                                log_dir=tmp_path / "logs", extra_params={"nav": {"odom_timeout": 1.0}}):
                obs = subprocess.run([sys.executable, "-m", "affectsim_ros.cli", "observe", "--episode-id", "standin",
                                      "--clip-frames", "8", "--max-actions", "60", "--record", str(tmp_path / "rec"),
                                      "--domain-id", str(domain)], env=env, capture_output=True, text=True,
                                     timeout=300)
        finally:
            standin.send_signal(signal.SIGINT)
            try:
                standin.wait(10)
            except subprocess.TimeoutExpired:  # never leave it running for the tests after this one
                standin.kill()
                standin.wait(10)
                raise
    assert obs.returncode == 0, obs.stdout + obs.stderr
    rec = read(tmp_path / "rec" / "standin")
    for key in (*SENSOR, "cmd_vel"):
        assert rec.count(TOPICS[key]) >= 1, (key, {t: rec.count(t) for t in rec.messages})
    assert rec.count(TOPICS["map"]) == 1
    tf = Tf(rec)
    for topic in (TOPICS["rgb"], TOPICS["depth"]):  # the stand-in's odometry (50 Hz) is not in step with its camera
        for img in rec.of(topic):
            pose = tf.in_map(img.header.frame_id, img.header.stamp, tolerance_s=0.05)
            assert abs(pose[2, 3] - 1.1) < 0.05, pose[:3, 3]  # the stand-in's camera: 1.1 m above the floor
    namespaces = {m.ns for arr in rec.of(MARKERS_TOPIC) for m in arr.markers}
    assert PATH_NS in namespaces and GROUND_TRUTH_NS not in namespaces
    if "the P-Init clip: no handoff" not in obs.stdout:
        assert rec.count(CLIP_TOPIC) == 8 and [p.recognizer for p in rec.of(PREDICTIONS_TOPIC)] == ["majority"]


def test_the_path_budget_and_stamps_are_computed_without_ros():
    from rclpy.serialization import serialize_message
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    from affectsim_core.errors import InvalidInput
    from affectsim_eval.episode.recording_options import SizeBudget
    from affectsim_eval.episode.recording_viz import PATH_PERIOD_S, PATH_STEP_M, PathTrace, header_stamp_ns, \
        people_markers

    path = PathTrace()
    assert path.add(0.0, 0.0) and not path.add(PATH_STEP_M / 2, 0.0) and path.add(PATH_STEP_M, 0.0)
    assert not path.add(float("nan"), 0.0)
    assert path.due(10.0) and not path.due(10.0 + PATH_PERIOD_S)  # nothing new since
    path.add(1.0, 0.0)
    assert not path.due(10.0 + PATH_PERIOD_S / 2) and path.due(10.0 + PATH_PERIOD_S)
    assert [p[0] for p in path.marker().points] == [0.0, PATH_STEP_M, 1.0]
    budget = SizeBudget(1.0)
    assert budget.admit(900_000, large=True) and not budget.admit(200_000, large=True)
    assert budget.admit(200_000, large=False) and budget.dropped == 1  # small topics go on beyond the budget
    with pytest.raises(InvalidInput, match="record_max_mb=0"):
        SizeBudget(0)
    raw = serialize_message(Header(stamp=Time(sec=12, nanosec=345), frame_id="map"))
    assert header_stamp_ns(raw) == 12_000_000_345 and header_stamp_ns(raw[:8]) is None
    truth = people_markers(GROUND_TRUTH_NS, [(1.0, 2.0, 0.5), (float("nan"), 0.0, 0.0)])
    assert [(m.kind, m.x, m.y) for m in truth] == [("cylinder", 1.0, 2.0)]
    assert people_markers(DETECTIONS_NS, [(1.0, 2.0, 0.0)])[0].kind == "sphere"
