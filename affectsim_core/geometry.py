"""Planar and 3D rigid transforms (metres, radians; right-handed, z up, REP-103)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def wrap_angle(theta: float) -> float:
    """Angle wrapped to [-pi, pi)."""
    return (theta + math.pi) % (2.0 * math.pi) - math.pi


@dataclass(frozen=True)
class Pose2D:
    """Robot base pose on the floor, in the ``map`` frame: x, y in metres, yaw in radians."""

    x: float
    y: float
    yaw: float

    @property
    def xy(self) -> np.ndarray:
        return np.array([self.x, self.y])

    def is_finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.x, self.y, self.yaw))


def quat_from_yaw(yaw: float) -> tuple[float, float, float, float]:
    """Quaternion (w, x, y, z) of a rotation by ``yaw`` about +z."""
    return (math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0))


def yaw_from_quat(w: float, x: float, y: float, z: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """3x3 rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a 3x3 rotation matrix."""
    m = np.asarray(r, dtype=float)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    qa = np.array(q)
    qa /= np.linalg.norm(qa)
    return qa if qa[0] >= 0 else -qa


@dataclass(frozen=True)
class Transform:
    """Rigid transform: ``p_parent = rotation @ p_child + translation`` (metres)."""

    rotation: np.ndarray  # 3x3
    translation: np.ndarray  # 3

    @staticmethod
    def identity() -> "Transform":
        return Transform(np.eye(3), np.zeros(3))

    @staticmethod
    def from_pose2d(p: Pose2D, z: float = 0.0) -> "Transform":
        c, s = math.cos(p.yaw), math.sin(p.yaw)
        return Transform(np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.array([p.x, p.y, z]))

    def compose(self, other: "Transform") -> "Transform":
        """self * other."""
        return Transform(self.rotation @ other.rotation, self.rotation @ other.translation + self.translation)

    def inverse(self) -> "Transform":
        rt = self.rotation.T
        return Transform(rt, -rt @ self.translation)

    def apply(self, points: np.ndarray) -> np.ndarray:
        return np.asarray(points) @ self.rotation.T + self.translation

    @property
    def quat(self) -> np.ndarray:
        return matrix_to_quat(self.rotation)

    def matrix(self) -> np.ndarray:
        """4x4 homogeneous matrix (rotation, translation in metres)."""
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = self.rotation, self.translation
        return m


def look_at_rotation(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Rotation of a ROS optical frame (z forward, x right, y down) at ``position`` looking at ``target``."""
    z = np.asarray(target, float) - np.asarray(position, float)
    n = np.linalg.norm(z)
    if n < 1e-9:
        raise ValueError("look_at target coincides with the camera position")
    z /= n
    up = np.array([0.0, 0.0, 1.0])
    x = np.cross(z, up)
    if np.linalg.norm(x) < 1e-6:  # looking straight up/down: pick +x as image right
        x = np.array([1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.stack([x, y, z], axis=1)
