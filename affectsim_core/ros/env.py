"""Keep every DDS participant on loopback with a per-run domain id (DESIGN.md section 4).

Every process the project starts gets the Fast DDS profile ``config/fastdds_loopback.xml``: shared
memory, and UDP on 127.0.0.1 only, with unicast discovery to the participants on this host (initial
peers 127.0.0.1, no multicast), so every socket binds 127.0.0.1. ``ROS_AUTOMATIC_DISCOVERY_RANGE``
is removed: with it set (even to LOCALHOST) the RMW opens further sockets on 0.0.0.0 and on the
machine's external address (measured with ``ss``; the test suite checks it).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from affectsim_core.errors import InvalidInput

DOMAIN_MIN, DOMAIN_MAX = 1, 101  # Linux-safe domain ids (ports of 102+ collide with ephemeral ports)
PROFILE_NAME = "fastdds_loopback.xml"
DISCOVERY_RANGE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
RMW = "rmw_fastrtps_cpp"  # the loopback guarantee is the Fast DDS profile's; another RMW ignores it


def fastdds_profile() -> Path:
    """``config/fastdds_loopback.xml`` of the source tree, else of the installed share directory."""
    src = Path(__file__).resolve().parents[2] / "config" / PROFILE_NAME
    if src.is_file():
        return src
    try:
        from ament_index_python.packages import get_package_share_directory  # only in a ROS 2 install

        installed = Path(get_package_share_directory("affectsim")) / "config" / PROFILE_NAME
    except Exception as exc:  # PackageNotFoundError or no ament index: nowhere to look
        raise FileNotFoundError(f"{PROFILE_NAME} not found in the source tree or the ament index; without it DDS "
                                "would listen on every interface") from exc
    if not installed.is_file():
        raise FileNotFoundError(f"{installed} is missing; without it DDS would listen on every interface")
    return installed


def pick_domain_id() -> int:
    """A fresh domain id for one run (random, so concurrent runs on one machine rarely collide)."""
    return random.SystemRandom().randint(DOMAIN_MIN, DOMAIN_MAX)


def loopback_env(domain_id: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a process the project starts: DDS on loopback, given or inherited domain id.
    A ``FASTDDS_DEFAULT_PROFILES_FILE`` already set is kept (a deliberate choice, e.g. on a robot); an
    ``RMW_IMPLEMENTATION`` other than Fast DDS is refused (its own defaults would use every interface)."""
    env = dict(os.environ if base is None else base)
    env.pop(DISCOVERY_RANGE, None)
    if env.setdefault("RMW_IMPLEMENTATION", RMW) != RMW:
        raise InvalidInput("RMW_IMPLEMENTATION", env["RMW_IMPLEMENTATION"], f"{RMW} (or unset): the project keeps "
                           f"DDS on 127.0.0.1 with a Fast DDS profile, which another RMW would ignore")
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    elif "ROS_DOMAIN_ID" not in env:
        env["ROS_DOMAIN_ID"] = str(pick_domain_id())
    env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(fastdds_profile()))
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", env["MUJOCO_GL"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def ensure_loopback(domain_id: int | None = None) -> int:
    """Apply :func:`loopback_env` to this process (call before ``rclpy.init``); returns the domain id."""
    env = loopback_env(domain_id)
    os.environ.pop(DISCOVERY_RANGE, None)
    os.environ.update(env)
    return int(os.environ["ROS_DOMAIN_ID"])
