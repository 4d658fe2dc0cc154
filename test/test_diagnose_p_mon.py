"""tools/diagnose_p_mon.py --rerender: the as-is re-render is the evaluator's P-Mon, the variants change what they say."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from affectsim_core.camera import FETCH_HEAD_VFOV_DEG
from affectsim_eval.dataset.episodes import load_split
from affectsim_core.clips import clip_times, sample_indices
from affectsim_eval.episode.orchestrator import _render_passive
from affectsim_eval.episode.passive import monitor_room, passive_views, placements
from affectsim_eval.run.config import EvalConfig
from affectsim_eval.run.runner import EpisodeWorker, run_eval

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("diagnose_p_mon", ROOT / "tools" / "diagnose_p_mon.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _evaluators_p_mon_clip(ep, w: EpisodeWorker) -> np.ndarray:
    """The P-Mon clip as the orchestrator renders it (the record keeps only P-Init's and A-Obs' frames)."""
    people = placements(ep, w.data.load_motion)
    full = clip_times(next(p for p in people if p.is_target).motion.duration)
    scene = w.data.scene(ep.scene_id)
    w.world.geometry.load(scene, ep.start, tuple(people), humans_mode="scripted", reaction_seed=ep.seed)
    idx = sample_indices(len(full))
    planned = passive_views(ep, w.world.geometry, scene, full, idx)
    _, _, clips, _ = _render_passive(ep, w.world, scene, people, "scripted", full, idx, None, planned)
    return clips["p_mon"]


def test_as_is_rerender_is_the_evaluators_p_mon_clip(small_data, tool):
    """Same bytes as the orchestrator's P-Mon clip; the head lens narrows only the field of view, the
    head-height variant moves only the camera's height."""
    data, _ = small_data
    w = EpisodeWorker(EvalConfig(recognizers=("rgb-clip",), policy="stay").as_dict(), str(data))
    try:
        ep = load_split("test", data / "episodes")[0]
        evaluated = w.evaluate(ep)
        p_mon = _evaluators_p_mon_clip(ep, w)
        got = tool.rerender_episode(ep, w.world, w.data, keep_frames=True)
    finally:
        w.close()
    assert np.array_equal(got.frames["as_is"], p_mon)
    assert got.predictions["as_is"]["rgb-clip"].label == evaluated.record.predictions["rgb-clip"]["p_mon"]
    assert got.visible["as_is"] == pytest.approx(evaluated.record.visible["p_mon"], abs=1e-4)
    assert not np.array_equal(got.frames["head_lens"], got.frames["as_is"])
    np.testing.assert_allclose(got.poses["head_lens"], got.poses["as_is"])
    scene = w.data.scene(ep.scene_id)
    vfov = next(r for r in scene.rooms if r.id == monitor_room(ep, scene)).monitor.vfov
    zoom = math.tan(vfov / 2) / math.tan(math.radians(FETCH_HEAD_VFOV_DEG) / 2)
    assert got.person_px["head_lens"] == pytest.approx(zoom * got.person_px["as_is"], rel=1e-6)
    assert got.visible["head_lens"] <= got.visible["as_is"] + 1e-9  # a narrower lens from the same pose sees no more
    low, mon = got.poses["head_height"][0], got.poses["as_is"][0]
    assert low[2, 3] == pytest.approx(got.head_z) and 0.9 < got.head_z < 1.3 < mon[2, 3]
    np.testing.assert_allclose(low[:2, 3], mon[:2, 3])


def test_rerender_of_a_run_reproduces_its_p_mon_and_reports_intervals(small_data, tool, tmp_path):
    data, _ = small_data
    ids = tuple(e.episode_id for e in load_split("test", data / "episodes")[:2])
    run_eval(tmp_path, EvalConfig(ids=ids, recognizers=("rgb-clip", "uniform"), policy="stay"), workers=1, data=data,
             log=lambda m: None, allow_dataset_mismatch=True)
    records, got, names, _ = tool.rerender(tmp_path, log=lambda m: None)
    assert names == ["rgb-clip"] and sorted(got) == sorted(ids)  # the references are not re-run
    for r in records:
        p = got[r.episode_id].predictions["as_is"]["rgb-clip"]
        assert p.label == r.predictions["rgb-clip"]["p_mon"]
        np.testing.assert_allclose(p.probs, r.probs["rgb-clip"]["p_mon"], atol=1e-6)
    lines = tool.rerender_report(records, got, names)
    assert lines[0].startswith("re-rendered P-Mon as-is vs the run's P-Mon: 100.0 % of 2")
    assert any(line.startswith("| group (trained) |") for line in lines)
    assert tool.rerender_report(records, got, names) == lines  # seeded intervals: the same report twice
