"""tools/view_readability.py: accuracy per view bin with intervals over whole episodes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("view_readability", ROOT / "tools" / "view_readability.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_interval_resamples_whole_episodes(tool):
    # episode a: both clips right, b: both wrong; a resample holds a, b or both: 100, 0 or 50 %
    est, lo, hi = tool.accuracy_interval(np.array([True, True, False, False]), np.array(["a", "a", "b", "b"]))
    assert est == 50.0 and lo == 0.0 and hi == 100.0
    est, lo, hi = tool.accuracy_interval(np.ones(6, bool), np.array(list("aabbcc")))
    assert est == lo == hi == 100.0


def test_a_table_row_per_occupied_bin_with_its_count(tool):
    values = np.array([10.0, 20.0, 100.0, 170.0])
    correct = {"r": np.array([True, False, True, True])}
    rows = tool.table("t", values, (0, 30, 60, 90, 120, 150, 181), "deg", correct, np.array(list("abcd")))
    body = [r for r in rows if r.startswith("| ") and r[2].isdigit()]
    assert body == ["| 0–30 | 2 | 50.0 [0.0, 100.0] |", "| 90–120 | 1 | 100.0 [100.0, 100.0] |",
                    "| 150–181 | 1 | 100.0 [100.0, 100.0] |"]


def test_a_split_without_rendered_clips_is_refused_by_name(tool, tmp_path, capsys):
    assert tool.main(["--split", "val", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "val") in err and "affectsim train" in err
