"""The avatar's skeleton: joints, degrees of freedom, limits, proportions and forward kinematics.

Body frame: x forward (the way the person faces), y left, z up; metres. The root
(``pelvis``) is placed by a position and yaw-pitch-roll; every other joint rotates by
its hinge DoFs applied in the listed order (as MuJoCo composes hinges in one body, and as
BVH channels compose). Axes are chosen so that a DoF means the same on both sides:
``*_flex`` > 0 is anatomical flexion (knee and elbow bend, thigh and arm swing forward,
trunk and head bend forward), ``*_abd`` > 0 moves a limb away from the midline,
``*_rot`` > 0 turns the limb's front toward the midline (internal rotation),
``*_lat`` > 0 bends to the person's left, ``spine_*_rot``/``head_rot`` > 0 turn left.

Segment offsets are fractions of standing height H (Winter's anthropometric ratios:
hip 0.53 H, knee 0.285 H, ankle 0.039 H, shoulder 0.815 H, upper arm 0.186 H,
forearm 0.146 H).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dof:
    name: str
    axis: tuple[float, float, float]
    lo: float  # rad
    hi: float  # rad


@dataclass(frozen=True)
class Joint:
    name: str
    parent: str | None
    offset: tuple[float, float, float]  # in the parent's frame at rest, fraction of height
    dofs: tuple[Dof, ...]


def _d(name: str, axis, lo_deg: float, hi_deg: float) -> Dof:
    return Dof(name, tuple(float(a) for a in axis), math.radians(lo_deg), math.radians(hi_deg))


def _side(s: str, sign: int) -> list[Joint]:
    """Arm and leg joints of one side; ``sign`` +1 left, -1 right (mirror in y)."""
    return [
        Joint(f"shoulder_{s}", "spine_upper", (0.0, sign * 0.105, 0.095),
              (_d(f"shoulder_{s}_flex", (0, -1, 0), -60, 170), _d(f"shoulder_{s}_abd", (sign, 0, 0), -30, 170),
               _d(f"shoulder_{s}_rot", (0, 0, -sign), -90, 90))),
        Joint(f"elbow_{s}", f"shoulder_{s}", (0.0, 0.0, -0.186), (_d(f"elbow_{s}_flex", (0, -1, 0), 0, 150),)),
        Joint(f"wrist_{s}", f"elbow_{s}", (0.0, 0.0, -0.146),
              (_d(f"wrist_{s}_flex", (0, -1, 0), -70, 70), _d(f"wrist_{s}_dev", (sign, 0, 0), -20, 30))),
        Joint(f"hip_{s}", "pelvis", (0.0, sign * 0.052, -0.02),
              (_d(f"hip_{s}_flex", (0, -1, 0), -30, 125), _d(f"hip_{s}_abd", (sign, 0, 0), -30, 45),
               _d(f"hip_{s}_rot", (0, 0, -sign), -45, 45))),
        Joint(f"knee_{s}", f"hip_{s}", (0.0, 0.0, -0.245), (_d(f"knee_{s}_flex", (0, 1, 0), 0, 150),)),
        Joint(f"ankle_{s}", f"knee_{s}", (0.0, 0.0, -0.246),
              (_d(f"ankle_{s}_flex", (0, -1, 0), -50, 30), _d(f"ankle_{s}_inv", (sign, 0, 0), -25, 25))),
    ]


JOINTS: tuple[Joint, ...] = (
    Joint("pelvis", None, (0.0, 0.0, 0.0), ()),
    Joint("spine_lower", "pelvis", (0.0, 0.0, 0.04),
          (_d("spine_lower_flex", (0, 1, 0), -30, 50), _d("spine_lower_lat", (-1, 0, 0), -30, 30),
           _d("spine_lower_rot", (0, 0, 1), -40, 40))),
    Joint("spine_upper", "spine_lower", (0.0, 0.0, 0.13),
          (_d("spine_upper_flex", (0, 1, 0), -30, 45), _d("spine_upper_lat", (-1, 0, 0), -30, 30),
           _d("spine_upper_rot", (0, 0, 1), -40, 40))),
    Joint("neck", "spine_upper", (0.0, 0.0, 0.115),
          (_d("neck_flex", (0, 1, 0), -40, 50), _d("neck_lat", (-1, 0, 0), -35, 35))),
    Joint("head", "neck", (0.01, 0.0, 0.055),
          (_d("head_flex", (0, 1, 0), -40, 40), _d("head_lat", (-1, 0, 0), -30, 30), _d("head_rot", (0, 0, 1), -70, 70))),
    *_side("l", 1),
    *_side("r", -1),
)
JOINT_INDEX = {j.name: i for i, j in enumerate(JOINTS)}
DOFS: tuple[Dof, ...] = tuple(d for j in JOINTS for d in j.dofs)
DOF_INDEX = {d.name: i for i, d in enumerate(DOFS)}
DOF_LO = np.array([d.lo for d in DOFS])
DOF_HI = np.array([d.hi for d in DOFS])
PELVIS_HEIGHT = 0.55  # standing pelvis (root) height, fraction of H
# extra points for validation and features (fraction of H, in the named joint's frame)
SITES = {
    "head_top": ("head", (0.0, 0.0, 0.12)),
    "hand_l": ("wrist_l", (0.0, 0.0, -0.05)), "hand_r": ("wrist_r", (0.0, 0.0, -0.05)),
    "toe_l": ("ankle_l", (0.11, 0.0, -0.03)), "toe_r": ("ankle_r", (0.11, 0.0, -0.03)),
    "heel_l": ("ankle_l", (-0.04, 0.0, -0.035)), "heel_r": ("ankle_r", (-0.04, 0.0, -0.035)),
}
POINTS = tuple([j.name for j in JOINTS] + list(SITES))


def axis_rotations(axis: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations by ``angles`` (...) about unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    c, s = np.cos(angles)[..., None, None], np.sin(angles)[..., None, None]
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]], float)
    return np.eye(3) + s * k + (1 - c) * (k @ k)


def root_rotation(rot: np.ndarray) -> np.ndarray:
    """(..., 3) yaw, pitch, roll -> (..., 3, 3) = Rz(yaw) Ry(pitch) Rx(roll)."""
    return (axis_rotations(np.array([0.0, 0, 1]), rot[..., 0]) @ axis_rotations(np.array([0.0, 1, 0]), rot[..., 1])
            @ axis_rotations(np.array([1.0, 0, 0]), rot[..., 2]))


def forward_kinematics(height: float, root_pos: np.ndarray, root_rot: np.ndarray, dofs: np.ndarray,
                       offsets: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions (T, P, 3) of :data:`POINTS` and rotations (T, J, 3, 3) of :data:`JOINTS`.

    ``root_pos`` (T, 3) m, ``root_rot`` (T, 3) rad (yaw, pitch, roll), ``dofs`` (T, D) rad.
    ``offsets`` overrides joint offsets in metres (e.g. from a performer's body shape).
    """
    root_pos = np.atleast_2d(root_pos)
    T = len(root_pos)
    dofs = np.asarray(dofs, float).reshape(T, len(DOFS))
    rots = np.zeros((T, len(JOINTS), 3, 3))
    pos = np.zeros((T, len(JOINTS), 3))
    k = 0
    for i, j in enumerate(JOINTS):
        if j.parent is None:
            r = root_rotation(np.atleast_2d(root_rot))
            p = root_pos
        else:
            pi = JOINT_INDEX[j.parent]
            off = offsets[j.name] if offsets is not None else np.asarray(j.offset) * height
            p = pos[:, pi] + rots[:, pi] @ off
            r = rots[:, pi]
        for d in j.dofs:
            r = r @ axis_rotations(np.asarray(d.axis), dofs[:, k])
            k += 1
        rots[:, i], pos[:, i] = r, p
    sites = [pos[:, JOINT_INDEX[parent]] + rots[:, JOINT_INDEX[parent]] @ (np.asarray(off) * height)
             for parent, off in SITES.values()]
    return np.concatenate([pos, np.stack(sites, 1)], axis=1), rots
