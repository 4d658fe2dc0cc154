"""``viewpoint-rec``: the recognizer in the loop decides whether a view is handed off or another is taken.

The recognizer here is a stand-in written for the test (fixed probabilities, every call kept): the rule
is under test, not a model; the shipped recognizers are consulted through the policy conformance test
(test_plugins.py), which makes this policy with the application's recognizer factory."""

import math

import numpy as np
import pytest

from affectsim_core.errors import InvalidInput
from affectsim_core.observation import Observation
from affectsim_core.person_tracking import Person, PersonDetection
from affectsim_core.protocol import STEP_SECONDS
from affectsim_nav.baseline import HANDOFF_STEPS
from affectsim_nav.head import BODY_TOP_M, fit_distance, vertical_fov
from affectsim_nav.planner import GridPlanner
from affectsim_nav.policy import create_policy
from affectsim_nav.recognizer_loop import CONFIDENT, REVIEW_MOVE_M, WINDOW_STEPS, RecognizerLoopPolicy
from affectsim_nav.viewpoint import FIT_MARGIN_RAD, STEP_BACK_BAND_M, WIDE_BAND_M

from test_viewpoint import CAMERA, _room

F = 2.0 / math.tan(math.radians(46.83) / 2)  # the Fetch head camera's focal length on a 4 x 4 image (px)


class StandInRecognizer:
    """Answers ``top`` for the first emotion (the rest shared), keeps what it was given."""

    def __init__(self, top: float) -> None:
        self.probs = np.array([top] + [(1.0 - top) / 4] * 4)
        self.calls: list[tuple[tuple[int, ...], str]] = []
        self.closed = False

    def probs_of(self, frames: np.ndarray) -> np.ndarray:
        self.calls.append((frames.shape, str(frames.dtype)))
        return self.probs

    def close(self) -> None:
        self.closed = True


class StandInDetector:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _policy(top: float) -> RecognizerLoopPolicy:
    info = _room()
    policy = RecognizerLoopPolicy(detector=StandInDetector(), recognizer=StandInRecognizer(top))
    policy.reset(info, GridPlanner(info))
    return policy


def _obs(x: float, step: int) -> Observation:
    """The robot at (x, 5) m facing +x, its head camera 1.1 m up."""
    camera = CAMERA.copy()
    camera[:2, 3] = x, 5.0
    return Observation.make(np.full((4, 4, 3), step, np.uint8), np.ones((4, 4), np.float32), (F, F, 2.0, 2.0),
                            camera, (x, 5.0, 0.0), STEP_SECONDS * step, step)


def _sees(policy: RecognizerLoopPolicy, person) -> None:
    """The policy's detector finds ``person`` (map xy) straight ahead in every frame, all 13 keypoints."""
    det = PersonDetection(np.zeros((33, 2)), np.ones(33), (0.0, 0.0, 1.0, 1.0), np.zeros((33, 3)))
    policy._target = lambda o: policy._seen(o, Person(person, math.dist(person, o.pose[:2]), 0.0, 13, (0.5,) * 3,
                                                      (0.5,) * 3, det))


def _until_handoff(policy, x: float, start: int, most: int = 40):
    """Decisions from step ``start`` at (x, 5) until a handoff or a goal (at most ``most``)."""
    out = []
    for k in range(start, start + most):
        out.append(policy.act(_obs(x, k)))
        if out[-1].handoff or out[-1].goal is not None:
            break
    return out


def test_a_confident_recognizer_hands_off_where_the_person_is_seen_after_a_full_window():
    policy, person = _policy(top=0.9), (4.2, 5.0)  # 2.2 m ahead: the whole body fits
    _sees(policy, person)
    decisions = _until_handoff(policy, 2.0, 0)
    assert decisions[-1].handoff and all(d.goal is None for d in decisions)
    # not after the baseline's three sightings: the recognizer is asked once the last WINDOW_STEPS frames saw them
    assert WINDOW_STEPS <= len(decisions) <= WINDOW_STEPS + HANDOFF_STEPS, len(decisions)
    assert policy.recognizer.calls == [((8, 224, 224, 3), "uint8")]
    assert policy.confidences == [pytest.approx(0.9)]


def test_an_unsure_recognizer_sends_the_robot_to_another_view_once_then_it_hands_off():
    policy, person = _policy(top=CONFIDENT - 0.1), (4.2, 5.0)
    _sees(policy, person)
    decisions = _until_handoff(policy, 2.0, 0)
    goal = decisions[-1].goal
    assert goal is not None and not decisions[-1].handoff and decisions[-1].stage == "handoff"
    assert math.dist(goal[:2], (2.0, 5.0)) >= REVIEW_MOVE_M - 0.05  # somewhere else
    assert WIDE_BAND_M[0] - 0.05 <= math.dist(goal[:2], person) <= WIDE_BAND_M[1] + 0.05
    assert abs(math.remainder(goal[2] - math.atan2(person[1] - goal[1], person[0] - goal[0]), math.tau)) < 1e-9
    policy.on_goal_result(True)
    after = _until_handoff(policy, 2.0, 100)  # at the new view: the three sightings hand off, no second question
    assert after[-1].handoff and len(after) <= HANDOFF_STEPS + 2, after  # the arrival's turn to them first
    assert len(policy.recognizer.calls) == 1


def test_an_unsure_recognizer_of_a_person_too_near_to_fit_steps_back_beyond_the_fit_distance():
    policy, person = _policy(top=0.2), (3.4, 5.0)  # 1.4 m ahead: the feet are cut off
    _sees(policy, person)
    goal = _until_handoff(policy, 2.0, 0)[-1].goal
    fit = fit_distance(1.1, BODY_TOP_M, vertical_fov(_obs(2.0, 0)) - FIT_MARGIN_RAD)
    ahead = 0.0  # this camera sits above the base centre
    assert goal is not None and fit + ahead - 0.05 <= math.dist(goal[:2], person) <= fit + STEP_BACK_BAND_M + 0.1


def test_a_person_lost_while_the_window_fills_is_not_asked_about():
    """Seen three times, then missed: the recognizer is not asked about frames without the person."""
    policy, person = _policy(top=0.9), (4.2, 5.0)
    _sees(policy, person)
    first = [policy.act(_obs(2.0, k)) for k in range(HANDOFF_STEPS)]
    assert not any(d.handoff for d in first)
    seen = policy._target
    policy._target = lambda o: policy._seen(o, None)
    policy.act(_obs(2.0, HANDOFF_STEPS))
    policy._target = seen
    decisions = _until_handoff(policy, 2.0, HANDOFF_STEPS + 1)
    assert decisions[-1].handoff
    assert len(decisions) >= WINDOW_STEPS - HANDOFF_STEPS - 1 and len(policy.recognizer.calls) == 1


def test_a_wait_given_up_long_ago_does_not_cut_short_the_next_one():
    """Seen three times, then lost for long: when the person is seen again, the wait for a full window
    begins again rather than the recognizer being asked at once about frames without them."""
    policy, person = _policy(top=0.9), (4.2, 5.0)
    _sees(policy, person)
    assert not any(policy.act(_obs(2.0, k)).handoff for k in range(HANDOFF_STEPS))
    policy._target = lambda o: policy._seen(o, None)
    for k in range(HANDOFF_STEPS, 60):  # lost: the robot looks for them (a goal may be planned: left unreached)
        policy.act(_obs(2.0, k))
    policy.goal = None
    _sees(policy, person)
    decisions = _until_handoff(policy, 2.0, 60)
    assert decisions[-1].handoff and len(decisions) >= WINDOW_STEPS and len(policy.recognizer.calls) == 1


def test_the_policy_needs_a_recognizer_factory_and_closes_what_it_was_given():
    made = []

    def detector():
        made.append(StandInDetector())
        return made[-1]

    with pytest.raises(InvalidInput) as err:
        create_policy("viewpoint-rec", detector)
    assert err.value.field == "recognizer" and "committee" in str(err.value)
    assert made == []  # refused before any model is made
    asked = []
    policy = create_policy("viewpoint-rec", detector, lambda name: asked.append(name) or StandInRecognizer(0.5))
    assert asked == ["committee"]
    policy.close()
    assert policy.recognizer.closed and policy.detector.closed
