"""Errors raised on bad input; messages name the field, the value and what was expected."""

from __future__ import annotations

from typing import Any


class AffectSimError(Exception):
    """Base class for every error the project raises on purpose."""


MAX_SHOWN = 200  # characters of a bad value quoted in an error message


class InvalidInput(AffectSimError, ValueError):
    """A value given by a user or a peer is not acceptable."""

    def __init__(self, field: str, value: Any, expected: str, where: str = "") -> None:
        self.field = field
        self.value = value
        self.expected = expected
        self.where = where
        prefix = f"{where}: " if where else ""
        shown = repr(value)
        if len(shown) > MAX_SHOWN:  # a 1 MB name must not become a 1 MB message
            shown = f"{shown[:MAX_SHOWN]}... ({len(shown)} characters)"
        super().__init__(f"{prefix}{field}={shown} is invalid; expected {expected}")

    def __reduce__(self):  # crosses process boundaries (worker pools) intact
        return (type(self), (self.field, self.value, self.expected, self.where))


class MissingDependency(AffectSimError, ImportError):
    """An optional dependency needed by a plugin is not installed."""

    def __init__(self, plugin: str, package: str, how: str) -> None:
        self.args_ = (plugin, package, how)
        super().__init__(f"plugin {plugin!r} needs {package}, which is not installed; {how}")

    def __reduce__(self):
        return (type(self), self.args_)
