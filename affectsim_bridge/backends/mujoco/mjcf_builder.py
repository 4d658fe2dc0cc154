"""Scene -> MJCF: floors, walls with lintels, doors, composed furniture, lights, people, cameras.

Geom groups: 0 static scene, 1 people, 2 robot (from :mod:`fetch_model`), 4 ceilings
(hidden in top-down views). Render settings follow docs/design.md §4 (no shadows,
no MSAA) so llvmpipe renders fast.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from affectsim_bridge.backends.mujoco import fetch_model
from affectsim_bridge.humans.body import BodyShape, geom_layout
from affectsim_bridge.humans.skeleton import JOINTS
from affectsim_bridge.world.scene import Furniture, Scene
from affectsim_core.geometry import look_at_rotation, matrix_to_quat

HUMAN_SLOTS = 2
PARK_Z = -50.0  # unused people are parked below the floor
def _f(v) -> str:
    return " ".join(f"{float(x):.6g}" for x in np.atleast_1d(v))


def _sub(parent: ET.Element, tag: str, **attrs) -> ET.Element:
    return ET.SubElement(parent, tag, {k: (v if isinstance(v, str) else _f(v)) for k, v in attrs.items()})


def build_mjcf(scene: Scene, max_width: int = 1280, max_height: int = 960) -> str:
    """MJCF text of ``scene`` with the Fetch, two person slots and a free viewer camera."""
    root = ET.Element("mujoco", model=f"affectsim_{scene.id}")
    _sub(root, "compiler", angle="radian", autolimits="true")
    _sub(root, "option", timestep=0.002, gravity=[0, 0, -9.81])
    _sub(root, "statistic", extent=10.0, center=[0, 0, 1])
    visual = _sub(root, "visual")
    _sub(visual, "global", offwidth=max_width, offheight=max_height)
    _sub(visual, "quality", shadowsize=0, offsamples=0)
    _sub(visual, "map", znear=0.003, zfar=6.0)  # x extent: 3 cm .. 60 m
    _sub(visual, "headlight", ambient=[0.35, 0.35, 0.35], diffuse=[0.35, 0.35, 0.35], specular=[0.05, 0.05, 0.05])

    asset = _sub(root, "asset")
    _sub(asset, "texture", type="skybox", builtin="gradient", rgb1=[0.85, 0.88, 0.92], rgb2=[0.55, 0.6, 0.7],
         width=32, height=32)
    for m in scene.materials.values():
        attrs = {"name": m.name, "rgba": m.rgba, "specular": 0.1, "shininess": 0.1}
        if m.texture != "none":
            rgb2 = m.rgba2 or tuple(0.8 * c for c in m.rgba[:3]) + (1.0,)
            _sub(asset, "texture", name=f"tex_{m.name}", type="2d",
                 builtin="checker" if m.texture == "checker" else "flat", rgb1=m.rgba[:3],
                 rgb2=rgb2[:3], width=256, height=256, mark="edge" if m.texture == "grid" else "none",
                 markrgb=rgb2[:3])
            attrs = {"name": m.name, "texture": f"tex_{m.name}", "texrepeat": [1, 1], "texuniform": "true",
                     "specular": 0.1, "shininess": 0.1}
        _sub(asset, "material", **attrs)
    robot_assets, robot_default, robot_body = fetch_model.fetch_mjcf()
    for el in robot_assets:
        asset.append(el)
    default = _sub(root, "default")
    default.append(robot_default)

    world = _sub(root, "worldbody")
    _sub(world, "light", name="sun", directional="true", pos=[0, 0, 10], dir=[0.2, 0.3, -1], diffuse=[0.35, 0.35, 0.35],
         specular=[0, 0, 0], castshadow="false")
    for i, (x, y, z) in enumerate(scene.lights):
        _sub(world, "light", name=f"light{i}", pos=[x, y, z], dir=[0, 0, -1], diffuse=[0.45, 0.45, 0.42],
             specular=[0.05, 0.05, 0.05], attenuation=[1, 0.05, 0.02], castshadow="false")
    _add_structure(world, scene)
    for f in scene.furniture:
        _add_furniture(world, f)
    for room in scene.rooms:
        if room.monitor is not None:
            rot = look_at_rotation(np.array(room.monitor.position), np.array(room.monitor.look_at))
            # MuJoCo cameras look along -z with +y up: optical frame rotated by pi about x
            q = matrix_to_quat(rot @ np.diag([1.0, -1.0, -1.0]))
            _sub(world, "camera", name=f"monitor_{room.id}", pos=room.monitor.position, quat=q,
                 fovy=math.degrees(room.monitor.vfov))
    viewer = _sub(world, "body", name="viewer_cam", mocap="true", pos=[0, 0, 1])
    _sub(viewer, "camera", name="viewer", quat=[0, 1, 0, 0], fovy=45)
    for k in range(HUMAN_SLOTS):
        _add_human(world, k)
    world.append(robot_body)
    return ET.tostring(root, encoding="unicode")


def _box(parent: ET.Element, name: str, center, half, yaw: float, material: str, group: int = 0) -> None:
    _sub(parent, "geom", name=name, type="box", pos=center, size=half, euler=[0, 0, yaw], material=material,
         group=str(group), contype="0", conaffinity="0")


def _add_structure(world: ET.Element, scene: Scene) -> None:
    xmin, ymin, xmax, ymax = scene.bounds()
    _sub(world, "geom", name="ground", type="plane", pos=[(xmin + xmax) / 2, (ymin + ymax) / 2, -0.002],
         size=[(xmax - xmin) / 2 + 20, (ymax - ymin) / 2 + 20, 1], rgba=[0.35, 0.38, 0.33, 1], group="0",
         contype="0", conaffinity="0")
    for room in scene.rooms:
        poly = np.asarray(room.polygon)
        lo, hi = poly.min(0), poly.max(0)
        c, h = (lo + hi) / 2, (hi - lo) / 2
        _box(world, f"floor_{room.id}", [c[0], c[1], -0.001], [h[0], h[1], 0.001], 0.0, room.floor_material)
        _sub(world, "geom", name=f"ceiling_{room.id}", type="box", pos=[c[0], c[1], scene.wall_height + 0.02],
             size=[h[0], h[1], 0.02], rgba=[0.95, 0.95, 0.93, 1], group="4", contype="0", conaffinity="0")
    for i, wall in enumerate(scene.walls):
        for j, (a, b) in enumerate(wall.solid_segments()):
            r = wall.rect(a, b)
            _box(world, f"wall{i}_{j}", [r.cx, r.cy, wall.height / 2], [r.hx, r.hy, wall.height / 2], r.yaw,
                 wall.material)
        for k, o in enumerate(wall.openings):
            if o.height < wall.height:
                r = wall.rect(o.center - o.width / 2, o.center + o.width / 2)
                zc = (o.height + wall.height) / 2
                _box(world, f"lintel{i}_{k}", [r.cx, r.cy, zc], [r.hx, r.hy, (wall.height - o.height) / 2], r.yaw,
                     wall.material)
    for p in scene.doors():
        fp = p.footprint
        _box(world, f"door_{p.id}", [fp.cx, fp.cy, p.height / 2], [fp.hx, fp.hy, p.height / 2], fp.yaw, p.material)
        # knob on both faces, 0.1 m from the free edge
        d = np.array([math.cos(fp.yaw), math.sin(fp.yaw)])
        n = np.array([-d[1], d[0]])
        tip = np.array(p.hinge_xy) + d * (p.width - 0.1)  # d points from the hinge to the free edge
        for s in (-1, 1):
            _sub(world, "geom", name=f"knob_{p.id}_{'ab'[s > 0]}", type="sphere", size=[0.03],
                 pos=[*(tip + s * n * (fp.hy + 0.03)), 1.0], rgba=[0.8, 0.75, 0.5, 1], group="0", contype="0",
                 conaffinity="0")


def _add_furniture(world: ET.Element, f: Furniture) -> None:
    """Composed visual geometry inside the furniture's footprint box (local x: length, +y: front)."""
    body = _sub(world, "body", name=f"furniture_{f.id}", pos=[f.x, f.y, 0], euler=[0, 0, f.yaw])
    L, D, H = f.size
    m = f.material

    def part(name: str, c, h) -> None:
        _box(body, f"{f.id}_{name}", c, h, 0.0, m)

    def legs(top: float, inset: float = 0.04, r: float = 0.025) -> None:
        for sx in (-1, 1):
            for sy in (-1, 1):
                part(f"leg{sx}{sy}", [sx * (L / 2 - inset), sy * (D / 2 - inset), top / 2], [r, r, top / 2])

    if f.type == "chair":
        s = f.seat_height
        part("seat", [0, 0, s - 0.03], [L / 2, D / 2, 0.03])
        part("back", [0, -D / 2 + 0.03, (s + H) / 2], [L / 2, 0.03, (H - s) / 2])
        legs(s - 0.06)
    elif f.type == "sofa":
        s = f.seat_height
        part("base", [0, 0.05, s / 2], [L / 2 - 0.12, D / 2 - 0.05, s / 2])
        part("back", [0, -D / 2 + 0.1, H / 2], [L / 2, 0.1, H / 2])
        for sx in (-1, 1):
            part(f"arm{sx}", [sx * (L / 2 - 0.06), 0, (s + 0.2) / 2], [0.06, D / 2, (s + 0.2) / 2])
    elif f.type == "bench":
        s = f.seat_height
        part("seat", [0, 0, s - 0.03], [L / 2, D / 2, 0.03])
        for sx in (-1, 1):
            part(f"side{sx}", [sx * (L / 2 - 0.04), 0, (s - 0.06) / 2], [0.03, D / 2 - 0.02, (s - 0.06) / 2])
    elif f.type == "bed":
        s = f.seat_height
        part("frame", [0, 0, (s - 0.2) / 2], [L / 2, D / 2, (s - 0.2) / 2])
        _sub(body, "geom", name=f"{f.id}_mattress", type="box", pos=[0, 0, s - 0.1], size=[L / 2 - 0.02, D / 2 - 0.02, 0.1],
             euler=[0, 0, 0], rgba=[0.95, 0.95, 0.97, 1], group="0", contype="0", conaffinity="0")
        part("headboard", [-L / 2 + 0.04, 0, max(H, s + 0.4) / 2], [0.04, D / 2, max(H, s + 0.4) / 2])
    elif f.type == "table":
        part("top", [0, 0, H - 0.02], [L / 2, D / 2, 0.02])
        legs(H - 0.04)
    elif f.type == "shelf":
        for sx in (-1, 1):
            part(f"side{sx}", [sx * (L / 2 - 0.015), 0, H / 2], [0.015, D / 2, H / 2])
        part("backboard", [0, -D / 2 + 0.01, H / 2], [L / 2, 0.01, H / 2])
        n = max(2, int(H / 0.4))
        for k in range(n + 1):
            part(f"board{k}", [0, 0, 0.02 + k * (H - 0.04) / n], [L / 2, D / 2, 0.015])
        for k in range(n):  # books
            _sub(body, "geom", name=f"{f.id}_books{k}", type="box",
                 pos=[0, 0.02, 0.04 + k * (H - 0.04) / n + 0.12], size=[L / 2 - 0.05, D / 2 - 0.05, 0.11],
                 rgba=[0.6, 0.2 + 0.1 * k, 0.2, 1], group="0", contype="0", conaffinity="0")
    elif f.type == "plant":
        r = min(L, D) / 2
        _sub(body, "geom", name=f"{f.id}_pot", type="cylinder", pos=[0, 0, 0.18], size=[r * 0.6, 0.18],
             rgba=[0.55, 0.3, 0.2, 1], group="0", contype="0", conaffinity="0")
        _sub(body, "geom", name=f"{f.id}_leaves", type="ellipsoid", pos=[0, 0, (H + 0.36) / 2],
             size=[r, r, (H - 0.36) / 2], material=m, group="0", contype="0", conaffinity="0")
    else:  # cabinet, partition
        part("body", [0, 0, H / 2], [L / 2, D / 2, H / 2])


def _add_human(world: ET.Element, k: int) -> None:
    """Articulated avatar in slot ``k`` (skeleton.JOINTS, geoms of body.geom_layout); parked until placed.

    Sizes and colours are those of a default body; the backend reshapes each slot per performer.
    """
    layout = geom_layout(BodyShape())
    offsets = BodyShape().joint_offsets()
    bodies: dict[str, ET.Element] = {}
    for j in JOINTS:
        if j.parent is None:
            el = _sub(world, "body", name=f"human{k}_{j.name}", pos=[0, 0, PARK_Z])
            _sub(el, "freejoint", name=f"human{k}_root")
        else:
            el = _sub(bodies[j.parent], "body", name=f"human{k}_{j.name}", pos=offsets[j.name])
            for d in j.dofs:
                _sub(el, "joint", name=f"human{k}_{d.name}", type="hinge", axis=list(d.axis), range=[d.lo, d.hi],
                     limited="true")
        bodies[j.name] = el
    for gs in layout:
        _sub(bodies[gs.body], "geom", name=f"human{k}_{gs.name}", type=gs.type, pos=list(gs.pos), quat=list(gs.quat),
             size=[v if v > 0 else 0.001 for v in gs.size], rgba=[0.5, 0.5, 0.5, 1], group="1",
             contype="0", conaffinity="0", mass="0.01")
