"""One registry per plugin kind: raises on duplicate and unknown names."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> factory mapping for one plugin kind (backends, policies, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator registering ``factory`` under ``name``; duplicates raise ``KeyError``."""

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise KeyError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = factory
            return factory

        return decorate

    def get(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name``; unknown names raise ``KeyError`` listing the known ones."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise KeyError(f"unknown {self.kind} {name!r}; registered: {known}") from None

    def create(self, name: str, *args, **kwargs) -> T:
        return self.get(name)(*args, **kwargs)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
