"""Blocking client of the bridge node for scripts, benchmarks and tests.

Owns a node spun by a background executor; every wait has a timeout and raises
``TimeoutError`` naming what did not arrive. Service requests carry a ``request_id`` and are sent
again when a reply is lost (:mod:`affectsim_core.ros.calls`). Call ``rclpy.init`` (with DDS on
loopback, see :mod:`affectsim_core.ros.env`) before creating one.
"""

from __future__ import annotations

import os
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
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, LaserScan
from std_msgs.msg import UInt64
from tf2_msgs.msg import TFMessage

from affectsim_core.ros import calls, tf_tree
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.topics import SERVICES
from affectsim_core.ros.topics import TOPICS as NAMES
from affectsim_core.tf_buffer import TfBuffer
from affectsim_interfaces.msg import HumanPlacement, HumanReactions
from affectsim_interfaces.srv import ApplyAction, LoadWorld

TOPICS: dict[str, tuple[str, type]] = {key: (NAMES[key], typ) for key, typ in (
    ("rgb", Image), ("rgb_info", CameraInfo), ("depth", Image), ("depth_info", CameraInfo), ("scan", LaserScan),
    ("odom", Odometry), ("tf", TFMessage), ("clock", Clock), ("gt_humans", PoseArray),
    ("gt_reactions", HumanReactions))}
LATCHED = {"tf_static": (NAMES["tf_static"], TFMessage), "map": (NAMES["map"], OccupancyGrid)}  # transient local
SENSORS = ("rgb", "rgb_info", "depth", "depth_info", "scan", "odom")  # drivers' topics (sensor-data QoS on robots)
SENSOR_QOS = ("reliable", "best_effort")
TIME_KEYS = ("rgb", "depth", "scan", "odom", "clock")  # whose stamps say what time it is now (TF future check)
DRAIN_TOPIC = "~/_drain"  # hidden, per client node: the marker of :meth:`BridgeClient.drain`


def _stamp_of(msg: Any) -> float | None:
    """A message's stamp (s): its header's, a TF message's first transform's, a clock's; None otherwise."""
    if hasattr(msg, "header"):
        return from_time(msg.header.stamp)
    if isinstance(msg, TFMessage):
        return from_time(msg.transforms[0].header.stamp) if msg.transforms else None
    if isinstance(msg, Clock):
        return from_time(msg.clock)
    return None


def _qos_text(q) -> str:
    return f"{q.reliability.name.lower()}, {q.durability.name.lower()}"


class BridgeClient:
    def __init__(self, name: str = "affectsim_client", topics: tuple[str, ...] = ("rgb", "depth"),
                 keep: int = 50, services: bool = True, sensor_qos: str = "reliable",
                 log: Callable[[str], None] | None = None, tf: TfBuffer | None = None) -> None:
        """Subscribe to ``topics`` (keys of TOPICS and LATCHED); fewer topics keep the client fast.
        ``services=False``: the robot's topics only, no client of the bridge's services (a real robot).
        ``sensor_qos``: ``reliable`` (the simulator in lockstep: every frame counts) or ``best_effort``
        (matches reliable and best-effort publishers alike: real drivers publish sensor-data QoS).
        ``/tf`` and ``/tf_static`` feed :attr:`tf` (a :class:`TfBuffer`, ``tf`` or a new one).
        ``log`` gets warnings (an incompatible publisher, refused transforms)."""
        unknown = set(topics) - set(TOPICS) - set(LATCHED)
        if unknown:
            raise KeyError(f"unknown topic keys {sorted(unknown)}; known: {sorted([*TOPICS, *LATCHED])}")
        if sensor_qos not in SENSOR_QOS:
            raise ValueError(f"sensor_qos={sensor_qos!r} is invalid; expected one of {SENSOR_QOS}")
        self.node = Node(name)
        self._log = log or (lambda text: self.node.get_logger().warning(text))
        self._cv = threading.Condition()
        self.msgs: dict[str, deque] = {k: deque(maxlen=keep) for k in topics}
        self.tf = tf if tf is not None else TfBuffer()
        self._now: float | None = None  # the newest stamp of a sensor or the clock (s)
        self._refused_logged = 0.0
        rel = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        sensor = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT) if sensor_qos == "best_effort" else rel
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._subs = {}
        for key in topics:
            topic, typ = TOPICS[key] if key in TOPICS else LATCHED[key]
            qos = {"tf": tf_tree.TF_QOS, "tf_static": tf_tree.TF_STATIC_QOS, "map": latched}.get(
                key, sensor if key in SENSORS else rel)
            events = SubscriptionEventCallbacks(incompatible_qos=lambda info, k=key: self._incompatible(k, info))
            self._subs[key] = self.node.create_subscription(typ, topic, lambda m, k=key: self._store(k, m), qos,
                                                            event_callbacks=events)
        if services:
            self._load = self.node.create_client(LoadWorld, SERVICES["load_world"])
            self._step = self.node.create_client(ApplyAction, SERVICES["apply_action"])
        self._ids = calls.request_ids()
        # drain(): a marker this client sends itself; the events executor runs callbacks in arrival order
        self._drained: set[int] = set()
        self._marks = int.from_bytes(os.urandom(4), "little") << 32  # this client's markers: another's never match
        marker_qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._drain_sub = self.node.create_subscription(UInt64, DRAIN_TOPIC, self._on_marker, marker_qos)
        self._drain_pub = self.node.create_publisher(UInt64, DRAIN_TOPIC, marker_qos)
        self._executor = EventsExecutor()  # C++ event loop: keeps up with 15 Hz RGB-D where the Python one lags
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._running = True
        self._thread.start()

    def topic(self, key: str) -> str:
        """The topic name subscribed for ``key`` (after remapping)."""
        return self._subs[key].topic_name if key in self._subs else (TOPICS.get(key) or LATCHED[key])[0]

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
        refused: list[str] = []
        with self._cv:
            q, t = self.msgs[key], _stamp_of(msg)
            if q and t is not None and (last := _stamp_of(q[-1])) is not None and t < last - 1e-9:
                q.clear()  # time went back (the bridge loaded a world): older messages are of another episode
                if key == "clock":
                    self.tf.clear()
            if key in TIME_KEYS and t is not None:  # a stream that went back restarts "now" with it
                self._now = t if self._now is None or not q else max(self._now, t)
            if key in ("tf", "tf_static"):
                refused = tf_tree.feed(self.tf, msg, static=key == "tf_static", now=self._now)
            q.append(msg)
            self._cv.notify_all()
        if refused and time.monotonic() - self._refused_logged > 1.0:  # once a second at most
            self._refused_logged = time.monotonic()
            self._log(f"{len(refused)} transform(s) on {self.topic(key)} refused ({self.tf.refused} so far): {refused[0]}")

    def _incompatible(self, key: str, info) -> None:
        self._log(f"a publisher on {self.topic(key)} has QoS incompatible with this subscription "
                  f"({_qos_text(self._subs[key].qos_profile)}): policy {info.last_policy_kind.name} differs; "
                  "its messages are not received")

    def _on_marker(self, msg: UInt64) -> None:
        if int(msg.data) >> 32 != self._marks >> 32:
            return  # another client of the same node name in this domain
        with self._cv:
            self._drained.add(int(msg.data))
            self._cv.notify_all()

    def drain(self, timeout: float = 10.0) -> None:
        """Return once every message already received by this client's subscriptions has been stored: a
        marker sent to itself comes back after them (the events executor runs callbacks in the order the
        messages arrived). With a publisher that waits for acknowledgement before it answers (the bridge's
        ``load_world``), what was published before the answer is then in :attr:`msgs`."""
        with self._cv:
            self._marks += 1
            mark = self._marks
        deadline = time.monotonic() + timeout
        while self._drain_sub.get_publisher_count() == 0 or self._drain_pub.get_subscription_count() == 0:
            if time.monotonic() > deadline:  # matching its own topic takes a discovery round
                raise TimeoutError(f"{self.node.get_name()}: its drain marker topic did not match within {timeout:.1f} s")
            time.sleep(0.01)
        self._drain_pub.publish(UInt64(data=mark))
        with self._cv:
            while mark not in self._drained:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.node.get_name()}: its drain marker did not come back within {timeout:.1f} s")
                self._cv.wait(left)
            self._drained.discard(mark)

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
                    raise TimeoutError(f"no message on {self.topic(key)} matching the request within {timeout:.1f} s")
                self._cv.wait(left)

    def wait_near(self, key: str, t: float, slop: float, timeout: float = 10.0) -> Any:
        """The message on ``key`` stamped nearest ``t`` (s) within ``slop`` s: approximate time
        pairing of unsynchronised drivers' streams (an exact stamp, as the simulator's, is taken at
        once). Waits until a message stamped at or after ``t`` shows that no nearer one can come
        (one topic's stamps grow), or until ``timeout``; TimeoutError if none lies within ``slop``."""
        deadline = time.monotonic() + timeout

        def best() -> tuple[Any, bool]:
            near = [m for m in reversed(self.msgs[key]) if abs(_stamp_of(m) - t) <= slop + 1e-9]  # ties: newest
            done = any(_stamp_of(m) >= t - 1e-9 for m in self.msgs[key])
            return (min(near, key=lambda m: abs(_stamp_of(m) - t)) if near else None), done

        with self._cv:
            while True:
                m, done = best()
                if m is not None and (done or abs(_stamp_of(m) - t) <= 1e-9):
                    return m
                left = deadline - time.monotonic()
                if left <= 0:
                    if m is not None:
                        return m
                    raise TimeoutError(f"no message on {self.topic(key)} within {slop * 1e3:.0f} ms of t={t:.3f} s "
                                       f"within {timeout:.1f} s")
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
        while missing := [k for k, s in self._subs.items() if s.get_publisher_count() == 0]:
            now = time.monotonic()
            if timeout is not None and now - start > timeout:
                raise TimeoutError(f"no matching publisher within {timeout:.0f} s: {self._unmatched(missing)}")
            if log is not None and now - last >= every:
                log(f"waiting: {self._unmatched(missing)}")
                last = now
            time.sleep(0.05)

    def _unmatched(self, keys: list[str]) -> str:
        """Why each of ``keys`` has no matched publisher: none on the graph, or their QoS (named) differs."""
        parts, absent = [], []
        for k in keys:
            sub = self._subs[k]
            pubs = self.node.get_publishers_info_by_topic(sub.topic_name)
            if not pubs:
                absent.append(sub.topic_name)
                continue
            theirs = "; ".join(sorted({_qos_text(p.qos_profile) for p in pubs}))
            parts.append(f"{sub.topic_name} has {len(pubs)} publisher(s) with QoS incompatible with this "
                         f"subscription's ({_qos_text(sub.qos_profile)}): theirs {theirs}")
        if absent:
            parts.append(f"no publisher on {', '.join(absent)} (is the bridge or the robot's driver running?)")
        return "; ".join(parts)

    def wait_for_bridge(self, timeout: float = 60.0) -> None:
        for cli, name in ((self._load, SERVICES["load_world"]), (self._step, SERVICES["apply_action"])):
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"service {name} not available within {timeout:.0f} s (is the bridge running?)")

    # ------------------------------------------------------------------ services
    def apply(self, action: int, timeout: float = 30.0, head_tilt: float | None = None) -> ApplyAction.Response:
        """Apply one lockstep action (applied once even if the request is sent again), pointing the head
        toward ``head_tilt`` (rad, + looks down) first when given."""
        req = ApplyAction.Request(action=int(action), request_id=next(self._ids), point_head=head_tilt is not None,
                                  head_tilt=0.0 if head_tilt is None else float(head_tilt))
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
