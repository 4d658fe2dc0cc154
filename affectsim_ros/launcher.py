"""Pip-only launcher: starts the graph of :mod:`affectsim_ros.graph` as processes, stops them all.

``affectsim launch bench`` is the equivalent of ``ros2 launch affectsim bench.launch.py``
where ``launch``/``launch_ros`` are not installable. Every child gets DDS on loopback and
the run's domain id, lives in its own session (so a terminal Ctrl-C reaches it only
through us), and dies with the launcher (``PR_SET_PDEATHSIG``). On Ctrl-C or SIGTERM the
children get SIGINT, then SIGTERM after 5 s, then SIGKILL: all are gone within 10 s. Fast DDS
shared-memory files that killed processes left in /dev/shm are removed when a graph starts and
when it stops (:mod:`affectsim_core.ros.shm`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from affectsim_core.errors import InvalidInput
from affectsim_core.readers import read_yaml
from affectsim_core.ros.env import loopback_env, pick_domain_id, release_domain_id
from affectsim_core.ros.shm import clean_stale
from affectsim_ros.graph import GRAPHS, NODES_MODULE, default_params_file, launch_remaps, validate_launch_args

INT_GRACE_S = 5.0
MAX_PARAMS_BYTES = 1 << 20  # a --params-file larger than 1 MiB is refused unread
TERM_GRACE_S = 3.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _param_arg(name: str, value: object) -> str:
    if isinstance(value, bool):
        return f"{name}:={'true' if value else 'false'}"
    return f"{name}:={value}"


class GraphProcesses:
    """The running processes of one graph. Use as a context manager or call :meth:`stop`."""

    def __init__(self, graph: str = "bench", args: dict[str, str] | None = None, domain_id: int | None = None,
                 params_file: Path | None = None, extra_params: dict[str, dict[str, object]] | None = None,
                 log_dir: Path | None = None, nodes: tuple[str, ...] | None = None, tag: str = "") -> None:
        """``nodes``: run only these nodes of the graph (default: all); ``tag``: put before every line the
        nodes write to the terminal (which of several graphs said it)."""
        if graph not in GRAPHS:
            raise KeyError(f"unknown graph {graph!r}; known: {', '.join(GRAPHS)}")
        names = [spec.name for spec in GRAPHS[graph]]
        if nodes is not None and not set(nodes) <= set(names):
            raise KeyError(f"unknown nodes {sorted(set(nodes) - set(names))} of graph {graph!r}; known: {names}")
        overrides = validate_launch_args(args or {}, graph)
        if (args or {}).get("graphs", "1") != "1":
            raise InvalidInput("graphs", args["graphs"], "1 for one GraphProcesses (start_parts starts N)")
        remaps = launch_remaps(args or {})
        for node, params in (extra_params or {}).items():
            overrides.setdefault(node, {}).update(params)
        self.shm_cleaned = clean_stale()  # (files, bytes) left by killed DDS processes
        params_file = params_file or default_params_file()
        doc = read_yaml(params_file, MAX_PARAMS_BYTES, "--params-file")  # a FIFO or a huge file never reaches a node
        if not isinstance(doc, dict):
            raise InvalidInput("--params-file", str(params_file), "a YAML mapping of node names to ros__parameters")
        self._own_domain = domain_id is None  # picked here: given back when the graph stops
        self.domain_id = domain_id if domain_id is not None else pick_domain_id()
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs = []
        self._log_dir = log_dir
        self._said: dict[str, str] = {}  # each node's last line in its own words (`[name] ...`): why it stopped
        self._forwarders: list[threading.Thread] = []
        self._tag = tag
        try:
            self.env = loopback_env(self.domain_id, robot=graph == "robot")  # a robot's own middleware is respected
            for spec in GRAPHS[graph]:
                if nodes is not None and spec.name not in nodes:
                    continue
                # no `-r __node:=NAME`: it renames every node of the process (the nav node's I/O node became a
                # second /nav); each node class names itself
                cmd = [sys.executable, "-m", NODES_MODULE, spec.name, "--ros-args",
                       "--params-file", str(params_file)]
                for old, new in remaps:
                    cmd += ["-r", f"{old}:={new}"]
                for name, value in overrides.get(spec.name, {}).items():
                    cmd += ["-p", _param_arg(name, value)]
                out = None
                if log_dir is not None:
                    log_dir.mkdir(parents=True, exist_ok=True)
                    out = open(log_dir / f"{spec.name}.log", "w")
                    self._logs.append(out)
                proc = subprocess.Popen(
                    cmd, env=self.env, start_new_session=True, preexec_fn=_die_with_parent,
                    stdout=out, stderr=subprocess.STDOUT if out else subprocess.PIPE, text=out is None,
                )
                self.procs[spec.name] = proc
                if out is None:
                    forwarder = threading.Thread(target=self._forward, args=(spec.name, proc.stderr),
                                                 name=f"{spec.name}-stderr", daemon=True)
                    forwarder.start()
                    self._forwarders.append(forwarder)
        except BaseException:
            self.stop()
            raise

    def _forward(self, name: str, stream) -> None:
        """Copy a node's stderr to ours line by line, remembering its last line in its own words."""
        for line in stream:
            sys.stderr.write(self._tag + line)
            sys.stderr.flush()
            if line.startswith(f"[{name}] "):
                self._said[name] = line.strip()

    def reason(self, name: str) -> str:
        """The last line node ``name`` wrote in its own words (``[name] cannot start: ...``), or ""."""
        if self._log_dir is not None and (self._log_dir / f"{name}.log").is_file():
            with open(self._log_dir / f"{name}.log", errors="replace") as f:
                said = [ln.strip() for ln in f if ln.startswith(f"[{name}] ")]
            return said[-1] if said else ""
        return self._said.get(name, "")

    def __enter__(self) -> "GraphProcesses":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items()}

    def poll(self) -> dict[str, int | None]:
        return {name: p.poll() for name, p in self.procs.items()}

    def stop(self) -> dict[str, int | None]:
        """SIGINT, then SIGTERM, then SIGKILL; returns each node's exit code."""
        for sig, grace in ((signal.SIGINT, INT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 2.0)):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                break
            for p in alive:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(p.poll() is None for p in alive):
                time.sleep(0.05)
        for f in self._logs:
            f.close()
        self._logs = []
        for forwarder in self._forwarders:  # the nodes are gone: their pipes end
            forwarder.join(2.0)
        clean_stale()
        if self._own_domain:
            release_domain_id(self.domain_id)
        return self.poll()


def start_parts(graph: str, args: dict[str, str], domain_id: int | None = None, params_file: Path | None = None,
                log_dir: Path | None = None, extra_params: dict[str, dict[str, object]] | None = None,
                ) -> list[GraphProcesses]:
    """Start the graph, or with ``graphs:=N`` (bench only) N copies of it side by side, each on its own ROS
    domain (``domain_id``, if given, is the first's; the others are picked free) with its part ``k/N`` of the
    episodes (``log_dir``: each copy's node logs, in ``graph<k>/`` below it when N > 1). If one fails to
    start, those already started are stopped."""
    validate_launch_args(args, graph)  # every argument checked before any node starts
    n = int(args.get("graphs", "1"))
    node_args = {k: v for k, v in args.items() if k != "graphs"}
    parts: list[GraphProcesses] = []
    try:
        for k in range(n):
            parts.append(GraphProcesses(graph, {**node_args, "shard": f"{k}/{n}"} if n > 1 else node_args,
                                        domain_id if k == 0 else None, params_file, extra_params,
                                        log_dir / f"graph{k}" if log_dir is not None and n > 1 else log_dir,
                                        tag=f"[graph {k}] " if n > 1 else ""))
    except BaseException:
        for procs in parts:
            procs.stop()
        raise
    return parts


def run(graph: str, args: dict[str, str], domain_id: int | None = None, params_file: Path | None = None) -> int:
    """Foreground launch (:func:`start_parts`): a copy of the graph stops when one of its nodes exits (the
    evaluator, once its part is done); returns when every copy has stopped (non-zero if a node of any
    failed) or on Ctrl-C / SIGTERM, with all nodes stopped."""
    stop = {"sig": None}

    def on_signal(signum, _frame) -> None:
        stop["sig"] = signum

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    running: list[GraphProcesses] = []
    try:
        running = start_parts(graph, args, domain_id, params_file)
        n = len(running)
        for k, procs in enumerate(running):
            if procs.shm_cleaned[0]:
                print(f"[affectsim] removed {procs.shm_cleaned[0]} stale Fast DDS shared-memory files from /dev/shm "
                      f"({procs.shm_cleaned[1] / 2**20:.0f} MiB)", flush=True)
            print(f"[affectsim] graph {graph!r}{f' {k} of {n}' if n > 1 else ''} running: {procs.pids()} on "
                  f"ROS_DOMAIN_ID={procs.domain_id} (FASTDDS_DEFAULT_PROFILES_FILE="
                  f"{procs.env['FASTDDS_DEFAULT_PROFILES_FILE']}). Ctrl-C to stop.", flush=True)
        code = 0
        reasons: list[str] = []
        live = list(running)
        while live and stop["sig"] is None:
            for procs in list(live):
                exited = {name: c for name, c in procs.poll().items() if c is not None}
                if not exited:
                    continue
                which = f" of graph {running.index(procs)}" if n > 1 else ""
                print(f"[affectsim] node exited{which}: {exited}; stopping the graph", file=sys.stderr, flush=True)
                failed = [name for name, c in exited.items() if c]
                code = max(code, 1 if failed else 0)
                codes = procs.stop()
                live.remove(procs)
                print(f"[affectsim] stopped{which}: {codes}", flush=True)
                reasons += [procs.reason(name) for name in failed if procs.reason(name)]
            time.sleep(0.1)
        for procs in live:  # Ctrl-C / SIGTERM
            print(f"[affectsim] stopped: {procs.stop()}", flush=True)
        if reasons:  # the last line a user sees says why (and what to run first), not the other nodes' shutdown
            print(f"[affectsim] the graph stopped because {reasons[0]}", file=sys.stderr, flush=True)
        return code
    finally:
        for procs in running:
            procs.stop()
        for s, h in old.items():
            signal.signal(s, h)
