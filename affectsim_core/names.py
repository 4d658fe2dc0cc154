"""Names that become file names (episode, scene and motion ids): one strict pattern, and paths built
from them that provably stay inside their directory."""

from __future__ import annotations

import re
from pathlib import Path

from affectsim_core.errors import InvalidInput

#: Letters, digits, ``_``, ``.``, ``-``; starts with a letter or digit (so never ``.``/``..``), at most 128.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
EXPECTED = "a name of letters, digits, '_', '.' and '-' starting with a letter or digit (at most 128)"


def check_name(field: str, value: object, where: str = "") -> str:
    """``value`` if it matches :data:`NAME_PATTERN`, else :class:`InvalidInput` naming ``field``."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise InvalidInput(field, value, EXPECTED, where=where)
    return value


def inside(root: Path, name: str, suffix: str = "", field: str = "name") -> Path:
    """``root / (name + suffix)`` for a checked ``name``; raises if the result would leave ``root``."""
    path = Path(root) / f"{check_name(field, name)}{suffix}"
    if path.resolve().parent != Path(root).resolve():
        raise InvalidInput(field, name, f"a name whose file stays in {root}")
    return path
