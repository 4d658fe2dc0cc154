"""The graph as users start it: `affectsim launch bench`, topics up, every socket (UDP, TCP) on 127.0.0.1,
Ctrl-C, nothing left behind."""

import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import rclpy
from geometry_msgs.msg import Twist

from affectsim_core.errors import InvalidInput
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.env import loopback_env, pick_domain_id, release_domain_id
from affectsim_core.ros.shm import clean_stale, group
from affectsim_ros.graph import GRAPHS
from waiting import wait_until

AFFECTSIM = [sys.executable, "-m", "affectsim_ros.cli"]


def _bound_addresses(pids: set[int]) -> dict[int, set[str]]:
    """Local addresses of every UDP and TCP socket (``ss -uatnp``) of the processes ``pids``."""
    out = subprocess.run(["ss", "-H", "-uatnp"], capture_output=True, text=True, timeout=30, check=True).stdout
    bound: dict[int, set[str]] = {}
    for line in out.splitlines():
        fields = line.split()
        local = fields[4] if fields[0] in ("udp", "tcp") else fields[3]
        for pid in map(int, re.findall(r"pid=(\d+)", line)):
            if pid in pids:
                bound.setdefault(pid, set()).add(local.rsplit(":", 1)[0].strip("[]"))
    return bound


def _start(args, domain):
    return subprocess.Popen([*AFFECTSIM, "launch", "stack", *args, "--domain-id", str(domain)],
                            env=loopback_env(domain), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_launch_topics_up_then_ctrl_c_leaves_no_process():
    domain = pick_domain_id()
    launcher = _start(["mode:=free_run"], domain)
    children = []
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    rclpy.init()
    try:
        client = BridgeClient("graph_test", topics=("rgb", "odom", "clock"))
        client.wait_for("rgb", timeout=60)
        nodes = psutil.Process(launcher.pid).children()
        assert len(nodes) == len(GRAPHS["stack"]), f"one process per node of the stack: {[n.cmdline() for n in nodes]}"
        children = psutil.Process(launcher.pid).children(recursive=True)  # nodes and anything they started
        pids = {launcher.pid, os.getpid(), *(c.pid for c in children)}

        def every_node_bound() -> dict[int, set[str]] | None:
            bound = _bound_addresses(pids)
            return bound if {p.pid for p in nodes} <= set(bound) else None

        # a node may still be starting when the bridge's first frame arrives (once it had no socket yet)
        bound = wait_until(every_node_bound, 60, "a socket for every node of the stack")
        off_loopback = {pid: sorted(a - {"127.0.0.1"}) for pid, a in bound.items() if a - {"127.0.0.1"}}
        assert not off_loopback, f"sockets beyond loopback (ss -uatnp): {off_loopback}"
        # free-running: /cmd_vel drives the base, sim time advances by itself
        pub = client.node.create_publisher(Twist, "/cmd_vel", 10)
        cmd = Twist()
        cmd.linear.x = 0.4
        x0 = client.wait_for("odom", timeout=10).pose.pose.position.x
        t0 = from_time(client.wait_for("clock", timeout=10).clock)
        deadline = time.monotonic() + 60  # safety net: the base moves within a second of sim time
        moved = lambda m: m.pose.pose.position.x > x0 + 0.1  # noqa: E731
        while not any(moved(m) for m in list(client.msgs["odom"])) and time.monotonic() < deadline:
            pub.publish(cmd)  # keep commanding (it times out after cmd_vel_timeout) until the base has moved
            now = from_time(client.wait_for("clock", timeout=10).clock)
            client.wait_for("clock", lambda c, t=now: from_time(c.clock) >= t + 0.05, 10)  # 50 ms of sim time
        x1 = client.wait_for("odom", moved, timeout=10).pose.pose.position.x
        t1 = from_time(client.wait_for("clock", timeout=10).clock)
        assert t1 > t0 and x1 > x0 + 0.1
        # every node has its own name: the launcher's `-r __node:=nav` once renamed the nav node's I/O node too
        def all_names():
            found = client.node.get_node_names_and_namespaces()
            want = {"bridge", "bridge_cmd_vel", "nav", "perception", "perception_camera", "perception_tf"}
            return found if want <= {n for n, _ in found} else None

        names = wait_until(all_names, 30, "discovery of the graph's nodes")
        full = [f"{ns.rstrip('/')}/{n}" for n, ns in names]
        assert len(full) == len(set(full)) and {"/bridge", "/bridge_cmd_vel", "/nav", "/nav_io", "/perception"} <= set(full), full
        # high-rate topics are taken by side nodes, apart from the multi-threaded executors of the services
        # (at 50 Hz of /cmd_vel that executor's per-message work once starved the bridge's simulator thread)
        takers = {i.node_name for i in client.node.get_subscriptions_info_by_topic("/cmd_vel")}
        assert takers == {"bridge_cmd_vel"}, takers
        for topic, side in (("/head_camera/rgb/image_raw", "perception_camera"), ("/clock", "perception_tf")):
            # a node's subscriptions are discovered after its name (late beside a second test worker): wait for them
            wait_until(lambda t=topic, n=side: n in {i.node_name for i in client.node.get_subscriptions_info_by_topic(t)},
                       30, f"{side}'s subscription to {topic}")
            takers = {i.node_name for i in client.node.get_subscriptions_info_by_topic(topic)}
            assert "perception" not in takers, (topic, takers)
        client.close()
    except BaseException:
        launcher.kill()  # a failed check must not leave the graph running (its nodes die with the launcher)
        launcher.communicate(timeout=15)
        raise
    finally:
        rclpy.shutdown()
    t = time.monotonic()
    launcher.send_signal(signal.SIGINT)
    out, _ = launcher.communicate(timeout=15)
    assert time.monotonic() - t < 10.0, out
    assert launcher.returncode == 0, out
    psutil.wait_procs(children, timeout=1)
    assert not [p.pid for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], out


@pytest.mark.parametrize("arg, message", [
    ("mode:=fast", "launch argument mode='fast' is invalid; expected one of lockstep, free_run"),
    ("scene:=atlantis", "launch argument scene='atlantis' is invalid"),
    ("real_time_factor:=-1", "launch argument real_time_factor='-1' is invalid"),
    ("colour:=red", "launch argument='colour' is invalid"),
    ("graphs:=0", "launch argument graphs='0' is invalid; expected an integer in [1, 64]"),
    ("shard:=2/2", "launch argument shard='2/2' is invalid; expected k/N with 0 <= k < N <= 64"),
])
def test_bad_launch_arguments_fail_fast(arg, message):
    proc = subprocess.run([*AFFECTSIM, "launch", "bench", arg], env=loopback_env(pick_domain_id()),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr


def test_graphs_are_refused_where_a_run_cannot_be_split():
    for graph, args, message in (("stack", ["graphs:=2"], "launch argument graphs='2' is invalid; expected 1 for the "
                                  "stack graph"),
                                 ("bench", ["graphs:=2", "shard:=0/2"], "launch argument shard='0/2' is invalid; "
                                  "expected no shard with graphs:=N")):
        proc = subprocess.run([*AFFECTSIM, "launch", graph, *args], env=loopback_env(pick_domain_id()),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_bad_node_parameter_stops_the_node_with_a_clear_message():
    domain = pick_domain_id()
    for node, arg, message in (("bridge", "camera_width:=5", "parameter camera_width=5 is invalid"),
                               ("bridge", "mode:=fast", "parameter mode='fast' is invalid; expected one of lockstep"),
                               ("nav", "policy:=oracle", "parameter policy='oracle' is invalid; expected one of baseline"),
                               ("perception", "detect_rate_hz:=-1.0", "parameter detect_rate_hz=-1.0 is invalid"),
                               ("evaluator", "split:=dev", "parameter split='dev' is invalid; expected one of train")):
        proc = subprocess.run([sys.executable, "-m", "affectsim_ros.nodes", node, "--ros-args", "-p", arg],
                              env=loopback_env(domain), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr, (node, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr


def _shm_files(pid: int) -> set[Path]:
    """The /dev/shm files the process maps or has open."""
    files = {line.split(maxsplit=5)[5].strip() for line in open(f"/proc/{pid}/maps") if "/dev/shm/fast" in line}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            files.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return {Path(f) for f in files if f.startswith("/dev/shm/fast")}


def _readable(pid: int) -> bool:
    try:
        _shm_files(pid)
        return True
    except OSError:
        return False


def _mapped_groups() -> set[Path]:
    """The /dev/shm files of every group (segment, lock, semaphore) some readable process, this one
    included, maps or has open: peers map the ports they send to, other graphs' too."""
    used = {group(f.name) for p in psutil.process_iter() if _readable(p.pid) for f in _shm_files(p.pid)}
    return {f for f in Path("/dev/shm").iterdir() if group(f.name) in used}


def _quiet_domains() -> list[int]:
    """Two domain ids in which no participant runs (none has a unicast port file; a participant of
    this process from an earlier test would otherwise discover the victim and map all its files)."""
    def quiet(d: int) -> bool:  # unicast ports of participants 0..9 (RTPS well-known ports)
        return not any(Path(f"/dev/shm/fastdds_port{7400 + 250 * d + k}").exists() for k in range(10, 30))
    clean_stale()  # port files of killed participants make a domain look busy
    for _ in range(200):
        first = pick_domain_id()
        if quiet(first) and quiet(first % 100 + 1):
            return [first, first % 100 + 1]
        release_domain_id(first)  # not kept: held, the rejected ids took every domain of the machine
    pytest.fail("no two neighbouring domain ids without a participant's port files in /dev/shm")


def test_a_port_file_without_a_listener_is_stale_and_one_with_a_locked_listener_is_not(tmp_path):
    from affectsim_core.ros.shm import stale_files

    for name in ("fastdds_port7401", "sem.fastdds_port7401_mutex", "fastdds_port7402", "fastdds_port7402_el"):
        (tmp_path / name).write_bytes(b"x")
    fd = os.open(tmp_path / "fastdds_port7402_el", os.O_RDONLY)  # a live listener holds its port's lock
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert {p.name for p in stale_files(tmp_path, min_age=0.0)} == {"fastdds_port7401", "sem.fastdds_port7401_mutex"}
    finally:
        os.close(fd)


def test_shared_memory_left_by_a_killed_process_is_removed_and_a_live_one_is_kept():
    # a probe lives until the test closes its stdin or kills it: not for a time a slow machine might outlast
    code = "import rclpy, sys; rclpy.init(); n = rclpy.create_node('shm_probe'); print('up', flush=True); sys.stdin.read()"
    domains = _quiet_domains()  # two: the live one never maps the victim's segment
    procs = [subprocess.Popen([sys.executable, "-c", code], env=loopback_env(d), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for d in domains]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "up"
        victim, live = procs
        files = {p.pid: _shm_files(p.pid) for p in procs}
        assert files[victim.pid] and files[live.pid]
        victim.kill()
        victim.wait(10)
        own = files[victim.pid] - _mapped_groups()
        assert any(f.stat().st_size > 30 * 2**20 for f in own), "SIGKILL left no unused segment"  # ~33 MB
        past = time.time() - 3600
        for f in files[victim.pid] | files[live.pid]:
            os.utime(f, (past, past))  # old enough for the cleaner, which leaves younger files alone
        removed, freed = clean_stale()
        # a participant that discovered the victim (this process's, from an earlier test, may share its random
        # domain) maps the victim's port to send to it: such a port is in use and stays
        kept = {f for f in own if f.exists()}
        assert not kept - _mapped_groups()
        assert removed >= len(own - kept) and freed > 30 * 2**20
        assert all(f.exists() for f in files[live.pid])  # a live participant's files are never touched
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


def test_a_signal_while_the_bridge_is_being_built_stops_it_cleanly():
    """SIGINT as soon as the bridge has joined DDS, while it builds its simulator (EGL) thread: once
    that crashed the process (SIGSEGV) at interpreter exit."""
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "affectsim_ros.nodes", "bridge"],
                                env=loopback_env(pick_domain_id()), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            wait_until(lambda: _shm_files(proc.pid) or proc.poll() is not None, 120, "the bridge in DDS", 0.01)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == 0 and "Traceback" not in out, (proc.returncode, out[-2000:])


def test_another_rmw_is_refused_since_the_loopback_profile_is_fast_dds():
    assert loopback_env(1, base={})["RMW_IMPLEMENTATION"] == "rmw_fastrtps_cpp"
    with pytest.raises(InvalidInput, match="RMW_IMPLEMENTATION='rmw_cyclonedds_cpp' is invalid"):
        loopback_env(1, base={"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"})
    env = loopback_env(1, base={"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE" not in env and env["FASTDDS_DEFAULT_PROFILES_FILE"].endswith(
        "fastdds_loopback.xml")


def test_a_goal_future_is_registered_once_under_the_lock_that_guards_replies():
    """The pinned rclpy's send_goal_async registers a second future outside its lock (the first one is
    orphaned), and a reply taken in between raised ValueError in the sending thread (seen in the nav
    node test). The project's client registers one future, tracked before any reply can complete it."""
    from rclpy.action import ActionClient as RclpyActionClient
    from rclpy.context import Context

    from affectsim_core.ros.action_client import ActionClient
    from affectsim_interfaces.action import Recognize

    ctx = Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("goal_probe", context=ctx)
    try:
        ours, stock = ActionClient(node, Recognize, "/probe_ours"), RclpyActionClient(node, Recognize, "/probe_stock")
        f = ours.send_goal_async(Recognize.Goal(), feedback_callback=lambda m: None)
        assert ours._futures == [f] and list(ours._pending_goal_requests.values()) == [f]
        assert len(ours._feedback_callbacks) == 1
        g = stock.send_goal_async(Recognize.Goal())
        assert list(stock._pending_goal_requests.values()) == [g]
        with pytest.raises(TypeError, match="Recognize_Result is invalid; expected Recognize_Goal"):
            ours.send_goal_async(Recognize.Result())
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)


def test_a_client_waits_until_its_topics_have_publishers():
    """A lockstep bridge publishes each frame once: a node must not serve goals before its subscriptions
    have matched (the nav node test once got no first frame and aborted). Real DDS, one process."""
    code = """
import rclpy
from sensor_msgs.msg import Image
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.topics import TOPICS
rclpy.init()
client = BridgeClient('probe', topics=('rgb',), services=False)
try:
    client.wait_for_publishers(timeout=1.0)
except TimeoutError as exc:
    print('refused:', exc, flush=True)
node = rclpy.create_node('camera')
from rclpy.qos import qos_profile_sensor_data
node.create_publisher(Image, TOPICS['rgb'], qos_profile_sensor_data)  # a camera driver's QoS: best effort
try:
    client.wait_for_publishers(timeout=10.0)  # this client subscribes reliable (lockstep)
except TimeoutError as exc:
    print('incompatible:', exc, flush=True)
tolerant = BridgeClient('probe_best_effort', topics=('rgb',), services=False, sensor_qos='best_effort')
tolerant.wait_for_publishers(timeout=60.0)
node.create_publisher(Image, TOPICS['rgb'], 10)  # and a reliable publisher: matched by both
client.wait_for_publishers(timeout=60.0)
tolerant.wait_for_publishers(timeout=60.0)
print('matched', flush=True)
tolerant.close()
client.close()
node.destroy_node()
rclpy.shutdown()
"""
    out = subprocess.run([sys.executable, "-c", code], env=loopback_env(pick_domain_id()), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused: no matching publisher within 1 s: no publisher on "
                               "/head_camera/rgb/image_raw"), out.stdout
    assert lines[1].startswith("incompatible: no matching publisher within 10 s: /head_camera/rgb/image_raw has 1 "
                               "publisher(s) with QoS incompatible with this subscription's (reliable, volatile): "
                               "theirs best_effort, volatile"), out.stdout
    assert lines[-1] == "matched"
