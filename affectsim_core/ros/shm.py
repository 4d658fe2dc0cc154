"""Fast DDS shared-memory leftovers of processes that died without cleaning up.

Every participant maps a ~33 MB segment ``/dev/shm/fastdds_<id>`` (plus a lock file ``<name>_el``)
and shares per-port files ``fastdds_port<N>`` with semaphores ``sem.fastdds_port<N>_mutex``. A
process that exits normally removes its own; one that is killed (SIGKILL, a crash) leaves them,
and they add up (38 segments, 1.27 GB, after the fault tests). :func:`clean_stale` removes the
files of this kind that belong to this user, are older than :data:`MIN_AGE_S` and that no running
process has mapped or open (``/proc/*/maps``, ``/proc/*/fd``): files of a live participant, of this
project or any other, are never touched. When some process cannot be inspected (here: PID 1 of the
sandbox), a port's files go only if its listener's lock (``<port>_el``, flock) is free too. The
launcher calls it when a graph starts and when it stops.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

SHM_DIR = Path("/dev/shm")
NAMES = re.compile(r"^(?:fastdds|fastrtps)_[0-9A-Za-z]+(?:_el)?$|^sem\.(?:fastdds|fastrtps)_port\d+_mutex$")
PORT = "_port"  # in the names of the per-port files every participant of a domain may share
MIN_AGE_S = 5.0  # s, a younger file may belong to a process between creating and mapping it


def _in_use() -> tuple[set[str], bool]:
    """Paths under /dev/shm that some running process has mapped or open, and whether every process
    could be inspected (another user's, or a non-dumpable one, may not be)."""
    used: set[str] = set()
    complete = True
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as maps:
                used.update(line.split(maxsplit=5)[5].strip() for line in maps if "/dev/shm/" in line)
            fd_dir = f"/proc/{pid}/fd"
            for fd in os.listdir(fd_dir):
                try:
                    target = os.readlink(f"{fd_dir}/{fd}")
                except OSError:
                    continue
                if target.startswith("/dev/shm/"):
                    used.add(target)
        except PermissionError:
            complete = False
        except (OSError, IndexError):  # the process ended meanwhile
            continue
    return {u.removesuffix(" (deleted)") for u in used}, complete


def group(name: str) -> str:
    """A segment or port with its lock file and semaphore: ``fastdds_port7000`` for all three."""
    return name.removeprefix("sem.").removesuffix("_mutex").removesuffix("_el")


def stale_files(root: Path = SHM_DIR, min_age: float = MIN_AGE_S) -> list[Path]:
    """Fast DDS files in ``root`` owned by this user, older than ``min_age`` s, of which no file of their
    group (segment, lock file, semaphore) is used by a process."""
    if not root.is_dir():
        return []
    now = time.time()
    uid = os.getuid()
    candidates = []
    for path in root.iterdir():
        if not NAMES.match(path.name):
            continue
        try:
            st = path.lstat()
        except OSError:
            continue
        if st.st_uid == uid and now - st.st_mtime >= min_age and path.is_file():
            candidates.append(path)
    if not candidates:
        return []
    used, complete = _in_use()
    busy = {group(Path(u).name) for u in used if u.startswith(f"{root}/")}
    if not complete:  # a process we cannot inspect may use a port: only ports whose listener lock is free
        busy |= {g for g in {group(p.name) for p in candidates} if PORT in g and not _lock_free(root / f"{g}_el")}
    return sorted(p for p in candidates if group(p.name) not in busy)


def _lock_free(path: Path) -> bool:
    """Whether no process holds the flock of the lock file ``path`` (a port's listener creates and holds
    it): True also where there is no such file (no listener; 489 of 510 port files a day of killed tests
    left here had none, and were kept for good), False where it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases the lock at once
    return True


def clean_stale(root: Path = SHM_DIR, min_age: float = MIN_AGE_S) -> tuple[int, int]:
    """Remove :func:`stale_files`; returns (files removed, bytes freed)."""
    removed = freed = 0
    for path in stale_files(root, min_age):
        try:
            size = path.stat().st_size
            path.unlink()
        except OSError:  # gone already, or not ours after all
            continue
        removed, freed = removed + 1, freed + size
    return removed, freed
