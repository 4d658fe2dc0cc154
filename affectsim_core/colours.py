"""Colour names for clothing descriptions (what a person would say: "red top, navy trousers")."""

from __future__ import annotations

# reference linear-RGB colours in [0, 1]; the achromatic names are decided by thresholds first
COLOURS: dict[str, tuple[float, float, float]] = {
    "black": (0.1, 0.1, 0.1), "white": (0.92, 0.92, 0.92), "grey": (0.3, 0.3, 0.33),
    "red": (0.8, 0.15, 0.15), "blue": (0.2, 0.35, 0.75), "green": (0.25, 0.55, 0.3),
    "yellow": (0.88, 0.72, 0.22), "purple": (0.48, 0.26, 0.58), "orange": (0.92, 0.48, 0.16),
    "teal": (0.3, 0.62, 0.7), "pink": (0.85, 0.55, 0.65), "navy": (0.14, 0.18, 0.34),
    "brown": (0.42, 0.34, 0.24), "beige": (0.55, 0.5, 0.4),
}
_ACHROMATIC = ("black", "white", "grey")


def colour_name(rgb: tuple[float, float, float]) -> str:
    """The closest colour name for an RGB triple in [0, 1]."""
    if max(rgb) < 0.25:
        return "black"
    if min(rgb) > 0.85:
        return "white"
    if max(rgb) - min(rgb) < 0.08:
        return "grey"
    chromatic = {k: v for k, v in COLOURS.items() if k not in _ACHROMATIC}
    return min(chromatic, key=lambda k: sum((a - c) ** 2 for a, c in zip(rgb, chromatic[k])))
