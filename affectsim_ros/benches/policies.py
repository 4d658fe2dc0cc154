"""Policy benchmark (``affectsim bench policies``): active-observation policies side by side on the same
episodes.

The same stratified test episodes are evaluated in-process once per policy, each run its own results
store under the work directory (a killed benchmark resumes), all sharing one passive cache: P-Init,
P-Ref and P-Mon do not depend on the policy, so they are computed once. Printed: Table 3 with Table 6
per policy; per policy against the first, the group A-Obs difference and the group E-SPL@1 difference
with their 95 % paired bootstrap intervals over episodes; and group A-Obs per family.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from affectsim_core.atomic import write_json
from affectsim_core.errors import InvalidInput
from affectsim_core.record import EpisodeRecord
from affectsim_core.resampling import Interval
from affectsim_eval.run.config import EvalConfig
from affectsim_eval.run.report import REFERENCES, summarize
from affectsim_eval.run.runner import run_eval
from affectsim_eval.scoring import markdown as md
from affectsim_eval.scoring.metrics import compute_all
from affectsim_nav.policy import POLICIES
from affectsim_ros.benches import add_dataset_options, add_out, bench
from affectsim_ros.benches.transfer import TABLE6_COLUMNS, paired_difference, stored_records, table3_6

DEFAULT_POLICIES = ("baseline", "viewpoint")


def _group_e_spl1(records: list[EpisodeRecord]) -> float:
    """Group E-SPL@1 (fraction) of ``records``: the mean over the trained recognizers with a value."""
    values = [v["value"] for n, v in compute_all(records, ["e_spl@1"])["e_spl@1"].items() if n not in REFERENCES]
    return float(np.nanmean([np.nan if v is None else v for v in values]))


def run(out: Path | None = None, policies: tuple[str, ...] = DEFAULT_POLICIES, episodes: int = 100,
        split: str = "test", work: Path | None = None, workers: int = 2, log=print,
        allow_dataset_mismatch: bool = False) -> dict:
    """Evaluate each policy on the same episodes (passive settings cached under the work directory)."""
    if len(policies) < 2 or any(p not in POLICIES for p in policies):
        raise InvalidInput("policies", list(policies), f"two or more of {', '.join(POLICIES.names())}")
    work = Path(work or "results/bench_policies")
    res: dict = {"episodes": episodes, "split": split, "policies": list(policies), "runs": {}}
    recs: dict[str, dict[str, EpisodeRecord]] = {}
    for policy in policies:
        run_dir = work / policy
        cfg = EvalConfig(split=split, episodes=episodes, policy=policy)
        s = run_eval(run_dir, cfg, workers, log=log, allow_dataset_mismatch=allow_dataset_mismatch,
                     passive_cache=str(work / "passive_cache"))
        log(f"[bench policies] {policy}: {s.done} evaluated, {s.skipped} already stored, {s.failed} failed, "
            f"{s.wall:.0f} s")
        recs[policy] = stored_records(run_dir)
        sm = summarize(list(recs[policy].values()))
        res["runs"][policy] = {"n": sm["n"], "group": sm["group"], "group_ogr": sm["group_ogr"],
                               "group_recovery": sm["group_recovery"], "group_e_spl": sm["group_e_spl"],
                               "table6": {k: sm["table6"][k] for k in TABLE6_COLUMNS},
                               "family": {f: {"n": v["n"], "a_obs": v["group"].get("a_obs")}
                                          for f, v in sm["family"].items()}}
    first = policies[0]
    for policy in policies[1:]:
        a, b = recs[first], recs[policy]
        res["runs"][policy]["vs_first"] = {"a_obs": vars(paired_difference(a, b)),
                                           "e_spl_1": vars(paired_difference(a, b, _group_e_spl1))}
    log(table(res))
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench policies] {out}")
    return res


def table(res: dict) -> str:
    """Table 3 with Table 6 per policy, the differences to the first policy, and A-Obs per family (Markdown)."""
    runs = res["runs"]
    out = table3_6(runs, "policy")
    first = res["policies"][0]
    rows = []
    for name, c in runs.items():
        v = c.get("vs_first")
        rows.append([name, c["n"], md.pct(c["group_recovery"]), md.pct(c["group_e_spl"][1.0]),
                     Interval(**v["a_obs"]).text(100) if v else "", Interval(**v["e_spl_1"]).text(100) if v else ""])
    out += ["", md.table(["policy", "n", "Recovery %", "E-SPL@1 %", f"A-Obs − {first}, 95 % CI (points)",
                          f"E-SPL@1 − {first}, 95 % CI (points)"], rows)]
    families = sorted({f for c in runs.values() for f in c["family"]})
    rows = [[name, *(f"{md.pct(c['family'][f]['a_obs'])} (n={c['family'][f]['n']})" if f in c["family"] else ""
                     for f in families)] for name, c in runs.items()]
    out += ["", md.table(["policy (group A-Obs)", *families], rows)]
    return "\n".join(out)


def policies(text: str) -> tuple[str, ...]:
    """argparse type: two or more registered policies, comma-separated, without repeats."""
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if len(names) < 2 or any(n not in POLICIES for n in names):
        raise argparse.ArgumentTypeError(f"{text!r} is invalid; expected two or more of {', '.join(POLICIES.names())}, "
                                         "comma-separated")
    return names


def _arguments(p) -> None:
    add_out(p)
    add_dataset_options(p, episodes=100, workers=2)
    p.add_argument("--policies", type=policies, default=DEFAULT_POLICIES,
                   help=f"comma-separated registered policies, the first the reference (default: {','.join(DEFAULT_POLICIES)})")
    p.add_argument("--work", type=Path, default=None, metavar="DIR",
                   help="directory of the per-policy stores and their shared passive cache, resumed "
                        "(default: results/bench_policies)")


@bench("policies", _arguments)
def main(ns) -> int:
    """Policies side by side on the same episodes: Macro-F1, OGR, Recovery, E-SPL, Table 6, with intervals."""
    run(ns.out, ns.policies, ns.episodes, ns.split, ns.work, ns.workers, allow_dataset_mismatch=ns.allow_dataset_mismatch)
    return 0
