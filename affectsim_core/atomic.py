"""Atomic outputs: a killed run never leaves a half-written library, scene set or dataset; and
size-checked JSON inputs."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from affectsim_core.errors import InvalidInput


@contextmanager
def staged_dir(out: Path, prefix: str) -> Iterator[Path]:
    """Yield a temporary sibling of ``out``; on success it replaces ``out`` by renames, on failure it is removed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=out.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if out.exists():
            old = out.with_name(out.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path: Path, obj, **dumps_kwargs) -> Path:
    """Write ``obj`` as JSON to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, **dumps_kwargs))
    os.replace(tmp, path)
    return path


def read_json(path: Path, max_bytes: int, field: str) -> Any:
    """The JSON document at ``path``, its size checked against ``max_bytes`` before it is read; a file
    too large or not JSON is refused naming ``field`` and the path."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise InvalidInput(field, f"{path}: {size} bytes", f"at most {max_bytes}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(field, str(path), f"valid JSON ({exc})") from None
