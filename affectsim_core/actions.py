"""Primitive actions of the benchmark and the result of applying one (docs/protocol.md §6)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from affectsim_core.geometry import Pose2D


class Action(IntEnum):
    """Discrete benchmark actions (values match ``affectsim_interfaces/srv/ApplyAction``)."""

    STOP = 0
    FORWARD = 1
    TURN_LEFT = 2
    TURN_RIGHT = 3


@dataclass(frozen=True)
class MoveResult:
    """Outcome of one discrete action or velocity integration: the new base ``pose`` (map), whether
    navigable space (or, in continuous time, the safety stop or the timeout) ``clipped`` the move,
    the translation ``distance_m`` achieved (m), the ``sim_time`` (s) after it and how it ended
    (``ending``: ``done``, ``blocked``, ``timeout``; see :mod:`affectsim_nav.base_control`)."""

    pose: Pose2D
    clipped: bool
    distance_m: float
    sim_time: float
    ending: str = "done"
