"""Social measures of an active acquisition among reactive people (privileged ground truth).

:func:`replay_reactions` drives a geometry backend's reactions along the robot trajectory an
acquisition recorded (one pose per 0.25 s action, as the bridge applied them in lockstep), so the
evaluator knows where every person was whichever world ran the episode; :func:`social_summary`
measures the robot's proximity to them and what it caused. Gaps are surface to surface (m): the
robot's round footprint to a person's disc.
"""

from __future__ import annotations

import numpy as np

from affectsim_bridge.backends.base import HumanPlacement, SimulatorBackend
from affectsim_bridge.humans.reactive import PERSON_RADIUS_M
from affectsim_bridge.world.scene import Scene
from affectsim_core.geometry import Pose2D
from affectsim_core.protocol import STEP_SECONDS
from affectsim_core.record import SocialSummary

INTIMATE_M = 0.45  # Hall's proxemic zones (m): intimate below, personal up to PERSONAL_M
PERSONAL_M = 1.2
CONTACT_M = 0.01  # a gap below this is a contact


def replay_reactions(backend: SimulatorBackend, scene: Scene, start: Pose2D, people: list[HumanPlacement],
                     seed: int, trajectory: list[tuple[float, float, float]]) -> None:
    """Load ``backend`` with reactive ``people`` and advance their reactions along ``trajectory``
    (x, y, yaw in map: the start, then one pose per action, each STEP_SECONDS of sim time)."""
    backend.load(scene, start, tuple(people), humans_mode="reactive", reaction_seed=seed)
    for i, (x, y, yaw) in enumerate(trajectory[1:], 1):
        backend.reactions.advance(i * STEP_SECONDS, Pose2D(x, y, yaw))


def social_summary(backend: SimulatorBackend, trajectory: list[tuple[float, float, float]]) -> SocialSummary:
    """Proximity and disturbance over ``trajectory`` for a backend whose reactions were replayed along it."""
    gaps = []
    for i, (x, y, _yaw) in enumerate(trajectory):
        t = i * STEP_SECONDS
        g = [float(np.hypot(*(backend.human_pose(k, t)[0][:2] - (x, y)))) - backend.robot.radius - PERSON_RADIUS_M
             for k in range(len(backend.humans))]
        gaps.append(min(g) if g else float("inf"))
    gaps = np.array(gaps)
    n = max(len(gaps), 1)
    return SocialSummary(
        min_gap_m=round(float(gaps.min()), 4) if len(gaps) else float("inf"),
        intimate_pct=round(100.0 * float((gaps < INTIMATE_M).sum()) / n, 3),
        personal_pct=round(100.0 * float(((gaps >= INTIMATE_M) & (gaps < PERSONAL_M)).sum()) / n, 3),
        contacts=int((gaps < CONTACT_M).sum()),
        people=tuple(backend.reactions.summary()),
    )
