"""Simulator backends, registered by name: ``mujoco`` (default, :mod:`affectsim_bridge.backends.mujoco`) and
``habitat`` (optional), over the one interface of :mod:`~affectsim_bridge.backends.base` (level 2 of
:mod:`affectsim_bridge`; imports ``humans`` and ``world``)."""

from __future__ import annotations

from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_core.registry import Registry

BACKENDS: Registry[SimulatorBackend] = Registry("simulator backend", name_attr="name")
DEFAULT_BACKEND = "mujoco"


@BACKENDS.register("mujoco")
def _mujoco(**kwargs) -> SimulatorBackend:
    from affectsim_bridge.backends.mujoco.mujoco_backend import MujocoBackend  # MuJoCo and EGL load only when used

    return MujocoBackend(**kwargs)


@BACKENDS.register("habitat")
def _habitat(**kwargs) -> SimulatorBackend:
    from affectsim_bridge.backends.habitat_backend import create  # optional: habitat-sim

    return create(**kwargs)
