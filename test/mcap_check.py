"""An independent reader of recordings, for the tests: the ``mcap`` package and its ROS 2 decoder
(``mcap-ros2-support``), which decode every message from the schema text stored in the file, as a
viewer such as Foxglove does. Nothing of the project and nothing of rosbags (the recorder's writer)
is used, so a recording that reads back here is one a viewer can read.

:class:`Tf` places a frame in ``map`` from the recorded ``/tf`` and ``/tf_static`` alone (its own
quaternion maths): static edges at any time, dynamic edges at a stored stamp within a tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


@dataclass
class Recording:
    """Every message of one MCAP file: ``messages[topic]`` = [(log time ns, decoded message)];
    ``types[topic]`` = (schema name, schema encoding, message encoding)."""

    path: Path
    messages: dict[str, list] = field(default_factory=dict)
    types: dict[str, tuple[str, str, str]] = field(default_factory=dict)

    def count(self, topic: str) -> int:
        return len(self.messages.get(topic, []))

    def of(self, topic: str) -> list:
        return [m for _, m in self.messages.get(topic, [])]


def read(bag_dir: Path) -> Recording:
    """The recording in the rosbag2 directory ``bag_dir`` (its one ``.mcap`` file), in log-time order."""
    files = sorted(Path(bag_dir).glob("*.mcap"))
    assert len(files) == 1, f"{bag_dir}: expected one .mcap file, found {[f.name for f in files]}"
    rec = Recording(files[0])
    with open(files[0], "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        for ch in summary.channels.values():
            schema = summary.schemas[ch.schema_id]
            rec.types[ch.topic] = (schema.name, schema.encoding, ch.message_encoding)
            rec.messages.setdefault(ch.topic, [])
        for _schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
            rec.messages[channel.topic].append((message.log_time, decoded))
    return rec


def _matrix(t) -> np.ndarray:
    """4x4 of a geometry_msgs/Transform (``parent <- child``)."""
    x, y, z, w = t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w
    n = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    m = np.eye(4)
    m[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    m[:3, 3] = [t.translation.x, t.translation.y, t.translation.z]
    return m


def _ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class Tf:
    """The transform tree of a recording."""

    def __init__(self, rec: Recording) -> None:
        self.static: dict[str, tuple[str, np.ndarray]] = {}
        self.dynamic: dict[str, list[tuple[int, str, np.ndarray]]] = {}
        for msg in rec.of("/tf_static"):
            for t in msg.transforms:
                self.static[t.child_frame_id] = (t.header.frame_id, _matrix(t.transform))
        for msg in rec.of("/tf"):
            for t in msg.transforms:
                self.dynamic.setdefault(t.child_frame_id, []).append((_ns(t.header.stamp), t.header.frame_id,
                                                                      _matrix(t.transform)))
        for edges in self.dynamic.values():
            edges.sort(key=lambda e: e[0])

    def in_map(self, frame: str, stamp, tolerance_s: float) -> np.ndarray:
        """Pose (4x4) of ``frame`` in ``map`` at ``stamp`` (builtin_interfaces/Time); every dynamic edge
        needs a stored transform within ``tolerance_s``. Raises AssertionError naming the missing edge."""
        t, pose, seen = _ns(stamp), np.eye(4), []
        while frame != "map":
            assert frame not in seen and len(seen) < 64, f"TF loop at {frame}"
            seen.append(frame)
            if frame in self.static:
                parent, m = self.static[frame]
            else:
                edges = self.dynamic.get(frame)
                assert edges, f"no transform of {frame} ({' <- '.join(seen)}) in /tf or /tf_static"
                k = int(np.argmin([abs(e[0] - t) for e in edges]))
                assert abs(edges[k][0] - t) <= tolerance_s * 1e9, \
                    f"{frame}: nearest /tf {abs(edges[k][0] - t) / 1e9:.3f} s from {t / 1e9:.3f} s"
                _, parent, m = edges[k]
            pose, frame = m @ pose, parent
        return pose
