"""The nav node over DDS: the same trajectories as the in-process active loop, stage actions, feedback,
cancel and preemption, bad goals (Nav2 delegation: test_nav2_delegation.py)."""

import math
import threading

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.qos import QoSProfile, ReliabilityPolicy

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.content.library import Library, build
from affectsim_bridge.world.scene import load_scene
from affectsim_core.geometry import Pose2D
from affectsim_core.observation import EpisodeInfo
from affectsim_core.ros.action_client import ActionClient
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import matrix_from_pose_msg
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.topics import SERVICES
from affectsim_eval.dataset.composer import describe
from affectsim_eval.episode.worlds import SimulatedRobot
from affectsim_interfaces.action import AcquireObservation, FollowPerson, Handoff, SearchPerson
from affectsim_nav.active import run_active
from affectsim_nav.policy import create_policy
from affectsim_perception.person_model import BlazePose
from affectsim_ros.launcher import GraphProcesses

SCENE = "test_apartment"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    lib = tmp_path_factory.mktemp("lib") / "motions"
    build(lib, seed=0, log=lambda s: None, ag_performers=2, ag_takes=1, oc_performances=5, oc_performers=1, dyadic=0,
          ev_performers=0)
    return lib


@pytest.fixture(scope="module")
def graph(library, tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    with GraphProcesses("bench", nodes=("bridge", "nav"), args={"mode": "lockstep"}, log_dir=logs,
                        extra_params={"bridge": {"motion_library": str(library)}}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("nav_test_client", topics=("rgb",))
        client.wait_for_bridge(90)
        # replies are queued deep enough for the burst test's 20 goals: with rclpy's default depth of 10 a client
        # spun late (a loaded machine) lost the oldest replies (17 of 20 results arrived), whatever the server did;
        # and feedback, one message a step, every one of which the trajectory test counts (78 of 80 arrived)
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        deep = {**{f"{k}_service_qos_profile": qos for k in ("goal", "result", "cancel")},
                "feedback_sub_qos_profile": qos}
        clients = {t: ActionClient(client.node, t, SERVICES[n], **deep) for t, n in (
            (AcquireObservation, "acquire_observation"), (SearchPerson, "search_person"), (Handoff, "handoff"),
            (FollowPerson, "follow_person"))}
        for c in clients.values():
            assert c.wait_for_server(60), (logs / "nav.log").read_text()
        yield client, clients, g, logs
        client.close()
        rclpy.shutdown()
        assert g.poll()["nav"] is None, (logs / "nav.log").read_text()


def _motions(library, action="standing"):
    lib = Library(library)
    return lib, sorted(i for i, e in lib.entries.items() if e["action"] == action)


def _episode(lib, people, start):
    """A tiny episode: (bridge humans, offline placements, start pose, description)."""
    humans = [{"id": role, "x": x, "y": y, "yaw": yaw, "appearance": 0, "is_target": role == "target",
               "motion_id": mid, "phase": 0.3} for role, mid, x, y, yaw in people]
    placements = [HumanPlacement(h["id"], h["x"], h["y"], h["yaw"], is_target=h["is_target"],
                                 motion=lib.load(h["motion_id"]), phase=h["phase"]) for h in humans]
    desc = describe(next(p.motion for p in placements if p.is_target)) if len(people) > 1 else ""
    return humans, placements, Pose2D(*start), desc


def call(action_client, goal, timeout=240.0, on_feedback=None):
    """Send a goal and wait for its result; returns (status, result, handle)."""
    done = threading.Event()
    fut = action_client.send_goal_async(goal, feedback_callback=on_feedback)
    fut.add_done_callback(lambda f: done.set())
    assert done.wait(30), "goal not answered"
    handle = fut.result()
    assert handle.accepted
    res_done = threading.Event()
    rf = handle.get_result_async()
    rf.add_done_callback(lambda f: res_done.set())
    assert res_done.wait(timeout), "no result in time"
    return rf.result().status, rf.result().result, handle


def test_ros_and_offline_runs_give_identical_trajectories(graph, library):
    client, clients, _, _ = graph
    lib, standing = _motions(library)
    cases = [  # visible at once; in the kitchen behind a wall (search, limited budget); dyadic by clothing
        ([("target", standing[0], 4.0, 2.8, math.pi)], (1.5, 2.5, 0.0), 60),
        ([("target", standing[1], 8.5, 4.2, math.pi)], (1.5, 2.5, 1.57), 80),
        ([("target", standing[0], 4.2, 3.2, math.pi), ("partner", standing[-1], 4.2, 1.9, math.pi)], (1.5, 2.5, 0.3), 60),
    ]
    backend = BACKENDS.create("mujoco")
    policy = create_policy("baseline", BlazePose)
    try:
        for k, (people, start, budget) in enumerate(cases):
            humans, placements, pose, desc = _episode(lib, people, start)
            assert client.load(SCENE, *start, humans=humans).success
            feedback = []
            status, res, _ = call(clients[AcquireObservation],
                                  AcquireObservation.Goal(episode_id=f"e{k}", clip_frames=10, max_actions=budget,
                                                          target_description=desc),
                                  on_feedback=lambda f: feedback.append(f.feedback))
            backend.load(load_scene(SCENE), pose, tuple(placements))
            grid, origin = backend.navigable.occupancy_grid(0.05)
            info = EpisodeInfo.make(grid, origin, 0.05, (pose.x, pose.y, pose.yaw), backend.navigable.radius,
                                    desc or None)
            off = run_active(SimulatedRobot(backend), info, policy, 10, max_actions=budget)
            ros_traj = [(p.x, p.y, p.theta) for p in res.trajectory]
            assert ros_traj == [(x, y, th) for _, x, y, th in off.log.trajectory], f"case {k}: {res.outcome} {res.message}"
            assert res.outcome == off.outcome and res.planner_calls == off.log.planner_calls
            assert res.handoff_step == (-1 if off.log.handoff_step is None else off.log.handoff_step)
            assert math.isclose(res.path_length, off.log.path_length, abs_tol=1e-9)
            assert len(feedback) == len(off.log.actions) and feedback[-1].actions_used == len(off.log.actions)
            assert status == GoalStatus.STATUS_SUCCEEDED
            if res.outcome == "handoff":
                assert len(res.clip_stamps) == 10
            assert not res.stream_frames  # no stream unless asked
    finally:
        policy.close()
        backend.close()


def test_a_policy_that_moves_the_head_gives_the_same_views_through_the_graph_and_offline(graph, library):
    """``viewpoint`` tilts the head with its decisions: through the lockstep service it must reach the
    bridge's camera exactly as it reaches the in-process backend's."""
    client, clients, _, _ = graph
    lib, standing = _motions(library)
    humans, placements, pose, _ = _episode(lib, [("target", standing[0], 4.3, 2.8, math.pi)], (1.5, 2.5, 0.0))
    assert client.load(SCENE, pose.x, pose.y, pose.yaw, humans=humans).success
    status, res, _ = call(clients[AcquireObservation],
                          AcquireObservation.Goal(episode_id="head", clip_frames=10, max_actions=60, policy="viewpoint"))
    backend = BACKENDS.create("mujoco")
    policy = create_policy("viewpoint", BlazePose)
    try:
        backend.load(load_scene(SCENE), pose, tuple(placements))
        grid, origin = backend.navigable.occupancy_grid(0.05)
        info = EpisodeInfo.make(grid, origin, 0.05, (pose.x, pose.y, pose.yaw), backend.navigable.radius, None)
        off = run_active(SimulatedRobot(backend), info, policy, 10, max_actions=60)
    finally:
        policy.close()
        backend.close()
    assert status == GoalStatus.STATUS_SUCCEEDED and res.outcome == off.outcome == "handoff", res.message
    assert [(p.x, p.y, p.theta) for p in res.trajectory] == [(x, y, th) for _, x, y, th in off.log.trajectory]
    ros_poses = np.stack([matrix_from_pose_msg(p) for p in res.clip_camera_poses])
    assert np.allclose(ros_poses, off.clip.camera_poses, atol=1e-6)
    tilts = -np.arcsin(ros_poses[:, 2, 2])  # + looks down: the head framed the person 2.8 m away (~0.06 rad;
    assert (tilts > 0.03).all(), tilts  # nearer than ~2.2 m a standing body does not fit and the head stays level)


def test_stage_actions_search_handoff_follow(graph, library):
    client, clients, _, _ = graph
    lib, standing = _motions(library)
    humans, _, _, _ = _episode(lib, [("target", standing[0], 4.0, 2.8, math.pi)], (1.5, 2.5, 0.0))
    assert client.load(SCENE, 1.5, 2.5, 0.0, humans=humans).success
    _, res, _ = call(clients[SearchPerson], SearchPerson.Goal(episode_id="s"))
    assert res.outcome == "found" and 1.5 < res.person_distance < 3.5 and abs(res.person.x - 4.0) < 0.6
    _, res, _ = call(clients[Handoff], Handoff.Goal())
    assert res.outcome == "handoff" and res.handoff_step >= 1
    _, res, _ = call(clients[FollowPerson], FollowPerson.Goal(clip_frames=6))
    assert res.outcome == "handoff" and len(res.clip_stamps) == 6
    stamps = [s.sec + s.nanosec * 1e-9 for s in res.clip_stamps]
    assert np.allclose(np.diff(stamps), 0.25)  # one frame per lockstep action, 4 Hz


def test_cancel_preemption_and_bad_goals_keep_the_node_serving(graph, library):
    client, clients, _, logs = graph
    lib, standing = _motions(library)
    humans, _, _, _ = _episode(lib, [("target", standing[1], 8.5, 4.2, math.pi)], (1.5, 2.5, 1.57))
    acquire = clients[AcquireObservation]
    # bad goals: each ends aborted with the field named
    assert client.load(SCENE, 1.5, 2.5, 1.57, humans=humans).success
    for n in (0, 1_000_000):  # no clip, or one that would grow the node by ~1 MB a step for 70 hours
        status, res, _ = call(acquire, AcquireObservation.Goal(episode_id="bad", clip_frames=n))
        assert status == GoalStatus.STATUS_ABORTED and f"clip_frames={n}" in res.message and "1..2400" in res.message
    status, res, _ = call(acquire, AcquireObservation.Goal(episode_id="x" * 129, clip_frames=5))
    assert status == GoalStatus.STATUS_ABORTED and "episode_id" in res.message and "at most 128" in res.message
    for until in (-1.0, 601.0, float("nan")):
        status, res, _ = call(acquire, AcquireObservation.Goal(episode_id="bad", clip_frames=5, stream_until=until))
        assert status == GoalStatus.STATUS_ABORTED and "stream_until" in res.message and "[0, 600.0]" in res.message
    status, res, _ = call(acquire, AcquireObservation.Goal(episode_id="bad", clip_frames=5, policy="nope"))
    assert status == GoalStatus.STATUS_ABORTED and "policy" in res.message and "baseline" in res.message
    status, res, _ = call(acquire, AcquireObservation.Goal(episode_id="bad", clip_frames=5, policy="viewpoint-rec"))
    assert status == GoalStatus.STATUS_ABORTED and "recognizer" in res.message  # the node has no recognizer in the loop
    # cancel mid-episode
    fb = threading.Event()
    done = threading.Event()
    fut = acquire.send_goal_async(AcquireObservation.Goal(episode_id="c", clip_frames=5, max_actions=400),
                                  feedback_callback=lambda f: f.feedback.actions_used >= 3 and fb.set())
    fut.add_done_callback(lambda f: done.set())
    assert done.wait(30) and fb.wait(120)
    handle = fut.result()
    handle.cancel_goal_async()
    rdone = threading.Event()
    rf = handle.get_result_async()
    rf.add_done_callback(lambda f: rdone.set())
    assert rdone.wait(60)
    assert rf.result().status == GoalStatus.STATUS_CANCELED and rf.result().result.outcome == "cancelled"
    assert rf.result().result.actions < 400
    # preemption: a newer goal ends the running one
    fb.clear()
    done.clear()
    fut = acquire.send_goal_async(AcquireObservation.Goal(episode_id="p1", clip_frames=5, max_actions=400),
                                  feedback_callback=lambda f: f.feedback.actions_used >= 2 and fb.set())
    fut.add_done_callback(lambda f: done.set())
    assert done.wait(30) and fb.wait(120)
    first = fut.result()
    status, res, _ = call(acquire, AcquireObservation.Goal(episode_id="p2", clip_frames=5, max_actions=5))
    assert status == GoalStatus.STATUS_SUCCEEDED and res.outcome == "budget_exhausted" and res.actions == 5
    rdone.clear()
    rf = first.get_result_async()
    rf.add_done_callback(lambda f: rdone.set())
    assert rdone.wait(60)
    assert rf.result().status == GoalStatus.STATUS_ABORTED and "preempted" in rf.result().result.message
    status, res, _ = call(clients[Handoff], Handoff.Goal())  # the preempting episode is over
    assert status == GoalStatus.STATUS_ABORTED and "SearchPerson" in res.message


def test_a_burst_of_goals_gets_an_answer_for_every_one(graph, library):
    """20 goals at once (more than the executor's threads): each is answered, the newest runs."""
    client, clients, _, _ = graph
    lib, standing = _motions(library)
    humans, _, _, _ = _episode(lib, [("target", standing[1], 8.5, 4.2, math.pi)], (1.5, 2.5, 1.57))
    assert client.load(SCENE, 1.5, 2.5, 1.57, humans=humans).success
    acquire = clients[AcquireObservation]
    answered, results = threading.Semaphore(0), []
    lock = threading.Lock()

    def on_result(f):
        with lock:
            results.append(f.result())
        answered.release()

    handles = [acquire.send_goal_async(AcquireObservation.Goal(episode_id=f"b{k}", clip_frames=5, max_actions=3))
               for k in range(20)]
    for h in handles:
        h.add_done_callback(lambda f: f.result().get_result_async().add_done_callback(on_result))
    for _ in handles:
        assert answered.acquire(timeout=120), f"{len(results)} of 20 goals answered"
    statuses = sorted(r.status for r in results)
    assert len(results) == 20 and statuses.count(GoalStatus.STATUS_SUCCEEDED) >= 1, statuses
    assert all(r.result.outcome in ("aborted", "budget_exhausted") for r in results)
