"""P-Ref, the privileged reference observer (docs/protocol.md §5).

It sees only ground-truth body geometry (a :class:`BodyTrack`: arrays, no labels or motion ids)
and the scene (navigable space and a ray caster), never labels, predictions or confidences. It
scores candidate viewpoints *relative to the performer* over the clip and keeps the best
relative configuration as the performer moves, as a smooth camera trajectory whose base stays
inside navigable space. A reference, not an oracle.

The relative frame is centred on the performer's (smoothed) pelvis and oriented either by the
smoothed body facing (``body``: follows turns) or by the clip's axis of facing (``axis``: a fixed
orientation that translates with the performer, so a person pacing back and forth keeps being
seen from the same side instead of the camera swinging around at every turn). Score of a
candidate (frame, distance ``d``, angle ``phi``), averaged over the sampled clip times where the
base point is navigable, times the navigable share:
``0.4 visible + 0.2 alignment + 0.15 distance + 0.15 framing + 0.1 clearance`` with
visible = share of body points in the image and unoccluded, alignment = (1 + cos a) / 2 with a
the angle between the body's facing and the direction to the camera,
distance = exp(-((d - 2.5) / 1.0)^2), framing = share of points inside the central 90 % of the
image, clearance = min(1, clearance / 0.5 m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_core.camera import CameraIntrinsics
from affectsim_core.geometry import look_at_rotation

DISTANCES = (1.8, 2.2, 2.6, 3.0, 3.5)  # m
FRAMES = ("body", "axis")
ANGLES = tuple(math.radians(a) for a in range(-150, 181, 30))  # rad from the body's front, + left
WEIGHTS = {"visible": 0.4, "alignment": 0.2, "distance": 0.15, "framing": 0.15, "clearance": 0.1}
MAX_STEP = 0.35  # m a reference camera base may move per 0.25 s frame (1.4 m/s)
SMOOTH_S = 1.0  # s, window of the moving average of the body frame


@dataclass(frozen=True)
class BodyTrack:
    """Ground-truth body geometry over the clip: ``times`` (T,) s, ``points`` (T, P, 3) m map,
    ``root`` (T, 2) pelvis floor position m map, ``yaw`` (T,) body facing rad map."""

    times: np.ndarray
    points: np.ndarray
    root: np.ndarray
    yaw: np.ndarray


@dataclass(frozen=True)
class ReferencePlan:
    """The chosen relative configuration and the camera trajectory (one pose per clip frame);
    ``centre`` (T, 2) and ``frame_yaw`` (T,) define the relative frame at each frame."""

    frame: str
    distance: float
    angle: float
    score: float
    base: np.ndarray  # (T, 2) m map, navigable
    camera_poses: np.ndarray  # (T, 4, 4) optical frame in map
    clamped: np.ndarray  # (T,) bool: the relative configuration could not be kept exactly
    centre: np.ndarray
    frame_yaw: np.ndarray


def smooth_frame(track: BodyTrack, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Moving-average body position (T, 2) and facing (T,): removes gait sway, keeps turns."""
    k = max(1, int(round(SMOOTH_S / dt)))
    pad = k // 2
    kernel = np.ones(k) / k

    def avg(x: np.ndarray) -> np.ndarray:
        xp = np.concatenate([np.repeat(x[:1], pad), x, np.repeat(x[-1:], k - 1 - pad)])
        return np.convolve(xp, kernel, mode="valid")

    yaw = np.unwrap(track.yaw)
    c, s = avg(np.cos(yaw)), avg(np.sin(yaw))
    return np.stack([avg(track.root[:, 0]), avg(track.root[:, 1])], 1), np.arctan2(s, c)


def frame_yaw(facing: np.ndarray, mode: str) -> np.ndarray:
    """Orientation (rad, map) of the relative frame at each time for ``mode`` "body" or "axis"."""
    if mode == "body":
        return facing
    axis = 0.5 * math.atan2(np.sin(2 * facing).mean(), np.cos(2 * facing).mean())  # facing up to a half turn
    if math.cos(axis - facing[0]) < 0:
        axis += math.pi
    return np.full_like(facing, axis)


def _camera(base: np.ndarray, height: float, target: np.ndarray) -> np.ndarray:
    pos = np.array([base[0], base[1], height])
    m = np.eye(4)
    m[:3, :3] = look_at_rotation(pos, target)
    m[:3, 3] = pos
    return m


def view_quality(pts: np.ndarray, cam: np.ndarray, k: CameraIntrinsics,
                 unoccluded: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[float, float]:
    """Share of body points (P, 3; map) inside the image of camera ``cam`` (4x4 optical frame in map)
    and not occluded by the scene, and share inside the central 90 % of the image."""
    local = (pts - cam[:3, 3]) @ cam[:3, :3]
    z = np.maximum(local[:, 2], 1e-6)
    u, v = k.fx * local[:, 0] / z + k.cx, k.fy * local[:, 1] / z + k.cy
    front = local[:, 2] > 0.2
    in_img = front & (u >= 0) & (u < k.width) & (v >= 0) & (v < k.height)
    central = front & (np.abs(u - k.cx) <= 0.45 * k.width) & (np.abs(v - k.cy) <= 0.45 * k.height)
    return float((in_img & unoccluded(cam[:3, 3], pts)).mean()), float(central.mean())


def _trajectory(centre: np.ndarray, yaw: np.ndarray, d: float, phi: float,
                nav: NavigableSpace) -> tuple[np.ndarray, np.ndarray] | None:
    """Base positions (T, 2) keeping (d, phi) where navigable and reachable at :data:`MAX_STEP`, and
    where it could not (T,) bool; None if no frame admits a navigable point."""
    ang = yaw + phi
    wanted = centre + d * np.stack([np.cos(ang), np.sin(ang)], 1)
    ok = nav.is_navigable(wanted)
    placed: list[np.ndarray | None] = list(wanted)
    miss = np.nonzero(~ok)[0]
    for t, p in zip(miss, _nearest_keeping(nav, centre[miss], ang[miss], d)):
        placed[t] = p
    valid = [t for t, p in enumerate(placed) if p is not None]
    if not valid:
        return None
    clamped = ~ok
    base = np.empty_like(wanted)
    for t, p in enumerate(placed):  # frames without a navigable point hold the nearest placed one in time
        if p is None:
            p = placed[min(valid, key=lambda v: abs(v - t))]
        if t > 0 and np.linalg.norm(p - base[t - 1]) > MAX_STEP:  # smooth: bounded speed, free straight moves
            step = p - base[t - 1]
            cand = base[t - 1] + step / np.linalg.norm(step) * MAX_STEP
            p = cand if nav.segment_free(base[t - 1], cand)[0] else base[t - 1]
            clamped[t] = True
        base[t] = p
    return base, clamped


def _score(track: BodyTrack, facing: np.ndarray, base: np.ndarray, clamped: np.ndarray, d: float, sel: np.ndarray,
           nav: NavigableSpace, unoccluded: Callable[[np.ndarray, np.ndarray], np.ndarray], height: float,
           k: CameraIntrinsics) -> float:
    """Mean view score over the sampled frames at the achieved base positions, times (1 + kept share) / 2."""
    clear = np.minimum(1.0, nav.clearance(base[sel]) / 0.5)
    total = 0.0
    for n, t in enumerate(np.nonzero(sel)[0]):
        pts = track.points[t]
        vis, central = view_quality(pts, _camera(base[t], height, pts.mean(0)), k, unoccluded)
        rel = base[t] - track.root[t]
        align = (1 + math.cos(math.atan2(rel[1], rel[0]) - facing[t])) / 2
        total += (WEIGHTS["visible"] * vis + WEIGHTS["alignment"] * align
                  + WEIGHTS["distance"] * math.exp(-((d - 2.5) / 1.0) ** 2) + WEIGHTS["framing"] * central
                  + WEIGHTS["clearance"] * clear[n])
    return total / sel.sum() * (1 + (~clamped).mean()) / 2


def plan_reference(track: BodyTrack, nav: NavigableSpace, unoccluded: Callable[[np.ndarray, np.ndarray], np.ndarray],
                   camera_height: float, intrinsics: CameraIntrinsics, score_frames: int = 8) -> ReferencePlan:
    """Choose the best relative viewpoint and the camera trajectory that keeps it (see module docstring)."""
    t_n = len(track.times)
    dt = float(np.median(np.diff(track.times))) if t_n > 1 else 0.25
    centre, facing = smooth_frame(track, dt)
    sel = np.zeros(t_n, bool)
    sel[np.round(np.linspace(0, t_n - 1, min(score_frames, t_n))).astype(int)] = True
    best = None
    for mode in FRAMES:
        yaw = frame_yaw(facing, mode)
        for d in DISTANCES:
            for phi in ANGLES:
                traj = _trajectory(centre, yaw, d, phi, nav)
                if traj is None:
                    continue
                score = _score(track, facing, *traj, d, sel, nav, unoccluded, camera_height, intrinsics)
                if best is None or score > best[0]:
                    best = (score, mode, d, phi, traj, yaw)
    if best is None:
        raise RuntimeError("no navigable reference viewpoint around the performer")
    score, mode, d, phi, (base, clamped), yaw = best
    poses = np.stack([_camera(base[t], camera_height, track.points[t].mean(0)) for t in range(t_n)])
    return ReferencePlan(mode, d, phi, float(score), base, poses, clamped, centre, yaw)


def _nearest_keeping(nav: NavigableSpace, centre: np.ndarray, ang: np.ndarray, d: float) -> list[np.ndarray | None]:
    """For each frame (centre (N, 2), direction ``ang`` (N,)), the navigable point closest to the wanted
    relative configuration: the same direction at shorter or longer distances first, then neighbouring
    directions; None where there is none (one batched navigability query)."""
    offsets = [(dd, da) for dd in (d - 0.3, d + 0.3, d - 0.6, d + 0.6, d - 0.9) for da in (0.0, 0.2, -0.2, 0.4, -0.4)
               if dd >= 1.0]
    if len(centre) == 0:
        return []
    dd = np.array([o[0] for o in offsets])
    a = ang[:, None] + np.array([o[1] for o in offsets])[None]
    pts = centre[:, None, :] + dd[None, :, None] * np.stack([np.cos(a), np.sin(a)], -1)
    ok = nav.is_navigable(pts.reshape(-1, 2)).reshape(len(centre), len(offsets))
    return [pts[n, int(np.argmax(ok[n]))] if ok[n].any() else None for n in range(len(centre))]
