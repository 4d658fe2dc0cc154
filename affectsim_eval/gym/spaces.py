"""What the Gymnasium environment shows and accepts: its observation and action spaces, fixed limits.

The observation (a ``gymnasium.spaces.Dict``) holds only what the policy interface gives a policy
(:class:`~affectsim_core.observation.Observation` and :class:`~affectsim_core.observation.EpisodeInfo`,
docs/protocol.md §6), plus the frozen person detector's answer, which a policy could compute itself:

=============  =======================================  ===============================================
key            space                                    meaning
=============  =======================================  ===============================================
``rgb``        Box uint8 (H, W, 3)                      head camera, resized bilinearly to ``image_size``
``depth``      Box float32 (H, W), 0..``DEPTH_MAX_M``    registered depth (m, along the optical axis),
                                                        nearest-neighbour resized; 0 where invalid
``pose``       Box float32 (3,)                         ``base_link`` in ``map``: x m, y m, yaw rad
``map``        Box int8 (MAP_CELLS, MAP_CELLS)          static occupancy at ``MAP_RESOLUTION_M``: 0 free,
                                                        100 occupied, -1 unknown (and padding); cell
                                                        (i, j) covers x = origin x + j·res, y = origin
                                                        y + i·res
``map_origin`` Box float32 (2,)                         x, y (m, ``map``) of cell (0, 0)'s corner
``detection``  Box float32 (9,)                         see :func:`detection_features`
``status``     Box float32 (3,), 0..1                   handed off (0/1), share of the acquisition
                                                        budget's actions left, share of the clip collected
=============  =======================================  ===============================================

Actions (``Discrete(5)``): the protocol's primitives by their :class:`~affectsim_core.actions.Action`
values (STOP, FORWARD 0.25 m, TURN_LEFT 15°, TURN_RIGHT 15°) and :data:`HANDOFF`, which declares the
stable handoff and waits one step (STOP).
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces
from PIL import Image

from affectsim_core.actions import Action
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import BODY, Person, PersonDetection, PersonDetector, locate

HANDOFF = len(Action)  # the action after the primitives: declare the stable handoff (and STOP)
N_ACTIONS = HANDOFF + 1
CAMERA_SIZE = (640, 480)  # px (width, height): the Fetch head camera's images (docs/design.md §3)
DEFAULT_IMAGE_SIZE = (160, 120)  # px (width, height) of the observation's rgb and depth
DEPTH_MAX_M = 10.0  # m: depth beyond is clipped to it
MAP_RESOLUTION_M = 0.1  # m per cell of the observation's map
MAP_CELLS = 160  # cells a side: maps up to 16 m x 16 m (the 57 scenes: at most 13 m)
POSE_LIMIT_M = 1000.0  # m: |x|, |y| of the pose and the map origin
DETECTION_SIZE = 9
STATUS_SIZE = 3


def observation_space(image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE) -> spaces.Dict:
    """The environment's observation space for images of ``image_size`` (width, height) px."""
    w, h = image_size
    lim = np.float32(POSE_LIMIT_M)
    return spaces.Dict({
        "rgb": spaces.Box(0, 255, (h, w, 3), np.uint8),
        "depth": spaces.Box(0.0, DEPTH_MAX_M, (h, w), np.float32),
        "pose": spaces.Box(np.array([-lim, -lim, -math.pi], np.float32), np.array([lim, lim, math.pi], np.float32)),
        "map": spaces.Box(-1, 100, (MAP_CELLS, MAP_CELLS), np.int8),
        "map_origin": spaces.Box(-lim, lim, (2,), np.float32),
        "detection": spaces.Box(detection_low(), detection_high(), dtype=np.float32),
        "status": spaces.Box(0.0, 1.0, (STATUS_SIZE,), np.float32),
    })


def action_space() -> spaces.Discrete:
    return spaces.Discrete(N_ACTIONS)


def detection_low() -> np.ndarray:
    return np.array([0, 0, -math.pi, 0, 0, 0, 0, 0, 0], np.float32)


def detection_high() -> np.ndarray:
    return np.array([1, 1, math.pi, DEPTH_MAX_M, 1, 1, 1, 1, 1], np.float32)


def detect_person(detector: PersonDetector | None, obs: Observation) -> tuple[PersonDetection | None, Person | None]:
    """The frozen detector's most prominent person in ``obs`` and where depth locates them (``map``);
    (None, None) without a person or a detector, (detection, None) when depth does not locate them."""
    det = None if detector is None else detector.detect(np.asarray(obs.rgb))
    return det, None if det is None else locate(det, obs)


def detection_features(detector: PersonDetector | None, obs: Observation,
                       detected: tuple[PersonDetection | None, Person | None] | None = None) -> np.ndarray:
    """The frozen detector's most prominent person in ``obs`` as 9 numbers: detected (0/1), located
    by depth (0/1), bearing (rad, + left of the optical axis), horizontal distance from the camera
    (m), box x0, y0, x1, y1 (shares of the image width and height), share of the 13 body keypoints
    visible; zeros where there is no person (or no detector), bearing and distance 0 where not located.
    ``detected``: :func:`detect_person`'s answer for ``obs`` when the caller has it (not detected again)."""
    out = np.zeros(DETECTION_SIZE, np.float32)
    det, person = detect_person(detector, obs) if detected is None else detected
    if det is None:
        return out
    h, w = obs.rgb.shape[:2]
    x0, y0, x1, y1 = det.box
    out[0] = 1.0
    out[4:8] = np.clip([x0 / w, y0 / h, x1 / w, y1 / h], 0.0, 1.0)
    out[8] = float((det.visibility[list(BODY)] > 0.5).mean())
    if person is not None:
        out[1:4] = 1.0, person.bearing, min(person.distance, DEPTH_MAX_M)
    return out


def resize_rgb(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bilinear resize of an (H, W, 3) uint8 image to ``size`` (width, height)."""
    if (rgb.shape[1], rgb.shape[0]) == tuple(size):
        return np.array(rgb)
    return np.asarray(Image.fromarray(np.asarray(rgb)).resize(tuple(size), Image.BILINEAR))


def resize_depth(depth: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of an (H, W) depth image (m) to ``size`` (width, height); invalid (NaN)
    pixels become 0 and depth is clipped to :data:`DEPTH_MAX_M`."""
    h, w = depth.shape
    rows = (np.arange(size[1]) * h // size[1]).astype(int)
    cols = (np.arange(size[0]) * w // size[0]).astype(int)
    d = np.asarray(depth, np.float32)[np.ix_(rows, cols)]
    return np.clip(np.nan_to_num(d, nan=0.0, posinf=DEPTH_MAX_M, neginf=0.0), 0.0, DEPTH_MAX_M).astype(np.float32)


def map_observation(info: EpisodeInfo) -> tuple[np.ndarray, np.ndarray]:
    """The episode's static occupancy (from :class:`EpisodeInfo`, any resolution that divides
    :data:`MAP_RESOLUTION_M`) at :data:`MAP_RESOLUTION_M` (a cell is occupied if any finer cell is,
    else unknown if any is, else free), padded with unknown to :data:`MAP_CELLS` a side, and the
    origin (x, y m); a larger map raises ``ValueError``."""
    k = int(round(MAP_RESOLUTION_M / info.resolution))
    if k < 1 or not math.isclose(k * info.resolution, MAP_RESOLUTION_M):
        raise ValueError(f"resolution={info.resolution!r} is invalid; expected a divisor of {MAP_RESOLUTION_M} m")
    g = info.occupancy
    rows, cols = -(-g.shape[0] // k), -(-g.shape[1] // k)
    if rows > MAP_CELLS or cols > MAP_CELLS:
        raise ValueError(f"map={(rows, cols)!r} cells is invalid; expected at most {MAP_CELLS} x {MAP_CELLS} cells "
                         f"of {MAP_RESOLUTION_M} m (MAP_CELLS)")
    padded = np.full((rows * k, cols * k), -1, np.int8)
    padded[:g.shape[0], :g.shape[1]] = g
    blocks = padded.reshape(rows, k, cols, k)
    coarse = np.where((blocks == 100).any((1, 3)), 100, np.where((blocks == -1).any((1, 3)), -1, 0)).astype(np.int8)
    out = np.full((MAP_CELLS, MAP_CELLS), -1, np.int8)
    out[:rows, :cols] = coarse
    return out, np.array(info.origin, np.float32)
