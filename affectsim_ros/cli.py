"""``affectsim`` command line.

  affectsim launch bench [name:=value ...] [--domain-id N]   run the graph (pip-only ``ros2 launch``)
  affectsim tour [--out DIR]                                 scripted world tour over ROS + contact sheet
  affectsim bench NAME [options]                            a benchmark (affectsim_ros/benches/; list: bench --help)
  affectsim launch stack [name:=value ...]                   the robot stack alone (bridge, nav, perception)
  affectsim eval [--split test] [--episodes N] [--out DIR]   the benchmark in-process (resumes; --ray ADDRESS)
  affectsim report RUN                                       RUN/report.md with the paper's tables and figures
  affectsim launch robot [execution:=cmd_vel] [*_topic:=..]  nav and perception on a robot's own topics
  affectsim observe [--label EMOTION] [--out RUN]            one acquisition on the robot on the graph, stored
  affectsim train RECOGNIZER [--seed 0]                      train pose-temporal | rgb-clip | committee | majority
  affectsim dataset build | validate | stats | fingerprint     compose, check, describe the episodes; CI hash check
  affectsim scenes list                                      built-in scenes
  affectsim params write | check                             config/bench.yaml from the nodes' declarations
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
from affectsim_eval.dataset import build as dbuild
from affectsim_eval.dataset import fingerprint, inspect
from affectsim_eval.dataset.context import MAX_CONTEXT_F1
from affectsim_eval.run.report import write_report
from affectsim_eval.run.runner import run_eval
from affectsim_eval.training.train import SUBSET, TRAINABLE, train
from affectsim_nav.nav_node import MAX_GOAL_COUNT
from affectsim_nav.policy import POLICIES
from affectsim_perception.recognizers import DEFAULT_RECOGNIZERS
from affectsim_ros import launcher
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
    observe(ns.label, Path(ns.out) if ns.out else None, ns.episode_id or "", ns.clip_frames, ns.policy or "",
            ns.target_description or "", ns.timeout, launch_remaps(args), ns.max_actions)
    return 0


def _eval(ns: argparse.Namespace) -> int:
    cfg = EvalConfig(split=ns.split, episodes=ns.episodes, seed=ns.seed,
                     ids=tuple(i for i in (ns.ids or "").split(",") if i),
                     recognizers=tuple(r for r in (ns.recognizers or ",".join(DEFAULT_RECOGNIZERS)).split(",") if r),
                     policy=ns.policy, max_actions=ns.max_actions, max_planner_calls=ns.max_planner_calls,
                     backend=ns.backend, humans=ns.humans, families=tuple(ns.family or PAPER_FAMILIES))
    summary = run_eval(Path(ns.out), cfg, ns.workers, ns.ray, ns.retry_failed, Path(ns.data) if ns.data else DATA_DIR,
                       allow_dataset_mismatch=ns.allow_dataset_mismatch)
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


def _scenes(ns: argparse.Namespace) -> int:
    if ns.what == "build":
        scene_generator.build_scenes(seed=ns.seed)
        return 0
    if ns.what == "preview":
        ids = ns.ids or [f"scene_{i:03d}" for i in range(3)]
        for sid in ids:
            print(f"[scenes] {scene_generator.preview_scene(load_scene(sid), Path(ns.out) / f'{sid}.png')}")
        return 0
    if ns.what == "check":
        bad = 0
        for sid in ns.ids or builtin_scene_ids():
            report = scene_generator.check_scene(load_scene(sid))
            bad += bool(report["problems"])
            print(f"{sid}: {report}")
        return 1 if bad else 0
    for sid in builtin_scene_ids():
        s = load_scene(sid)
        print(f"{sid}: {s.name} ({len(s.rooms)} rooms, {len(s.furniture)} furniture, {len(s.doors())} doors)")
    return 0


def _motions(ns: argparse.Namespace) -> int:
    root = Path(ns.library)
    if ns.what == "build":
        library.build(root, seed=ns.seed)
        return 0
    lib = library.Library(root)
    if ns.what == "validate":
        report = validate_library(lib)
        print(f"[validate] {report.checked} clips, {len(lib.manifest.get('dyadic', []))} dyadic sequences checked")
        for reason, n in report.failures.most_common():
            print(f"  FAIL {reason}: {n} clips, e.g. {report.examples[reason]}")
        if report.ok:
            slide = max(report.measures.get("foot_slide", [0.0]))
            print(f"[validate] all checks passed (largest planted-foot speed {slide:.3f} m/s)")
        return 0 if report.ok else 1
    if ns.what == "stats":
        res = library_stats(lib)
        ok = all(c["holds"] for c in res["checks"]) and 0.7 <= res["macro_f1"] <= 0.97
        return 0 if ok else 1
    if ns.what == "import-bvh":
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
    if ns.what == "export-bvh":
        if not ns.files:
            raise AffectSimError("export-bvh needs a motion id (positional)")
        out = Path(ns.out) / f"{ns.files[0]}.bvh"
        export_bvh(lib.load(ns.files[0]), out)
        print(f"[export-bvh] {out}")
        return 0
    if ns.what == "preview":
        if ns.files:  # a motion id
            mid = ns.files[0]
        else:
            sel = [e for e in lib.select(emotion=ns.emotion, action=ns.action) if e["family"] != "evolving"
                   and (ns.performer is None or e["performer"] == ns.performer)]
            if not sel:
                raise AffectSimError(f"no clip with emotion={ns.emotion!r} action={ns.action!r} in {root}")
            mid = sel[0]["id"]
        png, gif = write_preview(lib.load(mid), Path(ns.out))
        print(f"[preview] {png}\n[preview] {gif}")
        return 0
    raise AffectSimError(f"motions {ns.what!r} is unknown")


def _train(ns: argparse.Namespace) -> int:
    sizes = {}
    for split in SPLITS:
        text = getattr(ns, f"{split}_episodes")
        try:
            tiers = tuple(int(t) for t in str(text).split("+"))
        except ValueError:
            tiers = ()
        if not tiers or tiers[0] < 20 or min(tiers) < 1:
            raise InvalidInput(f"--{split}-episodes", text, "episode counts joined by '+' (tiers), the first at least 20")
        sizes[split] = tiers
    train(ns.recognizer, ns.seed, subset=sizes)
    return 0


def _dataset(ns: argparse.Namespace) -> int:
    root = Path(ns.out)
    if ns.what == "build":
        dbuild.build_dataset(root, seed=ns.seed, scale=ns.scale)
        return 0
    if ns.what == "validate":
        rep = inspect.validate_dataset(root)
        print(f"[validate] {rep['episodes']} episodes: {rep['counts']}")
        c = rep["dyadic_context"]
        if c["macro_f1"] is not None:
            print(f"[validate] dyadic context-only classifier (train {c['train']}, test {c['test']} episodes): "
                  f"Macro-F1 {c['macro_f1']:.3f} (at most {MAX_CONTEXT_F1}; chance 0.20)")
        for why, n in sorted(rep["problems"].items(), key=lambda kv: -kv[1]):
            print(f"  FAIL {why}: {n} (e.g. {rep['examples'].get(why, '-')})")
        if not rep["problems"]:
            print("[validate] all checks passed")
        return 0 if not rep["problems"] else 1
    if ns.what == "stats":
        inspect.dataset_stats(root, Path(ns.png))
        return 0
    if ns.what == "fingerprint":
        return 1 if fingerprint.check(update=ns.update) else 0
    if ns.what in ("show", "counterfactual"):
        if not ns.episode:
            raise AffectSimError(f"dataset {ns.what} needs an EPISODE_ID")
        ep = inspect.find_episode(ns.episode, root)
        if ns.what == "counterfactual":
            ep = inspect.counterfactual(ep, ns.emotion, Library())
            d = ep.to_dict()
            print(json.dumps({k: d[k] for k in ("episode_id", "counterfactual_of", "emotion", "humans")}, indent=1))
        out = inside(Path("results/episodes"), ep.episode_id, ".png", "episode_id")
        print(f"[dataset] {inspect.show_episode(ep, out)}")
        return 0
    raise AffectSimError(f"dataset {ns.what!r} is unknown")


def _params(ns: argparse.Namespace) -> int:
    text = parameter_file_text()
    if ns.what == "write":
        PARAMS_FILE.write_text(text)
        print(f"[params] {PARAMS_FILE}")
        return 0
    if PARAMS_FILE.read_text() != text:
        print(f"[params] {PARAMS_FILE} differs from the nodes' declarations: run `affectsim params write`",
              file=sys.stderr)
        return 1
    print(f"[params] {PARAMS_FILE} is current")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="affectsim", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    la = sub.add_parser("launch", help="run a node graph (like ros2 launch) with DDS on loopback")
    la.add_argument("graph", choices=list(GRAPHS),
                    help="bench: the stack plus the evaluator (runs the benchmark, writes the report, exits); "
                         "stack: bridge, nav and perception only; robot: nav and perception on a robot's own "
                         "topics (no simulator; execution cmd_vel)")
    la.add_argument("args", nargs="*", help="launch arguments name:=value (scene, mode, execution, real_time_factor, "
                                            "backend, *_topic remappings, ...)")
    la.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID (default: a fresh one per run)")
    la.add_argument("--params-file", default=None, help="YAML parameter file (default: config/bench.yaml)")
    la.set_defaults(fn=_launch)
    to = sub.add_parser("tour", help="drive a scripted tour over ROS and write a contact sheet")
    to.add_argument("--out", default="results/tour")
    to.add_argument("--scene", default="test_apartment")
    to.add_argument("--x", type=float, default=1.0)
    to.add_argument("--y", type=float, default=2.5)
    to.add_argument("--yaw", type=float, default=0.0)
    to.add_argument("--library", default=str(Path(__file__).resolve().parents[1] / "data" / "motions"),
                    help="motion library for the people in the scene (static people if not built)")
    to.set_defaults(fn=_tour)
    be = sub.add_parser("bench", help="benchmarks that print measured ratios (affectsim bench NAME --help)")
    benches = be.add_subparsers(dest="bench", required=True, metavar="NAME")
    for name, b in ((n, load_benches().get(n)) for n in load_benches().names()):
        bp = benches.add_parser(name, help=b.help, description=b.help)
        b.add_arguments(bp)
        bp.set_defaults(fn=b)
    ob = sub.add_parser("observe", help="one acquisition on the robot on the graph: every recognizer's prediction, "
                                        "stored with --label in --out (robot sessions give the same report)")
    ob.add_argument("args", nargs="*", help="the robot's topic names, as for launch robot (depth_topic:=/x, ...)")
    ob.add_argument("--label", choices=EMOTIONS, default=None, help="the emotion the person expresses (to store)")
    ob.add_argument("--out", default=None, help="run directory (results.sqlite; needs --label)")
    ob.add_argument("--episode-id", default=None, help="default: robot_<date>_<time>")
    ob.add_argument("--clip-frames", type=int, default=32, help="frames per clip at 4 Hz (8..2400; 8 are recognised)")
    ob.add_argument("--policy", default=None, help="A-Obs policy (default: the nav node's)")
    ob.add_argument("--target-description", default=None, help="clothing of the person, e.g. 'red top, grey trousers'")
    ob.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID of the robot's graph (default: inherited)")
    ob.add_argument("--max-actions", type=int, default=0, help="A-Obs action budget (default 0: the protocol's 480)")
    ob.add_argument("--timeout", type=float, default=600.0, help="seconds any step may take")
    ob.set_defaults(fn=_observe)
    ev = sub.add_parser("eval", help="run the benchmark in-process into a results store (resumes a killed run)")
    ev.add_argument("--split", choices=SPLITS, default="test")
    ev.add_argument("--episodes", type=int, default=0, help="stratified subset size (default 0: the whole split)")
    ev.add_argument("--ids", default=None, help="comma-separated episode ids instead of a subset")
    ev.add_argument("--seed", type=int, default=0, help="seed of the subset")
    ev.add_argument("--recognizers", default=None, help="comma-separated (default: every shipped one)")
    ev.add_argument("--policy", default="baseline", choices=POLICIES.names())
    ev.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS.names())
    ev.add_argument("--humans", default="scripted", choices=HUMANS_MODES,
                    help="scripted: people replay their motion (the paper's protocol); reactive: they notice the "
                         "robot and respond according to their emotion (docs/reactive_humans.md)")
    ev.add_argument("--family", action="append", choices=FAMILIES, default=None,
                    help="episode family of the subset or split (repeat for several; default: the paper's three; "
                         "evolving: emotions that change within the episode, docs/affect.md)")
    ev.add_argument("--max-actions", type=int, default=MAX_ACTIONS)
    ev.add_argument("--max-planner-calls", type=int, default=MAX_PLANNER_CALLS)
    ev.add_argument("--data", default=None, help="directory with motions/, scenes/, episodes/ (default: data/)")
    ev.add_argument("--out", default="results/eval", help="run directory (an existing run there is resumed)")
    ev.add_argument("--workers", type=int, default=2, help="worker processes on this machine")
    ev.add_argument("--ray", default=None, metavar="ADDRESS",
                    help="shard over a Ray cluster (e.g. 127.0.0.1:6379, or 'local' for a private one on 127.0.0.1)")
    ev.add_argument("--retry-failed", action="store_true", help="re-run episodes recorded as failed")
    ev.add_argument("--allow-dataset-mismatch", action="store_true",
                    help="run although a checkpoint was trained on another dataset version (the report states it)")
    ev.add_argument("--no-report", action="store_true", help="do not write report.md at the end")
    ev.set_defaults(fn=_eval)
    rp = sub.add_parser("report", help="write RUN/report.md (tables, figures, validity) from a run's results store")
    rp.add_argument("run", help="run directory with results.sqlite")
    rp.set_defaults(fn=_report)
    mo = sub.add_parser("motions", help="build, validate, inspect and preview the affective motion library")
    mo.add_argument("what", choices=["build", "validate", "stats", "preview", "import-bvh", "export-bvh"])
    mo.add_argument("files", nargs="*", help="import-bvh: BVH files; export-bvh, preview: one motion id")
    mo.add_argument("--import-emotion", choices=EMOTIONS, default=None,
                    help="import-bvh: label of all files (default: from KDAE file names, e.g. F01A0V1.bvh)")
    mo.add_argument("--import-action", default="standing", choices=SOLO_ACTIONS)
    mo.add_argument("--joint-map", default=None, help="import-bvh: JSON {source joint: avatar point}")
    mo.add_argument("--up", choices=["y", "z"], default="y", help="import-bvh: the file's up axis")
    mo.add_argument("--units", type=float, default=0.01, help="import-bvh: metres per file unit (cm: 0.01)")
    mo.add_argument("--library", default=str(Path(__file__).resolve().parents[1] / "data" / "motions"))
    mo.add_argument("--seed", type=int, default=0, help="build: library seed")
    mo.add_argument("--emotion", choices=EMOTIONS, default="happy")
    mo.add_argument("--action", choices=SOLO_ACTIONS, default="walk")
    mo.add_argument("--performer", default=None)
    mo.add_argument("--out", default="results/previews")
    mo.set_defaults(fn=_motions)
    ds = sub.add_parser("dataset", help="compose, validate and inspect the episode dataset")
    ds.add_argument("what", choices=["build", "validate", "stats", "show", "counterfactual", "fingerprint"])
    ds.add_argument("episode", nargs="?", help="show / counterfactual: EPISODE_ID")
    ds.add_argument("--emotion", choices=EMOTIONS, default="happy",
                    help="counterfactual: the emotion swapped in")
    ds.add_argument("--png", default="results/dataset_stats.png", help="stats: figure path")
    ds.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "data" / "episodes"))
    ds.add_argument("--seed", type=int, default=0)
    ds.add_argument("--scale", type=float, default=1.0, help="fraction of the paper's episode counts (1.0: 27,647)")
    ds.add_argument("--update", action="store_true", help="fingerprint: record the build as the new reference")
    ds.set_defaults(fn=_dataset)
    tr = sub.add_parser("train", help="train a recognizer on the train split (select on val) and write its checkpoint")
    tr.add_argument("recognizer", choices=TRAINABLE)
    tr.add_argument("--seed", type=int, default=0)

    for split, tiers in SUBSET.items():
        tr.add_argument(f"--{split}-episodes", default="+".join(map(str, tiers)),
                        help=f"{split} episodes rendered (two views each), as tiers N[+N...]: each a stratified "
                             f"draw from what earlier tiers left{'; test: report only' if split == 'test' else ''}")
    tr.set_defaults(fn=_train)
    pa = sub.add_parser("params", help="write or check config/bench.yaml against the nodes' parameter declarations")
    pa.add_argument("what", choices=["write", "check"])
    pa.set_defaults(fn=_params)
    sc = sub.add_parser("scenes", help="scene utilities")
    sc.add_argument("what", choices=["list", "build", "preview", "check"])
    sc.add_argument("ids", nargs="*", help="preview/check: scene ids (default: first three / built-ins)")
    sc.add_argument("--seed", type=int, default=0)
    sc.add_argument("--out", default="results/scenes")
    sc.set_defaults(fn=_scenes)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        load_plugins()  # users' plugins are valid choices of --policy, --recognizers, --backend
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


if __name__ == "__main__":
    sys.exit(main())
