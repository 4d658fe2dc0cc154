"""``affectsim report RUN``: the paper's tables and figures from a run's results store, as
``RUN/report.md`` (plus PNG figures in ``RUN/figures``), written atomically.

Tables (percentages as in the paper): 3 Macro-F1 per recognizer and setting with Δgain and OGR;
4 the complete set vs the new-observation subset (episodes where A-Obs made a stable handoff
and did not fall back to P-Init); 5 Recovery Rate and E-SPL@r with valid counts; 6 the
acquisition diagnostics next to the paper's; per-class recall and per-family Macro-F1 (Fig. 5).
Figures: paired Macro-F1 per recognizer (Fig. 4) and top-down trajectory maps with the P-Init
and A-Obs frames of example episodes (Fig. 6). "Group" rows average the trained recognizers;
the ``majority`` and ``uniform`` references are listed but never averaged in.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no global state, no display
from PIL import Image

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import load_scene, resolve_scene_path
from affectsim_core.atomic import staged_dir
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS, ESPL_RADII, SETTINGS
from affectsim_core.record import EpisodeRecord
from affectsim_eval.run.config import DATA_DIR
from affectsim_eval.scoring import paper
from affectsim_eval.scoring.metrics import METRICS, compute_all, group_ogr, ogr
from affectsim_eval.episode.social import social_by_emotion
from affectsim_eval.run.store import ResultsStore

REFERENCES = ("majority", "uniform")
NAMES = {"p_init": "P-Init", "p_ref": "P-Ref", "p_mon": "P-Mon", "a_obs": "A-Obs"}
MAPS = 4  # example episodes in the trajectory figure
#: the run metadata the report reads: key -> (allowed types, expected); dict values are version strings
META_FIELDS = {"code_version": ((str,), "a string"), "data_dir": ((str,), "a directory path"),
               "dataset_version": ((str, type(None)), "a version string or null"),
               "dataset_mismatch": ((dict, type(None)), "a mapping of recognizer to dataset version"),
               "checkpoint_dataset_versions": ((dict, type(None)), "a mapping of recognizer to dataset version")}


def _pct(v: float | None, nd: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.{nd}f}"


def _gain(a: float | None, b: float | None) -> str:
    """a − b in percentage points, signed."""
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return "–"
    return f"{100 * (a - b):+.1f}"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)


def summarize(records: Sequence[EpisodeRecord]) -> dict:
    """Every number of the report (fractions), from ok records."""
    if not records:
        raise InvalidInput("records", 0, "at least one finished episode (run `affectsim eval` first)")
    names = records[0].recognizers
    models = [n for n in names if n not in REFERENCES]
    settings = [x for x in SETTINGS if x in records[0].predictions[names[0]]]  # a robot has no P-Ref, P-Mon
    has_ref = "p_ref" in settings
    m = compute_all(records, [i for i in METRICS.names() if has_ref or i != "ogr"])
    f1 = m["macro_f1"]
    new = [r for r in records if not r.a_obs.fallback]
    new_f1 = compute_all(new, ["macro_f1"])["macro_f1"] if new else None
    fams = sorted({r.family for r in records})
    family = {}
    for f in fams:
        ff1 = compute_all([r for r in records if r.family == f], ["macro_f1"])["macro_f1"]
        family[f] = {"n": sum(r.family == f for r in records), "macro_f1": ff1, "group": _mean(ff1, models, settings)}
    recall = m["per_class_recall"]
    return {
        "n": len(records), "recognizers": names, "models": models, "settings": settings, "macro_f1": f1,
        "group": _mean(f1, models, settings),
        "ogr": {n: ogr(f1[n]["p_init"], f1[n]["p_ref"], f1[n]["a_obs"]) if has_ref else None for n in names},
        "group_ogr": group_ogr([f1[n] for n in models]) if models and has_ref else None,
        "new_obs": {"n": len(new), "macro_f1": new_f1, "group": _mean(new_f1, models, settings) if new else {}},
        "recovery": m["recovery_rate"], "e_spl": {r: m[f"e_spl@{r}"] for r in ESPL_RADII},
        "group_recovery": _nanmean([m["recovery_rate"][n] for n in models]),
        "group_e_spl": {r: _nanmean([m[f"e_spl@{r}"][n]["value"] for n in models]) for r in ESPL_RADII},
        "table6": m["table6"], "recall": recall,
        "group_recall": {x: {e: _nanmean([recall[n][x][e] for n in models]) for e in EMOTIONS} for x in settings}
        if models else {},
        "family": family,
        "social": social_by_emotion(records),  # {} unless people were reactive
        "affect": {k: m[f"affect_{k}"] for k in ("segments", "transitions", "vad")},  # {} without evolving episodes
    }


def _nanmean(values: list) -> float | None:
    """Mean of the defined values (None when there are none)."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(vals)) if vals else None


def _mean(per_recognizer: dict, models: list[str], settings: list[str]) -> dict:
    """Group means per setting over the trained recognizers ({} without any)."""
    return {x: float(np.mean([per_recognizer[n][x] for n in models])) for x in settings} if models else {}


def validity(s: dict) -> list[str]:
    """Whether the paper's findings hold here, with the numbers (group of trained recognizers)."""
    g = s["group"]
    if not g:
        return ["No trained recognizer in this run: the findings concern trained recognizers."]
    out = []
    if "p_ref" in g:
        d = g["p_ref"] - g["p_init"]
        out.append(f"- **P-Ref > P-Init** (observation quality matters): {'holds' if d > 0 else 'does not hold'} — "
                   f"{_pct(g['p_ref'])} vs {_pct(g['p_init'])} Macro-F1 ({100 * d:+.1f} points).")
    if "p_mon" in g:
        d = g["p_mon"] - g["p_init"]
        out.append(f"- **P-Mon ≈ P-Init** (a room monitor is no substitute): "
                   f"{'holds' if abs(d) < 0.03 else 'does not hold'} — {_pct(g['p_mon'])} vs {_pct(g['p_init'])} "
                   f"({100 * d:+.1f} points; ≈ means within 3 points).")
    d = g["a_obs"] - g["p_init"]
    out.append(f"- **A-Obs > P-Init** (the active policy recovers part of the gap): "
               f"{'holds' if d > 0 else 'does not hold'} — {_pct(g['a_obs'])} vs {_pct(g['p_init'])} "
               f"({100 * d:+.1f} points).")
    o = s["group_ogr"]
    if "p_ref" in g:
        out.append(f"- **OGR** of the group means: {_pct(o)} % (paper: 32.0 % open-source, 20.1 % closed-source "
                   "models)" if o is not None else "- **OGR** is undefined here (P-Ref does not exceed P-Init).")
    return out


def provenance(meta: dict) -> list[str]:
    """Whether the checkpoints were trained on the dataset version this run evaluates."""
    version, mismatch = meta.get("dataset_version"), meta.get("dataset_mismatch") or {}
    if mismatch:
        by = {v: sorted(n for n in mismatch if mismatch[n] == v) for v in set(mismatch.values())}
        return ["- **Checkpoints trained on another dataset** (the run was started with --allow-dataset-mismatch): "
                + "; ".join(f"{', '.join(f'`{n}`' for n in names)} on version `{v}`" for v, names in sorted(by.items()))
                + f", while this run evaluates version `{version}`. Their scores are not those of the shipped protocol."]
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    if version is None and config.get("execution") == "robot":
        trained = sorted(set((meta.get("checkpoint_dataset_versions") or {}).values()))
        return ["- Observed on a robot: no dataset episode was evaluated; the checkpoints were trained on dataset "
                f"version{'s' if len(trained) > 1 else ''} {', '.join(f'`{v}`' for v in trained) or 'unknown'}."]
    if version is None:
        return ["- The dataset version is not recorded (a run from before versions were)."]
    return [f"- Dataset version `{version}`; every checkpoint of this run was trained on it."]


def render(s: dict, meta: dict, failures: list[tuple[str, str]], figures: dict[str, str]) -> str:
    names, f1 = s["recognizers"], s["macro_f1"]
    cfg = meta.get("config", {})
    lines = ["# AffectSim-ROS benchmark report", "",
             f"{s['n']} episodes of the {cfg.get('split', '?')} split"
             f"{' (stratified subset)' if cfg.get('episodes') else ''}, policy `{cfg.get('policy', '?')}`, "
             f"code `{meta.get('code_version', '?')}`; {len(failures)} failed episode(s). Scores are percentages.", "",
             "## Validity: do the paper's findings hold here?", "", *provenance(meta), *validity(s), "",
             "## Table 3: Macro-F1 per recognizer and setting", ""]
    group = ["**group (trained)**"] if s["group"] else []
    rows = []
    for n in names + group:
        m = f1[n] if n in f1 else s["group"]
        o = s["ogr"].get(n) if n in f1 else s["group_ogr"]
        rows.append([n] + [_pct(m[x]) for x in s["settings"]] + [_gain(m["a_obs"], m["p_init"]), _pct(o)])
    lines += [_table(["recognizer", *(NAMES[x] for x in s["settings"]), "Δgain", "OGR %"], rows), "",
              "Paper (group means): " + "; ".join(
                  f"{g} " + " / ".join(f"{NAMES[x]} {v[x]}" for x in SETTINGS) + f", Δgain {v['gain']} (OGR {v['ogr']} %)"
                  for g, v in paper.TABLE3.items()) + ".",
              f"Chance floors (five balanced classes): always one class {paper.CHANCE['single class']}, uniform random "
              f"{paper.CHANCE['uniform']}.", ""]
    if "paired" in figures:
        lines += [f"![paired Macro-F1]({figures['paired']})", ""]
    new = s["new_obs"]
    lines += ["## Table 4: complete set vs new-observation subset", "",
              f"New-observation subset: the {new['n']} episodes where A-Obs made a stable handoff and recorded its own "
              f"clip (the others fall back to the P-Init clip). Gain = A-Obs − P-Init (points).", ""]
    rows = []
    for n in names + group:
        a = f1[n] if n in f1 else s["group"]
        nf = (new["macro_f1"][n] if n in f1 else new["group"]) if new["macro_f1"] else None
        rows.append([n, _pct(a["p_init"]), _pct(a["a_obs"]), _gain(a["a_obs"], a["p_init"]),
                     *((_pct(nf["p_init"]), _pct(nf["a_obs"]), _gain(nf["a_obs"], nf["p_init"])) if nf else ("–",) * 3)])
    lines += [_table(["recognizer", f"all ({s['n']}): P-Init", "A-Obs", "gain", f"new ({new['n']}): P-Init", "A-Obs",
                      "gain"], rows), "",
              "Paper: " + "; ".join(f"{g} complete {v['all'][0]} episodes {' / '.join(v['all'][1:])}, new-observation "
                                   f"{v['new'][0]} episodes {' / '.join(v['new'][1:])}" for g, v in paper.TABLE4.items())
              + " (P-Init / A-Obs / gain).", ""]
    lines += ["## Table 5: Recovery Rate and E-SPL@r", ""]
    rows = [[n, _pct(s["recovery"][n])] + [_pct(s["e_spl"][r][n]["value"]) for r in ESPL_RADII] for n in names]
    if s["group"]:
        rows.append([group[0], _pct(s["group_recovery"])] + [_pct(s["group_e_spl"][r]) for r in ESPL_RADII])
    valid = [s["e_spl"][r][names[0]]["n_valid"] for r in ESPL_RADII]
    lines += [_table(["recognizer", "Recovery Rate", "E-SPL@1", "E-SPL@3", "E-SPL@5"], rows), "",
              f"Valid episodes per radius (non-empty, reachable target region): 1 m {valid[0]}, 3 m {valid[1]}, "
              f"5 m {valid[2]} of {s['n']}.",
              "Paper (group means, Recovery / E-SPL@1 / @3 / @5): "
              + "; ".join(f"{g} {' / '.join(v)}" for g, v in paper.TABLE5.items()) + ".", ""]
    t6 = s["table6"]
    p6 = paper.TABLE6
    lines += ["## Table 6: acquisition diagnostics", "",
              _table(["diagnostic", "here", "paper"],
                     [["stable handoff (% episodes)", f"{t6['handoff_pct']:.1f}", p6["handoff_pct"]],
                      ["mean path (m / episode)", f"{t6['mean_path_m']:.2f}", p6["mean_path_m"]],
                      ["path before handoff (% of locomotion)", f"{t6['path_before_handoff_pct']:.1f}",
                       p6["path_before_handoff_pct"]],
                      ["budget exhaustion (% episodes)", f"{t6['budget_exhausted_pct']:.1f}", p6["budget_exhausted_pct"]],
                      ["clipped moves (% of translations)", f"{t6['clipped_pct']:.1f}", p6["clipped_pct"]]]),
              ""]
    shown = [x for x in ("p_init", "p_ref", "p_mon", "a_obs") if x in s["settings"]]
    lines += ["## Per-class recall (Fig. 5a/b)", ""]
    recall = {**s["recall"], **({group[0]: s["group_recall"]} if group else {})}
    rows = [[n, NAMES[x]] + [_pct(recall[n][x][e]) for e in EMOTIONS] for n in names + group for x in shown]
    lines += [_table(["recognizer", "setting", *EMOTIONS], rows), ""]
    if group:
        lines += ["Group recall gain over P-Init (points):", ""]
        rows = [[NAMES[x]] + [_gain(recall[group[0]][x][e], recall[group[0]]["p_init"][e]) for e in EMOTIONS]
                for x in shown if x != "p_init"]
        lines += [_table(["setting", *EMOTIONS], rows), ""]
    lines += ["## Macro-F1 per episode family (Fig. 5c/d)", ""]
    rows = [[f, s["family"][f]["n"], n] + [_pct(fam[x]) for x in s["settings"]]
            for f in s["family"] for n, fam in ([(n, s["family"][f]["macro_f1"][n]) for n in names]
                                                + [(g, s["family"][f]["group"]) for g in group])]
    lines += [_table(["family", "episodes", "recognizer", *(NAMES[x] for x in s["settings"])], rows), ""]
    if group:
        lines += ["Group Macro-F1 gain over P-Init per family (points):", ""]
        rows = [[f, s["family"][f]["n"]] + [_gain(s["family"][f]["group"][x], s["family"][f]["group"]["p_init"])
                                            for x in shown if x != "p_init"] for f in s["family"]]
        lines += [_table(["family", "episodes", *(NAMES[x] for x in shown if x != "p_init")], rows), ""]
    if s["social"]:
        lines += _social_section(s, group[0] if group else None, figures)
    if s["affect"]["segments"]:
        lines += _affect_section(s)
    if "maps" in figures:
        lines += ["## Example trajectories (Fig. 6)", "", f"![trajectories]({figures['maps']})", ""]
    if failures:
        lines += ["## Failed episodes", "", *[f"- `{i}`: {why}" for i, why in failures], ""]
    return "\n".join(lines)


def _social_section(s: dict, group: str | None, figures: dict[str, str]) -> list[str]:
    """Social measures per target emotion beside the group's A-Obs recall and its gain over P-Init."""
    lines = ["## Social measures (reactive people)", "",
             "Over the robot's whole A-Obs trajectory; gaps surface to surface (robot footprint to the person's "
             "disc); zones: intimate < 0.45 m, personal 0.45–1.2 m. Target: the person whose emotion is scored.", ""]
    rec = s["group_recall"] if group else {}
    rows = []
    for e, v in s["social"].items():
        if e == "all":
            acc = _pct(s["group"].get("a_obs")) if group else "–"
            gain = _gain(s["group"]["a_obs"], s["group"]["p_init"]) if group else "–"
        else:
            acc = _pct(rec["a_obs"][e]) if group else "–"
            gain = _gain(rec["a_obs"][e], rec["p_init"][e]) if group else "–"
        rows.append([e, v["n"], acc, gain, f"{v['noticed_pct']:.0f}", f"{v['reacting_s']:.1f}", f"{v['path_m']:.2f}",
                     f"{v['max_shift_m']:.2f}", f"{v['min_gap_m']:.2f}", f"{v['intimate_pct']:.1f}",
                     f"{v['personal_pct']:.1f}", v["contacts"]])
    lines += [_table(["target emotion", "episodes", "A-Obs (group recall; all: Macro-F1)", "gain over P-Init",
                      "noticed %", "reacting s", "displaced m", "max shift m", "min gap m", "intimate %",
                      "personal %", "contacts"], rows), ""]
    if "social" in figures:
        lines += [f"![gain against disturbance]({figures['social']})", ""]
    return lines


def _num(v: float | None, nd: int = 2) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _affect_section(s: dict) -> list[str]:
    """Tables of the evolving episodes: segments and transitions, then VAD, paired settings as columns."""
    a = s["affect"]
    shown = [x for x in s["settings"] if x in next(iter(a["segments"].values()))]
    n = next(iter(next(iter(a["segments"].values())).values()))["episodes"]
    lines = ["## Evolving affect: segments and transitions", "",
             f"{n} evolving episodes; one label per window of 8 frames (4 Hz) over the same interval in every setting; "
             "percentages except the delay (s, negative: early). Segment measures as DAR (count accuracy, mean tIoU, "
             "emotion accuracy at tIoU >= 0.5), transitions matched within ±1 s (docs/affect.md).", ""]
    rows = []
    for rec, by in a["segments"].items():
        tr = a["transitions"][rec]
        rows += [[rec, "segment count acc.", *(_pct(by[x]["count_accuracy"]) for x in shown)],
                 [rec, "mean tIoU", *(_pct(by[x]["mean_tiou"]) for x in shown)],
                 [rec, "segment emotion acc.", *(_pct(by[x]["emotion_accuracy"]) for x in shown)],
                 [rec, "transition F1 ±1 s", *(_pct(tr[x]["f1"]) for x in shown)],
                 [rec, "detection delay s", *(_num(tr[x]["delay_s"]) for x in shown)]]
    lines += [_table(["recognizer", "measure", *(NAMES[x] for x in shown)], rows), ""]
    if a["vad"]:
        lines += ["## Evolving affect: valence, arousal, dominance", "",
                  "Over all windows with a rating: Lin's concordance (CCC) / Spearman / Pearson per dimension.", ""]
        rows = []
        for rec, by in a["vad"].items():
            for dim in ("valence", "arousal", "dominance"):
                rows.append([rec, dim, *("–" if dim not in by.get(x, {}) else " / ".join(_num(by[x][dim][k]) for k in
                                         ("ccc", "spearman", "pearson")) for x in shown)])
        lines += [_table(["recognizer", "dimension", *(NAMES[x] for x in shown)], rows), ""]
    return lines


def _social_figure(s: dict, path: Path) -> bool:
    """Recognition gain (A-Obs − P-Init group recall, points) against the seconds the target spent
    reacting to the robot, per emotion."""
    rec = s["group_recall"]
    pts = [(e, v["reacting_s"], 100 * (rec["a_obs"][e] - rec["p_init"][e])) for e, v in s["social"].items()
           if e != "all" and rec and rec["a_obs"][e] is not None and rec["p_init"][e] is not None]
    if not pts:
        return False
    fig = Figure(figsize=(4.6, 3.4))
    ax = fig.subplots()
    for e, x, y in pts:
        ax.plot(x, y, "o")
        ax.annotate(e, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("target reacting to the robot (s, mean per episode)")
    ax.set_ylabel("A-Obs − P-Init recall (points)")
    ax.set_title("Recognition gain against disturbance", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _paired_figure(s: dict, path: Path) -> None:
    names = s["recognizers"]
    fig = Figure(figsize=(1.6 + 1.3 * len(names), 3.4))
    ax = fig.subplots()
    w = 0.2
    for k, x in enumerate(s["settings"]):
        ax.bar(np.arange(len(names)) + (k - 1.5) * w, [100 * s["macro_f1"][n][x] for n in names], w, label=NAMES[x])
    ax.set_xticks(np.arange(len(names)), names, rotation=20)
    ax.set_ylabel("Macro-F1 (%)")
    ax.set_title(f"Paired Macro-F1 per recognizer ({s['n']} episodes)")
    ax.legend(ncol=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _has_scene(scene_id: str, scenes_dir: Path) -> bool:
    try:
        resolve_scene_path(scene_id, scenes_dir)
        return True
    except InvalidInput:
        return False


def _maps_figure(records: Sequence[EpisodeRecord], run: Path, path: Path, scenes_dir: Path) -> bool:
    """Top-down maps (navigable space, trajectory, start, target) beside the P-Init | A-Obs frames of
    up to :data:`MAPS` episodes with a stable handoff (the longest paths first)."""
    pick = [r for r in records if not r.a_obs.fallback and (run / "frames" / f"{r.episode_id}.jpg").is_file()
            and _has_scene(r.scene_id, scenes_dir)]  # a robot's episodes have no scene
    pick = sorted(pick, key=lambda r: (-r.a_obs.path_length, r.episode_id))[:MAPS]
    if not pick:
        return False
    fig = Figure(figsize=(8, 3.2 * len(pick)))
    axes = fig.subplots(len(pick), 2, squeeze=False, gridspec_kw={"width_ratios": [1, 1.6]})
    for (a_map, a_img), r in zip(axes, pick):
        nav = NavigableSpace(load_scene(r.scene_id, scenes_dir))
        grid, (x0, y0) = nav.occupancy_grid(0.05)
        h, w = grid.shape
        a_map.imshow(grid, origin="lower", cmap="Greys", extent=(x0, x0 + 0.05 * w, y0, y0 + 0.05 * h))
        t = np.array(r.a_obs.trajectory)
        a_map.plot(t[:, 0], t[:, 1], "-", color="tab:blue", lw=1.2)
        a_map.plot(*r.start[:2], "o", color="tab:green", ms=5, label="start")
        a_map.plot(*r.anchor, "*", color="tab:red", ms=9, label="target")
        a_map.set_title(f"{r.episode_id}: {r.a_obs.path_length:.1f} m", fontsize=8)
        a_map.set_xticks([]), a_map.set_yticks([])
        a_img.imshow(Image.open(run / "frames" / f"{r.episode_id}.jpg"))
        a_img.set_title(f"P-Init | A-Obs ({r.label})", fontsize=8)
        a_img.axis("off")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def check_meta(meta: dict, where: str) -> None:
    """Refuse run metadata whose :data:`META_FIELDS` have another shape than a run writes them."""
    for key, (types, expected) in META_FIELDS.items():
        if key not in meta:
            continue
        value = meta[key]
        strings = not isinstance(value, dict) or all(isinstance(v, str) for v in value.values())
        if not (isinstance(value, types) and strings):
            raise InvalidInput(f"run metadata.{key}", value, expected, where=where)


def write_report(run: Path) -> Path:
    """Write ``run/report.md`` and ``run/figures/*.png`` from ``run/results.sqlite`` (scenes for the
    maps from the run's data directory)."""
    run = Path(run)
    db = run / "results.sqlite"
    if not db.is_file():
        raise InvalidInput("run", str(run), "a run directory with results.sqlite (from `affectsim eval`)")
    with ResultsStore.open(db) as store:
        meta = store.meta()
        check_meta(meta, str(db))
        records = [EpisodeRecord.from_dict(r, str(db)) for r in store.records("ok")]
        failures = store.failures()
    s = summarize(records)
    with staged_dir(run / "figures", ".figures-") as tmp:
        figures = {}
        _paired_figure(s, tmp / "paired_macro_f1.png")
        figures["paired"] = "figures/paired_macro_f1.png"
        scenes = Path(meta.get("data_dir", DATA_DIR)) / "scenes"
        if _maps_figure(records, run, tmp / "trajectories.png", scenes):
            figures["maps"] = "figures/trajectories.png"
        if s["social"] and s["models"] and _social_figure(s, tmp / "social.png"):
            figures["social"] = "figures/social.png"
    text = render(s, meta, failures, figures)
    out = run / "report.md"
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(text + "\n")
    tmp.replace(out)
    return out
