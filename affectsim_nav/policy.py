"""Active-observation policy plugin API and registry.

A policy is a class registered by name in :data:`POLICIES`::

    from affectsim_nav.policy import POLICIES, Decision, Policy

    @POLICIES.register("my_policy")
    class MyPolicy(Policy):
        def reset(self, info, planner):      # EpisodeInfo (non-privileged) and a counted planner
            ...
        def act(self, obs):                  # Observation -> Decision
            return Decision(Action.TURN_LEFT, stage="search")

Each lockstep step the runner gives the policy the newest :class:`Observation` and applies the
returned primitive action. ``Decision.handoff = True`` declares a stable handoff: from then on the
runner collects the recognition clip (twice the motion duration) while still applying the
policy's actions, now outside the acquisition budget. ``Decision.goal`` asks for point-to-point
motion to a map pose: the built-in follower turns it into primitive actions (or, in the nav node
with ``execution: nav2``, Nav2's ``NavigateToPose`` drives there) and the policy keeps being asked each
step; it returns ``Decision.CONTINUE`` to keep going or any other decision to preempt the goal. Before
each forward move along the goal's path the built-in follower asks ``way_clear(obs)``; False gives the
goal up there (something the map does not show stands ahead).
``Decision.head_tilt`` (rad, + looks down) points the head camera with any decision: the head moves
toward it at the Fetch head's speed while the step runs, and stays there until the next command
(every episode starts with the head as the robot was configured, level by default).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import PersonDetector
from affectsim_core.protocol import HEAD_TILT_LIMITS
from affectsim_core.registry import Registry
from affectsim_nav.planner import GridPlanner

STAGES = ("search", "handoff", "follow", "navigate")


@dataclass(frozen=True)
class Sighting:
    """The policy's own estimate of the target: ``xy`` map (m), distance (m) and bearing (rad, + left)
    from the head camera, pixel box (x0, y0, x1, y1)."""

    xy: tuple[float, float]
    distance: float
    bearing: float
    box: tuple[float, float, float, float]


@dataclass(frozen=True)
class Decision:
    """What to do next: a primitive ``action``, or a ``goal`` (x m, y m, yaw rad; map) to move to, or
    ``keep_going`` (continue toward the current goal). ``stage`` is reported as feedback. With any of
    them, ``head_tilt`` (rad, + looks down, within :data:`HEAD_TILT_LIMITS`) commands the head; None
    leaves it as it is."""

    action: Action | None = None
    stage: str = "search"
    handoff: bool = False
    goal: tuple[float, float, float] | None = None
    keep_going: bool = False
    sighting: Sighting | None = None
    head_tilt: float | None = None

    def __post_init__(self) -> None:
        chosen = (self.action is not None) + (self.goal is not None) + bool(self.keep_going)
        if chosen != 1:
            raise ValueError(f"Decision(action={self.action}, goal={self.goal}, keep_going={self.keep_going}) is "
                             "invalid; expected exactly one of action, goal or keep_going")
        if self.stage not in STAGES:
            raise ValueError(f"Decision.stage={self.stage!r} is invalid; expected one of {STAGES}")
        lo, hi = HEAD_TILT_LIMITS
        if self.head_tilt is not None and not (isinstance(self.head_tilt, (int, float))
                                               and math.isfinite(self.head_tilt) and lo <= self.head_tilt <= hi):
            raise ValueError(f"Decision.head_tilt={self.head_tilt!r} is invalid; expected None or rad in [{lo}, {hi}]")


Decision.CONTINUE = Decision(keep_going=True, stage="navigate")  # type: ignore[attr-defined]


class LoopRecognizer(Protocol):
    """A frozen emotion recognizer as a policy consults it ("recognizer in the loop"); any recognizer of
    ``affectsim_perception``'s registry, through ``affectsim_eval.run.runner.loop_recognizer``."""

    def probs_of(self, frames: np.ndarray) -> np.ndarray:
        """(8, 224, 224, 3) uint8 RGB frames -> (5,) probabilities over ``EMOTIONS``."""

    def close(self) -> None:
        """Release the model."""


class Policy(abc.ABC):
    """Base class of active-observation policies (one instance may run many episodes, one at a time)."""

    name = ""  # the name it is registered under, set by the registration (POLICIES)
    #: True when the policy needs a frozen person detector: :func:`create_policy` passes one as
    #: ``detector`` to the constructor (policies are created by the application, which owns the models).
    uses_detector = False
    #: The name of a recognizer (``affectsim_perception``'s registry) the policy consults while it acquires
    #: a view ("" none): :func:`create_policy` passes it, made by the application, as ``recognizer``. Such a
    #: policy sees what the benchmark's recognizers conclude, so its results are reported as a separate
    #: "recognizer in the loop" variant, never as a robot-only policy's.
    uses_recognizer = ""

    @abc.abstractmethod
    def reset(self, info: EpisodeInfo, planner: GridPlanner) -> None:
        """Start an episode. ``planner.plan_from`` is the global planner; each call counts against the budget."""

    @abc.abstractmethod
    def act(self, obs: Observation) -> Decision:
        """The next decision for the newest observation."""

    def on_goal_result(self, reached: bool) -> None:
        """The last ``Decision.goal`` was reached (True) or could not be planned / was aborted (False)."""

    def way_clear(self, obs: Observation) -> bool:
        """Asked by the built-in follower before each forward move along a goal's path: False gives the goal
        up before the move (``on_goal_result(False)``) and the robot stays this step, as when something the
        map does not show stands ahead. Nav2 (``execution: nav2``) keeps its own costmap and does not ask."""
        return True

    def close(self) -> None:
        """Release models (detectors) the policy holds."""


POLICIES: Registry[Policy] = Registry("policy", name_attr="name")


def create_policy(name: str, detector: Callable[[], PersonDetector] | None = None,
                  recognizer: Callable[[str], LoopRecognizer] | None = None) -> Policy:
    """The policy registered as ``name``; one that :attr:`~Policy.uses_detector` gets ``detector()``, one
    that :attr:`~Policy.uses_recognizer` gets ``recognizer(its recognizer's name)`` (factories, so a policy
    without them never loads a model). Unknown names raise ``KeyError``."""
    cls = POLICIES.get(name)
    sees, consults = getattr(cls, "uses_detector", False), getattr(cls, "uses_recognizer", "")
    if sees and detector is None:
        raise InvalidInput("detector", None, f"a person detector factory for policy {name!r}")
    if consults and recognizer is None:
        raise InvalidInput("recognizer", None, f"a recognizer factory for policy {name!r}, which consults "
                           f"recognizer {consults!r} (in-process runs pass one; the nav node does not)")
    kwargs = {}
    if sees:
        kwargs["detector"] = detector()
    if consults:
        kwargs["recognizer"] = recognizer(consults)
    return cls(**kwargs)


@POLICIES.register("stay")
class StayPolicy(Policy):
    """Observe from the start pose: hand off at once and never move (A-Obs equal to P-Init's viewpoint)."""

    def reset(self, info: EpisodeInfo, planner: GridPlanner) -> None:
        pass

    def act(self, obs: Observation) -> Decision:
        return Decision(Action.STOP, stage="follow", handoff=True)
