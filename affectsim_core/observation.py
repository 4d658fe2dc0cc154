"""What an active policy may see: the privileged-input barrier.

An :class:`Observation` holds copies of the robot's own sensor data (head camera RGB-D and
intrinsics, its pose from localisation, sim time) as read-only numpy arrays and plain numbers;
an :class:`EpisodeInfo` holds the static occupancy map (as Nav2 would have it), the start pose
and, for dyadic episodes, a clothing description of the target. Neither keeps a reference to
the simulator, the episode record, people, motions or labels, so a policy cannot reach them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from affectsim_core.errors import InvalidInput

# Poses are rounded to 1e-9 (m, rad): a state composed through TF (ROS) and in-process differs in
# the last bits, and policies must decide the same on both (no sensor resolves a nanometre).
POSE_DECIMALS = 9


def _frozen(a: np.ndarray, dtype, shape_ndim: int, field: str) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True)
    if out.ndim != shape_ndim:
        raise InvalidInput(field, out.shape, f"an array with {shape_ndim} dimensions")
    out.setflags(write=False)
    return out


@dataclass(frozen=True, slots=True)
class Observation:
    """One lockstep observation of the robot's own sensors.

    ``rgb`` (H, W, 3) uint8; ``depth`` (H, W) float32 metres along the optical axis, NaN where
    invalid; ``intrinsics`` (fx, fy, cx, cy) pixels; ``camera_pose`` 4x4 optical frame in ``map``
    (x right, y down, z forward); ``pose`` (x m, y m, yaw rad) of ``base_link`` in ``map``;
    ``stamp`` sim time (s); ``step`` index of the action after which it was taken (0 = start).
    """

    rgb: np.ndarray
    depth: np.ndarray
    intrinsics: tuple[float, float, float, float]
    camera_pose: np.ndarray
    pose: tuple[float, float, float]
    stamp: float
    step: int

    @staticmethod
    def make(rgb, depth, intrinsics, camera_pose, pose, stamp: float, step: int) -> "Observation":
        rgb = _frozen(rgb, np.uint8, 3, "rgb")
        depth = _frozen(depth, np.float32, 2, "depth")
        if rgb.shape[:2] != depth.shape or rgb.shape[2] != 3:
            raise InvalidInput("depth", depth.shape, f"the RGB image's size {rgb.shape[:2]} (registered depth)")
        pose_t = tuple(round(float(v), POSE_DECIMALS) for v in pose)
        if len(pose_t) != 3 or not all(math.isfinite(v) for v in pose_t):
            raise InvalidInput("pose", pose, "finite (x m, y m, yaw rad)")
        cam = _frozen(np.round(np.asarray(camera_pose, float), POSE_DECIMALS), float, 2, "camera_pose")
        return Observation(rgb, depth, tuple(float(v) for v in intrinsics), cam, pose_t, float(stamp), int(step))

    def backproject(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Map-frame points (N, 3) for pixels (u, v) using the depth image (NaN where depth is invalid)."""
        fx, fy, cx, cy = self.intrinsics
        h, w = self.depth.shape
        ui = np.clip(np.round(u).astype(int), 0, w - 1)
        vi = np.clip(np.round(v).astype(int), 0, h - 1)
        z = self.depth[vi, ui].astype(float)
        cam = np.stack([(ui - cx) / fx * z, (vi - cy) / fy * z, z], axis=1)
        return cam @ self.camera_pose[:3, :3].T + self.camera_pose[:3, 3]


@dataclass(frozen=True, slots=True)
class EpisodeInfo:
    """Episode-level, non-privileged information given to a policy at reset.

    ``occupancy`` (H, W) int8 of the static map: 0 free, 100 occupied, -1 unknown; cell (i, j)
    covers x in origin_x + j * resolution (+res), y in origin_y + i * resolution (+res), metres in
    ``map``. ``start`` the robot's start pose (x, y, yaw); ``target_description`` a clothing
    description for dyadic episodes (e.g. "red top, navy trousers"), else None. Nothing a robot
    would not know: no episode id (the benchmark's ids stay in the evaluator's logs and records).
    """

    occupancy: np.ndarray
    origin: tuple[float, float]
    resolution: float
    start: tuple[float, float, float]
    robot_radius: float = 0.3
    target_description: str | None = None

    @staticmethod
    def make(occupancy, origin, resolution: float, start, robot_radius: float = 0.3,
             target_description: str | None = None) -> "EpisodeInfo":
        if not 0.01 <= resolution <= 0.5:
            raise InvalidInput("resolution", resolution, "metres per cell in [0.01, 0.5]")
        return EpisodeInfo(_frozen(occupancy, np.int8, 2, "occupancy"),
                           (float(origin[0]), float(origin[1])), float(resolution),
                           tuple(float(v) for v in start), float(robot_radius),
                           None if target_description is None else str(target_description))
