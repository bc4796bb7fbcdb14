"""``--strategy all`` re-sizes every shape when the cheapest misses, and keeps the cheapest verified plan
(hetplan.planning.verify): the shape the model over-promises most is not followed alone."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

import hetplan.planning.resize as resize
import hetplan.planning.verify as verify
import hetplan.sim.verify as sim_verify
from hetplan.planning.options import PlanOptions
from hetplan.scenario import Scenario
from tests.helpers import fake_plan_check


@dataclass(frozen=True)
class _Baseline:
    total_usd_per_hour: float | None


@dataclass(frozen=True)
class _Combo:  # what the verification cache keys a plan by
    label: str
    count: int
    decode_batch: int
    goodput_req_per_s: float
    buckets: tuple[Any, ...] = ()


@dataclass(frozen=True)
class _Plan:
    strategy: str
    total_usd_per_hour: float
    goodput_req_per_s: float
    goodput_target_req_per_s: float = 1.0
    baselines: dict[str, _Baseline] = field(default_factory=dict)
    combos: tuple[Any, ...] = ()
    instances: tuple[Any, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    verification: dict[str, Any] | None = None


# per shape: $/h per unit of provisioned demand, and the fraction of its analytic capacity the simulation holds
SHAPES = {"mixed": (10.0, 0.4), "cauchy": (12.0, 0.95), "homogeneous": (14.0, 0.95), "melange": (11.0, 0.4)}


def _asked(strategy: str) -> PlanOptions:
    """A verified plan of ``strategy``, without the analysis or the model-error check (what the fakes model)."""
    return PlanOptions(strategy=strategy, analysis=False, verify=True, confidence=None)


def _fake_plan(scenario: Scenario, options: PlanOptions, progress: Any = None, **_: Any) -> _Plan:
    strategy = options.strategy
    demand = 1.0 + scenario.headroom
    costs = {name: rate * demand for name, (rate, _) in SHAPES.items()}
    name = min(costs, key=lambda n: costs[n]) if strategy == "all" else strategy
    others = {n: _Baseline(c) for n, c in costs.items() if n != name}
    return _Plan(name, costs[name], demand, baselines=others, combos=(_Combo(name, 1, 1, demand),))


def _fake_verify(p: _Plan, workload: Any, policy: str, capacity: bool, out_of_sample: Any = ()) -> dict[str, Any]:
    simulated = p.goodput_req_per_s * SHAPES[p.strategy][1]
    ok = simulated >= p.goodput_target_req_per_s
    return {
        "status": "verified" if ok else "not verified",
        "simulated_capacity_req_per_s": simulated,
        "attainment": 0.95 if ok else 0.5,
        "dropped": 0,
        "misses": [] if ok else ["joint attainment"],
        "out_of_sample": {"status": "not run", "runs": []},
    }


def test_every_shape_is_resized_and_the_cheapest_verified_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify, "plan", _fake_plan)
    monkeypatch.setattr(sim_verify, "PlanCheck", fake_plan_check(_fake_verify))
    monkeypatch.setattr(verify, "build_workload", lambda scenario: None)
    scenario = Scenario.model_validate(
        {"model": "Llama-3-8B", "workload": {"synthetic": {"class": "balanced", "rate_per_s": 1.0}},
         "slo": {"ttft": "2s", "tpot": "100ms"}}
    )  # fmt: skip
    out = verify.plan_verified(scenario, _asked("all"))
    assert out.strategy == "cauchy"  # mixed needs 2.5x its demand (>= $25/h); cauchy holds at ~1.05x (~$12.6/h)
    resized = out.verification.resized.to_doc()
    assert resized["strategy_before"] == "mixed"
    shapes = {row["strategy"]: row for row in resized["per_strategy"]}
    assert set(shapes) == set(SHAPES)
    assert shapes["homogeneous"].get("skipped")  # its unresized plan already costs more than cauchy's verified one
    # Mélange re-sized past the verified mixed plan's $/h: it stops there, unsimulated (re-sizing only adds)
    assert (
        shapes["melange"]["skipped"].startswith("re-sized to $")
        and "no cheaper than the verified" in (shapes["melange"]["skipped"])
    )
    assert out.total_usd_per_hour == min(r["usd_per_hour"] for r in shapes.values() if "usd_per_hour" in r)
    # a restricted strategy still follows only itself
    only = verify.plan_verified(scenario, _asked("mixed"))
    assert only.strategy == "mixed" and not only.verification.resized.per_strategy


def test_the_verification_cache_keys_what_the_simulator_replays_not_the_strategy() -> None:
    """A mixed plan that found no cheaper mix is the Mélange plan: one simulation serves both (example (b) re-sized
    the same six plans twice); a mixed plan's combo buckets are part of what is replayed."""
    import json
    from dataclasses import replace

    from hetplan.plan.deployment import BucketShare
    from hetplan.plan.doc import from_doc
    from tests.conftest import ROOT

    fixtures = ROOT / "tests" / "fixtures"
    mel = from_doc(json.loads((fixtures / "plan_example_a_melange.json").read_text()), "test")
    assert mel.instances and resize.signature(replace(mel, strategy="mixed")) == resize.signature(mel)
    t0 = mel.instances[0]
    moved = replace(t0, buckets=(replace(t0.buckets[0], share=t0.buckets[0].share / 2), *t0.buckets[1:]))
    assert resize.signature(replace(mel, instances=(moved, *mel.instances[1:]))) != resize.signature(mel)
    cau = from_doc(json.loads((fixtures / "plan_example_a.json").read_text()), "test")
    c0 = cau.combos[0]
    routed = replace(c0, buckets=(BucketShare(0.0, 512.0, 0.0, float("inf"), 0.5),))
    assert resize.signature(replace(cau, combos=(routed, *cau.combos[1:]))) != resize.signature(cau)


def test_a_shape_whose_first_plan_is_another_shapes_deployment_is_resized_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """--strategy all: a mixed plan that found no cheaper mix is the Mélange plan, and re-sizing it would retrace
    Mélange's plans; it waits until the other shapes are done, and a verified plan's cost then stops it."""
    shapes = {"mixed": (10.0, 0.4), "melange": (10.0, 0.4), "cauchy": (12.0, 0.95), "homogeneous": (14.0, 0.95)}
    monkeypatch.setattr(sys.modules[__name__], "SHAPES", shapes)

    def fake_plan(scenario: Scenario, options: PlanOptions, progress: Any = None, **kw: Any) -> _Plan:
        made = _fake_plan(scenario, options, progress, **kw)
        if made.strategy == "mixed":  # the Mélange deployment, under the mixed strategy's name
            return replace(made, combos=(_Combo("melange", 1, 1, made.goodput_req_per_s),))
        return made

    tried: list[str] = []

    def fake_verify(p: _Plan, workload: Any, policy: str, capacity: bool, out_of_sample: Any = ()) -> dict[str, Any]:
        tried.append(p.strategy)
        return _fake_verify(p, workload, policy, capacity, out_of_sample)

    monkeypatch.setattr(verify, "plan", fake_plan)
    monkeypatch.setattr(sim_verify, "PlanCheck", fake_plan_check(fake_verify))
    scenario = Scenario.model_validate(
        {"model": "Llama-3-8B", "workload": {"synthetic": {"class": "balanced", "rate_per_s": 1.0}},
         "slo": {"ttft": "2s", "tpot": "100ms"}}
    )  # fmt: skip
    out = verify.plan_verified(scenario, _asked("all"))
    assert out.strategy == "cauchy"
    order = [row.strategy for row in out.verification.resized.per_strategy]
    assert order[-1] == "mixed" and order.index("cauchy") < order.index("mixed")  # the twin went last
    twin = out.verification.resized.per_strategy[-1].to_doc()
    assert "no cheaper than the verified" in twin.get("skipped", "") and twin["plans_tried"] <= 2
