"""The bridge node over real DDS: contract topics, TF, lockstep motion, clock, bad requests."""

import math
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import Pose, Twist
from geometry_msgs.msg import Pose2D as Pose2DMsg
from rcl_interfaces.srv import DescribeParameters, SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from rclpy.parameter import Parameter

from affectsim_bridge.content.library import build
from affectsim_bridge.world.scene import BUILTIN_DIR
from affectsim_core.actions import Action
from affectsim_core.ros import tf_tree
from affectsim_core.ros.bridge_client import LATCHED, TOPICS, BridgeClient
from affectsim_core.ros.conversions import from_time, image_to_array
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.topics import SERVICES
from affectsim_interfaces.srv import ApplyAction, LoadWorld, RenderViews
from affectsim_ros.launcher import GraphProcesses
from waiting import wait_until

STALL_S = 25.0  # s the bridge is paused: past the DDS participant lease (20 s), where a reply is lost


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    lib = tmp_path_factory.mktemp("lib") / "motions"
    build(lib, seed=0, log=lambda s: None, ag_performers=1, ag_takes=1, oc_performances=5, oc_performers=1, dyadic=0,
          ev_performers=0)
    with GraphProcesses("bench", nodes=("bridge",), args={"mode": "lockstep"}, log_dir=logs,
                        extra_params={"bridge": {"motion_library": str(lib)}}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        client = BridgeClient("test_client", topics=tuple(TOPICS) + tuple(LATCHED) + ("gt_humans",))
        client.wait_for_bridge(90)
        res = client.load("test_apartment", 1.0, 2.5, 0.0)
        assert res.success, res.message
        yield client, g
        client.close()
        rclpy.shutdown()
        assert g.poll()["bridge"] is None, (logs / "bridge.log").read_text()


def test_contract_topics_types_encodings_frames(bridge):
    client, _ = bridge
    res, rgb, depth = client.step_and_frame(Action.STOP)
    assert rgb.encoding == "rgb8" and (rgb.width, rgb.height) == (640, 480)
    assert depth.encoding == "32FC1" and depth.header.frame_id == rgb.header.frame_id == "head_camera_rgb_optical_frame"
    info = client.wait_for_stamp("rgb_info", res.stamp)
    dinfo = client.wait_for_stamp("depth_info", res.stamp)
    assert (info.width, info.height) == (640, 480) and list(info.k) == list(dinfo.k)
    scan = client.wait_for_stamp("scan", res.stamp)
    assert scan.header.frame_id == "laser_link" and len(scan.ranges) > 600
    odom = client.wait_for_stamp("odom", res.stamp)
    assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_link")
    grid = client.wait_for("map", timeout=10)
    assert grid.header.frame_id == "map" and grid.info.resolution == pytest.approx(0.05)
    assert set(np.unique(np.array(grid.data, np.int8))) == {-1, 0, 100}
    d = image_to_array(depth)
    assert d.dtype == np.float32 and np.nanmin(d) > 0.05 and np.isfinite(d).mean() > 0.9


def _tf_chain(client, stamp):
    static = client.wait_for("tf_static", timeout=10)
    dynamic = client.wait_for("tf", lambda m: m.transforms and abs(from_time(m.transforms[0].header.stamp)
                                                                    - from_time(stamp)) < 1e-6, timeout=10)
    return tf_tree.buffer_of(static, dynamic)


def test_tf_resolves_map_to_optical_frame(bridge):
    client, _ = bridge
    res, _, _ = client.step_and_frame(Action.TURN_LEFT)
    buffer = _tf_chain(client, res.stamp)
    tf = buffer.lookup("map", "head_camera_rgb_optical_frame", from_time(res.stamp))
    parents = buffer.frames()
    chain, frame = [], "head_camera_rgb_optical_frame"
    while frame != "map":
        chain.append(frame)
        frame = parents[frame]
    assert chain[-2:] == ["base_link", "odom"]
    # the optical frame sits ~1.1 m up, ahead of the base, and looks along the base heading
    yaw = res.pose.theta
    assert 1.0 < tf.translation[2] < 1.2
    assert np.allclose(tf.rotation[:, 2], [math.cos(yaw), math.sin(yaw), 0], atol=1e-6)
    assert np.linalg.norm(tf.translation[:2] - [res.pose.x, res.pose.y]) < 0.3


def test_an_action_points_the_head_at_the_head_s_speed_and_a_new_world_starts_it_level(bridge):
    client, _ = bridge
    assert client.load("test_apartment", 1.0, 2.5, 0.0).success

    def camera_pitch(res) -> float:  # + looks down: the optical z axis's downward component in map
        tf = _tf_chain(client, res.stamp).lookup("map", "head_camera_rgb_optical_frame", from_time(res.stamp))
        return -math.asin(float(tf.rotation[2, 2]))

    step = client.node.create_client(ApplyAction, SERVICES["apply_action"])  # the request as a user writes it
    assert step.wait_for_service(30)
    r = _call(step, ApplyAction.Request(action=ApplyAction.Request.STOP, point_head=True, head_tilt=0.6))
    assert r.success and camera_pitch(r) == pytest.approx(1.57 * 0.25, abs=1e-4)  # 1.57 rad/s for 0.25 s
    r = _call(step, ApplyAction.Request(action=ApplyAction.Request.TURN_LEFT))  # the head goes on to its goal
    assert r.success and camera_pitch(r) == pytest.approx(0.6, abs=1e-4)
    for bad in (1.5, math.nan):
        r = _call(step, ApplyAction.Request(action=ApplyAction.Request.FORWARD, point_head=True, head_tilt=bad))
        assert not r.success and "head_tilt" in r.message and "[-0.76, 1.45]" in r.message, r.message
    assert client.load("test_apartment", 1.0, 2.5, 0.0).success
    r = _call(step, ApplyAction.Request(action=ApplyAction.Request.STOP))
    assert r.success and camera_pitch(r) == pytest.approx(0.0, abs=1e-6)
    client.node.destroy_client(step)


def test_forward_moves_odom_by_a_quarter_metre_and_clock_is_monotonic(bridge):
    client, _ = bridge
    assert client.load("test_apartment", 1.0, 2.5, 0.0).success  # sim time restarts at 0
    with client._cv:
        client.msgs["clock"].clear()
    r0, _, _ = client.step_and_frame(Action.STOP)
    o0 = client.wait_for_stamp("odom", r0.stamp).pose.pose.position
    r1, _, _ = client.step_and_frame(Action.FORWARD)
    o1 = client.wait_for_stamp("odom", r1.stamp).pose.pose.position
    assert not r1.clipped and r1.distance_moved == pytest.approx(0.25)
    assert math.hypot(o1.x - o0.x, o1.y - o0.y) == pytest.approx(0.25, abs=1e-6)
    assert from_time(r1.stamp) - from_time(r0.stamp) == pytest.approx(0.25)
    clocks = [from_time(m.clock) for m in list(client.msgs["clock"])]
    assert len(clocks) >= 2 and clocks == sorted(clocks) and len(set(clocks)) == len(clocks)
    # drive into the west wall: clipped, never through it
    assert client.load("test_apartment", 0.5, 1.5, math.pi).success
    r = client.apply(Action.FORWARD)
    assert r.success and r.clipped and r.pose.x == pytest.approx(0.35, abs=1e-3)


def test_load_world_answers_once_its_subscribers_hold_the_new_world(bridge):
    """A plain reliable subscriber (not the project's client) holds the new world's first frame in its
    reader when ``load_world`` answers (the bridge waits for the acknowledgements): it is taken without
    waiting, after a step of the world before made that one's newest frame later in time."""
    client, _ = bridge
    node = rclpy.create_node("ack_probe")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    frames = []
    qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Image, client.topic("rgb"), frames.append, qos)
    try:
        wait_until(lambda: node.count_publishers(client.topic("rgb")) > 0, 30, "the probe matched")
        for x in (1.0, 2.0, 1.5):
            client.step_and_frame(Action.STOP)  # the world before: its newest frame at 0.25 s or later
            stepped = lambda: frames and from_time(frames[-1].header.stamp) > 0  # noqa: E731
            wait_until(lambda: executor.spin_once(timeout_sec=0.02) or stepped(), 30, "the stepped frame", 0.0)
            assert client.load("test_apartment", x, 2.5, 0.0).success
            for _ in range(20):  # each spin takes one ready message; none is waited for
                executor.spin_once(timeout_sec=0)
            assert from_time(frames[-1].header.stamp) == 0.0, f"x={x}: the new world's frame was not in the reader"
    finally:
        executor.remove_node(node)
        node.destroy_node()


def test_a_drained_client_holds_every_frame_received_before_even_when_storing_is_slow(bridge):
    """:meth:`BridgeClient.drain` returns after the callbacks of what had arrived: a client that takes
    0.3 s to store each frame still holds the new world's frame when drain returns after load_world."""
    client, _ = bridge

    class SlowClient(BridgeClient):
        def _store(self, key, msg):
            if key == "rgb":
                time.sleep(0.3)
            super()._store(key, msg)

    slow = SlowClient("slow_client", topics=("rgb",), services=False)
    try:
        wait_until(lambda: slow.node.count_publishers(slow.topic("rgb")) > 0, 30, "the slow client matched")
        for x in (1.0, 2.0):
            assert client.load("test_apartment", x, 2.5, 0.0).success
            slow.drain(30)
            client.drain(30)
            with slow.lock:
                newest = slow.msgs["rgb"][-1]
            assert from_time(newest.header.stamp) == 0.0
            assert np.array_equal(image_to_array(newest), image_to_array(client.msgs["rgb"][-1]))
    finally:
        slow.close()


def test_bad_requests_are_rejected_and_the_node_keeps_running(bridge, tmp_path):
    client, g = bridge
    r = client.load("no_such_scene", 1.0, 2.5, 0.0)
    assert not r.success and "no_such_scene" in r.message and "built-in scene id" in r.message
    r = client.load("test_apartment", 0.05, 0.05, 0.0)
    assert not r.success and "robot_pose" in r.message and "navigable" in r.message
    r = client.load("test_apartment", float("nan"), 2.5, 0.0)
    assert not r.success and "robot_pose" in r.message
    r = client.apply(9)
    assert not r.success and "action" in r.message
    pub = client.node.create_publisher(Twist, "/cmd_vel", 10)
    bad = Twist()
    bad.linear.x = float("nan")
    pub.publish(bad)
    # a call during a reset: load a copy of the scene (new file -> full rebuild) and step meanwhile
    copy = tmp_path / "apartment_copy.yaml"
    shutil.copy(BUILTIN_DIR / "test_apartment.yaml", copy)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=client.load(str(copy), 1.0, 2.5, 0.0)))
    t.start()
    during = []
    while t.is_alive():  # step as long as the load runs (the full rebuild takes far longer than a step)
        during.append(client.apply(Action.STOP))
    t.join(60)
    assert result["r"].success, result["r"].message
    refused = [r for r in during if not r.success]
    assert refused and all("resetting" in r.message for r in refused), [r.message for r in during]
    assert g.poll()["bridge"] is None
    assert client.step_and_frame(Action.FORWARD)[0].success


def test_people_replay_their_motion_clip(bridge):
    client, _ = bridge
    walker = dict(id="w", x=2.0, y=3.2, yaw=0.0, appearance=2, is_target=True,
                  motion_id="ag_AG01_walk_happy_t1", phase=0.0)
    res = client.load("test_apartment", 1.0, 2.0, 0.0, [walker])
    assert res.success, res.message
    r0 = client.apply(Action.STOP)
    p0 = client.wait_for_stamp("gt_humans", r0.stamp).poses[0].position
    for _ in range(4):
        r1 = client.apply(Action.STOP)
    p1 = client.wait_for_stamp("gt_humans", r1.stamp).poses[0].position
    assert math.hypot(p1.x - p0.x, p1.y - p0.y) > 0.5  # one second of walking
    bad = client.load("test_apartment", 1.0, 2.0, 0.0, [dict(walker, motion_id="no_such_clip")])
    assert not bad.success and "no_such_clip" in bad.message


def test_parameters_are_described_bounded_and_read_only(bridge):
    client, _ = bridge
    node = client.node
    describe = node.create_client(DescribeParameters, "/bridge/describe_parameters")
    set_params = node.create_client(SetParameters, "/bridge/set_parameters")
    assert describe.wait_for_service(30) and set_params.wait_for_service(30)

    def call(cli, req):
        done = threading.Event()
        fut = cli.call_async(req)
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(30)
        return fut.result()

    desc = {d.name: d for d in call(describe, DescribeParameters.Request(names=["real_time_factor", "mode"])).descriptors}
    rtf = desc["real_time_factor"]
    assert rtf.read_only and rtf.description and (rtf.floating_point_range[0].from_value,
                                                  rtf.floating_point_range[0].to_value) == (0.1, 10.0)
    assert "lockstep" in desc["mode"].additional_constraints
    res = call(set_params, SetParameters.Request(parameters=[Parameter("mode", value="free_run").to_parameter_msg()]))
    assert not res.results[0].successful and "read-only" in res.results[0].reason


def _call(cli, req, timeout=120.0):
    done = threading.Event()
    fut = cli.call_async(req)
    fut.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no answer"
    return fut.result()


def test_hostile_requests_are_refused_with_the_numbers_and_the_bridge_keeps_serving(bridge):
    client, g = bridge
    person = dict(id="a", x=3.5, y=2.5, yaw=0.0, appearance=0, is_target=True, motion_id="", phase=0.0)
    for people, field in (([person, dict(person, id="b", y=1.5)], "exactly one target"),
                          ([dict(person, is_target=False)], "exactly one target"),
                          ([person, dict(person, is_target=False)], "unique ids"),
                          ([dict(person, x=0.0, y=2.5)], "not inside a wall"),  # the apartment's west wall
                          ([dict(person, x=-3.0, y=2.5)], "inside a room"),
                          ([dict(person, x=1.05, y=2.5)], "off the robot's base"),
                          ([dict(person, phase=1e300)], "phase")):
        r = client.load("test_apartment", 1.0, 2.5, 0.0, people)
        assert not r.success and field in r.message, (field, r.message)
    # counts, names and numbers are checked before any motion is loaded (20,000 people took 39 s and 1.65 GB)
    crowd = [dict(person, id=f"p{k}", motion_id="no_such_clip") for k in range(20_000)]
    r = client.load("test_apartment", 1.0, 2.5, 0.0, crowd)
    assert not r.success and "humans='20000 people' is invalid; expected at most 2" in r.message, r.message
    for people, yaw, field in (([dict(person, id="")], 0.0, "humans[0].id=''"),
                               ([dict(person, id="../../x")], 0.0, "humans[0].id='../../x'"),
                               ([dict(person, id="x" * 1_000_000)], 0.0, "humans[0].id="),
                               ([person], 1e300, "robot_pose=")):
        r = client.load("test_apartment", 1.0, 2.5, yaw, people)
        assert not r.success and field in r.message, (field, r.message[:200])
    render = client.node.create_client(RenderViews, SERVICES["render_views"])
    assert render.wait_for_service(30)
    huge = RenderViews.Request(size=4096, times=[0.0] * 512, head_tilts=[0.0] * 512)
    huge.robot_poses = [Pose2DMsg(x=1.0, y=2.5, theta=0.0)] * 512
    r = _call(render, huge)
    assert not r.success and "512 x 4096 x 4096 x 3 = 25769803776 bytes" in r.message and "at most" in r.message
    for w, pos in ((0.0, 1.0), (float("nan"), 1.0), (1.0, float("nan"))):
        req = RenderViews.Request(size=224, times=[0.0], head_tilts=[0.0], robot_poses=[Pose2DMsg(x=1.0, y=2.5)])
        cam = Pose()
        cam.position.x, cam.position.z, cam.orientation.w = pos, 1.0, w
        req.cameras = [cam]
        r = _call(render, req)
        assert not r.success and "cameras[0]" in r.message and "unit quaternion" in r.message
    cam = Pose()
    cam.position.z, cam.orientation.w = 1.0, 1.0
    for vfovs, field in (([3.5], "camera_vfovs[0]=3.5 is invalid"), ([0.8, 0.8], "camera_vfovs=2 is invalid")):
        req = RenderViews.Request(size=224, times=[0.0], head_tilts=[0.0], robot_poses=[Pose2DMsg(x=1.0, y=2.5)])
        req.cameras, req.camera_vfovs = [cam], vfovs
        r = _call(render, req)
        assert not r.success and field in r.message, r.message
    ok = _call(render, RenderViews.Request(size=224, times=[0.0], head_tilts=[0.0],
                                           robot_poses=[Pose2DMsg(x=1.0, y=2.5, theta=0.0)]))
    assert ok.success and (ok.frames[0].width, ok.frames[0].height) == (224, 224)
    assert g.poll()["bridge"] is None
    assert client.load("test_apartment", 1.0, 2.5, 0.0).success


def test_a_repeated_request_id_gets_the_same_reply_and_changes_nothing(bridge):
    client, _ = bridge
    step = client.node.create_client(ApplyAction, SERVICES["apply_action"])
    load = client.node.create_client(LoadWorld, SERVICES["load_world"])
    assert step.wait_for_service(30) and load.wait_for_service(30)
    req = LoadWorld.Request(scene="test_apartment", robot_pose=Pose2DMsg(x=1.0, y=2.5), request_id=77)
    assert _call(load, req).success
    first = _call(step, ApplyAction.Request(action=Action.FORWARD, request_id=78))
    again = _call(step, ApplyAction.Request(action=Action.FORWARD, request_id=78))  # a retry: not applied again
    assert first.success and again.success and from_time(first.stamp) == from_time(again.stamp) == 0.25
    assert (again.pose.x, again.distance_moved) == (first.pose.x, first.distance_moved)
    assert _call(load, req).success  # a late copy of the load: the episode is not reset
    nxt = _call(step, ApplyAction.Request(action=Action.FORWARD, request_id=79))
    assert from_time(nxt.stamp) == 0.5 and nxt.pose.x > first.pose.x
    unnumbered = [from_time(_call(step, ApplyAction.Request(action=Action.STOP)).stamp) for _ in range(2)]
    assert unnumbered == [0.75, 1.0]  # request_id 0: every request is applied


@pytest.mark.slow  # > 30 s of real time: make test-all
def test_a_reply_lost_while_the_bridge_stalls_is_recovered_and_the_action_applied_once(bridge):
    """Paused past the DDS lease (20 s), the bridge answers a pending request to no one; the client
    sends it again and the bridge applies it once (this ends the module: the pause is long)."""
    client, g = bridge
    before = client.apply(Action.STOP)
    pid = g.pids()["bridge"]
    got: dict = {}
    os.kill(pid, signal.SIGSTOP)
    try:
        waiter = threading.Thread(target=lambda: got.update(res=client.apply(Action.FORWARD, timeout=120)))
        waiter.start()
        time.sleep(STALL_S)  # the fault: how long the bridge is paused
    finally:
        os.kill(pid, signal.SIGCONT)
    waiter.join(130)
    res = got.get("res")
    assert res is not None and res.success
    assert from_time(res.stamp) == pytest.approx(from_time(before.stamp) + 0.25)  # applied once
    assert from_time(client.apply(Action.STOP, timeout=30).stamp) == pytest.approx(from_time(res.stamp) + 0.25)


def test_reactive_people_notice_the_robot_and_publish_their_state(bridge):
    client, _ = bridge
    clip = "oc_OC01_gestures_fearful_t1"
    person = dict(id="p", x=3.6, y=2.5, yaw=math.pi, appearance=0, is_target=True, motion_id=clip, phase=0.0)
    bad = client.load("test_apartment", 1.0, 2.5, 0.0, [person], humans_mode="telepathic")
    assert not bad.success and "humans" in bad.message and "reactive" in bad.message
    res = client.load("test_apartment", 1.0, 2.5, 0.0, [person], humans_mode="reactive", noise_seed=4)
    assert res.success, res.message
    gaps, noticed = [], False
    for _ in range(8):
        r = client.apply(Action.FORWARD)
        assert r.success, r.message
        pos = client.wait_for_stamp("gt_humans", r.stamp).poses[0].position
        gaps.append(math.hypot(pos.x - r.pose.x, pos.y - r.pose.y))
        state = client.wait_for_stamp("gt_reactions", r.stamp)
        assert list(state.ids) == ["p"]
        noticed = noticed or state.noticed[0]
    assert noticed and state.reacting[0] and math.hypot(state.shift_x[0], state.shift_y[0]) > 0.1
    assert gaps[-1] > gaps[0] - 8 * 0.25 + 0.1  # the robot closed in by less than it drove: the person backed off


def test_a_reactive_person_behind_a_wall_does_not_notice_the_robot(bridge):
    client, _ = bridge
    # the bedroom behind the living room's north wall (y = 5), the robot below it, facing each other
    person = dict(id="p", x=4.0, y=6.3, yaw=-math.pi / 2, appearance=0, is_target=True,
                  motion_id="oc_OC01_gestures_fearful_t1", phase=0.0)
    res = client.load("test_apartment", 4.0, 3.5, math.pi / 2, [person], humans_mode="reactive", noise_seed=4)
    assert res.success, res.message
    for _ in range(6):
        r = client.apply(Action.FORWARD)
        state = client.wait_for_stamp("gt_reactions", r.stamp)
        assert not state.noticed[0] and not state.reacting[0] and state.shift_x[0] == state.shift_y[0] == 0.0
    assert r.pose.y > 4.4  # the robot came within 1.3 m of the person's disc, the wall between them


def test_a_flood_of_bad_commands_is_counted_and_logged_once_a_second(bridge):
    """6,416 lines in 3 s at 1 kHz before: each rejected NaN /cmd_vel wrote an error line."""
    client, g = bridge
    log = Path(g._logs[0].name)  # the bridge's log file (the fixture starts the bridge alone)
    pub = client.node.create_publisher(Twist, "/cmd_vel", 100)
    bad = Twist()
    bad.linear.x = float("nan")
    counts = lambda: [int(m) for m in re.findall(r"/cmd_vel rejected \((\d+) so far\)", log.read_text())]  # noqa: E731
    def flooded() -> bool:  # 50 commands every 0.01 s: ~5 kHz offered, well above the 1 kHz that flooded the log
        for _ in range(50):
            pub.publish(bad)
        return len(counts()) >= 3

    t0 = time.monotonic()
    wait_until(flooded, 60, "three rejection lines in the bridge's log", 0.01)  # the flood goes on until then
    elapsed = time.monotonic() - t0
    lines = counts()
    assert len(lines) >= 3 and len(lines) <= elapsed + 2, (len(lines), elapsed)  # at most one line a second
    assert max(lines) >= 10 * len(lines), lines  # every rejection counted, not every one logged
    pub.destroy()


def test_memory_a_large_reply_held_is_returned_once_it_is_replaced(bridge):
    """The bridge stayed 1.1 GB after one 291-view RenderViews (RMW history slots kept at the largest
    sample, glibc arenas kept the frames). Now the history frees a reply when the next one replaces
    it and large blocks go back to the system: RSS returns to where it was."""
    import psutil

    client, g = bridge
    cli = client.node.create_client(RenderViews, SERVICES["render_views"])
    rss = psutil.Process(g.pids()["bridge"]).memory_info

    def views(n: int, size: int):
        req = RenderViews.Request(size=size, times=[0.0] * n, head_tilts=[0.0] * n,
                                  robot_poses=[Pose2DMsg(x=1.0, y=2.5)] * n)
        res = _call(cli, req)
        assert res.success and len(res.frames) == n, res.message

    views(1, 64)
    views(1, 64)
    before = rss().rss
    views(64, 0)  # 64 full 640x480 frames: a 59 MB reply
    peak = rss().rss
    def returned() -> int | None:
        views(1, 64)  # replaces the large reply in the service's history
        now = rss().rss
        return now if now - before < 30 * 2 ** 20 else None

    now = wait_until(returned, 60, f"bridge RSS back within 30 MiB of {before / 2**20:.0f} MiB "
                                   f"(peak {peak / 2**20:.0f} MiB)", 0.5)
    assert now - before < 30 * 2 ** 20, f"bridge RSS {before / 2**20:.0f} -> {peak / 2**20:.0f} -> {now / 2**20:.0f} MiB"
    cli.destroy()
