"""The cmd_vel base controller on a base with latency (``affectsim bench base``): not a test.

A unicycle in continuous time (1 ms steps): odometry sampled at ``hz`` reaches the controller
ODOM_LATENCY_S after its stamp; the command it answers acts ``latency`` s later and holds until the
next one acts; the base reaches a slip gain (uniform in SLIP) x the command, its odometry pose and twist
carry small noise (seeded). For command latency 0 / 50 / 100 ms x odometry 10 / 20 / 50 Hz, FORWARD
and TURN_LEFT, over RUNS runs: the error at rest (mm / deg, signed: + overshoot), the robot time per
primitive (s, to the ending), the largest commanded acceleration between consecutive commands (the
caller's final zero included; m/s^2 / rad/s^2 against the limit) and the endings, for today's
controller (``_LegacyController``, frozen), the new one at its default ``latency`` (measured velocity
on) and the new one told the true latency.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np

from affectsim_core.actions import Action
from affectsim_core.atomic import write_json
from affectsim_core.geometry import Pose2D, wrap_angle
from affectsim_core.protocol import FORWARD_M, TURN_RAD
from affectsim_eval.scoring import markdown as md
from affectsim_nav.base_control import BaseLimits, Ending, PrimitiveController
from affectsim_ros.benches import add_out, bench, positive_int

H = 0.001  # s: the plant's integration step
ODOM_LATENCY_S = 0.01  # s from an odometry stamp to the controller
LATENCIES, RATES = (0.0, 0.05, 0.1), (10.0, 20.0, 50.0)  # s of command latency, Hz of odometry
ACTIONS = (Action.FORWARD, Action.TURN_LEFT)
RUNS = 20
SLIP = (0.95, 1.0)  # the base reaches this fraction of the command (uniform)
NOISE = {"x": 0.0002, "yaw": math.radians(0.01), "v": 0.002, "w": 0.004}  # odometry noise (m, rad, m/s, rad/s)
CONTROLLERS = ("legacy", "new", "new_matched")


class _LegacyController(PrimitiveController):
    """The controller before the latency-aware profile, frozen for comparison (its ``update`` verbatim)."""

    def update(self, pose, t, free_ahead=math.inf, *, velocity=None):
        dt = max(0.0, t - self._t)
        self._t = t
        lim = self.lim
        prog = self.progress(pose)
        left = self.target() - prog - dt * (self.cmd[0] if self.action == Action.FORWARD else abs(self.cmd[1]))
        if prog > self._progress + (0.005 if self.action == Action.FORWARD else 0.01):
            self._progress, self._progress_t = prog, t
        tol = lim.position_tolerance if self.action == Action.FORWARD else lim.angle_tolerance
        if left <= tol:
            return self._put(0.0, 0.0, Ending.DONE)
        if t - self.t0 > lim.action_timeout:
            return self._put(0.0, 0.0, Ending.TIMEOUT)
        if t - self._progress_t > lim.stall_s:
            return self._put(0.0, 0.0, Ending.BLOCKED)
        if self.action == Action.FORWARD:
            if free_ahead < lim.safety_distance:
                return self._put(0.0, 0.0, Ending.BLOCKED)
            v = min(lim.max_linear, math.sqrt(2.0 * lim.linear_accel * left), self.cmd[0] + lim.linear_accel * max(dt, 0.02))
            w = float(np.clip(2.0 * wrap_angle(self.start.yaw - pose.yaw), -lim.max_angular, lim.max_angular))
            return self._put(v, w, None)
        sign = 1.0 if self.action == Action.TURN_LEFT else -1.0
        w = min(lim.max_angular, math.sqrt(2.0 * lim.angular_accel * left),
                abs(self.cmd[1]) + lim.angular_accel * max(dt, 0.02))
        return self._put(0.0, sign * w, None)

    def _put(self, v: float, w: float, ending):
        self.cmd = (v, w)
        return v, w, ending


def _run_once(ctrl: PrimitiveController, action: Action, latency: float, hz: float,
              rng: np.random.Generator) -> dict:
    """One primitive on the plant (module docstring); progress in m (FORWARD) or rad (turns)."""
    start = ctrl.start
    x, y, yaw, applied = start.x, start.y, start.yaw, (0.0, 0.0)
    gain = rng.uniform(*SLIP)
    period, lo, lc = round(1.0 / hz / H), round(ODOM_LATENCY_S / H), round(latency / H)
    odom, queue, cmds, end = [], [], [], None
    for n in range(round((ctrl.lim.action_timeout + 3.0) / H)):
        vb, wb = gain * applied[0], gain * applied[1]
        if end is None and n % period == 0:
            pose = Pose2D(x + rng.normal(0, NOISE["x"]), y + rng.normal(0, NOISE["x"]), yaw + rng.normal(0, NOISE["yaw"]))
            vel = (vb + rng.normal(0, NOISE["v"]), wb + rng.normal(0, NOISE["w"]))
            odom.append((n + lo, n * H, pose, vel))
        while end is None and odom and odom[0][0] == n:
            _, stamp, pose, vel = odom.pop(0)
            v, w, ending = ctrl.update(pose, stamp, math.inf, velocity=vel)
            cmds += [(n * H, v, w)] + ([(n * H, 0.0, 0.0)] if ending is not None else [])  # the caller's zero
            queue.append((n + lc, v, w))
            if ending is not None:
                queue.append((n + lc, 0.0, 0.0))
                end = (ending, stamp - ctrl.t0, n)
        while queue and queue[0][0] == n:
            applied = queue.pop(0)[1:]
        vb, wb = gain * applied[0], gain * applied[1]
        mid = yaw + 0.5 * wb * H
        x, y, yaw = x + vb * H * math.cos(mid), y + vb * H * math.sin(mid), yaw + wb * H
        if end is not None and n >= end[2] + round(1.0 / H):
            break
    c = np.array(cmds)
    dt = np.diff(c[:, 0])
    col, limit = (1, ctrl.lim.linear_accel) if action == Action.FORWARD else (2, ctrl.lim.angular_accel)
    dv = np.abs(np.diff(c[:, col]))
    accel = float(np.max(np.where(dt > 0, dv / np.where(dt > 0, dt, 1.0), np.where(dv > 0, math.inf, 0.0))))
    if action == Action.FORWARD:
        err = (x - start.x) * math.cos(start.yaw) + (y - start.y) * math.sin(start.yaw) - FORWARD_M
    else:
        err = wrap_angle(yaw - start.yaw) - TURN_RAD
    return {"error": err, "time_s": end[1], "accel": accel, "accel_limit": limit, "ending": end[0].value}


def _controller(kind: str, action: Action, latency: float) -> PrimitiveController:
    start = Pose2D(1.0, 2.0, 0.7)
    if kind == "legacy":
        return _LegacyController(action, start, 0.0, BaseLimits())
    lim = BaseLimits(latency=latency + ODOM_LATENCY_S) if kind == "new_matched" else BaseLimits()
    return PrimitiveController(action, start, 0.0, lim)


def run(out: Path | None = None, runs: int = RUNS, seed: int = 0, log=print) -> dict:
    """The table of the module docstring (Markdown to ``log``); JSON to ``out`` when given."""
    rows = []
    for action in ACTIONS:
        unit = 1000.0 if action == Action.FORWARD else math.degrees(1.0)
        for latency in LATENCIES:
            for hz in RATES:
                for kind in CONTROLLERS:
                    rng = np.random.default_rng([seed, int(action), round(latency * 1000), int(hz)])
                    res = [_run_once(_controller(kind, action, latency), action, latency, hz, rng) for _ in range(runs)]
                    err = np.array([r["error"] for r in res]) * unit
                    rows.append({"action": action.name, "latency_ms": round(latency * 1000), "odom_hz": hz,
                                 "controller": kind, "error_mean": float(err.mean()),
                                 "error_max_abs": float(np.abs(err).max()),
                                 "time_s_mean": float(np.mean([r["time_s"] for r in res])),
                                 "accel_max": max(r["accel"] for r in res), "accel_limit": res[0]["accel_limit"],
                                 "endings": dict(Counter(r["ending"] for r in res))})
    res = {"runs": runs, "seed": seed, "odom_latency_s": ODOM_LATENCY_S, "slip": SLIP, "noise": NOISE, "rows": rows}
    log(markdown(res))
    if out is not None:
        write_json(Path(out), res, indent=2)
        log(f"[bench base] written {out}")
    return res


def markdown(res: dict) -> str:
    """The rows as one Markdown table per action."""
    lines = []
    for action, unit, acc in (("FORWARD", "mm", "m/s^2"), ("TURN_LEFT", "deg", "rad/s^2")):
        head = ["cmd latency", "odom", "controller", "error mean", "abs max", "time s", f"max accel {acc} (limit)",
                "endings"]
        rows = []
        for r in (r for r in res["rows"] if r["action"] == action):
            endings = ", ".join(f"{k} {v}" for k, v in sorted(r["endings"].items()))
            accel = "step" if math.isinf(r["accel_max"]) else f"{r['accel_max']:.2f}"
            rows.append([f"{r['latency_ms']} ms", f"{r['odom_hz']:.0f} Hz", r["controller"], f"{r['error_mean']:+.2f}",
                         md.num(r["error_max_abs"]), md.num(r["time_s_mean"]), f"{accel} ({r['accel_limit']:.1f})",
                         endings])
        lines += [f"\n### {action} ({res['runs']} runs each; error at rest in {unit}, + = overshoot)\n",
                  md.table(head, rows, left=len(head))]
    return "\n".join(lines)


def _arguments(p) -> None:
    add_out(p)
    p.add_argument("--runs", type=positive_int, default=RUNS, help=f"runs per primitive and condition (default {RUNS})")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated odometry noise (default 0)")


@bench("base", _arguments)
def main(ns) -> int:
    """The cmd_vel controller on a base with latency: overshoot, time per primitive, accelerations."""
    run(ns.out, ns.runs, ns.seed)
    return 0
