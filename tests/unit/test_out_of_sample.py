"""Out-of-sample verification (issue 34): the planner sizes on the first part of a trace and the plan is checked
on traffic it was not sized on (the held-out stretch, the trace re-drawn from its windows); a plan that holds in
sample but misses out of sample is not verified."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetplan.plan.doc import load_plan
from hetplan.planning.verify import verification_workloads
from hetplan.scenario import Scenario
from hetplan.sim.verify import verify_plan
from hetplan.workload.model import Workload
from hetplan.workload.readers import load_workload
from hetplan.workload.split import MIN_SPLIT_REQUESTS, redraw_windows, time_split
from tests.conftest import EXAMPLES, FIXTURES


def _trace(n: int = 400, span_s: float = 400.0) -> Workload:
    arrival = np.linspace(0.0, span_s, n)
    prompt = np.arange(1, n + 1, dtype=np.int64)
    output = np.arange(1, n + 1, dtype=np.int64) * 2
    return Workload("t", "mem", "", (n - 1) / span_s, span_s, prompt, output, arrival, clock_start_s=1000.0)


def test_a_time_split_cuts_at_one_instant_and_rebases_each_part():
    sizing, held = time_split(_trace(), 0.25)
    assert sizing.n_requests + held.n_requests == 400
    assert sizing.n_requests == 300  # arrivals before 300 s of a 400 s span
    assert sizing.name == "t" and held.name == "t[held out]"
    assert held.arrival_s[0] == 0.0 and sizing.arrival_s[0] == 0.0
    assert held.prompt_tokens[0] == 301 and held.output_tokens[0] == 602  # requests stay whole
    assert held.clock_start_s == pytest.approx(1000.0 + 300 * 400 / 399)
    assert held.arrival_rate_per_s == pytest.approx((held.n_requests - 1) / held.duration_s)


def test_a_trace_too_short_to_split_is_not_split():
    assert time_split(_trace(n=2 * MIN_SPLIT_REQUESTS - 2), 0.5) is None
    with pytest.raises(ValueError):
        time_split(_trace(), 1.0)


def test_a_length_only_file_is_split_by_row_order():
    wl = replace(_trace(), arrival_s=None, duration_s=None, arrival_rate_per_s=2.0)
    sizing, held = time_split(wl, 0.3)
    assert (sizing.n_requests, held.n_requests) == (280, 120)
    assert held.arrival_s is None and held.arrival_rate_per_s == 2.0


def test_redrawn_windows_keep_requests_whole_and_are_seeded():
    wl = _trace(n=600, span_s=600.0)
    a, b, c = redraw_windows(wl, 1), redraw_windows(wl, 1), redraw_windows(wl, 2)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens) and np.array_equal(a.arrival_s, b.arrival_s)
    assert not np.array_equal(a.prompt_tokens, c.prompt_tokens)
    assert np.array_equal(a.output_tokens, a.prompt_tokens * 2)  # each row is one original request
    assert np.all(np.diff(a.arrival_s) >= 0) and a.duration_s == pytest.approx(600.0, abs=60.0)
    assert len(np.unique(a.prompt_tokens)) < a.n_requests  # drawn with replacement: some windows repeat
    assert redraw_windows(_trace(n=100, span_s=100.0), 1) is None  # shorter than two windows


def _scenario(**workload):
    sc = Scenario.model_validate(
        {"model": "Llama-3-70B", "workload": workload, "goodput_req_per_s": 5, "slo": {"ttft": "2s", "tpot": "100ms"}}
    )
    sc._base_dir = str(FIXTURES)
    return sc


def test_a_verified_plan_is_sized_on_the_first_part_and_checked_on_the_rest():
    whole = load_workload(EXAMPLES / "data" / "azure_code_15min.csv", "auto", None, "x")
    trace = str(EXAMPLES / "data" / "azure_code_15min.csv")
    scenario, sizing, runs, split = verification_workloads(_scenario(path=trace), 0.3)
    assert scenario.workload.holdout == 0.3
    assert sizing.n_requests < whole.n_requests
    labels = [label for label, _ in runs]
    assert labels == ["held-out last 30 % of the trace", "trace re-drawn from its 60 s windows, seed 1"]
    assert sizing.n_requests + runs[0][1].n_requests == whole.n_requests
    assert split.startswith("sized on the first 70 % of") and "held out" in split


def test_holdout_zero_sizes_on_the_whole_trace_and_a_short_trace_is_not_redrawn():
    _, sizing, runs, split = verification_workloads(_scenario(path="azure_conv_200.csv", holdout="0%"), 0.3)
    assert sizing.n_requests == 200
    assert runs == []  # 61 s: shorter than two 60 s windows
    assert "whole" in split


def test_a_synthetic_workload_is_checked_on_the_next_seed():
    _, sizing, runs, split = verification_workloads(
        _scenario(synthetic={"class": "balanced", "rate_per_s": 2.0, "requests": 300, "seed": 4}), 0.3
    )
    assert [label for label, _ in runs] == ["draw with seed 5"]
    assert not np.array_equal(sizing.prompt_tokens, runs[0][1].prompt_tokens)
    assert "seed 5" in split


def test_a_plan_that_holds_in_sample_but_misses_out_of_sample_is_not_verified():
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    wl = load_workload(FIXTURES / "azure_conv_200.csv", "auto", None, "azure200")
    heavier = replace(wl, name="heavier", prompt_tokens=wl.prompt_tokens * 6)
    v = verify_plan(plan, wl, "fcfs", False, [("heavier stretch", heavier)])
    assert v.in_sample_status == "verified" and v.out_of_sample is not None
    assert v.status == "not verified" and v.out_of_sample.status == "misses"
    assert (v.verdict or "").startswith("NOT verified out of sample: misses on the heavier stretch")
    assert any(m.startswith("heavier stretch") for m in v.misses)
    same = verify_plan(plan, wl, "fcfs", False, [("same traffic", wl)])
    assert same.status == "verified" and same.out_of_sample is not None and same.out_of_sample.runs[0].misses == []


def test_a_check_measures_only_the_capacity_that_steers_a_resize_and_reuses_its_runs():
    """PlanCheck (issue 34 item 5): "steer" measures the capacity of the out-of-sample workloads it misses, not the
    in-sample capacity; "full" adds it later from the runs already made; the second of two missed workloads is
    not searched when it holds at the first one's capacity."""
    from hetplan.sim.verify import PlanCheck

    plan = load_plan(FIXTURES / "plan_two_combos.json")
    wl = load_workload(FIXTURES / "azure_conv_200.csv", "auto", None, "azure200")
    heavier = replace(wl, name="heavier", prompt_tokens=wl.prompt_tokens * 6)
    lighter = replace(wl, name="a bit heavier", prompt_tokens=wl.prompt_tokens * 3)
    check = PlanCheck(plan, wl, "fcfs", [("heavier", heavier), ("a bit heavier", lighter)])
    steer = check.verdict("steer").to_doc()
    assert steer["in_sample_status"] == "verified" and steer["status"] == "not verified"
    assert steer["simulated_capacity_req_per_s"] is None  # held in sample: not needed to steer
    first, second = steer["out_of_sample"]["runs"]
    assert first["simulated_capacity_req_per_s"] is not None
    # the lighter stretch holds at the heavier one's capacity: not searched, the lowest is the first one's
    assert second["simulated_capacity_req_per_s"] is None
    assert second["capacity_at_least_req_per_s"] == first["simulated_capacity_req_per_s"]
    assert steer["out_of_sample_capacity_req_per_s"] == first["simulated_capacity_req_per_s"]
    # the other order: the heavier one misses at the lighter one's capacity and is searched below it
    other = PlanCheck(plan, wl, "fcfs", [("a bit heavier", lighter), ("heavier", heavier)]).verdict("steer").to_doc()
    a, b = other["out_of_sample"]["runs"]
    assert b["simulated_capacity_req_per_s"] < a["simulated_capacity_req_per_s"]
    assert other["out_of_sample_capacity_req_per_s"] == pytest.approx(first["simulated_capacity_req_per_s"], rel=0.06)
    runs_before = len(check.runner.cache)
    full = check.verdict("full").to_doc()
    assert full["simulated_capacity_req_per_s"] is not None
    assert len(check.runner.cache) > runs_before  # the in-sample search ran now, on the same runner
    assert full["attainment"] == steer["attainment"]
    none = check.verdict("none").to_doc()
    assert none["simulated_capacity_req_per_s"] is None
    assert all("simulated_capacity_req_per_s" not in r for r in none["out_of_sample"]["runs"])
    same = verify_plan(plan, wl, "fcfs", True, [("heavier", heavier), ("a bit heavier", lighter)])
    assert same.simulated_capacity_req_per_s == full["simulated_capacity_req_per_s"]
