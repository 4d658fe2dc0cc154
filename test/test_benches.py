"""Every registered bench (``affectsim_ros/benches/``): found by registration, one name (its module's),
its own options only, and bad option values refused by the command line before any work."""

import argparse
import contextlib
import io

import pytest

from affectsim_ros import cli
from affectsim_ros.benches import load_all

BENCHES = load_all()


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(list(argv))
    assert exit_.value.code == 0
    return out.getvalue()


def test_every_bench_module_is_registered_under_its_own_name():
    import pkgutil

    import affectsim_ros.benches as package

    assert BENCHES.names() == sorted(m.name for m in pkgutil.iter_modules(package.__path__))
    for name in BENCHES.names():
        b = BENCHES.get(name)
        assert b.name == name and b.help and callable(b.main)
        assert b.main.__module__ == f"affectsim_ros.benches.{name}"


@pytest.mark.parametrize("name", BENCHES.names())
def test_a_bench_lists_and_takes_only_its_own_options(name, capsys):
    text = _help("bench", name, "--help")
    assert BENCHES.get(name).help.split(":")[0] in " ".join(text.split())
    declared = argparse.ArgumentParser()
    BENCHES.get(name).add_arguments(declared)
    own = {a.option_strings[-1] for a in declared._actions if a.option_strings}
    assert "--out" in own
    for other in ("--frames", "--lockstep-minutes", "--repeats", "--runs", "--episodes"):
        if other not in own:
            assert other not in text
            with pytest.raises(SystemExit) as exit_:
                cli.build_parser().parse_args(["bench", name, other, "1"])
            assert exit_.value.code == 2
            assert "unrecognized arguments" in capsys.readouterr().err


def test_per_bench_defaults_and_checked_values(capsys):
    parse = cli.build_parser().parse_args
    assert parse(["bench", "full"]).episodes == 12  # was: 100 meant "not given", so --episodes 100 ran 12
    assert parse(["bench", "full", "--episodes", "100"]).episodes == 100
    assert parse(["bench", "transfer"]).episodes == 60
    for bad in (["bench", "nav", "--episodes", "0"], ["bench", "transfer", "--repeats", "-1"],
                ["bench", "social", "--workers", "x"]):
        with pytest.raises(SystemExit) as exit_:
            parse(bad)
        assert exit_.value.code == 2
        assert bad[2] in capsys.readouterr().err
