"""Simulator backends, registered by name: ``mujoco`` (default) and ``habitat`` (optional)."""

from __future__ import annotations

from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_core.registry import Registry

BACKENDS: Registry[SimulatorBackend] = Registry("simulator backend")
DEFAULT_BACKEND = "mujoco"


@BACKENDS.register("mujoco")
def _mujoco(**kwargs) -> SimulatorBackend:
    from affectsim_bridge.backends.mujoco_backend import MujocoBackend  # MuJoCo and EGL load only when used

    return MujocoBackend(**kwargs)


@BACKENDS.register("habitat")
def _habitat(**kwargs) -> SimulatorBackend:
    from affectsim_bridge.backends.habitat_backend import create  # optional: habitat-sim

    return create(**kwargs)
