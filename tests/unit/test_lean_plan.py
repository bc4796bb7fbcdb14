"""A re-size attempt plans its own strategy alone (issue 34 item 5: verification fast enough to be the default): the
lean plan has the deployment the whole plan has, without the baselines it never shows."""

from __future__ import annotations

import pytest

from hetplan.plan.doc import to_doc
from hetplan.planning.options import PlanOptions
from hetplan.planning.pipeline import plan
from hetplan.scenario import load_scenario
from tests.conftest import FIXTURES


def _asked(strategy: str) -> PlanOptions:
    return PlanOptions(strategy=strategy, analysis=False)


@pytest.mark.parametrize("strategy", ["cauchy", "melange", "mixed"])
def test_a_lean_plan_is_the_whole_plans_deployment_without_baselines(strategy: str) -> None:
    scenario = load_scenario(FIXTURES / "mixed_code_70b.yaml")
    whole, lean = to_doc(plan(scenario, _asked(strategy))), to_doc(plan(scenario, _asked(strategy), lean=True))
    for key in ("strategy", "total_usd_per_hour", "goodput_req_per_s", "combos", "instances", "purchase"):
        assert lean.get(key) == whole.get(key), key
    assert whole["baselines"] and lean["baselines"] == {}
    assert lean["homogeneous_baseline"]["status"].startswith("not solved")


def test_all_and_the_analysis_are_never_lean() -> None:
    scenario = load_scenario(FIXTURES / "mixed_code_70b.yaml")
    assert to_doc(plan(scenario, _asked("all"), lean=True))["baselines"]  # every shape is solved to pick one
