"""Where an episode is evaluated: the :class:`EvalWorld` interface and its in-process implementation.

The episode orchestrator (:mod:`affectsim_eval.episode.orchestrator`) asks a world to instantiate the
episode, render the passive settings' views, run the active observation and recognise clips.
:class:`InProcessEvalWorld` does all of it in this process on one simulator backend;
:class:`~affectsim_eval.episode.ros_eval_world.RosEvalWorld` does it through the ROS graph (bridge, nav and
perception nodes). Both keep a privileged ``geometry`` backend for the reference observer, the
visible-body fractions and d*(r), so the same episode gives the same record in either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

import numpy as np

from affectsim_bridge.backends.base import HumanPlacement, SimulatorBackend
from affectsim_bridge.world.scene import Scene
from affectsim_bridge.views import View, render_views
from affectsim_core.actions import Action, MoveResult
from affectsim_core.clips import sample_indices
from affectsim_core.episode import Episode
from affectsim_core.observation import Observation
from affectsim_core.protocol import CLIP_SIZE, STREAM_STRIDE, Outcome
from affectsim_core.record import Diagnostics
from affectsim_core.timing import NULL, StageTimes
from affectsim_eval.episode.passive import episode_info
from affectsim_nav.active import ActiveResult, run_active
from affectsim_nav.policy import Policy
from affectsim_perception.recognizers.base import ClipInput, Prediction, Recognizer, StreamInput


@dataclass(frozen=True)
class Acquisition:
    """What the active observation gave: its outcome and message, Table 6 diagnostics, trajectory
    (x m, y m, yaw rad in map: the start, then one pose per action) and, after a stable handoff, the
    recognizer input: ``frames`` (8, 224, 224, 3) uint8, ``camera_poses`` (8, 4, 4) optical frames
    in map, ``times`` (8,) sim seconds; all three None without a handoff (A-Obs falls back to P-Init)."""

    outcome: Outcome
    message: str
    diagnostics: Diagnostics
    trajectory: list[tuple[float, float, float]]
    frames: np.ndarray | None = None
    camera_poses: np.ndarray | None = None
    times: np.ndarray | None = None
    stream_frames: np.ndarray | None = None  # (N, 224, 224, 3) head-camera frames before stream_until
    stream_times: np.ndarray | None = None  # (N,) their sim times (s)


class EvalWorld(Protocol):
    """A world the orchestrator evaluates episodes in. ``geometry`` is a privileged backend loaded
    with the same episode by the orchestrator (never rendered through this interface)."""

    geometry: SimulatorBackend
    #: whether the acquisition leaves ``geometry`` alone, so the orchestrator may plan the passive
    #: settings on it in a second thread while the world acquires (True through the ROS graph)
    plans_during_acquisition: bool

    def load(self, ep: Episode, scene: Scene, people: list[HumanPlacement], humans: str = "scripted") -> None:
        """Instantiate the episode: scene, people at sim time 0 (``humans``: scripted or reactive, with
        the episode's seed), robot at the start pose."""

    def render(self, views: list[View]) -> tuple[np.ndarray, np.ndarray]:
        """The recognizer-size frames (N, 224, 224, 3) uint8 and optical-frame poses (N, 4, 4) of
        ``views``; the episode's state is left untouched."""

    def acquire(self, ep: Episode, clip_frames: int, max_actions: int, max_planner_calls: int,
                stream_until: float | None = None) -> Acquisition:
        """Run the active observation from the loaded state until ``clip_frames`` full-rate frames are
        collected after a stable handoff, the budget is spent, or it fails; with ``stream_until`` (s)
        also return every head-camera observation before then (an evolving episode's stream)."""

    def recognize(self, frames: np.ndarray) -> dict[str, Prediction]:
        """Every configured recognizer's prediction for one clip (8, 224, 224, 3)."""

    def recognize_stream(self, frames: np.ndarray, times: np.ndarray) -> dict[str, list[tuple[float, Prediction]]]:
        """Every configured recognizer's (window centre, prediction) over a stream (N, 224, 224, 3)."""

    def vad_recognizers(self) -> list[str]:
        """The configured recognizers whose predictions carry VAD."""


def recognize(recognizers: Mapping[str, Recognizer], frames: np.ndarray) -> dict[str, Prediction]:
    """Every recognizer on one clip's 8 sampled 224x224 frames; a failing one gives an "error"
    prediction with the reason (the others still run)."""
    inp = ClipInput(np.ascontiguousarray(frames))
    out = {}
    for name, rec in recognizers.items():
        try:
            out[name] = rec.predict(inp)
        except Exception as exc:  # noqa: BLE001 - recorded, the episode goes on
            out[name] = Prediction.failed("error", f"{type(exc).__name__}: {exc}")
    return out


def recognize_stream(recognizers: Mapping[str, Recognizer], frames: np.ndarray,
                     times: np.ndarray) -> dict[str, list[tuple[float, Prediction]]]:
    """Every recognizer over the windows of one stream (one every ``STREAM_STRIDE`` frames); a
    failing one gives "error" predictions."""
    inp = StreamInput(np.ascontiguousarray(frames), np.asarray(times, float))
    out = {}
    for name, rec in recognizers.items():
        try:
            out[name] = rec.predict_stream(inp, STREAM_STRIDE)
        except Exception as exc:  # noqa: BLE001 - recorded, the episode goes on
            out[name] = [(t, Prediction.failed("error", f"{type(exc).__name__}: {exc}"))
                         for t, _ in inp.windows(STREAM_STRIDE)]
    return out


class SimulatedRobot:
    """The in-process simulator as the active loop's lockstep robot (:class:`~affectsim_nav.executor.Robot`):
    actions go to the backend, observations are copies of its head camera, pose and sim time."""

    def __init__(self, backend: SimulatorBackend, times: StageTimes = NULL) -> None:
        self.backend = backend
        self.times = times

    def apply(self, action: Action) -> MoveResult:
        return self.backend.apply_action(action)

    def point_head(self, tilt: float) -> None:
        self.backend.point_head(tilt=tilt)

    def observe(self, step: int) -> Observation:
        with self.times("render"):
            f = self.backend.render_head_camera()
        b, k = self.backend, f.intrinsics
        return Observation.make(f.rgb, f.depth, (k.fx, k.fy, k.cx, k.cy), f.pose.matrix(),
                                (b.pose.x, b.pose.y, b.pose.yaw), b.sim_time, step)


def acquisition(active: ActiveResult, stream_until: float | None = None) -> Acquisition:
    """The :class:`Acquisition` of one finished A-Obs run (the clip's sampled frames after a handoff, the
    stream with ``stream_until``), as the orchestrator records it."""
    traj = [(x, y, yaw) for _t, x, y, yaw in active.log.trajectory]
    stream = {}
    if stream_until is not None and active.stream:
        stream = {"stream_frames": np.stack([f for _, f in active.stream]),
                  "stream_times": np.array([t for t, _ in active.stream])}
    clip = active.clip
    if clip is None:
        return Acquisition(active.outcome, active.message, active.log.diagnostics(), traj, **stream)
    idx = sample_indices(len(clip.frames))
    return Acquisition(active.outcome, active.message, active.log.diagnostics(), traj, clip.sampled(),
                       clip.camera_poses[idx], clip.times[idx], **stream)


class InProcessEvalWorld:
    """:class:`EvalWorld` on one backend (which is also the ``geometry``), a policy and recognizers."""

    def __init__(self, backend: SimulatorBackend, policy: Policy, recognizers: Mapping[str, Recognizer],
                 times: StageTimes = NULL) -> None:
        self.geometry = self.backend = backend
        self.plans_during_acquisition = False  # the acquisition moves the one backend
        self.policy, self.recognizers, self.times = policy, recognizers, times

    def load(self, ep: Episode, scene: Scene, people: list[HumanPlacement], humans: str = "scripted") -> None:
        self.backend.load(scene, ep.start, tuple(people), humans_mode=humans, reaction_seed=ep.seed)

    def render(self, views: list[View]) -> tuple[np.ndarray, np.ndarray]:
        frames, poses = render_views(self.backend, views, CLIP_SIZE)
        return np.stack(frames), poses

    def acquire(self, ep: Episode, clip_frames: int, max_actions: int, max_planner_calls: int,
                stream_until: float | None = None) -> Acquisition:
        active = run_active(SimulatedRobot(self.backend, self.times), episode_info(ep, self.backend.navigable),
                            self.policy, clip_frames, max_actions, max_planner_calls, times=self.times,
                            stream_until=stream_until)
        return acquisition(active, stream_until)

    def recognize(self, frames: np.ndarray) -> dict[str, Prediction]:
        return recognize(self.recognizers, frames)

    def recognize_stream(self, frames: np.ndarray, times: np.ndarray) -> dict[str, list[tuple[float, Prediction]]]:
        return recognize_stream(self.recognizers, frames, times)

    def vad_recognizers(self) -> list[str]:
        return sorted(n for n, r in self.recognizers.items() if r.estimates_vad)
