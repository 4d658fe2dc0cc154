"""Which DDS setup a process gets: the project's loopback profile for its own commands, the user's
(with a warning naming what it binds) on a robot, and a clear refusal of a profile that cannot be read,
an RMW that is not installed, or a domain id outside DDS's range (no ROS, no nodes)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from affectsim_core.errors import InvalidInput
from affectsim_core.ros import env
from affectsim_core.ros.env import fastdds_profile, loopback_env

AFFECTSIM = str(Path(sys.executable).parent / "affectsim")
OWN = str(fastdds_profile())


def _profile(tmp_path, allow: bool) -> Path:
    body = ("<interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>" if allow else "")
    p = tmp_path / ("allow.xml" if allow else "open.xml")
    p.write_text(f'<dds xmlns="http://www.eprosima.com"><profiles><transport_descriptors><transport_descriptor>'
                 f'<transport_id>u</transport_id><type>UDPv4</type>{body}</transport_descriptor>'
                 f'</transport_descriptors><participant profile_name="p" is_default_profile="true"><rtps>'
                 f'<useBuiltinTransports>{"false" if allow else "true"}</useBuiltinTransports></rtps>'
                 '</participant></profiles></dds>')
    return p


@pytest.mark.parametrize("robot", [False, True])
def test_a_profile_that_cannot_be_read_is_refused_naming_the_variable(tmp_path, robot):
    for bad in ("/nonexistent.xml", str(tmp_path)):  # missing; a directory
        with pytest.raises(InvalidInput, match="FASTDDS_DEFAULT_PROFILES_FILE='.*' is invalid; expected a readable"):
            loopback_env(1, base={"FASTDDS_DEFAULT_PROFILES_FILE": bad}, robot=robot)
    big = tmp_path / "big.xml"
    big.write_bytes(b" " * (2 << 20))
    with pytest.raises(InvalidInput, match="at most 1048576 bytes"):
        loopback_env(1, base={"FASTDDS_DEFAULT_PROFILES_FILE": str(big)}, robot=robot)


def test_the_projects_commands_run_on_its_profile_and_a_robot_on_the_users_with_a_warning(tmp_path):
    said = []
    user = _profile(tmp_path, allow=False)
    env = loopback_env(1, base={"FASTDDS_DEFAULT_PROFILES_FILE": str(user)}, warn=said.append)
    assert env["FASTDDS_DEFAULT_PROFILES_FILE"] == OWN and "is ignored" in said[-1]
    assert env["RMW_FASTRTPS_USE_QOS_FROM_XML"] == "1"  # the profile's dynamic history memory applies
    env = loopback_env(1, base={"FASTDDS_DEFAULT_PROFILES_FILE": str(user)}, robot=True, warn=said.append)
    assert env["FASTDDS_DEFAULT_PROFILES_FILE"] == str(user)
    assert "RMW_FASTRTPS_USE_QOS_FROM_XML" not in env  # the user's profile governs their QoS as they set it
    assert "your DDS profile is used" in said[-1] and "every interface: 0.0.0.0 and 127.0.0.1" in said[-1], said[-1]
    allow = _profile(tmp_path, allow=True)
    loopback_env(1, base={"FASTDDS_DEFAULT_PROFILES_FILE": str(allow)}, robot=True, warn=said.append)
    assert said[-1].endswith("the graph will bind the profile's allow-list: 127.0.0.1"), said[-1]
    n = len(said)
    assert loopback_env(1, base={}, robot=True, warn=said.append)["FASTDDS_DEFAULT_PROFILES_FILE"] == OWN
    assert len(said) == n  # the default: nothing to warn about


def test_another_rmw_is_respected_on_a_robot_only_and_only_if_installed():
    with pytest.raises(InvalidInput, match="RMW_IMPLEMENTATION='rmw_cyclonedds_cpp' is invalid; expected rmw_fastrtps"):
        loopback_env(1, base={"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"})
    with pytest.raises(InvalidInput, match="RMW_IMPLEMENTATION='rmw_nope_cpp' is invalid; expected an installed RMW"):
        loopback_env(1, base={"RMW_IMPLEMENTATION": "rmw_nope_cpp"}, robot=True)
    said = []
    env = loopback_env(1, base={"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}, robot=True, warn=said.append)
    assert env["RMW_IMPLEMENTATION"] == "rmw_fastrtps_cpp" and not said


@pytest.mark.parametrize("bad", ["300", "-5", "x", "1" * 40])
def test_a_domain_id_outside_the_range_dds_allows_is_refused(bad):
    with pytest.raises(InvalidInput, match=r"ROS_DOMAIN_ID='.*' is invalid; expected an integer in \[0, 232\]"):
        loopback_env(base={"ROS_DOMAIN_ID": bad})


def test_the_launcher_refuses_a_missing_profile_before_any_node_starts():
    env = {k: v for k, v in os.environ.items() if k != "ROS_DOMAIN_ID"}
    env["FASTDDS_DEFAULT_PROFILES_FILE"] = "/nonexistent.xml"  # silently opened every interface before
    out = subprocess.run([AFFECTSIM, "launch", "stack"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "FASTDDS_DEFAULT_PROFILES_FILE='/nonexistent.xml' is invalid" in out.stderr + out.stdout
    out = subprocess.run([AFFECTSIM, "launch", "stack", "--domain-id", "300"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "domain id=300 is invalid" in out.stderr + out.stdout, out.stderr


def test_concurrent_runs_never_share_a_domain_id():
    """Random ids alone collided (a soak's nodes received a test's stand-in robot's TF): an id held by
    another process is never picked, and neither is one in which a DDS participant listens."""
    child = subprocess.Popen([sys.executable, "-c", "import sys\nfrom affectsim_core.ros.env import pick_domain_id\n"
                              "print(' '.join(str(pick_domain_id()) for _ in range(40)), flush=True)\nsys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = {int(x) for x in child.stdout.readline().split()}
        assert len(theirs) == 40
        ours = [env.pick_domain_id() for _ in range(30)]
        assert not theirs & set(ours) and len(set(ours)) == 30
    finally:
        child.communicate("", timeout=30)
    for d in ours:
        env.release_domain_id(d)
    assert not set(ours) & set(env._held)


def test_a_domain_with_a_listening_participant_counts_as_in_use():
    import socket

    d = env.pick_domain_id()
    try:
        assert not env._domain_in_use(d)
        port = env.RTPS_PORT_BASE + env.RTPS_DOMAIN_GAIN * d + env.RTPS_UNICAST_OFFSET + 2 * 7  # participant 7
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", port))
            assert env._domain_in_use(d)
        assert not env._domain_in_use(d)
    finally:
        env.release_domain_id(d)
