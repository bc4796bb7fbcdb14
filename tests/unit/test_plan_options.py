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


def test_options_left_unset_keep_the_pipelines_defaults():
    assert PlanOptions().pipeline_kwargs() == {"profiles": [], "prune_with": None}
    asked = PlanOptions.of({"L4": 0.5, "H100-SXM": 2.0}, profiles=(Path("p.yaml"),), prune_top_k=3, min_r2=0.5)
    assert asked.price_factors == (("H100-SXM", 2.0), ("L4", 0.5))
    assert asked.pipeline_kwargs() == {"profiles": [Path("p.yaml")], "prune_with": None, "prune_top_k": 3,
                                       "min_r2": 0.5, "price_factors": {"H100-SXM": 2.0, "L4": 0.5}}  # fmt: skip


def test_plan_with_plans_as_plan_does(small):
    options = PlanOptions(strategy="melange", analysis=False, price_factors=(("L4", 0.5),))
    made = api.plan_with(_scenario(), options, catalog=small)
    same = api.plan(_scenario(), "melange", analysis=False, price_factors={"L4": 0.5}, catalog=small)
    assert api.to_doc(made) == api.to_doc(same)
    assert made.provenance.catalog_sha256 == small.sha256
