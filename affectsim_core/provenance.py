"""Where results come from: the version of the code that produced them."""

from __future__ import annotations

import subprocess
from pathlib import Path


def code_version() -> str:
    """The git commit, with ``+dirty`` when tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent,
                              timeout=10).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        return (head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")) if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
