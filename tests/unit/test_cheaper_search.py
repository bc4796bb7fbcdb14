"""Verification searches below a verified plan too (issue 34, item 4): where the model under-promises a deployment,
a cheaper plan sized under the target may hold in simulation, and the planner finds it and says what it tried."""

from __future__ import annotations

from typing import Any

import pytest

import hetplan.planning.verify as verify
import hetplan.sim.verify as sim_verify
from hetplan.scenario import Scenario
from tests.helpers import fake_plan_check
from tests.unit.test_resize_shapes import _asked, _Baseline, _Combo, _Plan

#: $/h per unit of analytic demand, in steps of whole instances (a plan buys ceil(demand / 0.25) units)
UNIT = 0.25


def _units(demand: float) -> int:
    return -int(-demand // UNIT)


def _plan(scenario: Scenario, options: Any, progress: Any = None, **_: Any) -> _Plan:
    units = _units(1.0 + scenario.headroom)
    capacity = units * UNIT
    return _Plan(
        "cauchy", 10.0 * units, capacity, baselines={"homogeneous": _Baseline(None)},
        combos=(_Combo(f"{units}x L40S TP1 -> 1x A10G TP4", 1, 1, capacity),),
    )  # fmt: skip


def _verify(simulated_per_analytic: float):
    def fake(p: _Plan, workload: Any, policy: str, capacity: bool, out_of_sample: Any = ()) -> dict[str, Any]:
        simulated = p.goodput_req_per_s * simulated_per_analytic
        ok = simulated >= p.goodput_target_req_per_s
        return {
            "status": "verified" if ok else "not verified",
            "simulated_capacity_req_per_s": simulated,
            "attainment": 0.95 if ok else 0.6,
            "dropped": 0,
            "misses": [] if ok else ["joint attainment"],
            "out_of_sample": {"status": "holds" if ok else "misses", "runs": []},
        }

    return fake


@pytest.fixture
def scenario() -> Scenario:
    return Scenario.model_validate(
        {"model": "Llama-3-8B", "workload": {"synthetic": {"class": "balanced", "rate_per_s": 1.0}},
         "slo": {"ttft": "2s", "tpot": "100ms"}}
    )  # fmt: skip


def test_a_cheaper_plan_that_holds_is_found_when_the_model_under_promises(monkeypatch, scenario) -> None:
    monkeypatch.setattr(verify, "plan", _plan)
    monkeypatch.setattr(
        sim_verify, "PlanCheck", fake_plan_check(_verify(1.6))
    )  # the deployment holds 1.6x what the model says
    out = verify.plan_verified(scenario, _asked("cauchy"))
    first = 10.0 * _units(1.1)  # the plan at the asked +10 % headroom: 5 units, $50/h
    assert out.total_usd_per_hour < first
    assert out.goodput_req_per_s * 1.6 >= 1.0  # it still holds the target in (fake) simulation
    search = out.verification.cheaper_search.to_doc()
    assert search["from_usd_per_hour"] == first and search["usd_per_hour_kept"] == out.total_usd_per_hour
    assert any(t.get("status") == "verified" and t["usd_per_hour"] == out.total_usd_per_hour for t in search["tried"])


def test_below_a_plan_the_model_sized_right_one_plan_is_tried_and_not_simulated(monkeypatch, scenario) -> None:
    monkeypatch.setattr(verify, "plan", _plan)
    monkeypatch.setattr(
        sim_verify, "PlanCheck", fake_plan_check(_verify(1.0))
    )  # simulated = analytic: only whole-unit slack
    out = verify.plan_verified(scenario, _asked("cauchy"))
    assert out.total_usd_per_hour == 10.0 * _units(1.1)
    tried = out.verification.cheaper_search.to_doc()["tried"]
    assert [t["status"] for t in tried] == ["not cheaper (not simulated)"]


def test_a_cheaper_plan_that_misses_is_reported_and_not_kept(monkeypatch, scenario) -> None:
    calls = []

    def fake(p, workload, policy, capacity, out_of_sample=()):
        calls.append(p.total_usd_per_hour)
        v = _verify(1.6)(p, workload, policy, capacity)
        if p.total_usd_per_hour < 50.0:  # every cheaper deployment misses out of sample
            v |= {"status": "not verified", "misses": ["held-out stretch: joint 88.7 %"]}
        return v

    monkeypatch.setattr(verify, "plan", _plan)
    monkeypatch.setattr(sim_verify, "PlanCheck", fake_plan_check(fake))
    out = verify.plan_verified(scenario, _asked("cauchy"))
    assert out.total_usd_per_hour == 50.0
    tried = out.verification.cheaper_search.to_doc()["tried"]
    assert tried and all(t["status"] != "verified" for t in tried if "status" in t)
    assert len(calls) <= 1 + verify.SHRINK_STEPS + 2  # bounded: the first plan, the search, the final check
