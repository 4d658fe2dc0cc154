"""``tf2_msgs/TFMessage`` into a :class:`~affectsim_core.tf_buffer.TfBuffer` (tf2_ros is not on PyPI).

``/tf_static`` is subscribed transient-local with a deep history, so the latched message of every
publisher arrives (robot_state_publisher, the camera driver, the laser driver each latch their own
frames) and each child frame is kept, whoever sent it.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage

from affectsim_core.geometry import Transform, quat_to_matrix
from affectsim_core.ros.conversions import from_time
from affectsim_core.tf_buffer import TfBuffer

TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)  # tf2_ros' listener QoS
TF_STATIC_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)


def from_msg(t: TransformStamped) -> Transform:
    """``parent <- child`` of one stamped transform (a quaternion off unit length is normalised; one
    within 1e-6 of it is used as sent, so a simulator's transforms give bit-identical results)."""
    q, p = t.transform.rotation, t.transform.translation
    quat = np.array([q.w, q.x, q.y, q.z])
    n = float(np.linalg.norm(quat))
    if not n > 0.5:  # NaN too
        raise ValueError(f"transform {t.header.frame_id} -> {t.child_frame_id}: quaternion of norm {n:.3g}; "
                         "expected a unit quaternion")
    if abs(n - 1.0) > 1e-6:
        quat = quat / n
    return Transform(quat_to_matrix(quat), np.array([p.x, p.y, p.z]))


def feed(buffer: TfBuffer, msg: TFMessage, static: bool, now: float | None = None) -> list[str]:
    """Store every transform of ``msg``; returns the reasons of those refused (see ``set_transform``)."""
    refused = []
    for t in msg.transforms:
        try:
            tf = from_msg(t)
        except ValueError as exc:
            refused.append(str(exc))
            continue
        if not buffer.set_transform(t.header.frame_id, t.child_frame_id, from_time(t.header.stamp), tf,
                                    static=static, now=now):
            refused.append(buffer.last_refusal)
    return refused


def buffer_of(tf_static: TFMessage | None, *tf: TFMessage) -> TfBuffer:
    """A buffer holding ``tf_static`` and the ``tf`` messages (scripts and tests)."""
    buffer = TfBuffer()
    if tf_static is not None:
        feed(buffer, tf_static, static=True)
    for m in tf:
        feed(buffer, m, static=False)
    return buffer
