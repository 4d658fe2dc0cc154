"""Evaluator node: runs the benchmark's episodes through the graph (bridge, nav, perception) with the
one episode loop, committing each paired record to the run's results store as it finishes; writes
the report at the end. A restarted evaluator resumes the run (episodes already stored are skipped).

Parameters: :data:`PARAMS` (``config/bench.yaml``; launch arguments of the same names).
"""

from __future__ import annotations

import threading
from pathlib import Path

import rclpy
from rcl_interfaces.srv import GetParameters, ListParameters
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python

from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.humans.reactive import HUMANS_MODES
from affectsim_core.atomic import locked
from affectsim_core.episode import Episode
from affectsim_core.protocol import FAMILIES, MAX_ACTIONS, MAX_PLANNER_CALLS, PAPER_FAMILIES, SPLITS
from affectsim_core.ros import calls
from affectsim_core.ros.params import Param, declare_params
from affectsim_core.timing import StageTimes
from affectsim_eval.run.config import (DATA_DIR, DEFAULT_EPISODES, MAX_BUDGET, EvalConfig, EvalData, Shard, run_meta,
                                      select_episodes)
from affectsim_eval.run.loop import evaluate_safely, run_episodes
from affectsim_eval.episode.orchestrator import evaluate_episode
from affectsim_eval.episode.passive_cache import OFF, open_cache
from affectsim_eval.run.report import write_report
from affectsim_core.ros.observer_client import GraphError
from affectsim_eval.episode.ros_eval_world import RosEvalWorld
from affectsim_eval.episode.recording_options import DEFAULT_MAX_MB, RecordingOptions
from affectsim_nav.base_control import EXECUTIONS
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS, RECOGNIZERS

PARAMS: tuple[Param, ...] = (
    Param("split", "test", "dataset split", choices=SPLITS),
    Param("episodes", DEFAULT_EPISODES, "stratified subset size; 0 = the whole split", bounds=(0, 1_000_000)),
    Param("seed", 0, "seed of the subset", bounds=(0, 2**31 - 1)),
    Param("episode_ids", [""], "explicit episode ids of the split (instead of a subset; set episodes to 0)"),
    Param("recognizers", list(DEFAULT_RECOGNIZERS), "recognizers the perception node runs for every setting",
          choices=RECOGNIZERS.names),
    Param("policy", "baseline", "A-Obs policy (the nav node's registry)", choices=POLICIES.names),
    Param("backend", DEFAULT_BACKEND, "simulator backend of the bridge (the evaluator keeps a geometry copy)",
          choices=BACKENDS.names),
    Param("execution", "lockstep", "the nav node's execution mode, stored with the run (continuous time: cmd_vel, "
          "nav2)", choices=EXECUTIONS),
    Param("families", list(PAPER_FAMILIES), "episode families the subset or split is drawn from (the paper's three; "
          "evolving: emotions that change within the episode)", choices=FAMILIES),
    Param("humans", "scripted", "people: scripted (replay their motion: the paper's protocol) or reactive (notice the "
          "robot and respond according to their emotion); sent with every load_world", choices=HUMANS_MODES),
    Param("output_dir", "results/bench", "run directory: results.sqlite, frames/, report.md",
          check=lambda v: bool(str(v).strip()), expected="a directory path"),
    Param("max_actions", MAX_ACTIONS, "A-Obs action budget", bounds=(1, MAX_BUDGET)),
    Param("max_planner_calls", MAX_PLANNER_CALLS, "A-Obs global planner budget", bounds=(0, MAX_BUDGET)),
    Param("retry_failed", False, "re-run episodes recorded as failed"),
    Param("allow_dataset_mismatch", False, "run although a checkpoint was trained on another dataset version "
          "(the report states it)"),
    Param("episode_attempts", 3, "times an episode is evaluated before it is stored as failed (after a failure "
          "the evaluator waits for the graph to answer again)", bounds=(1, 10)),
    Param("data_dir", "", "directory with motions/, scenes/ and episodes/ ('' = the project's data/)"),
    Param("record", False, "write an MCAP recording of every A-Obs episode to output_dir/recordings"),
    Param("record_depth", True, "recordings hold the depth image and its camera_info"),
    Param("record_max_mb", DEFAULT_MAX_MB, "MB of messages (before compression) one recording may hold; beyond "
          "it camera images are left out", bounds=(1.0, 1_000_000.0)),
    Param("passive_cache", "off", "directory where the passive settings are looked up and kept ('' = data_dir's "
          "cache/passive, 'off' = none; off while recording, which records what is rendered)"),
    Param("exit_when_done", True, "shut the node down after the report is written"),
    Param("shard", "0/1", "part k/N of the run this evaluator runs (every N-th of its episodes from the k-th, counted "
          "from 0); the N parts share output_dir, and the last to finish writes the report"),
    Param("timeout_s", 600.0, "seconds any request to the bridge, nav or perception node may take", bounds=(1.0, 3600.0)),
)


REPORT_LOCK = ".report.lock"  # in output_dir: the parts of a sharded run write the report one at a time


class Stopped(Exception):
    """The node was asked to stop (SIGINT/SIGTERM): the run ends without storing the interrupted episode."""


class EvaluatorNode(Node):
    def __init__(self) -> None:
        super().__init__("evaluator")
        p = declare_params(self, PARAMS)
        self.cfg = EvalConfig(split=p["split"], episodes=int(p["episodes"]), seed=int(p["seed"]),
                              ids=tuple(i for i in p["episode_ids"] if i), recognizers=tuple(p["recognizers"]),
                              policy=p["policy"], max_actions=int(p["max_actions"]),
                              max_planner_calls=int(p["max_planner_calls"]), backend=p["backend"],
                              execution=p["execution"], humans=p["humans"], families=tuple(p["families"])).validate()
        self.p = p
        self.out = Path(p["output_dir"])
        self.data = Path(p["data_dir"]) if p["data_dir"] else DATA_DIR
        self.shard = Shard.parse(p["shard"], "evaluator parameter shard")
        self.episodes = select_episodes(self.cfg, self.data)  # a missing dataset is refused here, at start
        self.meta = run_meta(self.cfg, self.episodes, self.data, bool(p["allow_dataset_mismatch"]))  # so is a mismatch
        self.error: str | None = None
        self._stopping = threading.Event()
        self._job = threading.Thread(target=self._run, name="evaluator-run", daemon=True)
        self._job.start()

    def stop_job(self, timeout: float) -> bool:
        """Stop the run (the node's entry point calls this on SIGINT/SIGTERM) and wait up to ``timeout``
        s for it; whether it ended. An episode the stop interrupts is not stored, so a rerun evaluates it."""
        self._stopping.set()
        self._job.join(timeout)
        return not self._job.is_alive()

    def _bridge_parameters(self) -> dict[str, object]:
        """Every parameter of the bridge node (camera, backend, motion library, noise, ...): the bridge
        renders the passive views, so its settings are part of the passive cache's key."""
        timeout = float(self.p["timeout_s"])
        names = calls.call(self.create_client(ListParameters, "/bridge/list_parameters"),
                           ListParameters.Request(), timeout, "/bridge/list_parameters").result.names
        values = calls.call(self.create_client(GetParameters, "/bridge/get_parameters"),
                            GetParameters.Request(names=list(names)), timeout, "/bridge/get_parameters").values
        return {n: repr(parameter_value_to_python(v)) for n, v in sorted(zip(names, values))}

    def _run(self) -> None:
        log = self.get_logger()
        world = None
        try:
            data, times = EvalData(self.data), StageTimes()
            world = RosEvalWorld(self, list(self.cfg.recognizers), self.cfg.policy, self.cfg.backend,
                                 float(self.p["timeout_s"]),
                                 record_dir=self.out / "recordings" if self.p["record"] else None,
                                 record=RecordingOptions(depth=bool(self.p["record_depth"]),
                                                         max_mb=float(self.p["record_max_mb"]), ground_truth=True),
                                 lockstep=self.cfg.execution == "lockstep")
            world.wait_for_graph()
            setting = OFF if self.p["record"] else str(self.p["passive_cache"])
            renderer = self._bridge_parameters() if setting != OFF else {}
            cache = open_cache(setting, self.data, self.cfg.recognizers, self.cfg.backend, warn=log.warning,
                               renderer=renderer)
            if cache is not None:
                log.info(f"[eval] passive settings cached in {cache.dir}")

            def evaluate(ep: Episode):
                try:
                    return evaluate_episode(ep, world, data.scene(ep.scene_id), data.load_motion,
                                            self.cfg.max_actions, self.cfg.max_planner_calls, times=times,
                                            humans=self.cfg.humans, cache=cache)
                except Exception:
                    if not self._stopping.is_set():
                        try:  # a goal whose reply was lost must not move the next attempt's robot
                            world.settle()
                        except Exception as exc:  # noqa: BLE001 - the episode's own failure is the one reported
                            log.warning(f"{ep.episode_id}: cancelling its goals failed: {exc}")
                    raise

            def recover(reason: str) -> None:
                if self._stopping.is_set():
                    raise Stopped("the evaluator is stopping")
                log.warning(f"episode failed: {reason}; waiting for the graph, then evaluating it again")
                world.wait_for_graph(float(self.p["timeout_s"]))

            def serial(todo: list[Episode]):
                for ep in todo:
                    if self._stopping.is_set():
                        return
                    res = evaluate_safely(ep, evaluate, "ros", times, int(self.p["episode_attempts"]), recover,
                                          retry_on=(TimeoutError, GraphError))
                    if self._stopping.is_set():
                        log.warning(f"{ep.episode_id}: interrupted by the stop, not stored")
                        return
                    yield res

            summary = run_episodes(self.out, self.meta, self.episodes, serial,
                                   "the ROS graph", bool(self.p["retry_failed"]), log=log.info, shard=self.shard)
            if cache is not None:
                log.info(f"[eval] passive cache: {cache.hits} episodes found, {cache.misses} computed")
            if self._stopping.is_set():
                return
            reported = summary.complete and summary.run_ok > 0  # a report needs one finished episode
            if reported:  # the whole run is stored: this evaluator is the last (or only) one of its parts
                with locked(self.out / REPORT_LOCK):  # parts finishing together write it one after the other
                    log.info(f"report: {write_report(self.out)}")
            elif not summary.complete:
                log.info(f"[eval] shard {self.shard} done; the report is written by the part that finishes last")
            if summary.failures:  # the node exits non-zero, and with it the launcher
                first = ", ".join(i for i, _ in summary.failures[:5])
                self.error = (f"{len(summary.failures)} of {summary.total} episodes are stored as failed ({first}"
                              f"{', ...' if len(summary.failures) > 5 else ''}: {summary.failures[0][1]}); "
                              f"{'see report.md; ' if reported else ''}rerun with retry_failed:=true")
                log.error(self.error)
        except Stopped:
            pass
        except Exception as exc:  # noqa: BLE001 - reported, then the node exits non-zero
            self.error = f"{type(exc).__name__}: {exc}"
            log.error(f"evaluation stopped: {self.error}")
        finally:
            if world is not None:
                world.close()
            if self.p["exit_when_done"] and not self._stopping.is_set():
                rclpy.try_shutdown(context=self.context)
