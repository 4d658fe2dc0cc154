#!/usr/bin/env python3
"""An independently written stand-in robot: a Fetch-like mobile base with a head camera, over ROS 2.

Used by the robot conformance suite to test the project's robot-side nodes (nav, perception) against
the publishing habits of real robots. It imports nothing from the project: only rclpy, the standard
ROS message packages, numpy and the standard library. It has its own kinematics, its own map, its own
ray cast and its own camera model; the only thing it shares with the project is a pre-rendered person
sprite, ``test/data/standin_person.npz`` (made once by ``test/make_standin_sprite.py``).

The room: 7 m x 5 m (interior x 0.5..7.5, y 0.5..5.5 in ``map``), four walls of different
colours, 2.5 m ceiling, one table (0.75 m high) in the corner at x 5.8..6.9, y 4.3..5.0. A person
(a cylinder of radius 0.25 m for the laser and collisions, a billboard sprite for the camera) stands
at ``--person`` (default 3.5 m in front of the start), facing the robot's start.

Topics (Fetch names; all stamped with the node clock in wall time, no ``/clock``):

- sub ``/cmd_vel`` (Twist): a 50 Hz unicycle runs the latest command, with no watchdog; motion stops at
  contact (base radius 0.3 m);
- sub ``/head_controller/joint_trajectory`` (JointTrajectory): logged, not obeyed: the head stays level, as
  on a robot without a pan-tilt head or whose head controller is not running;
- ``/odom`` (Odometry, ``odom`` -> ``base_link``, pose and measured body twist), 50 Hz;
- ``/tf``: ``odom -> base_link`` with every odometry message (same stamp);
- ``/tf_static`` (reliable, transient local): ``base_link -> torso_lift_link -> head_pan_link ->
  head_tilt_link -> head_camera_rgb_frame -> head_camera_rgb_optical_frame``, ``base_link ->
  laser_link`` and ``map -> odom`` (identity), all in one message;
- ``/base_scan`` (LaserScan, ``laser_link``), 15 Hz, 361 beams over -110..+110 deg, 0.05..25 m;
- ``/map`` (OccupancyGrid, reliable, transient local, once): 0.05 m, origin (0, 0), yaw 0;
- ``/head_camera/rgb/image_raw`` (rgb8 640x480), ``/head_camera/rgb/camera_info``,
  ``/head_camera/depth_registered/image_raw`` (32FC1 m, or 16UC1 mm with 0 = no return),
  ``/head_camera/depth_registered/camera_info``, 15 Hz, frame ``head_camera_rgb_optical_frame``,
  fx = fy = 554.3, cx = 319.5, cy = 239.5; the camera is level, 1.1 m above the floor, 0.1 m ahead of
  the base's centre. The camera is published by a node of its own (``head_camera_driver``), spun by
  its own thread as every node here is, so that a slow render never delays odometry (a robot's camera
  driver is a process of its own).

Habit switches (see ``--help``) imitate real robots: best-effort sensor QoS, an AMCL-like localiser
with future-dated ``map -> odom``, several ``/tf_static`` publishers, ``/tf`` split between
publishers, unsynchronised depth stamps, odometry rate and latency, an odometry driver that dies,
command latency and acceleration limits, a rotated laser, 16-bit depth, start and person positions.

``--log FILE.jsonl`` appends a line per received command (``t`` robot time, ``wall`` monotonic, ``v``,
``w``; a head command: ``head`` joint names, ``positions`` of each point, ``seconds`` from start of each), a ground-truth pose line per second (``pose`` [x, y, yaw] in ``map``, ``t``) and a final pose
line on exit (``"final": true``); ``--ready-file`` is written once everything is advertised and the map
published. SIGINT and SIGTERM: a clean exit within 1 s.
"""

from __future__ import annotations

import argparse
import array
import heapq
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions

from geometry_msgs.msg import TransformStamped, Twist
from nav_msgs.msg import OccupancyGrid, Odometry
from sensor_msgs.msg import CameraInfo, Image, LaserScan
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory

SPRITE = Path(__file__).resolve().parent / "data" / "standin_person.npz"

# ----------------------------------------------------------------------------------------------- robot
BASE_RADIUS = 0.3
PHYSICS_HZ = 50.0
CAMERA_HZ = 15.0
SCAN_HZ = 15.0
WIDTH, HEIGHT = 640, 480
FX = FY = 554.3
CX, CY = 319.5, 239.5
DEPTH_MIN, DEPTH_MAX = 0.35, 10.0  # m: the depth sensor's working range (outside: no return)
# the head chain (Fetch-like offsets) ending at the camera 0.1 m ahead of the base centre, 1.1 m up
HEAD_CHAIN = (
    ("base_link", "torso_lift_link", (-0.087, 0.0, 0.377)),
    ("torso_lift_link", "head_pan_link", (0.053, 0.0, 0.603)),
    ("head_pan_link", "head_tilt_link", (0.143, 0.0, 0.058)),
    ("head_tilt_link", "head_camera_rgb_frame", (-0.009, 0.0, 0.062)),
)
CAM_X = sum(o[0] for _, _, o in HEAD_CHAIN)  # 0.1
CAM_Z = sum(o[2] for _, _, o in HEAD_CHAIN)  # 1.1
OPTICAL = "head_camera_rgb_optical_frame"
OPTICAL_Q = (-0.5, 0.5, -0.5, 0.5)  # camera frame (x forward) -> optical frame (z forward, x right, y down)
SCAN_BEAMS = 361
SCAN_HALF = math.radians(110.0)
SCAN_MIN, SCAN_MAX = 0.05, 25.0

# --------------------------------------------------------------------------------------------- the room
CEILING = 2.5
ROOM = (0.5, 0.5, 7.5, 5.5)  # interior xmin, ymin, xmax, ymax
WALL_T = 0.15
MAP_SIZE = (8.0, 6.0)  # m, grid extent from the origin (0, 0)
RESOLUTION = 0.05
PERSON_RADIUS = 0.25
PERSON_HEIGHT = 1.70  # the sprite's person (test/data/standin_person.npz)


def _boxes():
    x0, y0, x1, y1 = ROOM
    t = WALL_T
    # (xmin, ymin, xmax, ymax, height, rgb)
    return [
        (x0 - t, y0 - t, x1 + t, y0, CEILING, (232, 226, 210)),  # south wall, beige
        (x0 - t, y1, x1 + t, y1 + t, CEILING, (205, 220, 232)),  # north wall, pale blue
        (x0 - t, y0 - t, x0, y1 + t, CEILING, (218, 230, 204)),  # west wall, pale sage
        (x1, y0 - t, x1 + t, y1 + t, CEILING, (240, 214, 198)),  # east wall, pale peach
        (5.8, 4.3, 6.9, 5.0, 0.75, (120, 82, 50)),  # table, wood
    ]


FLOOR_RGB = np.array((150, 130, 105), np.float32)
CEILING_RGB = np.array((232, 232, 228), np.float32)


# ----------------------------------------------------------------------------------------------- maths
def quat_from_rpy(roll: float, pitch: float, yaw: float) -> tuple[float, float, float, float]:
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy)


def rot_from_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


def compose(a, b):
    """SE(2) a * b, poses (x, y, yaw)."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return (a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], wrap(a[2] + b[2]))


def inverse(a):
    c, s = math.cos(a[2]), math.sin(a[2])
    return (-(c * a[0] + s * a[1]), -(-s * a[0] + c * a[1]), wrap(-a[2]))


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def floats(text: str, n: int, name: str) -> tuple[float, ...]:
    try:
        v = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected {n} comma-separated numbers, got {text!r}") from None
    if len(v) != n or not all(math.isfinite(x) for x in v):
        raise argparse.ArgumentTypeError(f"{name}: expected {n} comma-separated finite numbers, got {text!r}")
    return v


# ----------------------------------------------------------------------------------------------- room model
class StandinRoom:
    """Axis-aligned boxes (walls and furniture) and one person; 2-D and 3-D ray casts, collisions, the map."""

    def __init__(self, person_xy, person_yaw: float, sway: float) -> None:
        b = _boxes()
        self.box = np.array([x[:4] for x in b], np.float64)
        self.height = np.array([x[4] for x in b], np.float64)
        self.rgb = np.array([x[5] for x in b], np.float32)
        self.full = self.height >= CEILING - 1e-9  # walls: floor to ceiling
        self.person0 = np.array(person_xy, np.float64)
        self.person_yaw = person_yaw
        self.sway = sway
        self._sway_dir = np.array([-math.sin(person_yaw), math.cos(person_yaw)])

    def person_at(self, t: float) -> np.ndarray:
        return self.person0 + self._sway_dir * self.sway * math.sin(2 * math.pi * t / 5.0)

    # -- ray casts
    def cast_boxes(self, o: np.ndarray, d: np.ndarray, which: np.ndarray):
        """Rays o (M, 2) + t d (M, 2) (d need not be unit) against boxes ``which`` (bool mask):
        (t_hit (M, N) with inf where missed or behind, face axis (M, N): 0 = an x face, 1 = a y face)."""
        bx = self.box[which]
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / np.where(np.abs(d) < 1e-12, 1e-12, d)  # (M, 2)
            tx1 = (bx[None, :, 0] - o[:, None, 0]) * inv[:, None, 0]
            tx2 = (bx[None, :, 2] - o[:, None, 0]) * inv[:, None, 0]
            ty1 = (bx[None, :, 1] - o[:, None, 1]) * inv[:, None, 1]
            ty2 = (bx[None, :, 3] - o[:, None, 1]) * inv[:, None, 1]
        txn, txf = np.minimum(tx1, tx2), np.maximum(tx1, tx2)
        tyn, tyf = np.minimum(ty1, ty2), np.maximum(ty1, ty2)
        tn = np.maximum(txn, tyn)
        tf = np.minimum(txf, tyf)
        hit = (tn <= tf) & (tf > 0)
        t = np.where(hit, np.maximum(tn, 0.0), np.inf)
        axis = (tyn > txn).astype(np.int8)
        return t, axis

    def cast_person(self, o: np.ndarray, d: np.ndarray, t: float) -> np.ndarray:
        """(M,) ray parameter of the person's cylinder (inf: missed)."""
        p = self.person_at(t)
        f = o - p[None, :]
        a = np.einsum("ij,ij->i", d, d)
        b = 2 * np.einsum("ij,ij->i", f, d)
        c = np.einsum("ij,ij->i", f, f) - PERSON_RADIUS ** 2
        disc = b * b - 4 * a * c
        ok = disc >= 0
        sq = np.sqrt(np.where(ok, disc, 0.0))
        t1 = (-b - sq) / (2 * a)
        t2 = (-b + sq) / (2 * a)
        tt = np.where(t1 > 0, t1, np.where(t2 > 0, 0.0, np.inf))
        return np.where(ok, tt, np.inf)

    def laser(self, origin3: np.ndarray, dirs3: np.ndarray, t: float) -> np.ndarray:
        """Ranges (M,) of unit rays ``dirs3`` (M, 3) from ``origin3`` (3,) against boxes (with their
        heights), the person's cylinder, the floor and the ceiling; inf beyond SCAN_MAX."""
        m = len(dirs3)
        o2 = np.broadcast_to(origin3[:2], (m, 2))
        d2 = dirs3[:, :2]
        tb, _ = self.cast_boxes(o2, d2, np.ones(len(self.box), bool))
        zb = origin3[2] + dirs3[:, 2:3] * np.where(np.isfinite(tb), tb, 0.0)
        tb = np.where((zb >= 0.0) & (zb <= self.height[None, :]), tb, np.inf)
        r = tb.min(axis=1)
        tp = self.cast_person(o2, d2, t)
        zp = origin3[2] + dirs3[:, 2] * np.where(np.isfinite(tp), tp, 0.0)
        r = np.minimum(r, np.where((zp >= 0.0) & (zp <= PERSON_HEIGHT), tp, np.inf))
        dz = dirs3[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_floor = np.where(dz < -1e-9, -origin3[2] / dz, np.inf)
            t_ceil = np.where(dz > 1e-9, (CEILING - origin3[2]) / dz, np.inf)
        r = np.minimum(r, np.minimum(t_floor, t_ceil))
        return np.where(r <= SCAN_MAX, r, np.inf)

    # -- collisions
    def collides(self, x: float, y: float, t: float) -> bool:
        b = self.box
        dx = np.maximum(np.maximum(b[:, 0] - x, 0.0), x - b[:, 2])
        dy = np.maximum(np.maximum(b[:, 1] - y, 0.0), y - b[:, 3])
        if np.any(dx * dx + dy * dy < BASE_RADIUS ** 2):
            return True
        p = self.person_at(t)
        return math.hypot(x - p[0], y - p[1]) < BASE_RADIUS + PERSON_RADIUS

    # -- the map
    def grid(self) -> np.ndarray:
        """(H, W) int8: 0 free, 100 occupied, -1 unknown (outside the walls)."""
        w, h = int(round(MAP_SIZE[0] / RESOLUTION)), int(round(MAP_SIZE[1] / RESOLUTION))
        xs = (np.arange(w) + 0.5) * RESOLUTION
        ys = (np.arange(h) + 0.5) * RESOLUTION
        gx, gy = np.meshgrid(xs, ys)
        out = np.full((h, w), -1, np.int8)
        x0, y0, x1, y1 = ROOM
        out[(gx > x0) & (gx < x1) & (gy > y0) & (gy < y1)] = 0
        for bx in self.box:
            out[(gx >= bx[0]) & (gx <= bx[2]) & (gy >= bx[1]) & (gy <= bx[3])] = 100
        return out


# ----------------------------------------------------------------------------------------------- camera
class Camera:
    """A 2.5-D ray caster per image column (level camera) plus the person as a billboard sprite."""

    def __init__(self, room: StandinRoom, sprite_path: Path) -> None:
        self.room = room
        v = np.arange(HEIGHT, dtype=np.float64)
        self.rows = v[:, None]
        with np.errstate(divide="ignore"):
            zf = np.where(v > CY, FY * CAM_Z / (v - CY), np.inf)
            zc = np.where(v < CY, FY * (CEILING - CAM_Z) / (CY - v), np.inf)
        self.floor_z = zf[:, None].astype(np.float32)
        self.ceil_z = zc[:, None].astype(np.float32)
        shade = lambda z: (1.0 / (1.0 + 0.06 * np.minimum(z, 30.0)))[:, None]  # noqa: E731
        self.floor_rgb = (FLOOR_RGB[None, :] * shade(np.where(np.isfinite(zf), zf, 30.0))).astype(np.float32)
        self.ceil_rgb = (CEILING_RGB[None, :] * (0.75 + 0.25 * shade(np.where(np.isfinite(zc), zc, 30.0)))
                         ).astype(np.float32)
        self.xn = (np.arange(WIDTH, dtype=np.float64) - CX) / FX  # column -> x/z in the optical frame
        self._cache_key = None
        self._cache = None
        d = np.load(sprite_path)
        rgba = d["rgba"]
        self.sprite_levels = [self._level(rgba, 1)]
        for f in (2, 4):  # box-filtered smaller copies (premultiplied), so far people are not aliased
            self.sprite_levels.append(self._level(rgba, f))
        self.sprite_h = float(d["height_m"])
        self.feet_row = int(d["feet_row"])
        self.centre_col = float(d["centre_col"])
        self.sprite_rows = rgba.shape[0]

    @staticmethod
    def _level(rgba: np.ndarray, f: int):
        h, w = rgba.shape[0] // f * f, rgba.shape[1] // f * f
        a = rgba[:h, :w, 3:4].astype(np.float32) / 255.0
        c = rgba[:h, :w, :3].astype(np.float32) * a
        if f > 1:
            a = a.reshape(h // f, f, w // f, f, 1).mean(axis=(1, 3))
            c = c.reshape(h // f, f, w // f, f, 3).mean(axis=(1, 3))
        return f, c, a  # premultiplied colour, alpha

    def background(self, cam_xy: np.ndarray, yaw: float):
        key = (round(cam_xy[0], 4), round(cam_xy[1], 4), round(yaw, 5))
        if key == self._cache_key:
            return self._cache
        fwd = np.array([math.cos(yaw), math.sin(yaw)])
        right = np.array([math.sin(yaw), -math.cos(yaw)])
        d = fwd[None, :] + self.xn[:, None] * right[None, :]  # t along d is the depth z
        o = np.broadcast_to(cam_xy, (WIDTH, 2))
        w = self.room
        tw, axw = w.cast_boxes(o, d, w.full)
        iw = np.argmin(tw, axis=1)
        cols = np.arange(WIDTH)
        zw = tw[cols, iw]
        face = axw[cols, iw]
        wall_rgb = w.rgb[w.full][iw] * np.where(face == 1, 1.0, 0.82)[:, None]
        wall_rgb = wall_rgb * (1.0 / (1.0 + 0.03 * zw))[:, None]
        v = self.rows
        v_ceil = CY - FY * (CEILING - CAM_Z) / zw
        v_floor = CY + FY * CAM_Z / zw
        floor = v > v_floor[None, :]
        ceil = v < v_ceil[None, :]
        depth = np.where(floor, self.floor_z, np.where(ceil, self.ceil_z, zw[None, :].astype(np.float32)))
        rgb = np.where(floor[..., None], self.floor_rgb[:, None, :],
                       np.where(ceil[..., None], self.ceil_rgb[:, None, :], wall_rgb[None, :, :].astype(np.float32)))
        low = ~w.full
        if low.any():  # furniture: a front face from the floor to its height, over the walls behind
            to, axo = w.cast_boxes(o, d, low)
            io = np.argmin(to, axis=1)
            zo = to[cols, io]
            seen = np.isfinite(zo) & (zo < zw) & (zo > 1e-3)
            if seen.any():
                zs = np.where(seen, zo, 1.0)
                h = w.height[low][io]
                top = CY - FY * (h - CAM_Z) / zs
                bottom = CY + FY * CAM_Z / zs
                m = seen[None, :] & (v >= top[None, :]) & (v <= bottom[None, :])
                orgb = w.rgb[low][io] * np.where(axo[cols, io] == 1, 1.0, 0.82)[:, None] / (1 + 0.06 * zs)[:, None]
                depth = np.where(m, zs[None, :].astype(np.float32), depth)
                rgb = np.where(m[..., None], orgb[None, :, :].astype(np.float32), rgb)
        rgb8 = np.clip(rgb, 0, 255).astype(np.uint8)
        depth = depth.astype(np.float32)
        self._cache_key, self._cache = key, (rgb8, depth)
        return self._cache

    def render(self, pose, t: float):
        """(rgb (H, W, 3) uint8, depth (H, W) float32 m with NaN = no return, person's depth or None)."""
        x, y, yaw = pose
        cam = np.array([x + CAM_X * math.cos(yaw), y + CAM_X * math.sin(yaw)])
        bg_rgb, bg_depth = self.background(cam, yaw)
        rgb, depth = bg_rgb.copy(), bg_depth.copy()
        zp = self._paste_person(rgb, depth, bg_depth, cam, yaw, t)
        depth[(depth < DEPTH_MIN) | (depth > DEPTH_MAX)] = np.nan
        return rgb, depth, zp

    def _paste_person(self, rgb, depth, bg_depth, cam, yaw, t):
        p = self.room.person_at(t)
        rel = p - cam
        z = rel[0] * math.cos(yaw) + rel[1] * math.sin(yaw)
        xr = rel[0] * math.sin(yaw) - rel[1] * math.cos(yaw)
        if z < 0.3:
            return None
        k = FY * (self.sprite_h / self.sprite_rows) / z  # image px per full-resolution sprite px
        level = self.sprite_levels[0]
        for lv in self.sprite_levels[1:]:
            if k * lv[0] <= 1.0:
                level = lv
        f, col, alpha = level
        kl = k * f  # image px per sprite px at this level
        u_c = CX + FX * xr / z
        v_floor_edge = CY + 0.5 + FY * CAM_Z / z  # the floor line under the person (pixel-edge coordinates)
        feet_edge = (self.feet_row + 1) / f  # the feet's lower edge in the level's rows
        cc = (self.centre_col + 0.5) / f  # the body's axis in the level's columns (edge coordinates)
        hs, ws = alpha.shape[:2]
        v0 = int(max(0, math.floor(v_floor_edge - feet_edge * kl)))
        v1 = int(min(HEIGHT, math.ceil(v_floor_edge + (hs - feet_edge) * kl)))
        u0 = int(max(0, math.floor(u_c + 0.5 - cc * kl)))
        u1 = int(min(WIDTH, math.ceil(u_c + 0.5 + (ws - cc) * kl)))
        if v0 >= v1 or u0 >= u1:
            return z
        sr = np.floor(feet_edge + (np.arange(v0, v1) + 0.5 - v_floor_edge) / kl).astype(np.int64)
        sc = np.floor(cc + (np.arange(u0, u1) + 0.5 - (u_c + 0.5)) / kl).astype(np.int64)
        okr, okc = (sr >= 0) & (sr < hs), (sc >= 0) & (sc < ws)
        sr, sc = np.clip(sr, 0, hs - 1), np.clip(sc, 0, ws - 1)
        a = alpha[sr[:, None], sc[None, :], 0] * (okr[:, None] & okc[None, :])
        a = a * (bg_depth[v0:v1, u0:u1] > z)  # nearer walls and furniture hide the person
        c = col[sr[:, None], sc[None, :]]
        region = rgb[v0:v1, u0:u1].astype(np.float32)
        out = c + (1.0 - a[..., None]) * region
        rgb[v0:v1, u0:u1] = np.clip(out, 0, 255).astype(np.uint8)
        dreg = depth[v0:v1, u0:u1]
        dreg[a >= 0.5] = z
        return z


# ----------------------------------------------------------------------------------------------- delays
class DelayLine:
    """Runs callables at their due (monotonic) times from one thread: a driver's publishing latency."""

    def __init__(self) -> None:
        self._heap, self._seq = [], 0
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="delay-line", daemon=True)
        self._thread.start()

    def put(self, delay: float, fn) -> None:
        with self._cv:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + delay, self._seq, fn))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._heap or self._heap[0][0] > time.monotonic()):
                    wait = None if not self._heap else max(0.0, self._heap[0][0] - time.monotonic())
                    self._cv.wait(wait)
                if self._stop:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:  # a publisher destroyed at shutdown
                pass

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()


# ----------------------------------------------------------------------------------------------- the robot
def tf_msg(stamp, parent: str, child: str, xyz, q=(0.0, 0.0, 0.0, 1.0)) -> TransformStamped:
    m = TransformStamped()
    m.header.stamp = stamp
    m.header.frame_id = parent
    m.child_frame_id = child
    m.transform.translation.x, m.transform.translation.y, m.transform.translation.z = (float(v) for v in xyz)
    r = m.transform.rotation
    r.x, r.y, r.z, r.w = (float(v) for v in q)
    return m


class StandIn:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stop_event = threading.Event()
        self.node = Node("standin_robot")  # the base driver, camera and laser drivers, map server
        self.nodes = [self.node]
        self.clock = self.node.get_clock()
        sx, sy, syaw = args.start
        if args.person is None:
            px, py = sx + 3.5 * math.cos(syaw), sy + 3.5 * math.sin(syaw)
        else:
            px, py = args.person
        person_yaw = math.atan2(sy - py, sx - px)  # facing the robot's start
        self.room = StandinRoom((px, py), person_yaw, args.person_sway)
        self.camera = Camera(self.room, args.sprite)
        self.delay = DelayLine()
        self.lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.log = open(args.log, "a", buffering=1) if args.log else None
        # state
        self.pose = (sx, sy, syaw)  # ground truth in map
        if self.room.collides(sx, sy, 0.0):
            self.node.get_logger().warning(f"the start {args.start} is in contact with the world")
        self.t = self.now()
        self.vel = (0.0, 0.0)  # the base's realised command (after latency and acceleration limit)
        self.measured = (0.0, 0.0)  # body velocity measured over the last step
        self.cmd = (0.0, 0.0)  # the command in force
        self.pending: list[tuple[float, float, float]] = []  # (effective time, v, w)
        self.first_move: float | None = None
        self.last_pose_log = -math.inf
        self.map_odom = tuple(args.amcl_offset) if args.amcl else (0.0, 0.0, 0.0)
        self.mount = args.laser_mount
        self.mount_rot = rot_from_rpy(*self.mount[3:])
        self._build_publishers()

    # -- time
    def now(self) -> float:
        return self.clock.now().nanoseconds * 1e-9

    def stamp(self, t: float):
        from builtin_interfaces.msg import Time as TimeMsg

        ns = int(round(t * 1e9))
        return TimeMsg(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

    # -- ROS interface
    def _build_publishers(self) -> None:
        a, n = self.args, self.node
        reliable = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                              history=HistoryPolicy.KEEP_LAST)
        best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT,
                                 durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
        sensor = best_effort if a.sensor_qos == "best_effort" else reliable
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
        tf_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                            history=HistoryPolicy.KEEP_LAST)
        cam_node = self._extra_node("head_camera_driver")  # its own node and thread, as a robot's camera driver
        self.pub_rgb = cam_node.create_publisher(Image, "/head_camera/rgb/image_raw", sensor)
        self.pub_rgb_info = cam_node.create_publisher(CameraInfo, "/head_camera/rgb/camera_info", sensor)
        self.pub_depth = cam_node.create_publisher(Image, "/head_camera/depth_registered/image_raw", sensor)
        self.pub_depth_info = cam_node.create_publisher(CameraInfo, "/head_camera/depth_registered/camera_info", sensor)
        self.pub_scan = n.create_publisher(LaserScan, "/base_scan", sensor)
        self.pub_odom = n.create_publisher(Odometry, "/odom", QoSProfile(depth=10))
        self.pub_tf = n.create_publisher(TFMessage, "/tf", tf_qos)
        self.pub_map = n.create_publisher(OccupancyGrid, "/map", latched)
        n.create_subscription(Twist, "/cmd_vel", self.on_cmd, 10)
        n.create_subscription(JointTrajectory, "/head_controller/joint_trajectory", self.on_head, 10)
        # static transforms
        t0 = self.stamp(self.now())
        head = [tf_msg(t0, p, c, o) for p, c, o in HEAD_CHAIN]
        optical = [tf_msg(t0, "head_camera_rgb_frame", OPTICAL, (0, 0, 0), OPTICAL_Q)]
        m = self.mount
        laser = [tf_msg(t0, "base_link", "laser_link", m[:3], quat_from_rpy(*m[3:]))]
        map_odom = [] if a.amcl else [tf_msg(t0, "map", "odom", (0, 0, 0))]
        self.static_pubs = []
        if a.multi_static:
            rsp = self._extra_node("robot_state_publisher")
            cam = self._extra_node("head_camera_driver")
            las = self._extra_node("laser_driver")
            groups = [(cam, optical), (las, laser), (n, map_odom)]
            if not a.split_tf:
                groups.insert(0, (rsp, head))
        else:
            groups = [(n, optical + laser + map_odom + ([] if a.split_tf else head))]
        for node, tfs in groups:
            if tfs:
                pub = node.create_publisher(TFMessage, "/tf_static", latched)
                pub.publish(TFMessage(transforms=tfs))
                self.static_pubs.append(pub)
        if a.split_tf:  # the head chain on /tf from a robot_state_publisher of its own, 30 Hz, own stamps
            rsp = self._extra_node("robot_state_publisher")
            pub = rsp.create_publisher(TFMessage, "/tf", tf_qos)

            def head_tf() -> None:
                s = rsp.get_clock().now().to_msg()
                pub.publish(TFMessage(transforms=[tf_msg(s, p, c, o) for p, c, o in HEAD_CHAIN]))

            rsp.create_timer(1.0 / a.head_tf_rate, head_tf)
        if a.amcl:
            amcl = self._extra_node("amcl")
            pub = amcl.create_publisher(TFMessage, "/tf", tf_qos)
            ox, oy, oyaw = self.map_odom

            def amcl_tf() -> None:
                s = self.stamp(amcl.get_clock().now().nanoseconds * 1e-9 + a.amcl_future)
                pub.publish(TFMessage(transforms=[tf_msg(s, "map", "odom", (ox, oy, 0.0),
                                                         quat_from_rpy(0, 0, oyaw))]))

            amcl_tf()
            amcl.create_timer(0.1, amcl_tf)
        # timers: the base's on the robot's node, the camera's on the camera driver's (each node is spun by its own
        # thread, so a slow render never holds up odometry)
        n.create_timer(1.0 / PHYSICS_HZ, self.on_physics)
        n.create_timer(1.0 / a.odom_rate, self.on_odom)
        n.create_timer(1.0 / SCAN_HZ, self.on_scan)
        cam_node.create_timer(1.0 / CAMERA_HZ, self.on_camera)
        self.pub_map.publish(self._map_msg())

    def _extra_node(self, name: str) -> Node:
        for node in self.nodes:
            if node.get_name() == name:
                return node
        node = Node(name)
        self.nodes.append(node)
        return node

    def _map_msg(self) -> OccupancyGrid:
        g = self.room.grid()
        m = OccupancyGrid()
        m.header.stamp = self.stamp(self.now())
        m.header.frame_id = "map"
        m.info.map_load_time = m.header.stamp
        m.info.resolution = RESOLUTION
        m.info.width, m.info.height = g.shape[1], g.shape[0]
        m.info.origin.orientation.w = 1.0
        m.data = array.array("b", g.ravel().tobytes())
        return m

    # -- the base
    def on_cmd(self, msg: Twist) -> None:
        with self.lock:
            t = self.now()
            self.advance(t)
            v, w = float(msg.linear.x), float(msg.angular.z)
            self.pending.append((t + self.args.cmd_latency, v, w))
            self.pending.sort(key=lambda c: c[0])
            if self.args.cmd_latency <= 0:
                self.advance(t)  # in force at once
        self.write({"t": t, "wall": time.monotonic(), "v": v, "w": w})

    def on_head(self, msg: JointTrajectory) -> None:
        self.write({"t": self.now(), "head": list(msg.joint_names), "positions": [list(p.positions) for p in msg.points],
                    "seconds": [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]})

    def advance(self, t: float) -> None:
        """Integrate the unicycle from self.t to t (call with the lock held)."""
        while self.t < t - 1e-12:
            step_end = min(t, self.t + 1.0 / PHYSICS_HZ)
            if self.pending and self.pending[0][0] < step_end:
                step_end = max(self.t, self.pending[0][0])
            self._integrate(step_end - self.t, step_end)
            self.t = step_end
            while self.pending and self.pending[0][0] <= self.t + 1e-12:
                _, v, w = self.pending.pop(0)
                self.cmd = (v, w)
        while self.pending and self.pending[0][0] <= self.t + 1e-12:
            _, v, w = self.pending.pop(0)
            self.cmd = (v, w)

    def _integrate(self, dt: float, t_end: float) -> None:
        if dt <= 0:
            return
        v, w = self.cmd
        lim = self.args.accel_limit
        if lim is not None:
            v = self.vel[0] + max(-lim[0] * dt, min(lim[0] * dt, v - self.vel[0]))
            w = self.vel[1] + max(-lim[1] * dt, min(lim[1] * dt, w - self.vel[1]))
        self.vel = (v, w)
        x, y, th = self.pose
        if abs(w) > 1e-9:
            nx = x + v / w * (math.sin(th + w * dt) - math.sin(th))
            ny = y - v / w * (math.cos(th + w * dt) - math.cos(th))
        else:
            nx, ny = x + v * dt * math.cos(th), y + v * dt * math.sin(th)
        nth = wrap(th + w * dt)
        if (nx, ny) != (x, y) and self.room.collides(nx, ny, t_end):
            nx, ny = x, y  # stop at contact; a round base still turns in place
            if self.args.accel_limit is not None:
                self.vel = (0.0, w)
        dist = math.hypot(nx - x, ny - y)
        mv = math.copysign(dist / dt, v) if dist > 0 else 0.0
        self.measured = (mv, w)
        if self.first_move is None and (dist > 1e-6 or abs(w) > 1e-6):
            self.first_move = t_end
        self.pose = (nx, ny, nth)

    def on_physics(self) -> None:
        with self.lock:
            t = self.now()
            self.advance(t)
            pose = self.pose
        if t - self.last_pose_log >= 1.0:
            self.last_pose_log = t
            self.write({"pose": [round(v, 5) for v in pose], "t": t})

    def on_odom(self) -> None:
        a = self.args
        with self.lock:
            t = self.now()
            self.advance(t)
            gt, (v, w), first = self.pose, self.measured, self.first_move
        if a.odom_stop_after is not None and first is not None and t > first + a.odom_stop_after:
            return  # the odometry driver died
        ox, oy, oyaw = compose(inverse(self.map_odom), gt)
        s = self.stamp(t)
        q = quat_from_rpy(0, 0, oyaw)
        m = Odometry()
        m.header.stamp, m.header.frame_id, m.child_frame_id = s, "odom", "base_link"
        p = m.pose.pose
        p.position.x, p.position.y = ox, oy
        p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = q
        m.pose.covariance[0] = m.pose.covariance[7] = 1e-3
        m.pose.covariance[35] = 1e-3
        m.twist.twist.linear.x, m.twist.twist.angular.z = v, w
        m.twist.covariance[0] = m.twist.covariance[35] = 1e-3
        tf = TFMessage(transforms=[tf_msg(s, "odom", "base_link", (ox, oy, 0.0), q)])

        def send() -> None:
            self.pub_odom.publish(m)
            self.pub_tf.publish(tf)

        if a.odom_latency > 0:
            self.delay.put(a.odom_latency, send)
        else:
            send()

    # -- sensors
    def on_scan(self) -> None:
        with self.lock:
            t = self.now()
            self.advance(t)
            x, y, yaw = self.pose
        ang = -SCAN_HALF + np.arange(SCAN_BEAMS) * (2 * SCAN_HALF / (SCAN_BEAMS - 1))
        beams = np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], 1)  # in laser_link
        r_base = rot_from_rpy(0, 0, yaw)
        dirs = beams @ (r_base @ self.mount_rot).T
        origin = np.array([x, y, 0.0]) + r_base @ np.array(self.mount[:3])
        ranges = self.room.laser(origin, dirs, t)
        m = LaserScan()
        m.header.stamp, m.header.frame_id = self.stamp(t), "laser_link"
        m.angle_min, m.angle_max = float(ang[0]), float(ang[-1])
        m.angle_increment = float(ang[1] - ang[0])
        m.time_increment = 0.0
        m.scan_time = 1.0 / SCAN_HZ
        m.range_min, m.range_max = SCAN_MIN, SCAN_MAX
        m.ranges = array.array("f", ranges.astype(np.float32).tobytes())
        self.pub_scan.publish(m)

    def _info(self, stamp) -> CameraInfo:
        m = CameraInfo()
        m.header.stamp, m.header.frame_id = stamp, OPTICAL
        m.width, m.height = WIDTH, HEIGHT
        m.distortion_model = "plumb_bob"
        m.d = [0.0] * 5
        m.k = [FX, 0.0, CX, 0.0, FY, CY, 0.0, 0.0, 1.0]
        m.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        m.p = [FX, 0.0, CX, 0.0, 0.0, FY, CY, 0.0, 0.0, 0.0, 1.0, 0.0]
        return m

    def on_camera(self) -> None:
        with self.lock:
            t = self.now()
            self.advance(t)
            pose = self.pose
        rgb, depth, _ = self.camera.render(pose, t)
        s = self.stamp(t)
        sd = self.stamp(t + self.args.depth_offset)
        im = Image()
        im.header.stamp, im.header.frame_id = s, OPTICAL
        im.height, im.width, im.encoding, im.step = HEIGHT, WIDTH, "rgb8", WIDTH * 3
        im.data = array.array("B", rgb.tobytes())
        dm = Image()
        dm.header.stamp, dm.header.frame_id = sd, OPTICAL
        dm.height, dm.width = HEIGHT, WIDTH
        if self.args.depth_encoding == "16UC1":
            mm = np.where(np.isfinite(depth), np.round(depth * 1000.0), 0).astype(np.uint16)
            dm.encoding, dm.step = "16UC1", WIDTH * 2
            dm.data = array.array("B", mm.tobytes())
        else:
            dm.encoding, dm.step = "32FC1", WIDTH * 4
            dm.data = array.array("B", depth.astype(np.float32).tobytes())
        dm.is_bigendian = im.is_bigendian = 0
        self.pub_rgb.publish(im)
        self.pub_rgb_info.publish(self._info(s))
        self.pub_depth.publish(dm)
        self.pub_depth_info.publish(self._info(sd))

    # -- log
    def write(self, rec: dict) -> None:
        if self.log is None:
            return
        with self.log_lock:
            if not self.log.closed:
                self.log.write(json.dumps(rec) + "\n")
                self.log.flush()

    def final(self) -> None:
        with self.lock:
            try:
                self.advance(self.now())
            except Exception:
                pass
            pose = self.pose
        self.write({"pose": [round(v, 5) for v in pose], "t": self.t, "final": True})
        with self.log_lock:
            if self.log is not None:
                self.log.close()


# ----------------------------------------------------------------------------------------------- main
def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="standin_robot.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A stand-in Fetch-like robot (base, laser, head RGB-D camera, map) over ROS 2, written "
                    "independently of the project. Defaults: a tidy simulator. Habit switches combine.",
        epilog="Environment: keep DDS on loopback (FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_loopback.xml, "
               "ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE unset).")
    ap.add_argument("--sensor-qos", choices=("reliable", "best_effort"), default="reliable",
                    help="QoS of the 4 camera topics and /base_scan: reliable (default, volatile, depth 5) or "
                         "best_effort (sensor-data QoS: BEST_EFFORT, VOLATILE, depth 5, as camera and laser drivers)")
    ap.add_argument("--amcl", action="store_true",
                    help="a localiser node ('amcl') publishes map -> odom on /tf at 10 Hz, future-dated by "
                         "--amcl-future, with the non-identity --amcl-offset (odometry drifted from the map); "
                         "without it map -> odom is the identity on /tf_static (a simulator)")
    ap.add_argument("--amcl-future", type=float, default=0.1, metavar="S",
                    help="with --amcl: the transform tolerance by which map -> odom is stamped ahead of now (s, "
                         "default 0.1)")
    ap.add_argument("--amcl-offset", type=lambda s: floats(s, 3, "--amcl-offset"), default=(0.3, 0.2, math.radians(5)),
                    metavar="X,Y,YAW", help="with --amcl: map -> odom (m, m, rad; default 0.3,0.2,0.0873); the "
                    "odometry pose is then inverse(map->odom) * the true map pose")
    ap.add_argument("--multi-static", action="store_true",
                    help="several /tf_static publishers in separate nodes, each latching only its own frames: "
                         "robot_state_publisher (base_link -> torso_lift_link -> ... -> head_camera_rgb_frame), "
                         "head_camera_driver (head_camera_rgb_frame -> head_camera_rgb_optical_frame), laser_driver "
                         "(base_link -> laser_link), and the base driver's map -> odom identity (without --amcl)")
    ap.add_argument("--split-tf", action="store_true",
                    help="/tf split between publishers: the base driver publishes odom -> base_link, a separate "
                         "robot_state_publisher node publishes the head chain base_link -> ... -> "
                         "head_camera_rgb_frame on /tf (dynamic, --head-tf-rate Hz, its own stamps) instead of "
                         "/tf_static")
    ap.add_argument("--head-tf-rate", type=float, default=30.0, metavar="HZ",
                    help="with --split-tf: rate of the head chain on /tf (default 30)")
    ap.add_argument("--depth-offset", type=float, default=0.0, metavar="S",
                    help="the depth image and its camera_info are stamped S s after the RGB image (unsynchronised "
                         "drivers, e.g. 0.003); the RGB camera_info always carries the RGB stamp")
    ap.add_argument("--odom-rate", type=float, default=50.0, metavar="HZ",
                    help="rate of /odom and of odom -> base_link on /tf (default 50)")
    ap.add_argument("--odom-latency", type=float, default=0.0, metavar="S",
                    help="each odometry message (and its odom -> base_link) carries its measurement's stamp but is "
                         "published S s later (default 0)")
    ap.add_argument("--odom-stop-after", type=float, default=None, metavar="S",
                    help="/odom and odom -> base_link stop S s after the robot first moves (the driver dies); the "
                         "base keeps executing the last command (no watchdog)")
    ap.add_argument("--cmd-latency", type=float, default=0.0, metavar="S",
                    help="a received /cmd_vel takes effect S s after it arrives (default 0; real bases 0.05-0.1)")
    ap.add_argument("--accel-limit", type=lambda s: floats(s, 2, "--accel-limit"), default=None, metavar="A,ALPHA",
                    help="the base's own acceleration limits (m/s^2, rad/s^2); default: none, the velocity follows "
                         "the command at once (after --cmd-latency)")
    ap.add_argument("--laser-mount", type=lambda s: floats(s, 6, "--laser-mount"),
                    default=(0.235, 0.0, 0.35, 0.0, 0.0, 0.0), metavar="X,Y,Z,ROLL,PITCH,YAW",
                    help="the laser's pose in base_link (m, rad; default 0.235,0,0.35,0,0,0); e.g. upside down: "
                         "roll=3.14159; the beams are in laser_link and base_link -> laser_link carries this pose")
    ap.add_argument("--depth-encoding", choices=("32FC1", "16UC1"), default="32FC1",
                    help="REP-118 depth: 32FC1 metres, NaN = no return (default), or 16UC1 millimetres, 0 = no return")
    ap.add_argument("--start", type=lambda s: floats(s, 3, "--start"), default=(1.5, 2.5, 0.0), metavar="X,Y,YAW",
                    help="the robot's start in the map (m, m, rad; default 1.5,2.5,0; the room's interior is "
                         "x 0.5..7.5, y 0.5..5.5)")
    ap.add_argument("--person", type=lambda s: floats(s, 2, "--person"), default=None, metavar="X,Y",
                    help="the person's position in the map (default: 3.5 m in front of the start); they face the "
                         "robot's start")
    ap.add_argument("--person-sway", type=float, default=0.02, metavar="M",
                    help="amplitude of the person's sideways sway (m, 5 s period; default 0.02, 0 = still)")
    ap.add_argument("--sprite", type=Path, default=SPRITE, help=f"the person sprite (default {SPRITE})")
    ap.add_argument("--log", type=Path, default=None, metavar="FILE.jsonl",
                    help="append a JSON line per received /cmd_vel ({t, wall, v, w}), a ground-truth pose line per "
                         "second ({pose: [x, y, yaw], t}) and a final pose line on exit ({..., final: true}); "
                         "every line flushed")
    ap.add_argument("--ready-file", type=Path, default=None, metavar="FILE",
                    help="written atomically (temp file + rename) once every publisher exists and the map was "
                         "published")
    a = ap.parse_args(argv)
    if a.odom_rate <= 0 or a.head_tf_rate <= 0:
        ap.error("--odom-rate and --head-tf-rate must be > 0")
    if a.odom_latency < 0 or a.cmd_latency < 0:
        ap.error("--odom-latency and --cmd-latency must be >= 0")
    if a.accel_limit is not None and min(a.accel_limit) <= 0:
        ap.error("--accel-limit values must be > 0")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    stop = threading.Event()

    def on_signal(signum, _frame) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    robot = StandIn(args)
    # one single-threaded executor and thread per node, as separate driver processes would be: rclpy's
    # multi-threaded executor walks its list of pending callbacks in Python at every wake, and with the camera's
    # renders queued it held the GIL long enough to stop odometry for up to 1 s beside the robot graph
    executors = []
    for n in robot.nodes:
        executor = SingleThreadedExecutor()
        executor.add_node(n)
        threading.Thread(target=executor.spin, name=f"spin-{n.get_name()}", daemon=True).start()
        executors.append(executor)
    if args.ready_file is not None:
        tmp = args.ready_file.with_name(args.ready_file.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"pid": os.getpid(), "t": robot.now(), "nodes": [n.get_name() for n in robot.nodes]}))
        os.replace(tmp, args.ready_file)
    print(f"[standin_robot] ready: pid {os.getpid()}, nodes {[n.get_name() for n in robot.nodes]}, "
          f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID')}", flush=True)
    while not stop.wait(0.1):
        pass
    robot.final()
    robot.delay.stop()
    # a clean DDS exit: the participant is destroyed, so the others forget its endpoints at once
    for executor in executors:
        executor.shutdown(timeout_sec=0.5)
    for n in robot.nodes:
        try:
            n.destroy_node()
        except Exception:
            pass
    try:
        ctx = rclpy.get_default_context()
        rclpy.shutdown()
        ctx.destroy()
    except Exception:
        pass
    sys.stdout.flush()
    os._exit(0)  # nothing left to run: skip the interpreter's slow teardown of the message libraries


if __name__ == "__main__":
    sys.exit(main())
