"""Rewards of the Gymnasium environment, one registry (:data:`REWARDS`), selectable by name.

A reward sees the episode's privileged state through an :class:`EpisodeState` (the label, the
target's body, the frozen recognizer's answers): it is the evaluator's side, never part of the
observation. Each gives a number after every step (:meth:`Reward.step`) and one at the episode's end
(:meth:`Reward.final`, added to the last step's reward):

=====================  ===================================================================  ===========
name                   value                                                                units
=====================  ===================================================================  ===========
``correct``            at the end: 1 when the frozen recognizer's A-Obs prediction (on the  0 or 1
                       clip collected after the handoff, else the P-Init clip, as the
                       evaluator scores it) is the label, else 0; 0 per step
``confidence_gain``    at the end: the recognizer's probability of the label on the A-Obs   probability,
                       clip minus that on the P-Init clip; 0 per step                       -1..1
``view_quality``       per step: the change of the visible-body fraction of the target      fraction,
                       from the head camera (ground-truth body points inside the image and  -1..1 per
                       not occluded, :func:`~affectsim_eval.episode.reference.view_quality`) step; sums
                       at the step's sim time; 0 at the end                                 to last - first
=====================  ===================================================================  ===========
"""

from __future__ import annotations

import abc
from typing import Protocol

import numpy as np

from affectsim_core.protocol import EMOTIONS
from affectsim_core.registry import Registry
from affectsim_perception.recognizers.base import Prediction


class EpisodeState(Protocol):
    """The privileged view of one running episode a reward reads (the environment implements it)."""

    label: str  # the target's emotion, one of EMOTIONS

    def visible_fraction(self) -> float:
        """Share (0..1) of the target's body visible from the head camera now."""

    def a_obs_prediction(self) -> Prediction:
        """The recognizer's answer on the A-Obs clip (P-Init's without a handoff); at the end only."""

    def p_init_prediction(self) -> Prediction:
        """The recognizer's answer on the P-Init clip; at the end only."""


class Reward(abc.ABC):
    """One reward kind; an instance serves one environment, episode after episode."""

    name = ""  # set by the registration (REWARDS)

    def reset(self, state: EpisodeState) -> None:
        """A new episode starts in ``state``."""

    def step(self, state: EpisodeState) -> float:
        """The reward for the step just taken (0 unless overridden)."""
        return 0.0

    @abc.abstractmethod
    def final(self, state: EpisodeState) -> float:
        """The reward at the episode's end (handoff and clip, or budget spent)."""


REWARDS: Registry[Reward] = Registry("gym reward", name_attr="name")


def label_probability(pred: Prediction, label: str) -> float:
    return float(np.asarray(pred.probs, float)[EMOTIONS.index(label)])


@REWARDS.register("correct")
class Correct(Reward):
    """1 when the final recognition (A-Obs, with the evaluator's P-Init fallback) is right, else 0."""

    def final(self, state: EpisodeState) -> float:
        return float(state.a_obs_prediction().label == state.label)


@REWARDS.register("confidence_gain")
class ConfidenceGain(Reward):
    """The label's probability on the A-Obs clip minus that on the P-Init clip."""

    def final(self, state: EpisodeState) -> float:
        return (label_probability(state.a_obs_prediction(), state.label)
                - label_probability(state.p_init_prediction(), state.label))


@REWARDS.register("view_quality")
class ViewQuality(Reward):
    """Per step, the change of the target's visible-body fraction from the head camera."""

    def reset(self, state: EpisodeState) -> None:
        self.first = self.last = state.visible_fraction()  # the episode's sum is the last minus this

    def step(self, state: EpisodeState) -> float:
        now = state.visible_fraction()
        gain, self.last = now - self.last, now
        return gain

    def final(self, state: EpisodeState) -> float:
        return 0.0
