"""The policy ``examples/train_ppo.py`` trains, as a user's policy plugin (docs/extending.md, docs/gym.md).

``AFFECTSIM_PLUGINS=examples.ppo_policy affectsim eval --policy ppo`` (from the repository root, so that
``examples`` is importable) registers it as ``ppo``. It sees what every policy sees (an
:class:`~affectsim_core.observation.Observation` per step) and computes from it the features the
environment's observation gives the trained network (:func:`features`): the frozen detector's
``detection`` (:func:`affectsim_eval.gym.spaces.detection_features`, the same function), whether it
has handed off, and its last action. The network (two tanh layers) is evaluated in numpy from
``ppo_weights.npz`` (``$AFFECTSIM_PPO_WEIGHTS`` for another file); it acts greedily.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import PersonDetector
from affectsim_eval.gym.spaces import DETECTION_SIZE, HANDOFF, N_ACTIONS, detection_features
from affectsim_nav.planner import GridPlanner
from affectsim_nav.policy import POLICIES, Decision, Policy

WEIGHTS = Path(__file__).with_name("ppo_weights.npz")
N_FEATURES = DETECTION_SIZE + 1 + N_ACTIONS  # detection, handed off, last action (one-hot)
LAYERS = ("w1", "b1", "w2", "b2", "w_pi", "b_pi")


def features(detection: np.ndarray, handed_off: bool, last_action: int) -> np.ndarray:
    """The network's input (N_FEATURES,) float32: the environment's ``detection``, handed off (0/1), the
    last action one-hot (STOP at an episode's start)."""
    out = np.zeros(N_FEATURES, np.float32)
    out[:DETECTION_SIZE] = detection
    out[DETECTION_SIZE] = float(handed_off)
    out[DETECTION_SIZE + 1 + int(last_action)] = 1.0
    return out


def load_weights(path: Path) -> dict[str, np.ndarray]:
    """The policy network's arrays from ``path`` (an .npz with :data:`LAYERS`)."""
    if not Path(path).is_file():
        raise InvalidInput("AFFECTSIM_PPO_WEIGHTS", str(path), "an .npz written by examples/train_ppo.py")
    with np.load(path) as z:
        missing = [k for k in LAYERS if k not in z]
        if missing:
            raise InvalidInput("AFFECTSIM_PPO_WEIGHTS", str(path), f"an .npz with the arrays {LAYERS} (missing {missing})")
        w = {k: np.asarray(z[k], np.float32) for k in LAYERS}
    if w["w1"].shape[0] != N_FEATURES or w["w_pi"].shape[1] != N_ACTIONS:
        raise InvalidInput("AFFECTSIM_PPO_WEIGHTS", str(path), f"a network of {N_FEATURES} inputs and {N_ACTIONS} actions")
    return w


def logits(w: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Action logits (N_ACTIONS,) of the network for features ``x``."""
    h = np.tanh(x @ w["w1"] + w["b1"])
    h = np.tanh(h @ w["w2"] + w["b2"])
    return h @ w["w_pi"] + w["b_pi"]


@POLICIES.register("ppo")
class PPOPolicy(Policy):
    """The trained network, greedy: primitive actions and the handoff (then STOP) from the features."""

    uses_detector = True

    def __init__(self, detector: PersonDetector) -> None:
        self.detector = detector
        self.w = load_weights(Path(os.environ.get("AFFECTSIM_PPO_WEIGHTS", WEIGHTS)))

    def reset(self, info: EpisodeInfo, planner: GridPlanner) -> None:
        self.handed_off, self.last = False, int(Action.STOP)

    def act(self, obs: Observation) -> Decision:
        x = features(detection_features(self.detector, obs), self.handed_off, self.last)
        a = int(np.argmax(logits(self.w, x)))
        self.last = a
        if a == HANDOFF:
            first, self.handed_off = not self.handed_off, True
            return Decision(Action.STOP, stage="follow", handoff=first)
        return Decision(Action(a), stage="follow" if self.handed_off else "search")

    def close(self) -> None:
        self.detector.close()
