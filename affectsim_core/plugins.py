"""Users' plugins: modules that register backends, policies, person detectors, recognizers or metrics.

A plugin module registers its entries on import (``@POLICIES.register("my_policy")``, ...). It is
found in two ways: the entry-point group :data:`ENTRY_POINT_GROUP` of any installed package
(``[project.entry-points."affectsim.plugins"] mine = "my_package.policies"``), or the environment
variable :data:`ENV` (comma-separated module names, e.g. ``AFFECTSIM_PLUGINS=my_policies``).
:func:`load_plugins` imports each once; every process that creates plugins calls it (the node
executables, the ``affectsim`` command, the in-process evaluation workers), and child processes
inherit the environment variable.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points

from affectsim_core.errors import AffectSimError

ENTRY_POINT_GROUP = "affectsim.plugins"
ENV = "AFFECTSIM_PLUGINS"
_LOADED: dict[str, str] = {}  # module name -> where it was named


def plugin_modules() -> dict[str, str]:
    """Module name -> where it is named (an entry point or the environment variable)."""
    out = {ep.value.split(":")[0]: f"entry point {ep.name!r} of {ENTRY_POINT_GROUP}"
           for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for name in (m.strip() for m in os.environ.get(ENV, "").split(",")):
        if name:
            out.setdefault(name, f"${ENV}")
    return out


def load_plugins() -> list[str]:
    """Import every plugin module not imported yet; returns the names of all loaded plugin modules.
    A module that fails to import raises :class:`AffectSimError` naming it, where it was named and why."""
    for name, where in plugin_modules().items():
        if name in _LOADED:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure of a user's module is reported the same way
            raise AffectSimError(f"plugin module {name!r} ({where}) failed to import: "
                                 f"{type(exc).__name__}: {exc}") from exc
        _LOADED[name] = where
    return sorted(_LOADED)
