"""A minimal TF lookup (tf2_ros is not on PyPI): compose /tf_static and one stamped /tf message."""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from affectsim_core.geometry import Transform, quat_to_matrix


def from_msg(t: TransformStamped) -> Transform:
    q, p = t.transform.rotation, t.transform.translation
    return Transform(quat_to_matrix(np.array([q.w, q.x, q.y, q.z])), np.array([p.x, p.y, p.z]))


def edges(*messages: TFMessage) -> dict[str, tuple[str, Transform]]:
    """child frame -> (parent frame, transform parent <- child); later messages win."""
    out: dict[str, tuple[str, Transform]] = {}
    for msg in messages:
        for t in msg.transforms:
            out[t.child_frame_id] = (t.header.frame_id, from_msg(t))
    return out


def lookup(tree: dict[str, tuple[str, Transform]], target: str, source: str) -> Transform:
    """Pose of ``source`` in ``target`` (``p_target = T @ p_source``) by walking up from ``source``."""
    frame, tf, seen = source, Transform.identity(), [source]
    while frame != target:
        if frame not in tree:
            raise LookupError(f"no TF path from {source!r} to {target!r}: broken at {frame!r} (chain {seen})")
        parent, t = tree[frame]
        tf = t.compose(tf)
        frame = parent
        seen.append(frame)
    return tf
