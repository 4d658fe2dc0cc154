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
