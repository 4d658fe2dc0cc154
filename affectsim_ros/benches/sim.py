"""Simulator benchmark (``affectsim bench sim``): ratios measured side by side in one run.

1. render: backend RGB-D (one pass, metric depth) vs raw MuJoCo on the same model
   (``mjr_render`` + ``mjr_readPixels`` of both buffers; and ``mujoco.Renderer`` RGB then
   depth, for reference). Target ratio >= 0.9.
2. lockstep: discrete steps/s through ROS (action applied, 640x480 RGB-D rendered, published,
   received by a client) vs the same loop offline in-process. Targets: ratio >= 0.5, >= 25 steps/s.
3. free-run real-time factor while the head camera publishes at 15 Hz sim time. Target >= 1.0.
4. bridge resident memory (RSS).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import rclpy
from geometry_msgs.msg import Twist

from affectsim_bridge.backends import BACKENDS
from affectsim_bridge.backends.base import LaserSpec
from affectsim_bridge.backends.mujoco.renderer import mujoco
from affectsim_bridge.world.scene import load_scene
from affectsim_core.actions import Action
from affectsim_core.geometry import Pose2D
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.topics import TOPICS
from affectsim_ros.launcher import GraphProcesses
from affectsim_ros.benches import add_out, bench, positive_int

START = Pose2D(1.0, 2.5, 0.0)
TOUR = [Action.FORWARD] * 6 + [Action.TURN_LEFT] * 3 + [Action.FORWARD] * 4 + [Action.TURN_RIGHT] * 6


def _rates(fns: list, n: int, rounds: int = 4) -> list[float]:
    """Calls per second of each function, measured interleaved in ``rounds`` so load noise hits all alike."""
    for fn in fns:
        fn()  # warm up (the first render compiles shaders)
    spent = [0.0] * len(fns)
    per = max(1, n // rounds)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            for _ in range(per):
                fn()
            spent[i] += time.perf_counter() - t
    return [per * rounds / s for s in spent]


def bench_render(frames: int = 60) -> dict:
    backend = BACKENDS.create("mujoco")
    backend.load(load_scene("test_apartment"), START)
    k = backend.head_intrinsics
    m, d = backend.model, backend.data
    renderer = backend._renderer(k.width, k.height)  # same GL context and scene as the backend
    cam = mujoco.MjvCamera()
    cam.type, cam.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, backend._head_cam
    rgb = np.empty((k.height, k.width, 3), np.uint8)
    z = np.empty((k.height, k.width), np.float32)

    def raw_single_pass() -> None:
        renderer._gl.make_current()
        mujoco.mjv_updateScene(m, d, backend._opt, None, cam, mujoco.mjtCatBit.mjCAT_ALL.value, renderer._scene)
        mujoco.mjr_render(renderer._rect, renderer._scene, renderer._ctx)
        mujoco.mjr_readPixels(rgb, z, renderer._rect, renderer._ctx)

    r = mujoco.Renderer(m, k.height, k.width)

    def raw_two_pass() -> None:
        r.update_scene(d, backend._head_cam, backend._opt)
        r.disable_depth_rendering()
        r.render()
        r.enable_depth_rendering()
        r.render()

    backend_rate, raw_rate = _rates([backend.render_head_camera, raw_single_pass], frames)
    (two_pass,) = _rates([raw_two_pass], frames // 2)
    r.close()
    backend.close()
    return {"resolution": f"{k.width}x{k.height}", "backend_rgbd_fps": backend_rate, "raw_single_pass_fps": raw_rate,
            "raw_renderer_two_pass_fps": two_pass, "ratio_vs_raw": backend_rate / raw_rate,
            "ratio_vs_renderer": backend_rate / two_pass}


def bench_offline_steps(steps: int) -> float:
    backend = BACKENDS.create("mujoco")
    backend.load(load_scene("test_apartment"), START)

    spec = LaserSpec()
    backend.render_head_camera()
    t = time.perf_counter()
    for i in range(steps):
        backend.apply_action(TOUR[i % len(TOUR)])
        backend.render_head_camera()
        backend.laser_scan(spec)
    rate = steps / (time.perf_counter() - t)
    backend.close()
    return rate


def bench_ros(steps: int, free_run_s: float) -> dict:
    out: dict = {}
    log_dir = Path(tempfile.mkdtemp(prefix="affectsim-bench-"))
    with GraphProcesses("bench", nodes=("bridge",), args={"mode": "lockstep"}, log_dir=log_dir) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        try:
            client = BridgeClient("bench_client")
            client.wait_for_bridge(60)
            client.load("test_apartment", START.x, START.y, START.yaw)
            client.step_and_frame(Action.STOP)
            t = time.perf_counter()
            for i in range(steps):
                client.step_and_frame(TOUR[i % len(TOUR)])
            out["ros_steps_per_s"] = steps / (time.perf_counter() - t)
            proc = psutil.Process(g.pids()["bridge"])
            out["bridge_rss_mb_lockstep"] = proc.memory_info().rss / 2**20
            client.close()
        finally:
            rclpy.shutdown()
    for rtf in ("1.0", "10.0"):
        out.update({f"{k}@{rtf}": v for k, v in _free_run(rtf, free_run_s, log_dir).items()})
    return out


def _free_run(rtf: str, seconds: float, log_dir: Path) -> dict:
    """Achieved real-time factor and camera rate (sim time) with ``real_time_factor`` requested."""

    out: dict = {}
    with GraphProcesses("bench", nodes=("bridge",), args={"mode": "free_run", "real_time_factor": rtf}, log_dir=log_dir) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        try:
            client = BridgeClient("bench_client", topics=("rgb", "clock"))
            client.wait_for_bridge(60)
            client.wait_for("rgb", timeout=30)
            pub = client.node.create_publisher(Twist, TOPICS["cmd_vel"], 10)
            cmd = Twist()
            cmd.angular.z = 0.3
            clock0 = client.wait_for("clock", timeout=10)
            w0, s0 = time.perf_counter(), from_time(clock0.clock)
            stamps: set[float] = set()
            while time.perf_counter() - w0 < seconds:
                pub.publish(cmd)
                time.sleep(0.1)
                with client._cv:
                    stamps |= {from_time(m.header.stamp) for m in client.msgs["rgb"]}
            clock1 = client.wait_for("clock", timeout=5)
            wall = time.perf_counter() - w0
            sim = from_time(clock1.clock) - s0
            frames = len([t for t in stamps if s0 < t <= s0 + sim])
            out["rtf"] = sim / wall
            out["camera_hz_sim"] = frames / sim if sim > 0 else 0.0
            out["rss_mb"] = psutil.Process(g.pids()["bridge"]).memory_info().rss / 2**20
            client.close()
        finally:
            rclpy.shutdown()
    return out


def run(out: Path | None, frames: int = 60, steps: int = 100, free_run_s: float = 10.0, log=print) -> dict:
    log("[bench sim] 1/3 rendering: backend vs raw MuJoCo (same scene, 640x480 RGB-D)")
    render = bench_render(frames)
    log("[bench sim] 2/3 lockstep: offline loop")
    offline = bench_offline_steps(steps)
    log("[bench sim] 3/3 ROS graph: lockstep steps through DDS, then free-run")
    ros = bench_ros(steps, free_run_s)
    res = {
        "render": render,
        "lockstep": {"offline_steps_per_s": offline, "ros_steps_per_s": ros["ros_steps_per_s"],
                     "ratio_ros_vs_offline": ros["ros_steps_per_s"] / offline},
        "free_run": {"requested_1": {"real_time_factor": ros["rtf@1.0"], "camera_hz_sim": ros["camera_hz_sim@1.0"]},
                     "unthrottled": {"real_time_factor": ros["rtf@10.0"], "camera_hz_sim": ros["camera_hz_sim@10.0"]}},
        "bridge_rss_mb": {"lockstep": ros["bridge_rss_mb_lockstep"], "free_run": ros["rss_mb@1.0"]},
        "machine": {"cpus": os.cpu_count()},
    }
    targets = [
        ("render ratio backend/raw", render["ratio_vs_raw"], 0.9),
        ("lockstep ratio ROS/offline", res["lockstep"]["ratio_ros_vs_offline"], 0.5),
        ("lockstep steps/s through ROS", res["lockstep"]["ros_steps_per_s"], 25.0),
        ("free-run real-time factor (unthrottled, camera 15 Hz)", ros["rtf@10.0"], 1.0),
        ("free-run achieved / requested RTF 1.0", ros["rtf@1.0"], 0.98),
    ]
    res["targets"] = {name: {"value": v, "target": t, "met": bool(v >= t)} for name, v, t in targets}
    log("")
    log(f"render 640x480 RGB-D: backend {render['backend_rgbd_fps']:.1f} fps | raw single pass "
        f"{render['raw_single_pass_fps']:.1f} fps | mujoco.Renderer rgb+depth {render['raw_renderer_two_pass_fps']:.1f} fps")
    log(f"lockstep: ROS {ros['ros_steps_per_s']:.1f} steps/s | offline {offline:.1f} steps/s")
    log(f"free run, RTF 1.0 requested: achieved {ros['rtf@1.0']:.2f}, camera {ros['camera_hz_sim@1.0']:.1f} Hz (sim)")
    log(f"free run, unthrottled: achieved RTF {ros['rtf@10.0']:.2f}, camera {ros['camera_hz_sim@10.0']:.1f} Hz (sim)")
    log(f"bridge RSS: {ros['bridge_rss_mb_lockstep']:.0f} MB lockstep, {ros['rss_mb@1.0']:.0f} MB free run")
    for name, v, t in targets:
        log(f"  {'MET ' if v >= t else 'MISS'} {name}: {v:.2f} (target >= {t})")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(res, indent=2))
        os.replace(tmp, out)
        log(f"[bench sim] written {out}")
    return res


def _arguments(p) -> None:
    add_out(p)
    p.add_argument("--frames", type=positive_int, default=60, help="camera frames rendered per backend (default 60)")
    p.add_argument("--steps", type=positive_int, default=100, help="lockstep actions through the bridge (default 100)")
    p.add_argument("--free-run-seconds", type=float, default=10.0, help="s of the free-running bridge (default 10)")


@bench("sim", _arguments)
def main(ns) -> int:
    """Simulator throughput: rendering, lockstep actions and the free-running bridge's pace."""
    return 0 if run(ns.out, ns.frames, ns.steps, ns.free_run_seconds) else 1
