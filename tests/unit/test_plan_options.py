"""``PlanOptions``: what ``hetplan plan`` was asked, as one value the CLI builds and passes to
``hetplan.api.plan_with`` (issue 29, "explicit context")."""

from __future__ import annotations

from pathlib import Path

from hetplan import api
from hetplan.planning.options import PlanOptions
from hetplan.scenario import Scenario


def _scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "small",
            "model": "Llama-3-8B",
            "workload": {"synthetic": {"class": "balanced", "rate_per_s": 4.0, "requests": 400}},
            "slo": {"ttft": "2s", "tpot": "100ms"},
            "cloud": "aws",
        }
    )


def test_price_factors_are_kept_sorted():
    asked = PlanOptions.of({"L4": 0.5, "H100-SXM": 2.0}, profiles=(Path("p.yaml"),), prune_top_k=3, min_r2=0.5)
    assert asked.price_factors == (("H100-SXM", 2.0), ("L4", 0.5))


def test_plan_and_plan_verified_pass_one_options_value_down(monkeypatch):
    """api.plan and api.plan_verified are thin wrappers: the pipeline and the verified planner get the PlanOptions
    value their keywords make (issue 29, "explicit context"), never a keyword list."""
    import hetplan.planning.pipeline as pipeline
    import hetplan.planning.verify as verify

    seen: list[tuple[str, PlanOptions]] = []
    monkeypatch.setattr(pipeline, "plan", lambda scenario, options, *a, **kw: seen.append(("plan", options)))
    monkeypatch.setattr(verify, "plan_verified", lambda scenario, options, *a, **kw: seen.append(("verified", options)))
    api.plan(_scenario(), "melange", False, profiles=[Path("p.yaml")], prune_top_k=3, price_factors={"L4": 0.5})
    api.plan_verified(_scenario(), "all", analysis=False, policy="sjf", resize=True, confidence=None, min_r2=0.4,
                      price_factors={"L4": 0.5, "A10G": 2.0})  # fmt: skip
    assert seen == [
        ("plan", PlanOptions(strategy="melange", analysis=False, profiles=(Path("p.yaml"),), prune_top_k=3,
                             price_factors=(("L4", 0.5),))),
        ("verified", PlanOptions(strategy="all", analysis=False, verify=True, policy="sjf", resize=True,
                                 confidence=None, min_r2=0.4, price_factors=(("A10G", 2.0), ("L4", 0.5)))),
    ]  # fmt: skip


def test_plan_with_plans_as_plan_does(small):
    options = PlanOptions(strategy="melange", analysis=False, price_factors=(("L4", 0.5),))
    made = api.plan_with(_scenario(), options, catalog=small)
    same = api.plan(_scenario(), "melange", analysis=False, price_factors={"L4": 0.5}, catalog=small)
    assert api.to_doc(made) == api.to_doc(same)
    assert made.provenance.catalog_sha256 == small.sha256
