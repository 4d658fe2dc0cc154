"""``affectsim`` command line.

  affectsim launch bench [name:=value ...] [--domain-id N]   run the graph (pip-only ``ros2 launch``)
  affectsim tour [--out DIR]                                 scripted world tour over ROS + contact sheet
  affectsim bench NAME [options]                             a benchmark (affectsim_ros/benches/; list: bench --help)
  affectsim launch stack [name:=value ...]                   the robot stack alone (bridge, nav, perception)
  affectsim eval [--split test] [--episodes N] [--out DIR]   the benchmark in-process (resumes; --ray ADDRESS)
  affectsim report RUN                                       RUN/report.md with the paper's tables and figures
  affectsim launch robot [execution:=cmd_vel] [*_topic:=..]  nav and perception on a robot's own topics
  affectsim observe [--label EMOTION] [--out RUN]            one acquisition on the robot on the graph, stored
  affectsim train RECOGNIZER [--seed 0]                      train a recognizer that has a trainer (TRAINERS)
  affectsim motions build | validate | stats | preview | import-bvh | export-bvh   the motion library
  affectsim dataset build | install | validate | stats | show | counterfactual | fingerprint | verify | ship
  affectsim scenes list | build | preview | check            the scenes
  affectsim params write | check                             config/bench.yaml from the nodes' declarations

Each command takes only its own options (another command's is an error): affectsim COMMAND [WHAT] --help.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import rclpy

from affectsim_bridge.content import scene_generator
from affectsim_bridge.backends import BACKENDS, DEFAULT_BACKEND
from affectsim_bridge.content import library
from affectsim_bridge.humans.bvh import export_bvh, import_bvh, label_from_name, read_joint_map
from affectsim_bridge.humans.features import library_stats
from affectsim_bridge.content.library import Library
from affectsim_bridge.humans.motion import SOLO_ACTIONS
from affectsim_bridge.content.preview import write_preview
from affectsim_bridge.humans.reactive import HUMANS_MODES
from affectsim_bridge.content.validate import validate_library
from affectsim_bridge.world.navigable import NavigableSpace
from affectsim_bridge.world.scene import builtin_scene_ids, load_scene
from affectsim_core.errors import AffectSimError, InvalidInput
from affectsim_core.names import inside
from affectsim_core.plugins import load_plugins
from affectsim_core.protocol import EMOTIONS, FAMILIES, MAX_ACTIONS, MAX_PLANNER_CALLS, PAPER_FAMILIES, SPLITS
from affectsim_core.ros.bridge_client import BridgeClient
from affectsim_core.ros.env import ensure_loopback
from affectsim_eval.run.config import DATA_DIR, EvalConfig
from affectsim_eval.episode.recording_options import DEFAULT_MAX_MB, RecordingOptions
from affectsim_eval.dataset import build as dbuild
from affectsim_eval.dataset import fingerprint, inspect, shipped
from affectsim_eval.dataset.context import MAX_CONTEXT_F1
from affectsim_eval.run.report import write_report
from affectsim_eval.run.runner import run_eval
from affectsim_eval.training.train import SUBSET, TRAINERS, train
from affectsim_nav.nav_node import MAX_GOAL_COUNT
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS
from affectsim_ros import launcher
from affectsim_ros.benches import integer, number, positive_int
from affectsim_ros.benches import load_all as load_benches
from affectsim_ros.graph import GRAPHS, launch_remaps, validate_launch_args
from affectsim_ros.launcher import GraphProcesses
from affectsim_ros.observe import observe
from affectsim_ros.nodes import PARAMS_FILE, parameter_file_text
from affectsim_ros.tour import run_tour


def _launch(ns: argparse.Namespace) -> int:
    args = {}
    for item in ns.args:
        if ":=" not in item:
            raise AffectSimError(f"launch argument {item!r} is invalid; expected name:=value")
        k, v = item.split(":=", 1)
        args[k] = v
    return launcher.run(ns.graph, args, ns.domain_id, Path(ns.params_file) if ns.params_file else None)


def _tour(ns: argparse.Namespace) -> int:
    scene = load_scene(ns.scene)
    nav = NavigableSpace(scene)
    out = Path(ns.out)
    with GraphProcesses("bench", nodes=("bridge",), args={"scene": ns.scene, "mode": "lockstep"}, log_dir=out / "logs",
                        extra_params={"bridge": {"motion_library": str(Path(ns.library).resolve())}}) as g:
        ensure_loopback(g.domain_id)
        print(f"[tour] bridge pid {g.pids()['bridge']} on ROS_DOMAIN_ID={g.domain_id}", flush=True)
        rclpy.init()
        try:
            client = BridgeClient("tour_client")
            client.wait_for_bridge(90)
            people = [dict(id="person0", x=4.4, y=4.1, yaw=-2.4, appearance=1, is_target=True),
                      dict(id="person1", x=8.6, y=4.2, yaw=-math.pi / 2, appearance=4, is_target=False)]
            if (Path(ns.library) / "manifest.json").is_file():  # people perform clips of the motion library
                people = [dict(id="person0", x=3.0, y=0.64, yaw=math.pi / 2, appearance=1, is_target=True,
                               motion_id="ag_AG03_seated_sad_t1", phase=0.0),
                          dict(id="person1", x=8.6, y=4.2, yaw=-math.pi / 2, appearance=4, is_target=False,
                               motion_id="oc_OC01_gestures_happy_t1", phase=1.0)]
            res = client.load(ns.scene, ns.x, ns.y, ns.yaw, people if ns.scene == "test_apartment" else [])
            if not res.success:
                raise AffectSimError(f"load_world failed: {res.message}")
            client.step_and_frame(0)
            start = client.apply(0).pose
            summary = run_tour(client, scene, nav, start, out)
            client.close()
        finally:
            rclpy.shutdown()
    print(f"[tour] {summary}")
    print(f"[tour] contact sheet: {out / 'contact_sheet.png'}")
    return 0


def _observe(ns: argparse.Namespace) -> int:
    # every option checked before the graph is touched (a bad one is one line, not a traceback)
    if not 0 <= ns.max_actions <= MAX_GOAL_COUNT:
        raise InvalidInput("--max-actions", ns.max_actions, f"an integer in [0, {MAX_GOAL_COUNT}] (0: the protocol's)")
    if not (math.isfinite(ns.timeout) and 1.0 <= ns.timeout <= 86_400.0):
        raise InvalidInput("--timeout", ns.timeout, "seconds in [1, 86400]")
    if ns.policy and ns.policy not in POLICIES:
        raise InvalidInput("--policy", ns.policy, f"one of {', '.join(POLICIES.names())}")
    if ns.target_description and len(ns.target_description) > 256:
        raise InvalidInput("--target-description", f"{len(ns.target_description)} characters", "at most 256")
    if ns.domain_id is not None:
        ensure_loopback(ns.domain_id, robot=True)
    args = dict(item.split(":=", 1) for item in ns.args if ":=" in item)
    bad = [item for item in ns.args if ":=" not in item or not item.split(":=", 1)[0].endswith("_topic")]
    if bad:
        raise InvalidInput("observe argument", bad[0], "a topic remapping NAME_topic:=/topic, as for launch robot")
    validate_launch_args(args, "robot")
    if not (math.isfinite(ns.record_max_mb) and ns.record_max_mb > 0):
        raise InvalidInput("--record-max-mb", ns.record_max_mb, "a size in MB > 0")
    record = None
    if ns.record is not None:
        record = RecordingOptions(depth=not ns.record_no_depth, max_mb=ns.record_max_mb, best_effort_sensors=True)
    elif ns.record_no_depth or ns.record_max_mb != DEFAULT_MAX_MB:
        raise InvalidInput("--record", None, "a directory, for --record-no-depth or --record-max-mb")
    observe(ns.label, Path(ns.out) if ns.out else None, ns.episode_id or "", ns.clip_frames, ns.policy or "",
            ns.target_description or "", ns.timeout, launch_remaps(args), ns.max_actions,
            record_dir=Path(ns.record) if ns.record is not None else None, record=record)
    return 0


def _eval(ns: argparse.Namespace) -> int:
    cfg = EvalConfig(split=ns.split, episodes=ns.episodes, seed=ns.seed,
                     ids=tuple(i for i in (ns.ids or "").split(",") if i),
                     recognizers=tuple(r for r in ns.recognizers.split(",") if r),
                     policy=ns.policy, max_actions=ns.max_actions, max_planner_calls=ns.max_planner_calls,
                     backend=ns.backend, humans=ns.humans, families=tuple(ns.family or PAPER_FAMILIES))
    summary = run_eval(Path(ns.out), cfg, ns.workers, ns.ray, ns.retry_failed, Path(ns.data) if ns.data else DATA_DIR,
                       allow_dataset_mismatch=ns.allow_dataset_mismatch, passive_cache=ns.passive_cache)
    print(f"[eval] {summary.done} episodes evaluated ({summary.failed} failed), {summary.skipped} were already stored; "
          f"{summary.wall:.0f} s")
    if not ns.no_report and len(summary.failures) < summary.total:  # a report needs one finished episode
        print(f"[eval] report: {write_report(Path(ns.out))}")
    if summary.failures:
        print(f"affectsim: error: {len(summary.failures)} of {summary.total} episodes are stored as failed (first: "
              f"{summary.failures[0][0]}: {summary.failures[0][1]}); rerun with --retry-failed", file=sys.stderr)
        return 1
    return 0


def _report(ns: argparse.Namespace) -> int:
    print(write_report(Path(ns.run)))
    return 0


# ------------------------------------------------------------------ scenes
def _scenes_list(ns: argparse.Namespace) -> int:
    for sid in builtin_scene_ids():
        s = load_scene(sid)
        print(f"{sid}: {s.name} ({len(s.rooms)} rooms, {len(s.furniture)} furniture, {len(s.doors())} doors)")
    return 0


def _scenes_build(ns: argparse.Namespace) -> int:
    scene_generator.build_scenes(seed=ns.seed)
    return 0


def _scenes_preview(ns: argparse.Namespace) -> int:
    for sid in ns.ids or [f"scene_{i:03d}" for i in range(3)]:
        print(f"[scenes] {scene_generator.preview_scene(load_scene(sid), Path(ns.out) / f'{sid}.png')}")
    return 0


def _scenes_check(ns: argparse.Namespace) -> int:
    bad = 0
    for sid in ns.ids or builtin_scene_ids():
        report = scene_generator.check_scene(load_scene(sid))
        bad += bool(report["problems"])
        print(f"{sid}: {report}")
    return 1 if bad else 0


# ------------------------------------------------------------------ motions
def _motions_build(ns: argparse.Namespace) -> int:
    library.build(Path(ns.library), seed=ns.seed)
    return 0


def _motions_validate(ns: argparse.Namespace) -> int:
    lib = library.Library(Path(ns.library))
    report = validate_library(lib)
    print(f"[validate] {report.checked} clips, {len(lib.manifest.get('dyadic', []))} dyadic sequences checked")
    shares = report.measures.get("vad_within_class_share", {})
    print("[validate] VAD variance within the emotion classes: "
          + ", ".join(f"{dim} {v:.1%}" for dim, v in shares.items()))
    for reason, n in report.failures.most_common():
        print(f"  FAIL {reason}: {n} clips, e.g. {report.examples[reason]}")
    if report.ok:
        slide = max(report.measures.get("foot_slide", [0.0]))
        print(f"[validate] all checks passed (largest planted-foot speed {slide:.3f} m/s)")
    return 0 if report.ok else 1


def _motions_stats(ns: argparse.Namespace) -> int:
    res = library_stats(library.Library(Path(ns.library)))
    ok = all(c["holds"] for c in res["checks"]) and 0.7 <= res["macro_f1"] <= 0.97
    return 0 if ok else 1


def _motions_import_bvh(ns: argparse.Namespace) -> int:
    root = Path(ns.library)
    jm = read_joint_map(Path(ns.joint_map)) if ns.joint_map else None
    motions, skipped = [], []
    for i, f in enumerate(ns.files):
        emotion = ns.import_emotion or label_from_name(Path(f))
        if emotion is None:
            skipped.append(f)
            continue
        motions.append(import_bvh(Path(f), emotion, ns.import_action, ns.performer or Path(f).stem[:3], i + 1,
                                  up=ns.up, units=ns.units, joint_map=jm))
    library.add_motions(root, motions)
    print(f"[import-bvh] added {len(motions)} clips to {root}; skipped {len(skipped)} outside the five classes")
    return 0


def _motions_export_bvh(ns: argparse.Namespace) -> int:
    out = Path(ns.out) / f"{ns.motion_id}.bvh"
    export_bvh(library.Library(Path(ns.library)).load(ns.motion_id), out)
    print(f"[export-bvh] {out}")
    return 0


def _motions_preview(ns: argparse.Namespace) -> int:
    lib = library.Library(Path(ns.library))
    mid = ns.motion_id
    if not mid:
        sel = [e for e in lib.select(emotion=ns.emotion, action=ns.action) if e["family"] != "evolving"
               and (ns.performer is None or e["performer"] == ns.performer)]
        if not sel:
            raise AffectSimError(f"no clip with emotion={ns.emotion!r} action={ns.action!r} in {ns.library}")
        mid = sel[0]["id"]
    png, gif = write_preview(lib.load(mid), Path(ns.out))
    print(f"[preview] {png}\n[preview] {gif}")
    return 0


# ------------------------------------------------------------------ train
def _tiers(split: str):
    """argparse type of ``--SPLIT-episodes``: episode counts joined by '+', the first at least 20."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            tiers = tuple(int(t) for t in text.split("+"))
        except ValueError:
            tiers = ()
        if not tiers or tiers[0] < 20 or min(tiers) < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid; expected episode counts joined by '+' (tiers), "
                                              "the first at least 20")
        return tiers

    parse.__name__ = f"{split}_episodes"
    return parse


def _train(ns: argparse.Namespace) -> int:
    train(ns.recognizer, ns.seed, subset={split: getattr(ns, f"{split}_episodes") for split in SPLITS})
    return 0


# ------------------------------------------------------------------ dataset
def _dataset_build(ns: argparse.Namespace) -> int:
    dbuild.build_dataset(Path(ns.out), seed=ns.seed, scale=ns.scale)
    return 0


def _dataset_validate(ns: argparse.Namespace) -> int:
    rep = inspect.validate_dataset(Path(ns.out))
    print(f"[validate] {rep['episodes']} episodes: {rep['counts']}")
    c = rep["dyadic_context"]
    if c["macro_f1"] is not None:
        print(f"[validate] dyadic context-only classifier, leave one of {c['sequences']} sequences out "
              f"({c['episodes']} episodes): Macro-F1 {c['macro_f1']:.3f} (at most {MAX_CONTEXT_F1}; "
              f"labels permuted: 95th percentile {c['chance_p95']:.3f})")
    for field, fams in rep["leakage"]["fields"].items():
        scores = ", ".join(f"{fam} {r['macro_f1']:.3f} (chance {r['chance']:.3f})" for fam, r in fams.items()
                           if r["macro_f1"] is not None)
        print(f"[validate] label from {'all fields' if field == 'all' else field}, train -> val + test Macro-F1: {scores}")
    for which, r in rep["leakage"]["scenario"].items():
        if r is not None and r["macro_f1"] is not None:
            print(f"[validate] evolving scenario -> {which} emotion: Macro-F1 {r['macro_f1']:.3f} "
                  f"(chance {r['chance']:.3f})")
    print(f"[validate] episodes per emotion: {rep['classes']}")
    for fam, o in rep["overlap"].items():
        print(f"[validate] {fam}: {o['performer_in_train']} of {o['test']} test episodes show a performer of the train "
              f"split, {o['twinned']} a clip whose other take is in train")
    for why, n in sorted(rep["problems"].items(), key=lambda kv: -kv[1]):
        print(f"  FAIL {why}: {n} (e.g. {rep['examples'].get(why, '-')})")
    if not rep["problems"]:
        print("[validate] all checks passed")
    return 0 if not rep["problems"] else 1


def _dataset_stats(ns: argparse.Namespace) -> int:
    inspect.dataset_stats(Path(ns.out), Path(ns.png))
    return 0


def _dataset_install(ns: argparse.Namespace) -> int:
    shipped.install(Path(ns.src), Path(ns.out))
    return 0


def _dataset_ship(ns: argparse.Namespace) -> int:
    shipped.ship(Path(ns.out), Path(ns.dst))
    return 0


def _dataset_verify(ns: argparse.Namespace) -> int:
    diff = shipped.verify(Path(ns.src), sample=ns.sample, seed=ns.seed)
    for line in diff:
        print(f"[dataset] DIFFERS {line}")
    return 1 if diff else 0


def _dataset_fingerprint(ns: argparse.Namespace) -> int:
    return 1 if fingerprint.check(update=ns.update) else 0


def _dataset_show(ns: argparse.Namespace) -> int:
    ep = inspect.find_episode(ns.episode, Path(ns.out))
    out = inside(Path("results/episodes"), ep.episode_id, ".png", "episode_id")
    print(f"[dataset] {inspect.show_episode(ep, out)}")
    return 0


def _dataset_counterfactual(ns: argparse.Namespace) -> int:
    ep = inspect.counterfactual(inspect.find_episode(ns.episode, Path(ns.out)), ns.emotion, Library())
    d = ep.to_dict()
    print(json.dumps({k: d[k] for k in ("episode_id", "counterfactual_of", "emotion", "humans")}, indent=1))
    out = inside(Path("results/episodes"), ep.episode_id, ".png", "episode_id")
    print(f"[dataset] {inspect.show_episode(ep, out)}")
    return 0


# ------------------------------------------------------------------ params
def _params_write(ns: argparse.Namespace) -> int:
    PARAMS_FILE.write_text(parameter_file_text())
    print(f"[params] {PARAMS_FILE}")
    return 0


def _params_check(ns: argparse.Namespace) -> int:
    if PARAMS_FILE.read_text() != parameter_file_text():
        print(f"[params] {PARAMS_FILE} differs from the nodes' declarations: run `affectsim params write`",
              file=sys.stderr)
        return 1
    print(f"[params] {PARAMS_FILE} is current")
    return 0


# ------------------------------------------------------------------ the parser
class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default: ``(default: VALUE)`` is added where the help does
    not state one itself (an option defaulting to None or a flag states what that means in words)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.option_strings and "default" not in text  # identity: 0 and 0.0 == False are defaults
                and not any(action.default is d for d in (None, False, argparse.SUPPRESS))):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's parser: no abbreviated options (``--work`` must not be taken for
    ``--workers``), and a usage error is one line naming the command, exit status 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _SubParser(_Parser):
    """A sub-command's parser refuses what it does not take itself, so the error names the command
    (the top-level parser would only say ``affectsim: error: unrecognized arguments``)."""

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras


def _command(sub, name: str, help: str, fn=None, **kwargs) -> argparse.ArgumentParser:
    """Sub-command ``name``: its ``--help`` starts with ``help``; ``fn(ns)`` runs it."""
    p = sub.add_parser(name, help=help, description=help, **kwargs)
    if fn is not None:
        p.set_defaults(fn=fn)
    return p


def _commands(p: argparse.ArgumentParser, dest: str, metavar: str | None = None):
    return p.add_subparsers(dest=dest, required=True, metavar=metavar, parser_class=_SubParser)


MOTIONS_DIR = Path(__file__).resolve().parents[1] / "data" / "motions"
EPISODES_DIR = Path(__file__).resolve().parents[1] / "data" / "episodes"
SEED = integer(0)


def _library(p: argparse.ArgumentParser) -> None:
    p.add_argument("--library", default=str(MOTIONS_DIR), metavar="DIR", help="the motion library's directory")


def build_parser() -> argparse.ArgumentParser:
    """The ``affectsim`` parser: each (sub-)sub-command has exactly the options its function reads."""
    p = _Parser(prog="affectsim", description=__doc__)
    sub = _commands(p, "command")

    la = _command(sub, "launch", "run a node graph (like ros2 launch) with DDS on loopback", _launch)
    la.add_argument("graph", choices=list(GRAPHS),
                    help="bench: the stack plus the evaluator (runs the benchmark, writes the report, exits); "
                         "stack: bridge, nav and perception only; robot: nav and perception on a robot's own "
                         "topics (no simulator; execution cmd_vel)")
    la.add_argument("args", nargs="*", help="launch arguments name:=value (scene, mode, execution, real_time_factor, "
                                            "backend, *_topic remappings, ...)")
    la.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID (default: a fresh one per run)")
    la.add_argument("--params-file", default=None, metavar="YAML",
                    help="parameter file of the nodes (default: config/bench.yaml)")

    to = _command(sub, "tour", "drive a scripted tour over ROS and write a contact sheet", _tour)
    to.add_argument("--out", default="results/tour", metavar="DIR", help="directory of the frames and contact sheet")
    to.add_argument("--scene", default="test_apartment", help="scene id (affectsim scenes list)")
    to.add_argument("--x", type=number(unit="m"), default=1.0, help="start x in the map frame, m")
    to.add_argument("--y", type=number(unit="m"), default=2.5, help="start y in the map frame, m")
    to.add_argument("--yaw", type=number(unit="rad"), default=0.0, help="start heading, rad")
    to.add_argument("--library", default=str(MOTIONS_DIR), metavar="DIR",
                    help="motion library for the people in the scene (static people if not built)")

    be = _command(sub, "bench", "benchmarks that print measured ratios (affectsim bench NAME --help)")
    benches = _commands(be, "bench", "NAME")
    for name, b in ((n, load_benches().get(n)) for n in load_benches().names()):
        b.add_arguments(_command(benches, name, b.help, b))

    ob = _command(sub, "observe", "one acquisition on the robot on the graph: every recognizer's prediction, "
                                  "stored with --label in --out (robot sessions give the same report)", _observe)
    ob.add_argument("args", nargs="*", help="the robot's topic names, as for launch robot (depth_topic:=/x, ...)")
    ob.add_argument("--label", choices=EMOTIONS, default=None,
                    help="the emotion the person expresses, to store (default: none, nothing stored)")
    ob.add_argument("--out", default=None, metavar="RUN",
                    help="run directory (results.sqlite; needs --label; default: none, nothing stored)")
    ob.add_argument("--episode-id", default=None, help="id of the stored record (default: robot_<date>_<time>)")
    ob.add_argument("--clip-frames", type=int, default=32, help="frames per clip at 4 Hz, 8..2400 (8 are recognised)")
    ob.add_argument("--policy", default=None, help="A-Obs policy (default: the nav node's)")
    ob.add_argument("--target-description", default=None,
                    help="clothing of the person, e.g. 'red top, grey trousers' (default: none)")
    ob.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID of the robot's graph (default: inherited)")
    ob.add_argument("--max-actions", type=int, default=0,
                    help=f"A-Obs action budget, actions (default: %(default)s, the protocol's {MAX_ACTIONS})")
    ob.add_argument("--timeout", type=float, default=600.0, help="s any step may take, 1..86400")
    ob.add_argument("--record", default=None, metavar="DIR",
                    help="write an MCAP recording of the session to DIR/EPISODE_ID (default: none)")
    ob.add_argument("--record-no-depth", action="store_true", help="leave the depth image out of the recording")
    ob.add_argument("--record-max-mb", type=float, default=DEFAULT_MAX_MB,
                    help="MB of messages (before compression) the recording may hold; beyond it camera images are "
                         "left out (default: %(default)s)")

    ev = _command(sub, "eval", "run the benchmark in-process into a results store (resumes a killed run)", _eval)
    ev.add_argument("--split", choices=SPLITS, default="test", help="dataset split")
    ev.add_argument("--episodes", type=int, default=0,
                    help="stratified subset size, episodes (default: %(default)s, the whole split)")
    ev.add_argument("--ids", default=None, help="comma-separated episode ids instead of a subset (default: none)")
    ev.add_argument("--seed", type=SEED, default=0, help="seed of the subset")
    ev.add_argument("--recognizers", default=",".join(DEFAULT_RECOGNIZERS),
                    help="comma-separated (default: every shipped one, %(default)s)")
    ev.add_argument("--policy", default="baseline", choices=POLICIES.names(), help="A-Obs policy")
    ev.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS.names(), help="renderer")
    ev.add_argument("--humans", default="scripted", choices=HUMANS_MODES,
                    help="scripted: people replay their motion (the paper's protocol); reactive: they notice the "
                         "robot and respond according to their emotion (docs/reactive_humans.md)")
    # append: a list default would be extended, not replaced; None resolves to the paper's families in _eval
    ev.add_argument("--family", action="append", choices=FAMILIES, default=None,
                    help="episode family of the subset or split, repeat for several (default: the paper's three, "
                         f"{', '.join(PAPER_FAMILIES)}; evolving: emotions that change within the episode, "
                         "docs/affect.md)")
    ev.add_argument("--max-actions", type=int, default=MAX_ACTIONS, help="A-Obs action budget per episode, actions")
    ev.add_argument("--max-planner-calls", type=int, default=MAX_PLANNER_CALLS,
                    help="A-Obs planner calls per episode, calls")
    ev.add_argument("--data", default=None, metavar="DIR",
                    help="directory with motions/, scenes/, episodes/ (default: data/)")
    ev.add_argument("--out", default="results/eval", metavar="RUN", help="run directory (an existing run is resumed)")
    ev.add_argument("--workers", type=positive_int, default=2, help="worker processes on this machine")
    ev.add_argument("--ray", default=None, metavar="ADDRESS",
                    help="shard over a Ray cluster, e.g. 127.0.0.1:6379, or 'local' for a private one on 127.0.0.1 "
                         "(default: none, local worker processes)")
    ev.add_argument("--retry-failed", action="store_true", help="re-run episodes recorded as failed")
    ev.add_argument("--allow-dataset-mismatch", action="store_true",
                    help="run although a checkpoint was trained on another dataset version (the report states it)")
    ev.add_argument("--passive-cache", default="off", metavar="DIR",
                    help="where P-Init, P-Ref and P-Mon are looked up and kept, so a run with another policy computes "
                         "A-Obs only ('': the data directory's cache/passive; default: off; docs/evaluation.md)")
    ev.add_argument("--no-report", action="store_true", help="do not write report.md at the end")

    rp = _command(sub, "report", "write RUN/report.md (tables, figures, validity) from a run's results store", _report)
    rp.add_argument("run", help="run directory with results.sqlite")

    mo = _command(sub, "motions", "build, validate, inspect and preview the affective motion library")
    mos = _commands(mo, "what")
    m = _command(mos, "build", "compose the motion library", _motions_build)
    _library(m)
    m.add_argument("--seed", type=SEED, default=0, help="library seed")
    _library(_command(mos, "validate", "check every clip of the library (exit 1 with reasons)", _motions_validate))
    _library(_command(mos, "stats", "feature table, documented directions, held-out classifier", _motions_stats))
    m = _command(mos, "preview", "front, side and rear views of one clip (PNG and GIF)", _motions_preview)
    m.add_argument("motion_id", nargs="?", default=None, metavar="MOTION_ID",
                   help="the clip (default: the first of --emotion, --action, --performer)")
    _library(m)
    m.add_argument("--emotion", choices=EMOTIONS, default="happy", help="emotion of the clip (without MOTION_ID)")
    m.add_argument("--action", choices=SOLO_ACTIONS, default="walk", help="action of the clip (without MOTION_ID)")
    m.add_argument("--performer", default=None, help="performer of the clip, e.g. AG03 (default: any)")
    m.add_argument("--out", default="results/previews", metavar="DIR", help="directory of the previews")
    m = _command(mos, "import-bvh", "retarget BVH files to the avatar and add them to the library", _motions_import_bvh)
    m.add_argument("files", nargs="+", metavar="FILE", help="BVH files")
    _library(m)
    m.add_argument("--import-emotion", choices=EMOTIONS, default=None,
                   help="label of all files (default: from KDAE file names, e.g. F01A0V1.bvh; others are skipped)")
    m.add_argument("--import-action", default="standing", choices=SOLO_ACTIONS, help="action of all files")
    m.add_argument("--joint-map", default=None, metavar="JSON",
                   help="JSON {source joint: avatar point} (default: Mixamo/CMU/KDAE-style names)")
    m.add_argument("--up", choices=["y", "z"], default="y", help="the files' up axis")
    m.add_argument("--units", type=number(0.0, unit="m", lo_open=True), default=0.01,
                   help="m per file unit (cm: 0.01)")
    m.add_argument("--performer", default=None, help="performer id (default: the first 3 characters of the file name)")
    m = _command(mos, "export-bvh", "write one clip as a BVH file", _motions_export_bvh)
    m.add_argument("motion_id", metavar="MOTION_ID", help="the clip")
    _library(m)
    m.add_argument("--out", default="results/previews", metavar="DIR", help="directory of MOTION_ID.bvh")

    ds = _command(sub, "dataset", "compose, validate and inspect the episode dataset")
    dss = _commands(ds, "what")

    def episodes_dir(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--out", default=str(EPISODES_DIR), metavar="DIR", help=f"the episodes' directory{what}")

    d = _command(dss, "build", "compose the episodes from the motion library and the scenes", _dataset_build)
    episodes_dir(d, ", written")
    d.add_argument("--seed", type=SEED, default=0, help="dataset seed")
    d.add_argument("--scale", type=number(0.0, lo_open=True), default=1.0,
                   help="fraction of the paper's episode counts (1.0: 27,647 episodes)")
    episodes_dir(_command(dss, "validate", "check every episode (exit 1 with reasons)", _dataset_validate), "")
    d = _command(dss, "stats", "per-split statistics and a figure", _dataset_stats)
    episodes_dir(d, "")
    d.add_argument("--png", default="results/dataset_stats.png", metavar="FILE", help="figure path")
    d = _command(dss, "show", "one episode's views, map and measures as a PNG in results/episodes", _dataset_show)
    d.add_argument("episode", metavar="EPISODE_ID", help="the episode")
    episodes_dir(d, "")
    d = _command(dss, "counterfactual", "one episode with another emotion swapped in, shown as for show",
                 _dataset_counterfactual)
    d.add_argument("episode", metavar="EPISODE_ID", help="the episode")
    episodes_dir(d, "")
    d.add_argument("--emotion", choices=EMOTIONS, default="happy", help="the emotion swapped in")
    d = _command(dss, "install", "copy the shipped episodes (datasets/episodes) into the episodes' directory, "
                                 "checked against the local motion and scene libraries", _dataset_install)
    d.add_argument("--src", default=str(shipped.SHIPPED_DIR), metavar="DIR", help="the shipped dataset")
    episodes_dir(d, ", written")
    d = _command(dss, "ship", "maintainers: write the shipped dataset from a full build", _dataset_ship)
    d.add_argument("--dst", default=str(shipped.SHIPPED_DIR), metavar="DIR", help="the shipped dataset, written")
    episodes_dir(d, " (a full build)")
    d = _command(dss, "verify", "compose a sample of the shipped dataset's jobs again with this code and compare "
                                "(exit 1 on a difference)", _dataset_verify)
    d.add_argument("--src", default=str(shipped.SHIPPED_DIR), metavar="DIR", help="the shipped dataset")
    d.add_argument("--sample", type=positive_int, default=shipped.VERIFY_SAMPLE, help="jobs composed again")
    d.add_argument("--seed", type=SEED, default=0, help="seed of the sample")
    d = _command(dss, "fingerprint", "CI: rebuild motions, scenes and a 0.05-scale dataset, compare hashes, "
                                     "verify the shipped dataset (exit 1 on a difference)", _dataset_fingerprint)
    d.add_argument("--update", action="store_true", help="record the build as the new reference")

    tr = _command(sub, "train", "train a recognizer on the train split (select on val) and write its checkpoint",
                  _train)
    tr.add_argument("recognizer", choices=TRAINERS.names(), help="the recognizer")
    tr.add_argument("--seed", type=SEED, default=0, help="training seed")
    for split, tiers in SUBSET.items():
        tr.add_argument(f"--{split}-episodes", type=_tiers(split), default=tiers, metavar="N[+N...]",
                        help=f"{split} episodes rendered (two views each), as tiers: each a stratified draw from what "
                             f"earlier tiers left{'; test: report only' if split == 'test' else ''} (default: "
                             f"{'+'.join(map(str, tiers))})")

    pa = _command(sub, "params", "write or check config/bench.yaml against the nodes' parameter declarations")
    pas = _commands(pa, "what")
    _command(pas, "write", "write config/bench.yaml from the nodes' declarations", _params_write)
    _command(pas, "check", "exit 1 when config/bench.yaml differs from the nodes' declarations", _params_check)

    sc = _command(sub, "scenes", "scene utilities")
    scs = _commands(sc, "what")
    _command(scs, "list", "the built-in scenes", _scenes_list)
    s = _command(scs, "build", "generate and check the scenes into data/scenes", _scenes_build)
    s.add_argument("--seed", type=SEED, default=0, help="scene seed")
    s = _command(scs, "preview", "a top-down PNG per scene", _scenes_preview)
    s.add_argument("ids", nargs="*", metavar="ID", help="scene ids (default: scene_000 to scene_002)")
    s.add_argument("--out", default="results/scenes", metavar="DIR", help="directory of the previews")
    s = _command(scs, "check", "reachability, interpenetration, navigable area (exit 1 on a problem)", _scenes_check)
    s.add_argument("ids", nargs="*", metavar="ID", help="scene ids or files (default: the built-ins)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        load_plugins()  # users' plugins are valid choices of --policy, --recognizers, --backend, train
    except AffectSimError as exc:
        print(f"affectsim: error: {exc}", file=sys.stderr)
        return 2
    ns = build_parser().parse_args(argv)
    try:
        return ns.fn(ns)
    except (AffectSimError, KeyError, OSError, ValueError) as exc:  # OSError: FileNotFoundError, TimeoutError, ...
        print(f"affectsim: error: {exc}", file=sys.stderr)
        return 2
    except RecursionError as exc:  # the readers refuse deep nesting; this is the last guard against a traceback
        print(f"affectsim: error: input nested too deeply to process ({exc})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: what was finished is stored (runs and benches resume), no traceback
        print("affectsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
