"""Discrete action executor shared by every policy: budgets, clipping counts, trajectory, path length.

Execution follows docs/protocol.md §6: one primitive action per 0.25 s of sim time (4 Hz),
FORWARD moves 0.25 m (clipped by navigable space), turns are 15 deg, STOP waits. Budgets: 480
primitive actions and 80 global planner calls for acquisition (until a stable handoff); the
clip collected after the handoff is bounded by its length instead (``enforce_budget = False``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from affectsim_core.actions import Action, MoveResult
from affectsim_core.observation import Observation
from affectsim_core.protocol import MAX_ACTIONS, MAX_PLANNER_CALLS
from affectsim_core.record import Diagnostics


class BudgetExhausted(Exception):
    """The acquisition budget (primitive actions or planner calls) is spent."""


class Robot(Protocol):
    """What the executor drives: the in-process simulator or the robot over ROS."""

    def apply(self, action: Action) -> MoveResult: ...

    def observe(self, step: int) -> Observation: ...

    def point_head(self, tilt: float) -> None:
        """Command the head's tilt (rad, + looks down, within the Fetch limits); it moves while the
        next action runs."""


@dataclass
class ExecutionLog:
    """Everything the executor did in one episode. Poses are ``map`` frame (x m, y m, yaw rad)."""

    trajectory: list[tuple[float, float, float, float]] = field(default_factory=list)  # (t s, x, y, yaw)
    actions: list[int] = field(default_factory=list)  # Action values; -1 = a step of external (Nav2) motion
    planner_calls: int = 0
    attempted_translations: int = 0
    clipped_translations: int = 0
    path_length: float = 0.0  # m, translational
    handoff_step: int | None = None  # actions executed before the stable handoff
    path_before_handoff: float | None = None  # m
    budget_exhausted: bool = False

    def diagnostics(self) -> Diagnostics:
        """Per-episode inputs to the paper's Table 6."""
        return Diagnostics(
            handoff=self.handoff_step is not None, handoff_step=self.handoff_step, path_length=self.path_length,
            path_before_handoff=self.path_length if self.path_before_handoff is None else self.path_before_handoff,
            budget_exhausted=self.budget_exhausted, actions=len(self.actions), planner_calls=self.planner_calls,
            attempted_translations=self.attempted_translations, clipped_translations=self.clipped_translations)


class ActionExecutor:
    """Applies primitive actions to a :class:`Robot` under the acquisition budget."""

    def __init__(self, robot: Robot, max_actions: int = MAX_ACTIONS, max_planner_calls: int = MAX_PLANNER_CALLS) -> None:
        self.robot = robot
        self.max_actions = max_actions
        self.max_planner_calls = max_planner_calls
        self.enforce_budget = True
        self.log = ExecutionLog()
        self._budget_actions = 0  # actions counted against the budget

    def start(self, pose: tuple[float, float, float]) -> None:
        self.log.trajectory.append((0.0, *map(float, pose)))

    def step(self, action: Action | int) -> MoveResult:
        """Apply one action; raises :class:`BudgetExhausted` (without acting) once the budget is spent."""
        action = Action(int(action))
        if self.enforce_budget and self._budget_actions >= self.max_actions:
            self.log.budget_exhausted = True
            raise BudgetExhausted(f"{self.max_actions} primitive actions used")
        res = self.robot.apply(action)
        if self.enforce_budget:
            self._budget_actions += 1
        self.log.actions.append(int(action))
        if action == Action.FORWARD:
            self.log.attempted_translations += 1
            self.log.clipped_translations += int(res.clipped)
        self.log.path_length += res.distance_m
        p = res.pose
        self.log.trajectory.append((res.sim_time, p.x, p.y, p.yaw))
        return res

    def record_external(self, pose: tuple[float, float, float], stamp: float) -> None:
        """One 0.25 s step of motion by an external navigator (Nav2): counted like a primitive action."""
        if self.enforce_budget and self._budget_actions >= self.max_actions:
            self.log.budget_exhausted = True
            raise BudgetExhausted(f"{self.max_actions} primitive actions used")
        if self.enforce_budget:
            self._budget_actions += 1
        last = self.log.trajectory[-1]
        self.log.path_length += math.hypot(pose[0] - last[1], pose[1] - last[2])
        self.log.actions.append(-1)  # not a primitive action
        self.log.trajectory.append((float(stamp), *map(float, pose)))

    def count_planner_call(self) -> None:
        """Called by a planner before each global plan; raises once 80 calls are used."""
        if self.enforce_budget and self.log.planner_calls >= self.max_planner_calls:
            self.log.budget_exhausted = True
            raise BudgetExhausted(f"{self.max_planner_calls} global planner calls used")
        self.log.planner_calls += 1

    def mark_handoff(self) -> None:
        self.log.handoff_step = len(self.log.actions)
        self.log.path_before_handoff = self.log.path_length
        self.enforce_budget = False


def path_length(trajectory: list[tuple[float, float, float, float]]) -> float:
    """Translational length (m) of a recorded trajectory."""
    xy = np.array([(x, y) for _, x, y, _ in trajectory]).reshape(-1, 2)
    return float(np.linalg.norm(np.diff(xy, axis=0), axis=1).sum()) if len(xy) > 1 else 0.0


def heading_to(pose: tuple[float, float, float], xy) -> float:
    """Signed angle (rad) from the robot's heading to the direction of ``xy``."""
    d = math.atan2(xy[1] - pose[1], xy[0] - pose[0]) - pose[2]
    return math.atan2(math.sin(d), math.cos(d))
