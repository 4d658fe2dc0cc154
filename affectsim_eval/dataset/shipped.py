"""The episode files the repository ships (``datasets/episodes/``), so that a fresh clone needs no build.

The dataset build is deterministic (``affectsim dataset build``, 25–50 min on two cores) and its
output, 3.8 MB of gzipped JSON, is the same on every machine; it is the dataset the shipped
checkpoints were trained on. ``datasets/episodes/`` holds that build's ``manifest.json`` and split
files, and ``provenance.json``: the dataset version and the SHA-256 of the motion library's and the
scene library's manifests it was composed from (episodes name clips and scenes; built with other
code, the same names could mean other motions and rooms).

- :func:`install` copies the shipped episodes into ``data/episodes`` (what ``make bench`` does when
  there is none) after checking every split's checksum and that the local motion and scene
  libraries are the ones the episodes were composed from; a mismatch names both hashes and the
  command to run.
- :func:`verify` composes a seeded, stratified sample of the build's jobs again with this code
  and compares each episode with the shipped one, field by field (a job's episode depends on the
  job alone, see :func:`~affectsim_eval.dataset.build.compose_jobs`); CI runs it inside
  ``affectsim dataset fingerprint``, so code that changes the dataset is noticed there.
- :func:`ship` (maintainers, after a full build) writes ``datasets/episodes/`` from ``data/episodes``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Callable

import numpy as np

from affectsim_bridge.content.library import DEFAULT_DIR as MOTIONS_DIR
from affectsim_bridge.content.library import Library
from affectsim_bridge.content.scene_generator import SCENES_DIR, read_scene_library
from affectsim_core.atomic import staged_dir
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import SPLITS
from affectsim_core.readers import read_bytes, read_json
from affectsim_eval.dataset.build import compose_jobs, episode_id, plan_jobs
from affectsim_eval.dataset.episodes import DATASET_DIR, load_split, read_manifest

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "datasets" / "episodes"
PROVENANCE = "provenance.json"
MAX_PROVENANCE_BYTES = 64 * 2 ** 10  # provenance.json (~0.3 KB)
MAX_LIBRARY_MANIFEST_BYTES = 64 * 2 ** 20  # a motion or scene library manifest (motions: ~1 MB)
VERIFY_SAMPLE = 120  # jobs composed again by `verify` (about 40 s on two cores)


def library_hashes(motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR) -> dict[str, str]:
    """SHA-256 of the motion library's and the scene library's manifest files (each lists its files' hashes)."""
    out = {}
    for key, root, build in (("motions_manifest_sha256", Path(motions), "affectsim motions build"),
                             ("scenes_manifest_sha256", Path(scenes_dir), "affectsim scenes build")):
        path = root / "manifest.json"
        if not path.is_file():
            raise InvalidInput(key.split("_")[0], str(root), f"a built library (run `{build}`)")
        out[key] = hashlib.sha256(read_bytes(path, MAX_LIBRARY_MANIFEST_BYTES, "library manifest")).hexdigest()
    return out


def read_provenance(src: Path = SHIPPED_DIR) -> dict:
    """``provenance.json`` of a shipped dataset, checked against its manifest's version."""
    path = Path(src) / PROVENANCE
    if not path.is_file():
        raise InvalidInput("shipped dataset", str(src), f"a directory with {PROVENANCE} (written by `affectsim dataset ship`)")
    prov = read_json(path, MAX_PROVENANCE_BYTES, PROVENANCE)
    keys = ("version", "motions_manifest_sha256", "scenes_manifest_sha256")
    if not isinstance(prov, dict) or not all(isinstance(prov.get(k), str) for k in keys):
        raise InvalidInput(PROVENANCE, prov if not isinstance(prov, dict) else sorted(prov), f"strings {keys}",
                           where=str(path))
    version = read_manifest(src)["version"]
    if prov["version"] != version:
        raise InvalidInput("provenance.version", prov["version"], f"{version!r}, the version of the manifest beside it",
                           where=str(path))
    return prov


def check_libraries(prov: dict, motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR) -> None:
    """Raise unless the local libraries are the ones the shipped episodes were composed from."""
    local = library_hashes(motions, scenes_dir)
    for key, what, build in (("motions_manifest_sha256", motions, "motions"), ("scenes_manifest_sha256", scenes_dir,
                                                                               "scenes")):
        if local[key] != prov[key]:
            raise InvalidInput(f"{build} library", f"{what} (manifest SHA-256 {local[key][:12]})",
                               f"the library the shipped episodes were composed from ({prov[key][:12]}): rebuild it "
                               f"with this code (`affectsim {build} build`) or build your own episodes "
                               "(`affectsim dataset build`)")


def _copy_dataset(src: Path, out: Path, extra: dict[str, str] | None = None) -> dict:
    """Copy a dataset's manifest and split files (each checksum verified on load) into ``out``, atomically."""
    manifest = read_manifest(src)
    for split in SPLITS:
        load_split(split, src)  # checksum, schema, unique ids
    with staged_dir(Path(out), ".episodes-") as tmp:
        for split in SPLITS:
            shutil.copyfile(Path(src) / manifest["splits"][split]["file"], tmp / manifest["splits"][split]["file"])
        shutil.copyfile(Path(src) / "manifest.json", tmp / "manifest.json")
        for name, text in (extra or {}).items():
            (tmp / name).write_text(text)
    return manifest


def install(src: Path = SHIPPED_DIR, out: Path = DATASET_DIR, motions: Path = MOTIONS_DIR,
            scenes_dir: Path = SCENES_DIR, log: Callable[[str], None] = print) -> dict:
    """Copy the shipped episodes into ``out`` (replaced atomically) once they check out; the manifest."""
    prov = read_provenance(src)
    check_libraries(prov, motions, scenes_dir)
    manifest = _copy_dataset(src, out)
    n = sum(manifest["splits"][s]["episodes"] for s in SPLITS)
    log(f"[dataset] installed the shipped dataset {manifest['version']} ({n} episodes) -> {out}")
    return manifest


def ship(src: Path = DATASET_DIR, dst: Path = SHIPPED_DIR, motions: Path = MOTIONS_DIR,
         scenes_dir: Path = SCENES_DIR, log: Callable[[str], None] = print) -> dict:
    """Write ``dst`` from the build in ``src`` (the repository ships the full one) with its provenance;
    the provenance."""
    manifest = read_manifest(src)
    prov = {"version": manifest["version"], **library_hashes(motions, scenes_dir)}
    _copy_dataset(src, dst, {PROVENANCE: json.dumps(prov, indent=1) + "\n"})
    log(f"[dataset] shipped {manifest['version']} -> {dst}")
    return prov


def sample_jobs(jobs: list[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` jobs (at most), stratified by split, family and challenge, seeded: every stratum gets
    its share and at least one."""
    strata: dict[tuple, list[dict]] = defaultdict(list)
    for job in jobs:
        strata[(job["split"], job["family"], job["challenge"] or "")].append(job)
    rng = np.random.default_rng([seed, 28])
    out = []
    for key in sorted(strata):
        group = strata[key]
        k = min(len(group), max(1, round(n * len(group) / len(jobs))))
        out += [group[i] for i in sorted(rng.choice(len(group), size=k, replace=False))]
    return out


def verify(src: Path = SHIPPED_DIR, motions: Path = MOTIONS_DIR, scenes_dir: Path = SCENES_DIR,
           sample: int = VERIFY_SAMPLE, seed: int = 0, workers: int | None = None,
           log: Callable[[str], None] = print) -> list[str]:
    """Differences between the shipped episodes and ``sample`` jobs composed again with this code
    (empty: they agree); the local libraries must be the shipped episodes' own."""
    prov = read_provenance(src)
    check_libraries(prov, motions, scenes_dir)
    manifest = read_manifest(src)
    lib = Library(Path(motions))
    jobs = plan_jobs(lib, read_scene_library(scenes_dir)["scenes"], manifest.get("seed", 0), manifest.get("scale", 1.0))
    shipped = {e.episode_id: e for s in SPLITS for e in load_split(s, src)}
    out = []
    if len(shipped) != manifest["report"]["built"] or len(jobs) != manifest["report"]["requested"]:
        out.append(f"episodes: planned {len(jobs)}, shipped {len(shipped)}; the manifest says "
                   f"{manifest['report']['requested']} planned, {manifest['report']['built']} built")
    picked = sample_jobs(jobs, sample, seed)
    built, _, _ = compose_jobs(picked, Path(motions), Path(scenes_dir), workers, log=lambda m: None)
    again = {e.episode_id: e for e in built}
    for job in picked:
        eid = episode_id(job)
        mine, theirs = again.get(eid), shipped.get(eid)
        if (mine is None) != (theirs is None):
            out.append(f"{eid}: {'composed' if mine else 'not composed'} by this code, "
                       f"{'shipped' if theirs else 'not shipped'}")
        elif mine is not None and mine.to_dict() != theirs.to_dict():
            a, b = mine.to_dict(), theirs.to_dict()
            fields = sorted(k for k in a if a[k] != b.get(k))
            out.append(f"{eid}: {', '.join(fields)} differ")
    log(f"[dataset] composed {len(picked)} of {len(jobs)} jobs again: {len(out)} difference(s) from the shipped "
        f"dataset {manifest['version']}")
    return out
