"""Keep every DDS participant on loopback with a per-run domain id (DESIGN.md section 4)."""

from __future__ import annotations

import os
import random
from pathlib import Path

DOMAIN_MIN, DOMAIN_MAX = 1, 101  # Linux-safe domain ids (ports of 102+ collide with ephemeral ports)
FASTDDS_PROFILE = Path(__file__).resolve().parents[2] / "config" / "fastdds_loopback.xml"


def pick_domain_id() -> int:
    """A fresh domain id for one run (random, so concurrent runs on one machine rarely collide)."""
    return random.SystemRandom().randint(DOMAIN_MIN, DOMAIN_MAX)


def loopback_env(domain_id: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a process the project starts: DDS on loopback, given or inherited domain id."""
    env = dict(os.environ if base is None else base)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    elif "ROS_DOMAIN_ID" not in env:
        env["ROS_DOMAIN_ID"] = str(pick_domain_id())
    if FASTDDS_PROFILE.is_file():  # large shared-memory segments, UDP only on 127.0.0.1
        env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(FASTDDS_PROFILE))
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", env["MUJOCO_GL"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def ensure_loopback(domain_id: int | None = None) -> int:
    """Apply :func:`loopback_env` to this process (call before ``rclpy.init``); returns the domain id."""
    os.environ.update(loopback_env(domain_id))
    return int(os.environ["ROS_DOMAIN_ID"])
