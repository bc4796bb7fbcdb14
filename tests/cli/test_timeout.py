"""``--timeout`` on every command that computes: an ``Error:`` line, exit 124 and nothing written; HiGHS gives the main
thread back within a fraction of a second when the deadline (or Ctrl-C) lands mid-solve."""

from __future__ import annotations

import random
import time

import pytest
from typer.testing import CliRunner

from hetplan.cli.deadline import EXIT_TIMEOUT, CommandTimeout, parse_timeout_s, run_with_timeout
from hetplan.cli.main import app
from hetplan.errors import InputError
from tests.conftest import EXAMPLES, FIXTURES

PLAN = FIXTURES / "plan_example_a.json"
TRACE = FIXTURES / "azure_conv_200.csv"
SCENARIO = EXAMPLES / "llama3-70b-azure-conv.yaml"


def _hang(*args: object, **kwargs: object) -> None:
    """A solve or a simulation that runs far past the deadline (bounded, so a broken timeout fails, not hangs)."""
    end = time.perf_counter() + 8
    while time.perf_counter() < end:
        time.sleep(0.01)
    raise AssertionError("the --timeout did not stop the command")


# (command line, module attribute to replace with a hang, file the command would write)
LONG_COMMANDS = {
    "plan": (["plan", str(SCENARIO), "--no-verify", "--no-analysis"], ("hetplan.api", "plan"), "p.json"),
    "simulate": (["simulate", str(PLAN), "--trace", str(TRACE)], ("hetplan.sim.run", "simulation"), "m.json"),
    "find-capacity": (["simulate", str(PLAN), "--trace", str(TRACE), "--find-capacity"],
                      ("hetplan.sim.run", "find_capacity"), "c.json"),
    "calibrate": (["calibrate", str(PLAN), "--trace", str(TRACE)], ("hetplan.sim.calibrate", "calibrate"),
                  "k.json"),
    "autoscale": (["autoscale", str(SCENARIO), "--diurnal", "1,8,2"], ("hetplan.api", "autoscale"), "s.json"),
    "sweep": (["sweep", str(EXAMPLES / "sweeps" / "fleet-review.yaml")], ("hetplan.api", "sweep"), "sweep-out"),
    "explore": (["explore", str(SCENARIO), "--vary", "goodput=1x,2x"], ("hetplan.api", "plan"), None),
    "report": (["report", str(PLAN)], ("hetplan.plan.doc", "load_plan"), "r.json"),
    "emit": (["emit", str(PLAN)], ("hetplan.api", "emit"), "deploy"),
    # these two write nothing (gate only with --update-baseline)
    "estimate": (["estimate", "--model", "Llama-3-8B", "--gpu", "H100"], ("hetplan.api", "estimate"), None),
    "gate": (["gate", str(SCENARIO), "--baseline", str(EXAMPLES / "ci" / "baseline.json")],
             ("hetplan.api", "plan_verified"), None),
    "profile fit": (["profile", "fit", str(SCENARIO)], ("hetplan.api", "fit_ce"), "fit.yaml"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LONG_COMMANDS))
def test_timeout_stops_a_long_command_with_exit_124_and_writes_nothing(name, tmp_path, monkeypatch):
    import importlib

    args, (module, attr), out = LONG_COMMANDS[name]
    monkeypatch.setattr(importlib.import_module(module), attr, _hang)
    start = time.perf_counter()
    outs = ["--out", str(tmp_path / out)] if out else []
    res = CliRunner().invoke(app, [*args, *outs, "--timeout", "0.3"], env={"COLUMNS": "200"})
    elapsed = time.perf_counter() - start
    assert res.exit_code == EXIT_TIMEOUT, res.output
    assert f"Error: {name if name != 'find-capacity' else args[0]} stopped after --timeout 0.3" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert elapsed < 10
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["0", "-1", "²", "1e9", "nan", "inf", "10 parsecs", "", "8d"])
def test_bad_timeouts_are_refused(text):
    with pytest.raises(InputError, match="--timeout"):
        parse_timeout_s(text)


@pytest.mark.parametrize(("text", "seconds"), [("600", 600.0), ("90s", 90.0), ("500ms", 0.5), ("10m", 600.0),
                                               ("2h", 7200.0), ("1.5", 1.5)])  # fmt: skip
def test_timeouts_read_seconds_or_a_unit(text, seconds):
    assert parse_timeout_s(text) == seconds


def test_a_timeout_lands_inside_a_highs_solve_within_a_second():
    """A market-split MIP that HiGHS does not finish within its 30 s limit; the deadline at 0.4 s comes back
    within seconds of it (PuLP's plain ``Highs.run()`` would hold the main thread until the solve ends)."""
    from hetplan.solvers.milp_covering import solve_covering

    rng = random.Random(0)
    a = [[rng.randint(0, 99) for _ in range(30)] for _ in range(4)]  # market split: HiGHS runs to its time limit
    h = [sum(r) // 2 for r in a]
    usage = [a[0], *a[1:], *[[-x for x in r] for r in a[1:]]]
    capacity = [h[0], *h[1:], *[-x for x in h[1:]]]

    def solve() -> object:
        return solve_covering([1.0] * 30, a[0], h[0], usage, capacity, upper=[1] * 30, time_limit_s=30,
                              second_stage_epsilon=None)  # fmt: skip

    start = time.perf_counter()
    with pytest.raises(CommandTimeout):
        run_with_timeout("0.4", solve, "plan")
    # the solve alone runs 30 s; the bound leaves room for a loaded CI machine (the figure is measured by
    # benchmarks/highs_interrupt.py, not here)
    assert time.perf_counter() - start < 3.0
    # the solver is usable again afterwards (the stopped solve left no running thread behind)
    assert solve_covering([1.0, 2.0], [1.0, 3.0], 2.0).status == "optimal"


def test_no_timeout_runs_the_command_unchanged():
    assert run_with_timeout(None, lambda: 7, "plan") == 7
    assert run_with_timeout("5", lambda: 7, "plan") == 7


def test_timeout_names_the_step_and_advice_that_fits_it():
    from hetplan.cli.deadline import timeout_advice

    def slow() -> None:
        _hang()

    step = "re-size attempt 3 of 5 (headroom 0.8): solving Cauchy, homogeneous, Mélange and mixed plans"
    with pytest.raises(CommandTimeout) as info:
        run_with_timeout("0.2", slow, "plan", lambda: step)
    assert info.value.what == f"plan stopped after --timeout 0.2 (0.2 s) while {step}"
    assert "--no-resize" in info.value.fix
    assert "--no-verify" in timeout_advice("simulating the plan ($3.00/h)")
    assert "--no-analysis" in timeout_advice("price sensitivity and cost versus goodput")
    assert timeout_advice("enumerating combos").startswith("raise --timeout")
    with pytest.raises(CommandTimeout) as info:
        run_with_timeout("0.2", slow, "plan")
    assert info.value.what == "plan stopped after --timeout 0.2 (0.2 s)"
