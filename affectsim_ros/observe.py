"""``affectsim observe``: one acquisition on whatever robot is on the graph, recognised and stored.

For a real robot (``affectsim launch robot``) or the simulated one. Only the robot's own topics and
the project's nav and perception action servers are used, never a ``/affectsim/*`` bridge service:

1. P-Init: the clip the robot sees from where it stands, sampled from the camera stream at the
   protocol's 4 Hz times while it does not move (``clip_frames`` frames, 8 of them recognised);
2. A-Obs: ``/affectsim/acquire_observation`` (search, handoff, follow; the clip after the handoff,
   or P-Init's when there was none, as in the benchmark);
3. every recognizer of the perception node on both clips; the predictions are printed;
4. with ``--label`` (the emotion the experimenter knows the person expresses) the episode is stored
   as a record of the benchmark's schema in ``RUN/results.sqlite`` (family ``robot``; P-Ref, P-Mon,
   visibility and d* do not exist on a robot and are left out), so ``affectsim report RUN`` gives the
   same report as a simulated run, for the settings a robot has;
5. with ``--record DIR`` the whole session (P-Init's wait, the acquisition) is recorded to
   ``DIR/EPISODE_ID/`` (:mod:`affectsim_eval.episode.recording`: TF, both cameras, laser, odometry,
   map, /cmd_vel, detections, the clip, the A-Obs scores, markers; no ground truth on a robot).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.signals import SignalHandlerOptions

from affectsim_core.clips import Clip
from affectsim_core.errors import InvalidInput
from affectsim_core.names import check_name
from affectsim_core.protocol import EMOTIONS, ESPL_RADII, STEP_SECONDS, Outcome
from affectsim_core.provenance import code_version
from affectsim_core.record import ActiveSummary, EpisodeRecord
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import diagnostics_from_msg, from_time, image_msg, image_to_array, to_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.observer_client import ObserverClient
from affectsim_core.ros.sensors import rgb_array
from affectsim_core.ros.topics import OPTICAL_FRAME
from affectsim_eval.episode.recording_options import RecordingOptions
from affectsim_eval.run.config import trained_on
from affectsim_eval.run.store import ResultsStore
from affectsim_interfaces.action import AcquireObservation, Recognize
from affectsim_nav.ros_robot import current_frame, frame_observation

ROBOT = "robot"  # the scene and family of a record observed on a robot


def _still_clip(client: BridgeClient, n: int, timeout: float) -> np.ndarray:
    """(8, 224, 224, 3): ``n`` frames from the stream at the protocol's times from now, 8 sampled."""
    t0 = current_frame(client, timeout).stamp  # a frame whose TF is there: the first received may predate it
    frames, poses, times = [], [], []
    for k in range(n):
        due = t0 + k * STEP_SECONDS
        msg = client.wait_for("rgb", lambda m, due=due: from_time(m.header.stamp) >= due - 1e-6, timeout)
        obs = frame_observation(client, msg, k, timeout)
        frames.append(rgb_array(msg))
        poses.append(obs.camera_pose)
        times.append(obs.stamp)
    return Clip("p_init", np.array(times), frames, np.array(poses)).sampled()


def observe(label: str | None = None, out: Path | None = None, episode_id: str = "", clip_frames: int = 32,
            policy: str = "", target_description: str = "", timeout: float = 600.0,
            remaps: list[tuple[str, str]] = (), max_actions: int = 0, log=print, record_dir: Path | None = None,
            record: RecordingOptions | None = None) -> dict:
    """Run one observation (module docstring); returns {setting: {recognizer: label}} and the outcome.
    ``remaps``: (Fetch name, robot's name) of topics, as given to ``affectsim launch robot``;
    ``max_actions``: the A-Obs action budget (0: the protocol's 480); ``record_dir``: write an MCAP
    recording of the whole session to ``record_dir/EPISODE_ID`` with ``record`` (its options)."""
    if label is not None and label not in EMOTIONS:
        raise InvalidInput("--label", label, f"one of {', '.join(EMOTIONS)}")
    if out is not None and label is None:
        raise InvalidInput("--label", None, "the person's emotion, to store the observation in --out")
    if not 8 <= clip_frames <= 2400:
        raise InvalidInput("--clip-frames", clip_frames, "8..2400 frames at 4 Hz")
    episode_id = episode_id or time.strftime("robot_%Y%m%d_%H%M%S")
    check_name("--episode-id", episode_id)
    ensure_loopback(robot=True)
    # no rclpy signal handler: Ctrl-C must reach the code below, which cancels the goals (the nav node then
    # stops the base), instead of shutting the context down first
    rclpy.init(args=["--ros-args", *(a for old, new in remaps for a in ("-r", f"{old}:={new}"))],
               signal_handler_options=SignalHandlerOptions.NO)
    client = BridgeClient("affectsim_observe", topics=("rgb", "depth", "rgb_info", "tf", "tf_static"),
                          services=False)
    observer = recorder = None
    try:
        if record_dir is not None:
            from affectsim_eval.episode.recording import EpisodeRecorder  # rosbags: only when recording

            recorder = EpisodeRecorder(record_dir, record or RecordingOptions(best_effort_sensors=True),
                                       "affectsim_observe_recorder", log)
        observer = ObserverClient(client.node, timeout)  # the nav and perception actions
        observer.wait_for_servers(30.0, "is `affectsim launch robot` running on this ROS_DOMAIN_ID?")
        if recorder is not None:
            recorder.start(episode_id)
        log(f"[observe] {episode_id}: P-Init, {clip_frames} frames ({clip_frames * STEP_SECONDS:.0f} s) from here")
        clips = {"p_init": _still_clip(client, clip_frames, timeout)}
        start = current_frame(client, timeout).pose
        log(f"[observe] {episode_id}: A-Obs (policy {policy or 'the node default'})")
        seen: list[tuple[float, float]] = []  # the person's last located position (map), from the feedback

        def on_feedback(msg) -> None:
            if msg.feedback.person_detected and math.isfinite(msg.feedback.person.x):
                seen[:] = [(msg.feedback.person.x, msg.feedback.person.y)]

        res = observer.acquire(AcquireObservation.Goal(episode_id=episode_id, policy=policy, clip_frames=clip_frames,
                                                       target_description=target_description,
                                                       max_actions=max_actions),
                               on_feedback)  # GraphError when nothing was observed: nothing is stored
        fallback = not res.clip_frames
        clips["a_obs"] = clips["p_init"] if fallback else np.stack([image_to_array(m) for m in res.clip_frames])
        preds = {}
        for setting, frames in clips.items():
            goal = Recognize.Goal(frames=[image_msg(f, "rgb8", OPTICAL_FRAME, to_time(0.0)) for f in frames])
            preds[setting] = {p.recognizer: p for p in observer.recognize(goal).predictions}
        if recorder is not None:
            recorder.add_clip(list(res.clip_frames))
            if not fallback:
                recorder.add_predictions(list(preds["a_obs"].values()), from_time(res.clip_stamps[-1]))
            log(f"[observe] recorded in {recorder.finish()}")
    except BaseException:  # Ctrl-C and failures alike: no goal of this observation may go on moving the robot
        if observer is not None:
            try:
                observer.settle(5.0)
            except Exception as exc:  # noqa: BLE001 - the original failure is the one raised
                log(f"[observe] cancelling the goals failed: {exc}")
        raise
    finally:
        if recorder is not None:
            recorder.close()  # a recording not finished is dropped
        client.close()
        rclpy.shutdown()
    names = sorted(preds["a_obs"])
    log(f"[observe] A-Obs outcome {res.outcome}{' (the P-Init clip: no handoff)' if fallback else ''}, "
        f"{res.actions} actions, path {res.path_length:.2f} m")
    for n in names:
        log(f"[observe]   {n:>14}: " + ", ".join(
            f"{s} {preds[s][n].label or '-'} ({max(preds[s][n].probs):.2f})" for s in clips))
    summary = {"episode_id": episode_id, "outcome": res.outcome,
               "predictions": {s: {n: preds[s][n].label or None for n in names} for s in clips}}
    if out is not None:
        record = _record(episode_id, label, preds, names, res, fallback, start, seen[0] if seen else start[:2])
        ckpts = trained_on(tuple(names))  # this install's checkpoints, which a perception node here loads
        meta = {"config": {"split": ROBOT, "policy": policy or "default", "recognizers": names, "execution": "robot"},
                "code_version": code_version(), "checkpoints": {n: c["weights_sha256"] for n, c in ckpts.items()},
                "checkpoint_dataset_versions": {n: c["dataset_version"] for n, c in ckpts.items()}}
        Path(out).mkdir(parents=True, exist_ok=True)
        with ResultsStore.open(Path(out) / "results.sqlite", meta) as store:
            store.put({**record.to_dict(), "status": "ok", "reason": "", "wall_s": 0.0, "worker": ROBOT, "timing": {}})
        log(f"[observe] stored in {Path(out) / 'results.sqlite'}; `affectsim report {out}` for the report")
    return summary


def _record(episode_id: str, label: str, preds: dict, names: list[str], res, fallback: bool,
            start: tuple[float, float, float], person: tuple[float, float]) -> EpisodeRecord:
    """The benchmark's record of a robot observation; ``anchor``: where the person was last located."""
    traj = tuple((p.x, p.y, p.theta) for p in res.trajectory)
    d = diagnostics_from_msg(res)
    return EpisodeRecord(
        episode_id=episode_id, scene_id=ROBOT, family=ROBOT, challenge="", action="unknown", label=label,
        predictions={n: {s: preds[s][n].label or None for s in preds} for n in names},
        probs={n: {s: [float(v) for v in preds[s][n].probs] for s in preds} for n in names},
        outcomes={n: {s: preds[s][n].outcome for s in preds} for n in names},
        a_obs=ActiveSummary(Outcome(res.outcome), res.message.splitlines()[0] if res.message else "", fallback,
                            float(res.path_length), d, traj or (tuple(start),)),
        p_ref=None, visible={}, d_star={str(r): None for r in ESPL_RADII},
        anchor=tuple(float(v) for v in person), start=tuple(float(v) for v in start))

