"""Conformance of every entry of the metric and trainer registries, and the one-file additions they allow
(docs/extending.md): a metric registered here appears in the report, a trainer registered here is a
choice of ``affectsim train`` and writes a checkpoint, with no other file edited.

Metrics: a name from the registration only, needs that exist (metrics or record fields), a result on
the hand-made records of ``helpers.py``, and a report section of its own or a place in another's.
Trainers: each trains a registered recognizer and scores clips as that recognizer does.
Every kind (policies, backends, detectors and noise models too): an entry's ``name`` is its registration's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import evolving_records, hand_made_records, social_records, typed

import affectsim_nav  # noqa: F401  (registers the shipped policies)
from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.world.noise import NOISE_MODELS
from affectsim_core.errors import InvalidInput
from affectsim_core.person_tracking import DETECTORS
from affectsim_core.protocol import EMOTIONS
from affectsim_core.registry import Registry
from affectsim_eval.training import train as train_module
from affectsim_eval.scoring.markdown import table
from affectsim_eval.scoring.metrics import METRICS, Metric, compute_all, is_record_field, metric_needs, ordered
from affectsim_eval.run.report import render, summarize
from affectsim_eval.training.train import TRAINERS, Trainer
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import RECOGNIZERS, ClipInput, Prediction, Recognizer, load_checkpoint
from affectsim_perception.recognizers.base import CHECKPOINT_DIR

A, F, H, N, S = EMOTIONS


@pytest.fixture(scope="module")
def records():
    """Every kind of hand-made record: paired, evolving (window streams) and social (reactive people)."""
    return typed(hand_made_records() + evolving_records() + social_records())


@pytest.fixture(scope="module")
def summary(records):
    return summarize(records)


@pytest.fixture
def scratch_registries(monkeypatch):
    """Entries registered in a test are gone after it."""
    for reg in (METRICS, TRAINERS, RECOGNIZERS):
        monkeypatch.setattr(reg, "_entries", dict(reg._entries))


# ---------------------------------------------------------------------------------------------- the mechanism
def test_registration_sets_the_one_name_and_keeps_the_order():
    reg: Registry[object] = Registry("widget", name_attr="name")

    @reg.register("b")
    class B:
        pass

    @reg.register("a")
    def a():
        pass

    assert B.name == "b" and a.name == "a" and reg.registered() == ["b", "a"] and reg.names() == ["a", "b"]

    class Named:
        name = "other"

    with pytest.raises(ValueError, match="its name is the one it is registered under"):
        reg.register("c")(Named)
    assert "c" not in reg


@pytest.mark.parametrize("registry", [RECOGNIZERS, METRICS, TRAINERS, POLICIES, NOISE_MODELS, DETECTORS, BACKENDS],
                         ids=lambda r: r.kind)
def test_every_entry_carries_its_registered_name(registry):
    assert registry.name_attr == "name" and registry.names()
    for name in registry.names():
        assert registry.get(name).name == name


# ---------------------------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("name", METRICS.names())
def test_every_metric_conforms(name, records, summary):
    cls = METRICS.get(name)
    metric = METRICS.create(name)
    assert isinstance(metric, Metric) and metric.name == name
    assert metric.description and "\n" not in metric.description
    for need in cls.needs:  # a metric, or a field of the records, never both
        assert (need in METRICS) != is_record_field(need), need
    assert not is_record_field(name), f"{name!r} is also a record field: its needs would be ambiguous"
    for shown in cls.shows:
        assert shown in METRICS and shown != name
    order = ordered()
    assert all(order.index(d) < order.index(name) for d in metric_needs(cls))

    assert metric.applies(records)
    given = compute_all(records, metric_needs(cls))
    out = metric.compute(records, given)
    assert out == metric.compute(records) == compute_all(records, [name])[name]  # its inputs computed alike
    for v in _leaves(out):
        assert v is None or isinstance(v, (int, float))
        if isinstance(v, float) and name != "per_class_recall":  # recall is nan for classes without samples
            assert math.isfinite(v)

    section = metric.section(summary, {})
    owners = [m for m in METRICS.names() if name in METRICS.get(m).shows]
    if section:  # its own section: a heading, blocks each closed by an empty line, in the report
        assert section[0].startswith("## ") and section[-1] == "" and not owners
        assert "\n".join(section) in render(summary, {}, [], {})
    else:  # or columns of exactly one other metric's section
        assert len(owners) == 1 and METRICS.create(owners[0]).section(summary, {}), name


def _leaves(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    else:
        yield x


def test_the_report_renders_every_metric_section_in_dependency_order(summary):
    text = render(summary, {}, [], {})
    heads = [METRICS.create(n).section(summary, {})[:1] for n in ordered()]
    heads = [h[0] for h in heads if h]
    assert [line for line in text.splitlines() if line in heads] == heads
    assert heads[0] == "## Table 3: Macro-F1 per recognizer and setting" and "## Social measures (reactive people)" in heads


def test_ogr_is_computed_once_by_its_metric(records, summary):
    ogr = compute_all(records, ["ogr"])["ogr"]
    assert summary["ogr"] == {n: ogr[n] for n in summary["recognizers"]} and summary["group_ogr"] == ogr["group"]
    robot = typed([{**r, "predictions": {k: {s: v[s] for s in ("p_init", "a_obs")} for k, v in r["predictions"].items()}}
                   for r in hand_made_records()])
    assert not METRICS.create("ogr").applies(robot) and "ogr" not in compute_all(robot)
    s = summarize(robot)
    assert s["ogr"] == {"a": None, "b": None} and s["group_ogr"] is None
    with pytest.raises(InvalidInput, match="p_ref"):
        compute_all(robot, ["ogr"])  # asked for by name, it says what is missing


def test_a_need_cycle_is_refused(scratch_registries):
    class Chicken(Metric):
        needs = ("egg",)

    class Egg(Metric):
        needs = ("chicken",)

    METRICS.register("chicken")(Chicken)
    METRICS.register("egg")(Egg)
    with pytest.raises(InvalidInput, match="chicken -> egg -> chicken"):
        ordered(["chicken"])


def test_a_registered_metric_appears_in_the_report_without_editing_it(scratch_registries, records):
    """The example of docs/extending.md: one class, registered; the report shows it."""

    @METRICS.register("best_setting")
    class BestSetting(Metric):
        description = "The setting with the highest Macro-F1, per recognizer."
        needs = ("macro_f1",)

        def compute(self, records, inputs=None):
            f1 = self._inputs(records, inputs)["macro_f1"]
            return {rec: max(by, key=by.get) for rec, by in f1.items()}

        def section(self, s, figures):
            rows = list(s[self.name].items())
            return ["## Best setting per recognizer", "", table(["recognizer", "setting"], rows, left=2), ""]

    @METRICS.register("episodes_seen")
    class EpisodesSeen(Metric):  # no section of its own: the default table of its numbers
        description = "Episodes per family."
        needs = ("family",)

        def compute(self, records, inputs=None):
            return {f: sum(r.family == f for r in records) for f in sorted({r.family for r in records})}

    assert ordered()[-2:] == ["best_setting", "episodes_seen"]
    s = summarize(records)
    assert s["best_setting"] == {"a": "p_ref", "b": "p_init"}
    text = render(s, {}, [], {})
    assert "## Best setting per recognizer\n\n| recognizer | setting |\n|---|---|\n| a | p_ref |\n| b | p_init |\n" in text
    assert "## episodes_seen\n\nEpisodes per family.\n\n| entry | value |\n|---|---:|\n| action_grounded | 8 |" in text
    assert text.index("## Evolving affect") < text.index("## Best setting") < text.index("## episodes_seen")


# ---------------------------------------------------------------------------------------------- trainers
def _clips(n: int = 4, seed: int = 0) -> tuple:
    """Cached-clip inputs as a split holds them: poses (N, 8, 33, 6), 64x64 frames, metadata."""
    rng = np.random.default_rng(seed)
    poses = rng.uniform(0, 1, (n, 8, 33, 6))
    poses[..., 2] = 1.0  # visible keypoints
    return poses, rng.integers(0, 256, (n, 8, 64, 64, 3), dtype=np.uint8), [{"label": k % 5} for k in range(n)]


@pytest.mark.parametrize("name", TRAINERS.names())
def test_every_trainer_conforms(name):
    cls = TRAINERS.get(name)
    assert issubclass(cls, Trainer) and cls.name == name
    assert name in RECOGNIZERS, f"trainer {name!r} trains no registered recognizer"
    assert cls.fit is not Trainer.fit and cls.probs is not Trainer.probs
    if not (CHECKPOINT_DIR / name / "manifest.json").is_file():
        return  # a plugin's recognizer without a shipped checkpoint: nothing to score here
    trainer = TRAINERS.create(name)
    weights = load_checkpoint(name).arrays
    clips = _clips()
    p = trainer.probs(weights, clips)
    assert p.shape == (4, len(EMOTIONS)) and np.isfinite(p).all() and (p >= 0).all()
    assert np.allclose(p.sum(axis=1), 1.0)
    v = trainer.vad(weights, clips)
    assert v is None or (v.shape == (4, 3) and (np.abs(v) <= 1).all())


def test_trainers_score_clips_as_their_recognizers_answer():
    """The perception bench scores a recognizer by its trainer's ``probs`` on cached clips: the same answers."""
    from affectsim_perception.recognizers.committee import load_members

    poses, small, meta = clips = _clips(6, seed=1)
    pose, rgb = load_members()
    answers = {"pose-temporal": [pose.predict_pose(k).probs for k in poses],
               "rgb-clip": [rgb.predict_small(np.asarray(s)).probs for s in small],
               "majority": [RECOGNIZERS.create("majority").predict(ClipInput(np.zeros((8, 224, 224, 3), np.uint8))).probs] * 6}
    w = load_checkpoint("committee").arrays["weights"]
    answers["committee"] = [w[0] * a + w[1] * b for a, b in zip(answers["pose-temporal"], answers["rgb-clip"])]
    for name, want in answers.items():
        assert np.allclose(TRAINERS.create(name).probs(load_checkpoint(name).arrays, clips), np.stack(want), atol=1e-9), name


def test_a_registered_trainer_is_a_train_choice_and_writes_a_checkpoint(scratch_registries, small_data, tmp_path, monkeypatch):
    """The example of docs/extending.md: a recognizer and its trainer, registered in one file."""

    @RECOGNIZERS.register("class-prior")
    class ClassPrior(Recognizer):
        """The train clips' class frequencies, whatever the clip."""

        def __init__(self, checkpoint: str = "class-prior", root=CHECKPOINT_DIR) -> None:
            self.prior = load_checkpoint(checkpoint, root, required=("prior",)).arrays["prior"]

        def predict(self, clip: ClipInput) -> Prediction:
            return Prediction.from_probs(self.prior, "class prior")

    @TRAINERS.register("class-prior")
    class ClassPriorTrainer(Trainer):
        def fit(self, data):
            counts = np.bincount(data.labels["train"], minlength=len(EMOTIONS)) + 1.0
            return {"prior": counts / counts.sum()}, {"training": {"clips": int(len(data.labels["train"]))}}

        def probs(self, weights, clips):
            return np.tile(weights["prior"], (len(clips[2]), 1))

    from affectsim_ros.cli import build_parser

    assert build_parser().parse_args(["train", "class-prior"]).recognizer == "class-prior"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "uniform"])  # no trainer: not a choice

    # rendering stubbed: two views of real episodes of each split, labels from the episodes
    from affectsim_eval.dataset.episodes import load_split

    cached = {}
    for k, split in enumerate(("train", "val", "test")):
        eps = [e for e in load_split(split, small_data[0] / "episodes") if e.family != "evolving"][:10]
        poses, small, _ = _clips(len(eps), k)
        cached[split] = (poses, small, [{"episode_id": e.episode_id, "label": EMOTIONS.index(e.emotion),
                                         "view": ("reference", "random")[i % 2], "visible_fraction": 0.8}
                                        for i, e in enumerate(eps)])
    monkeypatch.setattr(train_module, "ensure_clips", lambda split, tiers, *a, **k: {"episodes": 10, "tiers": list(tiers)})
    monkeypatch.setattr(train_module, "load_clips", lambda split, data=None: cached[split])
    manifest = train_module.train("class-prior", out=tmp_path, root=small_data[0] / "episodes",
                                  motions=small_data[0] / "motions", log=lambda s: None)
    assert manifest["recognizer"] == "class-prior" and manifest["training"] == {"clips": 10}
    assert manifest["subsets"]["val"]["clips"] == 10 and set(manifest["metrics"]) == {"val", "test"}
    assert set(manifest["metrics"]["test"]) == {"all", "reference", "random", "good_view"}
    probs = RECOGNIZERS.create("class-prior", root=tmp_path).predict(ClipInput(np.zeros((8, 224, 224, 3), np.uint8))).probs
    assert probs.shape == (5,) and probs.sum() == pytest.approx(1.0)
