"""The simulator's shared rules (issue 20): the over-context rule, TPOT eligibility, routers between groups and the
closed loop at fixed concurrency."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetplan.errors import InputError
from hetplan.plan.doc import load_plan
from hetplan.sim.closed import closed_loop
from hetplan.sim.deployment import simple_deployment
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.metrics import measure
from hetplan.sim.policies import get_scheduler
from hetplan.sim.run import SimRequest, simulation
from hetplan.workload.context import apply_context_window, served_workload
from hetplan.workload.model import make_stream, make_workload
from hetplan.workload.readers import read_stream
from tests.conftest import FIXTURES


def test_the_context_rule_refuses_long_prompts_and_cuts_outputs_at_the_window():
    ctx = apply_context_window(np.array([100, 8000, 8192, 9000]), np.array([50, 500, 10, 5]), 8192)
    assert ctx.refused.tolist() == [False, False, False, True]
    assert ctx.output_tokens.tolist() == [50, 192, 1, 5]
    assert ctx.truncated.tolist() == [False, True, True, False]
    assert (ctx.n_refused, ctx.n_truncated) == (1, 2)


def test_planner_and_simulator_count_over_context_requests_the_same_way():
    stream = read_stream([str(FIXTURES / "mooncake_300.jsonl")])
    wl = make_workload("m", "m", "", stream.arrival_s, stream.prompt_tokens, stream.output_tokens, None)
    served, note = served_workload(wl, 8192, "Llama-3-8B")
    ctx = apply_context_window(stream.prompt_tokens, stream.output_tokens, 8192)
    assert served.n_requests == 300 - ctx.n_refused and note is not None
    assert f"{ctx.n_refused:,} of 300 requests refused" in note
    dep = simple_deployment()  # Llama-3-8B: 8,192-token window
    res = Simulator(dep, stream, get_scheduler("fcfs")).run()
    m = measure(stream, res).to_doc()
    assert m["dropped_over_context"] == ctx.n_refused and m["truncated_at_context"] == ctx.n_truncated
    assert int(res.output_tokens.max()) <= 8192
    with pytest.raises(InputError, match="every request's prompt is longer"):
        served_workload(wl, 10, "tiny")


def test_tpot_attainment_counts_only_requests_with_two_or_more_tokens():
    dep = simple_deployment(tpot_slo_s=1e-6)  # a TPOT SLO that no multi-token request meets
    stream = make_stream([0.0, 0.1, 0.2, 0.3], [100] * 4, [1, 1, 1, 50], tpot_slo_s=1e-6)
    m = measure(stream, Simulator(dep, stream, get_scheduler("fcfs")).run()).to_doc()
    assert m["tpot_ineligible"] == 3
    assert m["attainment"]["tpot"] == 0.0  # one eligible request, and it misses (was 0.75: 3 "passes")
    assert m["attainment"]["joint"] == 0.75  # a single-token request's joint outcome is its TTFT's


def test_routers_differ_between_combos():
    plan = load_plan(FIXTURES / "plan_two_combos.json")  # two combos
    stream = read_stream([str(FIXTURES / "azure_conv_200.csv")])
    docs = [simulation(SimRequest(plan, stream, rate_scale=3.0, config=SimConfig(router=r))).to_doc()
            for r in ("round-robin", "jsq", "random")]  # fmt: skip
    assert len({(d["attainment"]["joint"], d["ttft_s"]["p90"]) for d in docs}) == 3


def test_closed_loop_of_one_client_gives_the_idle_latencies():
    full = load_plan(FIXTURES / "plan_two_combos.json")
    plan = replace(full, combos=full.combos[1:])  # one combo: every request sees the same instances
    d = closed_loop(plan, 1, 1000, 100, requests=20)
    assert d["finished"] == 20 and d["kind"] == "closed-loop"
    # one client: nothing ever queues, every request sees the same idle deployment
    assert d["ttft_s"]["p99"] == pytest.approx(d["ttft_s"]["p50"], rel=1e-3)
    assert d["throughput_req_per_s"] == pytest.approx(1 / d["e2e_s"]["mean"], rel=1e-3)
    busy = closed_loop(plan, 32, 1000, 100, requests=320)
    assert busy["throughput_req_per_s"] > 5 * d["throughput_req_per_s"]
    assert busy["tpot_s"]["mean"] > d["tpot_s"]["mean"]  # larger decode batches
    # by Little's law, throughput is close to C / mean E2E (the ramp-up and the tail make it lower)
    assert busy["throughput_req_per_s"] == pytest.approx(busy["littles_law_req_per_s"], rel=0.15)
    with pytest.raises(InputError, match="--concurrency must be >= 1"):
        closed_loop(plan, 0, 10, 10)


def test_closed_loop_is_deterministic():
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    assert closed_loop(plan, 8, 500, 50, requests=80) == closed_loop(plan, 8, 500, 50, requests=80)


def test_simulator_refuses_requests_over_the_plans_max_model_len_like_over_the_window():
    """A plan whose settings carry ``max_model_len_tokens`` (scenario field, issue 30) refuses longer requests on
    arrival, counted like requests over the model's window, as the planner dropped them."""
    stream = read_stream([str(FIXTURES / "mooncake_300.jsonl")])
    dep = simple_deployment()
    dep = replace(dep, settings=replace(dep.settings, max_model_len_tokens=4096))
    ctx = apply_context_window(stream.prompt_tokens, stream.output_tokens, 4096)
    m = measure(stream, Simulator(dep, stream, get_scheduler("fcfs")).run()).to_doc()
    assert (
        m["dropped_over_context"]
        == ctx.n_refused
        > apply_context_window(stream.prompt_tokens, stream.output_tokens, 8192).n_refused
    )
