"""The passive-settings cache: a run with another policy reuses P-Init, P-Ref and P-Mon and its
records equal an uncached run's; damaged, oversized and half-written entries are never used."""

from __future__ import annotations

import multiprocessing
import shutil

import pytest

from affectsim_core.record import EpisodeRecord
from affectsim_eval.episode import passive_cache
from affectsim_eval.episode.passive_cache import MAX_ENTRY_BYTES, PassiveCache, identity, open_cache
from affectsim_eval.run.config import EvalConfig
from affectsim_eval.run.runner import run_eval
from affectsim_eval.run.store import ResultsStore
from helpers import episode_ids
from waiting import wait_until

RECS = ("pose-temporal", "majority", "uniform")


def _records(run) -> dict[str, dict]:
    with ResultsStore.open(run / "results.sqlite") as store:
        return {r["episode_id"]: EpisodeRecord.from_dict(r, "x").to_dict() for r in store.records("ok")}


def ids_of(data) -> tuple[str, ...]:
    """The episodes of these tests: one action-grounded and one observation-controlled."""
    return episode_ids(data, "action_grounded") + episode_ids(data, "observation_controlled")


def _run(out, data, policy, cache, workers=1):
    cfg = EvalConfig(ids=ids_of(data), recognizers=RECS, policy=policy, max_actions=40)
    summary = run_eval(out, cfg, workers=workers, data=data, log=lambda m: None, allow_dataset_mismatch=True,
                       passive_cache=str(cache))
    assert summary.failed == 0
    return _records(out)


@pytest.fixture(scope="module")
def uncached(small_data, tmp_path_factory):
    """The records of a ``stay`` run without the cache ({episode id: record})."""
    return _run(tmp_path_factory.mktemp("uncached"), small_data[0], "stay", "off")


@pytest.fixture(scope="module")
def filled(small_data, tmp_path_factory):
    """A cache filled by a ``stay`` run (read-only: copy it with :func:`_copy` before changing it), and that run's
    records."""
    tmp = tmp_path_factory.mktemp("filled")
    return tmp / "cache", _run(tmp / "run", small_data[0], "stay", tmp / "cache")


def _copy(filled, to):
    """A copy of the filled cache at ``to`` (a test's own to change)."""
    shutil.copytree(filled[0], to)
    return to


def test_a_new_policy_reuses_the_passive_settings_and_its_records_equal_an_uncached_run(small_data, tmp_path,
                                                                                      monkeypatch, uncached):
    data, _ = small_data
    cache = tmp_path / "cache"
    first = _run(tmp_path / "baseline", data, "baseline", cache)
    entries = sorted(cache.glob("*.npz"))
    assert len(entries) == len(ids_of(data)) and not list(cache.glob(".*"))  # one whole entry per episode, no temp files
    # the second policy's run renders and recognises no passive clip: only A-Obs
    from affectsim_eval.episode import orchestrator

    def no_passive(*a, **k):
        raise AssertionError("a cached episode rendered its passive settings again")

    monkeypatch.setattr(orchestrator, "_render_passive", no_passive)
    cached = _run(tmp_path / "stay", data, "stay", cache)
    monkeypatch.undo()
    assert cached == uncached  # every field of every record
    for i in ids_of(data):  # and the passive settings are the first policy's
        for field in ("visible", "p_ref", "d_star"):
            want, got = first[i][field], cached[i][field]
            assert (want if field != "visible" else {s: want[s] for s in ("p_init", "p_ref", "p_mon")}) == (
                got if field != "visible" else {s: got[s] for s in ("p_init", "p_ref", "p_mon")})
        assert {r: {s: v for s, v in p.items() if s != "a_obs"} for r, p in first[i]["probs"].items()} == \
               {r: {s: v for s, v in p.items() if s != "a_obs"} for r, p in cached[i]["probs"].items()}


def test_damaged_oversized_and_half_written_entries_are_recomputed(small_data, tmp_path, filled, uncached):
    data, _ = small_data
    cache = _copy(filled, tmp_path / "cache")
    assert filled[1] == uncached  # a run that fills the cache records what an uncached run does
    entries = sorted(cache.glob("*.npz"))
    raw = bytearray(entries[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte
    entries[0].write_bytes(bytes(raw))
    (cache / f".{entries[1].stem[:16]}-killed.tmp").write_bytes(b"half an entry")  # a killed writer's leftover
    warned = []
    c = open_cache(str(cache), data, RECS, "mujoco", warn=warned.append)
    assert c.get(entries[0].stem) is None and "damaged" in warned[0] and "checksum" in warned[0]
    assert not entries[0].exists()  # removed, so the next run stores it again
    assert c.get(entries[1].stem) is not None
    assert _run(tmp_path / "b", data, "stay", cache) == uncached
    assert entries[0].exists()
    shutil.copy(entries[0], entries[1])  # the right checksum, over the size limit
    with open(entries[1], "ab") as f:
        f.truncate(MAX_ENTRY_BYTES + 1)
    assert c.get(entries[1].stem) is None and "over the limit" in warned[-1]


def _put(args):
    directory, run_identity, key, result = args
    for _ in range(20):
        PassiveCache(directory, run_identity).put(key, result)
    return True


def test_concurrent_writers_of_one_key_leave_one_whole_entry(small_data, tmp_path, filled):
    data, _ = small_data
    _copy(filled, tmp_path / "src")
    run_identity = identity(RECS, "mujoco", data)
    src = PassiveCache(tmp_path / "src", run_identity)
    key = sorted((tmp_path / "src").glob("*.npz"))[0].stem
    result = src.get(key)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert all(pool.map(_put, [(tmp_path / "shared", run_identity, key, result)] * 4))
    files = list((tmp_path / "shared").iterdir())
    assert [f.name for f in files] == [f"{key}.npz"]
    assert files[0].read_bytes() == (tmp_path / "src" / f"{key}.npz").read_bytes()


def test_the_key_follows_what_determines_a_passive_result(small_data, tmp_path, monkeypatch):
    data, _ = small_data
    base = identity(RECS, "mujoco", data)
    assert identity(RECS, "habitat", data) != base
    assert identity(RECS[:2], "mujoco", data) != base
    monkeypatch.setattr(passive_cache, "CODE_PACKAGES", ("affectsim_core",))  # other code: another key
    assert identity(RECS, "mujoco", data) != base
    monkeypatch.undo()
    other = tmp_path / "data"
    shutil.copytree(data, other, ignore=shutil.ignore_patterns("cache"))
    assert identity(RECS, "mujoco", other) == base  # the same content elsewhere: the same key
    (other / "scenes" / "manifest.json").write_text((other / "scenes" / "manifest.json").read_text() + " ")
    assert identity(RECS, "mujoco", other) != base
    warned = []
    assert open_cache("", data, ("vlm-openai", "majority"), "mujoco", warn=warned.append) is None
    assert "answers from a server" in warned[0]
    assert open_cache("off", data, RECS, "mujoco") is None
    assert open_cache("", data, RECS, "mujoco", warn=warned.append).dir == data / "cache" / "passive"
    with pytest.raises(KeyError):
        identity(("nope",), "mujoco", data)


@pytest.mark.slow  # ~60 s: two graph runs; the cache's keys and reuse are tested in process above
def test_through_the_graph_the_second_run_finds_every_episode_and_its_records_are_the_same(small_data, tmp_path):
    """The evaluator node keys its cache with the bridge's parameters too; a second run over the same
    episodes finds them all, and both equal an uncached in-process run."""
    from affectsim_ros.launcher import GraphProcesses

    data, _ = small_data
    ids = ids_of(data)[:1]
    run_eval(tmp_path / "offline", EvalConfig(ids=ids, recognizers=("majority", "uniform"), max_actions=40),
             workers=1, data=data, log=lambda m: None, allow_dataset_mismatch=True)
    for k in (1, 2):
        with GraphProcesses("bench", args={"episodes": "0", "episode_ids": ",".join(ids), "recognizers": "majority,uniform",
                                           "output_dir": str(tmp_path / f"ros{k}"), "allow_dataset_mismatch": "true",
                                           "passive_cache": str(tmp_path / "cache")},
                            extra_params={"bridge": {"motion_library": str(data / "motions")},
                                          "evaluator": {"data_dir": str(data), "max_actions": 40}},
                            log_dir=tmp_path / f"logs{k}") as g:
            wait_until(lambda: g.poll()["evaluator"] is not None, 600, "the run's end", 0.2)
            code = g.poll()["evaluator"]
        log = (tmp_path / f"logs{k}" / "evaluator.log").read_text()
        assert code == 0, log
        found = 0 if k == 1 else 1
        assert f"passive cache: {found} episodes found, {1 - found} computed" in log, log
        assert _records(tmp_path / f"ros{k}") == _records(tmp_path / "offline")


def test_a_matching_checksum_over_bad_content_and_a_failed_write_are_warnings(small_data, tmp_path, filled):
    import hashlib

    data, _ = small_data
    cache = _copy(filled, tmp_path / "cache")
    entry = sorted(cache.glob("*.npz"))[0]
    body = b"not an npz at all"
    entry.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    warned = []
    c = open_cache(str(cache), data, RECS, "mujoco", warn=warned.append)
    assert c.get(entry.stem) is None and "damaged" in warned[-1] and not entry.exists()
    ro = PassiveCache(tmp_path / "file-not-dir", identity(RECS, "mujoco", data), warn=warned.append)
    (tmp_path / "file-not-dir").write_text("a file where the cache directory should be")
    good = open_cache(str(filled[0]), data, RECS, "mujoco")
    result = good.get(sorted(filled[0].glob("*.npz"))[0].stem)
    ro.put("k" * 64, result)  # cannot be stored: a warning, not an exception
    assert "could not store" in warned[-1]


def test_an_ensembles_members_and_an_edited_scene_change_the_key(small_data, tmp_path):
    data, _ = small_data
    ident = identity(("committee",), "mujoco", data)
    assert set(ident["recognizers"]["committee"]["checkpoints"]) == {"committee", "pose-temporal", "rgb-clip"}
    assert all(ident["recognizers"]["committee"]["checkpoints"].values())
    c = PassiveCache(tmp_path, identity(RECS, "mujoco", data))
    from affectsim_eval.dataset.episodes import load_split

    ep = load_split("test", data / "episodes")[0]
    scene = tmp_path / "scene.json"
    scene.write_text("{}")
    before = c.key(ep, "scripted", str(scene))
    scene.write_text("{ }")
    assert c.key(ep, "scripted", str(scene)) != before and c.key(ep, "reactive", str(scene)) != c.key(
        ep, "scripted", str(scene))
