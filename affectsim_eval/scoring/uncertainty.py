"""How sure the report is: paired bootstrap intervals of its numbers and the verdicts they support.

Every statistic of the report (Macro-F1 per recognizer and setting, a setting's gain over P-Init,
OGR, Recovery Rate, E-SPL@r) is recomputed on resamples of the run's episodes, drawn with
replacement within each episode family (the run's family mix is kept) by
:func:`affectsim_core.resampling.stratified_weights`, seeded by :data:`SEED`. The resamples are
*paired*: one draw of episodes serves every recognizer and setting, so a gain's interval is that of
the difference on the same episodes. A resample on which a statistic is undefined (OGR when P-Ref
does not exceed P-Init; Recovery without a P-Init error) counts in the interval's ``undefined``
share, never as a value.

Groups: ``group`` is the paper's, the mean of the trained recognizers; ``distinct`` leaves out
every recognizer that combines others of the run (``Recognizer.combines``, e.g. the committee of
pose-temporal and rgb-clip), so that each model counts once. The references (majority, uniform)
get intervals like any recognizer: the noise floor of every gain.

Computed as weighted counts: one matrix product of the resample weights with each recognizer's
one-hot (label, prediction) table gives every resample's confusion matrix at once (seconds for
the full test split).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from affectsim_core.classification import label_indices
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import EMOTIONS, ESPL_RADII
from affectsim_core.record import EpisodeRecord
from affectsim_core.resampling import LEVEL, RESAMPLES, Interval, interval_of, stratified_weights
from affectsim_eval.scoring.markdown import NAMES, table

SEED = 0  # seed of the report's resamples (recorded in the report)
DETECT_Z = 2.80  # z(0.975) + z(0.80): a difference of 2.8 standard errors is found with 80 % power (5 %, two-sided)
EQUIVALENT = 0.03  # "P-Mon ≈ P-Init": within 3 points of Macro-F1 (fraction)
SPREAD_EPS = 1e-12  # a bootstrap standard error below this is rounding: the resamples did not vary
GROUP, DISTINCT = "group", "distinct"
GAINS = {"p_ref": "P-Ref − P-Init", "p_mon": "P-Mon − P-Init", "a_obs": "A-Obs − P-Init"}  # setting − P-Init
BEYOND_REF = "A-Obs − P-Ref"
_K = len(EMOTIONS)


class Paired:
    """Statistics of one run's records under every resample at once (arrays of ``1 + resamples``
    values: the estimate, then the resamples; NaN where undefined)."""

    def __init__(self, records: Sequence[EpisodeRecord], weights: np.ndarray) -> None:
        self.records, self.w = list(records), weights  # weights: (1 + resamples, episodes)

    @classmethod
    def drawn(cls, records: Sequence[EpisodeRecord], resamples: int = RESAMPLES, seed: int = SEED) -> "Paired":
        """Resamples of ``records`` within each family."""
        return cls(records, stratified_weights([r.family for r in records], resamples, seed))

    def subset(self, keep: np.ndarray) -> "Paired":
        """The same resamples restricted to the episodes where ``keep`` is true (within one family of
        a family-stratified draw, a bootstrap of that family)."""
        return Paired([r for r, k in zip(self.records, keep) if k], self.w[:, keep])

    def _indices(self, rec: str, setting: str) -> tuple[np.ndarray, np.ndarray]:
        return label_indices([r.label for r in self.records], [r.predictions[rec][setting] for r in self.records])

    def macro_f1(self, rec: str, setting: str) -> np.ndarray:
        """Macro-F1 (fraction) over all five classes; a missing prediction is wrong (a false negative)."""
        t, p = self._indices(rec, setting)
        onehot = np.zeros((len(t), _K * (_K + 1)))
        onehot[np.arange(len(t)), t * (_K + 1) + np.where(p < 0, _K, p)] = 1.0  # column K: no prediction
        c = (self.w @ onehot).reshape(-1, _K, _K + 1)  # confusion matrix of every resample
        tp = np.stack([c[:, k, k] for k in range(_K)], axis=1)
        fn = c[:, :, :].sum(axis=2) - tp
        fp = c[:, :, :_K].sum(axis=1) - tp
        denom = 2 * tp + fp + fn
        f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
        return f1.mean(axis=1)

    def recovery(self, rec: str) -> np.ndarray:
        """Share of the P-Init errors that A-Obs gets right."""
        t, pi = self._indices(rec, "p_init")
        _, pa = self._indices(rec, "a_obs")
        wrong = (pi != t).astype(float)
        den = self.w @ wrong
        return np.divide(self.w @ (wrong * (pa == t)), den, out=np.full(len(den), np.nan), where=den > 0)

    def e_spl(self, rec: str, radius: int) -> np.ndarray:
        """E-SPL@radius over the episodes with a defined d* (docs/protocol.md)."""
        t, pa = self._indices(rec, "a_obs")
        d = np.array([np.nan if r.d_star[str(radius)] is None else float(r.d_star[str(radius)]) for r in self.records])
        length = np.array([float(r.a_obs.path_length) for r in self.records])
        valid = ~np.isnan(d)
        denom = np.maximum(length, np.nan_to_num(d))
        ratio = np.where(denom > 0, np.nan_to_num(d) / np.where(denom > 0, denom, 1.0), 1.0)
        score = np.where(valid & (pa == t), ratio, 0.0)
        den = self.w @ valid.astype(float)
        return np.divide(self.w @ score, den, out=np.full(len(den), np.nan), where=den > 0)


def _nanmean(rows: list[np.ndarray]) -> np.ndarray:
    """Column means of the defined values (NaN where none is), as the report's group means."""
    a = np.array(rows)
    n = (~np.isnan(a)).sum(axis=0)
    return np.divide(np.nansum(a, axis=0), n, out=np.full(a.shape[1], np.nan), where=n > 0)


def _ogr(init: np.ndarray, ref: np.ndarray, aobs: np.ndarray) -> np.ndarray:
    gap = ref - init
    return np.divide(aobs - init, gap, out=np.full(len(gap), np.nan), where=gap > 0)


def distinct_models(models: Sequence[str], members: Mapping[str, Sequence[str]]) -> list[str]:
    """``models`` without those that combine other models of the run (``members``: name -> the
    recognizers it combines), so each model counts once."""
    return [m for m in models if not (members.get(m) and set(members[m]) <= set(models) - {m})]


_FIELDS = ("estimate", "low", "high", "undefined", "se")


def _fields(values: np.ndarray, units: int) -> dict[str, float | None]:
    """An interval as the numbers a metric result holds (see :func:`typed`)."""
    iv = interval_of(values, units)
    return {k: getattr(iv, k) for k in _FIELDS}


def typed(result: dict) -> dict:
    """:func:`intervals`' result with every interval an :class:`Interval` again (for the report)."""
    def conv(x, units):
        if isinstance(x, dict) and set(x) == set(_FIELDS):
            return Interval(**x, units=units, resamples=result["resamples"], level=result["level"])
        if isinstance(x, dict):
            return {k: conv(v, x.get("n", units) if isinstance(x.get("n"), int) else units) for k, v in x.items()}
        return x
    return conv(result, result["n"])


def intervals(records: Sequence[EpisodeRecord], models: Sequence[str], members: Mapping[str, Sequence[str]],
              resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """The report's intervals: ``macro_f1[rec][setting]``, ``gain[rec][setting]`` (setting − P-Init),
    ``ogr[rec]``, ``beyond_ref[rec]`` (A-Obs − P-Ref: whether the view acquired reads better than the
    reference view; None without P-Ref), ``recovery[rec]``, ``e_spl[radius][rec]`` (rec: every
    recognizer, ``group`` and ``distinct`` when there are trained ones; ``groups``: their members),
    ``family[family]["gain"]`` (the group's, per setting), and how they were drawn. Intervals (fractions)
    are dicts of ``estimate``, ``low``, ``high``, ``undefined``, ``se``: a metric result of numbers."""
    pair = Paired.drawn(records, resamples, seed)
    n = len(pair.records)
    names = list(records[0].recognizers)
    settings = [x for x in ("p_init", "p_ref", "p_mon", "a_obs") if x in records[0].predictions[names[0]]]
    f1 = {rec: {x: pair.macro_f1(rec, x) for x in settings} for rec in names}
    rec_ = {rec: pair.recovery(rec) for rec in names}
    espl = {r: {rec: pair.e_spl(rec, r) for rec in names} for r in ESPL_RADII} if all(
        str(r) in records[0].d_star for r in ESPL_RADII) else {}
    distinct = distinct_models(models, members)
    groups = {GROUP: list(models), DISTINCT: distinct} if models else {}
    for g, ms in groups.items():
        f1[g] = {x: np.mean([f1[m][x] for m in ms], axis=0) for x in settings}
        rec_[g] = _nanmean([rec_[m] for m in ms])
        for r in espl:
            espl[r][g] = _nanmean([espl[r][m] for m in ms])
    out = {"n": n, "resamples": resamples, "seed": seed, "level": LEVEL,
           "groups": {g: {m: 1 for m in ms} for g, ms in groups.items()},
           "macro_f1": {}, "gain": {}, "ogr": {}, "beyond_ref": {}, "recovery": {}, "e_spl": {r: {} for r in espl},
           "family": {}}
    for rec, m in f1.items():
        out["macro_f1"][rec] = {x: _fields(v, n) for x, v in m.items()}
        out["gain"][rec] = {x: _fields(m[x] - m["p_init"], n) for x in GAINS if x in m}
        out["ogr"][rec] = _fields(_ogr(m["p_init"], m["p_ref"], m["a_obs"]), n) if "p_ref" in m else None
        out["beyond_ref"][rec] = _fields(m["a_obs"] - m["p_ref"], n) if "p_ref" in m else None
        out["recovery"][rec] = _fields(rec_[rec], n)
        for r in espl:
            out["e_spl"][r][rec] = _fields(espl[r][rec], n)
    if models:
        fams = np.array([r.family for r in pair.records])
        for fam in sorted(set(fams)):
            sel = fams == fam
            sub = pair.subset(sel)
            g = {x: np.mean([sub.macro_f1(m, x) for m in models], axis=0) for x in settings}
            out["family"][fam] = {"n": int(sel.sum()),
                                  "gain": {x: _fields(g[x] - g["p_init"], int(sel.sum())) for x in GAINS if x in g}}
    return out


def differences(first: Sequence[EpisodeRecord], other: Sequence[EpisodeRecord], models: Sequence[str],
                resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """``other`` minus ``first``: two runs (e.g. two policies) on the same episodes, in the same order, compared
    on one paired draw within each family. Returns ``n`` and dicts of interval fields (fractions): ``a_obs[rec]``
    (A-Obs Macro-F1 per recognizer) and, with trained ``models``, ``a_obs["group"]`` (their mean), the group's
    ``recovery`` and ``e_spl[radius]``, and ``family[family]`` (``n`` and the group's ``a_obs``)."""
    ids = [r.episode_id for r in first]
    if not ids or [r.episode_id for r in other] != ids:
        raise InvalidInput("records", f"{len(first)} and {len(other)} episodes",
                           "two runs of the same episodes (at least one) in the same order")
    if set(other[0].recognizers) != set(first[0].recognizers):
        raise InvalidInput("recognizers", sorted(other[0].recognizers), f"those of the first run, {sorted(first[0].recognizers)}")
    w = stratified_weights([r.family for r in first], resamples, seed)
    a, b = Paired(first, w), Paired(other, w)
    n = len(ids)
    f1 = {rec: b.macro_f1(rec, "a_obs") - a.macro_f1(rec, "a_obs") for rec in first[0].recognizers}
    out = {"n": n, "resamples": resamples, "seed": seed, "level": LEVEL,
           "a_obs": {rec: _fields(v, n) for rec, v in f1.items()}, "e_spl": {}, "family": {}}
    if not models:
        return out
    out["a_obs"][GROUP] = _fields(np.mean([f1[m] for m in models], axis=0), n)
    out["recovery"] = _fields(_nanmean([b.recovery(m) for m in models]) - _nanmean([a.recovery(m) for m in models]), n)
    for r in ESPL_RADII:
        if all(str(r) in x.d_star for x in first):
            out["e_spl"][r] = _fields(_nanmean([b.e_spl(m, r) for m in models]) - _nanmean([a.e_spl(m, r) for m in models]), n)
    fams = np.array([r.family for r in first])
    for fam in sorted(set(fams)):
        sel = fams == fam
        sa, sb = a.subset(sel), b.subset(sel)
        d = np.mean([sb.macro_f1(m, "a_obs") - sa.macro_f1(m, "a_obs") for m in models], axis=0)
        out["family"][fam] = {"n": int(sel.sum()), "a_obs": _fields(d, int(sel.sum()))}
    return out


def _spread(iv: Interval) -> bool:
    """Whether the resamples vary at all: with one episode per family every resample is the run itself,
    and a zero-width interval is no evidence."""
    return iv.se is not None and iv.se > SPREAD_EPS


def detectable(iv: Interval) -> float | None:
    """The smallest difference (fraction) this run finds with 80 % power at 5 % two-sided: 2.8
    bootstrap standard errors."""
    return DETECT_Z * iv.se if _spread(iv) else None


def episodes_needed(iv: Interval) -> int | None:
    """Episodes a run of the same mix needs for the observed difference to be found with 80 % power
    (the standard error shrinks as 1 / sqrt(episodes)); None without a difference to find."""
    if not _spread(iv) or not iv.estimate:
        return None
    return int(math.ceil(iv.units * (DETECT_Z * iv.se / abs(iv.estimate)) ** 2))


def greater(iv: Interval) -> str:
    """Verdict on "the difference is positive": from the interval, never from the estimate alone."""
    if iv.low is None or not _spread(iv):
        return "undetermined at this size"
    return "holds" if iv.low > 0 else "does not hold" if iv.high < 0 else "undetermined at this size"


def equivalent(iv: Interval, margin: float = EQUIVALENT) -> str:
    """Verdict on "the difference is within ± ``margin``"."""
    if iv.low is None or not _spread(iv):
        return "undetermined at this size"
    if -margin <= iv.low and iv.high <= margin:
        return "holds"
    return "does not hold" if iv.low > margin or iv.high < -margin else "undetermined at this size"


# ---------------------------------------------------------------------------------------------- report
def _cell(iv: Interval | None, signed: bool = False) -> str:
    """``41.9 [33.2, 50.1]`` in points (``+`` signs for a difference), with the undefined share."""
    if iv is None:
        return "–"
    text = iv.text(100, 1, signed)
    return text + (f" ({100 * iv.undefined:.0f} % undef.)" if iv.undefined >= 0.005 and iv.low is not None else "")


def _rows(iv: dict, names: Sequence[str]) -> list[str]:
    return [*names, *iv["groups"]]


def describe(iv: dict) -> str:
    """How the intervals were drawn, and what the two groups are."""
    text = (f"Paired bootstrap over the {iv['n']} episodes: {iv['resamples']} resamples drawn within each family "
            f"(seed {iv['seed']}), {100 * iv['level']:.0f} % percentile intervals in points; one draw serves every "
            "recognizer and setting, so a gain's interval is that of the difference on the same episodes.")
    if iv["groups"]:
        left = [m for m in iv["groups"][GROUP] if m not in iv["groups"][DISTINCT]]
        text += (f" `{GROUP}`: the mean of the trained recognizers (as the paper); `{DISTINCT}`: each model once ("
                 + ", ".join(f"`{m}`" for m in iv["groups"][DISTINCT]) + ")"
                 + (f", leaving out {', '.join(f'`{m}`' for m in left)}, which combine{'s' if len(left) == 1 else ''} "
                    "models of the run" if left else "") + ".")
    return text


def section(iv: dict, names: Sequence[str]) -> list[str]:
    """The report's section of intervals: Macro-F1 per setting; gains, OGR, A-Obs − P-Ref, Recovery and
    E-SPL; the group's gains per family; and how large a run each claim needs."""
    rows = _rows(iv, names)
    settings = list(iv["macro_f1"][names[0]])
    gains = [x for x in GAINS if x in iv["gain"][names[0]]]
    radii = list(iv["e_spl"])
    lines = ["## Intervals (95 %, paired bootstrap over episodes)", "", describe(iv), "",
             table(["recognizer", *(NAMES[x] for x in settings)],
                   [[r, *(_cell(iv["macro_f1"][r][x]) for x in settings)] for r in rows]), "",
             table(["recognizer", *(GAINS[x] for x in gains), *(["OGR %", BEYOND_REF] if "p_ref" in gains else []),
                    "Recovery", *(f"E-SPL@{r}" for r in radii)],
                   [[r, *(_cell(iv["gain"][r][x], True) for x in gains),
                     *([_cell(iv["ogr"][r]), _cell(iv["beyond_ref"][r], True)] if "p_ref" in gains else []),
                     _cell(iv["recovery"][r]),
                     *(_cell(iv["e_spl"][k][r]) for k in radii)] for r in rows]), ""]
    if iv["family"]:
        lines += ["Group gains per family (resampled within the family; a family of few episodes decides little):", "",
                  table(["family", "episodes", *(GAINS[x] for x in gains)],
                        [[f, v["n"], *(_cell(v["gain"][x], True) for x in gains)] for f, v in iv["family"].items()]),
                  ""]
        claims = [(GAINS[x], iv["gain"][GROUP][x]) for x in gains]
        if "p_ref" in gains:
            claims.append((BEYOND_REF, iv["beyond_ref"][GROUP]))
        lines += ["How large a run each group claim needs (80 % power, 5 % two-sided; the standard error shrinks as "
                  "1/√episodes):", "",
                  table(["difference", "observed", "smallest detectable here", "episodes to detect the observed"],
                        [[name, _cell(d, True), _points(detectable(d)), _count(episodes_needed(d))]
                         for name, d in claims]), ""]
    return lines


def _points(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _count(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"
