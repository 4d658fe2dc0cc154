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
def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is invalid; expected an integer >= 1")
    return value


def add_out(p: argparse.ArgumentParser, what: str = "results") -> None:
    p.add_argument("--out", type=Path, default=None, help=f"write the {what} as JSON to this file")


def add_dataset_options(p: argparse.ArgumentParser, episodes: int, what: str = "stratified episodes of the split",
                        workers: int | None = None, mismatch: bool = True) -> None:
    """``--episodes`` (default ``episodes``), ``--split``, optionally ``--workers`` and
    ``--allow-dataset-mismatch``."""
    p.add_argument("--episodes", type=positive_int, default=episodes, help=f"{what} (default {episodes})")
    p.add_argument("--split", choices=SPLITS, default="test", help="dataset split (default test)")
    if workers is not None:
        p.add_argument("--workers", type=positive_int, default=workers, help=f"worker processes (default {workers})")
    if mismatch:
        p.add_argument("--allow-dataset-mismatch", action="store_true",
                       help="run although a checkpoint was trained on another dataset version")


def add_runs_options(p: argparse.ArgumentParser, conditions: str) -> None:
    """``--conditions`` (a comma-separated subset of ``conditions``) and ``--work`` (resumed runs)."""
    p.add_argument("--conditions", default=None, help=f"run only these, comma-separated, of: {conditions}")
    p.add_argument("--work", type=Path, default=None, help="directory of the per-condition runs (resumed)")


def conditions_of(ns: argparse.Namespace) -> tuple[str, ...]:
    return tuple(c for c in (ns.conditions or "").split(",") if c)
