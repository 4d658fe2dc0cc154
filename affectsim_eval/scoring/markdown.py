"""How the report writes numbers and tables (Markdown), shared by the report, the metrics' sections and the
benches' printed tables."""

from __future__ import annotations

import math
from typing import Sequence

#: the settings' names in tables
NAMES = {"p_init": "P-Init", "p_ref": "P-Ref", "p_mon": "P-Mon", "a_obs": "A-Obs"}


def pct(v: float | None, nd: int = 1) -> str:
    """A fraction as a percentage; "–" for None or nan."""
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.{nd}f}"


def gain(a: float | None, b: float | None) -> str:
    """a − b in percentage points, signed."""
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return "–"
    return f"{100 * (a - b):+.1f}"


def signed(d: float | None) -> str:
    """A difference of fractions (already taken) in percentage points, signed, as :func:`gain` writes it."""
    return "–" if d is None or math.isnan(d) else f"{100 * d:+.1f}"


def num(v: float | None, nd: int = 2) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def table(head: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    """A Markdown table: the first ``left`` columns (the labels) aligned left, the others (numbers) right;
    cells are written with ``str``."""
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < left else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)
