"""Soak benchmark (``affectsim bench soak``): the robot stack under load and under attack, mixed, for an hour.

The stack (bridge in lockstep, nav, perception) runs as users start it (:mod:`affectsim_ros.launcher`).
The run is a sequence of cycles, each a hostile round followed by as long a lockstep block, so that
the workload of the run's last half is the workload of its first (a leak shows as a trend, not as
the warm-up of a new phase):

- **Hostile round**: the bad requests of issue 14 mixed with valid ones: over-budget and NaN-camera
  ``RenderViews``; ``LoadWorld`` with two targets, none, duplicate ids, a person in a wall or on the
  robot, an absurd phase, a path-like motion id or scene; an unknown action; ``AcquireObservation``
  with a million clip frames, an oversized id, an unknown policy; ``Recognize`` with 400 frames,
  7 frames, lying image headers, unknown recognizers; and valid loads, renders (every fourth round
  the largest reply the limits admit: :data:`LARGEST_VIEWS` full frames), recognitions and
  acquisitions (one cancelled). Every bad request must be refused with a reason and every valid one
  must succeed. In the first cycle the bridge is paused for :data:`STALL_S` s (past the DDS lease)
  while an action is pending: it must be applied once.
- **Lockstep block**: seeded random actions back to back in the world of a test episode (people
  replaying their clips), the next episode's world every :data:`RELOAD_EVERY` actions. Every reply
  must succeed with a stamp 0.25 s after the last, and every :data:`FRAME_EVERY`-th action's camera
  frame must arrive.

Every node's resident memory (RSS) is sampled every :data:`SAMPLE_S` s (the maximum, and the trend
of all samples, reported) and at the end of every cycle, when no request is in flight (a *settled*
sample). A reply in flight is transient: one 1.2 GB sample of the largest reply near the end of a
30-minute window moves a least-squares slope by ~0.8 MB/min, so the leak check uses the settled
samples. At the end every node must still run and the least-squares slope of each node's settled
RSS over the run's last :data:`SLOPE_WINDOW_MIN` minutes must stay below
:data:`MAX_SLOPE_MB_PER_MIN`; the report gives RSS at the start, the middle and the end, the maximum,
both slopes and the sockets of the graph (``ss``). Nothing here is timed against a target: it counts
failures.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import psutil
import rclpy
from geometry_msgs.msg import Pose
from geometry_msgs.msg import Pose2D as Pose2DMsg

from affectsim_bridge.bridge_node import RENDER_BUDGET_BYTES
from affectsim_core.actions import Action
from affectsim_core.camera import FETCH_HEAD_HEIGHT, FETCH_HEAD_WIDTH
from affectsim_core.atomic import write_json
from affectsim_core.errors import AffectSimError
from affectsim_core.protocol import CLIP_FRAMES, CLIP_SIZE, STEP_SECONDS
from affectsim_core.ros import calls
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.conversions import from_time, image_msg, to_time
from affectsim_core.ros.env import ensure_loopback
from affectsim_core.ros.observer_client import GraphError, ObserverClient
from affectsim_core.ros.topics import SERVICES
from affectsim_eval.run.config import DATA_DIR, EvalData
from affectsim_eval.dataset.episodes import load_split
from affectsim_interfaces.action import AcquireObservation, Recognize
from affectsim_interfaces.msg import HumanPlacement
from affectsim_interfaces.srv import ApplyAction, LoadWorld, RenderViews
from affectsim_ros.launcher import GraphProcesses
from affectsim_ros.benches import add_out, bench, number

RELOAD_EVERY = 200  # lockstep actions per world
FRAME_EVERY = 10  # every n-th action the client also waits for its camera frame
SAMPLE_S = 10.0  # s between RSS samples
STALL_S = 25.0  # s the bridge is paused once in the hostile phase (the DDS lease is 20 s)
WORLDS = 10  # test episodes whose worlds the lockstep phase cycles through
TIMEOUT_S = 120.0  # s, any one request
RESULT_TIMEOUT_S = 600.0  # s, an action's result (an acquisition searches for minutes)
LARGEST_VIEWS = RENDER_BUDGET_BYTES // (FETCH_HEAD_WIDTH * FETCH_HEAD_HEIGHT * 3)  # full head-camera frames in the largest RenderViews reply
SLOPE_WINDOW_MIN = 30.0  # min, the end of the run whose RSS trend is checked
MAX_MINUTES = 24 * 60.0  # the longest soak the option admits
MAX_SLOPE_MB_PER_MIN = 0.5  # MB (10^6 bytes) per minute, the most any node's RSS may rise over that window


class Soak:
    """Clients of the running stack on one node, and the tallies of one soak."""

    def __init__(self, graph: GraphProcesses, data: EvalData, episodes: list) -> None:
        self.graph = graph
        self.client = BridgeClient("soak", topics=("rgb",), keep=5)
        node = self.client.node
        self.load_cli = node.create_client(LoadWorld, SERVICES["load_world"])
        self.step_cli = node.create_client(ApplyAction, SERVICES["apply_action"])
        self.render_cli = node.create_client(RenderViews, SERVICES["render_views"])
        self.observer = ObserverClient(node, TIMEOUT_S)  # the nav and perception actions
        self.data = data
        self.episodes = episodes
        self.counts: Counter = Counter()  # "<case> ok" / "<case> FAILED"
        self.failures: list[str] = []
        self.stamp: float | None = 0.0  # sim time of the last state; None after the nav node moved the robot
        self.actions = 0  # lockstep actions so far

    def wait_ready(self) -> None:
        self.client.wait_for_bridge(180)
        self.observer.wait_for_servers(180)

    def check(self, case: str, ok: bool, detail: str = "") -> None:
        self.counts[f"{case} {'ok' if ok else 'FAILED'}"] += 1
        if not ok and len(self.failures) < 50:
            self.failures.append(f"{case}: {detail}")

    # ------------------------------------------------------------------ requests
    def load_episode(self, k: int):
        """Load the world of the k-th episode (cyclically); returns the robot's start pose."""
        ep = self.episodes[k % len(self.episodes)]
        humans = [dict(id=h.role, x=float(h.x), y=float(h.y), yaw=float(h.yaw), is_target=h.role == "target",
                       motion_id=h.motion_id, phase=float(h.phase)) for h in ep.humans]
        res = self.client.load(str(self.data.scene(ep.scene_id).source), ep.start.x, ep.start.y, ep.start.yaw,
                               humans, timeout=TIMEOUT_S)
        self.check("load_world valid", res.success, res.message)
        self.stamp = from_time(res.stamp)
        return ep.start

    def step(self, action: int, frame: bool = False) -> None:
        res = self.client.apply(action, timeout=TIMEOUT_S)
        t = from_time(res.stamp)
        after = self.stamp is None or math.isclose(t, self.stamp + STEP_SECONDS, abs_tol=1e-6)
        self.check("apply_action valid", res.success and after,
                   f"success={res.success} stamp {t} after {self.stamp}: {res.message}")
        self.stamp = t
        if frame:
            try:
                self.client.wait_for_stamp("rgb", res.stamp, timeout=30)
                self.check("camera frame", True)
            except TimeoutError as exc:
                self.check("camera frame", False, str(exc))

    def refused(self, case: str, cli, req, expect: str) -> None:
        res = calls.call(cli, req, TIMEOUT_S, case)
        self.check(case, not res.success and expect in res.message, res.message[:200])

    def goal(self, case: str, goal, ok: bool, expect: str = "", cancel_after: float = 0.0):
        """Send an ``AcquireObservation`` or ``Recognize`` goal (cancelled ``cancel_after`` s after its
        acceptance when nonzero) and check its raw result: a valid goal must succeed, a bad one must be
        refused naming ``expect``."""
        key = "acquire_observation" if isinstance(goal, AcquireObservation.Goal) else "recognize"
        try:
            if not cancel_after:
                res = self.observer.send(key, goal, timeout=RESULT_TIMEOUT_S)
            else:
                handle = self.observer.start(key, goal)
                time.sleep(cancel_after)
                self.observer.cancel(handle, key=key)
                res = self.observer.result(key, handle, RESULT_TIMEOUT_S)
        except GraphError as exc:  # rejected
            self.check(case, False, str(exc))
            return None
        if key == "acquire_observation":
            good = res.outcome in ("handoff", "budget_exhausted") if ok else (expect in res.message)
            if cancel_after:
                good = res.outcome == "cancelled"
            self.check(case, good, f"{res.outcome}: {res.message[:200]}")
        else:
            self.check(case, bool(res.predictions) if ok else (expect in res.message and not res.predictions),
                       res.message[:200])
        return res

    # ------------------------------------------------------------------ phases
    def lockstep(self, seconds: float, rng: np.random.Generator) -> int:
        """Random actions for ``seconds``; the world changes every RELOAD_EVERY actions of the run."""
        end, n = time.monotonic() + seconds, 0
        while n == 0 or time.monotonic() < end:
            if self.actions % RELOAD_EVERY == 0:
                self.load_episode(self.actions // RELOAD_EVERY)
            action = int(rng.choice([Action.FORWARD, Action.TURN_LEFT, Action.TURN_RIGHT], p=[0.5, 0.25, 0.25]))
            self.step(action, frame=self.actions % FRAME_EVERY == 0)
            self.actions += 1
            n += 1
        return n

    def hostile_round(self, k: int) -> None:
        person = dict(id="a", x=3.5, y=2.5, yaw=0.0, appearance=0, is_target=True, motion_id="", phase=0.0)
        bad_people = (([person, dict(person, id="b", y=1.5)], "exactly one target"),
                      ([dict(person, is_target=False)], "exactly one target"),
                      ([person, dict(person, is_target=False)], "unique ids"),
                      ([dict(person, x=0.0)], "not inside a wall"),
                      ([dict(person, x=1.05)], "off the robot's base"),
                      ([dict(person, phase=1e300)], "phase"),
                      ([dict(person, motion_id="../../../etc/passwd")], "motion"))
        for people, expect in bad_people:
            req = LoadWorld.Request(scene="test_apartment", robot_pose=Pose2DMsg(x=1.0, y=2.5))
            req.humans = [HumanPlacement(**p) for p in people]
            self.refused("load_world hostile", self.load_cli, req, expect)
        self.refused("load_world hostile", self.load_cli,
                     LoadWorld.Request(scene="../../../etc/passwd", robot_pose=Pose2DMsg(x=1.0, y=2.5)), "scene")
        self.refused("apply_action hostile", self.step_cli, ApplyAction.Request(action=9), "action")
        huge = RenderViews.Request(size=4096, times=[0.0] * 512, head_tilts=[0.0] * 512,
                                   robot_poses=[Pose2DMsg(x=1.0, y=2.5)] * 512)
        self.refused("render_views hostile", self.render_cli, huge, "bytes")
        nan_camera = Pose()
        nan_camera.position.z, nan_camera.orientation.w = float("nan"), 1.0
        self.refused("render_views hostile", self.render_cli,
                     RenderViews.Request(size=224, times=[0.0], head_tilts=[0.0], robot_poses=[Pose2DMsg(x=1.0, y=2.5)],
                                         cameras=[nan_camera]), "cameras[0]")

        start = self.load_episode(k)  # valid requests between the bad ones
        res = calls.call(self.render_cli, RenderViews.Request(size=224, times=[0.0, 0.5], head_tilts=[0.0, 0.0],
                                                              robot_poses=[Pose2DMsg(x=start.x, y=start.y)] * 2),
                         TIMEOUT_S, "render_views")
        self.check("render_views valid", res.success and len(res.frames) == 2, res.message)
        if k % 4 == 0:  # the largest reply the limits admit; what it held must be freed (the RSS slope)
            n = LARGEST_VIEWS
            res = calls.call(self.render_cli, RenderViews.Request(size=0, times=[0.0] * n, head_tilts=[0.0] * n,
                                                                  robot_poses=[Pose2DMsg(x=start.x, y=start.y)] * n),
                             TIMEOUT_S, "render_views largest")
            self.check("render_views largest", res.success and len(res.frames) == n, res.message)
        del res
        for _ in range(20):
            self.step(Action.TURN_LEFT)

        for goal, expect in ((AcquireObservation.Goal(episode_id="soak", clip_frames=1_000_000), "clip_frames"),
                             (AcquireObservation.Goal(episode_id="x" * 10_000, clip_frames=8), "episode_id"),
                             (AcquireObservation.Goal(episode_id="soak", policy="nope", clip_frames=8), "policy")):
            self.goal("acquire_observation hostile", goal, ok=False, expect=expect)
        zeros = [image_msg(np.zeros((CLIP_SIZE, CLIP_SIZE, 3), np.uint8), "rgb8", "clip", to_time(0.0))
                 for _ in range(CLIP_FRAMES)]
        lying = [image_msg(np.zeros((CLIP_SIZE, CLIP_SIZE, 3), np.uint8), "rgb8", "clip", to_time(0.0))
                 for _ in range(CLIP_FRAMES)]
        lying[3].data = lying[3].data[:100]
        for goal, expect in ((Recognize.Goal(frames=zeros * 50), "400 frames"),
                             (Recognize.Goal(frames=zeros[:7]), "7 frames"),
                             (Recognize.Goal(frames=lying), "frames[3]"),
                             (Recognize.Goal(frames=zeros, recognizers=["nope"]), "nope")):
            self.goal("recognize hostile", goal, ok=False, expect=expect)
        self.goal("recognize valid", Recognize.Goal(frames=zeros), ok=True)

        self.load_episode(k)
        if k % 4 == 1:  # cancelled mid-search
            self.goal("acquire_observation cancelled", AcquireObservation.Goal(episode_id="soak", clip_frames=16),
                      ok=True, cancel_after=1.0)
        elif k % 4 == 3:
            self.goal("acquire_observation valid", AcquireObservation.Goal(episode_id="soak", clip_frames=16), ok=True)
        self.stamp = None  # the nav node moved the robot: the next action's stamp is not checked

    def stall(self) -> None:
        """Pause the bridge past the DDS lease with an action pending: it must be applied once."""
        pid, got = self.graph.pids()["bridge"], {}
        self.step(Action.STOP)
        before = self.stamp
        os.kill(pid, signal.SIGSTOP)
        try:
            waiter = threading.Thread(target=lambda: got.update(res=self.client.apply(Action.STOP, TIMEOUT_S)))
            waiter.start()
            time.sleep(STALL_S)  # the fault
        finally:
            os.kill(pid, signal.SIGCONT)
        waiter.join(TIMEOUT_S + 10)
        res = got.get("res")
        ok = res is not None and res.success and math.isclose(from_time(res.stamp), before + STEP_SECONDS, abs_tol=1e-6)
        self.check("apply_action across a 25 s bridge stall", ok, f"reply {res}")
        if res is not None:
            self.stamp = from_time(res.stamp)

    def close(self) -> None:
        self.observer.destroy()
        self.client.close()


class MemorySampler(threading.Thread):
    """RSS (bytes) of every node every SAMPLE_S s (kind ``timer``) and when told (:meth:`settled`)."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.samples: list[tuple[float, str, dict[str, int]]] = []  # (monotonic s, kind, {node: bytes})
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.sample("timer")

    def sample(self, kind: str) -> None:
        rss = {}
        for name, p in self.procs.items():
            try:
                rss[name] = p.memory_info().rss
            except psutil.Error:
                rss[name] = 0  # gone: reported as a crash at the end
        with self._lock:
            self.samples.append((time.monotonic(), kind, rss))

    def settled(self) -> None:
        """A sample taken with no request of the soak in flight."""
        self.sample("settled")

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self.sample("timer")

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(SAMPLE_S + 1)

    def of(self, kind: str) -> list[tuple[float, str, dict[str, int]]]:
        with self._lock:
            return [x for x in self.samples if x[1] == kind] if kind else list(self.samples)


def rss_slopes(samples: list[tuple[float, str, dict[str, int]]], since: float) -> dict[str, float]:
    """Least-squares slope (MB, 10^6 bytes, per minute) of each node's RSS over the ``samples``
    ((monotonic s, kind, {node: bytes})) taken at ``since`` (monotonic s) or later; NaN with fewer than 3."""
    last = [x for x in samples if x[0] >= since]
    if len(last) < 3:
        return {name: float("nan") for name in (samples[-1][2] if samples else {})}
    t = np.array([x[0] for x in last]) / 60.0
    return {name: float(np.polyfit(t - t.mean(), np.array([x[2][name] for x in last], float) / 1e6, 1)[0])
            for name in last[-1][2]}


def _sockets(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-H", "-uatnp"], capture_output=True, text=True, timeout=30, check=True).stdout
    return [" ".join(line.split()) for line in out.splitlines() if any(f"pid={p}," in line for p in pids)]


DEFAULT_OUT = Path("results/bench_soak.json")


def run(out: Path = DEFAULT_OUT, minutes: float = 60.0, data: Path = DATA_DIR, log=print) -> dict:
    """Cycles of a hostile round and a lockstep block for ``minutes``; the tallies, RSS and slopes."""
    out = Path(out)
    logs = out.with_suffix("") / "logs"
    rng = np.random.default_rng(0)
    rounds, lock_s, run_s = 0, 0.0, 0.0
    eval_data = EvalData(data)  # a missing library or dataset is refused before any node or client starts
    episodes = load_split("test", data / "episodes")[:WORLDS]
    with GraphProcesses("stack", args={"mode": "lockstep"}, log_dir=logs,
                        extra_params={"bridge": {"motion_library": str(data / "motions")}}) as g:
        ensure_loopback(g.domain_id)
        rclpy.init()
        soak = Soak(g, eval_data, episodes)
        mem = MemorySampler(g.pids())
        try:
            soak.wait_ready()
            soak.load_episode(0)
            mem.start()
            log(f"[bench soak] graph {g.pids()} ready; cycles of a hostile round and a lockstep block for {minutes:g} min")
            t0 = time.monotonic()
            while rounds == 0 or time.monotonic() - t0 < 60 * minutes:
                t = time.monotonic()
                soak.hostile_round(rounds)
                if rounds == 0:
                    soak.stall()
                rounds += 1
                t1 = time.monotonic()
                soak.lockstep(t1 - t, rng)  # as long as the round took: half the time each
                lock_s += time.monotonic() - t1
                mem.settled()
                if rounds % 20 == 0:
                    log(f"[bench soak] {(time.monotonic() - t0) / 60:.0f} min: {rounds} rounds, {soak.actions} actions")
            run_s = time.monotonic() - t0
        except (AffectSimError, TimeoutError, RuntimeError) as exc:  # a node that stopped answering: reported
            soak.check("soak run", False, f"{type(exc).__name__}: {exc}")
        finally:
            mem.stop()
            mem.settled()
            alive = {name: code is None for name, code in g.poll().items()}
            sockets = _sockets(set(g.pids().values()) | {os.getpid()})
            soak.close()
            rclpy.shutdown()
    mib = 2 ** 20
    settled, every = mem.of("settled"), mem.of("")
    end = every[-1][0]
    since = end - min(60 * SLOPE_WINDOW_MIN, end - every[0][0])
    middle = min(settled, key=lambda x: abs(x[0] - (every[0][0] + end) / 2)) if settled else every[-1]
    rss = {name: {"start": every[0][2][name] / mib, "middle": middle[2][name] / mib, "end": settled[-1][2][name] / mib,
                  "max": max(x[2][name] for x in every) / mib} for name in g.pids()}
    slopes = rss_slopes(settled, since)
    slopes_all = rss_slopes(every, since)
    for name, slope in slopes.items():  # NaN (too short a run) fails too
        soak.check("rss slope", slope < MAX_SLOPE_MB_PER_MIN,
                   f"{name}: {slope:+.2f} MB/min over the last {(end - since) / 60:.0f} min (settled samples)")
    failed = sum(v for k, v in soak.counts.items() if k.endswith("FAILED"))
    res = {"run_s": run_s, "lockstep_s": lock_s, "actions": soak.actions,
           "actions_per_s": soak.actions / max(lock_s, 1e-9), "hostile_rounds": rounds,
           "counts": dict(sorted(soak.counts.items())), "failed": failed, "failures": soak.failures, "alive": alive,
           "crashes": sum(not a for a in alive.values()), "rss_mib": rss, "rss_slope_mb_per_min": slopes,
           "rss_slope_all_samples_mb_per_min": slopes_all, "slope_window_s": end - since, "sockets": sockets,
           "rss_samples": [(round(t - every[0][0], 1), kind, {k: v / mib for k, v in r.items()})
                           for t, kind, r in every]}
    log(f"[bench soak] {run_s / 60:.0f} min: {soak.actions} lockstep actions ({res['actions_per_s']:.1f}/s in the "
        f"blocks), {rounds} hostile rounds; {failed} failed checks, {res['crashes']} crashed nodes")
    for case, n in res["counts"].items():
        log(f"[bench soak]   {case:48s} {n:7d}")
    log(f"[bench soak] RSS MiB {'node':12s} {'start':>8s} {'middle':>8s} {'end':>8s} {'max':>8s}")
    for name, r in rss.items():
        log(f"[bench soak]        {name:12s} {r['start']:8.0f} {r['middle']:8.0f} {r['end']:8.0f} {r['max']:8.0f}")
    log(f"[bench soak] RSS slope over the last {(end - since) / 60:.0f} min (MB/min, limit {MAX_SLOPE_MB_PER_MIN}), "
        "settled samples: " + ", ".join(f"{k} {v:+.3f}" for k, v in slopes.items())
        + "; all samples: " + ", ".join(f"{k} {v:+.3f}" for k, v in slopes_all.items()))
    for line in sockets:
        log(f"[bench soak] ss: {line}")
    for f in soak.failures[:10]:
        log(f"[bench soak] FAILED {f}")
    write_json(out, res, indent=1, default=float)
    log(f"[bench soak] {out}")
    return res


def _arguments(p) -> None:
    add_out(p, "tallies, RSS samples and slopes", default=DEFAULT_OUT)
    p.add_argument("--minutes", type=number(0.0, MAX_MINUTES, "minutes", lo_open=True), default=60.0,
                   help="minutes of cycles (a hostile round, then as long a lockstep block; default 60)")


@bench("soak", _arguments)
def main(ns) -> int:
    """The stack under load and bad requests: failed checks, crashes, RSS and its slope."""
    res = run(ns.out, ns.minutes)
    return 1 if res["failed"] or res["crashes"] else 0
