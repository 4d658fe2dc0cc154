"""The ROS graph as an :class:`~affectsim_eval.episode.worlds.EvalWorld`: the evaluator's side of the benchmark.

The evaluator (privileged: it knows the episode) asks the bridge to load the world
(``/affectsim/load_world``) and to render the passive settings' views (``/affectsim/render_views``),
sends ``/affectsim/acquire_observation`` to the nav node (the policy sees only sensors) and every
setting's 8-frame clip to the perception node (``/affectsim/recognize``). Views, visible-body
fractions and d*(r) are computed by the orchestrator on a local ``geometry`` backend (never
rendered), so a record through ROS equals the in-process record of the same episode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from geometry_msgs.msg import Pose2D as Pose2DMsg
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import HumanPlacement
from affectsim_bridge.world.scene import Scene
from affectsim_bridge.views import View
from affectsim_core.clips import sample_indices
from affectsim_core.episode import Episode
from affectsim_core.protocol import CLIP_FRAMES, CLIP_SIZE, STREAM_STRIDE, Outcome
from affectsim_core.ros import calls
from affectsim_core.ros.observer_client import GraphError, ObserverClient
from affectsim_core.ros.conversions import (
    diagnostics_from_msg,
    from_time,
    image_msg,
    image_to_array,
    matrix_from_pose_msg,
    matrix_pose_msg,
    to_time,
)
from affectsim_core.ros.topics import OPTICAL_FRAME, SERVICES
from affectsim_eval.episode.worlds import Acquisition
from affectsim_interfaces.action import AcquireObservation, Recognize
from affectsim_interfaces.msg import HumanPlacement as HumanMsg
from affectsim_interfaces.srv import LoadWorld, RenderViews
from affectsim_perception.recognizers.base import Prediction


RENDER_ATTEMPT_S = 30.0  # s, first window of a RenderViews request before it is sent again (it may take seconds)


@dataclass
class _Pending:
    """A recorded episode waiting for its A-Obs recognition: its id, the clip (8, 224, 224, 3), the time of
    its last frame (s, sim time) and, for an evolving episode, the stream frames the recognizers will see."""

    episode_id: str
    frames: np.ndarray
    clip_end: float
    stream: np.ndarray | None = None


def _prediction(p) -> Prediction:
    """A RecognizerPrediction message as the in-process Prediction (VAD when it carries one)."""
    return Prediction(np.array(p.probs, float), p.label or None, p.outcome, p.detail,
                      np.array(p.vad, float) if len(p.vad) else None)


class RosEvalWorld:
    """Clients of the bridge, nav and perception nodes on ``node`` (spun by another thread)."""

    def __init__(self, node: Node, recognizers: list[str], policy: str, backend: str = "mujoco",
                 timeout: float = 600.0, record_dir: Path | None = None, record=None, lockstep: bool = True) -> None:
        """``backend``: the registered backend of the local geometry copy; ``record_dir``: write an MCAP
        recording of every A-Obs episode there (:mod:`affectsim_eval.episode.recording`) with ``record``
        (its ``RecordingOptions``; default ones, ground truth included, when None); ``lockstep``: whether
        the graph acquires in lockstep (False: in continuous time, paced against the wall clock)."""
        group = ReentrantCallbackGroup()
        self.node = node
        self.load_cli = node.create_client(LoadWorld, SERVICES["load_world"], callback_group=group)
        self.render_cli = node.create_client(RenderViews, SERVICES["render_views"], callback_group=group)
        self.observer = ObserverClient(node, timeout, callback_group=group)  # the nav and perception actions
        self.recognizers = list(recognizers)
        self._vad: list[str] = []  # recognizers whose predictions rate VAD (from the last recognition)
        self.policy = policy
        self.timeout = timeout
        self._ids = calls.request_ids()
        self.geometry = BACKENDS.create(backend)  # privileged copy of the world: views, visibility (never rendered)
        # in lockstep the nodes acquire on one core and the copy plans on the other; in continuous time the
        # planning would take the simulator's CPU and slow its pace (free run at factor 1 achieved 0.75)
        self.plans_during_acquisition = lockstep
        self.recorder = None
        self._pending: _Pending | None = None  # a recording waiting for its A-Obs recognition
        if record_dir is not None:
            from affectsim_eval.episode.recording import EpisodeRecorder, RecordingOptions  # rosbags: when recording

            self.recorder = EpisodeRecorder(record_dir, record or RecordingOptions(ground_truth=True),
                                            f"{node.get_name()}_recorder", node.get_logger().info)

    def wait_for_graph(self, timeout: float = 120.0) -> None:
        """Block until the bridge, nav and perception servers are up."""
        t_end = time.monotonic() + timeout
        for what, ready in ((f"bridge {SERVICES['load_world']}", self.load_cli.service_is_ready),
                            (f"bridge {SERVICES['render_views']}", self.render_cli.service_is_ready)):
            while not ready():
                if time.monotonic() > t_end:
                    raise TimeoutError(f"{what} is not available after {timeout:.0f} s: is the node running?")
                time.sleep(0.1)
        self.observer.wait_for_servers(max(0.0, t_end - time.monotonic()))

    def settle(self, timeout: float | None = None) -> None:
        """Cancel every nav and perception goal and wait until none is active (:meth:`ObserverClient.settle`)."""
        self.observer.settle(timeout)

    # ------------------------------------------------------------------ EvalWorld
    def load(self, ep: Episode, scene: Scene, people: list[HumanPlacement], humans: str = "scripted") -> None:
        if self._pending is not None and self._pending.episode_id == ep.episode_id:
            pass  # the same episode loaded again to render its passive settings: its recording waits on
        else:
            self._drop_pending()  # the episode before never reached its A-Obs recognition: it failed
        if self.recorder is not None and self._pending is None:
            self.recorder.forget()  # a recording starts with this world's first messages, none of the last one's
        start = ep.start
        req = LoadWorld.Request(scene=str(scene.source), robot_pose=Pose2DMsg(x=start.x, y=start.y, theta=start.yaw))
        req.humans = [HumanMsg(id=h.role, x=float(h.x), y=float(h.y), yaw=float(h.yaw), is_target=h.role == "target",
                               motion_id=h.motion_id, phase=float(h.phase)) for h in ep.humans]
        req.noise_seed = int(ep.seed) % 2 ** 32  # the episode's noise (off by default); dataset seeds are crc32
        req.humans_mode = humans  # reactive people draw from the same seed as the in-process world
        req.request_id = next(self._ids)
        self._service(self.load_cli, req, "load_world")

    def render(self, views: list[View]) -> tuple[np.ndarray, np.ndarray]:
        req = RenderViews.Request(size=CLIP_SIZE)
        req.times = [float(v.time) for v in views]
        req.robot_poses = [Pose2DMsg(x=v.pose.x, y=v.pose.y, theta=v.pose.yaw) for v in views]
        req.head_tilts = [float(v.tilt) for v in views]
        if views[0].camera is not None:
            req.cameras = [matrix_pose_msg(v.camera.matrix()) for v in views]
            req.camera_vfovs = [float(v.vfov or 0.0) for v in views]
        res = self._service(self.render_cli, req, "render_views", RENDER_ATTEMPT_S)
        return (np.stack([image_to_array(f) for f in res.frames]),
                np.stack([matrix_from_pose_msg(p) for p in res.camera_poses]))

    def acquire(self, ep: Episode, clip_frames: int, max_actions: int, max_planner_calls: int,
                stream_until: float | None = None) -> Acquisition:
        goal = AcquireObservation.Goal(episode_id=ep.episode_id, policy=self.policy,
                                       target_description=ep.target_description, clip_frames=clip_frames,
                                       max_actions=max_actions, max_planner_calls=max_planner_calls,
                                       stream_until=float(stream_until or 0.0))
        if self.recorder is not None:
            self.recorder.start(ep.episode_id)
        try:
            res = self.observer.acquire(goal)
        except BaseException:
            if self.recorder is not None:
                self.recorder.abandon()
            raise
        if self.recorder is not None:
            self.recorder.end_capture()  # what the graph publishes from now on (passive renders) is not A-Obs
            self._record_acquisition(ep.episode_id, res, stream_until is not None)
        stream = {}
        if stream_until is not None and res.stream_frames:
            stream = {"stream_frames": np.stack([image_to_array(m) for m in res.stream_frames]),
                      "stream_times": np.array([from_time(t) for t in res.stream_stamps])}
        acq = Acquisition(Outcome(res.outcome), res.message, diagnostics_from_msg(res),
                          [(p.x, p.y, p.theta) for p in res.trajectory], **stream)
        if not res.clip_frames:
            return acq
        stamps = np.array([from_time(t) for t in res.clip_stamps])
        return Acquisition(acq.outcome, acq.message, acq.diagnostics, acq.trajectory,
                           np.stack([image_to_array(m) for m in res.clip_frames]),
                           np.stack([matrix_from_pose_msg(m) for m in res.clip_camera_poses]),
                           stamps[sample_indices(len(stamps))], **stream)

    def recognize(self, frames: np.ndarray) -> dict[str, Prediction]:
        goal = Recognize.Goal(recognizers=self.recognizers)
        goal.frames = [image_msg(f, "rgb8", OPTICAL_FRAME, to_time(0.0)) for f in frames]
        res = self.observer.recognize(goal)
        self._vad = sorted(p.recognizer for p in res.predictions if p.estimates_vad)
        pending = self._pending
        if pending is not None and np.array_equal(frames, pending.frames):  # the A-Obs clip
            self.recorder.add_predictions(list(res.predictions), pending.clip_end)
            if pending.stream is None:
                self._finish_pending()
        return {p.recognizer: _prediction(p) for p in res.predictions}

    def recognize_stream(self, frames: np.ndarray, times: np.ndarray) -> dict[str, list[tuple[float, Prediction]]]:
        """One stream Recognize goal: every recognizer's prediction for each 8-frame window."""
        goal = Recognize.Goal(recognizers=self.recognizers, stream=True, stride=STREAM_STRIDE)
        goal.frames = [image_msg(f, "rgb8", OPTICAL_FRAME, to_time(float(t))) for f, t in zip(frames, times)]
        goal.stamps = [to_time(float(t)) for t in times]
        res = self.observer.recognize(goal)
        out: dict[str, list[tuple[float, Prediction]]] = {}
        per = len(res.predictions) // max(1, len(res.window_times))
        pending = self._pending
        if pending is not None and pending.stream is not None and np.array_equal(frames, pending.stream):  # A-Obs
            for k, t in enumerate(res.window_times):
                self.recorder.add_predictions(list(res.predictions[k * per:(k + 1) * per]), float(t))
            self._finish_pending()
        for k, p in enumerate(res.predictions):
            out.setdefault(p.recognizer, []).append((float(res.window_times[k // per]), _prediction(p)))
        return out

    def vad_recognizers(self) -> list[str]:
        """The recognizers whose predictions rated VAD in the last single-clip recognition."""
        return list(self._vad)

    # ------------------------------------------------------------------ recording
    def _record_acquisition(self, episode_id: str, res, streamed: bool) -> None:
        """Add the acquired clip to the recording; finish it now when there is nothing to recognise,
        else when the A-Obs clip (and an evolving episode's stream) has been recognised."""
        self.recorder.add_clip(list(res.clip_frames))
        if not res.clip_frames:
            self.recorder.finish()
            return
        stream = None
        if streamed and len(res.stream_frames) >= CLIP_FRAMES:  # the orchestrator recognises it: so it does
            stream = np.stack([image_to_array(m) for m in res.stream_frames])
        self._pending = _Pending(episode_id, np.stack([image_to_array(m) for m in res.clip_frames]),
                                 from_time(res.clip_stamps[-1]), stream)

    def _finish_pending(self) -> None:
        self._pending = None
        self.recorder.finish()

    def _drop_pending(self) -> None:
        if self._pending is not None:
            self._pending = None
            self.recorder.abandon()

    # ------------------------------------------------------------------ requests
    def _service(self, cli, req, what: str, first_attempt: float = calls.FIRST_ATTEMPT_S):
        """The reply, the request sent again if a reply is lost (each of these requests may arrive twice)."""
        res = calls.call(cli, req, self.timeout, f"bridge {what}", first_attempt)
        if not res.success:
            raise GraphError(f"bridge {what}: {res.message}")
        return res

    def close(self) -> None:
        self._drop_pending()
        if self.recorder is not None:
            self.recorder.close()
        self.geometry.close()
