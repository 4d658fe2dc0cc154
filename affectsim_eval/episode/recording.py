"""Optional rosbag2 (MCAP) recording of each A-Obs episode, readable with ``rosbags`` and
viewable in Foxglove: ``RUN/recordings/EPISODE_ID/`` with

- ``/head_camera/rgb/image_raw`` (sensor_msgs/Image), ``/odom`` (nav_msgs/Odometry) and
  ``/affectsim/person_detections`` (affectsim_interfaces/PersonDetections) as published while
  the nav node acquired the observation (messages are written as received, serialized);
- ``/affectsim/acquired_clip`` (sensor_msgs/Image): the 8 frames the recognizers received.

Log times are wall-clock nanoseconds of reception; message headers carry sim time. The bag is
written into a temporary directory and renamed into place when the episode ends, so a killed
run leaves no half-written recording under its final name.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import threading
import time
from pathlib import Path

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message

from affectsim_core.errors import MissingDependency
from affectsim_core.names import check_name, inside
from affectsim_core.ros.topics import TOPICS as NAMES

try:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError as exc:  # recording is optional; this module is imported only to record
    raise MissingDependency("recording", "rosbags", "run `make setup`") from exc

TOPICS = {NAMES["rgb"]: "sensor_msgs/msg/Image", NAMES["odom"]: "nav_msgs/msg/Odometry",
          NAMES["person_detections"]: "affectsim_interfaces/msg/PersonDetections"}
CLIP_TOPIC = "/affectsim/acquired_clip"
_MSG_DIR = Path(__file__).resolve().parents[2] / "affectsim_interfaces" / "msg"


def typestore():
    """rosbags type store of ROS 2 Kilted plus the project's detection messages."""
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for name in ("PersonDetection", "PersonDetections"):
        types.update(get_types_from_msg((_MSG_DIR / f"{name}.msg").read_text(), f"affectsim_interfaces/msg/{name}"))
    store.register(types)
    return store


class EpisodeRecorder:
    """Subscribes (serialized) to :data:`TOPICS` on ``node``; :meth:`start` / :meth:`finish` bracket
    one episode."""

    def __init__(self, node, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.store = typestore()
        self._lock = threading.Lock()
        self._writer = None
        self._conns: dict[str, object] = {}
        self._tmp: Path | None = None
        group = ReentrantCallbackGroup()
        qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        for topic, typ in TOPICS.items():
            node.create_subscription(_msg_class(typ), topic, lambda data, t=topic: self._on(t, data), qos, raw=True,
                                     callback_group=group)

    def _on(self, topic: str, data: bytes) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.write(self._conns[topic], time.time_ns(), data)

    def start(self, episode_id: str) -> None:
        check_name("episode_id", episode_id)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(dir=self.out_dir, prefix=f".{episode_id}-"))
        writer = Writer(self._tmp / "bag", version=9, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        conns = {t: writer.add_connection(t, typ, typestore=self.store) for t, typ in TOPICS.items()}
        conns[CLIP_TOPIC] = writer.add_connection(CLIP_TOPIC, "sensor_msgs/msg/Image", typestore=self.store)
        with self._lock:
            self._writer, self._conns, self._episode = writer, conns, episode_id

    def finish(self, clip_messages: list) -> Path:
        """Write the acquired clip (sensor_msgs/Image messages), close and move the bag into place."""
        with self._lock:
            writer, self._writer = self._writer, None
        for msg in clip_messages:
            writer.write(self._conns[CLIP_TOPIC], time.time_ns(), serialize_message(msg))
        writer.close()
        final = inside(self.out_dir, self._episode, field="episode_id")
        if final.exists():
            shutil.rmtree(final)
        (self._tmp / "bag").rename(final)
        shutil.rmtree(self._tmp, ignore_errors=True)
        return final

    def abandon(self) -> None:
        """Drop the episode's partial recording (the episode failed)."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _msg_class(typ: str):
    pkg, _, name = typ.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)
