"""The node graph, defined once for ``launch/bench.launch.py`` and ``affectsim launch``.

Only nodes that work are listed. Launch arguments are validated here so both entry points reject
bad values the same way, naming the argument; their choices and defaults come from the plugin
registries (backends, policies, recognizers) and the nodes' parameter declarations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import affectsim_nav  # noqa: F401  (registers the shipped policies)
import affectsim_perception  # noqa: F401  (registers the person detectors and recognizers)
from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.humans.reactive import HUMANS_MODES
from affectsim_bridge.world.scene import resolve_scene_path
from affectsim_core.errors import InvalidInput
from affectsim_core.protocol import FAMILIES, MODES, PAPER_FAMILIES, SPLITS
from affectsim_core.ros.topics import TOPICS
from affectsim_eval.episode.recording_options import DEFAULT_MAX_MB
from affectsim_eval.run.config import DEFAULT_EPISODES, MAX_SHARDS, Shard
from affectsim_nav.base_control import EXECUTIONS
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS, RECOGNIZERS

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
NODES_MODULE = "affectsim_ros.nodes"  # ``python -m affectsim_ros.nodes NAME``: the pip-only launcher's command


@dataclass(frozen=True)
class NodeSpec:
    """One node: ROS name and console script (launch_ros; the pip-only launcher runs :data:`NODES_MODULE`)."""

    name: str
    executable: str


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None  # a callable: a registry's names
    check: Callable[[str], bool] | None = None
    expected: str = ""
    node: str | None = "bridge"  # parameter of this node (None: the launcher's own argument)
    param_type: Callable[[str], object] = str
    also: tuple[str, ...] = ()  # further nodes that take the same parameter
    remap: str | None = None  # instead of a parameter: the interface name (a key of TOPICS) this remaps

    def accepted(self) -> list[str] | None:
        """The accepted values (a registry's names read now, after plugins were loaded), or None."""
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)


def _is_float_in(lo: float, hi: float) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            x = float(v)
        except ValueError:
            return False
        return math.isfinite(x) and lo <= x <= hi

    return check


ROBOT = (NodeSpec("nav", "nav_node"), NodeSpec("perception", "perception_node"))
STACK = (NodeSpec("bridge", "bridge_node"), *ROBOT)
GRAPHS: dict[str, tuple[NodeSpec, ...]] = {
    "bench": (*STACK, NodeSpec("evaluator", "evaluator_node")),  # runs, then exits
    "stack": STACK,  # the simulated robot and its nodes, for interactive use and your own clients
    "robot": ROBOT,  # nav and perception on a robot's own topics: no simulator, no ground truth
}
SIM_ODOM_TIMEOUT_S = 2.0  # s: the nav node's odometry watchdog under the free-running simulator (a robot: 0.3 s)
DETECTIONS = ("auto", "on", "off")
GRAPH_DEFAULTS: dict[str, dict[str, str]] = {"robot": {"execution": "cmd_vel"}}  # under the user's arguments
REMAPPABLE = ("rgb", "rgb_info", "depth", "depth_info", "scan", "odom", "cmd_vel", "head_command", "map")  # a robot's own names


def _names(v: str) -> list[str]:
    return [x.strip() for x in v.split(",") if x.strip()]


def _recognizers_ok(v: str) -> bool:
    return bool(_names(v)) and all(n in RECOGNIZERS for n in _names(v))


def _int_in(lo: int, hi: int) -> Callable[[str], bool]:
    return lambda v: v.strip().lstrip("-").isdigit() and lo <= int(v) <= hi

LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument("scene", "test_apartment", "scene to load: built-in id or scene file path",
                   check=lambda v: _scene_ok(v), expected="a built-in scene id or an existing scene file"),
    LaunchArgument("mode", "lockstep", "lockstep: discrete actions via /affectsim/apply_action; "
                   "free_run: /cmd_vel at real_time_factor", choices=MODES),
    LaunchArgument("real_time_factor", "1.0", "free_run: sim seconds per wall second",
                   check=_is_float_in(0.1, 10.0), expected="a number in [0.1, 10]", param_type=float),
    LaunchArgument("backend", DEFAULT_BACKEND, "simulator backend (bridge; the evaluator's geometry copy)",
                   choices=BACKENDS.names, also=("evaluator",)),
    LaunchArgument("split", "test", "evaluator: dataset split", choices=SPLITS, node="evaluator"),
    LaunchArgument("episodes", str(DEFAULT_EPISODES), "evaluator: stratified subset size (0 = the whole split)",
                   check=_int_in(0, 1_000_000), expected="an integer >= 0", node="evaluator", param_type=int),
    LaunchArgument("seed", "0", "evaluator: seed of the subset", check=_int_in(0, 2**31 - 1),
                   expected="an integer >= 0", node="evaluator", param_type=int),
    LaunchArgument("episode_ids", "", "evaluator: comma-separated episode ids instead of a subset (with episodes:=0)",
                   node="evaluator", param_type=lambda v: _names(v) or [""]),
    LaunchArgument("recognizers", ",".join(DEFAULT_RECOGNIZERS),
                   "comma-separated recognizers (perception node and evaluator)", check=_recognizers_ok,
                   expected="comma-separated registered recognizer names", node="perception",
                   param_type=_names, also=("evaluator",)),
    LaunchArgument("policy", "baseline", "A-Obs policy (nav node and evaluator)", choices=POLICIES.names,
                   node="nav", also=("evaluator",)),
    LaunchArgument("output_dir", "results/bench", "evaluator: run directory (results.sqlite, report.md); "
                   "an existing run there is resumed", check=lambda v: bool(v.strip()), expected="a directory path",
                   node="evaluator"),
    LaunchArgument("retry_failed", "false", "evaluator: evaluate again the episodes the run stores as failed",
                   choices=("true", "false"), node="evaluator", param_type=lambda v: v == "true"),
    LaunchArgument("allow_dataset_mismatch", "false", "evaluator: run although a checkpoint was trained on another "
                   "dataset version (the report's validity section states it)", choices=("true", "false"),
                   node="evaluator", param_type=lambda v: v == "true"),
    LaunchArgument("episode_attempts", "3", "evaluator: times an episode is evaluated before it is stored as failed",
                   check=_int_in(1, 10), expected="an integer in [1, 10]", node="evaluator", param_type=int),
    LaunchArgument("families", ",".join(PAPER_FAMILIES), "evaluator: comma-separated episode families the subset or "
                   "split is drawn from (the paper's three; evolving: emotions that change, docs/affect.md)",
                   check=lambda v: bool(_names(v)) and all(f in FAMILIES for f in _names(v)),
                   expected=f"comma-separated families of {', '.join(FAMILIES)}", node="evaluator", param_type=_names),
    LaunchArgument("humans", "scripted", "evaluator: people replay their motion (scripted, the paper's protocol) "
                   "or notice the robot and respond according to their emotion (reactive)", choices=HUMANS_MODES,
                   node="evaluator"),
    LaunchArgument("record", "false", "evaluator: MCAP recording of every A-Obs episode (output_dir/recordings)",
                   choices=("true", "false"), node="evaluator", param_type=lambda v: v == "true"),
    LaunchArgument("record_depth", "true", "evaluator: recordings hold the depth image and its camera_info",
                   choices=("true", "false"), node="evaluator", param_type=lambda v: v == "true"),
    LaunchArgument("record_max_mb", f"{DEFAULT_MAX_MB:g}", "evaluator: MB of messages (before compression) one "
                   "recording may hold; beyond it camera images are left out", check=_is_float_in(1.0, 1e6),
                   expected="a number in [1, 1e6]", node="evaluator", param_type=float),
    LaunchArgument("detections", "auto", "perception: person detections on the camera stream "
                   f"({TOPICS['person_detections']}): on (detect_rate_hz of the params file), off, or auto: off in "
                   "the bench graph unless record:=true (nothing else in a run reads them: the policy detects for "
                   "itself), on in the stack and robot graphs", choices=DETECTIONS, node="perception"),
    LaunchArgument("shard", "0/1", "evaluator: part k/N of the run (every N-th of its episodes from the k-th, "
                   "counted from 0); "
                   "the N parts, each its own graph on its own ROS domain, share output_dir and the last writes "
                   "the report", check=lambda v: _shard_ok(v), expected=f"k/N with 0 <= k < N <= {MAX_SHARDS}", node="evaluator"),
    LaunchArgument("graphs", "1", "affectsim launch bench: copies of the graph run side by side, each on its own ROS "
                   "domain and part (shard) of the episodes, into one output_dir: records are the same, the run "
                   "shorter on a machine with cores to spare", check=_int_in(1, MAX_SHARDS),
                   expected=f"an integer in [1, {MAX_SHARDS}]", node=None),
    LaunchArgument("passive_cache", "off", "evaluator: directory where the passive settings are looked up and kept "
                   "('' = data_dir's cache/passive, 'off' = none)", node="evaluator"),
    LaunchArgument("execution", "lockstep", "nav: how primitive actions move the robot: lockstep "
                   "(/affectsim/apply_action, with mode:=lockstep), cmd_vel or nav2 (continuous time through "
                   "/cmd_vel, with mode:=free_run or on a robot)", choices=EXECUTIONS, node="nav", also=("evaluator",)),
    *(LaunchArgument(f"{key}_topic", TOPICS[key], f"the robot's name for {TOPICS[key]} (a remapping of every node)",
                     check=lambda v: v.startswith("/") and " " not in v, expected="an absolute topic name", remap=key)
      for key in REMAPPABLE),
)


def _shard_ok(value: str) -> bool:
    try:
        Shard.parse(value)
        return True
    except InvalidInput:
        return False


def _scene_ok(value: str) -> bool:
    try:
        resolve_scene_path(value)
        return True
    except InvalidInput:
        return False


def default_params_file() -> Path:
    """``config/bench.yaml`` from the source tree, else from the installed share directory."""
    src = PACKAGE_ROOT / "config" / "bench.yaml"
    if src.is_file():
        return src
    try:
        from ament_index_python.packages import get_package_share_directory  # only in a ROS 2 install

        return Path(get_package_share_directory("affectsim")) / "config" / "bench.yaml"
    except Exception as exc:  # PackageNotFoundError or a missing ament index
        raise FileNotFoundError("config/bench.yaml not found in the source tree or the ament index") from exc


def validate_launch_args(values: dict[str, str], graph: str = "bench") -> dict[str, dict[str, object]]:
    """Check ``name -> value`` strings for ``graph`` (over its :data:`GRAPH_DEFAULTS`); returns per-node
    parameter overrides. Raises :class:`InvalidInput`."""
    known = {a.name: a for a in LAUNCH_ARGUMENTS}
    overrides: dict[str, dict[str, object]] = {}
    values = {**GRAPH_DEFAULTS.get(graph, {}), **values}
    if any(spec.name == "bridge" for spec in GRAPHS.get(graph, ())):  # the bridge and the nav node agree:
        if "mode" in values and "execution" not in values:  # one given, the other follows from it
            values["execution"] = "lockstep" if values["mode"] == "lockstep" else "cmd_vel"
        elif "execution" in values and "mode" not in values:
            values["mode"] = "lockstep" if values["execution"] == "lockstep" else "free_run"
        mode, execution = values.get("mode", "lockstep"), values.get("execution", "lockstep")
        if execution != "lockstep":  # the simulator on a loaded machine stalls longer than a robot's driver may
            overrides.setdefault("nav", {})["odom_timeout"] = SIM_ODOM_TIMEOUT_S
        if (mode == "lockstep") != (execution == "lockstep") and mode in MODES and execution in EXECUTIONS:
            raise InvalidInput("launch argument execution", execution,
                               f"{'lockstep' if mode == 'lockstep' else 'cmd_vel or nav2'} with mode:={mode} "
                               "(lockstep actions need the lockstep bridge; free_run moves only by /cmd_vel)")
    for name, value in values.items():
        if name not in known:
            raise InvalidInput("launch argument", name, f"one of {', '.join(known)}")
        arg = known[name]
        choices = arg.accepted()
        if choices is not None and value not in choices:
            raise InvalidInput(f"launch argument {name}", value, f"one of {', '.join(choices)}")
        if arg.check is not None and not arg.check(value):
            raise InvalidInput(f"launch argument {name}", value, arg.expected)
        if arg.remap is None and arg.node is not None and name != "detections":
            for node in (arg.node, *arg.also):
                overrides.setdefault(node, {})[name] = arg.param_type(value)
    if values.get("graphs", "1") != "1":
        if graph != "bench":
            raise InvalidInput("launch argument graphs", values["graphs"], f"1 for the {graph} graph (only the bench "
                               "graph is split into parts)")
        if "shard" in values:
            raise InvalidInput("launch argument shard", values["shard"], "no shard with graphs:=N (each of the N "
                               "graphs gets its own part)")
    detections = values.get("detections", "auto")
    if detections == "off" or (detections == "auto" and graph == "bench" and values.get("record", "false") != "true"):
        overrides.setdefault("perception", {})["detect_rate_hz"] = 0.0
    return overrides


def launch_remaps(values: dict[str, str]) -> list[tuple[str, str]]:
    """(from, to) topic remappings of the ``*_topic`` arguments that differ from the default names."""
    by_name = {a.name: a for a in LAUNCH_ARGUMENTS if a.remap is not None}
    return [(TOPICS[by_name[k].remap], v) for k, v in values.items() if k in by_name and v != TOPICS[by_name[k].remap]]
