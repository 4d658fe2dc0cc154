"""Hostile files: every loaded quantity has a limit checked before work, every failure names the file,
the field, the value and the expectation, and no name from a file becomes a path outside its directory."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import zlib
from contextlib import closing, contextmanager
from pathlib import Path

import numpy as np
import pytest
from helpers import box_room

from affectsim_bridge.content.library import Library
from affectsim_bridge.humans.motion import MAX_CLIP_FILE_BYTES, MAX_JOINT_RAD, load_motion
from affectsim_core.errors import InvalidInput
from affectsim_core.names import inside
from affectsim_core.readers import MAX_DEPTH
from affectsim_eval.run.config import DATASET_KEY
from affectsim_eval.dataset import inspect
from affectsim_eval.dataset.episodes import dataset_version, load_split
from affectsim_eval.run.loop import run_episodes
from affectsim_eval.run.store import ResultsStore
from affectsim_perception.recognizers.base import CHECKPOINT_DIR, load_checkpoint

AFFECTSIM = str(Path(sys.executable).parent / "affectsim")
COMPARE_RUNS = str(Path(__file__).resolve().parents[1] / "tools" / "compare_runs.py")
DEEP = "[" * 100_000 + "]" * 100_000  # a RecursionError for json.loads and yaml.safe_load
HUGE_INT = "9" * 100_000  # beyond Python's int-string conversion limit (4,300 digits)


def _rewrite_split(root: Path, split: str, edit) -> None:
    """Apply ``edit`` to the split's JSON document and write it back with an updated checksum."""
    path = root / f"{split}.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    edit(doc)
    _write_split(root, split, json.dumps(doc).encode())


def _write_split(root: Path, split: str, text: bytes) -> None:
    """Write ``text`` gzipped as the split's file, with an updated checksum in the manifest."""
    path = root / f"{split}.json.gz"
    raw = gzip.compress(text, mtime=0)
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


# ------------------------------------------------------------------ issue 31 (5, 6): one line, never a traceback
def _one_line(rc: int, err: str, names: tuple) -> str:
    """``err`` is one line naming each of ``names``, ``rc`` non-zero, no traceback; returns the line."""
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and "Traceback" not in err, (rc, err[-3000:])
    for name in names:
        assert str(name) in lines[0], lines[0]
    return lines[0]


def _refused(capsys, *argv: object) -> str:
    """Run ``affectsim ARGV`` in this process: it fails with one line on stderr; returns the line."""
    from affectsim_ros import cli  # imported here: the command line loads every node's modules

    rc = cli.main([str(a) for a in argv])
    return _one_line(rc, capsys.readouterr().err, ())


def _command_refused(*cmd: object, names: tuple = (), timeout: float = 120) -> str:
    """Run a command line: it fails with one line on stderr naming each of ``names``; returns the line."""
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    return _one_line(out.returncode, out.stderr, names)


class _Blocked(BaseException):
    """Raised by :func:`_deadline` (a BaseException: no handler of the code under test swallows it)."""


@contextmanager
def _deadline(seconds: int):
    """Fail the body, rather than hang the suite, when it blocks (opening a FIFO no one writes to)."""
    def expire(signum, frame):
        raise _Blocked(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def validate(small_data, monkeypatch, capsys):
    """``affectsim dataset validate --out EPISODES`` (in this process, against the small data's motions and
    scenes): it must fail with one line, which is returned."""
    data, _ = small_data
    monkeypatch.setattr(inspect, "validate_dataset", functools.partial(
        inspect.validate_dataset, motions=data / "motions", scenes_dir=data / "scenes"))

    def run(episodes: Path) -> str:
        with _deadline(20):
            return _refused(capsys, "dataset", "validate", "--out", episodes)
    return run


@pytest.fixture
def motions(small_data, tmp_path) -> Path:
    """A copy of the small motion library."""
    data, _ = small_data
    shutil.copytree(data / "motions", tmp_path / "motions")
    return tmp_path / "motions"


def test_deeply_nested_documents_are_refused_naming_the_file(episodes, motions, validate, capsys, tmp_path):
    nested = f"nested at most {MAX_DEPTH} levels deep"
    manifest = (episodes / "manifest.json").read_text()
    _write_split(episodes, "test", DEEP.encode())
    line = validate(episodes)
    assert "test.json.gz" in line and nested in line
    _write_split(episodes, "test", ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode())  # parses; still refused
    assert nested in validate(episodes)
    (episodes / "manifest.json").write_text(DEEP)
    assert str(episodes / "manifest.json") in validate(episodes)
    (episodes / "manifest.json").write_text(manifest)
    (motions / "manifest.json").write_text(DEEP)
    line = _refused(capsys, "motions", "validate", "--library", motions)
    assert str(motions / "manifest.json") in line and nested in line
    for name in ("deep.yaml", "deep.json"):
        (tmp_path / name).write_text(DEEP)
        line = _refused(capsys, "scenes", "check", tmp_path / name)
        assert str(tmp_path / name) in line and nested in line
    (tmp_path / "alias.yaml").write_text("a: &x [1, 2]\nb: [*x, *x]\n")  # aliases: a small file, a huge document
    assert "aliases (*name) are not allowed" in _refused(capsys, "scenes", "check", tmp_path / "alias.yaml")


def test_only_regular_files_are_opened(episodes, motions, validate, capsys, tmp_path):
    split = episodes / "test.json.gz"
    split.unlink()
    split.mkdir()  # was an IsADirectoryError traceback
    line = validate(episodes)
    assert str(split) in line and "a regular file" in line
    split.rmdir()
    os.mkfifo(split)  # hung `dataset validate` for ever
    line = validate(episodes)
    assert str(split) in line and "a regular file" in line
    for target in ("/proc/self/pagemap", "/dev/zero"):  # reading pagemap was an OSError (EINVAL) traceback
        (tmp_path / "scene.yaml").unlink(missing_ok=True)
        (tmp_path / "scene.yaml").symlink_to(target)
        assert str(tmp_path / "scene.yaml") in _refused(capsys, "scenes", "check", tmp_path / "scene.yaml")
    (episodes / "manifest.json").unlink()
    (episodes / "manifest.json").symlink_to("/proc/self/pagemap")
    assert str(episodes / "manifest.json") in validate(episodes)
    (motions / "manifest.json").unlink()
    (motions / "manifest.json").symlink_to("/proc/self/pagemap")
    assert str(motions / "manifest.json") in _refused(capsys, "motions", "validate", "--library", motions)


def test_huge_integers_and_undecodable_bytes_name_the_file(episodes, validate, capsys, tmp_path):
    manifest = episodes / "manifest.json"
    manifest.write_text(manifest.read_text()[:-1] + f', "scale": {HUGE_INT}}}')  # was a ValueError naming no file
    line = validate(episodes)
    assert str(manifest) in line and "integers of at most 4300 digits" in line
    (tmp_path / "big.json").write_text(f'{{"format": {HUGE_INT}}}')
    (tmp_path / "big.yaml").write_text(f"format: {HUGE_INT}\n")
    (tmp_path / "latin1.yaml").write_bytes("format: affectsim-scene/1\nname: Küche\n".encode("latin-1"))
    for name, why in (("big.json", "digits"), ("big.yaml", "digits"), ("latin1.yaml", "UTF-8 text")):
        line = _refused(capsys, "scenes", "check", tmp_path / name)
        assert str(tmp_path / name) in line and why in line


def _store(run: Path, sql: str, *args: object) -> Path:
    """A results store in ``run`` with one episode ``e0``, then damaged by ``sql``."""
    with ResultsStore.open(run / "results.sqlite", {"config": {"split": "test"}}) as store:
        store.put({"episode_id": "e0", "status": "ok", "reason": ""})
    with closing(sqlite3.connect(run / "results.sqlite")) as db, db:
        db.execute(sql, args)
    return run / "results.sqlite"


def test_damaged_results_stores_are_one_line_naming_the_store(capsys, tmp_path):
    db = _store(tmp_path / "config5", "UPDATE run SET meta = ?", '{"config": 5}')  # `report` had an AttributeError
    with pytest.raises(InvalidInput, match=r"config5/results\.sqlite.*run metadata '\{\"config\": 5\}'"):
        ResultsStore.open(db)
    assert str(db) in _refused(capsys, "report", db.parent)
    db = _store(tmp_path / "truncated", "UPDATE episodes SET record = ?", '{"episode_id": "e0", "sta')
    line = _refused(capsys, "report", db.parent)  # was a JSONDecodeError naming no file
    assert f"{db}: episode e0" in line and "valid JSON" in line
    deep = _store(tmp_path / "deep", "UPDATE episodes SET record = ?", DEEP)  # was a RecursionError traceback
    assert f"{deep}: episode e0" in _command_refused(AFFECTSIM, "report", deep.parent)
    good = _store(tmp_path / "good", "SELECT 1")
    for bad in (deep, db):
        _command_refused(sys.executable, COMPARE_RUNS, good.parent, bad.parent, names=(f"{bad}: episode e0",))
    from affectsim_eval.run.report import write_report

    with pytest.raises(InvalidInput, match=r"data_dir/results\.sqlite: run metadata\.data_dir=5 is invalid"):
        write_report(_store(tmp_path / "data_dir", "UPDATE run SET meta = ?", '{"config": {}, "data_dir": 5}').parent)


def test_dataset_validate_refuses_a_phase_the_bridge_refuses_and_non_finite_measures(episodes, validate):
    from affectsim_bridge.backends import base
    from affectsim_core.episode import MAX_PHASE_S

    assert base.MAX_PHASE_S is MAX_PHASE_S  # one limit: the dataset's and LoadWorld's
    _rewrite_split(episodes, "test", lambda d: d["episodes"][0]["humans"][0].update(phase=1e300))
    line = validate(episodes)
    assert "test.json.gz" in line and f"humans[0].phase=1e+300 is invalid; expected seconds within +-{MAX_PHASE_S:g}" in line
    _rewrite_split(episodes, "test", lambda d: d["episodes"][0]["humans"][0].update(phase=0.0))
    for bad in (math.nan, math.inf, "far"):
        _rewrite_split(episodes, "test", lambda d: d["episodes"][0]["measures"].update(initial_distance=bad))
        line = validate(episodes)
        assert "test.json.gz" in line and f"measures.initial_distance={bad!r} is invalid; expected a finite number" in line


def test_a_clip_with_huge_joint_angles_and_a_matching_checksum_is_refused(motions, capsys, tmp_path):
    lib = Library(motions)
    mid = next(iter(lib.entries))
    path = motions / lib.entries[mid]["file"]
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["dofs"] = np.full_like(arrays["dofs"], 1e6)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    path.write_bytes(buf.getvalue())
    manifest = json.loads((motions / "manifest.json").read_text())
    next(e for e in manifest["clips"] if e["id"] == mid)["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    (motions / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InvalidInput, match=rf"dofs='a joint angle of 1e\+06 rad' is invalid; expected joint angles "
                                           rf"within \+-{MAX_JOINT_RAD:.4f} rad"):
        Library(motions).load(mid)  # as eval loads the episode's clips (it evaluated this one, and exited 0)
    assert str(path) in _refused(capsys, "motions", "export-bvh", mid, "--library", motions, "--out", tmp_path)


def test_a_params_file_that_is_no_regular_yaml_mapping_stops_the_launch_before_any_node(capsys, tmp_path):
    """A FIFO as --params-file went straight to the nodes (each blocked opening it)."""
    fifo = tmp_path / "params.yaml"
    os.mkfifo(fifo)
    assert str(fifo) in _refused(capsys, "launch", "stack", "--params-file", fifo)
    listing = tmp_path / "list.yaml"
    listing.write_text("[1, 2]\n")
    assert "a YAML mapping" in _refused(capsys, "launch", "stack", "--params-file", listing)
