"""Issue 14: plans buy whole instances of real offers, one rented site per deployment, owned GPUs beside rented.

Acceptance checks on examples (a) and (b) and a flags-only AWS plan: the total is the purchase; every rented
(provider, instance_type) is in ``hetplan catalog prices --json`` at that price; no TP group spans instances; no
combo spans providers. Plus the price-file errors and the owned-at-$0 preference.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hetplan import api
from hetplan.catalog.offers import Offer
from hetplan.cli.main import app
from hetplan.errors import InfeasibleError
from hetplan.plan.doc import from_doc, to_doc
from hetplan.plan.types import Plan
from hetplan.scenario import Scenario, load_scenario
from hetplan.solvers.milp_packed import PackedBin, PackedUnit, pack_instances, solve_packed
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _catalog_prices() -> dict[tuple[str, str], float]:
    res = runner.invoke(app, ["catalog", "prices", "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    return {(r["cloud"], r["instance_type"]): r["on_demand_usd_per_instance_hour"] for r in json.loads(res.stdout)}


def _check_purchase(plan: Plan, catalog: dict[tuple[str, str], float] | None = None) -> None:
    assert plan.purchase, "a plan with offers names what to buy"
    total = sum(p.count * p.usd_per_hour_each for p in plan.purchase)
    assert plan.total_usd_per_hour == pytest.approx(total, rel=1e-4, abs=1e-6)
    offers = {(p.provider, p.instance_type): p for p in plan.purchase}
    for p in plan.purchase:
        assert p.gpus_used <= p.count * p.gpus_per_instance
        if catalog is not None and not p.owned and p.provider in {c for c, _ in catalog}:
            assert catalog[(p.provider, p.instance_type)] == pytest.approx(p.usd_per_hour_each)
    for c in plan.combos:
        assert c.site, "every combo runs in one site"
        for gpu, tp, kind in ((c.prefill_gpu, c.prefill_tp, c.prefill_instance_type),
                              (c.decode_gpu, c.decode_tp, c.decode_instance_type)):  # fmt: skip
            line = next(p for p in plan.purchase if p.instance_type == kind and p.gpu == gpu)
            # no catalog offer has a scale-up domain beyond one instance: a TP group stays inside one
            assert tp <= line.gpus_per_instance and line.gpus_per_instance % tp == 0
            site = "owned" if line.owned else f"{line.provider}/{line.region}" if line.region else line.provider
            assert site == c.site, "prefill and decode of a combo share one site"
        assert offers  # keeps the mapping used
    rented = {(p.provider, p.region) for p in plan.purchase if not p.owned}
    assert len(rented) <= 1, f"one provider and region per deployment, got {rented}"


def test_example_a_buys_catalog_instances_in_one_aws_region():
    scenario = load_scenario(ROOT / "examples" / "llama3-70b-azure-conv.yaml")
    plan = api.plan(scenario, analysis=False)
    _check_purchase(plan, _catalog_prices())
    assert {p.provider for p in plan.purchase} == {"aws"}
    assert from_doc(to_doc(plan)) == plan  # purchase lines and placements survive the plan file
    melange = api.plan(scenario, "melange", analysis=False)
    _check_purchase(melange, _catalog_prices())
    assert all(i.instance_type for i in melange.instances) and from_doc(to_doc(melange)) == melange


def test_example_b_uses_owned_nodes_only():
    scenario = load_scenario(ROOT / "examples" / "cauchy-h800-a800-h20.yaml")
    plan = api.plan(scenario, analysis=False)
    _check_purchase(plan)
    assert all(p.owned for p in plan.purchase)
    owned = {g: row.to_doc() for g, row in (plan.owned_gpus or {}).items()}
    assert set(owned) == {"H800-SXM", "A800-80GB-SXM", "H20"}  # every inventory type, used or not
    for row in owned.values():
        assert row["used"] + row["idle"] == row["owned"] == 32
        assert (row["idle"] > 0) == bool(row.get("idle_reason"))


def _flags_scenario(**extra: object) -> Scenario:
    base: dict[str, object] = {
        "model": "Llama-3-70B",
        "workload": {"synthetic": {"class": "balanced", "rate_per_s": 5.0, "requests": 400}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
    }
    base.update(extra)
    return Scenario.model_validate(base)


def test_flags_only_aws_plan_has_no_a10g_tp8_and_real_instances():
    res = runner.invoke(
        app,
        cli(["plan", "--model", "Llama-3-70B", "--synthetic", "balanced", "--rate", "5", "--cloud", "aws",
             "--gpus", "H100,A100-80GB,L40S,L4,A10G", "--no-analysis", "--json"]),
        env=ENV,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    plan = api.as_plan(doc)
    _check_purchase(plan, _catalog_prices())
    assert sum(p["count"] * p["usd_per_hour_each"] for p in doc["purchase"]) == pytest.approx(
        doc["total_usd_per_hour"], rel=1e-4
    )
    for c in doc["combos"]:
        for role in ("prefill", "decode"):
            if c[f"{role}_gpu"] == "A10G":
                assert c[f"{role}_tp"] <= 4, "AWS sells A10G in 1- and 4-GPU sizes only"


def _price_file(tmp_path: Path, offers: list[dict[str, object]], per_gpu: dict[str, float] | None = None) -> Path:
    path = tmp_path / "prices.yaml"
    doc: dict[str, object] = {"schema_version": 1, "kind": "prices", "source": "test", "as_of": "2026-12-01"}
    if per_gpu:
        doc["usd_per_gpu_hour"] = per_gpu
    doc["offers"] = offers
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("rented_usd", [0.5, 8.0, 40.0])
def test_an_owned_gpu_at_zero_is_preferred_to_an_identical_rented_one(tmp_path, rented_usd):
    offers = [
        {"provider": "owned", "gpu": "H100", "gpus_per_instance": 8, "usd_per_gpu_hour": 0, "count": 1},
        {"provider": "acme", "instance_type": "h100x8", "region": "r1", "gpu": "H100", "gpus_per_instance": 8,
         "usd_per_instance_hour": rented_usd},
    ]  # fmt: skip
    scenario = _flags_scenario(gpus=["H100"], prices=str(_price_file(tmp_path, offers)))
    plan = api.plan(scenario, analysis=False)
    _check_purchase(plan)
    owned = [p for p in plan.purchase if p.owned]
    assert owned and owned[0].gpus_used > 0
    rented_gpus = sum(p.gpus_used for p in plan.purchase if not p.owned)
    # rented GPUs only beyond the owned node's 8
    assert rented_gpus == 0 or owned[0].gpus_used == 8


def test_owned_plus_rented_from_flags_uses_owned_first():
    # bf16 pinned: with fp8 weights (auto-quantized) the 8 owned H100 alone hold 12 req/s and nothing is rented
    res = runner.invoke(
        app,
        cli(["plan", "--model", "Llama-3-70B", "--synthetic", "balanced", "--rate", "12", "--inventory", "H100=8",
             "--gpus", "H100", "--cloud", "aws", "--weight-dtype", "bf16", "--no-analysis", "--json"]),
        env=ENV,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    owned = [p for p in doc["purchase"] if p["owned"]]
    rented = [p for p in doc["purchase"] if not p["owned"]]
    assert owned and owned[0]["gpus_used"] == 8, "the 8 owned H100 (at $0) are used before renting"
    assert rented and {p["instance_type"] for p in rented} == {"p5.48xlarge"}


def test_no_rent_infeasible_lists_every_inventory_type():
    res = runner.invoke(
        app,
        cli(["plan", "--model", "Llama-3-70B", "--synthetic", "balanced", "--rate", "40", "--inventory",
             "H100=8,L4=4", "--no-rent", "--no-analysis"]),
        env=ENV,
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    assert "H100-SXM=8" in res.output and "L4=4" in res.output


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"provider": "acme", "instance_type": "x", "gpu": "H100", "usd_per_instance_hour": -1.0},
         "offers[0].usd_per_instance_hour"),
        ({"provider": "acme", "instance_type": "x", "gpu": "H100", "gpus_per_instance": 0,
          "usd_per_instance_hour": 3.0}, "offers[0].gpus_per_instance"),
        ({"provider": "acme", "instance_type": "x", "gpu": "H1OOO", "usd_per_instance_hour": 3.0}, "offers[0].gpu"),
        ({"provider": "owned", "gpu": "H100", "usd_per_gpu_hour": 1.0}, "offers[0].count"),
    ],
)  # fmt: skip
def test_bad_price_file_rows_exit_2_naming_row_and_field(tmp_path, row, field):
    path = _price_file(tmp_path, [row])
    res = runner.invoke(
        app, cli(["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--prices", str(path)]),
        env=ENV,
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert field in res.output and "Traceback" not in res.output


def test_duplicate_offers_exit_2_naming_both_rows(tmp_path):
    row = {"provider": "acme", "instance_type": "x", "region": "r", "gpu": "H100", "usd_per_instance_hour": 3.0}
    path = _price_file(tmp_path, [row, dict(row)])
    res = runner.invoke(
        app, cli(["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--prices", str(path)]),
        env=ENV,
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "offers[1] repeats offers[0]" in res.output


def test_pack_instances_first_fit_decreasing_fills_power_of_two_instances():
    assert pack_instances(8, [4, 2, 2, 4, 4, 2, 2]) == [[4, 4], [4, 2, 2], [2, 2]]
    assert pack_instances(4, [8]) == [[8], [8]]  # a scale-up domain takes whole instances


def test_packed_milp_shares_an_instance_and_buys_the_cheaper_size():
    # one unit needs two TP2 instances of H100: one 4-GPU instance ($10) beats two 2-GPU ones ($6 each)
    units = [PackedUnit(((("H100", 2), 2),), "s", value=1.0)]
    bins = [PackedBin("s", "H100", 2, 6.0, (1, 2)), PackedBin("s", "H100", 4, 10.0, (1, 2, 4))]
    res = solve_packed(units, bins, demand=1.0)
    assert res.status == "optimal" and res.bought == (0, 1) and res.objective == pytest.approx(10.0)
    # a TP4 group cannot be split over 2-GPU instances
    units = [PackedUnit(((("H100", 4), 1),), "s", value=1.0)]
    res = solve_packed(units, [PackedBin("s", "H100", 2, 1.0, (1, 2))], demand=1.0)
    assert res.status == "infeasible"


def test_offer_hosts_tp_only_inside_an_instance_without_a_domain():
    small = Offer("aws", "g5.12xlarge", "us-east-1", "A10G", 4, 5.672, 4)
    assert small.hosts_tp(4) and small.hosts_tp(2) and not small.hosts_tp(8)
    rack = Offer("acme", "nvl", "r", "B200", 4, 40.0, 72)
    assert rack.hosts_tp(8)


OWN_SCENARIOS = [
    {"model": "Llama-3-8B", "workload": {"synthetic": {"class": "balanced", "rate_per_s": 4.0, "requests": 400}},
     "slo": {"ttft": "2s", "tpot": "100ms"}, "cloud": "aws"},
    {"model": "Llama-3-70B", "workload": {"synthetic": {"class": "long-input-short-output", "rate_per_s": 3.0,
     "requests": 400}}, "slo": {"ttft": "3s", "tpot": "80ms"}, "gpus": ["H100", "A100-80GB", "L40S"]},
    {"model": "Llama-3-8B", "workload": {"synthetic": {"class": "short-input-long-output", "rate_per_s": 6.0,
     "requests": 400}}, "slo": {"ttft": "1s", "tpot": "50ms"}, "inventory": {"L40S": 8}, "cloud": "lambda"},
]  # fmt: skip


def _scenario(which: str | int) -> Scenario:
    if which == "a":
        return load_scenario(ROOT / "examples" / "llama3-70b-azure-conv.yaml")
    if which == "b":
        return load_scenario(ROOT / "examples" / "cauchy-h800-a800-h20.yaml")
    return Scenario.model_validate(OWN_SCENARIOS[int(which)])


WORDS = {
    "cauchy": "(Cauchy)",
    "homogeneous": "on one GPU type",
    "melange": "(Mélange's size buckets)",
    "mixed": "in one MILP",
}


@pytest.mark.parametrize("which", ["a", "b", 0, 1, 2])
def test_strategy_all_is_never_dearer_than_any_restricted_optimum(which):
    """Issue 15 items 1-2: the plan's $/h (the cheapest of the restricted optima and the mixed MILP, which mixes
    aggregated instances and combos) is at most every other strategy's optimum, all priced in whole instances, and
    it says which shape won."""
    plan = api.plan(_scenario(which), "all", analysis=False)
    _check_purchase(plan)
    assert plan.strategy_requested == "all"
    assert WORDS[plan.strategy] in (plan.shape_won or "")
    assert set(plan.baselines) == {"cauchy", "homogeneous", "melange", "mixed"} - {plan.strategy}
    for b in plan.baselines.values():
        if b.status != "infeasible":
            assert b.total_usd_per_hour is not None and plan.total_usd_per_hour <= b.total_usd_per_hour + 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("which", ["a", "b", 0, 1, 2])
def test_strategy_all_against_independent_restricted_plans(which):
    """The same, against each strategy planned on its own (``--strategy NAME``)."""
    scenario = _scenario(which)
    plan = api.plan(scenario, "all", analysis=False)
    for name in ("cauchy", "homogeneous", "melange", "mixed"):
        try:
            alone = api.plan(scenario, name, analysis=False)
        except InfeasibleError:
            continue
        assert plan.total_usd_per_hour <= alone.total_usd_per_hour + 1e-6


def test_owned_plus_rented_from_a_scenario_file_uses_owned_first():
    plan = api.plan(load_scenario(ROOT / "tests" / "fixtures" / "owned_plus_rented.yaml"), analysis=False)
    _check_purchase(plan)
    owned = {g: row.to_doc() for g, row in (plan.owned_gpus or {}).items()}
    assert set(owned) == {"H100-SXM", "L40S"}
    rented = sum(p.gpus_used for p in plan.purchase if not p.owned)
    if rented:  # renting only once the owned GPUs (at $0) of the rented types are all in use
        for p in plan.purchase:
            if not p.owned:
                assert owned.get(p.gpu, {"idle": 0})["idle"] == 0
    assert sum(row["used"] for row in owned.values()) > 0


def test_an_amortised_owned_price_still_rents_the_clouds_offers_of_that_gpu(tmp_path):
    # README step 4: inventory plus usd_per_gpu_hour for the owned GPU; AWS's L40S instances stay rentable beside
    # the 2 owned (they were dropped: the per-GPU price replaced the catalog's offers even for an owned GPU)
    path = tmp_path / "prices.yaml"
    path.write_text(
        yaml.safe_dump(
            {"schema_version": 1, "kind": "prices", "source": "amortised", "as_of": "2026-12-01",
             "usd_per_gpu_hour": {"L40S": 0.40}}
        )
    )  # fmt: skip
    scenario = _flags_scenario(
        model="Llama-3.1-8B", gpus=["L40S"], inventory={"L40S": 2}, cloud="aws", prices=str(path),
        weight_dtype="bf16", goodput_req_per_s=20,
    )  # fmt: skip
    plan = api.plan(scenario, analysis=False)
    _check_purchase(plan, _catalog_prices())
    owned = [p for p in plan.purchase if p.owned]
    rented = [p for p in plan.purchase if not p.owned]
    assert owned and owned[0].usd_per_hour_each == pytest.approx(0.40 * owned[0].gpus_per_instance)
    assert rented and all(p.provider == "aws" and p.gpu == "L40S" for p in rented)
    # each combo's tokens/USD is at the price its GPUs are bought at, the same basis as its $/h
    doc = to_doc(plan)
    # tokens per request x 3600, from the plan's own totals
    per_request = doc["tokens_per_usd"] * doc["total_usd_per_hour"] / doc["goodput_req_per_s"]
    assert doc["combos"]
    for c in doc["combos"]:
        assert c["tokens_per_usd"] * c["usd_per_hour"] / c["goodput_req_per_s"] == pytest.approx(per_request, rel=2e-3)


def test_headroom_takes_a_percent_with_its_sign():
    assert _flags_scenario(headroom="10%").headroom == pytest.approx(0.10)
    assert _flags_scenario(headroom=0.25).headroom == pytest.approx(0.25)
