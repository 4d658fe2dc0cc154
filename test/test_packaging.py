import py_compile
import re
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_versions_agree():
    xml_version = ET.parse(ROOT / "package.xml").getroot().findtext("version")
    setup_version = re.search(r'VERSION = "([^"]+)"', (ROOT / "setup.py").read_text()).group(1)
    import affectsim_ros

    assert xml_version == setup_version == affectsim_ros.__version__


def test_launch_file_compiles_and_uses_the_shared_graph():
    path = ROOT / "launch" / "bench.launch.py"
    py_compile.compile(str(path), doraise=True)
    text = path.read_text()
    assert "GRAPHS" in text and "validate_launch_args" in text and "LOCALHOST" in text


def test_parameter_file_matches_node_parameters():
    import yaml

    from affectsim_bridge.bridge_node import PARAMS

    params = yaml.safe_load((ROOT / "config" / "bench.yaml").read_text())["bridge"]["ros__parameters"]
    assert set(params) == set(PARAMS)
