"""Policy benchmark (``affectsim bench policies``): active-observation policies side by side on the same
episodes.

The same stratified episodes are evaluated in-process once per policy, each run its own results store under
the work directory (a killed benchmark resumes), all sharing one passive cache: P-Init, P-Ref and P-Mon do
not depend on the policy, so they are computed once. ``--humans reactive`` runs them among people who react
to the robot (docs/reactive_humans.md), in stores of their own (``WORK/reactive/POLICY``).

Printed: Table 3 with Table 6 per policy; then, per policy against the first, on one paired bootstrap draw
within each family (:func:`~affectsim_eval.scoring.uncertainty.differences`, 95 % intervals): the group's
A-Obs, Recovery and E-SPL@1/3/5 differences, beside each policy's A-Obs against its own P-Ref (whether the
view it acquires reads better than the reference view); A-Obs per recognizer; A-Obs per family; clipped
translations per family; and with reactive people the social measures of all targets.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from affectsim_bridge.humans.reactive import HUMANS_MODES
from affectsim_core.atomic import write_json
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import ESPL_RADII
from affectsim_core.resampling import Interval
from affectsim_eval.run.config import EvalConfig
from affectsim_eval.run.report import summarize
from affectsim_eval.run.runner import run_eval
from affectsim_eval.scoring import markdown as md
from affectsim_eval.scoring.metrics import table6
from affectsim_eval.scoring.uncertainty import GROUP, differences
from affectsim_nav.policy import POLICIES
from affectsim_ros.benches import add_dataset_options, add_out, bench
from affectsim_ros.benches.social import SOCIAL_COLUMNS, social_cells
from affectsim_ros.benches.transfer import TABLE6_COLUMNS, stored_records, table3_6

DEFAULT_POLICIES = ("baseline", "viewpoint")


def run_dir(work: Path, policy: str, humans: str = "scripted") -> Path:
    """Where ``policy``'s store lies under ``work``: ``WORK/POLICY`` with scripted people, ``WORK/HUMANS/POLICY``
    otherwise."""
    return work / policy if humans == "scripted" else work / humans / policy


def run(out: Path | None = None, policies: tuple[str, ...] = DEFAULT_POLICIES, episodes: int = 100,
        split: str = "test", work: Path | None = None, workers: int = 2, log=print,
        allow_dataset_mismatch: bool = False, humans: str = "scripted") -> dict:
    """Evaluate each policy on the same episodes (passive settings cached under the work directory)."""
    if len(policies) < 2 or any(p not in POLICIES for p in policies):
        raise InvalidInput("policies", list(policies), f"two or more of {', '.join(POLICIES.names())}")
    if humans not in HUMANS_MODES:
        raise InvalidInput("humans", humans, f"one of {', '.join(HUMANS_MODES)}")
    work = Path(work or "results/bench_policies")
    res: dict = {"episodes": episodes, "split": split, "humans": humans, "policies": list(policies), "runs": {}}
    recs = {}
    for policy in policies:
        where = run_dir(work, policy, humans)
        cfg = EvalConfig(split=split, episodes=episodes, policy=policy, humans=humans)
        s = run_eval(where, cfg, workers, log=log, allow_dataset_mismatch=allow_dataset_mismatch,
                     passive_cache=str(work / "passive_cache"))
        log(f"[bench policies] {policy}: {s.done} evaluated, {s.skipped} already stored, {s.failed} failed, "
            f"{s.wall:.0f} s")
        recs[policy] = stored_records(where)
        sm = summarize(list(recs[policy].values()))
        beyond_ref = sm["intervals"]["beyond_ref"].get(GROUP)  # an Interval, or None without P-Ref or models
        res["runs"][policy] = {"n": sm["n"], "models": sm["models"], "group": sm["group"],
                               "group_ogr": sm["group_ogr"], "group_recovery": sm["group_recovery"],
                               "group_e_spl": sm["group_e_spl"], "macro_f1": sm["macro_f1"],
                               "beyond_ref": asdict(beyond_ref) if beyond_ref else None,
                               "table6": {k: sm["table6"][k] for k in TABLE6_COLUMNS},
                               "family": {f: {"n": v["n"], "a_obs": v["group"].get("a_obs"),
                                              "clipped_pct": table6([r.a_obs.diagnostics for r in recs[policy].values()
                                                                     if r.family == f])["clipped_pct"]}
                                          for f, v in sm["family"].items()},
                               "social": sm["social"].get("all")}
    first = policies[0]
    for policy in policies[1:]:
        ids = sorted(set(recs[first]) & set(recs[policy]))
        res["runs"][policy]["vs_first"] = differences([recs[first][i] for i in ids], [recs[policy][i] for i in ids],
                                                      res["runs"][first]["models"])
    log(table(res))
    if out is not None:
        write_json(Path(out), res, indent=1)
        log(f"[bench policies] {out}")
    return res


def _diff(v: dict | None) -> str:
    """A difference with its interval in points, or nothing (the first policy's own row)."""
    return Interval(v["estimate"], v["low"], v["high"], v["undefined"], 0, 0).text(100) if v else ""


def _radius(by: dict, r: int):
    """``by``'s entry for E-SPL radius ``r``: an int key in memory, a string one read back from the JSON."""
    return by.get(r, by.get(str(r)))


def table(res: dict) -> str:
    """Table 3 with Table 6 per policy, then each policy's A-Obs − P-Ref and, against the first policy, the
    group's differences, A-Obs per recognizer and per family, clipped translations per family, and the social
    measures with reactive people (Markdown; ``res`` as :func:`run` returns it or as its JSON reads back)."""
    runs = res["runs"]
    first = res["policies"][0]
    out = table3_6(runs, "policy")
    rows = []
    for name, c in runs.items():
        v = c.get("vs_first") or {}
        rows.append([name, c["n"], v.get("n", ""), md.pct(c["group_recovery"]),
                     " / ".join(md.pct(_radius(c["group_e_spl"], r)) for r in ESPL_RADII),
                     _diff(c.get("beyond_ref")), _diff(v.get("a_obs", {}).get(GROUP)), _diff(v.get("recovery")),
                     *(_diff(_radius(v.get("e_spl", {}), r)) for r in ESPL_RADII)])
    out += ["", f"Each policy's A-Obs against its own P-Ref, and against `{first}` on the episodes both hold "
                "(paired n; 95 % paired bootstrap within each family, points):", "",
            md.table(["policy", "n", "paired n", "Recovery %", "E-SPL@" + "/".join(map(str, ESPL_RADII)) + " %",
                      "A-Obs − P-Ref",
                      "A-Obs − first", "Recovery − first", *(f"E-SPL@{r} − first" for r in ESPL_RADII)], rows)]
    models = runs[first].get("models") or []
    if models:
        rows = [[name, *(md.pct(c["macro_f1"][m]["a_obs"])
                         + (f" ({_diff(c['vs_first']['a_obs'][m])})" if c.get("vs_first") else "") for m in models)]
                for name, c in runs.items()]
        out += ["", md.table(["policy (A-Obs per recognizer)", *models], rows)]
    families = sorted({f for c in runs.values() for f in c["family"]})
    rows = []
    for name, c in runs.items():
        fam = (c.get("vs_first") or {}).get("family", {})
        rows.append([name, *(f"{md.pct(c['family'][f]['a_obs'])} (n={c['family'][f]['n']})"
                             + (f" {_diff(fam[f]['a_obs'])}" if f in fam else "") if f in c["family"] else ""
                             for f in families)])
    out += ["", md.table(["policy (group A-Obs per family)", *families], rows)]
    rows = [[name, *(md.num(c["family"][f].get("clipped_pct"), 1) if f in c["family"] else "" for f in families)]
            for name, c in runs.items()]
    out += ["", md.table(["policy (clipped translations % per family)", *families], rows)]
    social = {name: c["social"] for name, c in runs.items() if c.get("social")}
    if social:
        out += ["", md.table(["policy (social, all targets)", "n", *SOCIAL_COLUMNS],
                             [[name, v["n"], *social_cells(v)] for name, v in social.items()])]
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
    p.add_argument("--humans", choices=HUMANS_MODES, default="scripted",
                   help="scripted: people replay their motion (the paper's protocol); reactive: they notice the robot "
                        "and respond (docs/reactive_humans.md), stores under WORK/reactive (default: %(default)s)")


@bench("policies", _arguments)
def main(ns) -> int:
    """Policies side by side on the same episodes: Macro-F1, OGR, Recovery, E-SPL, Table 6, with intervals."""
    run(ns.out, ns.policies, ns.episodes, ns.split, ns.work, ns.workers, allow_dataset_mismatch=ns.allow_dataset_mismatch,
        humans=ns.humans)
    return 0
