import py_compile
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

import affectsim_ros
from affectsim_ros.nodes import NODES, PARAMS_FILE, parameter_file_text

ROOT = Path(__file__).resolve().parent.parent


def test_versions_agree():
    xml_version = ET.parse(ROOT / "package.xml").getroot().findtext("version")
    setup_version = re.search(r'VERSION = "([^"]+)"', (ROOT / "setup.py").read_text()).group(1)

    assert xml_version == setup_version == affectsim_ros.__version__


def test_launch_file_compiles_and_uses_the_shared_graph():
    path = ROOT / "launch" / "bench.launch.py"
    py_compile.compile(str(path), doraise=True)
    text = path.read_text()
    assert "GRAPHS" in text and "validate_launch_args" in text and "loopback_env" in text
    assert 'UnsetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE")' in text


def test_parameter_file_is_generated_from_the_node_declarations():
    assert PARAMS_FILE.read_text() == parameter_file_text(), "run `affectsim params write`"
    params = yaml.safe_load(PARAMS_FILE.read_text())
    for node, (_cls, _threads, declared) in NODES.items():
        assert params[node]["ros__parameters"] == {p.name: p.default for p in declared}
        for p in declared:
            assert p.description and p.descriptor().read_only and p.descriptor().additional_constraints


def test_packages_are_levels_without_cycles():
    """No upward or peer import, no cycle, function-level project imports only with a reason (tools/import_graph.py)."""

    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "import_graph.py"), "--check", "--list", "uncommented"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert "upward imports between packages: 0" in proc.stdout and "peer imports between packages:   0" in proc.stdout
    assert "upward imports between sub-packages: 0" in proc.stdout and "peer imports between sub-packages:   0" in proc.stdout
    assert "sub-package cycles (all imports): 0" in proc.stdout


def test_sub_levels_order_the_parts_of_a_package():
    """Within a package: down to a lower sibling or from the root down is fine; up, to a peer or back up to the root is not."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
    graph = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = graph  # its dataclasses look their module up
    spec.loader.exec_module(graph)
    levels = {"p.low": 1, "p.mid": 2, "p.mid2": 2, "p.high": 3, "p.mid.inner": 1, "p.mid.outer": 2}
    verdict = graph.sub_verdict
    assert verdict("p.high.a", "p.low.b", levels) is None
    assert verdict("p.node", "p.high.a", levels) is None  # the root is the top
    assert verdict("p.low.a", "p.low.b", levels) is None
    assert verdict("p.low.a", "p.high.b", levels) == "upward"
    assert verdict("p.mid.a", "p.mid2.b", levels) == "peer"
    assert verdict("p.mid.a", "p.node", levels) == "back-up"
    assert verdict("p.mid.a", "p", levels) == "back-up"  # the package's __init__ is its root too
    assert verdict("p.mid.outer.x", "p.mid.inner.y", levels) is None  # nested levels count among siblings
    assert verdict("p.mid.inner.y", "p.mid.outer.x", levels) == "upward"
    assert verdict("p.mid.inner.y", "p.mid.base", levels) == "back-up"
    for sub in graph.DEFAULT_SUBLEVELS:
        assert (ROOT / sub.replace(".", "/") / "__init__.py").is_file(), sub
    # the drawing: each levelled package a room holding its sub-packages; a broken rule a red arrow
    text = graph.dot(graph.analyse(graph.DEFAULT_LEVELS))
    for sub in graph.DEFAULT_SUBLEVELS:
        assert f'"{sub}" [label=' in text, sub
    assert 'subgraph "cluster_affectsim_eval"' in text and "color=red" not in text


def test_the_repository_explains_itself_no_file_refers_outside_it():
    """A clone holds only itself: every design, protocol and grounding reference is to docs/."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = re.compile(r"\.\./shared|shared/(seeds|PROTOCOL|DESIGN|AFFECTIVE)|(?<![\w/])(PROTOCOL|DESIGN|AFFECTIVE_MOTION)\.md")
    hits = []
    for name in tracked:
        path = ROOT / name
        if path.suffix in {".png", ".npz", ".gz", ".pt", ".onnx", ".tflite", ".bin", ".sqlite"} or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        hits += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if outside.search(line)]
    assert not hits, hits
    for page in ("protocol.md", "design.md", "affective_motion.md"):
        assert (ROOT / "docs" / page).is_file(), page
