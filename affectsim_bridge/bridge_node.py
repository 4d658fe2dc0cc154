"""Bridge node: publishes the simulated Fetch's sensors on the real Fetch topic names (docs/design.md §3).

Topics out: /head_camera/rgb/{image_raw,camera_info}, /head_camera/depth_registered/{image_raw,camera_info}
(32FC1 metres, registered to RGB), /base_scan, /odom, /tf, /tf_static, /map (transient local),
/clock (sim time; every message is stamped with it), /affectsim/ground_truth/{robot_pose,humans}.
Topics in (free-running mode): /cmd_vel, and /head_controller/joint_trajectory (trajectory_msgs/JointTrajectory,
head_pan_joint and head_tilt_joint: the head moves at 1.57 rad/s toward the last point's positions; lockstep
points the head with each /affectsim/apply_action instead). Services: /affectsim/load_world,
/affectsim/apply_action.

Modes: ``lockstep`` (each discrete action advances sim time 0.25 s, then one set of sensor
messages is published) and ``free_run`` (sim time advances in ``sim_dt`` ticks paced to
``real_time_factor``; camera and laser publish at their rates in sim time).

Noise (:mod:`affectsim_bridge.world.noise`, parameters ``noise_*``, all off by default, reseeded by every
load_world with its ``noise_seed``): depth and RGB noise on the published head-camera images, laser noise
on /base_scan, odometry drift on /odom and the odom -> base_link TF (map -> odom stays the start pose, so
map -> base_link carries the drift, like a robot whose localisation is off), actuation noise on each
lockstep action's realised motion, camera latency (free_run only: a frame captured at t is published at
t + latency, stamped t). Ground truth (/affectsim/ground_truth/*, the apply_action reply's pose) and
RenderViews stay noise-free.
All simulator work runs on one :class:`SimulatorThread` (EGL renderers are thread-bound).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Callable

import numpy as np
from geometry_msgs.msg import PoseArray, PoseStamped, Twist
from nav_msgs.msg import OccupancyGrid, Odometry
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, LaserScan
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory

from affectsim_bridge.backends.mujoco import fetch_model
from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.backends.base import HumanPlacement, LaserSpec, RobotConfig, check_head
from affectsim_bridge.content.library import DEFAULT_DIR, Library
from affectsim_bridge.world.noise import SEED_KEY, NoiseSet, config_params
from affectsim_bridge.world.scene import load_scene
from affectsim_bridge.views import View, render_views
from affectsim_bridge.simulator_thread import SimulatorThread
from affectsim_core.actions import Action
from affectsim_core.camera import FETCH_HEAD_HEIGHT, FETCH_HEAD_VFOV_DEG, FETCH_HEAD_WIDTH, CameraIntrinsics
from affectsim_core.episode import MAX_HUMANS
from affectsim_core.errors import AffectSimError, InvalidInput
from affectsim_core.geometry import Pose2D, Transform
from affectsim_core.names import check_name
from affectsim_core.protocol import FORWARD_M, HEAD_PAN_LIMITS, HEAD_TILT_LIMITS, MODES, STEP_SECONDS, TURN_RAD
from affectsim_core.ros import conversions as cv
from affectsim_core.ros.node_main import side_node
from affectsim_core.ros.params import Param, declare_params
from affectsim_core.ros.topics import HEAD_JOINTS, OPTICAL_FRAME, SERVICES, TOPICS
from affectsim_interfaces.msg import HumanReactions
from affectsim_interfaces.srv import ApplyAction, LoadWorld, RenderViews

MAP_RESOLUTION = 0.05
ACK_TIMEOUT_S = 2.0  # s load_world waits, in all, for its subscribers to acknowledge the new world's messages

CAMERA_MAX_PX = 1280  # head camera width and height limit (the model's offscreen buffer)
MAX_VIEWS = 512  # views of one RenderViews request
VFOV_BOUNDS = (math.radians(10.0), math.radians(150.0))  # rad, an explicit camera's field of view (scene files: the same)
MAX_VIEW_SIZE = 4096  # px, side of RenderViews' resized frames
RENDER_BUDGET_BYTES = 256 * 2 ** 20  # frames of one RenderViews reply (views x width x height x 3)
ANSWERED_KEEP = 32  # recent replies kept per service for repeated request ids
MAX_TRAJECTORY_POINTS = 100  # points of one head command (only the last one's positions are used)

NOISE_PARAMS: tuple[Param, ...] = (  # derived from the noise-model registry (affectsim_bridge.world.noise)
    Param(SEED_KEY, 0, "noise seed of the start scene (load_world requests carry their own noise_seed)",
          bounds=(0, 2 ** 32 - 1)),
    *(Param(key, default, description, bounds=bounds) for key, default, bounds, description in config_params()),
)
NOISE_FREE_RUN_ONLY = ("latency",)  # streams; lockstep publishes the frame of each action's end: no delay to model
NOISE_LOCKSTEP_ONLY = ("actuation",)  # streams; free_run moves by /cmd_vel, which the nav node closes on /odom

PARAMS: tuple[Param, ...] = (
    Param("backend", DEFAULT_BACKEND, "simulator backend", choices=BACKENDS.names),
    Param("scene", "test_apartment", "scene loaded at start: built-in id or scene file path",
          check=bool, expected="a scene id or file"),
    Param("robot_x", 1.0, "initial robot x in map (m)", bounds=(-1e4, 1e4)),
    Param("robot_y", 2.5, "initial robot y in map (m)", bounds=(-1e4, 1e4)),
    Param("robot_yaw", 0.0, "initial robot yaw in map (rad)", bounds=(-4 * math.pi, 4 * math.pi)),
    Param("mode", "lockstep", "lockstep (discrete actions via /affectsim/apply_action) or free_run (/cmd_vel)",
          choices=MODES),
    Param("real_time_factor", 1.0, "free_run: sim seconds per wall second", bounds=(0.1, 10.0)),
    Param("sim_dt", 1.0 / 60.0, "free_run: sim seconds per tick", bounds=(0.001, 0.1)),
    Param("camera_rate_hz", 15.0, "free_run: head camera rate in sim time (Fetch: 15 Hz)", bounds=(0.5, 60.0)),
    Param("scan_rate_hz", 15.0, "free_run: base laser rate in sim time (Fetch: 15 Hz)", bounds=(0.5, 60.0)),
    Param("odom_rate_hz", 50.0, "free_run: odometry and TF rate in sim time", bounds=(1.0, 200.0)),
    Param("camera_width", FETCH_HEAD_WIDTH, "head camera width (px)", bounds=(16, CAMERA_MAX_PX)),
    Param("camera_height", FETCH_HEAD_HEIGHT, "head camera height (px)", bounds=(16, CAMERA_MAX_PX)),
    Param("camera_vfov_deg", FETCH_HEAD_VFOV_DEG, "head camera vertical field of view (deg); fx = fy",
          bounds=(10.0, 150.0)),
    Param("max_depth_m", 10.0, "depth beyond this is NaN (m)", bounds=(0.5, 100.0)),
    Param("head_tilt", 0.0, "head tilt (rad, + looks down), Fetch limits", bounds=HEAD_TILT_LIMITS),
    Param("head_pan", 0.0, "head pan (rad, + looks left), Fetch limits", bounds=HEAD_PAN_LIMITS),
    Param("torso_lift", 0.0386, "torso lift (m), Fetch limits", bounds=(0.0386, 0.3861)),
    Param("robot_radius", 0.3, "base footprint radius for navigable space (m)", bounds=(0.05, 1.0)),
    Param("cmd_vel_timeout", 0.5, "free_run: stop when no /cmd_vel for this long (sim s)", bounds=(0.05, 10.0)),
    Param("publish_ground_truth", True, "publish privileged /affectsim/ground_truth/* topics"),
    Param("motion_library", "", "motion library directory for people's motion_id (empty: data/motions of the source tree)"),
    *NOISE_PARAMS,
)


def noise_set(p: dict[str, object]) -> NoiseSet:
    """The noise models the parameters ``p`` enable; :class:`InvalidInput` naming the parameter when one is
    out of range or a model is enabled in a mode it does not apply to."""
    noise = NoiseSet.from_config(p, seed=int(p[SEED_KEY]))
    mode = p["mode"]
    for streams, needs in ((NOISE_FREE_RUN_ONLY, "free_run"), (NOISE_LOCKSTEP_ONLY, "lockstep")):
        for model in (m for stream in streams for m in noise.streams.get(stream, ())):
            if mode != needs:
                raise InvalidInput(f"parameter noise_{model.name}_enabled", True,
                                   f"false with mode={mode} (the {model.name} noise model applies in mode {needs} "
                                   "only; docs/noise.md)", where="bridge")
    return noise


def node_params() -> tuple[Param, ...]:
    """:data:`PARAMS` and the parameters of noise models registered after this module was imported (users'
    plugins, imported by the node executable before it creates the node)."""
    known = {p.name for p in PARAMS}
    return PARAMS + tuple(Param(key, default, description, bounds=bounds)
                          for key, default, bounds, description in config_params() if key not in known)


def head_goal(names: list[str], last: list[list[float]], n_points: int) -> tuple[float | None, float | None]:
    """(pan, tilt) rad of a head command: joint ``names`` (a subset of :data:`HEAD_JOINTS`, each once), the
    last point's positions ``last`` ([positions] or []) of ``n_points``; raises :class:`InvalidInput`
    naming the field."""
    if not 1 <= n_points <= MAX_TRAJECTORY_POINTS:
        raise InvalidInput("points", n_points, f"1..{MAX_TRAJECTORY_POINTS} trajectory points")
    if not names or len(set(names)) != len(names) or not set(names) <= set(HEAD_JOINTS):
        raise InvalidInput("joint_names", names, f"distinct names among {list(HEAD_JOINTS)}")
    if len(last[0]) != len(names):
        raise InvalidInput("points[-1].positions", last[0], f"{len(names)} positions, one per joint name")
    by_joint = dict(zip(names, last[0]))
    pan, tilt = (by_joint.get(j) for j in HEAD_JOINTS)
    return (None if pan is None else check_head("head_pan", pan),
            None if tilt is None else check_head("head_tilt", tilt))


class BridgeNode(Node):
    """Thin adapter from a :class:`SimulatorBackend` to the ROS interface contract."""

    def __init__(self) -> None:
        super().__init__("bridge")
        self.p = declare_params(self, node_params())
        self.noise = noise_set(self.p)  # before the simulator starts: a bad noise parameter stops the node now
        k = CameraIntrinsics.from_vfov(self.p["camera_width"], self.p["camera_height"],
                                       math.radians(self.p["camera_vfov_deg"]))
        robot = RobotConfig(radius=self.p["robot_radius"], torso_lift=self.p["torso_lift"],
                            head_pan=self.p["head_pan"], head_tilt=self.p["head_tilt"])
        self._resetting: str | None = None
        self._state_lock = threading.Lock()
        self._cmd = (0.0, 0.0, -math.inf)  # linear, angular, sim time received
        self._head_cmd: tuple[float | None, float | None] | None = None  # (pan, tilt) rad not yet applied
        self._map_odom = Transform.identity()
        self._map_msg: tuple[object, OccupancyGrid] | None = None  # (scene, map) published for it
        self._last_twist = (0.0, 0.0)
        self._answered: dict[str, OrderedDict] = {"load_world": OrderedDict(), "apply_action": OrderedDict()}
        self.calls: Counter = Counter()  # requests per service, logged at shutdown (a robot stand-in makes none)

        self.sim = SimulatorThread()
        try:
            self._start(robot, k)
        except BaseException:
            self.destroy_node()  # the simulator thread (EGL) must not outlive a failed start
            raise

    def _start(self, robot: RobotConfig, k: CameraIntrinsics) -> None:
        """Backend, publishers and services, and the start scene loaded (on the simulator thread)."""
        self.backend = self.sim.call(lambda: BACKENDS.create(self.p["backend"], robot=robot, head=k,
                                                              max_depth=self.p["max_depth_m"]))
        self.laser = LaserSpec()

        rel = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        kinds = {"rgb": (Image, rel), "rgb_info": (CameraInfo, rel), "depth": (Image, rel),
                 "depth_info": (CameraInfo, rel), "scan": (LaserScan, rel), "odom": (Odometry, QoSProfile(depth=10)),
                 "tf": (TFMessage, QoSProfile(depth=100)), "tf_static": (TFMessage, latched),
                 "map": (OccupancyGrid, latched), "clock": (Clock, QoSProfile(depth=10)),
                 "gt_robot": (PoseStamped, QoSProfile(depth=10)), "gt_humans": (PoseArray, QoSProfile(depth=10)),
                 "gt_reactions": (HumanReactions, QoSProfile(depth=10))}
        self.pub = {key: self.create_publisher(typ, TOPICS[key], qos) for key, (typ, qos) in kinds.items()}
        load_group, step_group = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        self.create_service(LoadWorld, SERVICES["load_world"], self._on_load, callback_group=load_group)
        self.create_service(ApplyAction, SERVICES["apply_action"], self._on_action, callback_group=step_group)
        self.create_service(RenderViews, SERVICES["render_views"], self._on_render_views, callback_group=step_group)
        # /cmd_vel on a node of its own, spun apart from the services (affectsim_core.ros.node_main: side_nodes)
        cmd_node = side_node(self, "_cmd_vel")
        cmd_node.create_subscription(Twist, TOPICS["cmd_vel"], self._on_cmd_vel, 10)
        cmd_node.create_subscription(JointTrajectory, TOPICS["head_command"], self._on_head_command, 10)
        self.side_nodes = (cmd_node,)

        start = Pose2D(self.p["robot_x"], self.p["robot_y"], self.p["robot_yaw"])
        self.sim.call(lambda: self._load(self.p["scene"], start, (), int(self.p[SEED_KEY])), timeout=120.0)
        if self.p["mode"] == "free_run":
            self.sim.set_free_run(self._tick, self.p["real_time_factor"])
        self.get_logger().info(
            f"bridge ready: backend={self.p['backend']} scene={self.p['scene']} mode={self.p['mode']} "
            f"camera={k.width}x{k.height} ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID')}"
        )

    # ------------------------------------------------------------------ simulator-thread work
    def _load(self, scene_ref: str, pose: Pose2D, humans: tuple[HumanPlacement, ...], noise_seed: int,
              humans_mode: str = "scripted") -> float:
        scene = load_scene(scene_ref)
        if self.backend.scene is not None and self.backend.scene.source == scene.source:
            scene = self.backend.scene  # same file: keep the compiled world and navigable space
        self.backend.load(scene, pose, humans, humans_mode=humans_mode, reaction_seed=noise_seed)
        self.noise.reseed(noise_seed)  # a new episode: its noise, a fresh odometry estimate, no queued frames
        self._map_odom = Transform.from_pose2d(pose)  # odometry starts at zero, like a robot at boot
        self._cmd = (0.0, 0.0, -math.inf)
        self._head_cmd = None  # the head starts where the bridge's head_pan and head_tilt put it
        self._next = {"camera": 0.0, "scan": 0.0, "odom": 0.0}
        stamp = cv.to_time(0.0)
        if self._map_msg is None or self._map_msg[0] is not scene:  # /map is latched: once per scene
            grid, origin = self.backend.navigable.occupancy_grid(MAP_RESOLUTION)
            self._map_msg = (scene, cv.occupancy_msg(grid, origin, MAP_RESOLUTION, stamp))
            self.pub["map"].publish(self._map_msg[1])
        self._publish_static(stamp)
        self._publish_all(camera=True, scan=True)
        return self.backend.sim_time

    def _tick(self) -> float:
        """One free-running tick: integrate /cmd_vel, publish what is due. Returns sim seconds advanced."""
        if self._resetting:
            return self.p["sim_dt"]
        dt = self.p["sim_dt"]
        lin, ang, t_cmd = self._cmd
        if self.backend.sim_time - t_cmd > self.p["cmd_vel_timeout"]:
            lin, ang = 0.0, 0.0
        head, self._head_cmd = self._head_cmd, None
        if head is not None:
            self.backend.point_head(*head)
        self.backend.integrate_velocity(lin, ang, dt)
        self._last_twist = (lin, ang)
        t = self.backend.sim_time
        due = {k: t + 1e-9 >= v for k, v in self._next.items()}
        for key, rate in (("camera", "camera_rate_hz"), ("scan", "scan_rate_hz"), ("odom", "odom_rate_hz")):
            if due[key]:
                self._next[key] += 1.0 / self.p[rate]
                if self._next[key] <= t:  # fell behind: skip, never burst
                    self._next[key] = t + 1.0 / self.p[rate]
        self._publish_all(camera=due["camera"], scan=due["scan"], odom=due["odom"])
        return dt

    def _publish_static(self, stamp) -> None:
        links = self.backend.link_transforms()
        static = [cv.transform_msg(_link_tf(links, c), fetch_model.TF_TREE[c], c, stamp)
                  for c in fetch_model.TF_TREE if c not in fetch_model.MOVING_LINKS]
        self.pub["tf_static"].publish(TFMessage(transforms=static))

    def _publish_all(self, camera: bool, scan: bool, odom: bool = True) -> None:
        b = self.backend
        stamp = cv.to_time(b.sim_time)
        self.pub["clock"].publish(Clock(clock=stamp))
        if odom:
            odom_pose = self._map_odom.inverse().compose(Transform.from_pose2d(b.pose))
            yaw = math.atan2(odom_pose.rotation[1, 0], odom_pose.rotation[0, 0])
            odom_2d = Pose2D(odom_pose.translation[0], odom_pose.translation[1], yaw)
            if "odometry" in self.noise:  # the estimate drifts from the true pose in odom
                odom_2d = self.noise.odometry(odom_2d)
                odom_pose = Transform.from_pose2d(odom_2d)
            msg = Odometry()
            msg.header.stamp = stamp
            msg.header.frame_id = "odom"
            msg.child_frame_id = "base_link"
            msg.pose.pose = cv.pose_msg(odom_2d)
            msg.twist.twist.linear.x, msg.twist.twist.angular.z = self._last_twist
            self.pub["odom"].publish(msg)
            links = b.link_transforms()
            tfs = [cv.transform_msg(self._map_odom, "map", "odom", stamp),
                   cv.transform_msg(odom_pose, "odom", "base_link", stamp)]
            tfs += [cv.transform_msg(_link_tf(links, c), fetch_model.TF_TREE[c], c, stamp)
                    for c in fetch_model.MOVING_LINKS]
            self.pub["tf"].publish(TFMessage(transforms=tfs))
            if self.p["publish_ground_truth"]:
                gt = PoseStamped()
                gt.header.stamp, gt.header.frame_id = stamp, "map"
                gt.pose = cv.pose_msg(b.pose)
                self.pub["gt_robot"].publish(gt)
                arr = PoseArray()
                arr.header.stamp, arr.header.frame_id = stamp, "map"
                roots = [b.human_pose(k) for k in range(len(b.humans))]  # pelvis position and heading now
                arr.poses = [cv.pose_msg(Pose2D(p[0], p[1], r[0]), z=p[2]) for p, r, _ in roots]
                self.pub["gt_humans"].publish(arr)
                if b.reactions is not None:
                    self.pub["gt_reactions"].publish(_reactions_msg(b, stamp))
        if scan:
            ranges = self.noise.apply_laser(b.laser_scan(self.laser), self.laser.range_min, self.laser.range_max)
            self.pub["scan"].publish(cv.laser_msg(ranges, self.laser, "laser_link", stamp, 1.0 / self.p["scan_rate_hz"]))
        latency = self.noise.get("latency")
        if camera:
            frame = b.render_head_camera()
            k = frame.intrinsics
            rgb, depth = frame.rgb, self.noise.apply_depth(frame.depth, k.fx)
            if "rgb" in self.noise:  # the base's yaw rate, seen in the optical frame
                w = max(-b.robot.max_angular, min(b.robot.max_angular, self._last_twist[1]))
                rgb = self.noise.apply_rgb(rgb, frame.pose.rotation.T @ np.array([0.0, 0.0, w]), k.fx, k.fy)
            if latency is None:
                self._publish_camera(rgb, depth, k, stamp)
            else:
                latency.push(b.sim_time, (rgb, depth, k))  # type: ignore[attr-defined]
        if latency is not None:
            for t_capture, (rgb, depth, k) in latency.due(b.sim_time):  # type: ignore[attr-defined]
                self._publish_camera(rgb, depth, k, cv.to_time(t_capture))

    def _publish_camera(self, rgb: np.ndarray, depth: np.ndarray, k: CameraIntrinsics, stamp) -> None:
        """One head-camera frame: RGB, depth (metres) and their camera info, stamped ``stamp`` (capture time)."""
        info = cv.camera_info_msg(k, OPTICAL_FRAME, stamp)
        self.pub["rgb_info"].publish(info)
        self.pub["depth_info"].publish(info)
        self.pub["rgb"].publish(cv.image_msg(rgb, "rgb8", OPTICAL_FRAME, stamp))
        self.pub["depth"].publish(cv.image_msg(depth, "32FC1", OPTICAL_FRAME, stamp))

    # ------------------------------------------------------------------ ROS callbacks
    def _guarded(self, service: str, fn: Callable, req, res):
        """Run a service handler; a rejected or failed request (MemoryError included) gets
        ``success=False`` and the reason, and the node keeps serving."""
        try:
            fn(req, res)
        except (AffectSimError, ValueError, KeyError, TimeoutError, RuntimeError) as exc:
            res.success, res.message = False, str(exc)
            self.get_logger().error(f"{service} rejected: {exc}")
        except Exception as exc:  # noqa: BLE001 - whatever one request does, the bridge stays up
            res.success, res.message = False, f"{service} failed: {type(exc).__name__}: {exc}"
            self.get_logger().error(res.message)
        return res

    def _once(self, service: str, req, res, handle: Callable):
        """``handle(req, res)`` once per nonzero ``request_id``: a repeat of one of the last ANSWERED_KEEP
        requests gets that reply again, failure or success, and changes nothing (a client resends a
        request whose reply was lost, :mod:`affectsim_core.ros.calls`; a timed-out step may still be
        running on the simulator thread, so a failed one is not run again either)."""
        answered, rid = self._answered[service], req.request_id
        if rid:
            with self._state_lock:
                done = answered.get(rid)
            if done is not None:
                for name in res.get_fields_and_field_types():
                    setattr(res, name, getattr(done, name))
                return res
        handle(req, res)
        if rid:
            with self._state_lock:
                answered[rid] = res
                while len(answered) > ANSWERED_KEEP:
                    answered.popitem(last=False)
        return res

    def _on_load(self, req: LoadWorld.Request, res: LoadWorld.Response) -> LoadWorld.Response:
        self.calls["load_world"] += 1
        return self._once("load_world", req, res, self._reset)

    def _reset(self, req: LoadWorld.Request, res: LoadWorld.Response) -> None:
        with self._state_lock:
            self._resetting = req.scene or "<empty>"  # lockstep actions are refused meanwhile
        try:
            self._guarded("load_world", self._load_world, req, res)
        finally:
            with self._state_lock:
                self._resetting = None

    def _load_world(self, req: LoadWorld.Request, res: LoadWorld.Response) -> None:
        if not req.scene:
            raise InvalidInput("scene", req.scene, "a built-in scene id or a scene file path")
        _check_load_request(req)  # counts, sizes and names before any motion is loaded
        pose = Pose2D(req.robot_pose.x, req.robot_pose.y, req.robot_pose.theta)
        humans = tuple(HumanPlacement(h.id, h.x, h.y, h.yaw, h.appearance, h.is_target,
                                      motion=self._motion(h.motion_id) if h.motion_id else None, phase=h.phase)
                       for h in req.humans)
        mode = req.humans_mode or "scripted"
        t = self.sim.call(lambda: self._load(req.scene, pose, humans, int(req.noise_seed), mode), timeout=120.0)
        self._await_acks()
        res.success, res.message, res.stamp = True, f"loaded {req.scene}", cv.to_time(t)

    def _await_acks(self) -> None:
        """Before ``load_world`` answers: wait until every reliable subscriber has acknowledged the new
        world's messages (at most :data:`ACK_TIMEOUT_S` in all), so that a client which drains its
        subscriptions after the answer (:meth:`BridgeClient.drain`, the nav node at a goal's start) holds
        this world's first frame, never only the last one of the world before."""
        deadline = time.monotonic() + ACK_TIMEOUT_S
        for key, pub in self.pub.items():
            left = deadline - time.monotonic()
            if left <= 0 or not pub.wait_for_all_acked(Duration(seconds=left)):
                self.get_logger().warning(f"load_world: {TOPICS[key]} not acknowledged by every subscriber within "
                                          f"{ACK_TIMEOUT_S:.0f} s; answering anyway")
                return

    def _motion(self, motion_id: str):
        """A clip of the configured motion library (opened on first use)."""
        if getattr(self, "_library", None) is None:
            self._library = Library(Path(self.p["motion_library"]) if self.p["motion_library"] else DEFAULT_DIR)
        return self._library.load(motion_id)

    def _on_action(self, req: ApplyAction.Request, res: ApplyAction.Response) -> ApplyAction.Response:
        self.calls["apply_action"] += 1
        return self._once("apply_action", req, res,
                          lambda q, r: self._guarded("apply_action", self._apply_action, q, r))

    def _apply_action(self, req: ApplyAction.Request, res: ApplyAction.Response) -> None:
        if self._resetting:
            raise RuntimeError(f"world is resetting (loading {self._resetting!r}); retry after load_world returns")
        if self.p["mode"] != "lockstep":
            raise RuntimeError("apply_action needs mode=lockstep; this bridge runs free_run (/cmd_vel)")
        if req.action not in tuple(Action):
            raise InvalidInput("action", req.action, "0 STOP, 1 FORWARD, 2 TURN_LEFT or 3 TURN_RIGHT")

        tilt = check_head("head_tilt", req.head_tilt) if req.point_head else None

        def step():
            action = Action(req.action)
            if tilt is not None:
                self.backend.point_head(tilt=tilt)
            turn = {Action.TURN_LEFT: TURN_RAD, Action.TURN_RIGHT: -TURN_RAD}.get(action, 0.0)
            realised = None
            if "actuation" in self.noise:  # the motion the base really makes, clipped by navigable space
                realised = self.noise.realise(FORWARD_M if action == Action.FORWARD else 0.0, turn)
                turn = realised[1]
            r = self.backend.apply_action(action, realised=realised)
            self._last_twist = (r.distance_m / STEP_SECONDS, turn / STEP_SECONDS)
            self._publish_all(camera=True, scan=True)
            return r

        r = self.sim.call(step, timeout=30.0)
        res.success, res.message = True, ""
        res.clipped, res.distance_moved = r.clipped, r.distance_m
        res.pose, res.stamp = cv.pose2d_msg(r.pose), cv.to_time(r.sim_time)

    def _on_render_views(self, req: RenderViews.Request, res: RenderViews.Response) -> RenderViews.Response:
        self.calls["render_views"] += 1
        """Privileged views for the evaluator's passive settings (:func:`affectsim_bridge.views.render_views`)."""
        return self._guarded("render_views", self._render_views, req, res)

    def _render_views(self, req: RenderViews.Request, res: RenderViews.Response) -> None:
        if self._resetting:
            raise InvalidInput("world", self._resetting, "a loaded world (a reset is running; retry after it)")
        n = len(req.times)
        if len(req.robot_poses) != n or len(req.head_tilts) != n or len(req.cameras) not in (0, n):
            raise InvalidInput("views", (n, len(req.robot_poses), len(req.head_tilts), len(req.cameras)),
                               "equal numbers of times, robot_poses and head_tilts, and 0 or as many cameras")
        if len(req.camera_vfovs) not in (0, len(req.cameras)):
            raise InvalidInput("camera_vfovs", len(req.camera_vfovs), f"0 or {len(req.cameras)} (one per camera)")
        if n > MAX_VIEWS or req.size > MAX_VIEW_SIZE:
            raise InvalidInput("views, size", (n, req.size), f"at most {MAX_VIEWS} views and size <= {MAX_VIEW_SIZE}")
        k = self.backend.head_intrinsics
        w, h = (req.size, req.size) if req.size else (k.width, k.height)
        need = n * w * h * 3
        if need > RENDER_BUDGET_BYTES:
            raise InvalidInput("views x width x height x channels", f"{n} x {w} x {h} x 3 = {need} bytes",
                               f"at most {RENDER_BUDGET_BYTES} bytes per request (fewer views or a smaller size)")
        views = []
        for i in range(n):
            cam = vfov = None
            if req.cameras:
                c = req.cameras[i]
                q, t = c.orientation, c.position
                norm = math.sqrt(q.w ** 2 + q.x ** 2 + q.y ** 2 + q.z ** 2)
                if not (cv.finite(t.x, t.y, t.z, q.w, q.x, q.y, q.z) and abs(norm - 1.0) <= 1e-3):
                    raise InvalidInput(f"cameras[{i}]", ((t.x, t.y, t.z), (q.w, q.x, q.y, q.z)),
                                       "a finite position (m) and a unit quaternion (w, x, y, z)")
                m = cv.matrix_from_pose_msg(c)
                cam = Transform(m[:3, :3], m[:3, 3])
                given = float(req.camera_vfovs[i]) if req.camera_vfovs else 0.0
                if not (given == 0.0 or VFOV_BOUNDS[0] <= given <= VFOV_BOUNDS[1]):
                    raise InvalidInput(f"camera_vfovs[{i}]", given, f"0 (the head camera's) or a vertical field of "
                                       f"view in [{VFOV_BOUNDS[0]:.3f}, {VFOV_BOUNDS[1]:.3f}] rad")
                vfov = given or None
            p = req.robot_poses[i]
            if not cv.finite(req.times[i], p.x, p.y, p.theta, req.head_tilts[i]):
                raise InvalidInput(f"views[{i}]", (req.times[i], p.x, p.y, p.theta, req.head_tilts[i]), "finite values")
            views.append(View(float(req.times[i]), Pose2D(p.x, p.y, p.theta), float(req.head_tilts[i]), cam, vfov))
        frames, poses = self.sim.call(lambda: render_views(self.backend, views, req.size or None), timeout=60.0)
        stamp = cv.to_time(self.backend.sim_time)
        res.frames = [cv.image_msg(f, "rgb8", OPTICAL_FRAME, stamp) for f in frames]
        res.camera_poses = [cv.matrix_pose_msg(m) for m in poses]
        res.success, res.message = True, ""

    def _on_cmd_vel(self, msg: Twist) -> None:
        lin, ang = msg.linear.x, msg.angular.z
        if not cv.finite(lin, ang, msg.linear.y, msg.linear.z, msg.angular.x, msg.angular.y):
            self._rejected_cmds = getattr(self, "_rejected_cmds", 0) + 1  # counted; logged once a second at most
            self.get_logger().error(
                f"/cmd_vel rejected ({self._rejected_cmds} so far): linear=({msg.linear.x}, {msg.linear.y}, "
                f"{msg.linear.z}) angular=({msg.angular.x}, {msg.angular.y}, {msg.angular.z}); expected finite values",
                throttle_duration_sec=1.0)
            return
        if self.p["mode"] != "free_run":
            self.get_logger().warning("/cmd_vel ignored: bridge runs lockstep (use /affectsim/apply_action)",
                                      throttle_duration_sec=5.0)
            return
        self._cmd = (lin, ang, self.backend.sim_time)

    def _on_head_command(self, msg: JointTrajectory) -> None:
        """A head command in the form of a joint trajectory controller's topic: the last point's positions of
        ``head_pan_joint`` and ``head_tilt_joint`` (either may be left out) become the head's goal."""
        try:
            goal = head_goal(list(msg.joint_names), [list(p.positions) for p in msg.points[-1:]], len(msg.points))
        except InvalidInput as exc:
            self.get_logger().error(f"{TOPICS['head_command']} rejected: {exc}", throttle_duration_sec=1.0)
            return
        if self.p["mode"] != "free_run":
            self.get_logger().warning(f"{TOPICS['head_command']} ignored: bridge runs lockstep (point the head with "
                                      "/affectsim/apply_action's point_head)", throttle_duration_sec=5.0)
            return
        self._head_cmd = goal

    def destroy_node(self) -> None:
        if hasattr(self, "calls") and not self.calls["_logged"]:  # once, though destroy_node may run twice
            self.calls["_logged"] = 1
            counts = ", ".join(f"{k}={self.calls[k]}" for k in ("load_world", "apply_action", "render_views"))
            self.get_logger().info(f"service calls: {counts}")
        sim = getattr(self, "sim", None)  # absent when __init__ failed on a bad parameter
        if sim is not None:
            try:
                sim.call(self.backend.close, timeout=5.0)
            except (AttributeError, RuntimeError, TimeoutError):
                pass
            sim.stop()
        super().destroy_node()


def _reactions_msg(b, stamp) -> HumanReactions:
    """The reaction state of ``b``'s people now (reactive humans)."""
    states = b.reactions.state_at(b.sim_time)
    msg = HumanReactions(ids=[h.id for h in b.humans], noticed=[s.noticed for s in states],
                         reacting=[s.reacting for s in states], shift_x=[float(s.shift[0]) for s in states],
                         shift_y=[float(s.shift[1]) for s in states], turn=[float(s.turn) for s in states],
                         reacting_s=[float(x.reacting_s) for x in b.reactions.summaries])
    msg.header.stamp, msg.header.frame_id = stamp, "map"
    return msg


MAX_YAW = 1e3  # rad: a yaw beyond this is a mistake, not an angle (it would lose all precision)


def _check_load_request(req: LoadWorld.Request) -> None:
    """Refuse a LoadWorld request whose counts, names or numbers are out of bounds, before any work."""
    if len(req.humans) > MAX_HUMANS:
        raise InvalidInput("humans", f"{len(req.humans)} people", f"at most {MAX_HUMANS}")
    p = req.robot_pose
    if not (cv.finite(p.x, p.y, p.theta) and abs(p.theta) <= MAX_YAW):
        raise InvalidInput("robot_pose", (p.x, p.y, p.theta), f"finite x, y (m) and |theta| <= {MAX_YAW:g} rad")
    for k, h in enumerate(req.humans):
        check_name(f"humans[{k}].id", h.id)
        if h.motion_id:
            check_name(f"humans[{k}].motion_id", h.motion_id)
        if not (cv.finite(h.x, h.y, h.yaw) and abs(h.yaw) <= MAX_YAW):
            raise InvalidInput(f"humans[{k}] pose", (h.x, h.y, h.yaw), f"finite x, y (m) and |yaw| <= {MAX_YAW:g} rad")


def _link_tf(links: dict[str, Transform], child: str) -> Transform:
    """Transform of ``child`` in its TF parent, from link poses in ``base_link``."""
    parent = fetch_model.TF_TREE[child]
    p = links[parent] if parent != "base_link" else Transform.identity()
    return p.inverse().compose(links[child])
