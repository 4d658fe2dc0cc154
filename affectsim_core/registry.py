"""One registry per plugin kind: raises on duplicate and unknown names."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> factory mapping for one plugin kind (backends, policies, ...).

    A plugin has one name, the one it is registered under. With ``name_attr`` (e.g. ``"name"``) the
    registration also sets that attribute of the factory (a class or function) to the name, so a
    kind whose entries carry their name never spells it twice; a factory that sets the attribute
    itself to another name is refused.
    """

    def __init__(self, kind: str, name_attr: str | None = None) -> None:
        self.kind = kind
        self.name_attr = name_attr
        self._entries: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator registering ``factory`` under ``name``; duplicates raise ``KeyError``."""

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise KeyError(f"{self.kind} {name!r} is already registered")
            if self.name_attr is not None:
                own = getattr(factory, "__dict__", {}).get(self.name_attr)
                if own not in (None, "", name):
                    raise ValueError(f"{self.kind} {name!r}: {factory!r} sets {self.name_attr} = {own!r}; "
                                     f"its name is the one it is registered under")
                setattr(factory, self.name_attr, name)
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

    def registered(self) -> list[str]:
        """The names in the order they were registered (shipped entries first, then plugins')."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
