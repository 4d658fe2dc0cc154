"""Test environment: DDS on loopback with a fresh domain id per session, headless EGL rendering."""

from __future__ import annotations

import os

from affectsim_ros.ros.env import ensure_loopback, pick_domain_id

os.environ["ROS_DOMAIN_ID"] = str(pick_domain_id())
ensure_loopback()
