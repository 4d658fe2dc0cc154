"""numpy / core types <-> ROS messages. Stamps are sim time (seconds since episode load)."""

from __future__ import annotations

import math
import sys
from dataclasses import fields

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose, TransformStamped
from geometry_msgs.msg import Pose2D as Pose2DMsg
from nav_msgs.msg import OccupancyGrid
from sensor_msgs.msg import CameraInfo, Image, LaserScan

from affectsim_core.geometry import Pose2D, Transform, matrix_to_quat, quat_from_yaw, quat_to_matrix
from affectsim_core.record import Diagnostics


def to_time(t: float) -> Time:
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def from_time(t: Time) -> float:
    return t.sec + t.nanosec * 1e-9


def image_msg(array: np.ndarray, encoding: str, frame_id: str, stamp: Time) -> Image:
    """``rgb8`` (H, W, 3) uint8 or ``32FC1`` (H, W) float32 -> sensor_msgs/Image."""
    arr = np.ascontiguousarray(array)
    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(sys.byteorder == "big")
    msg.step = int(arr.strides[0])
    msg.data = arr.tobytes()
    return msg


def image_to_array(msg: Image) -> np.ndarray:
    """sensor_msgs/Image (rgb8, 32FC1, 16UC1) -> numpy view."""
    dtypes = {"rgb8": (np.uint8, 3), "bgr8": (np.uint8, 3), "32FC1": (np.float32, 1), "16UC1": (np.uint16, 1),
              "mono8": (np.uint8, 1)}
    if msg.encoding not in dtypes:
        raise ValueError(f"image encoding {msg.encoding!r} is not supported; expected one of {sorted(dtypes)}")
    dtype, ch = dtypes[msg.encoding]
    arr = np.frombuffer(bytes(msg.data), dtype=dtype)
    shape = (msg.height, msg.width, ch) if ch > 1 else (msg.height, msg.width)
    return arr.reshape(shape)


def camera_info_msg(k, frame_id: str, stamp: Time) -> CameraInfo:
    """Pinhole CameraInfo from :class:`CameraIntrinsics` (no distortion)."""
    msg = CameraInfo()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.width, msg.height = k.width, k.height
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = k.k
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return msg


def transform_msg(tf: Transform, parent: str, child: str, stamp: Time) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    t = msg.transform.translation
    t.x, t.y, t.z = (float(v) for v in tf.translation)
    q = tf.quat
    r = msg.transform.rotation
    r.w, r.x, r.y, r.z = (float(v) for v in q)
    return msg


def pose_msg(p: Pose2D, z: float = 0.0) -> Pose:
    msg = Pose()
    msg.position.x, msg.position.y, msg.position.z = p.x, p.y, z
    w, x, y, zq = quat_from_yaw(p.yaw)
    msg.orientation.w, msg.orientation.x, msg.orientation.y, msg.orientation.z = w, x, y, zq
    return msg


def matrix_pose_msg(m: np.ndarray) -> Pose:
    """geometry_msgs/Pose of a 4x4 homogeneous transform."""
    msg = Pose()
    msg.position.x, msg.position.y, msg.position.z = (float(v) for v in m[:3, 3])
    q = matrix_to_quat(np.asarray(m)[:3, :3])
    msg.orientation.w, msg.orientation.x, msg.orientation.y, msg.orientation.z = (float(v) for v in q)
    return msg


def matrix_from_pose_msg(msg: Pose) -> np.ndarray:
    """4x4 homogeneous transform of a geometry_msgs/Pose."""
    o, p = msg.orientation, msg.position
    m = np.eye(4)
    m[:3, :3] = quat_to_matrix(np.array([o.w, o.x, o.y, o.z]))
    m[:3, 3] = p.x, p.y, p.z
    return m


def pose2d_msg(p: Pose2D) -> Pose2DMsg:
    return Pose2DMsg(x=p.x, y=p.y, theta=p.yaw)


def laser_msg(ranges: np.ndarray, spec, frame_id: str, stamp: Time, scan_time: float) -> LaserScan:
    msg = LaserScan()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.angle_min, msg.angle_max = spec.angle_min, spec.angle_min + (spec.count - 1) * spec.angle_increment
    msg.angle_increment = spec.angle_increment
    msg.time_increment = 0.0
    msg.scan_time = scan_time
    msg.range_min, msg.range_max = spec.range_min, spec.range_max
    msg.ranges = ranges.astype(np.float32).tolist()
    return msg


def occupancy_msg(grid: np.ndarray, origin: tuple[float, float], resolution: float, stamp: Time) -> OccupancyGrid:
    msg = OccupancyGrid()
    msg.header.stamp = stamp
    msg.header.frame_id = "map"
    msg.info.map_load_time = stamp
    msg.info.resolution = float(resolution)
    msg.info.height, msg.info.width = int(grid.shape[0]), int(grid.shape[1])
    msg.info.origin.position.x, msg.info.origin.position.y = float(origin[0]), float(origin[1])
    msg.info.origin.orientation.w = 1.0
    msg.data = grid.astype(np.int8).ravel().tolist()
    return msg


def diagnostics_to_msg(d: Diagnostics) -> dict:
    """The ``AcquireObservation`` result fields of the Table 6 diagnostics (``handoff_step`` -1: none;
    ``handoff`` is implied by it)."""
    out = {f.name: getattr(d, f.name) for f in fields(Diagnostics) if f.name != "handoff"}
    out["handoff_step"] = -1 if d.handoff_step is None else d.handoff_step
    return out


def diagnostics_from_msg(res) -> Diagnostics:
    """Table 6 diagnostics from an ``AcquireObservation`` result."""
    step = None if res.handoff_step < 0 else int(res.handoff_step)
    return Diagnostics(handoff=step is not None, handoff_step=step, path_length=res.path_length,
                       path_before_handoff=res.path_before_handoff, budget_exhausted=bool(res.budget_exhausted),
                       actions=int(res.actions), planner_calls=int(res.planner_calls),
                       attempted_translations=int(res.attempted_translations),
                       clipped_translations=int(res.clipped_translations))


def finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)
