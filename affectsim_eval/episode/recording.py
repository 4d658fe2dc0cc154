"""rosbag2 (MCAP) recordings that a viewer (Foxglove) can replay: one per A-Obs episode of the
evaluator (``RUN/recordings/EPISODE_ID/``) and one per ``affectsim observe --record`` session.

A recording holds, as published during the acquisition (written as received, serialized):
``/tf``, ``/tf_static`` (every latched message, once), both camera_infos, RGB, depth (unless
``depth`` is off), ``/base_scan``, ``/odom``, ``/map`` (once), ``/cmd_vel`` and
``/affectsim/person_detections``; and, written by the recorder:

- :data:`MARKERS_TOPIC` (visualization_msgs/MarkerArray, frame ``map``): the people located by the
  perception node (namespace ``detections``), their true poses (``ground_truth``, simulation only)
  and the robot's path (``robot_path``, a line strip of ``map -> base_link`` from the recorded TF);
- :data:`CLIP_TOPIC` (sensor_msgs/Image): the 8 frames the recognizers received, at their stamps;
- :data:`PREDICTIONS_TOPIC` (affectsim_interfaces/RecognizerPrediction): every recognizer's scores
  for the A-Obs clip (at the clip's last frame), and for every window of an evolving episode's
  stream (at the window's time): the plot of ``config/foxglove_layout.json``.

Log times are the messages' own stamps (sim time in simulation, the robot's clock on a robot), so
a viewer replays the episode on the clock its TF is stamped with; a message without a header
(``/cmd_vel``) gets the newest stamp recorded before it. ``max_mb`` bounds a recording: once its
messages reach that many MB (before compression), camera images are no longer written (logged once,
and counted at the end). Chunks are zstd-compressed. The recorder is a node of its own, spun by its
own thread, so writing never stalls the node that records. The bag is written into a temporary
directory and renamed into place when it is finished, so a killed run leaves no half-written
recording under its final name.
"""

from __future__ import annotations

import importlib
import math
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import rclpy
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, PoseArray
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from std_msgs.msg import ColorRGBA
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from affectsim_core.errors import MissingDependency
from affectsim_core.geometry import quat_from_yaw
from affectsim_core.names import check_name, inside
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.tf_tree import TF_QOS, TF_STATIC_QOS, feed
from affectsim_core.ros.topics import TOPICS as NAMES
from affectsim_core.tf_buffer import TfBuffer, TransformError
from affectsim_eval.episode.recording_options import RecordingOptions, SizeBudget
from affectsim_eval.episode.recording_viz import (
    DETECTIONS_NS,
    GROUND_TRUTH_NS,
    MarkerSpec,
    PathTrace,
    header_stamp_ns,
    people_markers,
)
from affectsim_interfaces.msg import PersonDetections

try:
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError as exc:  # recording is optional; this module is imported only to record
    raise MissingDependency("recording", "rosbags", "run `make setup`") from exc

MARKERS_TOPIC = "/affectsim/recording/markers"
CLIP_TOPIC = "/affectsim/acquired_clip"
PREDICTIONS_TOPIC = "/affectsim/recording/predictions"
PREROLL_S = 1.0  # s of messages (their stamps) received before a recording starts that begin it
_NS = 1_000_000_000


@dataclass(frozen=True)
class Recorded:
    """A recorded topic: ROS type, where its stamp is (``header``: a leading std_msgs/Header, ``tf``: the
    first transform's, None: none), whether it is large (camera images: the size budget drops them first),
    whether it is latched (kept and written once, when the recording ends) and whether it is sensor data
    (best-effort on a robot)."""

    type: str
    stamp: str | None = "header"
    large: bool = False
    latched: bool = False
    sensor: bool = False


RECORDED: dict[str, Recorded] = {  # keys of affectsim_core.ros.topics.TOPICS
    "tf": Recorded("tf2_msgs/msg/TFMessage", "tf"),
    "tf_static": Recorded("tf2_msgs/msg/TFMessage", "tf", latched=True),
    "rgb": Recorded("sensor_msgs/msg/Image", large=True, sensor=True),
    "rgb_info": Recorded("sensor_msgs/msg/CameraInfo", sensor=True),
    "depth": Recorded("sensor_msgs/msg/Image", large=True, sensor=True),
    "depth_info": Recorded("sensor_msgs/msg/CameraInfo", sensor=True),
    "scan": Recorded("sensor_msgs/msg/LaserScan", sensor=True),
    "odom": Recorded("nav_msgs/msg/Odometry", sensor=True),
    "map": Recorded("nav_msgs/msg/OccupancyGrid", latched=True),
    "cmd_vel": Recorded("geometry_msgs/msg/Twist", None),
    "head_command": Recorded("trajectory_msgs/msg/JointTrajectory", None),  # its header is 0: "start now"
    "person_detections": Recorded("affectsim_interfaces/msg/PersonDetections"),
}
WRITTEN = {MARKERS_TOPIC: "visualization_msgs/msg/MarkerArray", CLIP_TOPIC: "sensor_msgs/msg/Image",
           PREDICTIONS_TOPIC: "affectsim_interfaces/msg/RecognizerPrediction"}
_MSG_DIR = Path(__file__).resolve().parents[2] / "affectsim_interfaces" / "msg"
_KINDS = {"cylinder": Marker.CYLINDER, "sphere": Marker.SPHERE, "line_strip": Marker.LINE_STRIP}


def recorded_keys(options: RecordingOptions) -> list[str]:
    """The recorded topics of ``options`` (keys of :data:`RECORDED`)."""
    return [k for k in RECORDED if options.depth or k not in ("depth", "depth_info")]


def typestore():
    """rosbags type store of ROS 2 Kilted plus the project's recorded messages."""
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for name in ("PersonDetection", "PersonDetections", "RecognizerPrediction"):
        types.update(get_types_from_msg((_MSG_DIR / f"{name}.msg").read_text(), f"affectsim_interfaces/msg/{name}"))
    store.register(types)
    return store


class EpisodeRecorder:
    """A node of its own (``node_name``, in the default context) with its own executor thread; topics
    are those of ``options`` (remapped as the process's ``--ros-args``). :meth:`start` / :meth:`finish`
    (or :meth:`abandon`) bracket one recording; :meth:`close` ends the node."""

    def __init__(self, out_dir: Path, options: RecordingOptions = RecordingOptions(), node_name: str = "recorder",
                 log: Callable[[str], None] = print) -> None:
        self.out_dir = Path(out_dir)
        self.options = options
        self.log = log
        self.store = typestore()
        self._lock = threading.Lock()
        self._writer = None
        self._conns: dict[str, object] = {}
        self._tmp: Path | None = None
        self._episode = ""
        self._capturing = False  # topics are written (between start() and end_capture())
        self._latched: dict[str, dict[object, bytes]] = {"tf_static": {}, "map": {}}  # newest per publisher's frames
        self._tf = TfBuffer()
        self._path = PathTrace()
        self._budget = SizeBudget(options.max_mb)
        self._last_ns = 0
        self._preroll: list[tuple[str, bytes, int]] = []  # (key, message, stamp ns) received between recordings
        self.node = rclpy.create_node(node_name)
        sensor = ReliabilityPolicy.BEST_EFFORT if options.best_effort_sensors else ReliabilityPolicy.RELIABLE
        for key in recorded_keys(options):
            spec = RECORDED[key]
            if key == "tf":
                qos = TF_QOS
            elif key == "tf_static":
                qos = TF_STATIC_QOS
            elif key == "map":
                qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            else:
                qos = QoSProfile(depth=50, reliability=sensor if spec.sensor else ReliabilityPolicy.RELIABLE)
            self.node.create_subscription(_msg_class(spec.type), NAMES[key], lambda raw, k=key: self._on(k, raw), qos,
                                          raw=True)
        if options.ground_truth:
            self.node.create_subscription(PoseArray, NAMES["gt_humans"], self._on_people, QoSProfile(depth=10))
        self._executor = SingleThreadedExecutor(context=self.node.context)
        self._executor.add_node(self.node)
        self._spin = threading.Thread(target=self._spin_node, name=f"{node_name}-spin", daemon=True)
        self._spin.start()

    def _spin_node(self) -> None:
        try:
            self._executor.spin()
        except ExternalShutdownException:
            pass

    # ------------------------------------------------------------------ received messages
    def _on(self, key: str, raw: bytes) -> None:
        spec = RECORDED[key]
        if key in ("tf", "tf_static"):
            msg = deserialize_message(raw, TFMessage)
            feed(self._tf, msg, static=key == "tf_static")
        # the detections' markers: written with the message, under the same lock
        located = _located_markers(raw) if key == "person_detections" else None
        with self._lock:
            if spec.latched:
                frames = (frozenset(t.child_frame_id for t in msg.transforms) if key == "tf_static" else "map")
                self._latched[key][frames] = raw
                return
            t_ns = None if spec.stamp is None else header_stamp_ns(raw, 4 if spec.stamp == "tf" else 0)
            if self._writer is None:
                if t_ns is not None:
                    self._keep(key, raw, t_ns)
                return
            if not self._capturing:
                return
            t_ns = self._last_ns if t_ns is None else t_ns
            self._last_ns = max(self._last_ns, t_ns)
            self._write(key, raw, t_ns, spec.large)
            if located is not None:
                self._write(MARKERS_TOPIC, located[1], located[0], False)
        if key == "tf":
            self._on_tf(msg)

    def _keep(self, key: str, raw: bytes, t_ns: int) -> None:
        """Keep a message received between recordings (under the lock): the newest :data:`PREROLL_S` of
        them start the next recording, since a world's first messages may arrive just before it starts."""
        self._preroll.append((key, raw, t_ns))
        newest = max(t for _, _, t in self._preroll)
        self._preroll = [e for e in self._preroll if e[2] >= newest - PREROLL_S * _NS]

    def forget(self) -> None:
        """Drop the messages kept between recordings: what arrives from now on is a new world's (call it
        before the request that loads one)."""
        with self._lock:
            self._preroll = []

    def _on_tf(self, msg: TFMessage) -> None:
        """A path point from ``map -> base_link`` at the stamp of a transform of base_link."""
        for t in msg.transforms:
            if t.child_frame_id != "base_link":
                continue
            try:
                pose = self._tf.lookup("map", "base_link", from_time(t.header.stamp))
            except TransformError:
                continue  # no map -> odom yet
            if self._path.add(float(pose.translation[0]), float(pose.translation[1])) \
                    and self._path.due(from_time(t.header.stamp)):
                self._markers(t.header.stamp, [self._path.marker()])

    def _on_people(self, msg: PoseArray) -> None:
        if not self._capturing:
            return
        people = [(p.position.x, p.position.y, 2.0 * math.atan2(p.orientation.z, p.orientation.w)) for p in msg.poses]
        self._markers(msg.header.stamp, people_markers(GROUND_TRUTH_NS, people), GROUND_TRUTH_NS)

    def _markers(self, stamp: Time, specs: list[MarkerSpec], replace_ns: str | None = None) -> None:
        """Write ``specs`` as one MarkerArray at ``stamp`` (every marker of ``replace_ns`` deleted first)."""
        raw = _marker_array(stamp, specs, replace_ns)
        with self._lock:
            if self._writer is not None:
                self._write(MARKERS_TOPIC, raw, _ns(stamp), False)

    def _write(self, topic: str, raw: bytes, t_ns: int, large: bool) -> None:
        """Write under the lock (``topic``: a key of RECORDED or a WRITTEN topic), within the size budget."""
        if not self._budget.admit(len(raw), large):
            if self._budget.dropped == 1:
                self.log(f"[record] {self._episode}: {self.options.max_mb:g} MB reached (record_max_mb); camera "
                         "images are no longer written, the other topics are")
            return
        self._writer.write(self._conns[topic], max(0, int(t_ns)), raw)

    # ------------------------------------------------------------------ one recording
    def start(self, episode_id: str) -> None:
        check_name("episode_id", episode_id)
        self.abandon()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.out_dir, prefix=f".{episode_id}-"))
        writer = Writer(tmp / "bag", version=9, storage_plugin=StoragePlugin.MCAP)
        writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        writer.open()
        conns = {k: writer.add_connection(NAMES[k], RECORDED[k].type, typestore=self.store)
                 for k in recorded_keys(self.options)}
        conns.update({t: writer.add_connection(t, typ, typestore=self.store) for t, typ in WRITTEN.items()})
        with self._lock:  # (the TF buffer forgets the last world's transforms itself: its clock went back)
            self._writer, self._conns, self._episode, self._tmp = writer, conns, episode_id, tmp
            self._path, self._budget, self._last_ns = PathTrace(), SizeBudget(self.options.max_mb), 0
            self._capturing = True
            preroll, self._preroll = self._preroll, []
            for key, raw, t_ns in preroll:
                self._last_ns = max(self._last_ns, t_ns)
                self._write(key, raw, t_ns, RECORDED[key].large)
                if key == "person_detections":  # kept detections get their markers too
                    self._write(MARKERS_TOPIC, _located_markers(raw)[1], t_ns, False)
        for key, raw, _ in preroll:
            if key == "tf":
                self._on_tf(deserialize_message(raw, TFMessage))

    def end_capture(self) -> None:
        """Stop writing the topics (the acquisition is over); the clip and the predictions may still be added."""
        with self._lock:
            self._capturing = False

    def add_clip(self, clip_messages: list) -> None:
        """The acquired clip (sensor_msgs/Image messages), each at its own stamp."""
        with self._lock:
            for msg in clip_messages:
                self._write(CLIP_TOPIC, serialize_message(msg), _ns(msg.header.stamp), False)

    def add_predictions(self, predictions: list, t: float) -> None:
        """RecognizerPrediction messages of one clip or window, at time ``t`` (s, the messages' clock)."""
        with self._lock:
            for p in predictions:
                self._write(PREDICTIONS_TOPIC, serialize_message(p), round(t * _NS), False)

    def finish(self) -> Path:
        """Write the latched messages and the whole path, close the bag and move it into place; its path."""
        with self._lock:
            writer = self._writer
            if writer is None:
                raise RuntimeError("no recording under way: start() one first")
            for key, msgs in self._latched.items():
                if key in self._conns:
                    for raw in msgs.values():
                        self._write(key, raw, header_stamp_ns(raw, 4 if key == "tf_static" else 0) or 0, False)
            path_marker = self._path.marker() if self._path.points else None
        if path_marker is not None:
            self._markers(_time(self._last_ns), [path_marker])
        with self._lock:
            self._writer, self._capturing = None, False
            budget, episode, tmp = self._budget, self._episode, self._tmp
            self._tmp = None
        writer.close()
        if budget.dropped:
            self.log(f"[record] {episode}: {budget.dropped} camera images left out (record_max_mb="
                     f"{self.options.max_mb:g})")
        final = inside(self.out_dir, episode, field="episode_id")
        if final.exists():
            shutil.rmtree(final)
        (tmp / "bag").rename(final)
        shutil.rmtree(tmp, ignore_errors=True)
        return final

    def abandon(self) -> None:
        """Drop the recording under way, if any (its episode failed)."""
        with self._lock:
            writer, tmp, self._writer, self._tmp = self._writer, self._tmp, None, None
            self._capturing = False
        if writer is not None:
            writer.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def close(self) -> None:
        """Drop a recording under way and end the node and its thread."""
        self.abandon()
        self._executor.shutdown(timeout_sec=5.0)
        self._spin.join(5.0)
        self.node.destroy_node()


def _located_markers(raw: bytes) -> tuple[int, bytes]:
    """A serialized PersonDetections message's stamp (ns) and the MarkerArray of its people (map)."""
    det = deserialize_message(raw, PersonDetections)
    return _ns(det.header.stamp), _marker_array(det.header.stamp, people_markers(
        DETECTIONS_NS, [(p.position.x, p.position.y, 0.0) for p in det.people]), DETECTIONS_NS)


def _ns(stamp: Time) -> int:
    """A builtin_interfaces/Time as nanoseconds."""
    return stamp.sec * _NS + stamp.nanosec


def _marker_array(stamp: Time, specs: list[MarkerSpec], replace_ns: str | None = None) -> bytes:
    """``specs`` as one serialized MarkerArray at ``stamp``, every marker of ``replace_ns`` deleted first."""
    arr = MarkerArray()
    if replace_ns is not None:
        clear = Marker(ns=replace_ns, action=Marker.DELETEALL)
        clear.header.stamp, clear.header.frame_id = stamp, "map"
        arr.markers.append(clear)
    arr.markers.extend(_marker(s, stamp) for s in specs)
    return serialize_message(arr)


def _marker(s: MarkerSpec, stamp: Time) -> Marker:
    m = Marker(ns=s.ns, id=s.id, type=_KINDS[s.kind], action=Marker.ADD)
    m.header.stamp, m.header.frame_id = stamp, "map"
    m.pose.position.x, m.pose.position.y, m.pose.position.z = float(s.x), float(s.y), float(s.z)
    w, x, y, z = quat_from_yaw(s.yaw)
    m.pose.orientation.w, m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z = w, x, y, z
    m.scale.x, m.scale.y, m.scale.z = (float(v) for v in s.scale)
    m.color = ColorRGBA(r=s.rgba[0], g=s.rgba[1], b=s.rgba[2], a=s.rgba[3])
    m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in s.points]
    return m


def _time(t_ns: int) -> Time:
    return Time(sec=int(t_ns // _NS), nanosec=int(t_ns % _NS))


def _msg_class(typ: str):
    pkg, _, name = typ.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)
