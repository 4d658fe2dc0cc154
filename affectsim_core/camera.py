"""Pinhole camera intrinsics (ROS convention) and the Fetch head camera."""

from __future__ import annotations

import math
from dataclasses import dataclass

from affectsim_core.errors import InvalidInput


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole intrinsics in pixels, ROS convention (pixel centres at integer coordinates)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @staticmethod
    def from_vfov(width: int, height: int, vfov_rad: float) -> "CameraIntrinsics":
        f = (height / 2.0) / math.tan(vfov_rad / 2.0)
        return CameraIntrinsics(width, height, f, f, (width - 1) / 2.0, (height - 1) / 2.0)

    def validate(self, where: str = "camera") -> "CameraIntrinsics":
        if not (16 <= self.width <= 4096 and 16 <= self.height <= 4096):
            raise InvalidInput(f"{where}.width x height", (self.width, self.height), "16..4096 pixels each")
        for name in ("fx", "fy"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 1.0):
                raise InvalidInput(f"{where}.{name}", v, "a focal length > 1 pixel")
        if not (0 <= self.cx <= self.width - 1 and 0 <= self.cy <= self.height - 1):
            raise InvalidInput(f"{where}.cx, cy", (self.cx, self.cy), "a principal point inside the image")
        return self

    @property
    def k(self) -> list[float]:
        return [self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0]


#: The Fetch head camera (Primesense Carmine): 640x480 RGB-D, vertical field of view 46.83 deg.
FETCH_HEAD_WIDTH, FETCH_HEAD_HEIGHT, FETCH_HEAD_VFOV_DEG = 640, 480, 46.83
FETCH_HEAD_CAMERA = CameraIntrinsics.from_vfov(FETCH_HEAD_WIDTH, FETCH_HEAD_HEIGHT, math.radians(FETCH_HEAD_VFOV_DEG))
