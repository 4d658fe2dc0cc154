"""The shipped episodes (datasets/episodes): installed only onto the libraries they were composed
from, verified by composing a sample of the build's jobs again, and the dataset of the shipped checkpoints."""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from affectsim_bridge.content.library import Library
from affectsim_bridge.content.scene_generator import read_scene_library
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import SPLITS
from affectsim_eval.dataset.build import episode_id, plan_jobs
from affectsim_eval.dataset.episodes import load_split, read_manifest, write_split
from affectsim_eval.dataset.shipped import PROVENANCE, SHIPPED_DIR, install, read_provenance, sample_jobs, ship, verify

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "affectsim_perception" / "checkpoints"


@pytest.fixture(scope="module")
def shipped(small_data, tmp_path_factory):
    data, _ = small_data
    dst = tmp_path_factory.mktemp("shipped") / "episodes"
    ship(data / "episodes", dst, data / "motions", data / "scenes", log=lambda m: None)
    return data, dst


def test_install_copies_what_was_shipped_and_only_onto_its_own_libraries(shipped, tmp_path):
    data, src = shipped
    out = tmp_path / "episodes"
    m = install(src, out, data / "motions", data / "scenes", log=lambda m: None)
    assert m["version"] == read_manifest(data / "episodes")["version"] == read_provenance(src)["version"]
    for s in SPLITS:
        assert [e.to_dict() for e in load_split(s, out)] == [e.to_dict() for e in load_split(s, data / "episodes")]
    other = tmp_path / "motions"
    shutil.copytree(data / "motions", other)
    (other / "manifest.json").write_text((other / "manifest.json").read_text() + " ")
    with pytest.raises(InvalidInput, match=r"motions library.*affectsim motions build"):
        install(src, tmp_path / "again", other, data / "scenes", log=lambda m: None)
    assert not (tmp_path / "again").exists()  # nothing written before the checks
    bare = tmp_path / "bare"
    shutil.copytree(src, bare)
    (bare / PROVENANCE).unlink()
    with pytest.raises(InvalidInput, match="provenance.json"):
        install(bare, tmp_path / "again", data / "motions", data / "scenes", log=lambda m: None)


def test_verify_composes_a_sample_again_and_names_an_episode_that_differs(shipped, tmp_path):
    data, src = shipped
    assert verify(src, data / "motions", data / "scenes", sample=12, log=lambda m: None) == []
    lib = Library(data / "motions")
    jobs = plan_jobs(lib, read_scene_library(data / "scenes")["scenes"], 0, read_manifest(src)["scale"])
    picked = {episode_id(j) for j in sample_jobs(jobs, 12)}
    assert len(sample_jobs(jobs, 12)) >= len({(j["split"], j["family"], j["challenge"]) for j in jobs})  # every stratum
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    eps = load_split("test", bad)
    victim = next(e for e in eps if e.episode_id in picked)
    eps = [replace(e, start_position=(e.start_position[0] + 0.01, *e.start_position[1:])) if e is victim else e
           for e in eps]
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["splits"]["test"]["sha256"] = write_split(bad / "test.json.gz", "test", eps)
    manifest.pop("version")
    (bad / "manifest.json").write_text(json.dumps(manifest))
    prov = json.loads((bad / PROVENANCE).read_text())
    (bad / PROVENANCE).write_text(json.dumps({**prov, "version": read_manifest(bad)["version"]}))
    assert verify(bad, data / "motions", data / "scenes", sample=12, log=lambda m: None) == [
        f"{victim.episode_id}: start_position differ"]


def test_the_shipped_dataset_is_the_one_the_shipped_checkpoints_were_trained_on():
    prov = read_provenance(SHIPPED_DIR)
    manifest = read_manifest(SHIPPED_DIR)
    for s in SPLITS:
        assert len(load_split(s, SHIPPED_DIR)) == manifest["splits"][s]["episodes"]  # checksums hold
    for ckpt in sorted(CHECKPOINTS.glob("*/manifest.json")):
        trained = json.loads(ckpt.read_text())
        assert trained["dataset_version"] == prov["version"], ckpt.parent.name
        assert trained["dataset_splits_sha256"] == {s: manifest["splits"][s]["sha256"] for s in SPLITS}, ckpt.parent.name
    assert manifest["scale"] == 1.0 and sum(f.stat().st_size for f in SHIPPED_DIR.iterdir()) < 8 * 2 ** 20
