"""One active-observation episode (A-Obs), stepped stage by stage.

The same loop runs in-process (:class:`~affectsim_eval.episode.worlds.SimulatedRobot`, the evaluation's
robot) and in the nav node (:class:`~affectsim_nav.ros_robot.LockstepRobot`), so both give identical
trajectories for the same episode. Each step: the policy sees the newest observation and decides; after a stable handoff
the observations are the clip's frames; a ``Decision.goal`` is planned and followed by the built-in
follower, or handed to a :class:`GoalMover` (Nav2) that moves the robot while the policy keeps
watching. A policy that raises or returns something else than a :class:`Decision` ends the
episode with outcome ``policy_error`` and the reason.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from affectsim_core.actions import Action
from affectsim_core.clips import Clip, resize, sample_indices
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.protocol import Outcome
from affectsim_core.timing import NULL, StageTimes
from affectsim_nav.executor import ActionExecutor, BudgetExhausted, ExecutionLog
from affectsim_nav.planner import GridPlanner, follow_path
from affectsim_nav.policy import Decision, Policy

UNTIL = ("sighting", "handoff", "clip")
MAX_CLIP_FRAMES = 2400  # a clip of 10 minutes at 4 Hz (the library's clips: twice 3-8 s)
STUCK_M = 0.05  # m: a FORWARD that moved less made no progress


class GoalMover(Protocol):
    """Point-to-point motion by an external navigator (Nav2's NavigateToPose)."""

    def send(self, goal: tuple[float, float, float]) -> None: ...

    def finished(self) -> bool | None:
        """None while moving, True when the goal was reached, False when it failed."""

    def cancel(self) -> None: ...


@runtime_checkable
class ClipStream(Protocol):
    """A continuous-time robot: the clip is sampled from its camera stream at the protocol's times
    (every 0.25 s from the handoff), not once per action."""

    def start_clip(self, t0: float) -> None: ...

    def clip_frames(self) -> list[Observation]: ...


@dataclass
class ActiveResult:
    """One A-Obs run: executor log, the collected clip (None without handoff), outcome and why, and
    (with ``stream_until``) the stream: every observation's stamp (s) and 224x224 RGB frame before it."""

    log: ExecutionLog
    clip: Clip | None
    outcome: Outcome
    message: str = ""
    stages: list[str] = field(default_factory=list)
    stream: list[tuple[float, np.ndarray]] = field(default_factory=list)


class ActiveEpisode:
    """Policy + executor + robot for one episode; :meth:`run` advances it to a stage boundary."""

    def __init__(self, robot, info: EpisodeInfo, policy: Policy, max_actions: int = 480, max_planner_calls: int = 80,
                 mover: GoalMover | None = None, times: StageTimes = NULL, stream_until: float | None = None) -> None:
        self.robot, self.policy, self.mover, self.timer = robot, policy, mover, times
        self.stream_until = stream_until  # s: keep every observation before it (evolving episodes' A-Obs stream)
        self.stream: list[tuple[float, np.ndarray]] = []  # (stamp s, 224x224 RGB) of every observation kept
        self.ex = ActionExecutor(robot, max_actions, max_planner_calls)
        self.planner = GridPlanner(info, self.ex.count_planner_call, times=times)
        self.times: list[float] = []  # sim time (s) of every clip frame collected since the handoff
        self.kept: list[tuple[int, np.ndarray, np.ndarray]] = []  # (index, RGB, camera pose) of the frames kept
        self.clip_frames: int | None = None  # the clip's length, known once a run collects it
        self.stages: list[str] = []
        self.path: list[np.ndarray] | None = None
        self.moving = False  # a GoalMover goal is active
        self._stuck = 0  # consecutive blocked FORWARD moves of the built-in follower
        self.outcome: Outcome | None = None
        self.message = ""
        self.last: Decision | None = None
        self.obs = robot.observe(0)
        self._keep(self.obs)
        self.ex.start(self.obs.pose)
        try:
            policy.reset(info, self.planner)
        except Exception as exc:  # noqa: BLE001 - a user policy's failure ends the episode with a recorded reason
            self._end(Outcome.POLICY_ERROR, f"{type(exc).__name__} in reset: {exc}")

    @property
    def log(self) -> ExecutionLog:
        return self.ex.log

    def abort(self, message: str) -> Outcome:
        """End the episode as aborted (the robot failed: odometry lost, a frame that never came)."""
        return self._end(Outcome.ABORTED, message)

    def _end(self, outcome: Outcome, message: str = "") -> Outcome:
        self.outcome, self.message = outcome, message
        if self.moving and self.mover is not None:
            self.mover.cancel()
            self.moving = False
        return outcome

    def run(self, until: str = "clip", n_clip: int = 0, cancelled: Callable[[], bool] = lambda: False,
            on_step: Callable[["ActiveEpisode"], None] | None = None) -> str:
        """Step until ``until`` is reached ("sighting": the policy reports a person; "handoff"; "clip":
        ``n_clip`` frames collected after the handoff) -> "reached", or the episode ends -> its outcome."""
        if until not in UNTIL:
            raise ValueError(f"until={until!r} is invalid; expected one of {UNTIL}")
        if until == "clip":
            self._clip_length(n_clip)
        while self.outcome is None:
            reached = self.step(until, n_clip, cancelled, on_step)
            if reached is not None:
                return reached
        return self.outcome

    def step(self, until: str = "clip", n_clip: int = 0, cancelled: Callable[[], bool] = lambda: False,
             on_step: Callable[["ActiveEpisode"], None] | None = None) -> str | None:
        """One step of :meth:`run` (the policy decides once, the decision is executed): "reached" when
        ``until`` is reached, the outcome when the episode ends, else None. With ``until="clip"`` the
        clip's length must have been fixed (by :meth:`run`, or :meth:`fix_clip`)."""
        if self.outcome is not None:
            return self.outcome
        if cancelled():
            return self._end(Outcome.CANCELLED, "goal cancelled")
        if until == "clip" and self.log.handoff_step is not None and len(self.times) >= n_clip:
            return self._end(Outcome.HANDOFF)
        try:
            with self.timer("policy"):
                decision = self.policy.act(self.obs)
            if not isinstance(decision, Decision):
                raise TypeError(f"act() returned {decision!r}; expected a Decision")
        except BudgetExhausted as exc:
            return self._end(Outcome.BUDGET_EXHAUSTED, str(exc))
        except Exception as exc:  # noqa: BLE001
            return self._end(Outcome.POLICY_ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        self.last = decision
        if decision.handoff and self.log.handoff_step is None:
            self.ex.mark_handoff()
            if isinstance(self.robot, ClipStream):
                self.robot.start_clip(self.obs.stamp)
            self.path = None
            if self.moving:
                self.mover.cancel()
                self.moving = False
        if self.log.handoff_step is not None:
            self._collect()
            if until == "clip" and len(self.times) >= n_clip:
                self.stages.append(decision.stage)
                return self._end(Outcome.HANDOFF)
        self.stages.append(decision.stage)
        try:
            self._execute(decision)
        except BudgetExhausted as exc:
            return self._end(Outcome.BUDGET_EXHAUSTED, str(exc))
        if on_step is not None:
            on_step(self)
        if until == "sighting" and decision.sighting is not None:
            return "reached"
        if until == "handoff" and decision.handoff:
            return "reached"
        return None

    def fix_clip(self, n_clip: int) -> None:
        """Fix the clip's length before stepping with :meth:`step` (``run`` does it itself)."""
        self._clip_length(n_clip)

    def _clip_length(self, n_clip: int) -> None:
        """Fix the clip's length: from now on only its :data:`CLIP_FRAMES` sampled frames are kept."""
        if not 1 <= n_clip <= MAX_CLIP_FRAMES:
            raise ValueError(f"n_clip={n_clip!r} is invalid; expected 1..{MAX_CLIP_FRAMES} frames")
        if self.clip_frames is not None and n_clip != self.clip_frames:
            raise ValueError(f"n_clip={n_clip!r} is invalid; expected {self.clip_frames}, the clip length this "
                             "episode already collects")
        self.clip_frames = n_clip
        keep = set(sample_indices(n_clip).tolist())
        self.kept = [k for k in self.kept if k[0] in keep]

    def _collect(self) -> None:
        """Clip frames: the observation after each step (lockstep), or the frames a :class:`ClipStream`
        sampled at the protocol's times; a frame's stamp always, its image and camera pose only if the
        clip will use it."""
        for obs in self.robot.clip_frames() if isinstance(self.robot, ClipStream) else [self.obs]:
            i = len(self.times)
            if self.clip_frames is not None and i >= self.clip_frames:
                return
            self.times.append(obs.stamp)
            if self.clip_frames is None or i in sample_indices(self.clip_frames):
                self.kept.append((i, np.array(obs.rgb), np.array(obs.camera_pose)))

    def _execute(self, decision: Decision) -> None:
        """Apply one decision: a head command, then a primitive action or a goal (built-in follower or
        the mover)."""
        if decision.head_tilt is not None:
            self.robot.point_head(decision.head_tilt)
        if self.moving and not decision.keep_going:  # the policy preempts the external navigator
            self.mover.cancel()
            self.moving = False
            self.policy.on_goal_result(False)
        if self.mover is not None and (decision.goal is not None or self.moving):
            if decision.goal is not None:  # one planner call per goal, as in built-in mode (none if the
                self.planner.plan_from(self.obs.pose[:2])  # policy already planned from this cell)
                self.mover.send(decision.goal)
                self.moving = True
            obs = self.robot.wait_moved(self.obs, self.ex, lambda: self.mover.finished() is not None)
            if obs is not None:  # one 0.25 s step of external motion
                self.obs = obs
                self._keep(obs)
                return
            self.moving = False  # the navigator finished: report it, then one primitive STOP
            self.policy.on_goal_result(bool(self.mover.finished()))
            decision = Decision(Action.STOP, stage="navigate")
        with self.timer("policy"):
            action = self._resolve(decision)
        with self.timer("apply"):
            res = self.ex.step(action)
        if self.path and action == Action.FORWARD:  # an obstacle the map does not show (a person): give up
            self._stuck = self._stuck + 1 if res.distance_m < STUCK_M else 0  # the goal after two blocked moves
            if self._stuck >= 2:
                self.path, self._stuck = None, 0
                self.policy.on_goal_result(False)
        self.obs = self.robot.observe(len(self.log.actions))
        self._keep(self.obs)

    def _keep(self, obs: Observation) -> None:
        """Add ``obs`` to the stream (at the recognizer's size) while its stamp is before ``stream_until``."""
        if self.stream_until is not None and obs.stamp < self.stream_until - 1e-9:
            self.stream.append((float(obs.stamp), resize(np.asarray(obs.rgb))))

    def _resolve(self, decision: Decision) -> Action:
        if decision.action is not None:
            self.path = None
            return decision.action
        if decision.goal is not None:
            field_ = self.planner.plan_from(self.obs.pose[:2])
            goal_cell = self.planner.nearest_traversable(decision.goal[:2])
            self.path = field_.path_to(goal_cell) if field_ is not None and goal_cell is not None else []
            if not self.path:
                self.policy.on_goal_result(False)
                return Action.STOP
        if not self.path:  # keep_going without an active goal
            self.policy.on_goal_result(False)
            return Action.STOP
        action = follow_path(self.obs.pose, self.path)
        if action is None:
            self.path = None
            self.policy.on_goal_result(True)
            return Action.STOP
        if action == Action.FORWARD and not self.policy.way_clear(self.obs):  # the policy sees something ahead
            self.path = None
            self.policy.on_goal_result(False)
            return Action.STOP
        return action

    def result(self) -> ActiveResult:
        """The outcome; after a handoff the clip holds the :data:`CLIP_FRAMES` sampled frames (their stamps,
        images and camera poses), which is all a recognizer receives."""
        clip = (Clip("a_obs", np.array([self.times[i] for i, _, _ in self.kept]), [f for _, f, _ in self.kept],
                     np.array([p for _, _, p in self.kept]).reshape(-1, 4, 4))
                if self.outcome == Outcome.HANDOFF else None)
        return ActiveResult(self.log, clip, self.outcome or Outcome.ABORTED, self.message, self.stages, self.stream)


def run_active(robot, info: EpisodeInfo, policy: Policy, n_clip: int, max_actions: int = 480,
               max_planner_calls: int = 80, cancelled: Callable[[], bool] = lambda: False,
               mover: GoalMover | None = None, times: StageTimes = NULL,
               stream_until: float | None = None) -> ActiveResult:
    """Run ``policy`` from the robot's current state until the clip of ``n_clip`` frames is collected
    after a stable handoff, the acquisition budget is spent, the policy fails, or ``cancelled()``;
    with ``stream_until`` (s) every observation before it is kept as the A-Obs stream."""
    ep = ActiveEpisode(robot, info, policy, max_actions, max_planner_calls, mover, times, stream_until)
    if ep.outcome is None:
        ep.run("clip", n_clip, cancelled)
    return ep.result()


def sighting_feedback(decision: Decision | None) -> tuple[bool, tuple[float, float], float]:
    """(detected, map xy, distance) of the decision's sighting, for action feedback."""
    if decision is None or decision.sighting is None:
        return False, (math.nan, math.nan), math.nan
    s = decision.sighting
    return True, s.xy, s.distance
