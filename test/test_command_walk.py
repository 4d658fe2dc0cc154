"""Every `affectsim` command the README and docs/ show, run as a new user would on a fresh clone
(issue 29, item 3): a copy of the tracked files, no ``data/``, no ``results/``. Each must exit 0,
or stop with a one-line error that says what to run first (no traceback), or be doing its work
when the walk moves on (then Ctrl-C stops it, with no traceback of it or its worker processes); a command mentioned in prose without its argument
(`affectsim eval --policy`) may end on argparse's one-line usage error. Commands with placeholders (``NAME``, ``RUN``,
``[--out FILE]``, ``a | b``) are the synopsis of commands shown literally elsewhere; they are
skipped. Slow (one process per command): `make test-all`."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from affectsim_core.ros.env import loopback_env, pick_domain_id

ROOT = Path(__file__).resolve().parents[1]
STARTED_S = 20.0  # s a command may run before the walk takes it as started and interrupts it
STOP_S = 30.0  # s it then has to exit after Ctrl-C
PLACEHOLDER = re.compile(r"[A-Z]{2,}|[|\[\]<>…]|\.\.\.|^affectsim (bench|launch|eval|observe|train|dataset|motions"
                         r"|scenes|report|params|tour)$")
WHAT_TO_RUN = re.compile(r"run `|`affectsim |`make |affectsim [a-z]+ [a-z]+ first|make setup")


def documented_commands() -> list[str]:
    """The literal `affectsim ...` commands of README.md and docs/*.md (code spans and code blocks),
    in order of first appearance, ``&&`` chains split, comments dropped."""
    found: dict[str, None] = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        pieces = re.findall(r"`([^`\n]+)`", text) + text.splitlines()
        for piece in pieces:
            for part in piece.split("&&"):
                cmd = part.split("#")[0].strip().removeprefix("$ ").strip().removeprefix(".venv/bin/")
                if cmd.startswith("affectsim ") and not cmd.endswith("\\") and not PLACEHOLDER.search(cmd):
                    found.setdefault(" ".join(cmd.split()))
    return list(found)


def test_the_walk_finds_the_commands_users_are_shown():
    cmds = documented_commands()
    assert "affectsim motions build" in cmds and "affectsim dataset install" in cmds
    assert "affectsim launch bench episodes:=10" in cmds and "affectsim bench perception" in cmds
    assert not any("NAME" in c or "|" in c for c in cmds)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The tracked files of this checkout, without anything built."""
    dst = tmp_path_factory.mktemp("fresh") / "affectsim"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


def _reset(clone: Path, tracked: set[Path]) -> None:
    """Remove whatever the last command wrote (data/, results/, any new file)."""
    for path in sorted(clone.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_symlink() or path.is_file():
            if path not in tracked:
                path.unlink()
        elif path.is_dir() and not any(path.iterdir()) and not any(t.is_relative_to(path) for t in tracked):
            path.rmdir()


def _run(cmd: str, clone: Path) -> tuple[str, str]:
    """(verdict, detail) of one command run in ``clone``: ok, started, or a failure."""
    domain = pick_domain_id()
    env = loopback_env(domain, base={**os.environ, "PYTHONPATH": str(clone), "MUJOCO_GL": "egl"})
    args = shlex.split(cmd)[1:]
    proc = subprocess.Popen([sys.executable, "-m", "affectsim_ros.cli", *args], cwd=clone, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=STARTED_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=STOP_S)
            if "Traceback" in err:  # the command or one of its worker processes dumped its stack
                return "traceback after Ctrl-C", err[-1500:]
            return "started", ""
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "hangs after Ctrl-C", ""
    if proc.returncode == 0:
        return "ok", ""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("INFO:", "W0000", "I0000", "WARNING:"))]
    if "Traceback" in err:
        return "traceback", err[-1500:]
    last = lines[-1] if lines else ""
    if proc.returncode == 2 and ": error: " in last:  # a prose mention without its argument: the usage line
        return "ok", last
    if not WHAT_TO_RUN.search(last):
        return "error without what to run first", last
    return "ok", last


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 55 commands, up to STARTED_S + STOP_S each
def test_every_documented_command_works_or_says_what_to_run_first_on_a_fresh_clone(clone):
    tracked = {p for p in clone.rglob("*") if p.is_file()}
    bad = []
    t0 = time.monotonic()
    for cmd in documented_commands():
        verdict, detail = _run(cmd, clone)
        print(f"[walk] {time.monotonic() - t0:6.0f} s  {verdict:8s} {cmd}  {detail[:120]}", flush=True)
        if verdict not in ("ok", "started"):
            bad.append(f"{cmd}: {verdict}: {detail}")
        _reset(clone, tracked)
    assert not bad, "\n".join(bad) + f"\n({time.monotonic() - t0:.0f} s)"
