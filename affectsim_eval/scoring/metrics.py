"""Benchmark metrics of docs/protocol.md §8 (paper section 4.3), ROS-free.

Labels are emotion names from :data:`EMOTIONS` or their indices 0..4. A prediction may also be
``None`` or ``-1``: no prediction (unparseable answer, failed recognizer). It is wrong for every
class: it adds a false negative to the true class and a false positive to none.

Scores are fractions in [0, 1] (the paper prints percentages: multiply by 100). Lengths are
metres in the ``map`` frame.

The input of every metric class in :data:`METRICS` is a sequence of paired
:class:`~affectsim_core.record.EpisodeRecord`: the label, every recognizer's prediction per setting,
the A-Obs path length and diagnostics, and d*(r). Every record holds the same recognizers and, per
recognizer, the same settings, so that the settings are compared on the same episodes (paired). The
recognizer name ``"group"`` is reserved: a per-recognizer result's entry for the group of the trained
recognizers (all but the :data:`REFERENCES`), from their mean scores.

A metric is one registered class (:class:`Metric`): its name from the registration, what it needs
(other metrics, record fields), how it computes, and how it renders its own section of the report;
the report iterates :data:`METRICS` (:func:`ordered`), so adding a metric edits no other file
(docs/extending.md).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_core.affect import VAD_DIMENSIONS, label_at, segments_from_windows
from affectsim_core.classification import label_index, label_indices, macro_f1
from affectsim_core.errors import InvalidInput
from affectsim_eval.scoring.affect_metrics import (
    mean_tiou,
    segment_count_accuracy,
    segment_emotion_accuracy,
    transition_scores,
    vad_scores,
)
from affectsim_core.protocol import EMOTIONS, ESPL_RADII, SETTINGS
from affectsim_core.record import Diagnostics, EpisodeRecord
from affectsim_core.registry import Registry
from affectsim_eval.scoring import paper, uncertainty
from affectsim_eval.scoring.markdown import NAMES, gain, num, pct, signed, table

GROUP = "group"  # reserved key: the result of the trained recognizers' group (their mean scores)
#: reference recognizers: listed in the report, never in the group
REFERENCES = ("majority", "uniform")


def per_class_recall(y_true: Sequence, y_pred: Sequence) -> dict[str, float]:
    """Recall per emotion (fraction); ``nan`` for a class without true samples."""
    t, p = label_indices(y_true, y_pred)
    return {name: float((p[t == k] == k).mean()) if (t == k).any() else math.nan
            for k, name in enumerate(EMOTIONS)}


# ---------------------------------------------------------------------------------------------- paired
def active_gain(m_aobs: float, m_pinit: float) -> float:
    """Delta_gain(M) = M_AObs - M_PInit, in the units of M."""
    return m_aobs - m_pinit


def ogr(m_pinit: float, m_pref: float, m_aobs: float) -> float | None:
    """Observation-gap recovery (M_AObs - M_PInit) / (M_PRef - M_PInit); None unless M_PRef > M_PInit.

    Never clipped: negative when A-Obs is worse than P-Init, above 1 when it beats P-Ref.
    """
    if not m_pref > m_pinit:
        return None
    return (m_aobs - m_pinit) / (m_pref - m_pinit)


def group_ogr(rows: Iterable[Mapping[str, float]]) -> float | None:
    """OGR of group means: each of ``p_init``, ``p_ref``, ``a_obs`` averaged over the rows
    (one row per recognizer), then :func:`ogr` of the three means."""
    rows = list(rows)
    if not rows:
        raise InvalidInput("rows", rows, "at least one {p_init, p_ref, a_obs} row")
    for row in rows:
        missing = [s for s in ("p_init", "p_ref", "a_obs") if s not in row]
        if missing:
            raise InvalidInput("rows", dict(row), f"a row with keys p_init, p_ref, a_obs (missing {missing})")
    mean = {s: float(np.mean([row[s] for row in rows])) for s in ("p_init", "p_ref", "a_obs")}
    return ogr(mean["p_init"], mean["p_ref"], mean["a_obs"])


def recovery_rate(y: Sequence, pinit_pred: Sequence, aobs_pred: Sequence) -> float | None:
    """#{P-Init wrong and A-Obs right} / #{P-Init wrong} over paired episodes; None if P-Init is never wrong."""
    t, pi = label_indices(y, pinit_pred)
    _, pa = label_indices(y, aobs_pred)
    wrong = pi != t
    if not wrong.any():
        return None
    return float((pa[wrong] == t[wrong]).mean())


def e_spl(correct: Sequence[bool], path_lengths: Sequence[float],
          d_star: Sequence[float | None]) -> tuple[float | None, int]:
    """E-SPL = (1/N_r) sum_i S_i d*_i / max(L_i, d*_i) over the episodes with a defined d*_i.

    ``correct`` S_i (A-Obs prediction right), ``path_lengths`` L_i (m, translation executed),
    ``d_star`` d*_i(r) (m; None or nan = empty or unreachable target region: excluded). A ratio
    with L_i = d*_i = 0 is 1. Returns (value, N_r); value None when N_r = 0.
    """
    if not len(correct) == len(path_lengths) == len(d_star):
        raise InvalidInput("lengths", (len(correct), len(path_lengths), len(d_star)),
                           "equal lengths of correct, path_lengths and d_star")
    total, n = 0.0, 0
    for s, length, d in zip(correct, path_lengths, d_star):
        if d is None or math.isnan(d):
            continue
        if not (math.isfinite(length) and length >= 0):
            raise InvalidInput("path_length", length, "a finite length >= 0 (m)")
        if not (math.isfinite(d) and d >= 0):
            raise InvalidInput("d_star", d, "a finite length >= 0 (m), None or nan")
        n += 1
        if s:
            denom = max(length, d)
            total += d / denom if denom > 0 else 1.0
    return (total / n if n else None), n


# ---------------------------------------------------------------------------------------------- d*
def annulus_points(anchor_xy: Sequence[float], r: float, tol: float = 0.1, step: float = 0.05) -> np.ndarray:
    """Polar grid (N, 2) over r - tol <= |p - anchor| <= r + tol (m, map): radial step <= tol / 2,
    arc step <= ``step`` on every ring."""
    if not (math.isfinite(r) and r > 0):
        raise InvalidInput("r", r, "a radius > 0 (m)")
    if not (0 < tol < r and 0 < step):
        raise InvalidInput("tol/step", (tol, step), "0 < tol < r and step > 0 (m)")
    ax, ay = (float(v) for v in anchor_xy[:2])
    rings = np.linspace(r - tol, r + tol, 5)  # step tol / 2, both bounds included
    pts = []
    for rho in rings:
        n = max(8, math.ceil(2 * math.pi * rho / step))
        a = np.arange(n) * (2 * math.pi / n)
        pts.append(np.stack([ax + rho * np.cos(a), ay + rho * np.sin(a)], 1))
    return np.concatenate(pts)


def geodesic_to_nearest(nav: NavigableSpace, start_xy: Sequence[float], goals: np.ndarray,
                        chunk: int = 2048) -> float:
    """``min(nav.geodesic_distance(start, g) for g in goals)`` (m) in one query; inf if none reachable.

    Same graph and visibility tests as :meth:`NavigableSpace.geodesic_distance`. Every pair
    (goal, graph vertex v) costs dist(start, v) + |v - goal| and every goal costs |start - goal|
    by a straight move; pairs are checked for a free segment in increasing cost, so the first
    free one is the minimum and most pairs are never tested.
    """
    start = np.asarray(start_xy, float)[:2]
    goals = np.atleast_2d(np.asarray(goals, float)).reshape(-1, 2)
    if len(goals):
        goals = goals[nav.is_free(goals)]
    if len(goals) == 0 or not nav.is_free(start)[0]:
        return math.inf
    verts = nav.vertices
    seen = nav._visible(start)
    if len(seen):
        from_start = (np.linalg.norm(verts[seen] - start, axis=1)[:, None] + nav._dist[seen]).min(axis=0)
        via = np.nonzero(np.isfinite(from_start))[0]
    else:
        from_start, via = np.zeros(len(verts)), np.zeros(0, int)
    # column 0: the straight move; column 1 + j: through vertex via[j]
    cost = np.concatenate([np.linalg.norm(goals - start, axis=1)[:, None],
                           from_start[via][None, :] + np.linalg.norm(goals[:, None] - verts[via][None], axis=-1)], 1)
    order = np.argsort(cost, axis=None, kind="stable")
    ends = np.concatenate([start[None], verts[via]])
    lo, size = 0, 256
    while lo < len(order):
        idx = order[lo:lo + size]
        g, col = np.divmod(idx, cost.shape[1])
        direct = col == 0
        # straight moves are tested start -> goal and vertex moves goal -> vertex, as _solve does
        a = np.where(direct[:, None], start[None], goals[g])
        b = np.where(direct[:, None], goals[g], ends[col])
        free = nav.segment_free(a, b)
        if free.any():
            return float(cost.flat[idx[int(np.argmax(free))]])
        lo, size = lo + size, min(2 * size, chunk)
    return math.inf


def d_star(nav: NavigableSpace, start_xy: Sequence[float], anchor_xy: Sequence[float], r: float,
           tol: float = 0.1, step: float = 0.05) -> float | None:
    """d*(r): shortest collision-free path (m) from the start to any free point whose distance to the
    human anchor is within r +- tol (sampled by :func:`annulus_points`).

    Candidates are selected by exact clearance (:meth:`NavigableSpace.is_free`) and reachability
    (a finite geodesic from the start), never by the 5 cm connectivity raster, which misses free bands
    narrower than a cell. 0 when the start itself lies in that annulus and is free; None when no
    sampled point of the annulus is free or none is reachable. People are not obstacles (the static
    navmesh).
    """
    start = np.asarray(start_xy, float)[:2]
    anchor = np.asarray(anchor_xy, float)[:2]
    if not (np.isfinite(start).all() and np.isfinite(anchor).all()):
        raise InvalidInput("start/anchor", (list(start), list(anchor)), "finite map coordinates (m)")
    pts = annulus_points(anchor, r, tol, step)
    if abs(np.linalg.norm(start - anchor) - r) <= tol and nav.is_free(start)[0]:
        return 0.0
    cands = pts[nav.is_free(pts)]
    if len(cands) == 0:
        return None
    best = geodesic_to_nearest(nav, start, cands)
    return best if math.isfinite(best) else None


# ---------------------------------------------------------------------------------------------- records
def table6(diagnostics: Sequence[Diagnostics]) -> dict[str, float]:
    """The paper's acquisition diagnostics over episodes (percentages and metres; path before the
    handoff and clipped moves pooled over all episodes)."""
    n = max(1, len(diagnostics))
    path = sum(d.path_length for d in diagnostics)
    return {"handoff_pct": 100 * sum(d.handoff for d in diagnostics) / n,
            "mean_path_m": path / n,
            "path_before_handoff_pct": 100 * sum(d.path_before_handoff for d in diagnostics) / path if path else math.nan,
            "budget_exhausted_pct": 100 * sum(d.budget_exhausted for d in diagnostics) / n,
            "clipped_pct": 100 * sum(d.clipped_translations for d in diagnostics)
            / max(1, sum(d.attempted_translations for d in diagnostics))}


def trained(names: Iterable[str]) -> list[str]:
    """The trained recognizers among ``names`` (all but the :data:`REFERENCES`), sorted: the group."""
    return [n for n in sorted(names) if n not in REFERENCES and n != GROUP]


def _recognizers(records: Sequence[EpisodeRecord]) -> dict[str, tuple[str, ...]]:
    """Recognizer -> settings, checked identical across the records (paired episodes)."""
    if not records:
        raise InvalidInput("records", list(records), "at least one paired episode record")
    layout = {rec: tuple(sorted(s)) for rec, s in records[0].predictions.items()}
    if GROUP in layout:
        raise InvalidInput("recognizer", GROUP, f"a name other than the reserved {GROUP!r}")
    for r in records[1:]:
        got = {rec: tuple(sorted(s)) for rec, s in r.predictions.items()}
        if got != layout:
            raise InvalidInput("predictions", got, f"the same recognizers and settings in every record ({layout})",
                               where=r.episode_id)
    return layout


def _column(records: Sequence[EpisodeRecord], rec: str, setting: str) -> list:
    return [r.predictions[rec][setting] for r in records]


def _labels(records: Sequence[EpisodeRecord]) -> list[str]:
    return [r.label for r in records]


def _need(layout: dict[str, tuple[str, ...]], rec: str, settings: Sequence[str], metric: str) -> None:
    missing = [s for s in settings if s not in layout[rec]]
    if missing:
        raise InvalidInput(f"predictions[{rec!r}]", list(layout[rec]), f"settings {list(settings)} for {metric}")


def _nanmean(values: list) -> float | None:
    """Mean of the defined values (None when there are none)."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(vals)) if vals else None


def _mean(per_recognizer: dict, models: list[str], settings: list[str]) -> dict:
    """Group means per setting over the trained recognizers ``models`` ({} without any)."""
    return {x: float(np.mean([per_recognizer[n][x] for n in models])) for x in settings} if models else {}


def is_record_field(path: str) -> bool:
    """Whether ``path`` names a field of :class:`EpisodeRecord`, dotted into its parts (``"a_obs.path_length"``)."""
    cls: object = EpisodeRecord
    for part in path.split("."):
        if not dataclasses.is_dataclass(cls):
            return False
        hints = typing.get_type_hints(cls)
        if part not in hints:
            return False
        cls = next((a for a in typing.get_args(hints[part]) if a is not type(None)), hints[part])  # X | None -> X
    return True


class Metric:
    """A benchmark measure over paired episode records, registered in :data:`METRICS` under its name.

    - ``name``: set by the registration (``@METRICS.register("my_metric")``), never spelled again;
    - ``description``: one line;
    - ``needs``: what it reads, in :meth:`compute` or its :meth:`section`: other metrics' names (computed
      before it; their results reach :meth:`compute` as ``inputs`` and the summary before
      :meth:`summary`) and record fields (:func:`is_record_field`: ``"label"``, ``"a_obs.path_length"``);
    - ``shows``: the metrics whose results its report section shows (they render no section of their own);
    - :meth:`applies`: whether it is defined for a run's records (the report leaves the others out);
    - :meth:`compute`: the result over the records;
    - :meth:`summary`: its entries of the report summary (:func:`affectsim_eval.run.report.summarize`);
    - :meth:`section`: its Markdown section of the report.

    The report computes, summarises and renders every registered metric in :func:`ordered` order, so
    a registered metric is in the report with nothing else to edit.
    """

    name: str = ""
    description: str = ""
    needs: tuple[str, ...] = ("label", "predictions")
    shows: tuple[str, ...] = ()

    def applies(self, records: Sequence[EpisodeRecord]) -> bool:
        """Whether the metric is defined for these records (e.g. OGR only with P-Ref); always by default."""
        return True

    def compute(self, records: Sequence[EpisodeRecord], inputs: Mapping[str, object] | None = None):
        """The result over ``records``; ``inputs``: the results of the metrics it needs (computed here when None)."""
        raise NotImplementedError

    def summary(self, result, s: dict) -> dict:
        """Its entries of the report summary ``s`` (so far: ``n``, ``recognizers``, ``models`` (the trained
        ones), ``settings`` and the entries of the metrics before it); ``result`` None where it does not
        apply. By default ``{name: result}``."""
        return {self.name: result}

    def section(self, s: dict, figures: dict[str, str]) -> list[str]:
        """Lines of its report section from the summary ``s`` (each block followed by an empty line; [] for
        none in this run). By default a heading and a table of the numbers in ``s[name]``."""
        rows = [[" / ".join(path) or self.name, _leaf(v)] for path, v in _leaves(s.get(self.name), ())]
        if not rows:
            return []
        return [f"## {self.name}", "", self.description, "", table(["entry", "value"], rows), ""]

    def _inputs(self, records: Sequence[EpisodeRecord], inputs: Mapping[str, object] | None) -> Mapping[str, object]:
        return compute_all(records, metric_needs(self)) if inputs is None else inputs


def _leaves(x, path: tuple[str, ...]):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, (*path, str(k)))
    elif isinstance(x, (list, tuple)):
        for k, v in enumerate(x):
            yield from _leaves(v, (*path, str(k)))
    elif x is not None or path:
        yield path, x


def _leaf(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}" if isinstance(v, float) else str(v)


METRICS: Registry[Metric] = Registry("metric", name_attr="name")
GROUP_ROW = "**group (trained)**"  # the group's row in the report's tables


def metric_needs(metric: Metric | type[Metric]) -> list[str]:
    """The metrics among ``metric.needs`` (the rest are record fields)."""
    return [n for n in metric.needs if n in METRICS]


def ordered(names: Iterable[str] | None = None) -> list[str]:
    """``names`` (default: every registered metric) with the metrics they need, each after those it
    needs and otherwise in registration order: the order in which the report computes, summarises
    and renders them. A cycle raises :class:`InvalidInput`."""
    rank = {n: i for i, n in enumerate(METRICS.registered())}
    out: list[str] = []
    active: list[str] = []

    def visit(n: str) -> None:
        if n in out:
            return
        if n in active:
            raise InvalidInput("metric needs", " -> ".join([*active, n]), "metrics that do not need each other in a cycle")
        active.append(n)
        for d in sorted(metric_needs(METRICS.get(n)), key=rank.__getitem__):
            visit(d)
        active.pop()
        out.append(n)

    for n in sorted(METRICS.registered() if names is None else names, key=lambda n: rank.get(n, len(rank))):
        visit(n)
    return out


def compute_all(records: Sequence[EpisodeRecord], ids: Iterable[str] | None = None) -> dict[str, object]:
    """{metric name: result} for ``ids`` (default: every registered metric that applies to the records, and
    whose needed metrics apply), each computed once, after the metrics it needs, from their results."""
    want = None if ids is None else list(ids)
    results: dict[str, object] = {}
    for n in ordered(want):
        m = METRICS.create(n)
        deps = metric_needs(m)
        if want is None and not (all(d in results for d in deps) and m.applies(records)):
            continue
        results[n] = m.compute(records, {d: results[d] for d in deps})
    return results if want is None else {n: results[n] for n in want}


@METRICS.register("macro_f1")
class MacroF1(Metric):
    description = "Macro-F1 over the five emotions (fraction), per recognizer and setting."
    shows = ("active_gain", "ogr")

    def compute(self, records, inputs=None) -> dict[str, dict[str, float]]:
        labels = _labels(records)
        return {rec: {s: macro_f1(labels, _column(records, rec, s)) for s in settings}
                for rec, settings in _recognizers(records).items()}

    def summary(self, result, s):
        return {"macro_f1": result, "group": _mean(result, s["models"], s["settings"])}

    def section(self, s, figures):
        """Table 3: Macro-F1 per setting with Δgain and OGR, then the paired figure."""
        names, f1 = s["recognizers"], s["macro_f1"]
        group = [GROUP_ROW] if s["group"] else []
        gains, ogrs = s["active_gain"], s["ogr"]
        rows = []
        for n in names + group:
            m = f1[n] if n in f1 else s["group"]
            o = ogrs.get(n) if n in f1 else s["group_ogr"]
            rows.append([n] + [pct(m[x]) for x in s["settings"]] + [signed(gains[n if n in f1 else GROUP]), pct(o)])
        lines = ["## Table 3: Macro-F1 per recognizer and setting", "",
                 table(["recognizer", *(NAMES[x] for x in s["settings"]), "Δgain", "OGR %"], rows), "",
                 "Paper (group means): " + "; ".join(
                     f"{g} " + " / ".join(f"{NAMES[x]} {v[x]}" for x in SETTINGS) + f", Δgain {v['gain']} (OGR {v['ogr']} %)"
                     for g, v in paper.TABLE3.items()) + ".",
                 f"Chance floors (five balanced classes): always one class {paper.CHANCE['single class']}, uniform random "
                 f"{paper.CHANCE['uniform']}.", ""]
        if "paired" in figures:
            lines += [f"![paired Macro-F1]({figures['paired']})", ""]
        return lines


def _f1_rows(records: Sequence[EpisodeRecord], metric: str, settings: Sequence[str],
             f1: Mapping[str, Mapping[str, float]]) -> dict[str, Mapping[str, float]]:
    """The Macro-F1 rows of every recognizer, each checked to hold ``settings``."""
    layout = _recognizers(records)
    for rec in layout:
        _need(layout, rec, settings, metric)
    return {rec: f1[rec] for rec in layout}


@METRICS.register("active_gain")
class ActiveGain(Metric):
    description = "Macro-F1(A-Obs) - Macro-F1(P-Init) per recognizer, and of the trained recognizers' means."
    needs = ("macro_f1", "predictions")

    def compute(self, records, inputs=None) -> dict[str, float | None]:
        rows = _f1_rows(records, self.name, ("p_init", "a_obs"), self._inputs(records, inputs)["macro_f1"])
        out = {rec: active_gain(m["a_obs"], m["p_init"]) for rec, m in rows.items()}
        g = _mean(rows, trained(rows), ("p_init", "a_obs"))  # difference of means = mean of differences
        out[GROUP] = active_gain(g["a_obs"], g["p_init"]) if g else None
        return out

    def section(self, s, figures):
        return []  # a column of Table 3 (macro_f1)


@METRICS.register("ogr")
class OGR(Metric):
    """The one computation of OGR (docs/protocol.md §8, Eq. 3): per recognizer, and the group's as the OGR of
    the trained recognizers' mean scores (:func:`group_ogr`, as the paper does)."""

    description = ("Observation-gap recovery of Macro-F1 per recognizer (None unless P-Ref > P-Init), and of the "
                   "trained recognizers' means.")
    needs = ("macro_f1", "predictions")

    def applies(self, records) -> bool:
        return bool(records) and "p_ref" in records[0].predictions[records[0].recognizers[0]]  # a robot has none

    def compute(self, records, inputs=None) -> dict[str, float | None]:
        rows = _f1_rows(records, self.name, ("p_init", "p_ref", "a_obs"), self._inputs(records, inputs)["macro_f1"])
        out = {rec: ogr(m["p_init"], m["p_ref"], m["a_obs"]) for rec, m in rows.items()}
        models = trained(rows)
        out[GROUP] = group_ogr([rows[n] for n in models]) if models else None
        return out

    def summary(self, result, s):
        return {"ogr": {n: result[n] if result else None for n in s["recognizers"]},
                "group_ogr": result[GROUP] if result else None}

    def section(self, s, figures):
        return []  # a column of Table 3 (macro_f1)


@METRICS.register("intervals")
class Intervals(Metric):
    """Every number of Tables 3 and 5 with its paired bootstrap interval (:mod:`~affectsim_eval.scoring.uncertainty`)."""

    description = ("Paired bootstrap 95 % intervals (episodes resampled within each family, seeded) of every "
                   "Macro-F1, gain over P-Init, OGR, Recovery Rate and E-SPL@r, per recognizer and group.")
    needs = ("label", "family", "predictions", "a_obs.path_length", "d_star")

    def compute(self, records, inputs=None) -> dict:
        from affectsim_perception.recognizers import RECOGNIZERS  # which recognizers combine others

        models = trained(_recognizers(records))
        return uncertainty.intervals(records, models, {m: RECOGNIZERS.get(m).combines for m in models if m in RECOGNIZERS})

    def summary(self, result, s):
        return {"intervals": uncertainty.typed(result)}

    def section(self, s, figures):
        return uncertainty.section(s["intervals"], s["recognizers"])


@METRICS.register("macro_f1_new_obs")
class MacroF1NewObservation(Metric):
    description = ("Macro-F1 per recognizer and setting over the new-observation subset: the episodes where A-Obs "
                   "made a stable handoff and recorded its own clip (Table 4).")
    needs = ("macro_f1", "a_obs.fallback", "label", "predictions")

    def compute(self, records, inputs=None) -> dict:
        new = [r for r in records if not r.a_obs.fallback]
        return {"n": len(new), "macro_f1": METRICS.create("macro_f1").compute(new) if new else None}

    def summary(self, result, s):
        f1 = result["macro_f1"]
        return {"new_obs": {"n": result["n"], "macro_f1": f1,
                            "group": _mean(f1, s["models"], s["settings"]) if f1 else {}}}

    def section(self, s, figures):
        """Table 4: the complete set beside the new-observation subset."""
        names, f1, new = s["recognizers"], s["macro_f1"], s["new_obs"]
        group = [GROUP_ROW] if s["group"] else []
        rows = []
        for n in names + group:
            a = f1[n] if n in f1 else s["group"]
            nf = (new["macro_f1"][n] if n in f1 else new["group"]) if new["macro_f1"] else None
            rows.append([n, pct(a["p_init"]), pct(a["a_obs"]), gain(a["a_obs"], a["p_init"]),
                         *((pct(nf["p_init"]), pct(nf["a_obs"]), gain(nf["a_obs"], nf["p_init"])) if nf else ("–",) * 3)])
        return ["## Table 4: complete set vs new-observation subset", "",
                f"New-observation subset: the {new['n']} episodes where A-Obs made a stable handoff and recorded its own "
                f"clip (the others fall back to the P-Init clip). Gain = A-Obs − P-Init (points).", "",
                table(["recognizer", f"all ({s['n']}): P-Init", "A-Obs", "gain", f"new ({new['n']}): P-Init", "A-Obs",
                       "gain"], rows), "",
                "Paper: " + "; ".join(f"{g} complete {v['all'][0]} episodes {' / '.join(v['all'][1:])}, new-observation "
                                      f"{v['new'][0]} episodes {' / '.join(v['new'][1:])}" for g, v in paper.TABLE4.items())
                + " (P-Init / A-Obs / gain).", ""]


@METRICS.register("recovery_rate")
class RecoveryRate(Metric):
    description = "Share of P-Init errors that A-Obs gets right, per recognizer (None without P-Init errors)."
    shows = tuple(f"e_spl@{r}" for r in ESPL_RADII)

    def compute(self, records, inputs=None) -> dict[str, float | None]:
        layout = _recognizers(records)
        labels = _labels(records)
        for rec in layout:
            _need(layout, rec, ("p_init", "a_obs"), self.name)
        return {rec: recovery_rate(labels, _column(records, rec, "p_init"), _column(records, rec, "a_obs"))
                for rec in layout}

    def summary(self, result, s):
        return {"recovery": result, "group_recovery": _nanmean([result[n] for n in s["models"]])}

    def section(self, s, figures):
        """Table 5: Recovery Rate and E-SPL@r with the valid episodes per radius."""
        names = s["recognizers"]
        rows = [[n, pct(s["recovery"][n])] + [pct(s["e_spl"][r][n]["value"]) for r in ESPL_RADII] for n in names]
        if s["group"]:
            rows.append([GROUP_ROW, pct(s["group_recovery"])] + [pct(s["group_e_spl"][r]) for r in ESPL_RADII])
        valid = [s["e_spl"][r][names[0]]["n_valid"] for r in ESPL_RADII]
        return ["## Table 5: Recovery Rate and E-SPL@r", "",
                table(["recognizer", "Recovery Rate", "E-SPL@1", "E-SPL@3", "E-SPL@5"], rows), "",
                f"Valid episodes per radius (non-empty, reachable target region): 1 m {valid[0]}, 3 m {valid[1]}, "
                f"5 m {valid[2]} of {s['n']}.",
                "Paper (group means, Recovery / E-SPL@1 / @3 / @5): "
                + "; ".join(f"{g} {' / '.join(v)}" for g, v in paper.TABLE5.items()) + ".", ""]


class ESPL(Metric):
    """E-SPL@r per recognizer: {recognizer: {"value": fraction or None, "n_valid": N_r}}."""

    radius: int = 0
    needs = ("label", "predictions", "a_obs.path_length", "d_star")

    def compute(self, records, inputs=None) -> dict[str, dict[str, float | int | None]]:
        layout = _recognizers(records)
        key = str(self.radius)
        lengths, stars = [], []
        for r in records:
            if key not in r.d_star:
                raise InvalidInput(f"d_star[{key!r}]", r.d_star, "d* for every E-SPL radius (m or None)",
                                   where=r.episode_id)
            lengths.append(float(r.a_obs.path_length))
            stars.append(r.d_star[key])
        out = {}
        for rec in layout:
            _need(layout, rec, ("a_obs",), self.name)
            correct = [label_index(p, "a_obs prediction", True) == label_index(r.label, "label", False)
                       for p, r in zip(_column(records, rec, "a_obs"), records)]
            value, n = e_spl(correct, lengths, stars)
            out[rec] = {"value": value, "n_valid": n}
        return out

    def summary(self, result, s):
        return {"e_spl": {**s.get("e_spl", {}), self.radius: result},
                "group_e_spl": {**s.get("group_e_spl", {}),
                                self.radius: _nanmean([result[n]["value"] for n in s["models"]])}}

    def section(self, s, figures):
        return []  # a column of Table 5 (recovery_rate)


for _radius in ESPL_RADII:  # one registered metric per E-SPL radius of the protocol
    METRICS.register(f"e_spl@{_radius}")(type(f"ESPL{_radius}", (ESPL,), {
        "radius": _radius,
        "description": f"Emotion-aware SPL with the target region at {_radius} +- 0.1 m from the person."}))


@METRICS.register("table6")
class Table6(Metric):
    description = "A-Obs acquisition diagnostics of the paper's Table 6 (percentages and metres)."
    needs = ("a_obs.diagnostics",)

    def compute(self, records, inputs=None) -> dict[str, float]:
        if not records:
            raise InvalidInput("records", list(records), "at least one paired episode record")
        return table6([r.a_obs.diagnostics for r in records])

    def section(self, s, figures):
        t6, p6 = s["table6"], paper.TABLE6
        return ["## Table 6: acquisition diagnostics", "",
                table(["diagnostic", "here", "paper"],
                      [["stable handoff (% episodes)", f"{t6['handoff_pct']:.1f}", p6["handoff_pct"]],
                       ["mean path (m / episode)", f"{t6['mean_path_m']:.2f}", p6["mean_path_m"]],
                       ["path before handoff (% of locomotion)", f"{t6['path_before_handoff_pct']:.1f}",
                        p6["path_before_handoff_pct"]],
                       ["budget exhaustion (% episodes)", f"{t6['budget_exhausted_pct']:.1f}", p6["budget_exhausted_pct"]],
                       ["clipped moves (% of translations)", f"{t6['clipped_pct']:.1f}", p6["clipped_pct"]]]),
                ""]


def _shown(s: dict) -> list[str]:
    return [x for x in ("p_init", "p_ref", "p_mon", "a_obs") if x in s["settings"]]


@METRICS.register("per_class_recall")
class PerClassRecall(Metric):
    description = "Recall per emotion (fraction; nan without true samples), per recognizer and setting."

    def compute(self, records, inputs=None) -> dict[str, dict[str, dict[str, float]]]:
        labels = _labels(records)
        return {rec: {s: per_class_recall(labels, _column(records, rec, s)) for s in settings}
                for rec, settings in _recognizers(records).items()}

    def summary(self, result, s):
        models = s["models"]
        return {"recall": result,
                "group_recall": {x: {e: _nanmean([result[n][x][e] for n in models]) for e in EMOTIONS}
                                 for x in s["settings"]} if models else {}}

    def section(self, s, figures):
        """Per-class recall per setting (Fig. 5a/b), and the group's gain over P-Init."""
        names, shown = s["recognizers"], _shown(s)
        group = [GROUP_ROW] if s["group"] else []
        recall = {**s["recall"], **({group[0]: s["group_recall"]} if group else {})}
        rows = [[n, NAMES[x]] + [pct(recall[n][x][e]) for e in EMOTIONS] for n in names + group for x in shown]
        lines = ["## Per-class recall (Fig. 5a/b)", "", table(["recognizer", "setting", *EMOTIONS], rows), ""]
        if group:
            rows = [[NAMES[x]] + [gain(recall[group[0]][x][e], recall[group[0]]["p_init"][e]) for e in EMOTIONS]
                    for x in shown if x != "p_init"]
            lines += ["Group recall gain over P-Init (points):", "", table(["setting", *EMOTIONS], rows), ""]
        return lines


@METRICS.register("macro_f1_by_family")
class MacroF1ByFamily(Metric):
    description = "Macro-F1 per recognizer and setting within each episode family (Fig. 5c/d)."
    needs = ("family", "label", "predictions")

    def compute(self, records, inputs=None) -> dict[str, dict]:
        f1 = METRICS.create("macro_f1")
        return {f: {"n": sum(r.family == f for r in records),
                    "macro_f1": f1.compute([r for r in records if r.family == f])}
                for f in sorted({r.family for r in records})}

    def summary(self, result, s):
        return {"family": {f: {**v, "group": _mean(v["macro_f1"], s["models"], s["settings"])}
                           for f, v in result.items()}}

    def section(self, s, figures):
        names, shown, fam = s["recognizers"], _shown(s), s["family"]
        group = [GROUP_ROW] if s["group"] else []
        rows = [[f, fam[f]["n"], n] + [pct(v[x]) for x in s["settings"]]
                for f in fam for n, v in ([(n, fam[f]["macro_f1"][n]) for n in names] + [(g, fam[f]["group"]) for g in group])]
        lines = ["## Macro-F1 per episode family (Fig. 5c/d)", "",
                 table(["family", "episodes", "recognizer", *(NAMES[x] for x in s["settings"])], rows), ""]
        if group:
            rows = [[f, fam[f]["n"]] + [gain(fam[f]["group"][x], fam[f]["group"]["p_init"]) for x in shown if x != "p_init"]
                    for f in fam]
            lines += ["Group Macro-F1 gain over P-Init per family (points):", "",
                      table(["family", "episodes", *(NAMES[x] for x in shown if x != "p_init")], rows), ""]
        return lines


def social_by_emotion(records) -> dict[str, dict]:
    """Per target emotion (and "all") over records with social measures: episodes, % where the target
    noticed the robot, mean seconds the target reacted, mean length (m) and extent (m) of the
    target's displacement, median smallest gap (m), mean % of poses in the intimate and personal
    zones, and contacts in all."""
    out = {}
    groups = {e: [r for r in records if r.social is not None and r.label == e] for e in EMOTIONS}
    groups["all"] = [r for r in records if r.social is not None]
    for e, rs in groups.items():
        if not rs:
            continue
        tgt = [next(p for p in r.social.people if p["id"] == "target") for r in rs]  # people are named by role
        out[e] = {"n": len(rs),
                  "noticed_pct": 100.0 * float(np.mean([t["noticed_at"] is not None for t in tgt])),
                  "reacting_s": float(np.mean([t["reacting_s"] for t in tgt])),
                  "path_m": float(np.mean([t["path_m"] for t in tgt])),
                  "max_shift_m": float(np.mean([t["max_shift_m"] for t in tgt])),
                  "min_gap_m": float(np.median([r.social.min_gap_m for r in rs])),
                  "intimate_pct": float(np.mean([r.social.intimate_pct for r in rs])),
                  "personal_pct": float(np.mean([r.social.personal_pct for r in rs])),
                  "contacts": int(sum(r.social.contacts for r in rs))}
    return out


@METRICS.register("social_measures")
class Social(Metric):
    description = ("Reactive people: per target emotion, episodes, % noticed, reacting s, displacement, gaps and "
                   "proximity zones over the A-Obs trajectory, contacts.")
    needs = ("social", "label", "macro_f1", "per_class_recall")

    def compute(self, records, inputs=None) -> dict[str, dict]:
        return social_by_emotion(records)  # {} unless people were reactive

    def summary(self, result, s):
        return {"social": result}

    def section(self, s, figures):
        """Social measures per target emotion beside the group's A-Obs recall and its gain over P-Init."""
        if not s["social"]:
            return []
        grouped = bool(s["group"])
        lines = ["## Social measures (reactive people)", "",
                 "Over the robot's whole A-Obs trajectory; gaps surface to surface (robot footprint to the person's "
                 "disc); zones: intimate < 0.45 m, personal 0.45–1.2 m. Target: the person whose emotion is scored.", ""]
        rec = s["group_recall"] if grouped else {}
        rows = []
        for e, v in s["social"].items():
            if e == "all":
                acc = pct(s["group"].get("a_obs")) if grouped else "–"
                g = gain(s["group"]["a_obs"], s["group"]["p_init"]) if grouped else "–"
            else:
                acc = pct(rec["a_obs"][e]) if grouped else "–"
                g = gain(rec["a_obs"][e], rec["p_init"][e]) if grouped else "–"
            rows.append([e, v["n"], acc, g, f"{v['noticed_pct']:.0f}", f"{v['reacting_s']:.1f}", f"{v['path_m']:.2f}",
                         f"{v['max_shift_m']:.2f}", f"{v['min_gap_m']:.2f}", f"{v['intimate_pct']:.1f}",
                         f"{v['personal_pct']:.1f}", v["contacts"]])
        lines += [table(["target emotion", "episodes", "A-Obs (group recall; all: Macro-F1)", "gain over P-Init",
                         "noticed %", "reacting s", "displaced m", "max shift m", "min gap m", "intimate %",
                         "personal %", "contacts"], rows), ""]
        if "social" in figures:
            lines += [f"![gain against disturbance]({figures['social']})", ""]
        return lines


# ------------------------------------------------------------------------------ evolving affect
MIN_SEGMENT_S = 1.0  # predicted runs shorter than this merge into a neighbour (a one-window flicker is no segment)


def _streamed(records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """The records with window streams (evolving episodes), checked to hold the same recognizers and settings."""
    out = [r for r in records if r.streams is not None]
    if out:
        layout = {rec: sorted(s) for rec, s in out[0].streams.labels.items()}
        for r in out[1:]:
            if {rec: sorted(s) for rec, s in r.streams.labels.items()} != layout:
                raise InvalidInput("streams.labels", sorted(r.streams.labels), f"the layout of the other records "
                                   f"({layout})", where=r.episode_id)
    return out


def _segment_pairs(records: Sequence[EpisodeRecord], rec: str, setting: str) -> tuple[list, list]:
    true, pred = [], []
    for r in records:
        st = r.streams
        true.append(st.segments)
        labels = [None if x is None else EMOTIONS.index(x) for x in st.labels[rec][setting]]
        pred.append(segments_from_windows(st.times, labels, st.start, st.end, MIN_SEGMENT_S))
    return true, pred


class _Affect(Metric):
    needs = ("streams",)

    def summary(self, result, s):
        return {"affect": {**s.get("affect", {}), self.name[len("affect_"):]: result}}


def _affect_shown(s: dict) -> tuple[list[str], int]:
    """The settings the evolving episodes were measured in, and how many episodes there are."""
    seg = s["affect"]["segments"]
    shown = [x for x in s["settings"] if x in next(iter(seg.values()))]
    return shown, next(iter(next(iter(seg.values())).values()))["episodes"]


@METRICS.register("affect_segments")
class AffectSegments(_Affect):
    description = ("Evolving episodes: segment-count accuracy, mean tIoU and segment emotion accuracy per recognizer "
                   "and setting.")
    shows = ("affect_transitions",)

    def compute(self, records, inputs=None) -> dict:
        rs = _streamed(records)
        out: dict = {}
        for rec, by in (rs[0].streams.labels.items() if rs else ()):
            out[rec] = {}
            for s in by:
                t, p = _segment_pairs(rs, rec, s)
                out[rec][s] = {"count_accuracy": segment_count_accuracy(t, p), "mean_tiou": mean_tiou(t, p),
                               "emotion_accuracy": segment_emotion_accuracy(t, p), "episodes": len(rs)}
        return out

    def section(self, s, figures):
        """Segments and transitions of the evolving episodes, paired settings as columns."""
        a = s["affect"]
        if not a["segments"]:
            return []
        shown, n = _affect_shown(s)
        lines = ["## Evolving affect: segments and transitions", "",
                 f"{n} evolving episodes; one label per window of 8 frames (4 Hz) over the same interval in every setting; "
                 "percentages except the delay (s, negative: early). Segment measures as DAR (count accuracy, mean tIoU, "
                 "emotion accuracy at tIoU >= 0.5), transitions matched within ±1 s (docs/affect.md).", ""]
        rows = []
        for rec, by in a["segments"].items():
            tr = a["transitions"][rec]
            rows += [[rec, "segment count acc.", *(pct(by[x]["count_accuracy"]) for x in shown)],
                     [rec, "mean tIoU", *(pct(by[x]["mean_tiou"]) for x in shown)],
                     [rec, "segment emotion acc.", *(pct(by[x]["emotion_accuracy"]) for x in shown)],
                     [rec, "transition F1 ±1 s", *(pct(tr[x]["f1"]) for x in shown)],
                     [rec, "detection delay s", *(num(tr[x]["delay_s"]) for x in shown)]]
        return lines + [table(["recognizer", "measure", *(NAMES[x] for x in shown)], rows), ""]


@METRICS.register("affect_transitions")
class AffectTransitions(_Affect):
    description = "Evolving episodes: transition detection F1 within +-1 s and mean detection delay (s)."

    def compute(self, records, inputs=None) -> dict:
        rs = _streamed(records)
        return {rec: {s: transition_scores(*_segment_pairs(rs, rec, s)) for s in by}
                for rec, by in (rs[0].streams.labels.items() if rs else ())}

    def section(self, s, figures):
        return []  # rows of the segments table (affect_segments)


@METRICS.register("affect_vad")
class AffectVAD(_Affect):
    description = ("Evolving episodes: Spearman, Pearson and concordance correlation of predicted and true VAD per "
                   "dimension.")
    needs = ("streams", "affect_segments")

    def compute(self, records, inputs=None) -> dict:
        """{recognizer: {setting: scores}} of its VAD head and, under ``from_class``, of the reference
        that answers each window with the mean true VAD of the class the recognizer predicted there."""
        rs = _streamed(records)
        means = _class_means(rs)
        out: dict = {}
        for rec, by in (rs[0].streams.pred_vad.items() if rs else ()):
            out[rec] = {}
            for s in by:
                head = [(t, p) for r in rs for t, p in zip(r.streams.vad, r.streams.pred_vad[rec][s]) if p is not None]
                lookup = [(t, means.get(y, means[None])) for r in rs
                          for t, y in zip(r.streams.vad, r.streams.labels[rec][s]) if y is not None]
                out[rec][s] = {**_vad_pairs(head), "from_class": _vad_pairs(lookup)}
        return out

    def section(self, s, figures):
        """Valence, arousal and dominance of the evolving episodes, in the settings of the segments table."""
        a = s["affect"]
        if not (a["segments"] and a["vad"]):
            return []
        shown, _ = _affect_shown(s)
        def cell(scores: dict, dim: str) -> str:
            return "–" if dim not in scores else " / ".join(num(scores[dim][k]) for k in ("ccc", "spearman", "pearson"))

        rows = []
        for rec, by in a["vad"].items():
            for name, pick in ((rec, lambda x: by.get(x, {})), (f"{rec}: its class, looked up",
                                                                lambda x: by.get(x, {}).get("from_class", {}))):
                rows += [[name, dim, *(cell(pick(x), dim) for x in shown)] for dim in VAD_DIMENSIONS]
        return ["## Evolving affect: valence, arousal, dominance", "",
                "Over all windows with a rating: Lin's concordance (CCC) / Spearman / Pearson per dimension. Each "
                "recognizer's \"its class, looked up\" row is the reference that answers a window with the mean true "
                "VAD of the class the recognizer predicted there (class means of this run's windows, generous to "
                "the reference; the mean of all windows for a class none holds): what a VAD head adds beyond classification is its row's lead over that one.", "",
                table(["recognizer", "dimension", *(NAMES[x] for x in shown)], rows), ""]


def _vad_pairs(pairs: list) -> dict:
    """Scores of (true, predicted) VAD pairs and their count (scores only from two windows on)."""
    if len(pairs) < 2:
        return {"windows": len(pairs)}
    t, p = map(np.array, zip(*pairs))
    return {**vad_scores(t, p), "windows": len(pairs)}


def _class_means(rs: Sequence[EpisodeRecord]) -> dict[str | None, tuple[float, float, float]]:
    """Per emotion, the mean true VAD of the evolving windows whose true segment holds it; under None
    the mean of all windows (for a class no window holds)."""
    by: dict[str | None, list] = {None: []}
    for r in rs:
        st = r.streams
        for k, v in zip(label_at(st.segments, np.asarray(st.times, float)), st.vad):
            by.setdefault(EMOTIONS[k], []).append(v)
            by[None].append(v)
    return {e: tuple(float(x) for x in np.mean(v, 0)) for e, v in by.items() if v}
