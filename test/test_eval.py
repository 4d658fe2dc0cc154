"""The benchmark end to end on a small data directory: records through the ROS graph equal the
in-process ones (with an MCAP recording), a SIGKILLed run resumes without losing or recomputing
an episode, Ray shards give the same records, the report has every table, bad input is refused."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import yaml
from rosbags.highlevel import AnyReader

from affectsim_core.errors import InvalidInput
from affectsim_core.record import comparable
from affectsim_core.ros.env import loopback_env, pick_domain_id
from affectsim_eval.run.config import EvalConfig, run_meta, trained_on
from affectsim_eval.dataset.episodes import load_split, read_manifest
from affectsim_eval.run.loop import evaluate_safely
from affectsim_eval.run.ray_shards import _start
from affectsim_eval.episode.recording import typestore
from affectsim_eval.run.report import write_report
from affectsim_eval.run.runner import EpisodeWorker, run_eval
from affectsim_eval.run.store import ResultsStore
from affectsim_ros.launcher import GraphProcesses
from helpers import episode_ids
from waiting import wait_until

AFFECTSIM = [sys.executable, "-m", "affectsim_ros.cli"]
ROOT = Path(__file__).resolve().parent.parent
FAST = "majority,uniform"  # references: no model inference, so these tests time the pipeline only
SMALL = {"allow_dataset_mismatch": "true"}  # the small test dataset is not the one the checkpoints were trained on


def _exit_code(graph: GraphProcesses, node: str = "evaluator", timeout: float = 120.0, poll_s: float = 0.2):
    """Wait (up to ``timeout`` s, a safety net) for ``node`` of ``graph`` to exit; its exit code, None if it runs on."""
    try:
        wait_until(lambda: graph.poll()[node] is not None, timeout, f"{node} exiting", poll_s)
    except AssertionError:
        pass  # still running: the caller checks the None
    return graph.poll()[node]


def _records(run) -> dict[str, dict]:
    with ResultsStore.open(run / "results.sqlite") as st:
        return {r["episode_id"]: comparable(r) for r in st.records(None)}


@pytest.mark.slow  # > 30 s of real time: make test-all
def test_ros_graph_records_equal_in_process_records_and_mcap_is_readable(small_data, tmp_path):
    data, _ = small_data
    ids = episode_ids(data, "dyadic")
    recs = ("pose-temporal", "majority")
    run_eval(tmp_path / "offline", EvalConfig(ids=ids, recognizers=recs), workers=1, data=data, log=lambda m: None,
             allow_dataset_mismatch=True)
    ros = tmp_path / "ros"
    with GraphProcesses("bench", args={"episodes": "0", "episode_ids": ",".join(ids), "recognizers": ",".join(recs),
                                       "output_dir": str(ros), "record": "true", **SMALL},
                        extra_params={"bridge": {"motion_library": str(data / "motions")},
                                      "evaluator": {"data_dir": str(data)}},
                        log_dir=tmp_path / "logs") as g:
        _exit_code(g, timeout=300, poll_s=0.5)
        codes = g.poll()
        _failed_episodes_end_the_evaluator_non_zero(data, ids[0], g.domain_id, tmp_path)
        _a_stopped_evaluator_stores_no_failure(data, ids[0], g.domain_id, tmp_path)
    log = (tmp_path / "logs" / "evaluator.log").read_text()
    assert codes["evaluator"] == 0, log
    off, on = _records(tmp_path / "offline"), _records(ros)
    assert set(off) == set(on) == set(ids)
    for i in ids:
        assert on[i]["status"] == "ok", on[i]
        assert on[i] == off[i]
    assert (ros / "report.md").is_file() and (ros / "frames" / f"{ids[0]}.jpg").is_file()

    with AnyReader([ros / "recordings" / ids[0]], default_typestore=typestore()) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts["/head_camera/rgb/image_raw"] >= 1 and counts["/odom"] >= 1
        clip = [c for c in reader.connections if c.topic == "/affectsim/acquired_clip"]
        n = 0
        for conn, _t, raw in reader.messages(connections=clip):
            img = reader.deserialize(raw, conn.msgtype)
            assert (img.height, img.width, img.encoding) == (224, 224, "rgb8")
            n += 1
        assert n == (8 if not off[ids[0]]["a_obs"]["fallback"] else 0)


def test_two_graphs_side_by_side_give_the_records_of_one_run(small_data, tmp_path):
    """``affectsim launch bench graphs:=2``: two graphs on two ROS domains, each evaluating its part of the
    episodes into one store; the records are those of an in-process run, and one report covers both."""
    data, _ = small_data
    ids = episode_ids(data, "action_grounded") + episode_ids(data, "observation_controlled")
    run_eval(tmp_path / "offline", EvalConfig(ids=ids, recognizers=("majority",)), workers=1, data=data,
             log=lambda m: None, allow_dataset_mismatch=True)
    params = yaml.safe_load((ROOT / "config" / "bench.yaml").read_text())
    params["bridge"]["ros__parameters"]["motion_library"] = str(data / "motions")
    params["evaluator"]["ros__parameters"]["data_dir"] = str(data)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    run = tmp_path / "ros"
    out = subprocess.run([*AFFECTSIM, "launch", "bench", "graphs:=2", "episodes:=0", f"episode_ids:={','.join(ids)}",
                          "recognizers:=majority", f"output_dir:={run}", "allow_dataset_mismatch:=true",
                          "--params-file", str(tmp_path / "params.yaml")],
                         env=loopback_env(pick_domain_id()), capture_output=True, text=True, timeout=600)
    said = out.stdout + out.stderr
    assert out.returncode == 0, said[-3000:]
    domains = re.findall(r"graph 'bench' (\d) of 2 running: .* on ROS_DOMAIN_ID=(\d+)", said)
    assert sorted(k for k, _ in domains) == ["0", "1"] and len({d for _, d in domains}) == 2, said[-3000:]
    assert "[graph 0] " in said and "[graph 1] " in said  # each graph's lines say which it is
    assert "report: " in said, said[-3000:]  # by the part that finished last (by both if they finish together)
    off, on = _records(tmp_path / "offline"), _records(run)
    assert set(on) == set(ids) and all(on[i]["status"] == "ok" for i in ids), on
    assert on == off
    assert (run / "report.md").is_file()


@pytest.mark.slow  # ~50 s: keeps `make test` under 10 min; the in-process reactive test (test_reactive.py) stays fast
def test_reactive_people_give_the_same_records_through_the_graph_and_in_process(small_data, tmp_path):
    data, _ = small_data
    ids = tuple(e.episode_id for e in load_split("test", data / "episodes") if e.family == "action_grounded")[:2]
    cfg = EvalConfig(ids=ids, recognizers=("majority",), humans="reactive")
    run_eval(tmp_path / "offline", cfg, workers=1, data=data, log=lambda m: None, allow_dataset_mismatch=True)
    ros = tmp_path / "ros"
    with GraphProcesses("bench", args={"episodes": "0", "episode_ids": ",".join(ids), "recognizers": "majority",
                                       "output_dir": str(ros), "humans": "reactive", **SMALL},
                        extra_params={"bridge": {"motion_library": str(data / "motions")},
                                      "evaluator": {"data_dir": str(data)}},
                        log_dir=tmp_path / "logs") as g:
        code = _exit_code(g, timeout=300, poll_s=0.5)
    assert code == 0, (tmp_path / "logs" / "evaluator.log").read_text()
    off, on = _records(tmp_path / "offline"), _records(ros)
    assert set(off) == set(on) == set(ids)
    for i in ids:
        assert on[i]["status"] == "ok" and on[i]["social"]["people"], on[i]
        assert on[i] == off[i]
    with ResultsStore.open(ros / "results.sqlite") as st:
        assert st.meta()["config"]["humans"] == "reactive"
    assert "## Social measures (reactive people)" in (ros / "report.md").read_text()


def _failed_episodes_end_the_evaluator_non_zero(data, episode_id: str, domain_id: int, tmp_path) -> None:
    """Evaluators on the running stack, on a copy of ``data`` that lacks the episode's scene: it is
    stored as failed (not retried: no fault of the graph), the node exits 1; ``retry_failed`` runs it again."""
    broken = tmp_path / "broken"
    for sub in ("motions", "episodes"):
        (broken / sub).parent.mkdir(exist_ok=True)
        (broken / sub).symlink_to(data / sub)
    scene = next(e.scene_id for e in load_split("test", data / "episodes") if e.episode_id == episode_id)
    shutil.copytree(data / "scenes", broken / "scenes", ignore=lambda _d, names: [n for n in names if scene in n])
    out = tmp_path / "failing"
    for run, (retry, attempts) in enumerate((("false", "2"), ("true", "1"))):
        logs = tmp_path / f"failing_logs{run}"
        with GraphProcesses("bench", nodes=("evaluator",), domain_id=domain_id, log_dir=logs,
                            args={"episodes": "0", "episode_ids": episode_id, "recognizers": FAST,
                                  "output_dir": str(out), "retry_failed": retry, "episode_attempts": attempts, **SMALL},
                            extra_params={"evaluator": {"data_dir": str(broken)}}) as ev:
            code = _exit_code(ev)
        log = (logs / "evaluator.log").read_text()
        assert code == 1 and "1 of 1 episodes are stored as failed" in log and "retry_failed:=true" in log, log
        assert "0 already in" in log and "1 to run" in log, log  # the second run evaluates the failed one again
        assert "evaluating it again" not in log  # a missing scene file is not a fault of the graph: not retried
        with ResultsStore.open(out / "results.sqlite") as st:
            (_, reason), = st.failures()
        assert scene in reason and "attempt" not in reason


@pytest.mark.slow
def test_a_bridge_stall_during_the_benchmark_loses_no_episode(small_data, tmp_path):
    """The bridge paused 45 s mid-run (past the DDS lease, so replies are lost): every episode is
    still stored ok, with the records of an undisturbed in-process run, and the evaluator exits 0."""
    data, _ = small_data
    ids = episode_ids(data, "action_grounded", 2)
    run_eval(tmp_path / "offline", EvalConfig(ids=ids, recognizers=tuple(FAST.split(","))), workers=1, data=data,
             log=lambda m: None, allow_dataset_mismatch=True)
    ros = tmp_path / "ros"
    with GraphProcesses("bench", args={"episodes": "0", "episode_ids": ",".join(ids), "recognizers": FAST,
                                       "output_dir": str(ros), **SMALL},
                        extra_params={"bridge": {"motion_library": str(data / "motions")},
                                      "evaluator": {"data_dir": str(data)}},
                        log_dir=tmp_path / "logs") as g:
        wait_until(lambda: (ros / "results.sqlite").is_file(), 300, "the run's store")
        wait_until(lambda: "to run on the ROS graph" in (tmp_path / "logs" / "evaluator.log").read_text(), 300,
                   "the first episode's requests")
        bridge = g.pids()["bridge"]
        os.kill(bridge, signal.SIGSTOP)
        try:
            time.sleep(45.0)  # the fault
        finally:
            os.kill(bridge, signal.SIGCONT)
        _exit_code(g, timeout=600, poll_s=0.5)
        codes = g.poll()
    log = (tmp_path / "logs" / "evaluator.log").read_text()
    assert codes["evaluator"] == 0 and codes["bridge"] is None, log
    assert _records(ros) == _records(tmp_path / "offline"), log


def _a_stopped_evaluator_stores_no_failure(data, episode_id: str, domain_id: int, tmp_path) -> None:
    """SIGINT while an episode runs: the evaluator exits 0 and stores nothing for it (a rerun evaluates it)."""
    out, logs = tmp_path / "stopped", tmp_path / "stopped_logs"
    with GraphProcesses("bench", nodes=("evaluator",), domain_id=domain_id, log_dir=logs,
                        args={"episodes": "0", "episode_ids": episode_id, "recognizers": FAST, "output_dir": str(out), **SMALL},
                        extra_params={"evaluator": {"data_dir": str(data)}}) as ev:
        wait_until(lambda: "to run on the ROS graph" in (logs / "evaluator.log").read_text(), 120,
                   "the episode under way")
        codes = ev.stop()  # SIGINT
    log = (logs / "evaluator.log").read_text()
    assert codes["evaluator"] == 0 and "Traceback" not in log, log
    with ResultsStore.open(out / "results.sqlite") as st:
        assert st.records(None) == [] or all(r["status"] == "ok" for r in st.records(None)), log


def test_killed_run_resumes_without_losing_or_recomputing(small_data, tmp_path):
    data, _ = small_data
    ids = ",".join(episode_ids(data, "action_grounded", 3))
    cmd = [*AFFECTSIM, "eval", "--ids", ids, "--recognizers", FAST, "--workers", "1", "--data", str(data),
           "--out", str(tmp_path), "--no-report", "--allow-dataset-mismatch"]
    proc = subprocess.Popen(cmd, env=loopback_env(pick_domain_id()), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    db = tmp_path / "results.sqlite"

    def stored():
        if not db.is_file():
            return []
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                return c.execute("SELECT episode_id, finished_at FROM episodes").fetchall()
        except sqlite3.OperationalError:
            return []

    first = wait_until(lambda: stored() or proc.poll() is not None, 240, "a stored episode", 0.2)
    assert first is not True and first, "no episode finished before the deadline"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    with ResultsStore.open(db) as st:
        kept = {r["episode_id"]: r for r in st.records(None)}
    assert {i for i, _ in first} <= set(kept) and len(kept) < 3
    out = subprocess.run(cmd, env=loopback_env(pick_domain_id()), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"{len(kept)} were already stored" in out.stdout
    with sqlite3.connect(db) as c:
        rows = dict(c.execute("SELECT episode_id, finished_at FROM episodes").fetchall())
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(rows) == set(ids.split(","))
    for i, at in first:
        assert rows[i] == at  # finished before the kill: kept, not recomputed
    with ResultsStore.open(db) as st:
        assert all(r["status"] == "ok" for r in st.records(None))
    report = write_report(tmp_path).read_text()
    for section in ("Validity", "Table 3", "Table 4", "Table 5", "Table 6", "Per-class recall", "episode family"):
        assert section in report
    assert "**Checkpoints trained on another dataset** (the run was started with --allow-dataset-mismatch): `majority`" \
        in report
    assert (tmp_path / "figures" / "paired_macro_f1.png").is_file()


def test_failing_episode_is_recorded_with_its_reason(small_data):
    data, _ = small_data
    w = EpisodeWorker(EvalConfig(recognizers=("majority",)).as_dict(), str(data))
    ep = replace(load_split("test", data / "episodes")[0], scene_id="scene_missing")
    res = w.run(ep)
    assert res.status == "failed" and "scene_missing" in res.reason and res.record is None
    assert res.stored()["status"] == "failed" and res.stored()["episode_id"] == ep.episode_id
    w.close()


def test_a_failed_episode_is_evaluated_again_after_recovery_up_to_the_bound(small_data):
    data, _ = small_data
    w = EpisodeWorker(EvalConfig(recognizers=("majority",)).as_dict(), str(data))
    ep = load_split("test", data / "episodes")[0]
    calls, recovered = [], []

    def flaky(e):  # the graph loses the first attempt's reply
        calls.append(e.episode_id)
        if len(calls) == 1:
            raise TimeoutError("bridge load_world did not answer within 600 s")
        return w.evaluate(e)

    res = evaluate_safely(ep, flaky, "test", w.times, attempts=3, recover=recovered.append)
    assert res.status == "ok" and len(calls) == 2 and len(recovered) == 1 and "attempt 1 of 3" in recovered[0]
    assert comparable(res.stored()) == comparable(w.run(ep).stored())  # the retry's record is the episode's record

    def broken(e):
        raise TimeoutError("nav acquire_observation goal did not answer within 600 s")

    res = evaluate_safely(ep, broken, "test", w.times, attempts=3, recover=recovered.append)
    assert res.status == "failed" and res.reason.endswith("(attempt 3 of 3)") and len(recovered) == 3
    res = evaluate_safely(ep, broken, "test", w.times, attempts=3, recover=recovered.append, retry_on=(KeyError,))
    assert res.status == "failed" and "attempt" not in res.reason and len(recovered) == 3  # not a transient failure
    w.close()


def test_bad_input_is_refused_at_start(small_data, tmp_path):
    data, _ = small_data
    with pytest.raises(InvalidInput, match="recognizers='nope'"):
        run_eval(tmp_path, EvalConfig(recognizers=("nope",)), data=data)
    with pytest.raises(InvalidInput, match="policy='nope'"):
        run_eval(tmp_path, EvalConfig(policy="nope"), data=data)
    with pytest.raises(InvalidInput, match="dataset"):
        run_eval(tmp_path, EvalConfig(), data=tmp_path / "nowhere")
    with pytest.raises(InvalidInput, match="episode ids"):
        run_eval(tmp_path, EvalConfig(ids=("test_xx_999999",)), data=data)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(InvalidInput, match="results store"):
        run_eval(tmp_path / "bad", EvalConfig(ids=episode_ids(data, "action_grounded"), recognizers=("majority",)), data=data,
                 allow_dataset_mismatch=True)
    proc = subprocess.run([*AFFECTSIM, "launch", "bench", "episodes:=-3"], env=loopback_env(pick_domain_id()),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "launch argument episodes='-3' is invalid" in proc.stderr
    proc = subprocess.run([*AFFECTSIM, "launch", "bench", "recognizers:=pose-temporal,oracle"],
                          env=loopback_env(pick_domain_id()), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "launch argument recognizers" in proc.stderr


def test_a_checkpoint_trained_on_another_dataset_version_is_refused_unless_allowed(small_data, tmp_path):
    data, _ = small_data
    version = read_manifest(data / "episodes")["version"]
    shipped = trained_on(("majority",))["majority"]
    assert shipped["dataset_version"] != version  # the shipped checkpoints were trained on the full dataset
    cfg = EvalConfig(ids=episode_ids(data, "action_grounded"), recognizers=("majority", "uniform"))
    with pytest.raises(InvalidInput, match=f"checkpoints.majority.dataset_version='{shipped['dataset_version']}' is "
                                           f"invalid; expected '{version}'.* the checkpoint was trained on train "
                                           f"{shipped['splits']['train'][:6]}"):
        run_eval(tmp_path / "refused", cfg, data=data, log=lambda m: None)
    assert not (tmp_path / "refused").exists()  # refused before any work
    logs = tmp_path / "refused_logs"  # the evaluator node refuses at start, before joining any episode
    with GraphProcesses("bench", nodes=("evaluator",), log_dir=logs,
                        args={"episodes": "0", "episode_ids": cfg.ids[0], "recognizers": "majority",
                              "output_dir": str(tmp_path / "refused")},
                        extra_params={"evaluator": {"data_dir": str(data)}}) as ev:
        code = _exit_code(ev)
    log = (logs / "evaluator.log").read_text()
    assert code == 2 and "checkpoints.majority.dataset_version" in log and "Traceback" not in log, log
    assert not (tmp_path / "refused").exists()
    # a checkpoint trained on this version runs, and the metadata says which version each was trained on
    ck = tmp_path / "checkpoints" / "majority"
    ck.mkdir(parents=True)
    (ck / "manifest.json").write_text(json.dumps({"weights_sha256": "0" * 64, "dataset_version": version}))
    meta = run_meta(cfg, [], data, checkpoints=tmp_path / "checkpoints")
    assert meta["dataset_mismatch"] == {} and meta["checkpoint_dataset_versions"] == {"majority": version}
    assert meta["dataset_version"] == version


@pytest.mark.slow
def test_ray_shards_equal_a_local_run(small_data, tmp_path):
    data, _ = small_data
    cfg = EvalConfig(ids=episode_ids(data, "action_grounded", 5)[3:], recognizers=("majority", "uniform"))
    run_eval(tmp_path / "local", cfg, workers=1, data=data, log=lambda m: None, allow_dataset_mismatch=True)
    run_eval(tmp_path / "ray", cfg, workers=2, ray_address="local", data=data, log=lambda m: None,
             allow_dataset_mismatch=True)
    assert _records(tmp_path / "local") == _records(tmp_path / "ray")


@pytest.mark.slow
def test_local_ray_cluster_listens_on_loopback_only():
    ray = _start("local", 1)
    try:
        ray_pids = {p.pid for p in psutil.process_iter(["name", "cmdline"])
                    if "ray" in " ".join(p.info["cmdline"] or []) or p.info["name"] in ("gcs_server", "raylet")}
        ray_pids.add(os.getpid())  # the driver serves too
        listening = [c for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN and c.pid in ray_pids]
        assert listening
        assert all(c.laddr.ip in ("127.0.0.1", "::ffff:127.0.0.1") for c in listening), listening
    finally:
        ray.shutdown()


def _vlm_answer(body: dict) -> str:
    """A VLM that rates VAD, its answer a function of the first frame (the same whoever asks, in any order)."""
    h = int(hashlib.sha256(body["messages"][0]["content"][1]["image_url"]["url"].encode()).hexdigest()[:8], 16)
    return json.dumps({"emotion": ("sad", "happy", "angry")[h % 3], "valence": round(0.1 * (h % 7) - 0.3, 2),
                       "arousal": 0.2, "dominance": -0.1})


def _with_an_evolving_episode(data, out):
    """A copy of the small dataset whose test split also holds one evolving episode: an
    observation-controlled episode whose target performs an evolving clip (phase 0)."""
    from affectsim_bridge.content.library import Library
    from affectsim_core.protocol import SPLITS
    from affectsim_eval.dataset.episodes import dataset_version, write_split

    for d in ("motions", "scenes"):
        shutil.copytree(data / d, out / d)
    clip = min(Library(out / "motions").select(family="evolving"), key=lambda e: e["duration"])  # the shortest
    test = load_split("test", data / "episodes")
    base = next(e for e in test if e.family == "observation_controlled")
    humans = tuple(replace(h, motion_id=clip["id"], phase=0.0) if h.role == "target" else h for h in base.humans)
    ep = replace(base, humans=humans, emotion=clip["emotion"], episode_id=f"{base.episode_id}_ev")
    (out / "episodes").mkdir()
    manifest = read_manifest(data / "episodes")
    for s in SPLITS:
        eps = sorted(load_split(s, data / "episodes") + ([ep] if s == "test" else []), key=lambda e: e.episode_id)
        manifest["splits"][s].update(sha256=write_split(out / "episodes" / f"{s}.json.gz", s, eps), episodes=len(eps))
    manifest["version"] = dataset_version({s: v["sha256"] for s, v in manifest["splits"].items()})
    (out / "episodes" / "manifest.json").write_text(json.dumps(manifest))
    return ep, clip["id"]


@pytest.mark.slow  # ~70 s: an in-process run and a graph run (`affectsim bench evolving` measures the same at scale)
def test_an_evolving_episode_is_observed_as_window_streams_in_process_and_through_the_graph(small_data, tmp_path,
                                                                                          monkeypatch):
    import numpy as np
    from helpers import Server

    from affectsim_bridge.content.library import Library
    from affectsim_core.protocol import SETTINGS
    from affectsim_core.record import EpisodeRecord
    from affectsim_eval.scoring.metrics import compute_all
    from affectsim_perception.recognizers import RECOGNIZERS

    data = tmp_path / "data"
    data.mkdir()
    ep, clip_id = _with_an_evolving_episode(small_data[0], data)
    motion = Library(data / "motions").load(clip_id)
    server = Server(responder=_vlm_answer)
    monkeypatch.setenv("AFFECTSIM_VLM_URL", server.url)
    recs = ("majority", "vlm-openai")
    try:
        run_eval(tmp_path / "offline", EvalConfig(ids=(ep.episode_id,), recognizers=recs), workers=1, data=data,
                 log=lambda m: None, allow_dataset_mismatch=True)
        with GraphProcesses("bench", args={"episodes": "0", "episode_ids": ep.episode_id, "recognizers": ",".join(recs),
                                           "output_dir": str(tmp_path / "ros"), "record": "true", **SMALL},
                            extra_params={"bridge": {"motion_library": str(data / "motions")},
                                          "evaluator": {"data_dir": str(data)}}, log_dir=tmp_path / "logs") as g:
            code = _exit_code(g, timeout=600, poll_s=0.5)
    finally:
        server.close()
    assert code == 0, (tmp_path / "logs" / "evaluator.log").read_text()[-3000:]
    off, on = _records(tmp_path / "offline")[ep.episode_id], _records(tmp_path / "ros")[ep.episode_id]
    assert off["status"] == "ok", off
    assert on == off  # the same streams, labels and VAD through the ROS graph
    record = EpisodeRecord.from_dict(off)
    st = record.streams
    assert st.start == 0 and st.times[0] == 0.875 and np.allclose(np.diff(st.times), 0.5)  # 8 frames at 4 Hz, every 0.5 s
    assert st.end >= motion.loop_start / motion.fps + 2.0  # past every transition into the held state
    assert [s.emotion for s in st.segments] == [s.emotion for s in motion.segments]
    assert st.segments[1].start == pytest.approx(motion.segments[1].start, abs=1e-4)  # phase 0: clip time
    assert len(st.vad) == len(st.times) and st.vad[0] == pytest.approx(tuple(motion.frame_vad[26]), abs=1e-5)
    for rec in recs:
        assert set(st.labels[rec]) == set(SETTINGS) and all(len(v) == len(st.times) for v in st.labels[rec].values())
    assert set(st.labels["majority"]["p_init"]) == {record.predictions["majority"]["p_init"]}  # every window labelled
    assert set(st.pred_vad) == set(recs) and {v[1] for v in st.pred_vad["vlm-openai"]["p_ref"]} == {0.2}
    majority_vad = tuple(RECOGNIZERS.create("majority").vad)  # its class's train-split mean, in every window
    assert all(tuple(v) == pytest.approx(majority_vad, abs=1e-6)  # records keep 6 decimals
               for s in SETTINGS for v in st.pred_vad["majority"][s])
    assert all(x is not None for x in st.labels["majority"]["a_obs"])  # A-Obs: the robot's camera from the start
    assert len({x for x in st.labels["vlm-openai"]["a_obs"]}) > 1  # the windows differ
    scores = compute_all([record], ["affect_segments", "affect_transitions", "affect_vad"])
    assert scores["affect_segments"]["majority"]["p_init"]["count_accuracy"] == 0  # one label: no change found
    assert scores["affect_vad"]["vlm-openai"]["a_obs"]["windows"] == len(st.times)
    # the recording holds every recognizer's scores for the A-Obs clip and for every window of its stream
    from mcap_check import read

    preds = read(tmp_path / "ros" / "recordings" / ep.episode_id).messages["/affectsim/recording/predictions"]
    assert len(preds) == len(recs) * (1 + len(st.labels["majority"]["a_obs"])), len(preds)
    window_times = sorted({t for t, _ in preds})[:-1] if len(preds) else []
    assert {p.recognizer for _, p in preds} == set(recs) and len(window_times) >= len(st.times) - 1
