"""One benchmark episode, evaluated: the one orchestration of docs/protocol.md §5-§8.

For an episode and an :class:`~affectsim_eval.episode.worlds.EvalWorld` (in-process or the ROS graph):

1. the privileged ``geometry`` backend is loaded with the episode and the passive settings' views
   are planned on it (P-Init: camera fixed at x0; P-Ref: the reference observer; P-Mon: the room's
   monitor), at the 8 sampled instants of a clip of twice the motion's duration, with d*(r);
2. the world is loaded at the episode start and runs the active observation (A-Obs); without a
   stable handoff A-Obs falls back to the paired P-Init clip. Where the acquisition leaves the
   geometry backend alone (the ROS graph: the nodes acquire) step 1 runs in a second thread during
   step 2, on the spare core of a lockstep acquisition;
3. the world instantiates the episode again and renders the planned views (every step starts from
   a loaded episode, so the record does not depend on their order);
4. every setting's clip goes to every recognizer (the same frames for all);
5. the paired :class:`~affectsim_core.record.EpisodeRecord`: predictions, the A-Obs summary, the
   reference observer's choice, the visible-body fractions and d*(r), floats rounded so that
   records compare exactly.

An evolving episode (the target's clip changes emotion) is also observed as window streams over
one interval in every setting (:mod:`affectsim_eval.episode.streams`); the record gains ``streams``.

With reactive people (``humans="reactive"``) the passive settings show them reacting to the robot
standing at x0 (the virtual cameras of P-Ref and P-Mon are never noticed), A-Obs shows them reacting
to the robot's acquisition, and the record gains the social measures
(:mod:`affectsim_eval.episode.social`), computed on the geometry backend replayed along the trajectory.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from affectsim_bridge.views import View
from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import Scene
from affectsim_core.clips import clip_times, sample_indices
from affectsim_core.episode import Episode
from affectsim_core.protocol import CLIP_FRAMES, ESPL_RADII, PASSIVE_SETTINGS, SETTINGS, STEP_SECONDS
from affectsim_core.record import ActiveSummary, AffectStreams, EpisodeRecord, ReferenceChoice, SocialSummary
from affectsim_core.timing import NULL, StageTimes
from affectsim_eval.scoring.metrics import d_star
from affectsim_eval.episode.passive import passive_views, placements, visible_fraction
from affectsim_eval.episode.passive_cache import PassiveCache, PassiveResult
from affectsim_eval.episode.reference import ReferencePlan
from affectsim_eval.episode.social import replay_reactions, social_summary
from affectsim_eval.episode.streams import is_evolving, stream_times, streams_record
from affectsim_eval.episode.worlds import Acquisition, EvalWorld
from affectsim_perception.recognizers.base import Prediction


@dataclass(frozen=True)
class EvaluatedEpisode:
    """The record of one episode and the P-Init and A-Obs clips (``frames``: the recognizer inputs,
    (8, 224, 224, 3) uint8; A-Obs's is P-Init's on a fallback)."""

    record: EpisodeRecord
    frames: dict[str, np.ndarray]


def _r(x: float, nd: int = 6) -> float:
    return round(float(x), nd)


def evaluate_episode(ep: Episode, world: EvalWorld, scene: Scene, load_motion: Callable,
                     max_actions: int, max_planner_calls: int, times: StageTimes = NULL,
                     humans: str = "scripted", cache: PassiveCache | None = None) -> EvaluatedEpisode:
    """Observe ``ep`` in every setting in ``world``, recognise every clip, build the record;
    ``humans``: "scripted" (the paper's protocol) or "reactive"; ``cache``: where the passive
    settings are looked up first and stored after (the record is the same either way)."""
    people = placements(ep, load_motion)
    target = next(p for p in people if p.is_target)
    full = clip_times(target.motion.duration)
    idx = sample_indices(len(full))
    g = world.geometry
    streamed = is_evolving(target)
    st = stream_times(target) if streamed else None
    key = cache.key(ep, humans, scene.source) if cache is not None else ""
    passive = cache.get(key) if cache is not None else None

    def plan() -> tuple[dict[str, list[View]], ReferencePlan | None] | None:
        """On the geometry copy: load the episode and, unless cached, plan the passive settings."""
        g.load(scene, ep.start, tuple(people), humans_mode=humans, reaction_seed=ep.seed)
        return passive_views(ep, g, scene, full, idx) if passive is None else None

    def dstar() -> dict[str, float | None]:
        with times("d_star"):
            return episode_d_star(ep, g.navigable)

    with ThreadPoolExecutor(1) as pool:
        # through the ROS graph the nodes acquire and the copy is idle: it plans meanwhile (spare core)
        planning = pool.submit(lambda: (plan(), dstar())) if passive is None and world.plans_during_acquisition \
            else None
        if planning is None:
            with times("passive"):
                views = plan()
            planned = (views, dstar() if passive is None else None)
        world.load(ep, scene, people, humans)  # time and pose at the episode start for A-Obs
        acq = world.acquire(ep, len(full), max_actions, max_planner_calls, stream_until=stream_until(st))
        planned = planning.result() if planning is not None else planned
    if passive is None:
        with times("passive"):
            choice, seen, clips, stream = _render_passive(ep, world, scene, people, humans, full, idx, st, planned[0])
    social = None
    if humans == "reactive":
        replay_reactions(g, scene, ep.start, people, ep.seed, acq.trajectory)
        social = social_summary(g, acq.trajectory)
    fallback = acq.frames is None
    with times("recognition"):
        if passive is None:
            predicted = {s: world.recognize(clips[s]) for s in PASSIVE_SETTINGS}
            windows = {s: world.recognize_stream(stream[s], st) for s in PASSIVE_SETTINGS} if streamed else None
        p_init = clips["p_init"] if passive is None else passive.p_init_frames
        frames = {"p_init": p_init, "a_obs": p_init if fallback else acq.frames}
        preds = {**(predicted if passive is None else passive.predictions), "a_obs": world.recognize(frames["a_obs"])}
        streams = None
        if streamed:
            names = sorted(preds["p_init"])
            enough = acq.stream_frames is not None and len(acq.stream_frames) >= CLIP_FRAMES
            windowed = {**(windows if passive is None else passive.streams),
                        "a_obs": world.recognize_stream(acq.stream_frames, acq.stream_times)
                        if enough else {n: [] for n in names}}
            streams = streams_record(target, st, windowed, world.vad_recognizers())
    if passive is None:
        passive = PassiveResult(choice, seen, predicted, windows, p_init, planned[1])
        if cache is not None:
            cache.put(key, passive)
    visible = {**passive.visible, "a_obs": passive.visible["p_init"] if fallback
               else visible_fraction(g, acq.times, acq.camera_poses)}
    record = episode_record(ep, preds, acq, fallback, passive.plan, {s: visible[s] for s in SETTINGS},
                            passive.d_star, social, streams)
    return EvaluatedEpisode(record, frames)


def stream_until(st: np.ndarray | None) -> float | None:
    """Until when (sim s) the A-Obs stream of an evolving episode with stream times ``st`` is kept; None
    for another episode (no stream)."""
    return None if st is None else float(st[-1] + STEP_SECONDS / 2)


def _render_passive(ep: Episode, world: EvalWorld, scene: Scene, people, humans: str, full: np.ndarray,
                    idx: np.ndarray, st: np.ndarray | None,
                    planned: tuple[dict[str, list[View]], ReferencePlan | None]):
    """Render the passive settings planned by :func:`passive_views` (``planned``: the views and the
    reference observer's plan) on the geometry backend (loaded with the episode) and measure them: the
    reference observer's choice, the visible-body fractions, the clips and, for an evolving episode,
    the passive streams' frames (over the stream times ``st``)."""
    g = world.geometry
    views, plan = planned
    world.load(ep, scene, people, humans)
    rendered = {s: world.render(views[s]) for s in PASSIVE_SETTINGS}
    lens = {s: views[s][0].intrinsics(g.head_intrinsics) for s in PASSIVE_SETTINGS}  # P-Mon: the monitor's
    seen = {s: visible_fraction(g, full[idx], rendered[s][1], lens[s]) for s in PASSIVE_SETTINGS}
    stream = None
    if st is not None:  # the same interval in every setting, P-Ref planned over the stream's times
        sviews, _ = passive_views(ep, g, scene, st, np.arange(len(st)))
        stream = {s: world.render(sviews[s])[0] for s in PASSIVE_SETTINGS}
    choice = None if plan is None else (plan.frame, plan.distance, plan.angle)
    return choice, seen, {s: rendered[s][0] for s in PASSIVE_SETTINGS}, stream


def episode_d_star(ep: Episode, nav: NavigableSpace) -> dict[str, float | None]:
    """d*(r) (m) for every E-SPL radius r: the geodesic from the start to the target region on ``nav``
    (the static navmesh); None where the region is empty or unreachable."""
    anchor = np.array([ep.target.x, ep.target.y])
    start = np.array(ep.start_position[:2], float)
    out = {}
    for r in ESPL_RADII:
        v = d_star(nav, start, anchor, float(r))
        out[str(r)] = None if v is None else _r(v)
    return out


def episode_record(ep: Episode, predictions: Mapping[str, Mapping[str, Prediction]], acq: Acquisition,
                   fallback: bool, plan: tuple[str, float, float] | None, visible: Mapping[str, float],
                   dstar: Mapping[str, float | None], social: SocialSummary | None = None,
                   streams: AffectStreams | None = None) -> EpisodeRecord:
    """The paired record of one episode from ``predictions[setting][recognizer]``, the acquisition,
    the reference observer's choice ``plan`` (frame, distance m, angle rad) and ``dstar``
    (:func:`episode_d_star`)."""
    target = ep.target
    anchor = np.array([target.x, target.y])
    start = np.array(ep.start_position[:2], float)
    names = sorted(next(iter(predictions.values())))
    d = acq.diagnostics
    diag = type(d)(**{k: (_r(v) if isinstance(v, float) else v) for k, v in d.to_dict().items()})
    msg = acq.message.splitlines()[0] if acq.message else ""
    return EpisodeRecord(
        episode_id=ep.episode_id, scene_id=ep.scene_id, family=ep.family, challenge=ep.challenge or "",
        action=ep.action, label=ep.emotion,
        predictions={n: {s: predictions[s][n].label for s in SETTINGS} for n in names},
        probs={n: {s: [_r(np.float32(v)) for v in predictions[s][n].probs] for s in SETTINGS} for n in names},
        outcomes={n: {s: predictions[s][n].outcome for s in SETTINGS} for n in names},
        a_obs=ActiveSummary(acq.outcome, msg, bool(fallback), diag.path_length, diag,
                            tuple((_r(x), _r(y), _r(yaw)) for x, y, yaw in acq.trajectory)),
        p_ref=None if plan is None else ReferenceChoice(plan[0], _r(plan[1]), _r(plan[2])),
        visible={s: _r(v, 4) for s, v in visible.items()},
        d_star=dict(dstar), anchor=(_r(anchor[0]), _r(anchor[1])),
        start=(_r(start[0]), _r(start[1]), _r(ep.start.yaw)), social=social, streams=streams)
