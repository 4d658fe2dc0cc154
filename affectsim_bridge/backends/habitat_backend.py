"""Habitat-sim backend, for users who have habitat-sim (conda). Not installable on the default machines.

Selecting it without habitat-sim raises :class:`MissingDependency` with the install hint.
Implementing it means building the scene's geometry as a habitat stage and mapping the
abstract primitives of :class:`SimulatorBackend` onto habitat-sim's sensors.
"""

from __future__ import annotations

from affectsim_bridge.backends.base import SimulatorBackend
from affectsim_core.errors import MissingDependency

try:
    import habitat_sim  # noqa: F401

    _IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - depends on the machine
    _IMPORT_ERROR = exc


def create(**kwargs) -> SimulatorBackend:
    """Factory registered as ``habitat``: raises with the install hint until implemented."""
    if _IMPORT_ERROR is not None:
        raise MissingDependency(
            "habitat", "habitat-sim", "install it with `conda install habitat-sim -c aihabitat -c conda-forge` "
            "(there is no working pip wheel for Python 3.11 on glibc < 2.38); the default backend is 'mujoco'",
        ) from _IMPORT_ERROR
    raise NotImplementedError(
        "habitat-sim is installed, but the habitat backend of AffectSim is not implemented yet; use 'mujoco'"
    )
