"""The node executables: ``python -m affectsim_ros.nodes NAME [--ros-args ...]`` or the console scripts
``bridge_node``, ``nav_node``, ``perception_node``, ``evaluator_node``.

Composing plugins is the application's job. Importing the plugin packages here registers every
shipped plugin (backends, policies, person detectors, recognizers) before a node reads its
parameters, and :func:`~affectsim_core.plugins.load_plugins` imports the users' plugin modules; the
nav node (level 3) names its person detector by a registry entry of ``affectsim_core`` that the
perception package (its peer, which it must not import) fills.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

if __name__ == "__main__":  # Ctrl-C while the modules below load: a quiet exit (run_node handles it later)
    signal.signal(signal.SIGINT, lambda _s, _f: sys.exit(130))

import affectsim_nav  # noqa: F401  (registers the shipped policies)
import affectsim_perception  # noqa: F401  (registers the person detectors and recognizers)
from affectsim_bridge import bridge_node
from affectsim_core.plugins import load_plugins
from affectsim_core.ros.node_main import run_node
from affectsim_core.ros.params import parameter_file
from affectsim_eval import evaluator_node
from affectsim_nav import nav_node
from affectsim_perception import perception_node

#: node name -> (class, executor threads, parameters)
NODES = {"bridge": (bridge_node.BridgeNode, 3, bridge_node.PARAMS), "nav": (nav_node.NavNode, 4, nav_node.PARAMS),
         "perception": (perception_node.PerceptionNode, 3, perception_node.PARAMS),
         "evaluator": (evaluator_node.EvaluatorNode, 4, evaluator_node.PARAMS)}
PARAMS_FILE = Path(__file__).resolve().parents[1] / "config" / "bench.yaml"
PARAMS_HEADER = """# One parameter file for every node of the graph (launch and `affectsim launch` both use it).
# Generated from the nodes' parameter declarations by `affectsim params write`; `make test` checks it
# is current. Each value is the node's default; accepted values: `ros2 param describe /NODE NAME`
# or the PARAMS of the node modules (affectsim_bridge.bridge_node, affectsim_nav.nav_node,
# affectsim_perception.perception_node, affectsim_eval.evaluator_node). Every parameter is read-only."""


def parameter_file_text() -> str:
    """The text of ``config/bench.yaml``: every node's parameters at their defaults."""
    return parameter_file({name: params for name, (_cls, _threads, params) in NODES.items()}, PARAMS_HEADER)


def run(name: str, args: list[str] | None = None) -> None:
    """Run node ``name`` (users' plugin modules are imported first, so their names are valid parameters)."""
    cls, threads, _params = NODES[name]

    def create():
        load_plugins()
        return cls()

    run_node(create, name, args, threads=threads)


def bridge_main(args: list[str] | None = None) -> None:
    run("bridge", args)


def nav_main(args: list[str] | None = None) -> None:
    run("nav", args)


def perception_main(args: list[str] | None = None) -> None:
    run("perception", args)


def evaluator_main(args: list[str] | None = None) -> None:
    run("evaluator", args)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in NODES:
        print(f"usage: python -m affectsim_ros.nodes {{{','.join(NODES)}}} [--ros-args ...]", file=sys.stderr)
        sys.exit(2)
    run(argv[0], [sys.argv[0], *argv[1:]])


if __name__ == "__main__":
    main()
