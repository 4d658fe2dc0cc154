"""Scripted tour: drive the robot through every reachable room over ROS and write a contact sheet.

The driver is deliberately simple: it plans on the scene's navigable space (the same
map the bridge publishes on /map) and follows the path with discrete lockstep actions,
re-aiming from the pose each action returns.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import Scene
from affectsim_core.actions import Action
from affectsim_core.contact_sheet import contact_sheet, map_image, save_png
from affectsim_core.geometry import wrap_angle
from affectsim_core.ros.conversions import image_to_array


def tour_waypoints(scene: Scene, nav: NavigableSpace, start: np.ndarray) -> list[np.ndarray]:
    """A navigable point near each reachable room's centre, visited nearest-first, then back to start."""
    points = []
    for room in scene.rooms:
        c = np.array(room.centroid)
        cand = c + np.stack(np.meshgrid(np.linspace(-1.5, 1.5, 13), np.linspace(-1.5, 1.5, 13)), -1).reshape(-1, 2)
        cand = cand[room.contains(cand)]
        cand = cand[nav.is_free(cand)]
        cand = cand[np.argsort(np.linalg.norm(cand - c, axis=1))][:10]
        ok = [p for p in cand if nav.is_navigable(p)[0]]
        if ok:
            points.append(ok[0])
    order, cur = [], start
    while points:
        k = int(np.argmin([nav.geodesic_distance(cur, p) for p in points]))
        cur = points.pop(k)
        order.append(cur)
    return order + [start]


def actions_toward(pose, target: np.ndarray) -> Action:
    """Greedy discrete controller: turn until within 7.5 deg of the bearing, then go forward."""
    bearing = math.atan2(target[1] - pose.y, target[0] - pose.x)
    err = wrap_angle(bearing - pose.theta)
    if abs(err) > math.radians(7.5):
        return Action.TURN_LEFT if err > 0 else Action.TURN_RIGHT
    return Action.FORWARD


def run_tour(client, scene: Scene, nav: NavigableSpace, start_pose, out_dir: Path, frame_every: int = 10,
             max_steps: int = 900, log=print) -> dict:
    """Drive ``client`` (a :class:`BridgeClient`) on the tour; write ``contact_sheet.png`` and ``tour.json``."""
    pose = start_pose
    start = np.array([pose.x, pose.y])
    traj, frames, steps, clipped = [start.copy()], [], 0, 0
    for wp_i, wp in enumerate(tour_waypoints(scene, nav, start)):
        path = nav.shortest_path([pose.x, pose.y], wp)[1:]
        for target in path:
            stuck = 0
            while np.linalg.norm(target - [pose.x, pose.y]) > 0.2 and steps < max_steps and stuck < 4:
                action = actions_toward(pose, target)
                res, rgb, depth = client.step_and_frame(action)
                steps += 1
                clipped += int(res.clipped)
                stuck = stuck + 1 if res.clipped else 0
                pose = res.pose
                traj.append([pose.x, pose.y])
                if steps % frame_every == 0:
                    room = scene.room_at((pose.x, pose.y))
                    frames.append((image_to_array(rgb).copy(), image_to_array(depth).copy(),
                                   f"t={steps * 0.25:.2f}s {room.id if room else '?'} ({pose.x:.1f}, {pose.y:.1f})"))
        log(f"[tour] waypoint {wp_i} reached after {steps} actions ({clipped} clipped)")
    grid, origin = nav.occupancy_grid(0.05)
    labels = [(r.id, *r.centroid) for r in scene.rooms]
    top = map_image(grid, origin, 0.05, np.array(traj), labels=labels)
    keep = [frames[i] for i in np.unique(np.linspace(0, len(frames) - 1, min(12, len(frames))).astype(int))]
    out_dir.mkdir(parents=True, exist_ok=True)
    save_png(contact_sheet(keep, top), out_dir / "contact_sheet.png")
    length = float(np.sum(np.linalg.norm(np.diff(np.array(traj), axis=0), axis=1)))
    summary = {"scene": scene.id, "actions": steps, "clipped": clipped, "path_m": round(length, 3),
               "frames_on_sheet": len(keep), "rooms_visited": sorted({r.id for p in traj
                                                                       if (r := scene.room_at(tuple(p)))})}
    (out_dir / "tour.json").write_text(json.dumps(summary, indent=2))
    return summary
