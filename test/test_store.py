"""Results store: round trip, refusals, resume, merge, a writer killed with SIGKILL, and the parts of a
sharded run writing into one store."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from affectsim_core.errors import InvalidInput
from affectsim_eval.run.config import Shard
from affectsim_eval.run.loop import EpisodeResult, run_episodes
from affectsim_eval.run.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"split": "test", "seed": 7, "recognizers": {"face": "fer-v1", "pose": "st-gcn"}, "policy": "greedy"}
META = {"config": CONFIG, "code_version": "abc123", "episode_ids": ["e0", "e1", "e2"]}


def ok(episode_id: str, **extra) -> dict:
    return {"episode_id": episode_id, "status": "ok", "wall_s": 1.5, "worker": "w0", **extra}


def failed(episode_id: str, reason: str = "simulator crashed") -> dict:
    return {"episode_id": episode_id, "status": "failed", "reason": reason}


@pytest.fixture
def store(tmp_path):
    with ResultsStore.open(tmp_path / "run" / "results.sqlite", META) as s:
        yield s


def test_nested_record_with_nan_and_none_round_trips_after_reopen(store):
    record = ok("e0", metrics={"acc": math.nan, "f1": [0.5, None, -math.inf], "per_class": {"joy": 1e-300}},
                note=None)
    store.put(record)
    store.close()
    with ResultsStore.open(store.path) as again:
        (back,) = again.records()
        assert again.meta() == META
    assert math.isnan(back["metrics"]["acc"]) and back["metrics"]["f1"][2] == -math.inf
    back["metrics"]["acc"] = record["metrics"]["acc"] = 0.0
    assert back == record


def test_store_is_wal_and_synchronous_full(store):
    db = store._db
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL


def test_duplicate_put_refused_unless_replace(store):
    store.put(failed("e0"))
    with pytest.raises(InvalidInput, match=r"episode_id='e0'.*replace=True"):
        store.put(ok("e0"))
    assert store.failures() == [("e0", "simulator crashed")]
    store.put(ok("e0"), replace=True)
    assert store.failures() == [] and [r["episode_id"] for r in store.records()] == ["e0"]


@pytest.mark.parametrize("record, field", [
    ({"status": "ok"}, "episode_id"),
    ({"episode_id": "e0", "status": "done"}, "status"),
    ({"episode_id": "e0", "status": "failed"}, "reason"),
    ({"episode_id": "e0", "status": "ok", "reason": "why"}, "reason"),
    ({"episode_id": "e0", "status": "ok", "wall_s": math.nan}, "wall_s"),
    ({"episode_id": "e0", "status": "ok", "blob": object()}, "record of e0"),
])
def test_bad_records_refused_and_nothing_stored(store, record, field):
    with pytest.raises(InvalidInput, match=field):
        store.put(record)
    assert store.count() == 0


def test_pending_done_and_retry_failed(store):
    ids = ["e3", "e1", "e0", "e2"]
    store.put(ok("e1"))
    store.put(failed("e2", "timeout"))
    assert store.done() == {"e1", "e2"} and store.count() == 2
    assert store.pending(ids) == ["e3", "e0"]
    assert store.pending(ids, retry_failed=True) == ["e3", "e0", "e2"]
    assert store.failures() == [("e2", "timeout")]
    assert [r["episode_id"] for r in store.records("failed")] == ["e2"]
    assert [r["episode_id"] for r in store.records(None)] == ["e1", "e2"]
    with pytest.raises(InvalidInput, match="e1"):
        store.pending(["e1", "e1"])


def test_records_sorted_by_episode_id(store):
    for i in (3, 1, 2):
        store.put(ok(f"e{i}"))
    assert [r["episode_id"] for r in store.records()] == ["e1", "e2", "e3"]


def test_garbage_file_refused_naming_path_and_left_untouched(tmp_path):
    path = tmp_path / "results.sqlite"
    garbage = os.urandom(3000)
    path.write_bytes(garbage)
    for meta in (None, META):
        with pytest.raises(InvalidInput) as e:
            ResultsStore.open(path, meta)
        assert str(path) in str(e.value) and "schema 1" in str(e.value) and "--out" in str(e.value)
    assert path.read_bytes() == garbage


def test_foreign_sqlite_database_refused_and_left_untouched(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    before = path.read_bytes()
    with pytest.raises(InvalidInput, match=r"other\.sqlite.*tables \['t'\]"):
        ResultsStore.open(path, META)
    assert path.read_bytes() == before  # not even switched to WAL


@pytest.mark.parametrize("damage, found", [
    ("UPDATE schema SET version = 99", "schema rows"),
    ("DROP TABLE episodes", "tables"),
    ("DELETE FROM run", "no run metadata"),
])
def test_wrong_schema_or_missing_tables_refused(tmp_path, damage, found):
    path = tmp_path / "results.sqlite"
    ResultsStore.open(path, META).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(damage)
    db.close()
    with pytest.raises(InvalidInput, match=found) as e:
        ResultsStore.open(path)
    assert str(path) in str(e.value)


def test_empty_file_is_a_new_store_with_meta_but_refused_without(tmp_path):
    path = tmp_path / "results.sqlite"
    path.write_bytes(b"")
    with pytest.raises(InvalidInput, match="empty file"):
        ResultsStore.open(path)
    with ResultsStore.open(path, META) as s:
        s.put(ok("e0"))
    with ResultsStore.open(path) as s:
        assert s.done() == {"e0"} and s.meta() == META


def test_absent_store_without_meta_refused_and_not_created(tmp_path):
    path = tmp_path / "results.sqlite"
    with pytest.raises(InvalidInput, match="does not exist"):
        ResultsStore.open(path)
    assert not path.exists()


def test_reopen_under_another_config_names_the_differing_keys(tmp_path):
    path = tmp_path / "results.sqlite"
    ResultsStore.open(path, META).close()
    other = {**META, "config": {**CONFIG, "seed": 8, "recognizers": {"face": "fer-v2", "pose": "st-gcn"}}}
    with pytest.raises(InvalidInput) as e:
        ResultsStore.open(path, other)
    msg = str(e.value)
    assert "seed, recognizers.face" in msg or "recognizers.face, seed" in msg
    assert "fer-v2" in msg and "fer-v1" in msg and "policy" not in msg and str(path) in msg
    with pytest.raises(InvalidInput, match="split"):
        ResultsStore.open(path, {"config": {k: v for k, v in CONFIG.items() if k != "split"}})
    # other metadata may differ (e.g. a code fix); the stored meta stays as created
    with ResultsStore.open(path, {**META, "code_version": "def456"}) as s:
        assert s.meta()["code_version"] == "abc123"


def test_merge_imports_new_skips_identical_and_refuses_conflicts(tmp_path, store):
    store.put(ok("e0", acc=0.5))
    with ResultsStore.open(tmp_path / "shard.sqlite", META) as shard:
        shard.put(ok("e0", acc=0.5))
        shard.put(ok("e1", acc=math.nan))
        shard.put(failed("e2"))
    assert store.merge(tmp_path / "shard.sqlite") == 2
    assert store.done() == {"e0", "e1", "e2"} and store.failures() == [("e2", "simulator crashed")]
    assert store.merge(tmp_path / "shard.sqlite") == 0  # NaN records compare equal as stored

    with ResultsStore.open(tmp_path / "conflict.sqlite", META) as shard:
        shard.put(ok("e9"))
        shard.put(ok("e1", acc=0.9))
    with pytest.raises(InvalidInput, match="episode_id='e1'"):
        store.merge(tmp_path / "conflict.sqlite")
    assert "e9" not in store.done()  # all or nothing


def test_merge_refuses_another_config(tmp_path, store):
    with ResultsStore.open(tmp_path / "shard.sqlite", {"config": {**CONFIG, "policy": "random"}}) as shard:
        shard.put(ok("e5"))
    with pytest.raises(InvalidInput, match=r"config key\(s\) policy.*shard\.sqlite|shard\.sqlite.*policy"):
        store.merge(tmp_path / "shard.sqlite")
    assert store.count() == 0


def test_put_waits_for_another_writers_lock(store):
    holder = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, holder.execute, ("COMMIT",)).start()
    t0 = time.monotonic()
    store.put(ok("e0"))
    assert time.monotonic() - t0 >= 0.25 and store.done() == {"e0"}
    holder.close()


WRITER = textwrap.dedent("""
    import math, sys
    from affectsim_eval.run.store import ResultsStore
    store = ResultsStore.open(sys.argv[1], {"config": {"seed": 1}})
    for i in range(100000):
        eid = f"ep{i:06d}"
        store.put({"episode_id": eid, "status": "ok", "i": i, "curve": [i / 7, math.nan] * 50, "pad": "x" * 2000})
        print(eid, flush=True)
""")


def test_sigkilled_writer_keeps_every_reported_record_and_resumes(tmp_path):
    path = tmp_path / "results.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env)
    printed = []
    try:
        while len(printed) < 20:
            line = proc.stdout.readline()
            assert line, f"writer exited early with {proc.wait()}"
            printed.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)  # while it is writing the next ones
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    all_ids = [f"ep{i:06d}" for i in range(100000)]
    with ResultsStore.open(path, {"config": {"seed": 1}}) as store:
        assert store._db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        records = store.records()
        stored = [r["episode_id"] for r in records]
        assert set(printed) <= set(stored) and stored == all_ids[:len(stored)]
        for r in records:
            i = r["i"]
            assert r["episode_id"] == all_ids[i] and r["pad"] == "x" * 2000 and len(r["curve"]) == 100
            assert r["curve"][0] == i / 7 and math.isnan(r["curve"][1])
        assert store.pending(all_ids) == all_ids[len(stored):]


def test_shards_split_a_run_into_blocks_and_the_last_one_sees_it_complete(tmp_path):
    """Three parts of one run write into one store from three threads; each evaluates only its share,
    and only once every share is stored does a part see the run complete."""
    eps = [type("Ep", (), {"episode_id": f"e{i:02d}"})() for i in range(10)]
    meta = {"config": CONFIG, "episode_ids": [e.episode_id for e in eps]}
    blocks = [Shard(k, 3).of(eps) for k in range(3)]
    assert [len(b) for b in blocks] == [4, 3, 3] and sorted(sum(blocks, []), key=eps.index) == eps  # disjoint, all
    assert blocks[1] == [eps[1], eps[4], eps[7]]  # every third, in the run's order
    gate, seen, summaries = threading.Barrier(3), {}, {}

    def evaluate(k: int):
        def run(todo):
            seen[k] = [e.episode_id for e in todo]
            gate.wait(30)  # all three parts are running at once
            for e in todo:
                yield EpisodeResult(e.episode_id, "f", "happy", None, "x", 0.0, f"w{k}", {})
        return run

    def part(k: int) -> None:
        summaries[k] = run_episodes(tmp_path, meta, eps, evaluate(k), "test", log=lambda m: None, shard=Shard(k, 3))

    threads = [threading.Thread(target=part, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == {k: [e.episode_id for e in blocks[k]] for k in range(3)}
    assert all(s.total == len(blocks[k]) and s.done == len(blocks[k]) for k, s in summaries.items())
    assert any(s.complete for s in summaries.values())
    again = run_episodes(tmp_path, meta, eps, evaluate(0), "test", log=lambda m: None, shard=Shard(0, 3))
    assert again.skipped == 4 and again.done == 0 and again.complete and again.run_ok == 0


@pytest.mark.parametrize("text", ["3/3", "0/0", "-1/2", "1", "a/b", "0/65", " / "])
def test_a_bad_shard_is_refused_naming_the_field(text):
    with pytest.raises(InvalidInput, match=r"shard=.* is invalid; expected k/N with 0 <= k < N <= 64"):
        Shard.parse(text)
