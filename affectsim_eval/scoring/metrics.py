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
recognizer name ``"group"`` is reserved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_core.affect import segments_from_windows
from affectsim_core.classification import label_index, label_indices, macro_f1, per_class_f1
from affectsim_core.errors import InvalidInput
from affectsim_eval.scoring.affect_metrics import (
    mean_tiou,
    segment_count_accuracy,
    segment_emotion_accuracy,
    transition_scores,
    vad_scores,
)
from affectsim_core.protocol import EMOTIONS, ESPL_RADII
from affectsim_core.record import Diagnostics, EpisodeRecord
from affectsim_core.registry import Registry

GROUP = "group"  # reserved key: the result over recognizer means
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


class Metric:
    """A benchmark measure over paired episode records (see the module docstring)."""

    id: str = ""
    description: str = ""

    def compute(self, records: Sequence[EpisodeRecord]) -> dict:
        raise NotImplementedError


METRICS: Registry[Metric] = Registry("metric")


@METRICS.register("macro_f1")
class MacroF1(Metric):
    id = "macro_f1"
    description = "Macro-F1 over the five emotions (fraction), per recognizer and setting."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, dict[str, float]]:
        labels = _labels(records)
        return {rec: {s: macro_f1(labels, _column(records, rec, s)) for s in settings}
                for rec, settings in _recognizers(records).items()}


@METRICS.register("per_class_recall")
class PerClassRecall(Metric):
    id = "per_class_recall"
    description = "Recall per emotion (fraction; nan without true samples), per recognizer and setting."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, dict[str, dict[str, float]]]:
        labels = _labels(records)
        return {rec: {s: per_class_recall(labels, _column(records, rec, s)) for s in settings}
                for rec, settings in _recognizers(records).items()}


def _f1_rows(records: Sequence[EpisodeRecord], metric: str, settings: Sequence[str]) -> dict[str, dict[str, float]]:
    layout = _recognizers(records)
    labels = _labels(records)
    for rec in layout:
        _need(layout, rec, settings, metric)
    return {rec: {s: macro_f1(labels, _column(records, rec, s)) for s in settings} for rec in layout}


@METRICS.register("active_gain")
class ActiveGain(Metric):
    id = "active_gain"
    description = "Macro-F1(A-Obs) - Macro-F1(P-Init) per recognizer, and of the recognizer means."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, float]:
        rows = _f1_rows(records, self.id, ("p_init", "a_obs"))
        out = {rec: active_gain(m["a_obs"], m["p_init"]) for rec, m in rows.items()}
        out[GROUP] = float(np.mean(list(out.values())))  # mean of differences = difference of means
        return out


@METRICS.register("ogr")
class OGR(Metric):
    id = "ogr"
    description = "Observation-gap recovery of Macro-F1 per recognizer (None unless P-Ref > P-Init), and of the means."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, float | None]:
        rows = _f1_rows(records, self.id, ("p_init", "p_ref", "a_obs"))
        out = {rec: ogr(m["p_init"], m["p_ref"], m["a_obs"]) for rec, m in rows.items()}
        out[GROUP] = group_ogr(rows.values())
        return out


@METRICS.register("recovery_rate")
class RecoveryRate(Metric):
    id = "recovery_rate"
    description = "Share of P-Init errors that A-Obs gets right, per recognizer (None without P-Init errors)."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, float | None]:
        layout = _recognizers(records)
        labels = _labels(records)
        for rec in layout:
            _need(layout, rec, ("p_init", "a_obs"), self.id)
        return {rec: recovery_rate(labels, _column(records, rec, "p_init"), _column(records, rec, "a_obs"))
                for rec in layout}


class ESPL(Metric):
    """E-SPL@r per recognizer: {recognizer: {"value": fraction or None, "n_valid": N_r}}."""

    radius: int = 0

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, dict[str, float | int | None]]:
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
            _need(layout, rec, ("a_obs",), self.id)
            correct = [label_index(p, "a_obs prediction", True) == label_index(r.label, "label", False)
                       for p, r in zip(_column(records, rec, "a_obs"), records)]
            value, n = e_spl(correct, lengths, stars)
            out[rec] = {"value": value, "n_valid": n}
        return out


for _radius in ESPL_RADII:  # one registered metric per E-SPL radius of the protocol
    METRICS.register(f"e_spl@{_radius}")(type(f"ESPL{_radius}", (ESPL,), {
        "id": f"e_spl@{_radius}", "radius": _radius,
        "description": f"Emotion-aware SPL with the target region at {_radius} +- 0.1 m from the person."}))


@METRICS.register("table6")
class Table6(Metric):
    id = "table6"
    description = "A-Obs acquisition diagnostics of the paper's Table 6 (percentages and metres)."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict[str, float]:
        if not records:
            raise InvalidInput("records", list(records), "at least one paired episode record")
        return table6([r.a_obs.diagnostics for r in records])


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


@METRICS.register("affect_segments")
class AffectSegments(Metric):
    id = "affect_segments"
    description = ("Evolving episodes: segment-count accuracy, mean tIoU and segment emotion accuracy per recognizer "
                   "and setting.")

    def compute(self, records: Sequence[EpisodeRecord]) -> dict:
        rs = _streamed(records)
        out: dict = {}
        for rec, by in (rs[0].streams.labels.items() if rs else ()):
            out[rec] = {}
            for s in by:
                t, p = _segment_pairs(rs, rec, s)
                out[rec][s] = {"count_accuracy": segment_count_accuracy(t, p), "mean_tiou": mean_tiou(t, p),
                               "emotion_accuracy": segment_emotion_accuracy(t, p), "episodes": len(rs)}
        return out


@METRICS.register("affect_transitions")
class AffectTransitions(Metric):
    id = "affect_transitions"
    description = "Evolving episodes: transition detection F1 within +-1 s and mean detection delay (s)."

    def compute(self, records: Sequence[EpisodeRecord]) -> dict:
        rs = _streamed(records)
        return {rec: {s: transition_scores(*_segment_pairs(rs, rec, s)) for s in by}
                for rec, by in (rs[0].streams.labels.items() if rs else ())}


@METRICS.register("affect_vad")
class AffectVAD(Metric):
    id = "affect_vad"
    description = ("Evolving episodes: Spearman, Pearson and concordance correlation of predicted and true VAD per "
                   "dimension.")

    def compute(self, records: Sequence[EpisodeRecord]) -> dict:
        rs = _streamed(records)
        out: dict = {}
        for rec, by in (rs[0].streams.pred_vad.items() if rs else ()):
            out[rec] = {}
            for s in by:
                pairs = [(t, p) for r in rs for t, p in zip(r.streams.vad, r.streams.pred_vad[rec][s]) if p is not None]
                if len(pairs) < 2:
                    out[rec][s] = {"windows": len(pairs)}
                    continue
                t, p = map(np.array, zip(*pairs))
                out[rec][s] = {**vad_scores(t, p), "windows": len(pairs)}
        return out


def compute_all(records: Sequence[EpisodeRecord], ids: Iterable[str] | None = None) -> dict[str, dict]:
    """{metric id: result} for ``ids`` (default: every registered metric)."""
    return {i: METRICS.create(i).compute(records) for i in (METRICS.names() if ids is None else ids)}
