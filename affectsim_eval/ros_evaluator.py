"""One episode through the ROS graph: the evaluator's side of the benchmark.

For each episode the evaluator (privileged: it knows the episode) asks the bridge to load the
world, has the bridge render the passive settings' views (``/affectsim/render_views``), sends
``/affectsim/acquire_observation`` to the nav node (the policy sees only sensors), and sends every
setting's 8-frame clip to the perception node (``/affectsim/recognize``). The views, the
visible-body fractions and d*(r) come from the same ROS-free code the offline runner uses, on a
local copy of the world's geometry (nothing is rendered here), so a record through ROS equals the
in-process record of the same episode.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from affectsim_bridge.scene import load_scene, resolve_scene_path
from affectsim_eval.evaluate import SETTINGS, episode_record
from affectsim_nav.clips import sample_indices
from affectsim_nav.runner import (View, clip_times, p_init_views, p_mon_views, p_ref_views, placements,
                                  start_pose, visible_fraction)
from affectsim_perception.recognizers.base import Prediction
from affectsim_ros.core.errors import AffectSimError


class GraphError(AffectSimError, RuntimeError):
    """A node of the graph refused or failed a request (the message says which and why)."""


def _wait(future, timeout: float, what: str):
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        future.cancel()
        raise TimeoutError(f"{what} did not answer within {timeout:.0f} s")
    return future.result()


class RosEpisodeEvaluator:
    """Clients of the bridge, nav and perception nodes on ``node`` (spun by another thread)."""

    def __init__(self, node, load_motion: Callable, scenes_dir: Path, recognizers: list[str], policy: str,
                 max_actions: int = 480, max_planner_calls: int = 80, timeout: float = 600.0,
                 record_dir: Path | None = None) -> None:
        """``record_dir``: write an MCAP recording of every A-Obs episode there (``recording.py``)."""
        from affectsim_interfaces.action import AcquireObservation, Recognize
        from affectsim_interfaces.srv import LoadWorld, RenderViews
        from rclpy.action import ActionClient
        from rclpy.callback_groups import ReentrantCallbackGroup

        from affectsim_bridge.backends.mujoco_backend import MujocoBackend

        group = ReentrantCallbackGroup()
        self.node = node
        self.types = {"LoadWorld": LoadWorld, "RenderViews": RenderViews, "Acquire": AcquireObservation,
                      "Recognize": Recognize}
        self.load_cli = node.create_client(LoadWorld, "/affectsim/load_world", callback_group=group)
        self.render_cli = node.create_client(RenderViews, "/affectsim/render_views", callback_group=group)
        self.acquire_cli = ActionClient(node, AcquireObservation, "/affectsim/acquire_observation", callback_group=group)
        self.recognize_cli = ActionClient(node, Recognize, "/affectsim/recognize", callback_group=group)
        self.load_motion = load_motion
        self.scenes_dir = Path(scenes_dir)
        self.recognizers = list(recognizers)
        self.policy = policy
        self.max_actions, self.max_planner_calls = max_actions, max_planner_calls
        self.timeout = timeout
        self.geometry = MujocoBackend()  # privileged copy of the world: views, visibility (never rendered)
        self.scene = None
        self.last_frames: dict[str, np.ndarray] = {}  # the last episode's 8-frame clips per setting
        self.recorder = None
        if record_dir is not None:
            from affectsim_eval.recording import EpisodeRecorder

            self.recorder = EpisodeRecorder(node, record_dir)

    def wait_for_graph(self, timeout: float = 120.0) -> None:
        """Block until the bridge, nav and perception servers are up."""
        t_end = time.monotonic() + timeout
        for what, ready in (("bridge /affectsim/load_world", self.load_cli.service_is_ready),
                            ("bridge /affectsim/render_views", self.render_cli.service_is_ready),
                            ("nav /affectsim/acquire_observation", self.acquire_cli.server_is_ready),
                            ("perception /affectsim/recognize", self.recognize_cli.server_is_ready)):
            while not ready():
                if time.monotonic() > t_end:
                    raise TimeoutError(f"{what} is not available after {timeout:.0f} s: is the node running?")
                time.sleep(0.1)

    # ------------------------------------------------------------------ one episode
    def evaluate(self, ep: dict) -> dict:
        from affectsim_interfaces.msg import HumanPlacement as HumanMsg
        from geometry_msgs.msg import Pose2D as Pose2DMsg

        from affectsim_ros.ros.conversions import image_to_array, matrix_from_pose_msg

        path = resolve_scene_path(ep["scene_id"], self.scenes_dir)
        if self.scene is None or self.scene.id != ep["scene_id"]:
            self.scene = load_scene(path)
        people = placements(ep, self.load_motion)
        start = start_pose(ep)
        target = next(p for p in people if p.is_target)
        full = clip_times(target.motion.duration)
        idx = sample_indices(len(full))
        times = full[idx]
        g = self.geometry
        g.load(self.scene, start, tuple(people))
        tilt = g.robot.head_tilt
        room = ep.get("monitor_room") or self.scene.room_at((target.x, target.y)).id
        ref_views, plan = p_ref_views(g, people, full, idx)
        views = {"p_init": p_init_views(start, tilt, times), "p_ref": ref_views,
                 "p_mon": p_mon_views(self.scene, start, tilt, room, times)}

        req = self.types["LoadWorld"].Request(scene=str(path), robot_pose=Pose2DMsg(x=start.x, y=start.y, theta=start.yaw))
        req.humans = [HumanMsg(id=h["role"], x=float(h["x"]), y=float(h["y"]), yaw=float(h["yaw"]),
                               appearance=int(h.get("appearance", 0)), is_target=h["role"] == "target",
                               motion_id=h["motion_id"], phase=float(h["phase"])) for h in ep["humans"]]
        self._service(self.load_cli, req, "load_world")
        frames, poses = {}, {}
        for s, v in views.items():
            frames[s], poses[s] = self._render(v)
        self._service(self.load_cli, req, "load_world")  # time and pose back to the episode start for A-Obs
        desc = next(h["description"] for h in ep["humans"] if h["role"] == "target") if len(ep["humans"]) > 1 else ""
        goal = self.types["Acquire"].Goal(episode_id=ep["episode_id"], policy=self.policy, target_description=desc,
                                          clip_frames=len(full), max_actions=self.max_actions,
                                          max_planner_calls=self.max_planner_calls)
        if self.recorder is not None:
            self.recorder.start(ep["episode_id"])
        try:
            res = self._action(self.acquire_cli, goal, "acquire_observation")
        except BaseException:
            if self.recorder is not None:
                self.recorder.abandon()
            raise
        if self.recorder is not None:
            self.recorder.finish(list(res.clip_frames))
        if res.outcome in ("aborted", "cancelled", "policy_error") and not res.trajectory:
            raise GraphError(f"nav acquire_observation: {res.outcome}: {res.message}")
        fallback = not res.clip_frames
        if fallback:
            frames["a_obs"], poses["a_obs"], a_times = frames["p_init"], poses["p_init"], times
        else:
            frames["a_obs"] = np.stack([image_to_array(m) for m in res.clip_frames])
            poses["a_obs"] = np.stack([matrix_from_pose_msg(m) for m in res.clip_camera_poses])
            stamps = np.array([t.sec + t.nanosec * 1e-9 for t in res.clip_stamps])
            a_times = stamps[sample_indices(len(stamps))]
        visible = {s: visible_fraction(g, people, times if s != "a_obs" else a_times, poses[s]) for s in SETTINGS}
        preds = {s: self._recognize(frames[s]) for s in SETTINGS}
        self.last_frames = frames
        step = None if res.handoff_step < 0 else int(res.handoff_step)
        active = {"outcome": res.outcome, "message": res.message,
                  "diagnostics": {"handoff": step is not None, "handoff_step": step, "path_length": res.path_length,
                                  "path_before_handoff": res.path_before_handoff,
                                  "budget_exhausted": bool(res.budget_exhausted), "actions": int(res.actions),
                                  "planner_calls": int(res.planner_calls),
                                  "attempted_translations": int(res.attempted_translations),
                                  "clipped_translations": int(res.clipped_translations)},
                  "trajectory": [(p.x, p.y, p.theta) for p in res.trajectory]}
        return episode_record(ep, preds, active, fallback,
                              {"frame": plan.frame, "distance": plan.distance, "angle": plan.angle},
                              visible, g.navigable)

    # ------------------------------------------------------------------ requests
    def _service(self, cli, req, what: str):
        res = _wait(cli.call_async(req), self.timeout, f"bridge {what}")
        if not res.success:
            raise GraphError(f"bridge {what}: {res.message}")
        return res

    def _action(self, cli, goal, what: str):
        handle = _wait(cli.send_goal_async(goal), self.timeout, f"{what} goal")
        if not handle.accepted:
            raise GraphError(f"{what}: goal rejected")
        return _wait(handle.get_result_async(), self.timeout, f"{what} result").result

    def _render(self, views: list[View]) -> tuple[np.ndarray, np.ndarray]:
        from geometry_msgs.msg import Pose2D as Pose2DMsg

        from affectsim_ros.ros.conversions import image_to_array, matrix_from_pose_msg, matrix_pose_msg

        req = self.types["RenderViews"].Request(size=224)
        req.times = [float(v.time) for v in views]
        req.robot_poses = [Pose2DMsg(x=v.pose.x, y=v.pose.y, theta=v.pose.yaw) for v in views]
        req.head_tilts = [float(v.tilt) for v in views]
        if views[0].camera is not None:
            m = np.eye(4)
            req.cameras = []
            for v in views:
                m[:3, :3], m[:3, 3] = v.camera.rotation, v.camera.translation
                req.cameras.append(matrix_pose_msg(m))
        res = self._service(self.render_cli, req, "render_views")
        return (np.stack([image_to_array(f) for f in res.frames]),
                np.stack([matrix_from_pose_msg(p) for p in res.camera_poses]))

    def _recognize(self, frames: np.ndarray) -> dict[str, Prediction]:
        from affectsim_ros.ros.conversions import image_msg, to_time

        goal = self.types["Recognize"].Goal(recognizers=self.recognizers)
        goal.frames = [image_msg(f, "rgb8", "head_camera_rgb_optical_frame", to_time(0.0)) for f in frames]
        res = self._action(self.recognize_cli, goal, "recognize")
        if res.message and not res.predictions:
            raise GraphError(f"perception recognize: {res.message}")
        return {p.recognizer: Prediction(np.array(p.probs, float), p.label or None, p.outcome, p.detail)
                for p in res.predictions}

    def close(self) -> None:
        self.geometry.close()
