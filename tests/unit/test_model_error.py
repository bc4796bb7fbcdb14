"""The verdict's third part (issue 34): the plan replayed with steps as slow as the performance model's own
measured error, and the margin (how much slower steps may run before the plan misses)."""

from __future__ import annotations

import dataclasses

import pytest

import hetplan.perf.error_bands as bands
from hetplan.errors import InputError
from hetplan.perf.error_bands import ErrorBand, error_band, parse_confidence
from hetplan.plan.doc import load_plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.verify import error_check
from hetplan.workload.readers import load_workload
from tests.conftest import FIXTURES


def test_a_slowed_deployment_scales_every_step():
    dep = deployment_from_plan(load_plan(FIXTURES / "plan_two_combos.json"))
    spec = dep.instances[0]
    base = dep.step_cost(spec.gpu, spec.tp, 64, 4096)
    slow = dep.slowed(1.5, 2.0).step_cost(spec.gpu, spec.tp, 64, 4096)
    assert slow.decode_s(8, 8 * 1000) == pytest.approx(2.0 * base.decode_s(8, 8 * 1000))
    assert slow.prefill_s(2000, 2000**2, 1) == pytest.approx(1.5 * base.prefill_s(2000, 2000**2, 1))
    assert dep.step_cost(spec.gpu, spec.tp, 64, 4096) is base  # the original keeps its own tables


@pytest.mark.parametrize(("text", "want"), [("p80", "p80"), ("80", "p80"), ("90%", "p90"), ("none", None)])
def test_confidence_spellings(text, want):
    assert parse_confidence(text) == want


def test_an_unknown_confidence_is_refused():
    with pytest.raises(InputError, match="p50, p80, p90"):
        parse_confidence("p85")


def test_the_band_is_the_gpus_own_group_else_the_engines():
    own = error_band("vllm", ["H200-SXM"], "p80")
    other = error_band("vllm", ["L40S"], "p80")
    assert own is not None and other is not None
    assert "on H200-SXM" in own.scope and "none on L40S" in other.scope
    assert own.ttft >= 0 and own.tpot >= 0


#: The goodput target the margin tests replay plan_two_combos.json at: 4 req/s, 80 % of its own 5 req/s. Since the
#: kernel-fitted refit the fixture's plan holds its own target with p90 TTFT 1.99 s against the 2 s SLO, so it
#: misses at 0.6 % slower steps and its margin is 0; at 4 req/s it holds up to about 18 % slower steps.
ROOMY_TARGET_REQ_PER_S = 4.0


def _check(monkeypatch, slowdown: float, target_req_per_s: float | None = ROOMY_TARGET_REQ_PER_S):
    monkeypatch.setattr(bands, "error_band", lambda *a: ErrorBand("p80", slowdown, slowdown, "test rows"))
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    if target_req_per_s is not None:
        plan = dataclasses.replace(plan, goodput_target_req_per_s=target_req_per_s)
    wl = load_workload(FIXTURES / "azure_conv_200.csv", "auto", None, "azure200")
    error = error_check(plan, wl, "fcfs", "p80")
    assert error is not None, "an error band was patched in"
    return error.to_doc()


def test_the_margin_brackets_the_slowdown_at_which_the_plan_starts_to_miss(monkeypatch):
    small, huge = _check(monkeypatch, 0.0), _check(monkeypatch, 20.0)
    assert small["holds_at_confidence"] is True and huge["holds_at_confidence"] is False
    margin = small["margin_step_slowdown"]
    # the premise: at this target the plan holds with room, so there is a margin to bracket
    assert margin >= 0.05, f"plan_two_combos at {ROOMY_TARGET_REQ_PER_S} req/s holds with too little room: {margin}"
    assert 0 < margin < 3 and not small["margin_capped"]
    assert _check(monkeypatch, margin)["holds_at_confidence"] is True  # it holds at its own margin
    assert f"holds up to {margin * 100:.0f} % slower steps" in small["summary"]
    assert "misses" in huge["summary"]


def test_a_plan_that_holds_as_predicted_with_no_margin_is_not_said_to_miss(monkeypatch):
    """A plan that holds at its target as predicted but misses at the smallest slowdown the search tries has margin
    0; its summary said "misses at any slowdown", which is false at no slowdown. plan_two_combos.json at 5.5 req/s
    is such a plan since the all-reduce refit (at its own 5 req/s it now holds with a 7 % margin; at 5.55 it
    misses as predicted)."""
    tight = _check(monkeypatch, 0.0, target_req_per_s=5.5)
    assert tight["holds_at_confidence"] is True, "premise: the fixture's plan holds its own target as predicted"
    assert tight["margin_step_slowdown"] == 0, "premise: and misses at the smallest slowdown the search tries"
    assert "misses at any slowdown" not in tight["summary"]
    assert "holds as predicted but misses at 0.6 % slower steps" in tight["summary"], tight["summary"]
