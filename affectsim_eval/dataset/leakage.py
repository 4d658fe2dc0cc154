"""Does anything besides the sensors give a label away?

Two checks of ``affectsim dataset validate``, both scored the same way: a metadata-only classifier
(:class:`TokenBayes`) is fit on the train split and scored by Macro-F1 on val and test together;
its chance level is the same score with the train labels permuted (seeded, mean of
:data:`PERMUTATIONS`); the check fails above chance + :data:`MARGIN`.

- :func:`policy_fields_leak`: the fields of an episode that reach a policy or a recognizer besides
  the sensors (:func:`visible_fields`: the episode id, which travels in the ``AcquireObservation``
  goal and names recorded files; the scene, whose map the policy gets; the robot's start pose; the
  dyadic target description), each alone and all together, per family. An id such as
  ``test_ag_000042`` fails it (its index modulo 10 gave the emotion of every action-grounded
  episode away); the build's ids (a hash of the job) pass.
- :func:`scenario_leak`: evolving clips, whose in-place scenario (gestures, arms crossed, ...) is
  plainly visible: scenario -> the first emotion, and scenario -> the final one.

Tokens (:func:`tokens`): a string gives itself, each of its alphanumeric parts, each character at
its position, its length, and for each number in it the number and its remainders modulo 2-12 (an
index pattern); a pose gives its cell on a 1 m grid and its heading in 45-degree sectors.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Hashable, Iterable, Sequence

import numpy as np

from affectsim_bridge.content.library import Library
from affectsim_core.classification import macro_f1
from affectsim_core.episode import Episode
from affectsim_core.protocol import EMOTIONS

MARGIN = 0.05  # a check fails above chance + MARGIN (Macro-F1)
PERMUTATIONS = 5  # label permutations of the chance level
MODULI = range(2, 13)  # remainders of numbers in a string (index patterns)
GRID_M = 1.0  # m, cell of a start position
SECTOR_RAD = math.pi / 4  # sector of a start heading

Token = Hashable
VISIBLE = ("episode_id", "scene", "start_pose", "target_description")  # the fields of :func:`visible_fields`


def string_tokens(value: str) -> list[Token]:
    """Tokens of a string (module docstring)."""
    out: list[Token] = [("str", value), ("len", len(value))]
    out += [("char", i, c) for i, c in enumerate(value)]
    for part in re.findall(r"[A-Za-z0-9]+", value):
        out.append(("part", part))
        if part.isdigit():
            n = int(part)
            out += [("num", n)] + [("mod", m, n % m) for m in MODULI]
    return out


def pose_tokens(x: float, y: float, yaw: float) -> list[Token]:
    """Tokens of a start pose (m, rad, map): its grid cell and heading sector."""
    return [("cell", math.floor(x / GRID_M), math.floor(y / GRID_M)),
            ("sector", math.floor((yaw % (2 * math.pi)) / SECTOR_RAD))]


def visible_fields(ep: Episode) -> dict[str, list[Token]]:
    """Field -> tokens of everything of ``ep`` that reaches a policy or a recognizer besides the sensors."""
    s = ep.start
    target = next((h for h in ep.humans if h.role == "target"), None)
    description = target.description if ep.family == "dyadic" and target is not None else ""
    return {"episode_id": string_tokens(ep.episode_id), "scene": [("scene", ep.scene_id)],
            "start_pose": pose_tokens(s.x, s.y, s.yaw), "target_description": string_tokens(description)}


class TokenBayes:
    """Multinomial naive Bayes over sets of tokens, Laplace-smoothed; tokens never seen in training
    are ignored. Ties go to the first class of :data:`EMOTIONS`."""

    def __init__(self, rows: Sequence[Iterable[Token]], labels: Sequence[int], classes: int = len(EMOTIONS)) -> None:
        self.classes = classes
        self.prior = np.log(np.bincount(labels, minlength=classes) + 1.0)
        self.counts: dict[Token, np.ndarray] = {}
        totals = np.zeros(classes)
        for row, y in zip(rows, labels):
            for tok in set(row):
                self.counts.setdefault(tok, np.zeros(classes))[y] += 1
                totals[y] += 1
        log_total = np.log(totals + len(self.counts) + 1.0)
        self.loglik = {tok: np.log(c + 1.0) - log_total for tok, c in self.counts.items()}

    def predict(self, row: Iterable[Token]) -> int:
        score = self.prior.copy()
        for tok in set(row):
            ll = self.loglik.get(tok)
            if ll is not None:
                score += ll
        return int(np.argmax(score))


def shortcut_score(train: Sequence[Iterable[Token]], y_train: Sequence[int], held: Sequence[Iterable[Token]],
                   y_held: Sequence[int], permutations: int = PERMUTATIONS, seed: int = 0) -> dict:
    """``macro_f1`` of :class:`TokenBayes` fit on ``train`` and scored on ``held``; ``chance``: the mean
    of the same score with the train labels permuted; ``fails``: above chance + :data:`MARGIN`. None
    scores (and no failure) without both sets."""
    if not len(train) or not len(held):
        return {"macro_f1": None, "chance": None, "fails": False, "n": len(held)}
    y_train, y_held = np.asarray(y_train), np.asarray(y_held)

    def score(labels: np.ndarray) -> float:
        clf = TokenBayes(train, labels)
        return macro_f1(y_held, [clf.predict(r) for r in held])

    rng = np.random.default_rng([seed, 2027])
    f1 = score(y_train)
    chance = float(np.mean([score(rng.permutation(y_train)) for _ in range(permutations)]))
    return {"macro_f1": round(f1, 4), "chance": round(chance, 4), "fails": f1 > chance + MARGIN, "n": len(held)}


def _by_family(splits: dict[str, list[Episode]], tokens: Callable[[Episode], list[Token]],
               label: Callable[[Episode], str], keep: Callable[[Episode], bool] = lambda e: True) -> dict:
    """Per family: :func:`shortcut_score` of ``tokens`` -> ``label``, fit on train, scored on val + test."""
    out = {}
    held = splits.get("val", []) + splits.get("test", [])
    for fam in sorted({e.family for eps in splits.values() for e in eps}):
        tr = [e for e in splits.get("train", []) if e.family == fam and keep(e)]
        he = [e for e in held if e.family == fam and keep(e)]
        out[fam] = shortcut_score([tokens(e) for e in tr], [EMOTIONS.index(label(e)) for e in tr],
                                  [tokens(e) for e in he], [EMOTIONS.index(label(e)) for e in he])
    return out


def policy_fields_leak(splits: dict[str, list[Episode]]) -> dict[str, dict]:
    """Field (and ``all``) -> family -> :func:`shortcut_score` of that field -> the episode's label."""
    tokens = {e.episode_id: visible_fields(e) for eps in splits.values() for e in eps}  # tokenised once
    out = {f: _by_family(splits, lambda e, f=f: tokens[e.episode_id][f], lambda e: e.emotion) for f in VISIBLE}
    out["all"] = _by_family(splits, lambda e: [t for f in VISIBLE for t in tokens[e.episode_id][f]], lambda e: e.emotion)
    return out


def scenario_leak(splits: dict[str, list[Episode]], lib: Library) -> dict[str, dict]:
    """``first`` / ``final`` -> :func:`shortcut_score` of an evolving clip's scenario -> its first or
    final emotion (from the clip's segments)."""
    def segments(e: Episode) -> list:
        target = next(h for h in e.humans if h.role == "target")
        return lib.entries[target.motion_id]["segments"]

    def scenario(e: Episode) -> list[Token]:
        target = next(h for h in e.humans if h.role == "target")
        return [("scenario", lib.entries[target.motion_id].get("scenario"))]

    keep = lambda e: e.family == "evolving"  # noqa: E731
    return {"first": _by_family(splits, scenario, lambda e: segments(e)[0][2], keep).get("evolving"),
            "final": _by_family(splits, scenario, lambda e: segments(e)[-1][2], keep).get("evolving")}


def leak_problems(fields: dict[str, dict], scenario: dict[str, dict]) -> dict[str, str]:
    """Problem -> example for ``affectsim dataset validate``: every failing check."""
    out = {}
    for field, fams in fields.items():
        for fam, r in fams.items():
            if r["fails"]:
                out[f"metadata_predicts_label:{field}:{fam}"] = (f"Macro-F1 {r['macro_f1']:.3f} > chance "
                                                                  f"{r['chance']:.3f} + {MARGIN}")
    for which, r in scenario.items():
        if r is not None and r["fails"]:
            out[f"scenario_predicts_{which}_emotion"] = f"Macro-F1 {r['macro_f1']:.3f} > chance {r['chance']:.3f} + {MARGIN}"
    return out

