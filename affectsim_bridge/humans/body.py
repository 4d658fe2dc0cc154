"""A performer's body: height, build and appearance, and the avatar geometry they imply.

Geometry is a list of primitive geoms per skeleton joint (capsules, ellipsoids,
spheres, boxes) whose sizes follow height and build. The MJCF builder creates the
geoms once per person slot; the backend rewrites their sizes, positions and colours
at run time for each performer, so changing performer needs no recompilation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from affectsim_bridge.humans.skeleton import JOINTS

SKIN = [(0.98, 0.84, 0.74), (0.92, 0.73, 0.60), (0.80, 0.60, 0.45), (0.62, 0.44, 0.32), (0.45, 0.31, 0.22),
        (0.33, 0.22, 0.16)]
TOPS = [(0.78, 0.16, 0.16), (0.16, 0.36, 0.72), (0.22, 0.58, 0.32), (0.88, 0.72, 0.22), (0.48, 0.26, 0.58),
        (0.92, 0.92, 0.92), (0.18, 0.18, 0.20), (0.92, 0.48, 0.16), (0.30, 0.62, 0.70), (0.85, 0.55, 0.65)]
BOTTOMS = [(0.14, 0.18, 0.34), (0.30, 0.30, 0.33), (0.42, 0.34, 0.24), (0.10, 0.10, 0.11), (0.55, 0.50, 0.40)]
HAIR = [(0.08, 0.06, 0.05), (0.30, 0.19, 0.10), (0.72, 0.58, 0.34), (0.55, 0.55, 0.55), (0.55, 0.25, 0.10)]
SHOES = [(0.08, 0.08, 0.08), (0.90, 0.90, 0.90), (0.40, 0.25, 0.15)]
HAIR_STYLES = ("short", "long", "bun", "cropped")


@dataclass(frozen=True)
class BodyShape:
    """Performer body: ``height`` (m, 1.5..1.95), ``build`` (girth factor 0.85..1.25), appearance choices."""

    height: float = 1.72
    build: float = 1.0
    skin: int = 1
    top: int = 0
    bottom: int = 0
    hair: int = 0
    hair_style: str = "short"
    shoes: int = 0
    long_sleeves: bool = False

    @staticmethod
    def random(rng: np.random.Generator) -> "BodyShape":
        return BodyShape(
            height=float(np.clip(rng.normal(1.71, 0.09), 1.52, 1.93)), build=float(rng.uniform(0.88, 1.2)),
            skin=int(rng.integers(len(SKIN))), top=int(rng.integers(len(TOPS))), bottom=int(rng.integers(len(BOTTOMS))),
            hair=int(rng.integers(len(HAIR))), hair_style=HAIR_STYLES[int(rng.integers(len(HAIR_STYLES)))],
            shoes=int(rng.integers(len(SHOES))), long_sleeves=bool(rng.random() < 0.5),
        )

    def validate(self) -> "BodyShape":
        if not 1.45 <= self.height <= 2.0:
            raise ValueError(f"body.height={self.height!r} is invalid; expected metres in [1.45, 2.0]")
        if not 0.8 <= self.build <= 1.3:
            raise ValueError(f"body.build={self.build!r} is invalid; expected a girth factor in [0.8, 1.3]")
        if self.hair_style not in HAIR_STYLES:
            raise ValueError(f"body.hair_style={self.hair_style!r} is invalid; expected one of {HAIR_STYLES}")
        return self

    def joint_offsets(self) -> dict[str, np.ndarray]:
        """Joint offsets in metres; shoulders and hips widen slightly with build."""
        out = {}
        for j in JOINTS:
            off = np.asarray(j.offset) * self.height
            if j.name.startswith(("shoulder_", "hip_")):
                off[1] *= 0.85 + 0.15 * self.build
            out[j.name] = off
        return out

    def colors(self) -> dict[str, tuple[float, float, float]]:
        return {"skin": SKIN[self.skin % len(SKIN)], "top": TOPS[self.top % len(TOPS)],
                "bottom": BOTTOMS[self.bottom % len(BOTTOMS)], "hair": HAIR[self.hair % len(HAIR)],
                "shoes": SHOES[self.shoes % len(SHOES)], "eye": (0.06, 0.05, 0.05), "lip": (0.62, 0.32, 0.30)}


@dataclass(frozen=True)
class GeomSpec:
    """One avatar geom in its joint's body frame: MuJoCo type, position, quaternion, size, colour role."""

    name: str
    body: str
    type: str
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    size: tuple[float, float, float]
    role: str  # key of BodyShape.colors(), or "hidden"


_DOWN = (1.0, 0.0, 0.0, 0.0)  # capsules along local z
_ACROSS = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)  # capsule along local y


def geom_layout(shape: BodyShape) -> list[GeomSpec]:
    """Every geom of the avatar for ``shape``; same names, types and order for every shape."""
    H, b = shape.height, shape.build
    off = shape.joint_offsets()
    g: list[GeomSpec] = []

    def add(name, body, typ, pos, size, role, quat=_DOWN):
        g.append(GeomSpec(name, body, typ, tuple(float(v) for v in pos), quat, tuple(float(v) for v in size), role))

    sleeve = "top" if shape.long_sleeves else "skin"
    hw = abs(off["hip_l"][1])
    add("pelvis", "pelvis", "capsule", (0, 0, -0.01 * H), (0.062 * H * b, hw, 0), "bottom", _ACROSS)
    add("abdomen", "spine_lower", "ellipsoid", (0, 0, 0.07 * H), (0.065 * H * b, 0.095 * H * b, 0.085 * H), "top")
    add("chest", "spine_upper", "ellipsoid", (0, 0, 0.05 * H), (0.07 * H * b, 0.105 * H * b, 0.085 * H), "top")
    sw = abs(off["shoulder_l"][1])
    add("shoulders", "spine_upper", "capsule", (0, 0, 0.09 * H), (0.032 * H * b, sw, 0), "top", _ACROSS)
    add("neck", "neck", "capsule", (0, 0, 0.025 * H), (0.027 * H * b, 0.025 * H, 0), "skin")
    add("head", "head", "ellipsoid", (0.005 * H, 0, 0.058 * H), (0.056 * H, 0.047 * H, 0.066 * H), "skin")
    add("nose", "head", "sphere", (0.058 * H, 0, 0.050 * H), (0.009 * H, 0, 0), "skin")
    for s, sign in (("l", 1), ("r", -1)):
        add(f"eye_{s}", "head", "sphere", (0.050 * H, sign * 0.018 * H, 0.066 * H), (0.0055 * H, 0, 0), "eye")
        add(f"ear_{s}", "head", "sphere", (0.0, sign * 0.046 * H, 0.058 * H), (0.009 * H, 0, 0), "skin")
    add("mouth", "head", "ellipsoid", (0.050 * H, 0, 0.030 * H), (0.004 * H, 0.012 * H, 0.003 * H), "lip")
    styles = {  # hair: (pos, size) per style; unused styles are hidden
        "short": ((-0.006 * H, 0, 0.076 * H), (0.054 * H, 0.049 * H, 0.052 * H)),
        "long": ((-0.016 * H, 0, 0.050 * H), (0.052 * H, 0.052 * H, 0.080 * H)),
        "bun": ((-0.004 * H, 0, 0.078 * H), (0.054 * H, 0.049 * H, 0.050 * H)),
        "cropped": ((-0.004 * H, 0, 0.082 * H), (0.050 * H, 0.046 * H, 0.042 * H)),
    }
    for style, (pos, size) in styles.items():
        add(f"hair_{style}", "head", "ellipsoid", pos, size, "hair" if style == shape.hair_style else "hidden")
    bun = shape.hair_style == "bun"
    add("hair_knot", "head", "sphere", (-0.058 * H, 0, 0.10 * H), (0.022 * H, 0, 0), "hair" if bun else "hidden")
    for s in ("l", "r"):
        ua, fa = 0.186 * H, 0.146 * H
        add(f"upper_arm_{s}", f"shoulder_{s}", "capsule", (0, 0, -ua / 2), (0.026 * H * b, ua / 2 - 0.01 * H, 0), "top")
        add(f"forearm_{s}", f"elbow_{s}", "capsule", (0, 0, -fa / 2), (0.021 * H * b, fa / 2, 0), sleeve)
        add(f"hand_{s}", f"wrist_{s}", "ellipsoid", (0, 0, -0.045 * H), (0.017 * H, 0.030 * H, 0.048 * H), "skin")
        th, sh = 0.245 * H, 0.246 * H
        add(f"thigh_{s}", f"hip_{s}", "capsule", (0, 0, -th / 2), (0.040 * H * b, th / 2 - 0.01 * H, 0), "bottom")
        add(f"shin_{s}", f"knee_{s}", "capsule", (0, 0, -sh / 2), (0.030 * H * b, sh / 2 - 0.01 * H, 0), "bottom")
        add(f"foot_{s}", f"ankle_{s}", "box", (0.035 * H, 0, -0.025 * H), (0.075 * H, 0.024 * H, 0.016 * H), "shoes")
    return g
