"""Procedural indoor scenes (``affectsim scenes build``): 57 apartments and offices from one seed.

Layout: a rectangular footprint is split recursively (binary space partition) into 2-6
rectangular rooms; every split line becomes a wall whose doorway is placed in the middle of
a boundary that two rooms on either side really share, so every room is reachable. Some
doorways carry open doors (60-100 deg, usable for knocking). Rooms get a type, furniture
from that type's list (seats with support surfaces, tables, occluders: shelves, partitions,
plants, cabinets), materials from a palette, a ceiling light and a monitor camera in the
corner farthest from its main doorway.

Every scene passes :func:`check_scene` before it is written: all rooms reachable for the
Fetch footprint, no furniture interpenetration (furniture vs furniture and walls), and a
navigable area fraction within [0.30, 0.85] of the floor.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import yaml
from PIL import Image
from scipy import ndimage

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import Rect, Scene, parse_scene
from affectsim_core.atomic import staged_dir
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.contact_sheet import map_image, save_png
from affectsim_core.errors import InvalidInput
from affectsim_core.geometry import Pose2D, Transform, look_at_rotation
from affectsim_core.names import check_name
from affectsim_core.readers import read_json

SCENES_DIR = Path(__file__).resolve().parents[2] / "data" / "scenes"
SCENE_LIBRARY_FORMAT = "affectsim-scene-library/1"
MAX_LIBRARY_MANIFEST_BYTES = 4 * 2 ** 20  # the scene library's manifest (57 scenes: 18 KB)
N_APARTMENTS, N_OFFICES = 40, 17
NAV_FRACTION = (0.30, 0.85)

PALETTES = [
    {"wall": [0.90, 0.88, 0.82], "floor": [0.62, 0.48, 0.34], "accent": [0.25, 0.33, 0.45]},
    {"wall": [0.85, 0.88, 0.90], "floor": [0.55, 0.50, 0.45], "accent": [0.55, 0.25, 0.20]},
    {"wall": [0.93, 0.90, 0.85], "floor": [0.70, 0.60, 0.45], "accent": [0.30, 0.45, 0.35]},
    {"wall": [0.80, 0.82, 0.78], "floor": [0.45, 0.35, 0.28], "accent": [0.60, 0.55, 0.35]},
    {"wall": [0.95, 0.95, 0.95], "floor": [0.60, 0.62, 0.64], "accent": [0.20, 0.20, 0.25]},
    {"wall": [0.88, 0.83, 0.80], "floor": [0.52, 0.40, 0.30], "accent": [0.45, 0.30, 0.50]},
]
# room type -> furniture spec list: (type, (length, depth, height), placement) ; placement: wall | center
ROOM_FURNITURE = {
    "living_room": [("sofa", (2.0, 0.9, 0.85), "wall"), ("table", (1.1, 0.6, 0.45), "center"),
                    ("chair", (0.75, 0.75, 0.95), "wall"), ("shelf", (1.2, 0.4, 1.9), "wall"),
                    ("plant", (0.5, 0.5, 1.4), "corner"), ("cabinet", (1.6, 0.45, 0.6), "wall")],
    "kitchen": [("cabinet", (2.4, 0.6, 0.9), "wall"), ("table", (1.4, 0.85, 0.75), "center"),
                ("chair", (0.5, 0.5, 0.95), "table"), ("chair", (0.5, 0.5, 0.95), "table"),
                ("shelf", (0.9, 0.4, 1.8), "wall")],
    "bedroom": [("bed", (2.0, 1.5, 0.6), "wall"), ("cabinet", (1.4, 0.6, 2.0), "wall"),
                ("bench", (1.1, 0.4, 0.45), "wall"), ("plant", (0.45, 0.45, 1.2), "corner"),
                ("chair", (0.5, 0.5, 0.95), "wall")],
    "study": [("table", (1.4, 0.7, 0.75), "wall"), ("chair", (0.5, 0.5, 0.95), "desk"),
              ("shelf", (1.2, 0.4, 1.9), "wall"), ("partition", (1.2, 0.08, 1.7), "center"),
              ("sofa", (1.6, 0.85, 0.85), "wall")],
    "hallway": [("bench", (1.2, 0.4, 0.45), "wall"), ("plant", (0.45, 0.45, 1.3), "corner"),
                ("cabinet", (1.0, 0.4, 1.0), "wall")],
    "office": [("table", (1.6, 0.8, 0.75), "wall"), ("chair", (0.55, 0.55, 1.0), "desk"),
               ("table", (1.6, 0.8, 0.75), "wall"), ("chair", (0.55, 0.55, 1.0), "desk"),
               ("partition", (1.6, 0.08, 1.6), "center"), ("shelf", (1.0, 0.4, 1.9), "wall"),
               ("plant", (0.5, 0.5, 1.5), "corner")],
    "meeting_room": [("table", (2.2, 1.1, 0.75), "center"), ("chair", (0.55, 0.55, 1.0), "table"),
                     ("chair", (0.55, 0.55, 1.0), "table"), ("chair", (0.55, 0.55, 1.0), "table"),
                     ("cabinet", (1.4, 0.45, 0.9), "wall"), ("plant", (0.5, 0.5, 1.5), "corner")],
    "lounge": [("sofa", (2.2, 0.9, 0.85), "wall"), ("sofa", (1.8, 0.9, 0.85), "wall"),
               ("table", (1.0, 1.0, 0.45), "center"), ("bench", (1.4, 0.45, 0.45), "wall"),
               ("plant", (0.5, 0.5, 1.6), "corner"), ("shelf", (1.4, 0.4, 1.7), "center")],
}
APARTMENT_TYPES = ["living_room", "kitchen", "bedroom", "study", "bedroom", "hallway"]
OFFICE_TYPES = ["office", "meeting_room", "lounge", "office", "kitchen", "office"]


@dataclass
class _Room:
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def w(self) -> float:
        return self.x1 - self.x0

    @property
    def h(self) -> float:
        return self.y1 - self.y0


def _split(rooms: list[_Room], n: int, rng: np.random.Generator, splits: list) -> None:
    while len(rooms) < n:
        rooms.sort(key=lambda r: -r.w * r.h)
        r = rooms.pop(0)
        vertical = r.w > r.h if abs(r.w - r.h) > 0.5 else bool(rng.random() < 0.5)
        span = r.w if vertical else r.h
        if span < 5.0:  # would make rooms narrower than 2.5 m
            rooms.append(r)
            if all(max(q.w, q.h) < 5.0 for q in rooms):
                break
            continue
        cut = round(float(rng.uniform(0.38, 0.62)) * span * 4) / 4
        if vertical:
            a, b = _Room(r.x0, r.y0, r.x0 + cut, r.y1), _Room(r.x0 + cut, r.y0, r.x1, r.y1)
            splits.append(("x", r.x0 + cut, r.y0, r.y1))
        else:
            a, b = _Room(r.x0, r.y0, r.x1, r.y0 + cut), _Room(r.x0, r.y0 + cut, r.x1, r.y1)
            splits.append(("y", r.y0 + cut, r.x0, r.x1))
        rooms += [a, b]


def _shared(a: _Room, b: _Room, axis: str, at: float) -> tuple[float, float] | None:
    """Interval shared by rooms a and b across the split line ``axis = at``."""
    if axis == "x" and {round(a.x1, 6), round(b.x0, 6)} == {round(at, 6)} or \
            axis == "x" and {round(b.x1, 6), round(a.x0, 6)} == {round(at, 6)}:
        lo, hi = max(a.y0, b.y0), min(a.y1, b.y1)
    elif axis == "y" and ({round(a.y1, 6), round(b.y0, 6)} == {round(at, 6)} or
                          {round(b.y1, 6), round(a.y0, 6)} == {round(at, 6)}):
        lo, hi = max(a.x0, b.x0), min(a.x1, b.x1)
    else:
        return None
    return (lo, hi) if hi - lo >= 1.4 else None


def _overlap(a: Rect, b: Rect, margin: float = 0.0) -> bool:
    """Separating-axis test of two oriented rectangles grown by ``margin``."""
    ca, cb = a.corners(), b.corners()
    for rect, corners in ((a, ca), (b, cb)):
        for ang in (rect.yaw, rect.yaw + math.pi / 2):
            axis = np.array([math.cos(ang), math.sin(ang)])
            pa, pb = ca @ axis, cb @ axis
            if pa.max() + margin <= pb.min() or pb.max() + margin <= pa.min():
                return False
    return True


def generate_scene(index: int, seed: int = 0, attempt: int = 0) -> dict:
    """Scene document (format ``affectsim-scene/1``) number ``index`` (0-39 apartments, 40-56 offices);
    ``attempt`` > 0 draws another layout for the same index (when one fails its checks)."""
    rng = np.random.default_rng([seed, index] if attempt == 0 else [seed, index, attempt])
    office = index >= N_APARTMENTS
    n_rooms = int(rng.integers(3 if office else 2, 7))
    area = float(rng.uniform(16, 22)) * n_rooms
    aspect = float(rng.uniform(1.0, 1.6))
    W = round(math.sqrt(area * aspect) * 4) / 4
    D = round(area / W * 4) / 4
    rooms, splits = [_Room(0.0, 0.0, W, D)], []
    _split(rooms, n_rooms, rng, splits)
    types = list(OFFICE_TYPES if office else APARTMENT_TYPES)[: len(rooms)]
    order = np.argsort([-r.w * r.h for r in rooms])
    room_type = {int(i): types[k] for k, i in enumerate(order)}
    pal = PALETTES[int(rng.integers(len(PALETTES)))]
    jitter = lambda c: [float(np.clip(v + rng.normal(0, 0.04), 0, 1)) for v in c] + [1.0]  # noqa: E731
    materials = {
        "wall": {"rgba": jitter(pal["wall"])}, "door": {"rgba": [0.50, 0.33, 0.20, 1]},
        "floor": {"rgba": jitter(pal["floor"]), "texture": "grid",
                  "rgba2": [max(0, v - 0.06) for v in pal["floor"]] + [1.0]},
        "tile": {"rgba": [0.82, 0.82, 0.80, 1], "texture": "checker", "rgba2": [0.66, 0.67, 0.68, 1]},
        "carpet": {"rgba": jitter([0.45, 0.50, 0.58])},
    }
    for ftype in ("sofa", "chair", "table", "shelf", "cabinet", "bed", "bench", "plant", "partition"):
        base = {"plant": [0.2, 0.5, 0.22], "bed": [0.85, 0.82, 0.75], "sofa": pal["accent"],
                "cabinet": [0.82, 0.82, 0.84], "partition": [0.70, 0.72, 0.62]}.get(ftype, [0.50, 0.36, 0.24])
        materials[ftype] = {"rgba": jitter(base)}
    walls = [{"from": [0, 0], "to": [W, 0]}, {"from": [W, 0], "to": [W, D]}, {"from": [W, D], "to": [0, D]},
             {"from": [0, D], "to": [0, 0]}]
    doorways: list[tuple[float, float, str]] = []  # centre x, y and the axis of the wall
    door_count = 0
    for axis, at, lo, hi in splits:
        side_a = [r for r in rooms if (r.x1 if axis == "x" else r.y1) == at]
        side_b = [r for r in rooms if (r.x0 if axis == "x" else r.y0) == at]
        pairs = []  # room pairs sharing a stretch of this split (another split may lie on the same line)
        for a in side_a:
            for b in side_b:
                s = _shared(a, b, axis, at)
                if s and s[0] >= lo - 1e-9 and s[1] <= hi + 1e-9:
                    pairs.append((a, b, s))
        if not pairs:
            raise RuntimeError(f"scene {index}: split {axis}={at} has no shared boundary")
        openings = []
        for k in rng.permutation(len(pairs))[: 1 + int(len(pairs) > 1 and rng.random() < 0.4)]:
            s0, s1 = pairs[k][2]
            width = float(rng.choice([0.9, 1.0, 1.2]))
            centre = float(rng.uniform(s0 + 0.2 + width / 2, s1 - 0.2 - width / 2)) - lo
            op = {"center": round(centre, 3), "width": width}
            if rng.random() < 0.45 and width <= 1.0:
                door_count += 1
                op["door"] = {"id": f"door{door_count}", "hinge": str(rng.choice(["start", "end"])),
                              "swing": str(rng.choice(["left", "right"])),
                              "open_deg": float(rng.choice([70.0, 85.0, 95.0]))}
            openings.append(op)
            pos = lo + centre
            doorways.append((at, pos, axis) if axis == "x" else (pos, at, axis))
        start, end = ([at, lo], [at, hi]) if axis == "x" else ([lo, at], [hi, at])
        walls.append({"from": start, "to": end, "openings": openings})
    room_docs, lights = [], []
    for i, r in enumerate(rooms):
        rtype = room_type[i]
        floor = {"kitchen": "tile", "bedroom": "carpet"}.get(rtype, "floor")
        corners = [(r.x0 + 0.3, r.y0 + 0.3), (r.x1 - 0.3, r.y0 + 0.3), (r.x1 - 0.3, r.y1 - 0.3), (r.x0 + 0.3, r.y1 - 0.3)]
        mine = [d for d in doorways if r.x0 - 0.01 <= d[0] <= r.x1 + 0.01 and r.y0 - 0.01 <= d[1] <= r.y1 + 0.01]
        far = max(corners, key=lambda c: min([math.dist(c, d[:2]) for d in mine] or [0.0]))
        room_docs.append({"id": f"{rtype}_{i}", "type": rtype, "floor_material": floor,
                          "polygon": [[r.x0, r.y0], [r.x1, r.y0], [r.x1, r.y1], [r.x0, r.y1]],
                          "monitor_camera": {"position": [far[0], far[1], 2.4],
                                             "look_at": [(r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2, 0.9],
                                             "vfov_deg": 65}})
        lights.append([round((r.x0 + r.x1) / 2, 2), round((r.y0 + r.y1) / 2, 2), 2.5])
    doc = {"format": "affectsim-scene/1", "id": f"scene_{index:03d}",
           "name": f"{'office' if office else 'apartment'} {index:03d} ({len(rooms)} rooms)",
           "wall_height": round(float(rng.uniform(2.5, 2.9)), 2), "materials": materials, "rooms": room_docs,
           "walls": walls, "furniture": [], "lights": lights[:6],
           "meta": {"generator": "affectsim scenes v1", "seed": seed, "index": index,
                    "kind": "office" if office else "apartment"}}
    doc["furniture"] = _furnish(doc, rooms, room_type, doorways, rng)
    return doc


def _furnish(doc: dict, rooms: list[_Room], room_type: dict, doorways: list, rng: np.random.Generator) -> list:
    """Place each room's furniture, keeping doorways clear and every room reachable."""
    placed: list[dict] = []
    rects: list[Rect] = []
    keep_clear = [Rect(x, y, 0.9, 0.9, 0.0) for x, y, _ in doorways]
    n = 0
    for i, r in enumerate(rooms):
        table: dict | None = None
        desk: dict | None = None
        for ftype, (L, Dp, H), where in ROOM_FURNITURE[room_type[i]]:
            for _ in range(25):
                L2, D2 = L * float(rng.uniform(0.9, 1.1)), Dp * float(rng.uniform(0.9, 1.1))
                if where in ("wall", "corner"):
                    side = int(rng.integers(4))
                    yaw = [math.pi / 2 * k for k in (0, 1, 2, 3)][side]  # front faces into the room
                    m = 0.08 + D2 / 2  # 3 cm off the wall face
                    along = float(rng.uniform(0, 1)) if where == "wall" else float(rng.choice([0.0, 1.0]))
                    span = (r.w if side in (0, 2) else r.h) - L2 - 0.2
                    if span <= 0:
                        continue
                    t = 0.1 + L2 / 2 + along * span
                    x, y = [(r.x0 + t, r.y0 + m), (r.x1 - m, r.y0 + t), (r.x1 - t, r.y1 - m), (r.x0 + m, r.y1 - t)][side]
                elif where == "center":
                    if r.w < L2 + 2.0 or r.h < D2 + 2.0:
                        break
                    x = float(rng.uniform(r.x0 + 1.0 + L2 / 2, r.x1 - 1.0 - L2 / 2))
                    y = float(rng.uniform(r.y0 + 1.0 + D2 / 2, r.y1 - 1.0 - D2 / 2))
                    yaw = float(rng.choice([0.0, math.pi / 2])) if ftype != "partition" else float(rng.uniform(0, math.pi))
                else:  # a chair at the table / desk, facing it
                    anchor = table if where == "table" else desk
                    if anchor is None:
                        break
                    ax, ay, ayaw = anchor["position"][0], anchor["position"][1], math.radians(anchor["yaw_deg"])
                    half = anchor["size"][1] / 2 if where == "desk" else float(rng.choice([-1, 1])) * anchor["size"][1] / 2
                    off = (abs(half) + 0.35) * (1 if half >= 0 else -1)
                    x, y = ax - math.sin(ayaw) * off, ay + math.cos(ayaw) * off
                    yaw = ayaw + (math.pi if off > 0 else 0.0)
                    x += math.cos(ayaw) * float(rng.uniform(-0.3, 0.3))
                    y += math.sin(ayaw) * float(rng.uniform(-0.3, 0.3))
                rect = Rect(x, y, L2 / 2, D2 / 2, yaw)
                inside = all(r.x0 + 0.07 <= cx <= r.x1 - 0.07 and r.y0 + 0.07 <= cy <= r.y1 - 0.07
                             for cx, cy in rect.corners())
                if not inside or any(_overlap(rect, o, 0.02) for o in rects) or \
                        any(_overlap(rect, k) for k in keep_clear):
                    continue
                n += 1
                item = {"id": f"{ftype}{n}", "type": ftype, "position": [round(x, 3), round(y, 3)],
                        "yaw_deg": round(math.degrees(yaw) - 90 * 0, 2), "size": [round(L2, 3), round(D2, 3), H],
                        "material": ftype}
                trial = doc | {"furniture": placed + [item]}
                if not _raster_reachable(parse_scene(trial, doc["id"])):
                    n -= 1
                    continue
                placed.append(item)
                rects.append(rect)
                if ftype == "table" and where == "center":
                    table = item
                if ftype == "table" and where == "wall":
                    desk = item
                break
    return placed


def _raster_reachable(scene: Scene, robot_radius: float = 0.3, res: float = 0.1) -> bool:
    """Fast test used while furnishing: every room touches the largest 8-connected free region."""
    nav = NavigableSpace(scene, robot_radius)
    xmin, ymin, xmax, ymax = scene.bounds()
    xs, ys = np.arange(xmin + res / 2, xmax, res), np.arange(ymin + res / 2, ymax, res)
    gx, gy = np.meshgrid(xs, ys)
    pts = np.stack([gx.ravel(), gy.ravel()], 1)
    free = nav.is_free(pts).reshape(gx.shape)
    labels, n = ndimage.label(free, structure=np.ones((3, 3)))
    if n == 0:
        return False
    main = int(np.argmax(np.bincount(labels.ravel())[1:])) + 1
    flat = labels.ravel()
    return all(bool((flat[room.contains(pts)] == main).any()) for room in scene.rooms)


def _room_reachable(nav: NavigableSpace, room) -> bool:
    poly = np.asarray(room.polygon)
    lo, hi = poly.min(0), poly.max(0)
    gx, gy = np.meshgrid(np.arange(lo[0] + 0.2, hi[0], 0.4), np.arange(lo[1] + 0.2, hi[1], 0.4))
    pts = np.stack([gx.ravel(), gy.ravel()], 1)
    pts = pts[room.contains(pts) & nav.is_free(pts)]
    return bool(len(pts)) and bool(nav.is_navigable(pts[:: max(1, len(pts) // 6)]).any())


def check_scene(scene: Scene, robot_radius: float = 0.3) -> dict:
    """Reachability, interpenetration and navigable-area checks; returns measures and a list of problems."""
    nav = NavigableSpace(scene, robot_radius)
    problems = []
    for room in scene.rooms:
        if not _room_reachable(nav, room):
            problems.append(f"room {room.id} is not reachable")
    rects = [(f.id, f.footprint) for f in scene.furniture]
    walls = [(i, r) for i, r in scene.obstacles() if i.startswith("wall")]
    for k, (a, ra) in enumerate(rects):
        for b, rb in rects[k + 1:]:
            if _overlap(ra, rb):
                problems.append(f"furniture {a} and {b} interpenetrate")
        for w, rw in walls:
            if _overlap(ra, rw):
                problems.append(f"furniture {a} enters {w}")
    xmin, ymin, xmax, ymax = scene.bounds()
    gx, gy = np.meshgrid(np.arange(xmin + 0.05, xmax, 0.1), np.arange(ymin + 0.05, ymax, 0.1))
    pts = np.stack([gx.ravel(), gy.ravel()], 1)
    floor = nav.in_rooms(pts)
    free = nav.is_free(pts[floor])
    frac = float(free.mean())
    if not NAV_FRACTION[0] <= frac <= NAV_FRACTION[1]:
        problems.append(f"navigable fraction {frac:.2f} outside {NAV_FRACTION}")
    return {"navigable_fraction": frac, "navigable_area_m2": float(free.sum() * 0.01),
            "floor_area_m2": float(floor.sum() * 0.01), "rooms": len(scene.rooms),
            "furniture": len(scene.furniture), "doors": len(scene.doors()), "problems": problems}


MAX_ATTEMPTS = 10


def read_scene_library(scenes_dir: Path = SCENES_DIR) -> dict:
    """The scene library's ``manifest.json``, checked: size, JSON, a list of scene entries with an id
    (and a door count, when given); any problem names the file."""
    path = Path(scenes_dir) / "manifest.json"
    manifest = read_json(path, MAX_LIBRARY_MANIFEST_BYTES, "scene manifest")
    scenes = manifest.get("scenes") if isinstance(manifest, dict) else None
    if not isinstance(scenes, list):
        raise InvalidInput("scenes", type(scenes).__name__, "a list of scene entries", where=str(path))
    for i, e in enumerate(scenes):
        w = f"{path}: scenes[{i}]"
        if not isinstance(e, dict):
            raise InvalidInput("entry", type(e).__name__, "a mapping", where=w)
        check_name("id", e.get("id"), w)
        doors = e.get("doors", 0)
        if not isinstance(doors, int) or isinstance(doors, bool) or doors < 0:
            raise InvalidInput("doors", doors, "a count >= 0", where=w)
    return manifest


def build_scenes(out: Path = SCENES_DIR, seed: int = 0, count: int = N_APARTMENTS + N_OFFICES,
                 log: Callable[[str], None] = print) -> dict:
    """Generate, check and write ``count`` scenes with a manifest; replaces ``out`` atomically."""
    t0 = time.monotonic()
    with staged_dir(Path(out), ".scenes-") as tmp:
        entries = []
        for i in range(count):
            for attempt in range(MAX_ATTEMPTS):  # deterministic: the first layout that passes its checks
                doc = generate_scene(i, seed, attempt)
                scene = parse_scene(doc, doc["id"])
                report = check_scene(scene)
                if not report["problems"]:
                    break
                log(f"[scenes] {doc['id']} layout {attempt} failed its checks ({report['problems']}); drawing another")
            else:
                raise RuntimeError(f"{doc['id']} failed its checks in {MAX_ATTEMPTS} layouts: {report['problems']}")
            path = tmp / f"{doc['id']}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            entries.append({"id": doc["id"], "file": path.name, "kind": doc["meta"]["kind"],
                            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                            **{k: v for k, v in report.items() if k != "problems"}})
            el = time.monotonic() - t0
            log(f"[scenes] {doc['id']}: {report['rooms']} rooms, {report['furniture']} furniture, "
                f"{report['doors']} doors, navigable {report['navigable_fraction']:.2f} "
                f"({i + 1}/{count}, ETA {el / (i + 1) * (count - i - 1):.0f} s)")
        manifest = {"format": SCENE_LIBRARY_FORMAT, "seed": seed, "scenes": entries}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    log(f"[scenes] built {count} scenes in {time.monotonic() - t0:.1f} s -> {out}")
    return manifest


def preview_scene(scene: Scene, out: Path) -> Path:
    """PNG: rendered top-down view, occupancy map with room labels, and three monitor-camera views."""

    nav = NavigableSpace(scene)
    start = nav.sample(1, np.random.default_rng(0))[0]
    b = BACKENDS.create("mujoco")
    b.load(scene, Pose2D(float(start[0]), float(start[1]), 0.0))
    xmin, ymin, xmax, ymax = scene.bounds()
    c = np.array([(xmin + xmax) / 2, (ymin + ymax) / 2])
    span = max(xmax - xmin, (ymax - ymin) * 4 / 3) + 1.0
    height = span / 2 / math.tan(math.radians(20)) * 3 / 4
    cam = np.array([c[0], c[1], height])
    top = b.render_camera(Transform(look_at_rotation(cam, [c[0], c[1] + 1e-3, 0.0]), cam),
                          CameraIntrinsics.from_vfov(640, 480, math.radians(40)), top_down=True).rgb
    views = []
    for room in scene.rooms[:3]:
        mon = room.monitor
        pos = np.array(mon.position)
        k = CameraIntrinsics.from_vfov(320, 240, mon.vfov)
        views.append(b.render_camera(Transform(look_at_rotation(pos, np.array(mon.look_at)), pos), k).rgb)
    b.close()
    grid, origin = nav.occupancy_grid(0.05)
    m = map_image(grid, origin, 0.05, np.zeros((0, 2)), scale=3, labels=[(r.id, *r.centroid) for r in scene.rooms])
    m = m.resize((int(m.width * 480 / m.height), 480))
    row = Image.new("RGB", (640 + m.width, 480 + 240), (255, 255, 255))
    row.paste(Image.fromarray(top), (0, 0))
    row.paste(m, (640, 0))
    for i, v in enumerate(views):
        row.paste(Image.fromarray(v), (i * 320, 480))
    save_png(row, out)
    return out
