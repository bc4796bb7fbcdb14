"""The typed plan (hetplan.plan): document round trips, the version-1 reader, stored fixtures kept fresh."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from hetplan import api
from hetplan.errors import InputError
from hetplan.plan.blocks import Verification
from hetplan.plan.doc import SCHEMA_VERSION, from_doc, load_plan, read_plan_doc, to_doc
from hetplan.plan.types import Plan
from hetplan.scenario import load_scenario
from tests.conftest import EXAMPLES, FIXTURES

STORED = {
    # fixture file: (example, strategy, analysis) it was written from
    # example (a)'s Cauchy plan (tests/README.md): since the refitted model (issue 13) the CLI default
    # (--strategy all) picks Mélange there, and the report tests need a plan with combos
    "plan_example_a.json": ("llama3-70b-azure-conv", "cauchy", True),
    "plan_example_a_melange.json": ("llama3-70b-azure-conv", "melange", False),
}


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_document_round_trips(name):
    doc = read_plan_doc(FIXTURES / name)
    plan = from_doc(doc)
    assert to_doc(plan) == doc
    assert from_doc(to_doc(plan)) == plan


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STORED))
def test_stored_plan_fixtures_are_what_hetplan_plans_today(name):
    """A fixture other tests rely on must be the plan hetplan makes now; refresh it on purpose with
    ``hetplan plan examples/EXAMPLE.yaml [--strategy S] [--no-analysis] --no-verify --out tests/fixtures/NAME --force``
    (fixtures are the analytic plan, as ``api.plan`` makes it; the simulated check has its own tests)."""
    example, strategy, analysis = STORED[name]
    fresh = api.to_doc(api.plan(load_scenario(EXAMPLES / f"{example}.yaml"), strategy, analysis))
    stored = json.loads((FIXTURES / name).read_text())
    assert fresh == stored, f"tests/fixtures/{name} is stale: re-plan it (see this test's docstring)"


def test_plans_carry_what_later_stages_need():
    plan = load_plan(FIXTURES / "plan_example_a.json")
    doc = read_plan_doc(FIXTURES / "plan_example_a.json")
    assert doc["schema_version"] == SCHEMA_VERSION == 2 and doc["engine"] == "vllm"
    assert plan.model.source == "catalog" and plan.model.spec.name == "Llama-3-70B"
    assert plan.model.spec.num_hidden_layers == 80
    assert set(plan.used_gpu_names()) <= set(plan.gpus)
    assert plan.gpu("H100-SXM").hbm_gib == 80
    assert plan.settings.max_num_batched_tokens == 8192 and plan.settings.default.prefill_mfu == 0.668
    assert len(plan.provenance.catalog_sha256) == 64 and len(plan.provenance.workload_sha256 or "") == 64
    assert plan.combos and plan.combos[0].label.count("->") == 1


def test_melange_buckets_are_numbers():
    plan = load_plan(FIXTURES / "plan_example_a_melange.json")
    buckets = [b for t in plan.instances for b in t.buckets]
    assert buckets and all(b.prompt_lo_tokens < b.prompt_hi_tokens for b in buckets)
    assert all(math.isfinite(b.prompt_lo_tokens) and b.share > 0 for b in buckets)
    shares = sum(t.traffic_share for t in plan.instances)
    assert shares == pytest.approx(1.0, abs=1e-3)
    assert sum(b.share for b in buckets) == pytest.approx(shares, abs=1e-3)
    doc = read_plan_doc(FIXTURES / "plan_example_a_melange.json")
    first = doc["instances"][0]["buckets"][0]
    assert set(first) == {"prompt_tokens", "output_tokens", "share", "label"}


def test_version_1_files_are_still_read():
    old = load_plan(FIXTURES / "plan_example_a_v1.json")
    new = load_plan(FIXTURES / "plan_two_combos.json")  # the same plan, as hetplan's version 2 wrote it
    assert old.combos == new.combos and old.model.spec == new.model.spec
    assert old.provenance.catalog_sha256.startswith("unknown (version-1 plan")
    assert to_doc(old)["schema_version"] == 2


def test_a_version_1_plan_whose_model_is_gone_says_re_plan():
    doc = read_plan_doc(FIXTURES / "plan_example_a_v1.json")
    doc["scenario"]["model"] = "No-Such-Model-7B"
    with pytest.raises(InputError, match="version-1 plan") as err:
        from_doc(doc)
    assert "re-plan" in (err.value.fix or "")


def test_a_hand_edited_gpu_name_is_refused_with_the_fix():
    doc = read_plan_doc(FIXTURES / "plan_example_a.json")
    doc["combos"][0]["decode_gpu"] = "H100-NVL"
    with pytest.raises(InputError, match="resolved GPU entries do not include") as err:
        from_doc(doc)
    assert "re-plan" in (err.value.fix or "")
    plan = load_plan(FIXTURES / "plan_example_a.json")
    with pytest.raises(InputError, match="records no entry"):
        plan.gpu("B200")


def test_a_version_2_plan_needs_its_resolved_entries():
    doc = read_plan_doc(FIXTURES / "plan_example_a.json")
    del doc["resolved"]
    with pytest.raises(InputError, match="not a usable hetplan plan") as err:
        from_doc(doc)
    assert "'resolved'" in (err.value.why or "")


def test_plans_are_frozen():
    plan = load_plan(FIXTURES / "plan_example_a.json")
    with pytest.raises(AttributeError):
        plan.strategy = "melange"  # type: ignore[misc]
    assert isinstance(replace(plan, verification=Verification(misses=[])), Plan)


def test_a_plan_on_the_fixture_catalog_adds_up(small):
    from hetplan.scenario import Scenario

    scenario = Scenario.model_validate(
        {
            "name": "small",
            "model": "Llama-3-8B",
            "workload": {"synthetic": {"class": "balanced", "rate_per_s": 4.0, "requests": 400}},
            "slo": {"ttft": "2s", "tpot": "100ms"},
            "cloud": "aws",
        }
    )
    plan = api.plan(scenario, analysis=False, catalog=small)
    assert set(plan.gpus) <= {"H100-SXM", "A100-80GB-SXM", "L4"}
    # plans buy whole instances: the total is the purchase, and the combos' GPUs fit in what is bought
    assert plan.total_usd_per_hour == pytest.approx(sum(p.count * p.usd_per_hour_each for p in plan.purchase), rel=1e-5)
    assert plan.total_usd_per_hour >= sum(c.usd_per_hour * c.count for c in plan.combos) - 1e-6
    used: dict[str, int] = {}
    for c in plan.combos:
        used[c.prefill_gpu] = used.get(c.prefill_gpu, 0) + c.n_prefill * c.prefill_tp * c.count
        used[c.decode_gpu] = used.get(c.decode_gpu, 0) + c.n_decode * c.decode_tp * c.count
    assert used == dict(plan.gpus_used)
    assert plan.goodput_req_per_s >= plan.demand_req_per_s * (1 - 1e-6)
    assert all(c.predicted_ttft_s <= 2.0 and c.predicted_tpot_s <= 0.1 for c in plan.combos)
    import yaml

    rows = yaml.safe_load((small.folder / "prices.yaml").read_text())["prices"]
    for gpu, price in plan.prices.items():  # every price is one of the fixture's AWS on-demand rows
        assert price.usd_per_gpu_hour in {r["on_demand_usd_per_gpu_hour"] for r in rows if r["gpu"] == gpu}


def test_the_planner_assembles_the_typed_plan_without_a_plan_document(monkeypatch):
    """Issue 29 item 1: the planner builds the Plan from the solvers' typed results; the plan document is only
    what to_doc writes, and reading one back (plan.doc's check) is for files. The plan, its deferred analysis and
    the weight-dtype search's plan equal their own plan files read back."""
    import hetplan.plan.doc as plan_doc
    from hetplan.planning.options import PlanOptions
    from hetplan.planning.pipeline import plan

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the planner read a plan document")

    scenario = load_scenario(EXAMPLES / "llama31-8b-mooncake.yaml").model_copy(update={"weight_dtype": "auto"})
    deferred: list = []
    with monkeypatch.context() as m:
        m.setattr(plan_doc, "check_plan", refuse)
        made = plan(scenario, PlanOptions(analysis=False), deferred=deferred)
        full = deferred[0](None) if deferred else made
    assert made.dtype_search is not None and made.analysis is None
    for p in (made, full):
        assert from_doc(to_doc(p)) == p and to_doc(from_doc(to_doc(p))) == to_doc(p)
