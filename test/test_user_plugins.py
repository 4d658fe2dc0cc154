"""A user's plugin module, named by $AFFECTSIM_PLUGINS, is registered in the command and in worker processes."""

import json
import os
import subprocess
import sys

from helpers import episode_ids

from affectsim_core.ros.env import loopback_env, pick_domain_id
from affectsim_eval.run.store import ResultsStore

PLUGIN = '''
from affectsim_core.actions import Action
from affectsim_nav.policy import POLICIES, Decision, Policy


@POLICIES.register("spin-test")
class Spin(Policy):
    """Turns left forever: the budget ends the episode."""

    def reset(self, info, planner):
        pass

    def act(self, obs):
        return Decision(Action.TURN_LEFT, stage="search")
'''


def _env(tmp_path, modules: str) -> dict:
    env = loopback_env(pick_domain_id())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    env["AFFECTSIM_PLUGINS"] = modules
    return env


def test_a_plugin_policy_runs_in_worker_processes(small_data, tmp_path):
    data, _ = small_data
    (tmp_path / "user_policies.py").write_text(PLUGIN)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "affectsim_ros.cli", "eval", "--ids", ",".join(episode_ids(data, "action_grounded", 2)),
                           "--policy", "spin-test", "--recognizers", "majority", "--workers", "2", "--max-actions", "6",
                           "--data", str(data), "--out", str(out), "--no-report", "--allow-dataset-mismatch"],
                          env=_env(tmp_path, "user_policies"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with ResultsStore.open(out / "results.sqlite") as store:
        rows = store.records(None)
        assert json.loads(json.dumps(store.meta()))["config"]["policy"] == "spin-test"
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        assert r["a_obs"]["outcome"] == "budget_exhausted" and r["a_obs"]["diagnostics"]["actions"] == 6
        assert r["a_obs"]["fallback"] and r["a_obs"]["path_length"] == 0.0  # it only turned


def test_a_broken_plugin_is_named_and_nothing_runs(tmp_path):
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('not today')\n")
    proc = subprocess.run([sys.executable, "-m", "affectsim_ros.cli", "eval", "--help"],
                          env=_env(tmp_path, "broken_plugin"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "plugin module 'broken_plugin' ($AFFECTSIM_PLUGINS) failed to import: RuntimeError: not today" in proc.stderr
    assert "Traceback" not in proc.stderr
