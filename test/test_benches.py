"""Every registered bench (``affectsim_ros/benches/``): found by registration, one name (its module's),
its own options only, and bad option values refused by the command line before any work."""

import argparse
import contextlib
import io
import json

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
    assert parse(["bench", "pace"]).factors == (2.0, 3.0)
    assert parse(["bench", "pace", "--factors", "3,1.5,3"]).factors == (1.5, 3.0)
    assert parse(["bench", "policies"]).policies == ("baseline", "viewpoint")
    assert parse(["bench", "policies", "--policies", "stay, baseline,stay"]).policies == ("stay", "baseline")
    assert parse(["bench", "policies"]).humans == "scripted"
    assert parse(["bench", "policies", "--humans", "reactive"]).humans == "reactive"
    for bad in (["bench", "nav", "--episodes", "0"], ["bench", "transfer", "--repeats", "-1"],
                ["bench", "social", "--workers", "x"], ["bench", "pace", "--factors", "1"],
                ["bench", "pace", "--factors", "2,nan"], ["bench", "full", "--graphs", "0"],
                ["bench", "policies", "--policies", "baseline"], ["bench", "policies", "--policies", "baseline,nope"],
                ["bench", "policies", "--humans", "calm"]):
        with pytest.raises(SystemExit) as exit_:
            parse(bad)
        assert exit_.value.code == 2
        assert bad[2] in capsys.readouterr().err


def test_the_achieved_pace_leaves_the_simulators_pauses_out():
    from affectsim_ros.benches.transfer import achieved_factor

    paced = [(0.01 * k, 0.02 * k) for k in range(101)]  # 1 wall s at factor 2
    after_pause = [(3.0 + 0.01 * k, 0.02 * k) for k in range(101)]  # 2 wall s paused, then the next episode's
    # load sets the clock back to its start
    pace = achieved_factor(paced + after_pause)
    assert abs(pace["running"] - 2.0) < 1e-9 and abs(pace["overall"] - 4.0 / 4.0) < 1e-9


def _pace_run(achieved: float, outcome_equal: float | None = None, lo: float = -0.05, hi: float = 0.05) -> dict:
    run = {"achieved": {"running": achieved}, "n": 30}
    if outcome_equal is not None:
        run["vs_run_1"] = {"outcome_equal": outcome_equal, "a_obs_difference":
                           {"estimate": 0.0, "low": lo, "high": hi, "units": 10, "resamples": 2000, "undefined": 0.0}}
    return run


@pytest.mark.parametrize("faster, largest", [
    ({"2": _pace_run(1.95, 0.9), "3": _pace_run(2.9, 0.86)}, 3.0),
    ({"2": _pace_run(1.95, 0.9), "3": _pace_run(1.4, 0.9)}, 3.0),  # slower than asked at 3: time, not validity
    ({"2": _pace_run(1.95, 0.87), "3": _pace_run(2.9, 0.9)}, 3.0),  # one episode of 30 less than run 2: within
    ({"2": _pace_run(1.95, 0.8), "3": _pace_run(2.9, 0.9)}, 1.0),  # outcomes change at 2: 3 is not tried
    ({"2": _pace_run(1.95, 0.9, 0.02, 0.2), "3": _pace_run(2.9, 0.9)}, 1.0),  # A-Obs moves at 2
])
def test_the_largest_pace_within_the_spread_at_factor_1(faster, largest):
    from affectsim_ros.benches.pace import verdicts

    res = {"runs": {"rtf_1_run_1": _pace_run(1.0), "rtf_1_run_2": _pace_run(1.0, 0.9),
                    **{f"rtf_{f}": r for f, r in faster.items()}}}
    assert verdicts(res, [2.0, 3.0])[1] == largest


def test_the_policies_table_puts_each_policy_beside_the_first():
    from affectsim_ros.benches.policies import table

    def run(a_obs, families, social=None):
        return {"n": 4, "models": ["pose"], "group": {"p_init": 0.4, "p_ref": 0.5, "p_mon": 0.2, "a_obs": a_obs},
                "group_ogr": 0.5, "group_recovery": 0.3, "group_e_spl": {1: 0.25, 3: 0.5, 5: None},
                "macro_f1": {"pose": {"a_obs": a_obs}},
                "table6": {k: 1.0 for k in ("handoff_pct", "mean_path_m", "path_before_handoff_pct",
                                            "budget_exhausted_pct", "clipped_pct")},
                "family": {f: {"n": 2, "a_obs": a_obs, "clipped_pct": 12.5} for f in families}, "social": social}

    iv = {"estimate": 0.1, "low": -0.05, "high": 0.2, "undefined": 0.0, "se": 0.06}
    second = run(0.5, ["dyadic"])
    second["beyond_ref"] = {"estimate": -0.02, "low": -0.07, "high": 0.03, "undefined": 0.0}
    second["vs_first"] = {"n": 3, "a_obs": {"pose": iv, "group": iv}, "recovery": iv, "e_spl": {1: iv, 3: iv},
                          "family": {"dyadic": {"n": 2, "a_obs": iv}}}
    res = {"policies": ["baseline", "viewpoint"], "runs": {"baseline": run(0.4, ["dyadic", "action_grounded"]),
                                                           "viewpoint": second}}
    text = table(res)
    assert table(json.loads(json.dumps(res))) == text  # the --out JSON (radii as string keys) reads back the same
    # its own n, the n of the episodes both policies hold, its A-Obs against its own P-Ref (none stored: empty)
    assert ("| viewpoint | 4 | 3 | 30.0 | 25.0 / 50.0 / – | -2.0 [-7.0, +3.0] | +10.0 [-5.0, +20.0] "
            "| +10.0 [-5.0, +20.0] |") in text, text
    assert "| baseline | 4 |  | 30.0 | 25.0 / 50.0 / – |  |  |" in text, text
    assert "| viewpoint | 50.0 (+10.0 [-5.0, +20.0]) |" in text, text  # A-Obs per recognizer
    assert "| viewpoint |  | 50.0 (n=2) +10.0 [-5.0, +20.0] |" in text, text  # a family the policy was not run on stays empty
    assert "| viewpoint |  | 12.5 |" in text, text  # clipped translations per family
    assert "social" not in text  # scripted people: no social measures
    social = {"n": 4, "noticed_pct": 50.0, "reacting_s": 1.0, "path_m": 0.5, "max_shift_m": 0.2, "min_gap_m": 0.9,
              "intimate_pct": 0.0, "personal_pct": 12.0, "contacts": 1}
    text = table({"policies": ["baseline", "viewpoint"], "runs": {"baseline": run(0.4, ["dyadic"], social),
                                                                 "viewpoint": second}})
    assert "| baseline | 4 | 50.0 | 1.0 | 0.50 | 0.20 | 0.90 | 0.0 | 12.0 | 1 |" in text, text