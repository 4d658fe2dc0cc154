#!/usr/bin/env python3
"""Compare the episode records of two or more run directories (``results.sqlite``).

Every stored row is compared as JSON minus its volatile run fields (wall time, worker, seconds per
stage; the ``finished_at`` timestamp is a column of its own and never part of a row). Prints, per
pair against the first run, how many episodes are identical, differ, or exist in one run only, and
the first differing keys; exits 1 unless every run holds exactly the first run's records.

Usage::

    python tools/compare_runs.py results_before/bench results/bench results/eval
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from affectsim_core.errors import InvalidInput
from affectsim_core.readers import parse_json

VOLATILE = ("wall_s", "worker", "timing")  # affectsim_core.record.VOLATILE (kept standalone: reads old stores)


def load(run: Path) -> dict[str, dict]:
    """The records of ``run/results.sqlite`` minus their volatile fields; a missing or damaged store, or a
    damaged record, ends the program with one line naming the file (and the episode)."""
    db = Path(run) / "results.sqlite"
    if not db.is_file():
        raise SystemExit(f"compare_runs: error: {db}: no results store")
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            rows = c.execute("SELECT episode_id, record FROM episodes").fetchall()
    except sqlite3.Error as exc:
        raise SystemExit(f"compare_runs: error: {db}: not a readable results store ({exc})") from None
    out = {}
    for i, text in rows:
        try:
            record = parse_json(text, "record", f"{db}: episode {i}")
        except InvalidInput as exc:  # truncated, not JSON, nested too deep
            raise SystemExit(f"compare_runs: error: {exc}") from None
        if not isinstance(record, dict):
            raise SystemExit(f"compare_runs: error: {db}: episode {i}: record is a {type(record).__name__}, "
                             "expected a JSON object")
        out[i] = {k: v for k, v in record.items() if k not in VOLATILE}
    return out


def diff_keys(a, b, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_keys(a.get(k), b.get(k), f"{prefix}{k}.") if k in a and k in b else [f"{prefix}{k}"]
        return out
    return [] if a == b else [prefix.rstrip(".")]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    base = load(Path(argv[0]))
    ok = True
    for other in argv[1:]:
        recs = load(Path(other))
        same = [i for i in base if i in recs and base[i] == recs[i]]
        differ = [i for i in base if i in recs and base[i] != recs[i]]
        only_a, only_b = sorted(set(base) - set(recs)), sorted(set(recs) - set(base))
        print(f"{argv[0]} vs {other}: {len(same)} identical, {len(differ)} differ, "
              f"{len(only_a)} only in the first, {len(only_b)} only in the second")
        for i in differ[:5]:
            print(f"    {i}: {diff_keys(base[i], recs[i])[:8]}")
        ok &= not differ and not only_a and not only_b
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
