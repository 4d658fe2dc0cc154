"""The benchmark protocol's vocabulary (``docs/protocol.md``), each value defined once.

Units: seconds of sim time, metres, radians. Every package takes these names from here.
"""

from __future__ import annotations

import math
from enum import StrEnum

#: The label space (docs/protocol.md §1): exactly five classes, in this order everywhere
#: (probability vectors, confusion matrices, class indices 0..4).
EMOTIONS: tuple[str, ...] = ("angry", "fearful", "happy", "neutral", "sad")

#: Observation settings (section 5): initial view, reference observer, room monitor, active.
SETTINGS: tuple[str, ...] = ("p_init", "p_ref", "p_mon", "a_obs")
PASSIVE_SETTINGS: tuple[str, ...] = ("p_init", "p_ref", "p_mon")

#: Episode families and the observation-controlled challenges (section 2); dataset splits (section 4).
#: ``evolving`` goes beyond the paper: the target's emotion changes within the episode (docs/affect.md).
PAPER_FAMILIES: tuple[str, ...] = ("action_grounded", "observation_controlled", "dyadic")
FAMILIES: tuple[str, ...] = (*PAPER_FAMILIES, "evolving")
CHALLENGES: tuple[str, ...] = ("far_visible", "rear_view", "partial_occlusion", "obstacle_detour")
SPLITS: tuple[str, ...] = ("train", "val", "test")

#: Recognizer input (section 7): frames uniformly sampled from a clip, each resized to a square.
CLIP_FRAMES = 8
CLIP_SIZE = 224  # px

#: Evolving episodes (beyond the paper, docs/affect.md): a stream of one frame per 0.25 s is labelled
#: in windows of CLIP_FRAMES consecutive frames, one window every STREAM_STRIDE frames (0.5 s).
STREAM_STRIDE = 2

#: Execution (section 6): one primitive action per 0.25 s of sim time (4 Hz).
STEP_SECONDS = 0.25
FORWARD_M = 0.25
TURN_RAD = math.radians(15.0)

#: The head (beyond the paper, whose four primitives never move it): a policy may point the head camera
#: down or up with each decision. Fetch's head_tilt_joint limits (rad, + looks down) and the speed at
#: which the head moves toward the commanded tilt (rad/s; at most 0.39 rad in one 0.25 s step).
HEAD_TILT_LIMITS: tuple[float, float] = (-0.76, 1.45)
HEAD_PAN_LIMITS: tuple[float, float] = (-1.57, 1.57)  # rad, + left
HEAD_SPEED = 1.57  # rad/s, each joint

#: How the bridge advances sim time (docs/design.md §3): each discrete action advances it by one step
#: (the benchmark; bit-for-bit repeatable), or it runs on its own, paced to a real-time factor (/cmd_vel, Nav2).
MODES: tuple[str, ...] = ("lockstep", "free_run")

#: Acquisition budget until a stable handoff (section 6).
MAX_ACTIONS = 480
MAX_PLANNER_CALLS = 80

#: E-SPL radii (section 8), metres.
ESPL_RADII: tuple[int, ...] = (1, 3, 5)


class Outcome(StrEnum):
    """How one active observation (A-Obs) ended; the values are the strings of records and action results."""

    HANDOFF = "handoff"  # a stable handoff, then the clip was collected
    BUDGET_EXHAUSTED = "budget_exhausted"  # 480 actions or 80 planner calls spent before a handoff
    POLICY_ERROR = "policy_error"  # the policy raised or returned something other than a Decision
    CANCELLED = "cancelled"  # the goal was cancelled
    ABORTED = "aborted"  # preempted, or a failure outside the policy (bridge, timeout)
