"""Work budgets (``hetplan.budget``, issue 35): inputs that ask for hours of work are refused with one ``Error``
line naming the input, the estimated work and the budget, exit 2, quickly and with nothing written. One test per
hang class the outside harness found; each would run for minutes or hours (or exit 0 after them) without its
bound. Budgets are lowered with ``monkeypatch`` where the real one would take seconds to reach."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from hetplan import budget
from hetplan.cli.main import app
from tests.conftest import EXAMPLES, FIXTURES

RUNNER = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
PLAN = FIXTURES / "plan_two_combos.json"
TRACE = FIXTURES / "azure_conv_200.csv"
TINY = {
    "model": "Llama-3-8B",
    "weight_dtype": "bf16",
    "workload": {"synthetic": {"class": "balanced", "rate_per_s": 2, "requests": 200}},
    "gpus": ["H100", "A100-80GB"],
    "cloud": "aws",
    "tp": [1, 2],
    "max_ratio": 2,
}


def _refused(args: list[str], *words: str, within_s: float = 30.0) -> str:
    """Run ``hetplan ARGS``: exit 2, an ``Error`` line with ``words``, no traceback, back within ``within_s``."""
    start = time.perf_counter()
    res = RUNNER.invoke(app, [str(a) for a in args], env=ENV)
    assert time.perf_counter() - start < within_s
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    # progress lines (plain status lines off a terminal) may come first; the error is one block after them
    assert "Error: " in res.output, res.output
    first = res.output[res.output.index("Error: ") :].split("Why:")[0].replace("\n", " ")
    assert "budget" in first, res.output
    for word in words:
        assert word in first, (word, res.output)
    return first


def _scenario(tmp_path: Path, **fields: object) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**TINY, **fields}))
    return path


def test_a_plan_edited_to_a_million_copies_is_refused_before_it_is_built(tmp_path):
    doc = json.loads(PLAN.read_text())
    for combo in doc["combos"]:
        combo["count"] = 1_000_000
    edited = tmp_path / "big.json"
    edited.write_text(json.dumps(doc))
    out = tmp_path / "m.json"
    for cmd in (["simulate"], ["calibrate"]):
        _refused([*cmd, edited, "--trace", TRACE, "--out", out], "instances", f"{budget.MAX_SIM_INSTANCES:,}")
    assert not out.exists()


def test_a_closed_loop_of_hours_is_refused_before_it_starts(tmp_path):
    # 10^6 requests of 8,000 output tokens, one client: 8e9 engine iterations at least
    _refused(["simulate", PLAN, "--concurrency", "1", "--requests", "1000000", "--isl", "100", "--osl", "8000"],
             "closed loop", "simulator events", within_s=10)  # fmt: skip


def test_sparse_arrivals_stop_at_the_event_budget(monkeypatch, tmp_path):
    """Requests that never overlap cost one engine iteration per output token (2,000 requests at 1e-5 req/s were a
    million events a run, and plan's verification ran a dozen runs): the run stops at the command's budget."""
    args = ["simulate", PLAN, "--trace", TRACE, "--rate-scale", "0.0001", "--out", tmp_path / "m.json"]
    monkeypatch.setattr(budget, "MAX_SIM_EVENTS", 5_000)
    _refused(args, "200 requests", "5,000 simulator events")
    assert not (tmp_path / "m.json").exists()
    monkeypatch.setattr(budget, "MAX_SIM_EVENTS", 10**9)  # the same run within a large budget finishes
    assert RUNNER.invoke(app, [str(a) for a in args], env=ENV).exit_code == 0


def test_the_event_budget_is_per_command_and_counts_every_run():
    from hetplan.budget import command_budget, events_left
    from hetplan.plan.doc import load_plan
    from hetplan.sim.run import SimRequest, prepare_run, run_measured
    from hetplan.workload.readers import read_stream

    plan = load_plan(PLAN)
    req = SimRequest(plan, read_stream([TRACE]))
    dep, stream = prepare_run(req)
    assert events_left() is None  # outside a command: no budget
    with command_budget(10**9):
        _, _, res = run_measured(req, dep, stream)
        used = 10**9 - (events_left() or 0)
        assert used == res.counters["events"] > stream.n
        with command_budget(used):  # a nested block (a sweep case) gets its own count
            run_measured(req, dep, stream)
            with pytest.raises(budget.WorkBudgetError, match="budget"):  # the second run has nothing left
                run_measured(req, dep, stream)
        assert events_left() == 10**9 - used
    with command_budget(stream.n - 1), pytest.raises(budget.WorkBudgetError, match="200 requests"):
        run_measured(req, dep, stream)  # refused before it starts: its arrivals alone are over


def test_plan_verification_is_refused_before_it_starts_when_its_runs_cannot_fit(monkeypatch, tmp_path):
    from hetplan.sim.verify import _check_budget

    monkeypatch.setattr(budget, "MAX_SIM_EVENTS", 1_000)
    with budget.command_budget(), pytest.raises(budget.WorkBudgetError, match="verifying the plan on 200 requests"):
        _check_budget(200, 3, True)  # 200 arrivals and 200 KV transfers in each of 3 runs
    with budget.command_budget():
        _check_budget(100, 3, True)


def test_a_goodput_target_no_fleet_could_serve_is_refused_before_the_ilp(tmp_path):
    scenario = _scenario(tmp_path, goodput_req_per_s=1e7)
    _refused(["plan", scenario, "--no-verify", "--out", tmp_path / "p.json"], "1e+07 req/s", "GPUs",
             f"{budget.MAX_FLEET_GPUS:,}")  # fmt: skip
    assert not (tmp_path / "p.json").exists()


def test_autoscale_refuses_a_load_peak_no_fleet_could_serve(tmp_path):
    _refused(["autoscale", _scenario(tmp_path), "--diurnal", "1,1e9,1", "--out", tmp_path / "s.json"],
             "peak demand", "GPUs")  # fmt: skip


def test_autoscale_refuses_a_tiny_level_step_without_building_its_grid(tmp_path):
    from hetplan.autoscale.schedule import _levels

    # 1e-12 over a 1000:1 curve spans 7e12 grid steps: only the levels used are built (it was a MemoryError)
    idx, levels = _levels(np.array([1.0, 1000.0, 1000.0, 2.0]), 1e-12, 0.0)
    assert idx.tolist() == [0, 2, 2, 1] and len(levels) == 3 and levels[-1] >= 1000.0
    # the bundled 14-day curve (2,016 windows) at that step uses hundreds of levels, two ILPs each: refused
    scenario = _scenario(tmp_path, autoscale={"level_step": 1e-12})
    curve = EXAMPLES / "data" / "servegen_m_large_14d.csv"
    _refused(["autoscale", scenario, "--load-curve", curve, "--out", tmp_path / "s.json"], "level_step",
             f"{budget.MAX_AUTOSCALE_LEVELS:,} demand levels")  # fmt: skip
    assert not (tmp_path / "s.json").exists()


def test_points_files_over_the_row_budget_are_refused(monkeypatch, tmp_path):
    from hetplan.perf import points_table

    monkeypatch.setattr(points_table, "MAX_POINTS", 3)
    f = tmp_path / "p.csv"
    f.write_text("model,gpu,tp,concurrency,isl,osl\n" + "Llama-3.1-8B,H100-SXM,1,8,1024,128\n" * 4)
    _refused(["estimate", "--points", f, "--json"], "more than 3 rows")
    f.write_text("model,gpu,tp,concurrency,isl,osl\n" + "Llama-3.1-8B,H100-SXM,1,8,1024,128\n" * 3)
    assert RUNNER.invoke(app, ["estimate", "--points", str(f), "--json"], env=ENV).exit_code == 0


def test_autoscale_refuses_more_windows_than_its_schedule_file_can_hold(tmp_path):
    """11.5 days of 1-second windows (the old bound, 1,000,000) planned for over a minute into a 311 MB schedule that
    ``report`` refuses to read (64 MiB); two days of them are refused now, before anything is planned."""
    from hetplan.autoscale.curves import MAX_WINDOWS

    start = time.perf_counter()
    res = RUNNER.invoke(app, ["autoscale", str(_scenario(tmp_path)), "--diurnal", "2,10,1", "--window", "1s",
                              "--out", str(tmp_path / "s.json")], env=ENV)  # fmt: skip
    assert res.exit_code == 2 and f"at most {MAX_WINDOWS:,} windows" in res.output, res.output
    assert time.perf_counter() - start < 30 and not (tmp_path / "s.json").exists()


@pytest.mark.slow
def test_a_sweep_of_more_cases_than_an_hour_needs_a_timeout(monkeypatch, tmp_path):
    """A grid may expand to 100,000 cases (days of planning): over the untimed budget the sweep asks for --timeout
    (its finished cases are kept, --resume goes on) and starts nothing without one."""
    from tests.sweep.helpers import write_grid

    grid = write_grid(tmp_path, "schema_version: 1\nkind: sweep\nname: big\nbase: scenario.yaml\n"
                                "axes:\n  goodputs: [1, 2, 3]\n  clouds: [aws, lambda]\nverify: false\n")  # fmt: skip
    monkeypatch.setattr(budget, "MAX_UNTIMED_CASES", 5)
    out = tmp_path / "out"
    _refused(["sweep", grid, "--out", out, "--workers", "1"], "6 cases", "--timeout", "5 cases")
    assert not out.exists()
    res = RUNNER.invoke(app, ["sweep", str(grid), "--out", str(out), "--workers", "1", "--timeout", "10m"], env=ENV)
    assert res.exit_code in (0, 1) and (out / "summary.json").exists(), res.output


def test_emit_refuses_a_plan_of_thousands_of_combos_before_writing(monkeypatch, tmp_path):
    """A plan edited to 3,000 combos (its totals made to add up) wrote 24,000 files in 3.5 minutes; over the budget
    (lowered here) nothing is rendered or written."""
    import copy

    doc = json.loads(PLAN.read_text())
    n = len(doc["combos"])
    doc["combos"] = [copy.deepcopy(c) for c in doc["combos"] for _ in range(2)]
    for key in ("total_usd_per_hour", "usd_per_month", "goodput_req_per_s"):
        doc[key] = doc[key] * 2
    doc["gpus_used"] = {g: v * 2 for g, v in doc["gpus_used"].items()}
    edited = tmp_path / "plan.json"
    edited.write_text(json.dumps(doc))
    monkeypatch.setattr(budget, "MAX_EMIT_UNITS", 2 * n - 1)
    _refused(["emit", edited, "--out", tmp_path / "deploy"], "emitting the plan", f"{2 * n - 1:,} combos")
    assert not (tmp_path / "deploy").exists()
    monkeypatch.setattr(budget, "MAX_EMIT_UNITS", 2 * n)
    res = RUNNER.invoke(app, ["emit", str(edited), "--out", str(tmp_path / "deploy"), "--target", "vllm"], env=ENV)
    assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_a_capacity_search_that_cannot_fit_is_refused_after_the_first_run(monkeypatch, tmp_path):
    """At 1e-5 req/s no two requests overlap: each run of the verification costs one iteration per output token,
    and its capacity search makes at least five more. Refused once the first run shows it (was: run until the
    budget ran out, 22 s for the harness's scenario)."""
    scenario = _scenario(tmp_path, goodput_req_per_s=1e-5)
    monkeypatch.setattr(budget, "MAX_SIM_EVENTS", 150_000)
    _refused(["plan", scenario, "--no-analysis", "--out", tmp_path / "p.json"], "capacity search", "150,000")
    assert not (tmp_path / "p.json").exists()
