"""Simulator backends, registered by name: ``mujoco`` (default) and ``habitat`` (optional)."""

from __future__ import annotations

from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_ros.core.registry import Registry

BACKENDS: Registry[SimulatorBackend] = Registry("simulator backend")


@BACKENDS.register("mujoco")
def _mujoco(**kwargs) -> SimulatorBackend:
    from affectsim_bridge.backends.mujoco_backend import MujocoBackend

    return MujocoBackend(**kwargs)


@BACKENDS.register("habitat")
def _habitat(**kwargs) -> SimulatorBackend:
    from affectsim_bridge.backends.habitat_backend import create

    return create(**kwargs)


def create_backend(name: str, **kwargs) -> SimulatorBackend:
    """Instantiate the backend registered as ``name``; unknown names raise ``KeyError``."""
    return BACKENDS.create(name, **kwargs)
