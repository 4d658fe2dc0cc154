"""``affectsim/ActiveObservation-v0``: the active observation (A-Obs) of docs/protocol.md §5-§6 as a
Gymnasium environment, over the evaluator's own in-process world and active loop.

One episode of the environment is one A-Obs run of a dataset episode: the world is loaded as the
evaluator loads it (:class:`~affectsim_eval.episode.worlds.InProcessEvalWorld`), and every ``step``
is one decision of the evaluator's active loop (:meth:`affectsim_nav.active.ActiveEpisode.step`): the
same executor, budget, clipping, handoff and clip collection, so an agent that acts as a policy does
gets the evaluator's trajectory. Spaces: :mod:`affectsim_eval.gym.spaces`; rewards:
:mod:`affectsim_eval.gym.rewards`; the whole contract: docs/gym.md.

- **Episodes and seeds.** The episodes are the ``split``'s (of ``family``, default the paper's three
  families), sorted by id. ``reset(seed=s)`` takes episode ``s mod N``; ``reset()`` without a seed takes
  one drawn from the environment's generator (seeded by the last seed given); ``options={"episode_id":
  ID}`` takes that one.
- **End.** ``terminated`` once the clip (twice the motion's duration, from the handoff) is collected,
  or the episode fails; ``truncated`` when the acquisition budget is spent: after ``max_actions``
  primitive actions without a handoff, any action but :data:`~affectsim_eval.gym.spaces.HANDOFF`
  ends the episode (outcome ``budget_exhausted``), as in the evaluator.
- **What the agent sees.** The observation and ``info`` carry nothing the policy interface does not
  (no episode id, label or ground truth; ``info["target_description"]`` is the dyadic clothing
  description of :class:`~affectsim_core.observation.EpisodeInfo`). Only the last step's ``info``
  carries the episode's id, label, outcome, the recognizer's A-Obs prediction and, with
  ``record=True``, the evaluator's :class:`~affectsim_core.record.EpisodeRecord` of the episode.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.humans.reactive import HUMANS_MODES
from affectsim_core.actions import Action
from affectsim_core.clips import clip_times, sample_indices
from affectsim_core.episode import Episode
from affectsim_core.errors import InvalidInput
from affectsim_core.observation import EpisodeInfo, Observation
from affectsim_core.person_tracking import DETECTORS, Person, PersonDetection
from affectsim_core.protocol import FAMILIES, MAX_ACTIONS, MAX_PLANNER_CALLS, PAPER_FAMILIES, SPLITS, Outcome
from affectsim_core.record import EpisodeRecord
from affectsim_eval.dataset.episodes import load_split
from affectsim_eval.episode.orchestrator import evaluate_episode, stream_until
from affectsim_eval.episode.passive import episode_info, p_init_views, placements, visible_fraction
from affectsim_eval.episode.streams import is_evolving, stream_times
from affectsim_eval.episode.worlds import Acquisition, InProcessEvalWorld, SimulatedRobot, acquisition
from affectsim_eval.gym.rewards import REWARDS, Reward
from affectsim_eval.gym.spaces import (CAMERA_SIZE, DEFAULT_IMAGE_SIZE, HANDOFF, action_space, detect_person,
                                       detection_features, map_observation, observation_space, resize_depth, resize_rgb)
from affectsim_eval.run.config import DATA_DIR, MAX_BUDGET, EvalData
from affectsim_eval.run.runner import DETECTOR
from affectsim_nav.active import ActiveEpisode
from affectsim_nav.head import BODY_TOP_M, HeadPointer, body_top, vertical_fov
from affectsim_nav.planner import GridPlanner
from affectsim_nav.policy import Decision, Policy
from affectsim_perception.recognizers import RECOGNIZERS
from affectsim_perception.recognizers.base import Prediction

DEFAULT_RECOGNIZER = "pose-temporal"  # the frozen recognizer the rewards and the final info use
HEAD_MODES = ("level", "frame")  # how the head moves under step(): never, or framing the located person


class Commanded(Policy):
    """The environment's side of the policy interface: :meth:`act` returns the decision the agent's
    action stands for, or, when a :class:`Policy` drives (``drive``), that policy's decision."""

    def __init__(self) -> None:
        self.pending: Decision | None = None
        self.driver: Policy | None = None

    def reset(self, info: EpisodeInfo, planner: GridPlanner) -> None:
        if self.driver is not None:
            self.driver.reset(info, planner)

    def act(self, obs: Observation) -> Decision:
        if self.pending is not None:
            decision, self.pending = self.pending, None
            return decision
        if self.driver is None:
            raise RuntimeError("no action given and no driving policy")
        return self.driver.act(obs)

    def on_goal_result(self, reached: bool) -> None:
        if self.driver is not None:
            self.driver.on_goal_result(reached)

    def way_clear(self, obs: Observation) -> bool:
        return self.driver is None or self.driver.way_clear(obs)


class _Acquired:
    """The in-process world with an acquisition already made (the environment's episode), so the
    orchestrator builds the evaluator's record around it."""

    def __init__(self, world: InProcessEvalWorld, acq: Acquisition) -> None:
        self.world, self.geometry, self.acq = world, world.geometry, acq
        self.plans_during_acquisition = False  # the geometry is the in-process world's one backend

    def load(self, *args, **kwargs) -> None:
        self.world.load(*args, **kwargs)

    def render(self, views):
        return self.world.render(views)

    def acquire(self, *args, **kwargs) -> Acquisition:
        return self.acq

    def recognize(self, frames):
        return self.world.recognize(frames)

    def recognize_stream(self, frames, times):
        return self.world.recognize_stream(frames, times)

    def vad_recognizers(self):
        return self.world.vad_recognizers()


def _reward_weights(reward: str | Mapping[str, float]) -> dict[str, float]:
    """``reward`` as {name: weight}: one name (weight 1), names joined by "+" or a mapping."""
    weights = {n: 1.0 for n in reward.split("+")} if isinstance(reward, str) else dict(reward)
    for name, w in weights.items():
        if name not in REWARDS:
            raise InvalidInput("reward", name, f"one of {', '.join(REWARDS.names())} (or several joined by '+')")
        if not isinstance(w, (int, float)) or not math.isfinite(w):
            raise InvalidInput(f"reward.{name}", w, "a finite weight")
    if not weights:
        raise InvalidInput("reward", reward, "at least one reward name")
    return {n: float(w) for n, w in weights.items()}


class ActiveObservationEnv(gym.Env):
    """A-Obs of the ``split``'s episodes as a Gymnasium environment (module docstring; docs/gym.md).

    ``family``: one of FAMILIES (default: the paper's three); ``humans``: scripted or reactive;
    ``reward``: a name of :data:`~affectsim_eval.gym.rewards.REWARDS`, names joined by "+", or {name:
    weight}; ``recognizer``: the frozen recognizer of the rewards and the final info; ``detector``: the
    person detector of the observation's ``detection`` (None: zeros); ``image_size``: (width, height)
    px of ``rgb`` and ``depth``; ``max_actions`` / ``max_planner_calls``: the acquisition budget;
    ``record``: put the evaluator's record in the last step's info (renders the passive settings: slow);
    ``head``: "level" (the head never moves under :meth:`step`) or "frame" (each :meth:`step` tilts it to
    frame the detector's located person, as the ``viewpoint`` policy does: a student of that teacher
    gets its head); ``data_dir``: holds motions/, scenes/, episodes/."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, split: str = "train", family: str | None = None, humans: str = "scripted",
                 reward: str | Mapping[str, float] = "correct", recognizer: str = DEFAULT_RECOGNIZER,
                 detector: str | None = DETECTOR, image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE,
                 max_actions: int = MAX_ACTIONS, max_planner_calls: int = MAX_PLANNER_CALLS, record: bool = False,
                 data_dir: str | Path = DATA_DIR, backend: str = DEFAULT_BACKEND,
                 render_mode: str | None = None, head: str = "level") -> None:
        if split not in SPLITS:
            raise InvalidInput("split", split, f"one of {', '.join(SPLITS)}")
        if family is not None and family not in FAMILIES:
            raise InvalidInput("family", family, f"None (the paper's families) or one of {', '.join(FAMILIES)}")
        if humans not in HUMANS_MODES:
            raise InvalidInput("humans", humans, f"one of {', '.join(HUMANS_MODES)}")
        self.weights = _reward_weights(reward)
        if recognizer not in RECOGNIZERS:
            raise InvalidInput("recognizer", recognizer, f"one of {', '.join(RECOGNIZERS.names())}")
        if detector is not None and detector not in DETECTORS:
            raise InvalidInput("detector", detector, f"None or one of {', '.join(DETECTORS.names())}")
        size = tuple(image_size) if isinstance(image_size, (tuple, list)) else ()
        if (len(size) != 2 or not all(isinstance(v, int) and v >= 1 for v in size)
                or size[0] > CAMERA_SIZE[0] or size[1] > CAMERA_SIZE[1]):
            raise InvalidInput("image_size", image_size, f"(width, height) px, 1..{CAMERA_SIZE[0]} x 1..{CAMERA_SIZE[1]}")
        if not (isinstance(max_actions, int) and 1 <= max_actions <= MAX_BUDGET):
            raise InvalidInput("max_actions", max_actions, f"1..{MAX_BUDGET}")
        if not (isinstance(max_planner_calls, int) and 0 <= max_planner_calls <= MAX_BUDGET):
            raise InvalidInput("max_planner_calls", max_planner_calls, f"0..{MAX_BUDGET}")
        if backend not in BACKENDS:
            raise InvalidInput("backend", backend, f"one of {', '.join(BACKENDS.names())}")
        if head not in HEAD_MODES:
            raise InvalidInput("head", head, f"one of {', '.join(HEAD_MODES)}")
        if head == "frame" and detector is None:
            raise InvalidInput("head", head, "'level' without a detector (framing needs the person located)")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise InvalidInput("render_mode", render_mode, f"None or one of {self.metadata['render_modes']}")
        root = Path(data_dir)
        if not (root / "episodes" / "manifest.json").is_file():
            raise InvalidInput("data_dir", str(root), "a data directory with a built dataset (episodes/manifest.json)")
        families = PAPER_FAMILIES if family is None else (family,)
        self.episodes: list[Episode] = sorted((e for e in load_split(split, root / "episodes") if e.family in families),
                                              key=lambda e: e.episode_id)
        if not self.episodes:
            raise InvalidInput("family", family, f"a family with episodes in the {split} split of {root}")
        self.split, self.family, self.humans, self.image_size = split, family, humans, size
        self.max_actions, self.max_planner_calls, self.record, self.render_mode = (
            max_actions, max_planner_calls, record, render_mode)
        self.head = head
        self.observation_space = observation_space(size)
        self.action_space = action_space()
        self.data = EvalData(root)
        self.detector = None if detector is None else DETECTORS.create(detector)
        self.recognizer_name = recognizer
        self.commanded = Commanded()
        self.world = InProcessEvalWorld(BACKENDS.create(backend), self.commanded,
                                        {recognizer: RECOGNIZERS.create(recognizer)})
        self.rewards: dict[str, Reward] = {n: REWARDS.create(n) for n in self.weights}
        self.active: ActiveEpisode | None = None
        self._ep: Episode | None = None
        self._final: dict[str, Prediction] = {}
        self._detected: tuple[PersonDetection | None, Person | None] = (None, None)  # of the last observation

    # ------------------------------------------------------------------ the privileged state rewards read
    @property
    def label(self) -> str:
        return self._ep.emotion

    def visible_fraction(self) -> float:
        obs = self.active.obs
        return visible_fraction(self.world.backend, np.array([obs.stamp]), np.asarray(obs.camera_pose)[None])

    def a_obs_prediction(self) -> Prediction:
        if "a_obs" not in self._final:
            acq = acquisition(self.active.result())
            self._final["a_obs"] = (self.world.recognize(acq.frames)[self.recognizer_name] if acq.frames is not None
                                    else self.p_init_prediction())
        return self._final["a_obs"]

    def p_init_prediction(self) -> Prediction:
        """The recognizer on the P-Init clip, rendered as the evaluator renders it (world loaded again)."""
        if "p_init" not in self._final:
            ep, scene, people = self._ep, self.data.scene(self._ep.scene_id), self._people
            self.world.load(ep, scene, people, self.humans)
            full = clip_times(self._target.motion.duration)
            frames, _ = self.world.render(p_init_views(ep.start, self.world.backend.robot.head_tilt,
                                                       full[sample_indices(len(full))]))
            self._final["p_init"] = self.world.recognize(frames)[self.recognizer_name]
        return self._final["p_init"]

    # ------------------------------------------------------------------ gymnasium
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"episode_id"}
        if unknown:
            raise InvalidInput("options", sorted(unknown), "only 'episode_id'")
        if "episode_id" in options:
            by_id = {e.episode_id: e for e in self.episodes}
            if options["episode_id"] not in by_id:
                families = self.family or "the paper's families"
                raise InvalidInput("options.episode_id", options["episode_id"],
                                   f"an episode id of the environment's episodes ({self.split}, {families})")
            ep = by_id[options["episode_id"]]
        elif seed is not None:
            ep = self.episodes[seed % len(self.episodes)]
        else:
            ep = self.episodes[int(self.np_random.integers(len(self.episodes)))]
        self._ep, self._final = ep, {}
        self._people = placements(ep, self.data.load_motion)
        self._target = next(p for p in self._people if p.is_target)
        st = stream_times(self._target) if is_evolving(self._target) else None
        self._stream_until = stream_until(st)
        self.n_clip = len(clip_times(self._target.motion.duration))
        self.world.load(ep, self.data.scene(ep.scene_id), self._people, self.humans)
        self.episode_info = episode_info(ep, self.world.backend.navigable)
        self._map = map_observation(self.episode_info)
        self.commanded.pending = None
        self._pointer = HeadPointer()
        self.active = ActiveEpisode(SimulatedRobot(self.world.backend), self.episode_info, self.commanded,
                                    self.max_actions, self.max_planner_calls, stream_until=self._stream_until)
        self.active.fix_clip(self.n_clip)
        for r in self.rewards.values():
            r.reset(self)
        return self._observation(), self._info()

    def step(self, action):
        if not self.action_space.contains(action):
            raise InvalidInput("action", action, f"an integer 0..{HANDOFF} (STOP, FORWARD, TURN_LEFT, TURN_RIGHT, HANDOFF)")
        a = int(action)
        handed_off = self.active is not None and self.active.log.handoff_step is not None
        if a == HANDOFF:
            decision = Decision(Action.STOP, stage="follow", handoff=True)
        else:
            decision = Decision(Action(a), stage="follow" if handed_off else "search")
        if self.head == "frame":
            tilt = self._frame(self.active.obs)
            decision = decision if tilt is None else replace(decision, head_tilt=tilt)
        return self._advance(decision)

    def _frame(self, obs: Observation) -> float | None:
        """The head tilt framing the detector's located person (:class:`HeadPointer`: where last seen for
        a while without one, then level), or None when the head already points there."""
        det, person = self._detected  # obs's detection, made once for the observation's features
        top = None if det is None else body_top(det, obs)
        return self._pointer.command(obs.camera_pose, obs.step, None if person is None else person.xy,
                                     BODY_TOP_M if top is None else top, vertical_fov(obs))

    def drive(self, policy: Policy | None) -> None:
        """Let a registered :class:`Policy` decide (:meth:`step_policy`) from the next ``reset`` on: it gets
        the episode's :class:`EpisodeInfo` and the counted planner, as the evaluator gives them; None stops."""
        self.commanded.driver = policy

    def step_policy(self):
        """One step decided by the driving policy (:meth:`drive`) on the raw observation: any
        :class:`Decision` (goals, planner calls counted against the budget, a handoff with an action)."""
        if self.commanded.driver is None:
            raise InvalidInput("policy", None, "a policy given to drive() before reset")
        return self._advance(None)

    def _advance(self, decision: Decision | None):
        if self.active is None or self.active.outcome is not None:
            raise InvalidInput("step", "after the episode ended" if self.active else "before reset",
                               "reset() first")
        self.commanded.pending = decision
        self.active.step("clip", self.n_clip)
        outcome = self.active.outcome
        reward = sum(w * self.rewards[n].step(self) for n, w in self.weights.items())
        info = self._info()
        if outcome is not None:
            reward += sum(w * self.rewards[n].final(self) for n, w in self.weights.items())
            info.update(self._final_info(outcome))
        truncated = outcome == Outcome.BUDGET_EXHAUSTED
        return self._observation(), float(reward), outcome is not None and not truncated, truncated, info

    def _observation(self) -> dict[str, np.ndarray]:
        obs, log = self.active.obs, self.active.log
        self._detected = detect_person(self.detector, obs)
        handed = log.handoff_step is not None
        used = log.handoff_step if handed else len(log.actions)
        status = np.array([float(handed), 1.0 - min(used, self.max_actions) / self.max_actions,
                           min(len(self.active.times), self.n_clip) / self.n_clip], np.float32)
        x, y, yaw = obs.pose
        return {"rgb": resize_rgb(obs.rgb, self.image_size), "depth": resize_depth(obs.depth, self.image_size),
                "pose": np.array([x, y, math.atan2(math.sin(yaw), math.cos(yaw))], np.float32),
                "map": self._map[0].copy(), "map_origin": self._map[1].copy(),
                "detection": detection_features(self.detector, obs, self._detected), "status": status}

    def _info(self) -> dict[str, Any]:
        return {"target_description": self.episode_info.target_description or ""}

    def _final_info(self, outcome: Outcome) -> dict[str, Any]:
        """What the last step's info adds, the episode being over: id, label, outcome, the A-Obs prediction."""
        pred = self.a_obs_prediction()
        out = {"episode_id": self._ep.episode_id, "label": self._ep.emotion, "outcome": str(outcome),
               "message": self.active.message, "prediction": pred.label, "probs": np.asarray(pred.probs, float),
               "fallback": self.active.log.handoff_step is None}
        if self.record:
            out["record"] = self._record()
        return out

    def _record(self) -> EpisodeRecord:
        """The evaluator's record of this episode around this acquisition (passive settings rendered now)."""
        ep = self._ep
        acq = acquisition(self.active.result(), self._stream_until)
        return evaluate_episode(ep, _Acquired(self.world, acq), self.data.scene(ep.scene_id), self.data.load_motion,
                                self.max_actions, self.max_planner_calls, humans=self.humans).record

    def render(self):
        if self.render_mode == "rgb_array" and self.active is not None:
            return np.array(self.active.obs.rgb)
        return None

    def close(self) -> None:
        if self.detector is not None:
            self.detector.close()
            self.detector = None
        for r in self.world.recognizers.values():
            r.close()
        self.world.recognizers = {}
        if self.world.backend is not None:
            self.world.backend.close()
            self.world.backend = None


def make_vector_env(num_envs: int, autoreset_mode: str = "NextStep", **kwargs) -> gym.vector.AsyncVectorEnv:
    """``num_envs`` environments with the same arguments in worker processes (spawned: each owns its
    renderer); ``autoreset_mode``: Gymnasium's (``NextStep``, ``SameStep`` or ``Disabled``)."""
    if not (isinstance(num_envs, int) and num_envs >= 1):
        raise InvalidInput("num_envs", num_envs, "a positive integer")
    modes = [m.value for m in gym.vector.AutoresetMode]
    if autoreset_mode not in modes:
        raise InvalidInput("autoreset_mode", autoreset_mode, f"one of {', '.join(modes)}")
    return gym.vector.AsyncVectorEnv([partial(ActiveObservationEnv, **kwargs) for _ in range(num_envs)],
                                     context="spawn", autoreset_mode=gym.vector.AutoresetMode(autoreset_mode))
