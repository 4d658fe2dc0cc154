"""Evolving-affect benchmark (``affectsim bench evolving``): the evolving family's stratified test
subset evaluated in-process and through the ROS graph, the two compared record by record, and the
segment, transition and VAD tables (docs/affect.md).

Two results stores under the work directory (each resumes when killed): ``in_process``
(``affectsim eval --family evolving``) and ``graph`` (``affectsim launch bench families:=evolving``),
the same episodes and recognizers. Printed: how many records are identical, then per recognizer
and setting the group's measures from the in-process run (with the paired P-Init / P-Ref / P-Mon /
A-Obs columns), as in the report's "Evolving affect" sections.
"""

from __future__ import annotations

import time
from pathlib import Path

from affectsim_core.atomic import write_json
from affectsim_core.record import EpisodeRecord, comparable
from affectsim_eval.run.config import DATA_DIR, EvalConfig, select_episodes
from affectsim_eval.scoring.metrics import compute_all
from affectsim_eval.run.report import write_report
from affectsim_eval.run.runner import run_eval
from affectsim_eval.run.store import ResultsStore
from affectsim_eval.scoring import markdown as md
from affectsim_ros.launcher import GraphProcesses
from affectsim_ros.benches import add_dataset_options, add_out, bench

AFFECT_METRICS = ("affect_segments", "affect_transitions", "affect_vad")


def _rows(run: Path) -> dict[str, dict]:
    with ResultsStore.open(run / "results.sqlite") as st:
        return {r["episode_id"]: r for r in st.records("ok")}


def run(out: Path | None = None, episodes: int = 100, split: str = "test", work: Path | None = None,
        workers: int = 2, graph: bool = True, log=print, allow_dataset_mismatch: bool = False,
        data: Path = DATA_DIR) -> dict:
    """Evaluate ``episodes`` stratified evolving episodes of ``split`` (of ``data``) in-process and
    (``graph``) through the ROS graph; the measures and the comparison."""
    work = Path(work or "results/bench_evolving")
    cfg = EvalConfig(split=split, episodes=episodes, families=("evolving",))
    ids = [e.episode_id for e in select_episodes(cfg.validate(), data)]
    s = run_eval(work / "in_process", cfg, workers, log=log, allow_dataset_mismatch=allow_dataset_mismatch,
                 data=data)
    log(f"[bench evolving] in-process: {s.done} evaluated, {s.skipped} already stored, {s.failed} failed, {s.wall:.0f} s")
    write_report(work / "in_process")
    res: dict = {"episodes": len(ids), "split": split, "in_process_s": round(s.wall, 1)}
    if graph:
        t0 = time.perf_counter()
        args = {"recognizers": ",".join(cfg.recognizers), "families": "evolving", "episodes": "0",
                "episode_ids": ",".join(ids), "output_dir": str(work / "graph"),
                "allow_dataset_mismatch": "true" if allow_dataset_mismatch else "false"}
        params = {"bridge": {"motion_library": str(Path(data) / "motions")}, "evaluator": {"data_dir": str(data)}}
        with GraphProcesses("bench", args=args, extra_params=params, log_dir=work / "graph" / "logs") as g:
            while g.poll()["evaluator"] is None:
                time.sleep(0.5)
            if g.poll()["evaluator"] != 0:
                log(f"[bench evolving] the graph's evaluator exited {g.poll()['evaluator']} "
                    f"(see {work / 'graph' / 'logs' / 'evaluator.log'})")
        res["graph_s"] = round(time.perf_counter() - t0, 1)
        a, b = _rows(work / "in_process"), _rows(work / "graph")
        same = [i for i in ids if i in a and i in b and comparable(a[i]) == comparable(b[i])]
        res["compared"] = {"in_both": len(set(a) & set(b) & set(ids)), "identical": len(same)}
        log(f"[bench evolving] graph vs in-process: {len(same)} identical of {res['compared']['in_both']} in both runs")
    records = [EpisodeRecord.from_dict(r, str(work)) for r in _rows(work / "in_process").values()]
    res["measures"] = compute_all(records, AFFECT_METRICS)
    log(table(res))
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench evolving] {out}")
    return res


def table(res: dict) -> str:
    """Per recognizer and setting: segment-count accuracy, mean tIoU, segment emotion accuracy,
    transition F1, delay, and VAD CCC per dimension (Markdown)."""
    seg, tr, vad = (res["measures"][m] for m in AFFECT_METRICS)
    head = ["recognizer", "setting", "count acc %", "mean tIoU %", "emotion acc %", "transition F1 %", "delay s",
            "CCC valence", "CCC arousal", "CCC dominance"]
    rows = []
    for rec, by in seg.items():
        for s, m in by.items():
            t = tr[rec][s]
            v = vad.get(rec, {}).get(s, {})
            rows.append([rec, s, md.pct(m["count_accuracy"]), md.pct(m["mean_tiou"]), md.pct(m["emotion_accuracy"]),
                         md.pct(t["f1"]), md.num(t["delay_s"]),
                         *(md.num(v[d]["ccc"]) if d in v else "–" for d in ("valence", "arousal", "dominance"))])
    return md.table(head, rows, left=2)


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=100, workers=2)
    p.add_argument("--work", type=Path, default=None, metavar="DIR",
                   help="directory of the two runs, resumed (default: results/bench_evolving)")
    p.add_argument("--in-process-only", action="store_true", help="skip the graph run")


@bench("evolving", _arguments)
def main(ns) -> int:
    """Evolving episodes in-process and through the graph: records compared, affect measures."""
    run(ns.out, ns.episodes, ns.split, ns.work, ns.workers, graph=not ns.in_process_only,
        allow_dataset_mismatch=ns.allow_dataset_mismatch)
    return 0
