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

from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import load_scene, resolve_scene_path
from affectsim_core.atomic import staged_dir
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import SETTINGS
from affectsim_core.record import EpisodeRecord
from affectsim_eval.run.config import DATA_DIR
from affectsim_eval.scoring import paper
from affectsim_eval.scoring.markdown import NAMES, pct
from affectsim_eval.scoring.metrics import METRICS, REFERENCES, compute_all, ordered, trained
from affectsim_eval.scoring.uncertainty import DISTINCT, GROUP, detectable, equivalent, greater
from affectsim_eval.run.store import ResultsStore

__all__ = ["NAMES", "REFERENCES", "render", "summarize", "validity", "write_report"]
MAPS = 4  # example episodes in the trajectory figure
#: the run metadata the report reads: key -> (allowed types, expected); dict values are version strings
META_FIELDS = {"code_version": ((str,), "a string"), "data_dir": ((str,), "a directory path"),
               "dataset_version": ((str, type(None)), "a version string or null"),
               "dataset_mismatch": ((dict, type(None)), "a mapping of recognizer to dataset version"),
               "checkpoint_dataset_versions": ((dict, type(None)), "a mapping of recognizer to dataset version")}


def summarize(records: Sequence[EpisodeRecord]) -> dict:
    """Every number of the report (fractions), from ok records: ``n``, ``recognizers``, ``models`` (the
    trained ones: the group), ``settings``, then the entries of every registered metric that applies
    (:meth:`Metric.summary`, in :func:`ordered` order; one that does not apply summarises ``None``)."""
    if not records:
        raise InvalidInput("records", 0, "at least one finished episode (run `affectsim eval` first)")
    names = records[0].recognizers
    settings = [x for x in SETTINGS if x in records[0].predictions[names[0]]]  # a robot has no P-Ref, P-Mon
    s = {"n": len(records), "recognizers": names, "models": trained(names), "settings": settings}
    results = compute_all(records)
    for name in ordered():
        s.update(METRICS.create(name).summary(results.get(name), s))
    return s


def validity(s: dict) -> list[str]:
    """Whether the paper's findings hold here, each verdict read from its paired interval (group of
    trained recognizers), beside the group of distinct models and the reference floors."""
    g, iv = s["group"], s["intervals"]
    if not g:
        return ["No trained recognizer in this run: the findings concern trained recognizers."]
    # (claim, meaning, verdict, setting, the setting it is compared with on the same episodes)
    claims = [("P-Ref > P-Init", "observation quality matters", greater, "p_ref", "p_init"),
              ("P-Mon ≈ P-Init", "a room monitor is no substitute; ≈: the interval within ±3 points", equivalent,
               "p_mon", "p_init"),
              ("A-Obs > P-Init", "the active policy recovers part of the gap", greater, "a_obs", "p_init"),
              ("A-Obs > P-Ref", "the view acquired reads better than the reference view", greater, "a_obs", "p_ref")]
    floors = [n for n in REFERENCES if n in iv["gain"]]
    out = []
    for claim, meaning, verdict, x, against in claims:
        if x not in g or against not in g:
            continue
        diffs = iv["beyond_ref"] if against == "p_ref" else {rec: by[x] for rec, by in iv["gain"].items()}
        d = diffs[GROUP]
        line = (f"- **{claim}** ({meaning}): **{verdict(d)}** — {pct(g[x])} vs {pct(g[against])} Macro-F1, "
                f"{d.text(100)} points")
        if iv["groups"] and iv["groups"][DISTINCT] != iv["groups"][GROUP]:
            line += f"; each model once: {diffs[DISTINCT].text(100)} ({verdict(diffs[DISTINCT])})"
        if floors:
            line += "; noise floors: " + ", ".join(f"{n} {diffs[n].text(100)}" for n in floors)
        smallest = detectable(d)
        out.append(line + (f". This run detects differences of {100 * smallest:.1f} points or more." if smallest
                           else "."))
    o, oi = s["group_ogr"], iv["ogr"].get(GROUP)
    if "p_ref" in g:
        if o is None:
            out.append("- **OGR** is undefined here (P-Ref does not exceed P-Init).")
        else:
            inside = [g for g, v in paper.TABLE3.items()
                      if oi.low is not None and oi.contains(paper.value(v["ogr"]) / 100)]
            out.append(f"- **OGR** of the group means: {oi.text(100, signed=False)} % "
                       f"(undefined in {100 * oi.undefined:.1f} % of resamples); the paper's "
                       + " and ".join(f"{v['ogr']} % ({g})" for g, v in paper.TABLE3.items())
                       + f": {len(inside)} of {len(paper.TABLE3)} inside the interval.")
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
    """The report: its header and validity, then the section of every registered metric in
    :func:`ordered` order, the trajectory figure and the failed episodes."""
    cfg = meta.get("config", {})
    lines = ["# AffectSim-ROS benchmark report", "",
             f"{s['n']} episodes of the {cfg.get('split', '?')} split"
             f"{' (stratified subset)' if cfg.get('episodes') else ''}, policy `{cfg.get('policy', '?')}`, "
             f"code `{meta.get('code_version', '?')}`; {len(failures)} failed episode(s). Scores are percentages.", "",
             "## Validity: do the paper's findings hold here?", "", *provenance(meta), *validity(s), ""]
    for name in ordered():  # every registered metric's own section
        lines += METRICS.create(name).section(s, figures)
    if "maps" in figures:
        lines += ["## Example trajectories (Fig. 6)", "", f"![trajectories]({figures['maps']})", ""]
    if failures:
        lines += ["## Failed episodes", "", *[f"- `{i}`: {why}" for i, why in failures], ""]
    return "\n".join(lines)


def _figure(figsize: tuple[float, float]):
    """A matplotlib ``Figure`` (inches) without pyplot: no global state, no display. matplotlib is imported
    here, on first use: at the top it cost every process importing this module (each node) ~0.5 s."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _social_figure(s: dict, path: Path) -> bool:
    """Recognition gain (A-Obs − P-Init group recall, points) against the seconds the target spent
    reacting to the robot, per emotion."""
    rec = s["group_recall"]
    pts = [(e, v["reacting_s"], 100 * (rec["a_obs"][e] - rec["p_init"][e])) for e, v in s["social"].items()
           if e != "all" and rec and rec["a_obs"][e] is not None and rec["p_init"][e] is not None]
    if not pts:
        return False
    fig = _figure((4.6, 3.4))
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
    """Macro-F1 per recognizer (and the group) and setting, each bar with its 95 % paired bootstrap
    interval where the run has one."""
    iv = (s.get("intervals") or {}).get("macro_f1", {})
    names = [*s["recognizers"], *([GROUP] if GROUP in iv else [])]
    fig = _figure((1.6 + 1.3 * len(names), 3.4))
    ax = fig.subplots()
    w = 0.2
    for k, x in enumerate(s["settings"]):
        est = [100 * (s["macro_f1"][n][x] if n in s["macro_f1"] else iv[n][x].estimate) for n in names]
        bounds = [iv[n][x] if n in iv else None for n in names]
        err = np.array([[e - 100 * b.low, 100 * b.high - e] if b is not None and b.low is not None else [0.0, 0.0]
                        for e, b in zip(est, bounds)]).T
        ax.bar(np.arange(len(names)) + (k - 1.5) * w, est, w, yerr=err, capsize=2, error_kw={"lw": 0.8},
               label=NAMES[x])
    ax.set_xticks(np.arange(len(names)), names, rotation=20)
    ax.set_ylabel("Macro-F1 (%)")
    ax.set_title(f"Paired Macro-F1 per recognizer ({s['n']} episodes; 95 % paired bootstrap intervals)")
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
    fig = _figure((8, 3.2 * len(pick)))
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
