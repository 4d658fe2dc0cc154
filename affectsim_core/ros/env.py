"""Keep every DDS participant on loopback with a per-run domain id (docs/design.md §4).

Every process the project starts gets the Fast DDS profile ``config/fastdds_loopback.xml``: shared
memory, and UDP on 127.0.0.1 only, with unicast discovery to the participants on this host (initial
peers 127.0.0.1, no multicast), so every socket binds 127.0.0.1. ``ROS_AUTOMATIC_DISCOVERY_RANGE``
is removed: with it set (even to LOCALHOST) the RMW opens further sockets on 0.0.0.0 and on the
machine's external address (measured with ``ss``; the test suite checks it).
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import sys
import tempfile
from pathlib import Path
from typing import Callable

from affectsim_core.errors import InvalidInput

DOMAIN_MIN, DOMAIN_MAX = 1, 101  # Linux-safe domain ids (ports of 102+ collide with ephemeral ports)
PROFILE_NAME = "fastdds_loopback.xml"
DISCOVERY_RANGE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
RMW = "rmw_fastrtps_cpp"  # the loopback guarantee is the Fast DDS profile's; another RMW ignores it


def fastdds_profile() -> Path:
    """``config/fastdds_loopback.xml`` of the source tree, else of the installed share directory."""
    src = Path(__file__).resolve().parents[2] / "config" / PROFILE_NAME
    if src.is_file():
        return src
    try:
        from ament_index_python.packages import get_package_share_directory  # only in a ROS 2 install

        installed = Path(get_package_share_directory("affectsim")) / "config" / PROFILE_NAME
    except Exception as exc:  # PackageNotFoundError or no ament index: nowhere to look
        raise FileNotFoundError(f"{PROFILE_NAME} not found in the source tree or the ament index; without it DDS "
                                "would listen on every interface") from exc
    if not installed.is_file():
        raise FileNotFoundError(f"{installed} is missing; without it DDS would listen on every interface")
    return installed


DDS_DOMAIN_MAX = 232  # the largest domain id Fast DDS accepts (its port formula); Linux-safe ids end at 101


def check_domain_id(value: object, name: str = "ROS_DOMAIN_ID") -> int:
    """``value`` as a DDS domain id (0..232); InvalidInput naming ``name`` before any node starts."""
    text = str(value).strip()
    if not (text.isdigit() and len(text) <= 3 and int(text) <= DDS_DOMAIN_MAX):
        raise InvalidInput(name, value, f"an integer in [0, {DDS_DOMAIN_MAX}] (DDS's range; {DOMAIN_MIN}..{DOMAIN_MAX} "
                           "avoid Linux's ephemeral ports)")
    return int(text)


DOMAIN_LOCK_DIR = Path(tempfile.gettempdir()) / "affectsim-ros-domains"  # one lock file per domain id
RTPS_PORT_BASE, RTPS_DOMAIN_GAIN, RTPS_UNICAST_OFFSET = 7400, 250, 10  # the RTPS port formula (Fast DDS defaults)
PARTICIPANTS_CHECKED = 32  # participant ids whose discovery port is probed (the profile's maxInitialPeersRange)
_held: dict[int, int] = {}  # domain id -> descriptor of its locked file, for as long as this process runs


def _domain_in_use(domain: int) -> bool:
    """True if a DDS participant of ``domain`` listens on this host: one of its unicast discovery ports
    (participants 0..31) cannot be bound on 127.0.0.1."""
    for participant in range(PARTICIPANTS_CHECKED):
        port = RTPS_PORT_BASE + RTPS_DOMAIN_GAIN * domain + RTPS_UNICAST_OFFSET + 2 * participant
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return True
    return False


def pick_domain_id() -> int:
    """A domain id for one run that no other run on this machine uses: a random order over
    DOMAIN_MIN..DOMAIN_MAX, taking the first whose lock file (:data:`DOMAIN_LOCK_DIR`) this process can
    lock and in which no DDS participant listens. The lock is held until :func:`release_domain_id` or
    the process ends (random ids alone collided: a soak's nodes took a test's stand-in robot's TF).
    RuntimeError if every id is taken."""
    DOMAIN_LOCK_DIR.mkdir(mode=0o777, parents=True, exist_ok=True)
    ids = list(range(DOMAIN_MIN, DOMAIN_MAX + 1))
    random.SystemRandom().shuffle(ids)
    for domain in ids:
        if domain in _held:
            continue
        fd = os.open(DOMAIN_LOCK_DIR / f"{domain}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if _domain_in_use(domain):
            os.close(fd)  # closing releases the lock
            continue
        _held[domain] = fd
        return domain
    raise RuntimeError(f"no free ROS domain id in {DOMAIN_MIN}..{DOMAIN_MAX} on this machine ({len(_held)} held by "
                       f"this process, the rest by other runs or DDS participants); end a run or set ROS_DOMAIN_ID")


def release_domain_id(domain: int) -> None:
    """Give back a domain id of :func:`pick_domain_id` (nothing if this process does not hold it)."""
    fd = _held.pop(domain, None)
    if fd is not None:
        os.close(fd)


PROFILE_VAR = "FASTDDS_DEFAULT_PROFILES_FILE"
QOS_FROM_XML_VAR = "RMW_FASTRTPS_USE_QOS_FROM_XML"  # "1": the RMW takes memory policy and publish mode from the profile
MAX_PROFILE_BYTES = 1 << 20  # a Fast DDS profile larger than 1 MiB is refused unread


def _readable_profile(path: str) -> Path:
    """``path`` as a regular, readable file of at most :data:`MAX_PROFILE_BYTES`; InvalidInput naming
    the variable otherwise (a profile Fast DDS cannot read silently leaves it on every interface)."""
    p = Path(path)
    expected = f"a readable Fast DDS XML profile of at most {MAX_PROFILE_BYTES} bytes (or unset: the project's {PROFILE_NAME})"
    try:
        if not p.is_file() or p.stat().st_size > MAX_PROFILE_BYTES:
            raise InvalidInput(PROFILE_VAR, path, expected)
        with p.open("rb") as f:
            f.read(1)
    except OSError as exc:
        raise InvalidInput(PROFILE_VAR, path, f"{expected}; {exc.strerror}") from None
    return p


def _interface_addresses() -> list[str]:
    """IPv4 addresses of this machine's interfaces (Linux)."""
    import fcntl  # Linux only; this list is for a warning
    import socket
    import struct

    out = []
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:  # SIOCGIFADDR
                out.append(socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))[20:24]))
            except OSError:
                pass
    return out


def profile_addresses(path: Path) -> str:
    """What a Fast DDS profile binds, in words: its interface allow-list and locators, or every interface."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise InvalidInput(PROFILE_VAR, str(path), f"a well-formed Fast DDS XML profile ({exc})") from None
    local = lambda e: e.tag.rsplit("}", 1)[-1]  # noqa: E731
    allowed = sorted({a.text.strip() for w in root.iter() if local(w) == "interfaceWhiteList" for a in w
                      if a.text and a.text.strip()})
    builtin_off = any(local(e) == "useBuiltinTransports" and (e.text or "").strip().lower() == "false"
                      for e in root.iter())
    if builtin_off and allowed:
        return f"the profile's allow-list: {', '.join(allowed)}"
    return f"every interface: 0.0.0.0 and {', '.join(_interface_addresses()) or 'the machine addresses'}" + (
        f" (allow-list {', '.join(allowed)}, but the built-in transports stay on)" if allowed else "")


def _rmw_installed(name: str) -> bool:
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p] + [sys.prefix]
    return any((Path(p) / "lib" / f"lib{name}.so").exists() for p in prefixes)


def loopback_env(domain_id: int | None = None, base: dict[str, str] | None = None, robot: bool = False,
                 warn: Callable[[str], None] | None = None) -> dict[str, str]:
    """Environment for a process the project starts: given or inherited domain id, and DDS on loopback.

    The project's own commands (``robot=False``: the benchmark, the simulator graph, the benches, the
    tests) always run Fast DDS on the project's profile: another ``RMW_IMPLEMENTATION`` is refused,
    a ``FASTDDS_DEFAULT_PROFILES_FILE`` of the user's is replaced (said through ``warn``). On a robot
    (``robot=True``: ``affectsim launch robot``, ``affectsim observe``, the nodes themselves) the
    user's middleware is respected with a warning: their own profile (the addresses it binds are
    listed) or another RMW (the loopback profile does not apply to it). A profile variable naming a
    missing, unreadable or oversized file is refused in both cases."""
    env = dict(os.environ if base is None else base)
    warn = warn or (lambda text: print(f"[affectsim] {text}", file=sys.stderr, flush=True))
    env.pop(DISCOVERY_RANGE, None)
    rmw = env.setdefault("RMW_IMPLEMENTATION", RMW)
    if rmw != RMW:
        if not robot:
            raise InvalidInput("RMW_IMPLEMENTATION", rmw, f"{RMW} (or unset): the project's commands keep DDS on "
                               "127.0.0.1 with a Fast DDS profile, which another RMW would ignore")
        if not _rmw_installed(rmw):
            raise InvalidInput("RMW_IMPLEMENTATION", rmw, f"an installed RMW (lib{rmw}.so in AMENT_PREFIX_PATH or "
                               f"{sys.prefix}/lib), e.g. {RMW}")
        warn(f"RMW_IMPLEMENTATION={rmw}: the loopback profile does not apply; DDS binds what that middleware's "
             "own configuration says (by default every interface)")
    own = fastdds_profile()
    given = env.get(PROFILE_VAR)
    if given is not None:
        profile = _readable_profile(given)
        if profile.resolve() != own.resolve():
            if robot:
                if rmw == RMW:
                    warn(f"{PROFILE_VAR}={given}: your DDS profile is used, not the project's loopback one; the graph "
                         f"will bind {profile_addresses(profile)}")
            else:
                warn(f"{PROFILE_VAR}={given} is ignored: the project's commands run on its loopback profile {own}")
                given = None
    env[PROFILE_VAR] = given if given is not None else str(own)
    if given is None or Path(given).resolve() == own.resolve():
        env[QOS_FROM_XML_VAR] = "1"  # the profile's dynamic history memory (a user's profile: the user's choice)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(check_domain_id(domain_id, "domain id"))
    elif "ROS_DOMAIN_ID" in env:
        check_domain_id(env["ROS_DOMAIN_ID"], "ROS_DOMAIN_ID")
    else:
        env["ROS_DOMAIN_ID"] = str(pick_domain_id())
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYOPENGL_PLATFORM", env["MUJOCO_GL"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def ensure_loopback(domain_id: int | None = None, robot: bool = False,
                    warn: Callable[[str], None] | None = None) -> int:
    """Apply :func:`loopback_env` to this process (call before ``rclpy.init``); returns the domain id."""
    env = loopback_env(domain_id, robot=robot, warn=warn)
    os.environ.pop(DISCOVERY_RANGE, None)
    os.environ.update(env)
    return int(os.environ["ROS_DOMAIN_ID"])
