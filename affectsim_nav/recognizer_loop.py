"""``viewpoint-rec``: ``viewpoint`` with a recognizer in the loop deciding whether a view is good enough.

``viewpoint`` hands off after three stable sightings wherever they happen. Whether that view reads well
is what the recognizers conclude from it, and their confidence says so: on 480 val episodes of
``viewpoint`` (2d54fac), the committee's A-Obs clips with a top probability below 0.4 (214 of 480) were
right 39 % of the time, where the reference observer's views of the same episodes were right 57 %; above
0.6 the robot's views read better than the reference's (docs/observation.md). So this policy asks a frozen
recognizer before it hands off:

- when the three stable sightings are reached, it holds still facing the person until the last
  :data:`WINDOW_STEPS` frames (2 s) saw them (at most :data:`WINDOW_STEPS` steps more), and gives
  those frames, sampled as a recognition clip is, to the recognizer;
- when the recognizer's top probability is at least :data:`CONFIDENT`, it hands off there;
- otherwise it moves once an episode to another view of the person before it hands off: back to where the
  whole body fits when the person is too near for that (``viewpoint-fit``'s step back), else to the
  approach's viewpoint (1.8-2.3 m, a three-quarter view preferred) at least :data:`REVIEW_MOVE_M` from
  where it stands; after that move the three stable sightings hand off as in ``viewpoint``.

The recognizer is named by :attr:`RecognizerLoopPolicy.uses_recognizer` (``committee``) and made by the
application (:func:`~affectsim_nav.policy.create_policy`); a subclass naming another one, registered under
its own name, is the same policy with that recognizer. Since the recognizer consulted is one the benchmark
scores, the results of this policy are a separate "recognizer in the loop" variant, never a robot-only
policy's. The constants were set on the val split.

Measured on those 480 val episodes against ``viewpoint``: group A-Obs +0.7 [-2.9, +4.2], E-SPL@1 -2.7
[-6.0, +0.7], mean path 1.13 -> 2.52 m. The confidence before the handoff tells whether ``viewpoint``'s
clip from there will be read right with an AUC of 0.61 only: the recognizer's doubt is about the
behaviour more than the view, and the other view recovered a quarter of what P-Ref's view gains where it
doubts. So this is the worked example of a recognizer in the loop, not a better observer.
"""

from __future__ import annotations

import numpy as np

from affectsim_core.clips import resize, sample_indices
from affectsim_core.observation import Observation
from affectsim_core.person_tracking import Person, PersonDetector
from affectsim_core.protocol import CLIP_FRAMES
from affectsim_nav.baseline import _sighting, horizontal_fov
from affectsim_nav.policy import POLICIES, Decision, LoopRecognizer
from affectsim_nav.viewpoint import ViewpointPolicy

WINDOW_STEPS = 8  # steps (2 s) of frames the recognizer is given
CONFIDENT = 0.4  # the recognizer's top probability from which a view is handed off at once
REVIEWS = 1  # moves to another view an episode
REVIEW_MOVE_M = 0.75  # m: the other view lies at least this far from the base


@POLICIES.register("viewpoint-rec")
class RecognizerLoopPolicy(ViewpointPolicy):
    """``viewpoint`` asking a frozen recognizer whether to hand off: see the module docstring."""

    uses_recognizer = "committee"

    def __init__(self, detector: PersonDetector, recognizer: LoopRecognizer) -> None:
        super().__init__(detector)
        self.recognizer = recognizer

    def reset(self, info, planner) -> None:
        super().reset(info, planner)
        self.window: list[tuple[np.ndarray, bool]] = []  # the last WINDOW_STEPS (RGB frame, person seen)
        self.waited_from: int | None = None  # the step the last wait for a full window began
        self.reviews = 0
        self.confidences: list[float] = []  # the recognizer's top probability at each check (for inspection)

    def close(self) -> None:
        super().close()
        self.recognizer.close()

    def _target(self, obs: Observation) -> Person | None:
        return self._seen(obs, super()._target(obs))

    def _seen(self, obs: Observation, target: Person | None) -> Person | None:
        """Keep the frame of ``obs`` (the observation's read-only array, not a copy) and whether ``target``
        was seen in it, until the handoff; return ``target``."""
        if not self.handed_off:
            self.window = (self.window + [(obs.rgb, target is not None)])[-WINDOW_STEPS:]
        return target

    def _before_handoff(self, obs: Observation, target: Person) -> Decision | None:
        """Hand off (None) when the recognizer is confident on the last frames, or after the one move to
        another view; hold still (centring the person) while the window fills; else move to another view."""
        if self.reviews >= REVIEWS:
            return None
        full = len(self.window) == WINDOW_STEPS and all(seen for _, seen in self.window)
        if self.waited_from is None or obs.step - self.waited_from > 2 * WINDOW_STEPS:
            self.waited_from = obs.step  # a wait begins (an older one was given up: the person was lost)
        if not full and obs.step - self.waited_from < WINDOW_STEPS:
            return Decision(self._centre(target, horizontal_fov(obs)), stage="handoff", sighting=_sighting(target))
        self.waited_from = None
        frames = [f for f, _ in self.window]
        given = sample_indices(len(frames), CLIP_FRAMES)  # resized as a recognition clip's, only those given
        probs = self.recognizer.probs_of(np.stack([resize(frames[i]) for i in given]))
        self.confidences.append(float(np.max(probs)))
        if self.confidences[-1] >= CONFIDENT:
            return None
        self.reviews += 1
        band = self._step_back_band(obs, target)
        return self._move_to_view(self._approach(obs, target.xy, band, min_move=REVIEW_MOVE_M), target)
