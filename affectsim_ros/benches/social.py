"""Social benchmark (``affectsim bench social``): what people who react to the robot do to the
benchmark, and the trade-off between a better view and disturbing the person.

The same stratified test episodes are evaluated in-process with scripted and with reactive people
(docs/reactive_humans.md), each with the ``baseline`` and the ``baseline-social`` policy. Printed side
by side: Table 3 (group Macro-F1 of the trained recognizers per setting, OGR) with Table 6, and for
the reactive runs the social measures per target emotion next to the group's A-Obs recall and its
gain over P-Init. Each run is its own results store under the work directory (a killed benchmark
resumes); ``affectsim report WORK/RUN`` writes any run's full report with the gain-against-
disturbance figure.
"""

from __future__ import annotations

from pathlib import Path

from affectsim_core.atomic import write_json
from affectsim_core.errors import InvalidInput
from affectsim_core.record import EpisodeRecord
from affectsim_eval.run.config import EvalConfig
from affectsim_eval.run.report import summarize, write_report
from affectsim_eval.run.runner import run_eval
from affectsim_eval.run.store import ResultsStore
from affectsim_eval.scoring import markdown as md
from affectsim_ros.benches.transfer import TABLE6_COLUMNS, table3_6
from affectsim_ros.benches import add_dataset_options, add_out, add_runs_options, bench, conditions_of

RUNS = {f"{h}_{p}": (h, p) for h in ("scripted", "reactive") for p in ("baseline", "baseline-social")}
SOCIAL_COLUMNS = ("noticed_pct", "reacting_s", "path_m", "max_shift_m", "min_gap_m", "intimate_pct",
                  "personal_pct", "contacts")


def run(out: Path | None = None, episodes: int = 100, split: str = "test", work: Path | None = None,
        only: tuple[str, ...] = (), workers: int = 2, log=print, allow_dataset_mismatch: bool = False) -> dict:
    """Evaluate the runs (``only``: those of them; the tables cover every run with a store)."""
    work = Path(work or "results/bench_social")
    unknown = sorted(set(only) - set(RUNS))
    if unknown:
        raise InvalidInput("--conditions", unknown, f"names from {', '.join(RUNS)}")
    res: dict = {"episodes": episodes, "split": split, "runs": {}}
    for name, (humans, policy) in RUNS.items():
        run_dir = work / name
        if not only or name in only:
            cfg = EvalConfig(split=split, episodes=episodes, policy=policy, humans=humans)
            s = run_eval(run_dir, cfg, workers, log=log, allow_dataset_mismatch=allow_dataset_mismatch)
            log(f"[bench social] {name}: {s.done} evaluated, {s.skipped} already stored, {s.failed} failed, "
                f"{s.wall:.0f} s")
            write_report(run_dir)
        elif not (run_dir / "results.sqlite").is_file():
            continue
        with ResultsStore.open(run_dir / "results.sqlite") as st:
            records = [EpisodeRecord.from_dict(r, str(run_dir)) for r in st.records("ok")]
        s = summarize(records)
        res["runs"][name] = {"n": s["n"], "group": s["group"], "group_ogr": s["group_ogr"],
                             "table6": {k: s["table6"][k] for k in TABLE6_COLUMNS},
                             "group_recall": s["group_recall"], "social": s["social"]}
    log(table(res))
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench social] {out}")
    return res


def social_cells(v: dict) -> list:
    """The :data:`SOCIAL_COLUMNS` of one row of social measures, formatted (metres to 2 decimals)."""
    return [v[k] if k == "contacts" else md.num(v[k], 2 if k.endswith("_m") else 1) for k in SOCIAL_COLUMNS]


def table(res: dict) -> str:
    """Table 3 with Table 6 per run, then the social measures per emotion of the reactive runs (Markdown)."""
    out = table3_6(res["runs"], "run")
    head = ["run", "target emotion", "n", "A-Obs recall", "gain over P-Init", *SOCIAL_COLUMNS]
    rows = []
    for name, c in res["runs"].items():
        for e, v in c["social"].items():
            rec = c["group_recall"]
            if e == "all":
                acc, gain = c["group"]["a_obs"], c["group"]["a_obs"] - c["group"]["p_init"]
            else:
                acc, gain = rec["a_obs"][e], rec["a_obs"][e] - rec["p_init"][e]
            rows.append([name, e if e != "all" else "all (Macro-F1)", v["n"], md.pct(acc), md.signed(gain),
                         *social_cells(v)])
    if rows:
        out += ["", md.table(head, rows, left=2)]
    return "\n".join(out)


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=100, workers=2)
    add_runs_options(p, ", ".join(RUNS))


@bench("social", _arguments)
def main(ns) -> int:
    """Scripted vs reactive people, baseline vs baseline-social: recognition and social measures."""
    run(ns.out, ns.episodes, ns.split, ns.work, conditions_of(ns), ns.workers,
        allow_dataset_mismatch=ns.allow_dataset_mismatch)
    return 0
