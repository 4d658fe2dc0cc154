"""Blocking client of the bridge node for scripts, benchmarks and tests.

Owns a node spun by a background executor; every wait has a timeout and raises
``TimeoutError`` naming what did not arrive. Service requests carry a ``request_id`` and are sent
again when a reply is lost (:mod:`affectsim_core.ros.calls`). Call ``rclpy.init`` (with DDS on
loopback, see :mod:`affectsim_core.ros.env`) before creating one.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

import rclpy
from geometry_msgs.msg import Pose2D as Pose2DMsg
from geometry_msgs.msg import PoseArray
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.executors import ExternalShutdownException
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, LaserScan
from tf2_msgs.msg import TFMessage

from affectsim_core.ros import calls
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.topics import SERVICES
from affectsim_core.ros.topics import TOPICS as NAMES
from affectsim_interfaces.msg import HumanPlacement, HumanReactions
from affectsim_interfaces.srv import ApplyAction, LoadWorld

TOPICS: dict[str, tuple[str, type]] = {key: (NAMES[key], typ) for key, typ in (
    ("rgb", Image), ("rgb_info", CameraInfo), ("depth", Image), ("depth_info", CameraInfo), ("scan", LaserScan),
    ("odom", Odometry), ("tf", TFMessage), ("clock", Clock), ("gt_humans", PoseArray),
    ("gt_reactions", HumanReactions))}
LATCHED = {"tf_static": (NAMES["tf_static"], TFMessage), "map": (NAMES["map"], OccupancyGrid)}  # transient local
KEEP_TF = 400  # /tf messages kept (8 s at 50 Hz): longer than the camera frames kept, so a lagging reader
# still finds the transforms of every frame it holds


def _stamp_of(msg: Any) -> float | None:
    """A message's stamp (s): its header's, a TF message's first transform's, a clock's; None otherwise."""
    if hasattr(msg, "header"):
        return from_time(msg.header.stamp)
    if isinstance(msg, TFMessage):
        return from_time(msg.transforms[0].header.stamp) if msg.transforms else None
    if isinstance(msg, Clock):
        return from_time(msg.clock)
    return None


class BridgeClient:
    def __init__(self, name: str = "affectsim_client", topics: tuple[str, ...] = ("rgb", "depth"),
                 keep: int = 50, services: bool = True) -> None:
        """Subscribe to ``topics`` (keys of TOPICS and LATCHED); fewer topics keep the client fast.
        ``services=False``: the robot's topics only, no client of the bridge's services (a real robot)."""
        unknown = set(topics) - set(TOPICS) - set(LATCHED)
        if unknown:
            raise KeyError(f"unknown topic keys {sorted(unknown)}; known: {sorted([*TOPICS, *LATCHED])}")
        self.node = Node(name)
        self._cv = threading.Condition()
        self.msgs: dict[str, deque] = {k: deque(maxlen=KEEP_TF if k == "tf" else keep) for k in topics}
        rel = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        deep = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)  # /tf: 50 Hz, 2 s of history
        self._subs = {}
        for key in topics:
            topic, typ = TOPICS[key] if key in TOPICS else LATCHED[key]
            qos = (deep if key == "tf" else rel) if key in TOPICS else latched
            self._subs[key] = self.node.create_subscription(typ, topic, lambda m, k=key: self._store(k, m), qos)
        if services:
            self._load = self.node.create_client(LoadWorld, SERVICES["load_world"])
            self._step = self.node.create_client(ApplyAction, SERVICES["apply_action"])
        self._ids = calls.request_ids()
        self._executor = EventsExecutor()  # C++ event loop: keeps up with 15 Hz RGB-D where the Python one lags
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._running = True
        self._thread.start()

    def _spin(self) -> None:
        try:
            while self._running and rclpy.ok():
                self._executor.spin_once(timeout_sec=0.05)
        except ExternalShutdownException:  # rclpy.shutdown() while spinning: just stop
            pass

    @property
    def lock(self) -> threading.Condition:
        """Held while reading :attr:`msgs` directly (the spinner appends to them)."""
        return self._cv

    def _store(self, key: str, msg: Any) -> None:
        with self._cv:
            q, t = self.msgs[key], _stamp_of(msg)
            if q and t is not None and (last := _stamp_of(q[-1])) is not None and t < last - 1e-9:
                q.clear()  # time went back (the bridge loaded a world): older messages are of another episode
            q.append(msg)
            self._cv.notify_all()

    # ------------------------------------------------------------------ waits
    def wait_for(self, key: str, predicate=lambda m: True, timeout: float = 10.0) -> Any:
        """Newest message on ``key`` satisfying ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for m in reversed(self.msgs[key]):
                    if predicate(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no message on {key} matching the request within {timeout:.1f} s")
                self._cv.wait(left)

    def wait_for_stamp(self, key: str, stamp, timeout: float = 10.0) -> Any:
        t = from_time(stamp)
        return self.wait_for(key, lambda m: abs(from_time(m.header.stamp) - t) < 1e-6, timeout)

    def wait_for_publishers(self, log: Callable[[str], None] | None = None, every: float = 10.0,
                            timeout: float | None = None) -> None:
        """Block until each subscribed topic has a matched publisher. A lockstep bridge publishes a
        frame once per load or action: one published before this client's subscriptions matched
        never arrives, so a node serves requests only once this returns. ``log`` gets the topics
        still unmatched every ``every`` s; ``timeout`` (s) None: wait for ever, else TimeoutError."""
        start = last = time.monotonic()
        hint = "(is the bridge or the robot's driver running?)"
        while missing := [s.topic_name for s in self._subs.values() if s.get_publisher_count() == 0]:
            now = time.monotonic()
            if timeout is not None and now - start > timeout:
                raise TimeoutError(f"no publisher on {', '.join(missing)} within {timeout:.0f} s {hint}")
            if log is not None and now - last >= every:
                log(f"waiting for a publisher on {', '.join(missing)} {hint}")
                last = now
            time.sleep(0.05)

    def wait_for_bridge(self, timeout: float = 60.0) -> None:
        for cli, name in ((self._load, SERVICES["load_world"]), (self._step, SERVICES["apply_action"])):
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"service {name} not available within {timeout:.0f} s (is the bridge running?)")

    # ------------------------------------------------------------------ services
    def apply(self, action: int, timeout: float = 30.0) -> ApplyAction.Response:
        """Apply one lockstep action (applied once even if the request is sent again)."""
        req = ApplyAction.Request(action=int(action), request_id=next(self._ids))
        return calls.call(self._step, req, timeout, SERVICES["apply_action"])

    def load(self, scene: str, x: float, y: float, yaw: float, humans: list[dict] | None = None,
             timeout: float = 120.0, noise_seed: int = 0, humans_mode: str = "") -> LoadWorld.Response:
        """Load ``scene`` with the robot at (x, y, yaw) in ``map`` (m, rad) and ``humans`` (HumanPlacement
        fields); ``noise_seed`` (0 .. 2^32 - 1) seeds the episode's noise models (docs/noise.md) and
        reactive people's draws; ``humans_mode``: "" / "scripted" or "reactive" (docs/reactive_humans.md)."""
        req = LoadWorld.Request(scene=scene, robot_pose=Pose2DMsg(x=float(x), y=float(y), theta=float(yaw)),
                                noise_seed=int(noise_seed), humans_mode=humans_mode)
        req.humans = [HumanPlacement(**h) for h in (humans or [])]
        req.request_id = next(self._ids)
        return calls.call(self._load, req, timeout, SERVICES["load_world"])

    def step_and_frame(self, action: int, timeout: float = 30.0) -> tuple[ApplyAction.Response, Image, Image]:
        """Apply an action and wait for the RGB and depth frames stamped with its result."""
        res = self.apply(action, timeout)
        if not res.success:
            raise RuntimeError(f"apply_action failed: {res.message}")
        return res, self.wait_for_stamp("rgb", res.stamp, timeout), self.wait_for_stamp("depth", res.stamp, timeout)

    def close(self) -> None:
        self._running = False
        self._thread.join(2.0)
        self._executor.remove_node(self.node)
        self.node.destroy_node()
