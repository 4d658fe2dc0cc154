"""From a person detection to what a policy acts on: position from depth, and clothing colours.

Everything here uses only the robot's own RGB-D frame and a frozen detector's keypoints, so the
policies (nav) and the perception node share it. A detector is any :class:`PersonDetector`
(BlazePose, registered in :data:`DETECTORS` by ``affectsim_perception``); it finds one person per
image, and :func:`detect_people` finds a second one by masking the first person's box and
detecting again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from affectsim_core.colours import COLOURS
from affectsim_core.observation import Observation
from affectsim_core.registry import Registry

SHOULDERS = (11, 12)  # BlazePose: left, right shoulder
TORSO = (*SHOULDERS, 23, 24)  # BlazePose: shoulders, hips
INWARD = 0.15  # share of the way to the torso centre where depth is sampled (not on the silhouette's edge)
BODY = (0, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)  # nose, arms, hips, legs


@dataclass(frozen=True)
class PersonDetection:
    """``keypoints`` (33, 2) pixels, ``visibility`` (33,) in [0, 1], ``box`` (x0, y0, x1, y1) pixels,
    ``world`` (33, 3) metres around the hip centre (BlazePose's landmark order and frame)."""

    keypoints: np.ndarray
    visibility: np.ndarray
    box: tuple[float, float, float, float]
    world: np.ndarray


class PersonDetector(Protocol):
    """A frozen single-person pose model: the most prominent person in an RGB image, or None."""

    def detect(self, rgb: np.ndarray) -> PersonDetection | None:
        """``rgb`` (H, W, 3) uint8; pixel outputs are in that image."""

    def close(self) -> None:
        """Release the model."""


#: Person detectors by name (``blazepose`` is registered by ``affectsim_perception``).
DETECTORS: Registry[PersonDetector] = Registry("person detector", name_attr="name")


@dataclass(frozen=True)
class Person:
    """A detected person: floor position ``xy`` (m, map), ``distance`` (m, horizontal from the camera),
    ``bearing`` (rad, + left of the optical axis), ``n_visible`` body keypoints with visibility > 0.5,
    median ``top`` / ``bottom`` clothing RGB in [0, 1], and the detection."""

    xy: tuple[float, float]
    distance: float
    bearing: float
    n_visible: int
    top: tuple[float, float, float]
    bottom: tuple[float, float, float]
    detection: PersonDetection


def _region_colour(rgb: np.ndarray, kp: np.ndarray, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[float, float, float]:
    """Median colour of pixels on the segments between keypoint groups ``a`` and ``b`` (their means)."""
    h, w = rgb.shape[:2]
    p, q = kp[list(a)].mean(0), kp[list(b)].mean(0)
    t = np.linspace(0.2, 0.8, 9)
    pts = p[None] + t[:, None] * (q - p)[None]
    u = np.clip(pts[:, 0].round().astype(int), 0, w - 1)
    v = np.clip(pts[:, 1].round().astype(int), 0, h - 1)
    return tuple(float(c) for c in np.median(rgb[v, u].astype(float) / 255.0, axis=0))


def locate(det: PersonDetection, obs: Observation) -> Person | None:
    """Position the detection with the registered depth image; None if no torso point has depth."""
    kp, vis = det.keypoints, det.visibility
    sel = [k for k in TORSO if vis[k] > 0.5]
    if not sel:
        return None
    # torso keypoints and the torso centre; depth is sampled a few pixels inward to avoid the silhouette edge
    pts = np.vstack([kp[sel], kp[list(TORSO)].mean(0, keepdims=True)])
    centre = pts[-1]
    pts = pts + INWARD * (centre - pts)
    world = obs.backproject(pts[:, 0], pts[:, 1])
    world = world[np.isfinite(world).all(axis=1)]
    if len(world) == 0:
        return None
    xy = np.median(world[:, :2], axis=0)
    cam = obs.camera_pose[:3, 3]
    fwd = obs.camera_pose[:3, 2]
    d = xy - cam[:2]
    bearing = math.atan2(d[1], d[0]) - math.atan2(fwd[1], fwd[0])
    bearing = math.atan2(math.sin(bearing), math.cos(bearing))
    top = _region_colour(obs.rgb, kp, (11, 12), (23, 24))
    bottom = _region_colour(obs.rgb, kp, (23, 24), (25, 26))
    return Person((float(xy[0]), float(xy[1])), float(np.linalg.norm(d)), bearing,
                  int((vis[list(BODY)] > 0.5).sum()), top, bottom, det)


def detect_people(detector: PersonDetector, obs: Observation, max_people: int = 1) -> list[Person]:
    """Up to ``max_people`` located people, most prominent first (the detector's order)."""
    rgb = np.array(obs.rgb)
    out: list[Person] = []
    for _ in range(max_people):
        det = detector.detect(rgb)
        if det is None:
            break
        p = locate(det, obs)
        if p is not None:
            out.append(p)
        x0, y0, x1, y1 = det.box
        mx, my = 0.15 * (x1 - x0) + 4, 0.1 * (y1 - y0) + 4
        rgb[max(0, int(y0 - my)):int(y1 + my) + 1, max(0, int(x0 - mx)):int(x1 + mx) + 1] = 128
    return out


def description_colours(description: str) -> tuple[str, str] | None:
    """("red", "navy") from "red top, navy trousers"; None if it names no known colours."""
    words = [w.strip(",.").lower() for w in description.split()]
    named = [w for w in words if w in COLOURS]
    return (named[0], named[1]) if len(named) >= 2 else None


def _chroma(rgb) -> np.ndarray:
    """Brightness-normalised colour: shading changes brightness much more than hue."""
    c = np.asarray(rgb, float) + 0.02
    return np.concatenate([c / c.sum(), [np.log(c.mean())]]) * [1, 1, 1, 0.15]


def clothing_distance(person: Person, description: str) -> float:
    """How far the person's clothing is from the description (0 = identical colours)."""
    names = description_colours(description)
    if names is None:
        return math.inf
    return float(np.linalg.norm(_chroma(person.top) - _chroma(COLOURS[names[0]]))
                 + np.linalg.norm(_chroma(person.bottom) - _chroma(COLOURS[names[1]])))
