"""Test environment: DDS on loopback with a fresh domain id per session, headless EGL rendering, and the
users' plugins (entry points, ``$AFFECTSIM_PLUGINS``) registered before the tests are collected, so the
conformance tests over every registry entry cover them (docs/extending.md)."""

from __future__ import annotations

import os

import pytest

from affectsim_core.plugins import load_plugins
from affectsim_core.ros.env import ensure_loopback, pick_domain_id

os.environ.setdefault("ROS_DOMAIN_ID", str(pick_domain_id()))  # the user's choice, else a fresh one per session
ensure_loopback()
load_plugins()


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """A small data directory built like the real one: motions/, scenes/ (4) and episodes/ (scale
    0.004: 16 test episodes); (root, dataset build report). Read-only for tests."""
    from affectsim_bridge.content.library import build
    from affectsim_bridge.content.scene_generator import build_scenes
    from affectsim_eval.dataset.build import build_dataset

    root = tmp_path_factory.mktemp("data")
    build(root / "motions", seed=0, log=lambda s: None, ag_performers=12, ag_takes=1, oc_performances=40,
          oc_performers=4, dyadic=10, ev_performers=3, ev_clips=4)
    build_scenes(root / "scenes", count=4, log=lambda s: None)
    manifest = build_dataset(root / "episodes", scale=0.004, motions=root / "motions", scenes_dir=root / "scenes",
                             log=lambda s: None)
    return root, manifest
