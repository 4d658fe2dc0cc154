import math

import numpy as np
import pytest
from helpers import box_room

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.humans.body import BodyShape, geom_layout
from affectsim_bridge.humans.motion import Motion, load_motion, loop_error, save_motion
from affectsim_bridge.humans.skeleton import DOF_HI, DOF_LO, DOFS, JOINTS, forward_kinematics
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D


def test_skeleton_has_the_required_degrees_of_freedom():
    names = {d.name for d in DOFS}
    assert len(DOFS) >= 24
    for joint in ("shoulder_l", "shoulder_r", "hip_l", "hip_r"):
        assert sum(n.startswith(joint) for n in names) == 3
    assert {"spine_lower", "spine_upper", "neck", "head"} <= {j.name for j in JOINTS}
    for j in ("elbow", "wrist", "knee", "ankle"):
        assert any(n.startswith(f"{j}_l") for n in names) and any(n.startswith(f"{j}_r") for n in names)


@pytest.mark.parametrize("height", [1.5, 1.72, 1.95])
def test_rest_pose_proportions_scale_with_height(height):
    from affectsim_bridge.humans.skeleton import PELVIS_HEIGHT, POINTS

    pts, _ = forward_kinematics(height, np.array([[0, 0, PELVIS_HEIGHT * height]]), np.zeros((1, 3)),
                                np.zeros((1, len(DOFS))))
    p = dict(zip(POINTS, pts[0]))
    assert p["head_top"][2] == pytest.approx(height, rel=0.03)
    assert p["ankle_l"][2] == pytest.approx(0.039 * height, abs=0.01)
    assert p["shoulder_l"][2] == pytest.approx(0.815 * height, rel=0.01)
    assert p["shoulder_l"][1] > 0 > p["shoulder_r"][1]


def _random_motion(seed=0, frames=40):
    rng = np.random.default_rng(seed)
    q = rng.uniform(DOF_LO, DOF_HI, size=(frames, len(DOFS))) * 0.5
    pos = np.c_[rng.normal(size=(frames, 2)) * 0.2, np.full(frames, 0.95)]
    rot = np.c_[rng.uniform(-math.pi, math.pi, frames), rng.normal(size=(frames, 2)) * 0.1]
    return Motion("m0", "happy", "standing", "p01", 1, 30.0, pos, rot, q, BodyShape(height=1.8, build=1.1))


def test_mujoco_avatar_matches_numpy_kinematics():
    m = _random_motion()
    b = BACKENDS.create("mujoco")
    at = np.array([4.0, 3.0, 0.0])  # a placement that only translates the motion, into the room
    b.load(box_room(w=8, h=6), Pose2D(7.0, 1.0, 0.0), (HumanPlacement("p", at[0], at[1], 0.0, motion=m),))
    for frame in (0, 7, 23):
        b.sim_time = frame / m.fps
        b._sync()
        pts, _ = forward_kinematics(m.body.height, m.root_pos[frame:frame + 1] + at, m.root_rot[frame:frame + 1],
                                    m.dofs[frame:frame + 1], m.body.joint_offsets())
        assert np.allclose(b.human_points(0), pts[0, :len(JOINTS)], atol=1e-5)
    b.close()


def test_body_layout_is_stable_across_shapes():
    a, b = geom_layout(BodyShape()), geom_layout(BodyShape(height=1.9, hair_style="bun", long_sleeves=True))
    assert [(g.name, g.type, g.body) for g in a] == [(g.name, g.type, g.body) for g in b]
    with pytest.raises(ValueError, match="body.height"):
        BodyShape(height=2.4).validate()


def test_motion_roundtrip_and_bad_files(tmp_path):
    m = _random_motion()
    save_motion(m, tmp_path / "m.npz")
    back = load_motion(tmp_path / "m.npz")
    assert back.meta() == m.meta()
    assert np.allclose(back.dofs, m.dofs, atol=1e-6)
    raw = (tmp_path / "m.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InvalidInput, match="cut.npz"):
        load_motion(tmp_path / "cut.npz")
    bad = _random_motion()
    bad.emotion = "bored"
    with pytest.raises(InvalidInput, match="emotion='bored'"):
        save_motion(bad, tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists() and not list(tmp_path.glob("*.tmp"))


def test_cyclic_sampling_wraps_continuously():
    T, fps = 60, 30.0
    ph = 2 * math.pi * np.arange(T) / T
    q = np.zeros((T, len(DOFS)))
    q[:, 0] = 0.3 * np.sin(ph)
    pos = np.c_[np.cos(ph), np.sin(ph), np.full(T, 0.9)]
    m = Motion("c", "sad", "walk", "p", 1, fps, pos, np.c_[ph + math.pi / 2, np.zeros((T, 2))], q)
    ts = np.linspace(-3, 7, 2001)
    p, r, d = m.sample(ts)
    for series in (d[:, 0], p[:, 0], p[:, 1]):  # no jump at any wrap: steps stay at the smooth size
        steps = np.abs(np.diff(series))
        assert steps.max() < 1e-3 + 1.6 * np.median(steps)
    assert np.allclose(m.sample(0.5)[2], m.sample(0.5 + m.duration)[2])
    pose_jump, vel_jump = loop_error(m)
    assert pose_jump < 1.5 and vel_jump < 1.5
    m.dofs[:, 0] = np.linspace(0, 1, T)  # a ramp is not a loop: the wrap jumps
    assert loop_error(m)[0] > 10
