"""Scene format (``affectsim-scene/1``): rooms, walls with openings and doors, furniture, cameras.

A scene is a YAML (or JSON) file; every length is in metres, every angle in degrees
in the file and in radians in memory, and every coordinate in the ``map`` frame
(x east, y north, z up, floor at z = 0). See ``docs/scene_format.md``.

The same :class:`Scene` feeds the renderer (MJCF builder) and navigable space, so
what the robot sees and where it can drive come from one description.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from affectsim_core.errors import InvalidInput
from affectsim_core.names import check_name
from affectsim_core.readers import read_json, read_yaml

FORMAT = "affectsim-scene/1"
# Limits of a scene document, checked before anything is built (the 57 generated scenes: at most 6 rooms,
# 9 walls, 32 pieces of furniture, 13.5 m across)
MAX_FILE_BYTES = 2 * 2 ** 20
MAX_EXTENT_M = 50.0
MAX_ROOMS, MAX_WALLS, MAX_FURNITURE, MAX_POLYGON = 64, 512, 512, 64
BUILTIN_DIR = Path(__file__).resolve().parents[1] / "scenes"

FURNITURE_TYPES = ("chair", "sofa", "bench", "bed", "table", "shelf", "cabinet", "plant", "partition")
SEAT_TYPES = {"chair": 0.46, "sofa": 0.42, "bench": 0.45, "bed": 0.5}  # default seat height (m)


@dataclass(frozen=True)
class Material:
    name: str
    rgba: tuple[float, float, float, float]
    texture: str = "none"  # none | checker | grid (MuJoCo builtin textures)
    rgba2: tuple[float, float, float, float] | None = None


@dataclass(frozen=True)
class Rect:
    """Oriented rectangle on the floor: centre (x, y), half extents (hx along local x, hy), yaw (rad)."""

    cx: float
    cy: float
    hx: float
    hy: float
    yaw: float

    def corners(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        local = np.array([[-self.hx, -self.hy], [self.hx, -self.hy], [self.hx, self.hy], [-self.hx, self.hy]])
        return local @ np.array([[c, s], [-s, c]]) + np.array([self.cx, self.cy])


@dataclass(frozen=True)
class Door:
    """A hinged door panel in a wall opening. ``open_deg`` 0 = closed (panel in the wall plane)."""

    id: str
    hinge: str  # "start" or "end": which jamb of the opening carries the hinge
    open_deg: float
    swing: int  # +1 swings to the wall's left side (seen from start to end), -1 to the right
    thickness: float
    material: str


@dataclass(frozen=True)
class Opening:
    """A gap in a wall: ``center`` metres from the wall start, ``width``, ``height`` (m)."""

    center: float
    width: float
    height: float
    door: Door | None


@dataclass(frozen=True)
class Wall:
    start: tuple[float, float]
    end: tuple[float, float]
    thickness: float
    height: float
    material: str
    openings: tuple[Opening, ...]

    @property
    def length(self) -> float:
        return math.dist(self.start, self.end)

    @property
    def direction(self) -> np.ndarray:
        d = np.subtract(self.end, self.start)
        return d / np.linalg.norm(d)

    def solid_segments(self) -> list[tuple[float, float]]:
        """Intervals [a, b] along the wall (metres from start) that are solid from floor up.

        The ends extend by half the thickness so that walls meeting at a corner close it.
        """
        cuts = sorted((o.center - o.width / 2, o.center + o.width / 2) for o in self.openings)
        half = self.thickness / 2
        segs, pos = [], -half
        for a, b in cuts:
            if a > pos:
                segs.append((pos, a))
            pos = max(pos, b)
        if pos < self.length + half:
            segs.append((pos, self.length + half))
        return segs

    def rect(self, a: float, b: float) -> Rect:
        """Footprint of the wall piece between ``a`` and ``b`` metres from the start."""
        d = self.direction
        mid = np.asarray(self.start) + d * (a + b) / 2
        return Rect(float(mid[0]), float(mid[1]), (b - a) / 2, self.thickness / 2, math.atan2(d[1], d[0]))


@dataclass(frozen=True)
class DoorPanel:
    """Resolved door geometry: the panel footprint and the closed-door plane."""

    id: str
    footprint: Rect
    height: float
    hinge_xy: tuple[float, float]
    width: float
    closed_normal: tuple[float, float]  # unit normal of the wall plane (points to the wall's left)
    open_deg: float
    material: str


@dataclass(frozen=True)
class Furniture:
    id: str
    type: str
    x: float
    y: float
    yaw: float
    size: tuple[float, float, float]  # length (local x), depth (local y), height (m)
    material: str
    seat_height: float | None  # for seat types; the sitting side faces local +y

    @property
    def footprint(self) -> Rect:
        return Rect(self.x, self.y, self.size[0] / 2, self.size[1] / 2, self.yaw)


@dataclass(frozen=True)
class Support:
    """A surface a person can sit on: centre (map, m), height (m), facing yaw (rad) of a seated person."""

    furniture_id: str
    kind: str
    x: float
    y: float
    height: float
    facing_yaw: float
    half_length: float


@dataclass(frozen=True)
class MonitorCamera:
    """Room-level fixed camera (P-Mon): position and look-at point in ``map`` (m), vertical FOV (rad)."""

    position: tuple[float, float, float]
    look_at: tuple[float, float, float]
    vfov: float


@dataclass(frozen=True)
class Room:
    id: str
    type: str
    polygon: tuple[tuple[float, float], ...]
    floor_material: str
    monitor: MonitorCamera | None

    def contains(self, xy: np.ndarray) -> np.ndarray:
        """Crossing-number point-in-polygon for an (N, 2) array (half-open on shared edges)."""
        pts = np.atleast_2d(xy)
        poly = np.asarray(self.polygon)
        inside = np.zeros(len(pts), bool)
        x, y = pts[:, 0], pts[:, 1]
        for (x1, y1), (x2, y2) in zip(poly, np.roll(poly, -1, axis=0)):
            crosses = (y1 > y) != (y2 > y)
            with np.errstate(divide="ignore", invalid="ignore"):
                xint = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
            inside ^= crosses & (x < xint)
        return inside

    @property
    def centroid(self) -> tuple[float, float]:
        poly = np.asarray(self.polygon)
        return float(poly[:, 0].mean()), float(poly[:, 1].mean())


@dataclass(frozen=True)
class Scene:
    """A parsed, validated scene. Build one with :func:`load_scene` or :func:`parse_scene`."""

    id: str
    name: str
    source: str
    wall_height: float
    materials: dict[str, Material]
    rooms: tuple[Room, ...]
    walls: tuple[Wall, ...]
    furniture: tuple[Furniture, ...]
    lights: tuple[tuple[float, float, float], ...]
    meta: dict[str, Any] = field(default_factory=dict)

    # -- derived geometry, shared by the renderer and navigable space --
    def doors(self) -> list[DoorPanel]:
        panels = []
        for wall in self.walls:
            d = wall.direction
            n = np.array([-d[1], d[0]])
            for o in wall.openings:
                if o.door is None:
                    continue
                door = o.door
                a = o.center - o.width / 2 if door.hinge == "start" else o.center + o.width / 2
                hinge = np.asarray(wall.start) + d * a
                along = d if door.hinge == "start" else -d  # closed panel direction from hinge
                ang = math.radians(door.open_deg) * door.swing * (1 if door.hinge == "start" else -1)
                c, s = math.cos(ang), math.sin(ang)
                pdir = np.array([c * along[0] - s * along[1], s * along[0] + c * along[1]])
                mid = hinge + pdir * o.width / 2
                fp = Rect(float(mid[0]), float(mid[1]), o.width / 2, door.thickness / 2, math.atan2(pdir[1], pdir[0]))
                panels.append(
                    DoorPanel(
                        door.id, fp, o.height, (float(hinge[0]), float(hinge[1])), o.width,
                        (float(n[0]), float(n[1])), door.open_deg, door.material,
                    )
                )
        return panels

    def obstacles(self) -> list[tuple[str, Rect]]:
        """Every footprint that blocks the robot base: (id, rect) for walls, door panels, furniture."""
        out: list[tuple[str, Rect]] = []
        for i, wall in enumerate(self.walls):
            for j, (a, b) in enumerate(wall.solid_segments()):
                out.append((f"wall{i}.{j}", wall.rect(a, b)))
        out += [(f"door:{p.id}", p.footprint) for p in self.doors()]
        out += [(f"furniture:{f.id}", f.footprint) for f in self.furniture]
        return out

    def supports(self) -> list[Support]:
        sups = []
        for f in self.furniture:
            if f.seat_height is None:
                continue
            # the usable seat sits in the front part of the depth for sofas/chairs, centre for beds/benches
            offset = 0.0 if f.type in ("bed", "bench") else f.size[1] * 0.1
            cx = f.x - math.sin(f.yaw) * offset
            cy = f.y + math.cos(f.yaw) * offset
            sups.append(Support(f.id, f.type, cx, cy, f.seat_height, f.yaw + math.pi / 2, f.size[0] / 2))
        return sups

    def room_at(self, xy: tuple[float, float]) -> Room | None:
        for room in self.rooms:
            if room.contains(np.asarray([xy]))[0]:
                return room
        return None

    def bounds(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) of all rooms and walls (m)."""
        pts = [np.asarray(r.polygon) for r in self.rooms] + [np.asarray([w.start, w.end]) for w in self.walls]
        allp = np.concatenate(pts)
        return float(allp[:, 0].min()), float(allp[:, 1].min()), float(allp[:, 0].max()), float(allp[:, 1].max())


# ----------------------------------------------------------------------------- parsing


class _Reader:
    """Typed accessors that raise :class:`InvalidInput` naming the file and field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, value: Any, expected: str) -> InvalidInput:
        return InvalidInput(path, value, expected, where=self.source)

    def get(self, d: dict, key: str, path: str, default: Any = ..., kind: type | tuple = object) -> Any:
        if not isinstance(d, dict):
            raise self.fail(path, d, "a mapping")
        if key not in d:
            if default is ...:
                raise self.fail(f"{path}.{key}", None, "a value (field is required)")
            return default
        v = d[key]
        if kind is not object and not isinstance(v, kind):
            raise self.fail(f"{path}.{key}", v, f"a {getattr(kind, '__name__', kind)}")
        return v

    def num(self, d: dict, key: str, path: str, default: Any = ..., lo: float = -math.inf, hi: float = math.inf) -> float:
        v = self.get(d, key, path, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
            raise self.fail(f"{path}.{key}", v, f"a finite number in [{lo}, {hi}]")
        return float(v)

    def vec(self, d: dict, key: str, path: str, n: int, default: Any = ...) -> tuple[float, ...]:
        v = self.get(d, key, path, default)
        ok = isinstance(v, (list, tuple)) and len(v) == n
        ok = ok and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
        if not ok:
            raise self.fail(f"{path}.{key}", v, f"a list of {n} finite numbers")
        return tuple(float(x) for x in v)


def parse_scene(data: Any, source: str = "<scene>") -> Scene:
    """Validate a decoded scene document and build a :class:`Scene`; raises :class:`InvalidInput`."""
    r = _Reader(source)
    if not isinstance(data, dict):
        raise r.fail("<document>", type(data).__name__, "a mapping at the top level")
    fmt = r.get(data, "format", "")
    if fmt != FORMAT:
        raise r.fail("format", fmt, f"{FORMAT!r}")
    sid = check_name("id", r.get(data, "id", "", kind=str), source)
    for key, most in (("rooms", MAX_ROOMS), ("walls", MAX_WALLS), ("furniture", MAX_FURNITURE)):
        if isinstance(data.get(key), list) and len(data[key]) > most:
            raise r.fail(key, f"{len(data[key])} entries", f"at most {most}")
    wall_h = r.num(data, "wall_height", "", 2.6, 1.8, 6.0)
    wall_t = r.num(data, "wall_thickness", "", 0.1, 0.02, 1.0)

    materials: dict[str, Material] = {}
    for name, m in (r.get(data, "materials", "", kind=dict)).items():
        p = f"materials.{name}"
        tex = r.get(m, "texture", p, "none")
        if tex not in ("none", "checker", "grid"):
            raise r.fail(f"{p}.texture", tex, "one of none, checker, grid")
        rgba2 = r.vec(m, "rgba2", p, 4) if "rgba2" in m else None
        materials[name] = Material(name, r.vec(m, "rgba", p, 4), tex, rgba2)

    def material(d: dict, p: str, default: Any = ..., key: str = "material") -> str:
        name = r.get(d, key, p, default)
        if name not in materials:
            raise r.fail(f"{p}.{key}", name, f"one of the scene's materials ({', '.join(sorted(materials))})")
        return name

    rooms = []
    for i, rd in enumerate(r.get(data, "rooms", "", kind=list)):
        p = f"rooms[{i}]"
        poly = r.get(rd, "polygon", p, kind=list)
        if not 3 <= len(poly) <= MAX_POLYGON:
            raise r.fail(f"{p}.polygon", f"{len(poly)} vertices", f"3 to {MAX_POLYGON} [x, y] vertices")
        verts = tuple(r.vec({"v": v}, "v", f"{p}.polygon[{k}]", 2) for k, v in enumerate(poly))
        mon = None
        if "monitor_camera" in rd:
            mp = f"{p}.monitor_camera"
            md = rd["monitor_camera"]
            mon = MonitorCamera(
                r.vec(md, "position", mp, 3), r.vec(md, "look_at", mp, 3),
                math.radians(r.num(md, "vfov_deg", mp, 60.0, 10.0, 150.0)),
            )
        rooms.append(Room(r.get(rd, "id", p, kind=str), r.get(rd, "type", p, "room", kind=str), verts,
                          material(rd, p, "floor", key="floor_material"), mon))
    if not rooms:
        raise r.fail("rooms", [], "at least one room")
    _unique(r, [rm.id for rm in rooms], "rooms[].id")

    walls = []
    door_ids = []
    for i, wd in enumerate(r.get(data, "walls", "", kind=list)):
        p = f"walls[{i}]"
        start, end = r.vec(wd, "from", p, 2), r.vec(wd, "to", p, 2)
        length = math.dist(start, end)
        if length < 0.05:
            raise r.fail(f"{p}.to", list(end), "a point at least 0.05 m from 'from'")
        thick = r.num(wd, "thickness", p, wall_t, 0.02, 1.0)
        openings = []
        for k, od in enumerate(r.get(wd, "openings", p, [], kind=list)):
            op = f"{p}.openings[{k}]"
            width = r.num(od, "width", op, lo=0.3, hi=length)
            center = r.num(od, "center", op, lo=width / 2, hi=length - width / 2)
            height = r.num(od, "height", op, 2.05, 1.0, wall_h)
            door = None
            if "door" in od:
                dp = f"{op}.door"
                dd = od["door"]
                hinge = r.get(dd, "hinge", dp, "start")
                if hinge not in ("start", "end"):
                    raise r.fail(f"{dp}.hinge", hinge, "'start' or 'end'")
                swing = r.get(dd, "swing", dp, "left")
                if swing not in ("left", "right"):
                    raise r.fail(f"{dp}.swing", swing, "'left' or 'right'")
                door = Door(r.get(dd, "id", dp, kind=str), hinge, r.num(dd, "open_deg", dp, 0.0, 0.0, 110.0),
                            1 if swing == "left" else -1, r.num(dd, "thickness", dp, 0.04, 0.01, 0.1),
                            material(dd, dp, "door"))
                door_ids.append(door.id)
            openings.append(Opening(center, width, height, door))
        spans = sorted((o.center - o.width / 2, o.center + o.width / 2) for o in openings)
        for (a0, b0), (a1, b1) in zip(spans, spans[1:]):
            if a1 < b0:
                raise r.fail(f"{p}.openings", [list(s) for s in spans], "non-overlapping openings")
        walls.append(Wall(start, end, thick, r.num(wd, "height", p, wall_h, 0.3, 6.0), material(wd, p, "wall"),
                          tuple(openings)))
    _unique(r, door_ids, "walls[].openings[].door.id")

    furniture = []
    for i, fd in enumerate(r.get(data, "furniture", "", [], kind=list)):
        p = f"furniture[{i}]"
        ftype = r.get(fd, "type", p, kind=str)
        if ftype not in FURNITURE_TYPES:
            raise r.fail(f"{p}.type", ftype, f"one of {', '.join(FURNITURE_TYPES)}")
        pos = r.vec(fd, "position", p, 2)
        size = r.vec(fd, "size", p, 3)
        if min(size) <= 0.01 or max(size) > 6.0:
            raise r.fail(f"{p}.size", list(size), "[length, depth, height] each in (0.01, 6] m")
        seat = None
        if ftype in SEAT_TYPES:
            seat = r.num(fd, "seat_height", p, SEAT_TYPES[ftype], 0.2, min(0.9, size[2]))
        furniture.append(Furniture(r.get(fd, "id", p, kind=str), ftype, pos[0], pos[1],
                                   math.radians(r.num(fd, "yaw_deg", p, 0.0)), size, material(fd, p, ftype), seat))
    _unique(r, [f.id for f in furniture], "furniture[].id")
    xy = np.array([v for rm in rooms for v in rm.polygon] + [pt for w in walls for pt in (w.start, w.end)]
                  + [(f.x, f.y) for f in furniture])
    extent = xy.max(axis=0) - xy.min(axis=0)
    if extent.max() > MAX_EXTENT_M:
        raise r.fail("rooms, walls, furniture", f"{extent[0]:.1f} m x {extent[1]:.1f} m",
                     f"a scene within {MAX_EXTENT_M:g} m x {MAX_EXTENT_M:g} m")

    lights = tuple(r.vec({"v": v}, "v", f"lights[{i}]", 3) for i, v in enumerate(r.get(data, "lights", "", [], kind=list)))
    if len(lights) > 6:
        raise r.fail("lights", len(lights), "at most 6 lights (OpenGL fixed pipeline limit with headlight)")
    meta = r.get(data, "meta", "", {}, kind=dict)
    return Scene(sid, r.get(data, "name", "", sid, kind=str), source, wall_h, materials, tuple(rooms), tuple(walls),
                 tuple(furniture), lights, meta)


def _unique(r: _Reader, ids: list[str], path: str) -> None:
    seen = set()
    for i in ids:
        if i in seen:
            raise r.fail(path, i, "unique ids (duplicate found)")
        seen.add(i)


GENERATED_DIR = Path(__file__).resolve().parents[2] / "data" / "scenes"  # `affectsim scenes build`


def builtin_scene_ids() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def resolve_scene_path(scene: str, scenes_dir: Path | None = None) -> Path:
    """A built-in scene id (``test_apartment``), a generated one (``scene_007``) or a scene file path.

    Generated ids are looked up in ``scenes_dir`` (default ``data/scenes``).
    """
    p = Path(scene)
    if p.suffix in (".yaml", ".yml", ".json"):
        if not p.is_file():
            raise InvalidInput("scene", scene, "an existing scene file (a regular file)")
        return p
    check_name("scene", scene)
    for cand in (BUILTIN_DIR / f"{scene}.yaml", Path(scenes_dir or GENERATED_DIR) / f"{scene}.yaml"):
        if cand.is_file():
            return cand
    raise InvalidInput("scene", scene, f"a scene file path, a built-in scene id ({', '.join(builtin_scene_ids())}) "
                                       f"or a generated id scene_000..scene_056 in {scenes_dir or GENERATED_DIR} "
                                       "(after `affectsim scenes build`)")


def load_scene(scene: str | Path, scenes_dir: Path | None = None) -> Scene:
    """Load and validate a scene by id (see :func:`resolve_scene_path`) or file path."""
    path = resolve_scene_path(str(scene), scenes_dir)
    data = (read_json if path.suffix == ".json" else read_yaml)(path, MAX_FILE_BYTES, "scene file")
    return parse_scene(data, str(path))
