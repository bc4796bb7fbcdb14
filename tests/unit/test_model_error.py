"""The verdict's third part (issue 34): the plan replayed with steps as slow as the performance model's own
measured error, and the margin (how much slower steps may run before the plan misses)."""

from __future__ import annotations

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


def _check(monkeypatch, slowdown: float):
    monkeypatch.setattr(bands, "error_band", lambda *a: ErrorBand("p80", slowdown, slowdown, "test rows"))
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    wl = load_workload(FIXTURES / "azure_conv_200.csv", "auto", None, "azure200")
    return error_check(plan, wl, "fcfs", "p80")


def test_the_margin_brackets_the_slowdown_at_which_the_plan_starts_to_miss(monkeypatch):
    small, huge = _check(monkeypatch, 0.0), _check(monkeypatch, 20.0)
    assert small["holds_at_confidence"] is True and huge["holds_at_confidence"] is False
    margin = small["margin_step_slowdown"]
    assert 0 < margin < 3 and not small["margin_capped"]
    assert _check(monkeypatch, margin)["holds_at_confidence"] is True  # it holds at its own margin
    assert f"holds up to {margin * 100:.0f} % slower steps" in small["summary"]
    assert "misses" in huge["summary"]
