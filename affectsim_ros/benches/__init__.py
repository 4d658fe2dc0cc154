"""Benchmarks (``affectsim bench NAME``): scripts that measure and print ratios side by side, not tests.

Each module of this package is one bench and registers itself with :func:`bench`: its name, the
options it takes (``add_arguments``, shown by ``affectsim bench NAME --help``) and its ``main``
(returns the exit status). Adding a bench is adding one module here; the command line and the
conformance test (``test/test_benches.py``) find it by registration. Shared option helpers keep the
common options (``--out``, ``--episodes``, ``--split``, ...) worded and checked alike.
"""

from __future__ import annotations

import argparse
import importlib
import math
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from affectsim_core.protocol import SPLITS
from affectsim_core.registry import Registry

Main = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Bench:
    """One registered bench: ``help`` is the first line of its ``main``'s docstring."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    main: Main

    def __call__(self, ns: argparse.Namespace) -> int:
        return self.main(ns)


BENCHES: Registry[Bench] = Registry("bench")


def bench(name: str, add_arguments: Callable[[argparse.ArgumentParser], None]) -> Callable[[Main], Main]:
    """Register the decorated ``main(ns) -> exit status`` as bench ``name`` with its options."""

    def decorate(main: Main) -> Main:
        doc = (main.__doc__ or "").strip().splitlines()
        if not doc:
            raise ValueError(f"bench {name!r}: its main needs a docstring (the first line is its --help)")
        BENCHES.register(name)(Bench(name, doc[0], add_arguments, main))
        return main

    return decorate


def load_all() -> Registry[Bench]:
    """Import every bench module of this package (each registers itself); returns :data:`BENCHES`."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return BENCHES


# ------------------------------------------------------------------ shared options
class integer:
    """argparse type: an integer in ``[lo, hi]`` (``hi`` None: no upper bound); a bad value is one line
    naming the value and the range (argparse adds the option)."""

    def __init__(self, lo: int, hi: int | None = None, unit: str = "") -> None:
        self.lo, self.hi, self.unit = lo, hi, f" ({unit})" if unit else ""

    def expected(self) -> str:
        if self.hi is None:
            return f"an integer >= {self.lo}{self.unit}"
        return f"an integer in [{self.lo}, {self.hi}]{self.unit}"

    def __call__(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid; expected {self.expected()}") from None
        if value < self.lo or (self.hi is not None and value > self.hi):
            raise argparse.ArgumentTypeError(f"{value} is invalid; expected {self.expected()}")
        return value

    def __repr__(self) -> str:  # argparse names the type in some messages
        return f"integer({self.lo}, {self.hi})"


class number:
    """argparse type: a finite number in ``[lo, hi]`` (``lo_open``: ``lo`` itself excluded), in ``unit``."""

    def __init__(self, lo: float = -math.inf, hi: float = math.inf, unit: str = "", lo_open: bool = False) -> None:
        self.lo, self.hi, self.unit, self.lo_open = lo, hi, f" ({unit})" if unit else "", lo_open

    def expected(self) -> str:
        if math.isinf(self.lo) and math.isinf(self.hi):
            return f"a finite number{self.unit}"
        if math.isinf(self.hi):
            return f"a number {'>' if self.lo_open else '>='} {self.lo:g}{self.unit}"
        return f"a number in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]{self.unit}"

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid; expected {self.expected()}") from None
        low = value <= self.lo if self.lo_open else value < self.lo
        if not math.isfinite(value) or low or value > self.hi:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid; expected {self.expected()}")
        return value

    def __repr__(self) -> str:
        return f"number({self.lo}, {self.hi})"


#: argparse type: an integer >= 1 (counts: episodes, workers, runs, frames, ...).
positive_int = integer(1)


def add_out(p: argparse.ArgumentParser, what: str = "results", default: Path | None = None) -> None:
    """``--out FILE``: the bench's results as JSON (``default`` None: only printed)."""
    p.add_argument("--out", type=Path, default=default, metavar="FILE",
                   help=f"write the {what} as JSON to this file (default: "
                        f"{'%(default)s' if default is not None else 'not written'})")


def add_dataset_options(p: argparse.ArgumentParser, episodes: int, what: str = "stratified episodes of the split",
                        workers: int | None = None, mismatch: bool = True) -> None:
    """``--episodes`` (default ``episodes``: a real default, so any value given, its own default
    included, is used as given), ``--split``, optionally ``--workers`` and ``--allow-dataset-mismatch``."""
    p.add_argument("--episodes", type=positive_int, default=episodes, help=f"{what} (default: %(default)s)")
    p.add_argument("--split", choices=SPLITS, default="test", help="dataset split (default: %(default)s)")
    if workers is not None:
        p.add_argument("--workers", type=positive_int, default=workers,
                       help="worker processes (default: %(default)s)")
    if mismatch:
        p.add_argument("--allow-dataset-mismatch", action="store_true",
                       help="run although a checkpoint was trained on another dataset version")


def add_runs_options(p: argparse.ArgumentParser, conditions: str) -> None:
    """``--conditions`` (a comma-separated subset of ``conditions``) and ``--work`` (resumed runs)."""
    p.add_argument("--conditions", default=None,
                   help=f"run only these, comma-separated, of: {conditions} (default: all)")
    p.add_argument("--work", type=Path, default=None, metavar="DIR",
                   help="directory of the per-condition runs, resumed (default: results/bench_NAME, NAME this "
                        "bench's)")


def conditions_of(ns: argparse.Namespace) -> tuple[str, ...]:
    return tuple(c for c in (ns.conditions or "").split(",") if c)
