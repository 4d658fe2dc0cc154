"""MuJoCo backend (default): the scene compiled to MJCF, the Fetch from its real meshes, EGL rendering.

The robot is posed kinematically (``mj_kinematics``), never integrated by the physics
engine, so the same actions give the same poses and images bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from affectsim_bridge.backends.mujoco import fetch_model
from affectsim_bridge.backends.base import RGBD, LaserSpec, RobotConfig, SimulatorBackend
from affectsim_bridge.humans.body import BodyShape, geom_layout
from affectsim_bridge.humans.skeleton import DOFS, JOINTS, root_rotation
from affectsim_bridge.backends.mujoco.mjcf_builder import HUMAN_SLOTS, PARK_Z, build_mjcf
from affectsim_bridge.backends.mujoco.renderer import RGBDRenderer, mujoco
from affectsim_bridge.world.scene import Scene
from affectsim_core.camera import FETCH_HEAD_CAMERA, CameraIntrinsics
from affectsim_core.geometry import Transform, matrix_to_quat

OCCLUSION_TOLERANCE_M = 0.03  # a ray stopping this close before its point does not occlude it


class MujocoBackend(SimulatorBackend):
    """Default backend. ``head`` sets the head camera intrinsics (default: Fetch 640x480, vfov 46.8 deg)."""

    def __init__(self, robot: RobotConfig | None = None, head: CameraIntrinsics | None = None,
                 max_depth: float = 10.0) -> None:
        super().__init__(robot)
        self._head = (head or FETCH_HEAD_CAMERA).validate("head_camera")
        self.max_depth = max_depth
        self.model: mujoco.MjModel | None = None
        self.data: mujoco.MjData | None = None
        self._renderers: dict[tuple[int, int], RGBDRenderer] = {}

    @property
    def head_intrinsics(self) -> CameraIntrinsics:
        return self._head

    # ------------------------------------------------------------------ loading
    def _load_scene(self, scene: Scene) -> None:
        self.close()
        w = max(1280, self._head.width)
        h = max(960, self._head.height)
        self.model = mujoco.MjModel.from_xml_string(build_mjcf(scene, w, h))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self._qadr = {name: m.jnt_qposadr[m.joint(name).id] for name in
                      ("base_x", "base_y", "base_yaw", "robot0:torso_lift_joint", "robot0:head_pan_joint",
                       "robot0:head_tilt_joint")}
        for joint, value in fetch_model.TUCK.items():
            self.data.qpos[m.jnt_qposadr[m.joint(f"robot0:{joint}").id]] = value
        self._head_cam = m.camera("head_camera_rgb").id
        self._viewer_cam = m.camera("viewer").id
        self._viewer_mocap = m.body_mocapid[m.body("viewer_cam").id]
        self._slots = [_AvatarSlot(m, k) for k in range(HUMAN_SLOTS)]
        self._link_body = {name: m.body(f"robot0:{name}").id for name in ["base_link", *fetch_model.TF_TREE]}
        self._laser_body = self._link_body["laser_link"]
        self._set_intrinsics(self._head_cam, self._head)
        self._opt = mujoco.MjvOption()
        self._opt.geomgroup[:] = [1, 1, 1, 0, 1, 0]
        self._opt_top = mujoco.MjvOption()
        self._opt_top.geomgroup[:] = [1, 1, 1, 0, 0, 0]
        self._laser_groups = np.array([1, 1, 0, 0, 0, 0], np.uint8)
        self._static_groups = np.array([1, 0, 0, 0, 0, 0], np.uint8)  # scene geometry only: people, robot excluded

    def _set_intrinsics(self, cam_id: int, k: CameraIntrinsics) -> None:
        """Pinhole intrinsics through MuJoCo's sensor model (sensor size in pixels, principal offset)."""
        m = self.model
        m.cam_resolution[cam_id] = (k.width, k.height)
        m.cam_sensorsize[cam_id] = (k.width, k.height)
        # MuJoCo's principal offset shifts the frustum, so the image moves the opposite way: an
        # offset of (centre - c) puts the principal point at pixel c (ROS: pixel centres at integers)
        m.cam_intrinsic[cam_id] = (k.fx, k.fy, (k.width - 1) / 2.0 - k.cx, (k.height - 1) / 2.0 - k.cy)
        m.cam_fovy[cam_id] = math.degrees(2 * math.atan(k.height / 2.0 / k.fy))

    def _sync(self) -> None:
        d, q = self.data, self._qadr
        d.qpos[q["base_x"]] = self.pose.x
        d.qpos[q["base_y"]] = self.pose.y
        d.qpos[q["base_yaw"]] = self.pose.yaw
        # joint angles are relative to the URDF zero; MuJoCo's qpos0 holds each joint's ``ref``
        q0 = self.model.qpos0
        for joint, value in (("robot0:torso_lift_joint", self.robot.torso_lift),
                             ("robot0:head_pan_joint", self.robot.head_pan),
                             ("robot0:head_tilt_joint", self.robot.head_tilt)):
            d.qpos[q[joint]] = value + (q0[q[joint]] if joint.endswith("tilt_joint") else 0.0)
        for k, slot in enumerate(self._slots):
            if k < len(self.humans):
                h = self.humans[k]
                slot.shape(self.model, h.body_shape())
                slot.pose(d, *self.human_pose(k))
            else:
                slot.park(d)
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_camlight(self.model, d)

    def human_points(self, k: int) -> np.ndarray:
        """World positions (m, map) of person ``k``'s skeleton joints, in :data:`skeleton.JOINTS` order."""
        return self.data.xpos[self._slots[k].bodies].copy()

    # ------------------------------------------------------------------ sensors
    def _renderer(self, width: int, height: int) -> RGBDRenderer:
        key = (width, height)
        if key not in self._renderers:
            self._renderers[key] = RGBDRenderer(self.model, width, height)
        return self._renderers[key]

    def render_head_camera(self) -> RGBD:
        self._require_loaded()
        k = self._head
        rgb, depth = self._renderer(k.width, k.height).render(self.data, self._head_cam, self._opt, self.max_depth)
        return RGBD(rgb, depth, k, self.head_camera_pose())

    def render_camera(self, pose: Transform, intrinsics: CameraIntrinsics, top_down: bool = False) -> RGBD:
        self._require_loaded()
        intrinsics.validate("camera")
        d = self.data
        d.mocap_pos[self._viewer_mocap] = pose.translation
        d.mocap_quat[self._viewer_mocap] = pose.quat
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_camlight(self.model, d)
        self._set_intrinsics(self._viewer_cam, intrinsics)
        opt = self._opt_top if top_down else self._opt
        rgb, depth = self._renderer(intrinsics.width, intrinsics.height).render(d, self._viewer_cam, opt, np.inf)
        return RGBD(rgb, depth, intrinsics, pose)

    def laser_scan(self, spec: LaserSpec) -> np.ndarray:
        self._require_loaded()
        d = self.data
        b = self._laser_body
        rot = d.xmat[b].reshape(3, 3)
        angles = spec.angle_min + np.arange(spec.count) * spec.angle_increment
        local = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], 1)
        vec = (local @ rot.T).ravel()
        n = spec.count
        dist = np.empty(n)
        geomid = np.empty(n, np.int32)
        mujoco.mj_multiRay(self.model, d, d.xpos[b].copy(), vec, self._laser_groups, 1, -1, geomid, dist, None, n,
                           spec.range_max)
        dist[(dist < 0) | (dist > spec.range_max)] = np.inf
        dist[dist < spec.range_min] = -np.inf
        return dist

    def line_of_sight(self, origin: np.ndarray, points: np.ndarray) -> np.ndarray:
        self._require_loaded()
        pts = np.asarray(points, float).reshape(-1, 3)
        v = pts - origin
        dist = np.linalg.norm(v, axis=1)
        n = len(pts)
        hit, gid = np.empty(n), np.empty(n, np.int32)
        mujoco.mj_multiRay(self.model, self.data, np.asarray(origin, float), (v / dist[:, None]).ravel(),
                           self._static_groups, 1, -1, gid, hit, None, n, float(dist.max()) + 1.0)
        return (hit < 0) | (hit >= dist - OCCLUSION_TOLERANCE_M)

    def link_transforms(self) -> dict[str, Transform]:
        self._require_loaded()
        d = self.data
        base = self._link_body["base_link"]
        world_base = Transform(d.xmat[base].reshape(3, 3).copy(), d.xpos[base].copy())
        inv = world_base.inverse()
        return {name: inv.compose(Transform(d.xmat[b].reshape(3, 3).copy(), d.xpos[b].copy()))
                for name, b in self._link_body.items() if name != "base_link"}

    def head_camera_pose(self) -> Transform:
        d, c = self.data, self._head_cam
        # MuJoCo camera frame (looks along -z, y up) -> ROS optical frame (z forward, y down)
        return Transform(d.cam_xmat[c].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0]), d.cam_xpos[c].copy())

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()


class _AvatarSlot:
    """Addresses of one person slot in the compiled model; reshapes and poses it in place."""

    HIDDEN_GROUP = 5  # not rendered, not hit by the laser

    def __init__(self, m: mujoco.MjModel, k: int) -> None:
        self.root_qadr = m.jnt_qposadr[m.joint(f"human{k}_root").id]
        self.dof_qadr = np.array([m.jnt_qposadr[m.joint(f"human{k}_{d.name}").id] for d in DOFS])
        self.bodies = np.array([m.body(f"human{k}_{j.name}").id for j in JOINTS])
        self.geoms = [m.geom(f"human{k}_{g.name}").id for g in geom_layout(BodyShape())]
        self.current: BodyShape | None = None

    def shape(self, m: mujoco.MjModel, body: BodyShape) -> None:
        """Write a performer's proportions and colours into the model (skipped if unchanged)."""
        if body == self.current:
            return
        offsets = body.joint_offsets()
        for j, bid in zip(JOINTS, self.bodies):
            if j.parent is not None:
                m.body_pos[bid] = offsets[j.name]
        colors = body.colors()
        for gid, spec in zip(self.geoms, geom_layout(body)):
            m.geom_pos[gid] = spec.pos
            m.geom_quat[gid] = spec.quat
            m.geom_size[gid] = [v if v > 0 else 0.001 for v in spec.size]
            if spec.role == "hidden":
                m.geom_group[gid] = self.HIDDEN_GROUP
            else:
                m.geom_group[gid] = 1
                m.geom_rgba[gid] = (*colors[spec.role], 1.0)
        self.current = body

    def pose(self, d: mujoco.MjData, root_pos: np.ndarray, root_rot: np.ndarray, dofs: np.ndarray) -> None:
        d.qpos[self.root_qadr:self.root_qadr + 3] = root_pos
        d.qpos[self.root_qadr + 3:self.root_qadr + 7] = matrix_to_quat(root_rotation(np.asarray(root_rot)))
        d.qpos[self.dof_qadr] = dofs

    def park(self, d: mujoco.MjData) -> None:
        d.qpos[self.root_qadr:self.root_qadr + 7] = (0.0, 0.0, PARK_Z, 1.0, 0.0, 0.0, 0.0)

