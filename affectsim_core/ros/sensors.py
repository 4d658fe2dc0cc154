"""The robot's own sensor messages as an :class:`~affectsim_core.observation.Observation`.

One head-camera frame (RGB, registered depth, camera info) with the TF tree of the same instant
(``/tf_static`` and one ``/tf`` message: ``map -> odom -> base_link -> ... -> optical frame``).
The nav node's policies and the perception node's person positions both see the world this way.
"""

from __future__ import annotations

import math

from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from affectsim_core.observation import Observation
from affectsim_core.ros import tf_tree
from affectsim_core.ros.conversions import from_time, image_to_array
from affectsim_core.ros.topics import OPTICAL_FRAME


def observation_from_msgs(rgb: Image, depth: Image, info: CameraInfo, tf_static: TFMessage, tf: TFMessage,
                          step: int) -> Observation:
    """The observation at ``rgb``'s stamp: camera pose and base pose in ``map`` from the TF messages."""
    tree = tf_tree.edges(tf_static, tf)
    cam = tf_tree.lookup(tree, "map", OPTICAL_FRAME)
    base = tf_tree.lookup(tree, "map", "base_link")
    yaw = math.atan2(base.rotation[1, 0], base.rotation[0, 0])
    k = info.k
    return Observation.make(image_to_array(rgb), image_to_array(depth), (k[0], k[4], k[2], k[5]), cam.matrix(),
                            (base.translation[0], base.translation[1], yaw), from_time(rgb.header.stamp), step)
