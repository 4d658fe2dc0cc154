"""The Gymnasium environment (docs/gym.md) on the small data directory, with real MuJoCo renders and
the frozen recognizer and detector: Gymnasium's own checker, seeds that map to episodes and repeat,
parity with the evaluator's records when the baseline policy drives it, the budget as truncation,
worker-process vector environments, every registered reward, and one-line errors for bad arguments."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from helpers import episode_ids

import affectsim_eval.gym  # noqa: F401 - registers the environment id
from affectsim_core.actions import Action
from affectsim_core.errors import InvalidInput
from affectsim_core.person_tracking import DETECTORS
from affectsim_core.protocol import EMOTIONS
from affectsim_core.record import comparable
from affectsim_eval.gym import ENV_ID
from affectsim_eval.gym.env import ActiveObservationEnv, make_vector_env
from affectsim_eval.gym.rewards import REWARDS
from affectsim_eval.gym.spaces import HANDOFF
from affectsim_eval.run.config import EvalConfig
from affectsim_eval.run.runner import DETECTOR, EpisodeWorker
from affectsim_nav.policy import POLICIES, create_policy

ROOT = Path(__file__).resolve().parents[1]
RECOGNIZER = "pose-temporal"
TURNS = [Action.TURN_LEFT, Action.FORWARD, Action.TURN_RIGHT, Action.FORWARD, Action.STOP] * 2


@pytest.fixture(scope="module")
def env(small_data):
    e = gymnasium.make(ENV_ID, split="test", reward="correct+view_quality", max_actions=8, data_dir=small_data[0])
    yield e
    e.close()


def _run(env, actions, **reset):
    """Observations, rewards and the last info of an episode driven by ``actions`` (then STOP)."""
    obs, _ = env.reset(**reset)
    seen, rewards = [obs], []
    for k in range(10_000):
        obs, r, term, trunc, info = env.step(int(actions[k]) if k < len(actions) else int(Action.STOP))
        seen.append(obs)
        rewards.append(r)
        if term or trunc:
            return seen, rewards, info
    raise AssertionError("the episode never ended")


def test_gymnasiums_env_checker_passes(env):
    check_env(env.unwrapped, skip_render_check=True)


def test_a_seed_maps_to_an_episode_and_repeats_it_exactly(env):
    eps = env.unwrapped.episodes
    a = _run(env, TURNS, seed=len(eps) + 2)
    b = _run(env, TURNS, seed=2)
    assert a[2]["episode_id"] == b[2]["episode_id"] == eps[2].episode_id
    assert len(a[0]) == len(b[0]) and a[1] == b[1]
    for x, y in zip(a[0], b[0]):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)
    c = _run(env, TURNS, options={"episode_id": eps[5].episode_id})
    assert c[2]["episode_id"] == eps[5].episode_id


def test_nothing_of_the_episode_reaches_the_agent_before_its_end(env):
    obs, info = env.reset(seed=1)
    assert set(info) == {"target_description"} and set(obs) == set(env.observation_space.spaces)
    obs, r, term, trunc, info = env.step(int(Action.TURN_LEFT))
    assert not (term or trunc) and set(info) == {"target_description"}
    *_, last = _run(env, [], seed=1)
    assert last["label"] in EMOTIONS and last["episode_id"] == env.unwrapped.episodes[1].episode_id


def test_the_budget_is_the_truncation_and_a_handoff_after_it_still_counts(env):
    seen, rewards, info = _run(env, [Action.TURN_LEFT] * 20, seed=0)
    assert len(rewards) == 9 and info["outcome"] == "budget_exhausted" and info["fallback"]  # 8 actions, the 9th refused
    assert len(env.unwrapped.active.log.actions) == 8
    assert seen[-2]["status"][1] == 0.0  # no action left
    seen, rewards, info = _run(env, [Action.TURN_LEFT] * 8 + [HANDOFF], seed=0)
    n_clip = env.unwrapped.n_clip
    assert info["outcome"] == "handoff" and not info["fallback"] and len(rewards) == 8 + n_clip
    assert seen[-1]["status"][0] == 1.0 and seen[-1]["status"][2] == 1.0


FAMILIES = ("action_grounded", "dyadic", "observation_controlled")


@pytest.mark.parametrize("name,families", [("baseline", FAMILIES[:1]),  # every family: ~50 s
                                           pytest.param("viewpoint", FAMILIES, marks=pytest.mark.slow)])
def test_driving_the_environment_with_a_shipped_policy_gives_the_evaluators_records(small_data, name, families):
    data, _ = small_data
    ids = tuple(i for fam in families for i in episode_ids(data, fam))
    cfg = EvalConfig(split="test", ids=ids, recognizers=(RECOGNIZER,), policy=name, max_actions=60, max_planner_calls=12)
    worker = EpisodeWorker(cfg.as_dict(), str(data))
    env = ActiveObservationEnv(split="test", recognizer=RECOGNIZER, max_actions=60, max_planner_calls=12, record=True,
                               data_dir=data)
    policy = create_policy(name, lambda: DETECTORS.create(DETECTOR))
    env.drive(policy)
    outcomes = set()
    try:
        by_id = {e.episode_id: e for e in env.episodes}
        for i in ids:
            expected = worker.evaluate(by_id[i]).record
            env.reset(options={"episode_id": i})
            while True:
                _, _, term, trunc, info = env.step_policy()
                if term or trunc:
                    break
            got = info["record"]
            assert comparable(got.to_dict()) == comparable(expected.to_dict()), i
            assert info["prediction"] == expected.predictions[RECOGNIZER]["a_obs"]
            assert info["outcome"] == expected.a_obs.outcome and trunc == (info["outcome"] == "budget_exhausted")
            outcomes.add(info["outcome"])
    finally:
        env.close()
        policy.close()
        worker.close()
    assert "handoff" in outcomes  # the clip path is compared, not only budget exhaustion


def test_worker_process_vector_environments_step_and_reset(small_data, env):
    venv = make_vector_env(2, split="test", detector=None, max_actions=2, data_dir=small_data[0])
    try:
        obs, _ = venv.reset(seed=4)  # env k gets seed 4 + k: episodes 4 and 5
        assert obs["rgb"].shape == (2, *venv.single_observation_space["rgb"].shape)
        for k in range(3):  # the third action is past the budget of two: both truncate
            obs, r, term, trunc, info = venv.step(np.array([int(Action.TURN_LEFT)] * 2))
            assert list(trunc) == [k == 2] * 2 and not term.any() and np.isfinite(r).all()
        assert list(info["episode_id"]) == [e.episode_id for e in env.unwrapped.episodes[4:6]]
        obs, *_ = venv.step(np.array([int(Action.STOP)] * 2))  # the next step resets (autoreset)
        assert (obs["status"][:, 1] == 1.0).all()
    finally:
        venv.close()


@pytest.mark.parametrize("name", REWARDS.names())
def test_every_reward_conforms(small_data, name):
    env = ActiveObservationEnv(split="test", reward=name, detector=None, max_actions=4, data_dir=small_data[0])
    try:
        for actions in ([Action.FORWARD] * 5, [Action.TURN_LEFT, HANDOFF]):
            _, rewards, info = _run(env, actions, seed=3)
            assert all(math.isfinite(r) and -1.0 <= r <= 1.0 for r in rewards), rewards
            if name == "correct":
                assert rewards[:-1] == [0.0] * (len(rewards) - 1)
                assert rewards[-1] == float(info["prediction"] == info["label"])
            if name == "view_quality":
                st = env.unwrapped
                assert math.isclose(sum(rewards), st.visible_fraction() - st.rewards[name].first, abs_tol=1e-9)
    finally:
        env.close()


@pytest.mark.parametrize("field,kwargs", [
    ("split", {"split": "dev"}), ("family", {"family": "crowds"}), ("humans", {"humans": "robots"}),
    ("reward", {"reward": "speed"}), ("recognizer", {"recognizer": "oracle"}), ("detector", {"detector": "eyes"}),
    ("image_size", {"image_size": (0, 10)}), ("image_size", {"image_size": (1280, 960)}),
    ("max_actions", {"max_actions": 0}), ("data_dir", {"data_dir": "/nonexistent"}),
    ("head", {"head": "nod"}), ("head", {"head": "frame", "detector": None}),
])
def test_bad_arguments_are_refused_in_one_line_naming_them(small_data, field, kwargs):
    with pytest.raises(InvalidInput) as e:
        ActiveObservationEnv(**{"data_dir": small_data[0], **kwargs})
    msg = str(e.value)
    assert e.value.field == field and "\n" not in msg and "expected" in msg and repr(kwargs[field])[:6] in msg


def test_bad_actions_and_episode_ids_are_refused(env):
    env.reset(seed=0)
    with pytest.raises(InvalidInput, match=r"action=7 is invalid; expected an integer 0\.\.4"):
        env.step(7)
    with pytest.raises(InvalidInput, match="options.episode_id='nope'"):
        env.reset(options={"episode_id": "nope"})


def test_the_trained_example_policy_acts_on_what_the_environment_shows(env):
    """examples/ppo_policy.py (the policy `affectsim eval --policy ppo` loads) computes from each Observation the
    features train_ppo.py built from the environment's observation: driving the environment, it takes the
    network's greedy action on the environment's own observation at every step."""
    spec = importlib.util.spec_from_file_location("ppo_policy_example", ROOT / "examples" / "ppo_policy.py")
    module = importlib.util.module_from_spec(spec)
    u = env.unwrapped
    try:
        spec.loader.exec_module(module)  # registers "ppo"
        policy = create_policy("ppo", lambda: DETECTORS.create(DETECTOR))
        u.drive(policy)
        obs, _ = u.reset(seed=0)
        last, handed = int(Action.STOP), False
        for _ in range(6):
            want = int(np.argmax(module.logits(policy.w, module.features(obs["detection"], handed, last))))
            obs, _, term, trunc, _ = u.step_policy()
            assert u.active.log.actions[-1] == (int(Action.STOP) if want == HANDOFF else want)
            handed, last = handed or want == HANDOFF, want
            assert (u.active.log.handoff_step is not None) == handed
            if term or trunc:
                break
        policy.close()
    finally:
        u.drive(None)
        POLICIES._entries.pop("ppo", None)


def test_with_head_frame_each_step_tilts_the_head_toward_the_located_person(small_data):
    """A student of the ``viewpoint`` teacher gets its head: the head looks down at the person located
    from the detector, and the camera the agent sees through moves with it (at most 0.39 rad a step);
    the detector runs once a step."""
    env = ActiveObservationEnv(split="test", max_actions=8, data_dir=small_data[0], head="frame")
    try:
        for seed in range(len(env.episodes)):
            env.reset(seed=seed)
            if DETECTORS.create(DETECTOR).detect(np.asarray(env.active.obs.rgb)) is not None:
                break
        else:
            pytest.skip("no episode of the small data shows its person at the start")
        pitch = lambda: -math.asin(float(env.active.obs.camera_pose[2, 2]))  # noqa: E731  + looks down
        assert pitch() == pytest.approx(0.0, abs=1e-9)
        calls, detect = [], env.detector.detect
        env.detector.detect = lambda rgb: calls.append(1) or detect(rgb)
        env.step(int(Action.STOP))
        assert 0.0 < pitch() <= 1.57 * 0.25 + 1e-9
        assert len(calls) == 1  # the framing reuses the observation's detection: one detector run a step
    finally:
        env.close()
