"""Test environment: DDS on loopback with a fresh domain id per session, headless EGL rendering, and the
users' plugins (entry points, ``$AFFECTSIM_PLUGINS``) registered before the tests are collected, so the
conformance tests over every registry entry cover them (docs/extending.md)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

from affectsim_core.plugins import load_plugins
from affectsim_core.ros.env import ensure_loopback, pick_domain_id

os.environ.setdefault("ROS_DOMAIN_ID", str(pick_domain_id()))  # the user's choice, else a fresh one per session
ensure_loopback()
load_plugins()


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """A small data directory built like the real one: motions/, scenes/ (4) and episodes/ (scale
    0.004: 16 test episodes); (root, dataset manifest). Read-only for tests. Built once a run: the
    pytest-xdist workers of `make test` share it, the first to ask builds it (~30 s) under a lock."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.mktemp("data")
        _build_small_data(root)
        return root, json.loads((root / "episodes" / "manifest.json").read_text())
    shared = tmp_path_factory.getbasetemp().parent  # this run's directory, above each worker's own
    root = shared / "small_data"
    with open(shared / "small_data.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if the worker dies
        if not root.is_dir():
            part = shared / "small_data.part"
            shutil.rmtree(part, ignore_errors=True)  # a worker killed while building
            _build_small_data(part)
            part.rename(root)
    return root, json.loads((root / "episodes" / "manifest.json").read_text())


def _build_small_data(root: Path) -> None:
    from affectsim_bridge.content.library import build
    from affectsim_bridge.content.scene_generator import build_scenes
    from affectsim_eval.dataset.build import build_dataset

    build(root / "motions", seed=0, log=lambda s: None, ag_performers=12, ag_takes=1, oc_performances=40,
          oc_performers=4, dyadic=10, ev_performers=3, ev_clips=4)
    build_scenes(root / "scenes", count=4, log=lambda s: None)
    build_dataset(root / "episodes", scale=0.004, motions=root / "motions", scenes_dir=root / "scenes",
                  log=lambda s: None)
