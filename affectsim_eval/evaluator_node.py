"""Evaluator node: runs the benchmark's episodes through the graph (bridge, nav, perception) and
commits each paired record to the run's results store as it finishes; writes the report at the
end. A restarted evaluator resumes the run (episodes already stored are skipped).

Parameters (config/bench.yaml, launch arguments of the same names): ``split``, ``episodes``
(stratified subset size, 0 = whole split), ``seed``, ``episode_ids``, ``recognizers``, ``policy``,
``output_dir``, ``max_actions``, ``max_planner_calls``, ``retry_failed``, ``record`` (MCAP per
A-Obs episode), ``exit_when_done``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import rclpy
from rclpy.node import Node

from affectsim_eval.runner import (DATA_DIR, DEFAULT_RECOGNIZERS, EvalConfig, failure_reason, run_meta,
                                   save_thumbnail, select_episodes, thumbnails)
from affectsim_ros.core.errors import InvalidInput
from affectsim_ros.ros.node_main import run_node

PARAMS: dict[str, tuple[object, str]] = {
    "split": ("test", "dataset split: train, val or test"),
    "episodes": (100, "stratified subset size; 0 = the whole split"),
    "seed": (0, "seed of the subset"),
    "episode_ids": ([""], "explicit episode ids of the split (instead of a subset; set episodes to 0)"),
    "recognizers": (list(DEFAULT_RECOGNIZERS), "recognizers the perception node runs for every setting"),
    "policy": ("baseline", "A-Obs policy (the nav node's registry)"),
    "output_dir": ("results/bench", "run directory: results.sqlite, frames/, report.md"),
    "max_actions": (480, "A-Obs action budget"),
    "max_planner_calls": (80, "A-Obs global planner budget"),
    "retry_failed": (False, "re-run episodes recorded as failed"),
    "data_dir": ("", "directory with motions/, scenes/ and episodes/ ('' = the project's data/)"),
    "record": (False, "write an MCAP recording of every A-Obs episode to output_dir/recordings"),
    "exit_when_done": (True, "shut the node down after the report is written"),
}


class EvaluatorNode(Node):
    def __init__(self) -> None:
        super().__init__("evaluator")
        for name, (default, _desc) in PARAMS.items():
            self.declare_parameter(name, default)
        p = {n: self.get_parameter(n).value for n in PARAMS}
        self.cfg = EvalConfig(split=p["split"], episodes=int(p["episodes"]), seed=int(p["seed"]),
                              ids=tuple(i for i in p["episode_ids"] if i),
                              recognizers=tuple(p["recognizers"]), policy=p["policy"],
                              max_actions=int(p["max_actions"]), max_planner_calls=int(p["max_planner_calls"]))
        self.cfg.validate()
        if not p["output_dir"]:
            raise InvalidInput("parameter output_dir", p["output_dir"], "a directory path", where="evaluator")
        self.out = Path(p["output_dir"])
        self.retry_failed = bool(p["retry_failed"])
        self.exit_when_done = bool(p["exit_when_done"])
        self.record = bool(p["record"])
        self.data = Path(p["data_dir"]) if p["data_dir"] else DATA_DIR
        self.episodes = select_episodes(self.cfg, self.data)  # a missing dataset is refused here, at start
        self.error: str | None = None
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from affectsim_bridge.humans.library import Library
        from affectsim_eval.report import write_report
        from affectsim_eval.ros_evaluator import RosEpisodeEvaluator
        from affectsim_eval.store import ResultsStore

        log = self.get_logger()
        ev = None
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            with ResultsStore.open(self.out / "results.sqlite", run_meta(self.cfg, self.episodes, self.data)) as store:
                todo = store.pending([e["episode_id"] for e in self.episodes], retry_failed=self.retry_failed)
                pending = set(todo)
                eps = [e for e in self.episodes if e["episode_id"] in pending]
                log.info(f"{len(self.episodes)} {self.cfg.split} episodes, {len(self.episodes) - len(eps)} already "
                         f"stored in {self.out}, {len(eps)} to run")
                ev = RosEpisodeEvaluator(self, Library(self.data / "motions").load, self.data / "scenes",
                                         list(self.cfg.recognizers), self.cfg.policy,
                                         self.cfg.max_actions, self.cfg.max_planner_calls,
                                         record_dir=self.out / "recordings" if self.record else None)
                ev.wait_for_graph()
                t0 = time.perf_counter()
                for k, ep in enumerate(eps):
                    t = time.perf_counter()
                    try:
                        rec = {**ev.evaluate(ep), "status": "ok", "reason": ""}
                        save_thumbnail(self.out / "frames" / f"{ep['episode_id']}.jpg",
                                       thumbnails(ev.last_frames["p_init"], ev.last_frames["a_obs"]))
                    except Exception as exc:  # noqa: BLE001 - the failure is recorded, the run goes on
                        rec = {"episode_id": ep["episode_id"], "family": ep["family"], "label": ep["emotion"],
                               "status": "failed", "reason": failure_reason(exc)}
                        log.error(f"{ep['episode_id']} failed: {rec['reason']}")
                    store.put({**rec, "wall_s": time.perf_counter() - t, "worker": "ros"},
                              replace=self.retry_failed)
                    el = time.perf_counter() - t0
                    log.info(f"{len(self.episodes) - len(eps) + k + 1}/{len(self.episodes)} {ep['episode_id']} "
                             f"{rec['status']}  {el:.0f} s, ETA {el / (k + 1) * (len(eps) - k - 1):.0f} s")
            report = write_report(self.out)
            log.info(f"report: {report}")
        except Exception as exc:  # noqa: BLE001 - reported, then the node exits non-zero
            self.error = f"{type(exc).__name__}: {exc}"
            log.error(f"evaluation stopped: {self.error}")
        finally:
            if ev is not None:
                ev.close()
            if self.exit_when_done:
                rclpy.try_shutdown(context=self.context)


def main(args: list[str] | None = None) -> None:
    run_node(EvaluatorNode, "evaluator", args, threads=4)


if __name__ == "__main__":
    main()
