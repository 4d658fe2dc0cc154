"""The robot's own sensor messages as an :class:`~affectsim_core.observation.Observation`.

One head-camera frame (RGB, registered depth, camera info) with the camera's and the base's poses
in ``map`` at the frame's stamp, looked up in a :class:`~affectsim_core.tf_buffer.TfBuffer`
(``map -> odom -> base_link -> ... -> optical frame``, interpolated between stamps).
The nav node's policies and the perception node's person positions both see the world this way.
Both depth encodings of REP-118 are accepted: ``32FC1`` metres (the simulator, the Fetch's
``/head_camera/depth/image``) and ``16UC1`` millimetres (the Fetch's ``.../image_raw``; 0 = no
return); colour as ``rgb8`` or ``bgr8``. Any other encoding is refused, naming it.
"""

from __future__ import annotations

import math

from sensor_msgs.msg import CameraInfo, Image
import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.observation import Observation
from affectsim_core.ros.conversions import from_time, image_to_array
from affectsim_core.ros.topics import OPTICAL_FRAME
from affectsim_core.tf_buffer import TfBuffer


def observation_from_msgs(rgb: Image, depth: Image, info: CameraInfo, tf: TfBuffer, step: int,
                          timeout: float = 0.0) -> Observation:
    """The observation at ``rgb``'s stamp: camera pose and base pose in ``map`` from ``tf`` (waiting up
    to ``timeout`` s for transforms at that stamp; TransformError names a broken edge)."""
    t = from_time(rgb.header.stamp)
    cam = tf.lookup("map", OPTICAL_FRAME, t, timeout)
    base = tf.lookup("map", "base_link", t, timeout)
    yaw = math.atan2(base.rotation[1, 0], base.rotation[0, 0])
    k = info.k
    return Observation.make(rgb_array(rgb), depth_metres(depth), (k[0], k[4], k[2], k[5]), cam.matrix(),
                            (base.translation[0], base.translation[1], yaw), t, step)


DEPTH_ENCODINGS = ("32FC1", "16UC1")
RGB_ENCODINGS = ("rgb8", "bgr8")


def depth_metres(msg: Image) -> np.ndarray:
    """(H, W) float32 depth in metres, NaN where the sensor has no return (REP-118)."""
    if msg.encoding not in DEPTH_ENCODINGS:
        raise InvalidInput("depth encoding", msg.encoding, f"one of {DEPTH_ENCODINGS} (REP-118)")
    arr = image_to_array(msg)
    if msg.encoding == "32FC1":
        return arr
    out = arr.astype(np.float32) / 1000.0
    out[arr == 0] = np.nan
    return out


def rgb_array(msg: Image) -> np.ndarray:
    """(H, W, 3) uint8 RGB from an ``rgb8`` or ``bgr8`` image."""
    if msg.encoding not in RGB_ENCODINGS:
        raise InvalidInput("colour encoding", msg.encoding, f"one of {RGB_ENCODINGS}")
    arr = image_to_array(msg)
    return arr if msg.encoding == "rgb8" else arr[..., ::-1]
