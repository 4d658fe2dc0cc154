"""Hostile files: every loaded quantity has a limit checked before work, every failure names the file,
the field, the value and the expectation, and no name from a file becomes a path outside its directory."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import box_room

from affectsim_bridge.humans.library import Library
from affectsim_bridge.humans.motion import MAX_CLIP_FILE_BYTES, load_motion
from affectsim_core.errors import InvalidInput
from affectsim_core.names import inside
from affectsim_eval.config import DATASET_KEY
from affectsim_eval.dataset.episodes import dataset_version, load_split
from affectsim_eval.loop import run_episodes
from affectsim_perception.recognizers.base import CHECKPOINT_DIR, load_checkpoint


def _rewrite_split(root: Path, split: str, edit) -> None:
    """Apply ``edit`` to the split's JSON document and write it back with an updated checksum."""
    path = root / f"{split}.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    edit(doc)
    raw = gzip.compress(json.dumps(doc).encode(), mtime=0)
    path.write_bytes(raw)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["splits"][split]["sha256"] = hashlib.sha256(raw).hexdigest()
    manifest["version"] = dataset_version({s: v["sha256"] for s, v in manifest["splits"].items()})
    (root / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def episodes(small_data, tmp_path):
    data, _ = small_data
    copy = tmp_path / "episodes"
    shutil.copytree(data / "episodes", copy)
    return copy


def test_an_episode_id_cannot_name_a_path_outside_the_run(episodes, tmp_path):
    _rewrite_split(episodes, "test", lambda d: d["episodes"][0].update(episode_id="../../../../escape"))
    with pytest.raises(InvalidInput, match=r"episode_id='\.\./\.\./\.\./\.\./escape' is invalid; expected a name"):
        load_split("test", episodes)
    with pytest.raises(InvalidInput, match="episode_id"):
        inside(tmp_path / "frames", "../../x", ".jpg", "episode_id")
    assert inside(tmp_path / "frames", "test_ag_000001", ".jpg") == tmp_path / "frames" / "test_ag_000001.jpg"
    _rewrite_split(episodes, "val", lambda d: d["episodes"][0]["humans"][0].update(motion_id="../clips/x"))
    with pytest.raises(InvalidInput, match=r"humans\[0\]\.motion_id"):
        load_split("val", episodes)


def test_garbled_and_misshapen_dataset_files_are_named(episodes):
    raw = gzip.compress(b'{"format": "affectsim-episodes/1", "episodes": []}', mtime=0)
    garbled = raw[:10] + bytes(b ^ 0x5A for b in raw[10:-8]) + raw[-8:]
    with pytest.raises(zlib.error):
        gzip.decompress(garbled)  # what a garbled file does without the loader's care
    (episodes / "test.json.gz").write_bytes(garbled)
    manifest = json.loads((episodes / "manifest.json").read_text())
    manifest["splits"]["test"]["sha256"] = hashlib.sha256(garbled).hexdigest()
    manifest.pop("version")  # as written before versions were recorded: computed from the split hashes
    (episodes / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InvalidInput, match=r"test\.json\.gz.*gzipped JSON"):
        load_split("test", episodes)
    for wrong in ([], {"splits": []}, {"splits": {"test": "test.json.gz"}}, {"splits": {"test": {"file": 3}}}):
        (episodes / "manifest.json").write_text(json.dumps(wrong))
        with pytest.raises(InvalidInput, match="manifest"):
            load_split("test", episodes)


def test_a_tampered_motion_clip_is_refused_by_its_checksum(small_data, tmp_path):
    data, _ = small_data
    lib_dir = tmp_path / "motions"
    shutil.copytree(data / "motions", lib_dir)
    lib = Library(lib_dir)
    mid = next(iter(lib.entries))
    path = lib_dir / lib.entries[mid]["file"]
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["dofs"] = np.full_like(arrays["dofs"], 1e6)  # finite, so only the checksum can tell
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    path.write_bytes(buf.getvalue())
    with pytest.raises(InvalidInput, match=r"sha256.*changed or corrupt"):
        Library(lib_dir).load(mid)
    # a 1.5 GB clip cost 1.75 GB RSS: its whole file was hashed before the header limits applied
    with open(path, "r+b") as f:
        f.truncate(MAX_CLIP_FILE_BYTES + 1)  # sparse: no disk space, no read
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(InvalidInput, match=rf"file size='{MAX_CLIP_FILE_BYTES + 1} bytes' is invalid"):
        Library(lib_dir).load(mid)
    assert tracemalloc.get_traced_memory()[1] < 16 * 2 ** 20  # nothing of the file was read into memory
    tracemalloc.stop()
    path.unlink()
    os.mkfifo(path)  # only regular files are opened (a FIFO would block the reader for ever)
    with pytest.raises(InvalidInput, match="expected a regular motion file"):
        Library(lib_dir).load(mid)


def test_oversized_clips_and_scenes_are_refused_before_they_are_loaded(tmp_path):
    n = 3_000_000
    np.savez_compressed(tmp_path / "long.npz", root_pos=np.zeros((n, 3)), root_rot=np.zeros((2, 3)),
                        dofs=np.zeros((2, 3)), meta=np.array("{}"))
    assert (tmp_path / "long.npz").stat().st_size < 1_000_000
    with pytest.raises(InvalidInput, match=r"frames=3000000 is invalid; expected at most 60000 frames"):
        load_motion(tmp_path / "long.npz")
    np.savez_compressed(tmp_path / "wide.npz", root_pos=np.zeros((10, 3)), root_rot=np.zeros((10, 3)),
                        dofs=np.zeros((10, 2_000_000), np.float32), meta=np.array("{}"))  # 80 MB in 80 KB...
    np.savez_compressed(tmp_path / "meta.npz", root_pos=np.zeros((10, 3)), root_rot=np.zeros((10, 3)),
                        dofs=np.zeros((10, 3)), meta=np.zeros(10_000_000))  # ...or 80 MB of "metadata"
    for name in ("wide", "meta"):
        with pytest.raises(InvalidInput, match=r"arrays='\d+ bytes' is invalid; expected at most 67108864 bytes"):
            load_motion(tmp_path / f"{name}.npz")
    with pytest.raises(InvalidInput, match=r"'300\.0 m x 4\.0 m' is invalid; expected a scene within 50 m"):
        box_room(w=300.0, h=4.0)


def test_resuming_a_run_on_another_dataset_is_refused(tmp_path):
    meta = {"config": {"split": "test"}, DATASET_KEY: "a" * 64}
    run_episodes(tmp_path, meta, [], lambda todo: [], "nowhere", log=lambda m: None)
    with pytest.raises(InvalidInput, match=f"{DATASET_KEY}='{'b' * 64}' is invalid; expected {'a' * 64}"):
        run_episodes(tmp_path, {**meta, DATASET_KEY: "b" * 64}, [], lambda todo: [], "nowhere", log=lambda m: None)


def _checkpoint(root: Path, name: str, arrays: dict[str, np.ndarray] | None, manifest: object = None) -> None:
    d = root / name
    d.mkdir(parents=True)
    if arrays is not None:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        (d / "weights.npz").write_bytes(buf.getvalue())
        manifest = {"weights_sha256": hashlib.sha256(buf.getvalue()).hexdigest()} if manifest is None else manifest
    (d / "manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))


def test_bad_checkpoints_are_named_and_refused(tmp_path):
    _checkpoint(tmp_path, "garbled", {"w": np.ones(3)}, manifest="{not json")
    with pytest.raises(InvalidInput, match=r"garbled/manifest\.json.*valid JSON"):
        load_checkpoint("garbled", tmp_path)
    _checkpoint(tmp_path, "listy", {"w": np.ones(3)}, manifest=[1, 2])
    with pytest.raises(InvalidInput, match=r"listy/manifest\.json.*weights_sha256"):
        load_checkpoint("listy", tmp_path)
    _checkpoint(tmp_path, "partial", {"w": np.ones(3)})
    with pytest.raises(InvalidInput, match=r"partial/weights\.npz.*the arrays \['fc\.bias'\].*it has \['w'\]"):
        load_checkpoint("partial", tmp_path, required=("w", "fc.bias"))
    _checkpoint(tmp_path, "nan", {"w": np.array([1.0, np.nan])})
    with pytest.raises(InvalidInput, match=r"weights\['w'\].*finite numbers"):
        load_checkpoint("nan", tmp_path)
    with pytest.raises(InvalidInput, match="checkpoint"):
        load_checkpoint("../pose-temporal", CHECKPOINT_DIR / "majority")
