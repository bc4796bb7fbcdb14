"""Issue 14 item 3: ``--allow-cross-provider``: a combo's prefill at one site and its decode at another, its KV
cache over a WAN link (bandwidth, latency, egress) that changes its TTFT, capacity and cost.

The offers: provider ``acme`` sells H100 cheap and L40S dear, ``beta`` the reverse, so the cheapest deployment
of Llama-3-8B at 100 req/s puts H100 prefill at acme and L40S decode at beta, which only the flag allows (with the
curves fitted on measured kernels the L40S is the better buy for this small model's decode at a 100 ms TPOT, the
H100 for its prefill; the prices were chosen so that each role's site is the cheaper one by a margin).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hetplan import api
from hetplan.catalog.offers import WanLink
from hetplan.cli.main import app
from hetplan.plan.doc import from_doc, to_doc
from hetplan.plan.types import Plan
from hetplan.planning.request import build_request
from hetplan.report.model import plan_report
from hetplan.scenario import Scenario
from hetplan.sim.deployment import deployment_from_plan
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from hetplan.solvers.milp_packed import PackedBin, PackedUnit, solve_packed
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
USD = {("acme", "H100"): 0.4, ("acme", "L40S"): 3.0, ("beta", "H100"): 6.0, ("beta", "L40S"): 0.15}


def _prices(tmp_path: Path) -> Path:
    offers = [
        {"provider": prov, "instance_type": f"{gpu.lower()}x1", "region": "r1", "gpu": gpu, "gpus_per_instance": 1,
         "usd_per_instance_hour": usd}
        for (prov, gpu), usd in USD.items()
    ]  # fmt: skip
    path = tmp_path / "prices.yaml"
    doc = {"schema_version": 1, "kind": "prices", "source": "test", "as_of": "2026-12-01", "offers": offers}
    path.write_text(yaml.safe_dump(doc))
    return path


def _scenario(tmp_path: Path, **extra: object) -> Scenario:
    base: dict[str, object] = {
        "model": "Llama-3-8B",
        "weight_dtype": "bf16",
        "workload": {"synthetic": {"class": "balanced", "rate_per_s": 100.0, "requests": 400}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
        "gpus": ["H100", "L40S"],
        "prices": str(_prices(tmp_path)),
        "wan_gb_per_s": 10.0,
    }
    base.update(extra)
    return Scenario.model_validate(base)


def _cost_adds_up(plan: Plan) -> None:
    lines = sum(p.count * p.usd_per_hour_each for p in plan.purchase)
    egress = float(plan.egress_usd_per_hour or 0.0)
    assert plan.total_usd_per_hour == pytest.approx(lines + egress, rel=1e-4, abs=1e-6)


def test_a_cross_site_combo_is_strictly_cheaper_with_the_flag_and_never_chosen_without(tmp_path):
    without = api.plan(_scenario(tmp_path, egress_usd_per_gb=0.0), "cauchy", analysis=False)
    assert not any(c.cross_site for c in without.combos)
    assert len({(p.provider, p.region) for p in without.purchase}) == 1, "one rented site by default"
    assert without.cross_provider is None and without.egress_usd_per_hour is None
    with_flag = api.plan(_scenario(tmp_path, egress_usd_per_gb=0.0, allow_cross_provider=True), "cauchy",
                         analysis=False)  # fmt: skip
    cross = [c for c in with_flag.combos if c.cross_site]
    assert cross, [c.label for c in with_flag.combos]
    assert with_flag.total_usd_per_hour < without.total_usd_per_hour - 0.01
    for c in cross:  # H100 prefill where H100 is cheap, L40S decode where L40S is cheap
        assert (c.site, c.decode_site) == ("acme/r1", "beta/r1")
        assert (c.prefill_gpu, c.decode_gpu) == ("H100-SXM", "L40S")
        assert c.egress_usd_per_hour == 0.0
    _cost_adds_up(with_flag)
    assert with_flag.cross_provider is not None
    assert with_flag.cross_provider.to_doc() == {
        "wan_gb_per_s": 10.0, "wan_latency_s": 0.03, "egress_usd_per_gb": 0.0
    }  # fmt: skip
    assert from_doc(to_doc(with_flag)) == with_flag  # the role sites survive the plan file
    labels = [d.label for d in plan_report(with_flag, "plan.json").deployment]
    assert any("prefill at acme/r1, decode at beta/r1: cross-site" in x for x in labels), labels


def test_egress_makes_the_cross_site_combo_costlier(tmp_path):
    free = api.plan(_scenario(tmp_path, egress_usd_per_gb=0.0, allow_cross_provider=True), "cauchy", analysis=False)
    paid = api.plan(_scenario(tmp_path, allow_cross_provider=True), "cauchy", analysis=False)  # default $0.09/GB
    assert any(c.cross_site for c in free.combos)
    assert not any(c.cross_site for c in paid.combos), "egress on ~0.15 GB of KV per request outweighs the GPUs"
    assert paid.total_usd_per_hour > free.total_usd_per_hour
    assert paid.egress_usd_per_hour == 0.0
    assert paid.solver is not None and free.solver is not None
    assert "heuristic with egress > 0" in paid.solver.pruning
    assert "heuristic" not in free.solver.pruning, "with no egress the dominance pruning stays exact"
    _cost_adds_up(paid)
    # each cross-site candidate's egress: $/GB x mean prompt KV bytes x its goodput x 3600 s/h
    req = build_request(_scenario(tmp_path, allow_cross_provider=True))[0]
    cands = enumerate_candidates(req)
    kv_bytes = float((req.stats.prompt_tokens * req.arch.kv_bytes_per_token).mean())
    cross = [c for c in cands.combos if c.cross_site]
    assert cross
    for c in cross:
        assert c.egress_usd_per_hour == pytest.approx(0.09 * kv_bytes / 1e9 * c.goodput_req_per_s * 3600)


def _cross_pairs(tmp_path: Path, ttft: str, latency_s: float) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    sc = _scenario(tmp_path, allow_cross_provider=True, slo={"ttft": ttft, "tpot": "100ms"}, wan_latency_s=latency_s)
    combos = enumerate_candidates(build_request(sc)[0]).combos
    pairs = {(c.prefill_gpu, c.decode_gpu) for c in combos if c.cross_site}
    same = {(c.prefill_gpu, c.decode_gpu) for c in combos if not c.cross_site}
    return pairs, same


def test_the_wan_latency_makes_a_cross_site_combo_infeasible_under_a_tight_ttft(tmp_path):
    near, same_near = _cross_pairs(tmp_path, "250ms", 0.0)
    far, same_far = _cross_pairs(tmp_path, "250ms", 0.25)
    assert ("H100-SXM", "L40S") in near, "feasible across sites with no WAN latency"
    assert ("H100-SXM", "L40S") not in far, "the 250 ms WAN hop pushes its TTFT past 250 ms"
    assert ("H100-SXM", "L40S") in same_far and same_far == same_near, "same-site combos do not see the WAN"
    loose, _ = _cross_pairs(tmp_path, "2s", 0.25)
    assert ("H100-SXM", "L40S") in loose, "the same latency fits a 2 s TTFT"
    plan = api.plan(_scenario(tmp_path, egress_usd_per_gb=0.0, allow_cross_provider=True,
                              slo={"ttft": "250ms", "tpot": "100ms"}, wan_latency_s=0.25), "cauchy",
                    analysis=False)  # fmt: skip
    assert not any(c.cross_site and c.prefill_gpu == "H100-SXM" for c in plan.combos)


def test_a_cross_site_combos_predicted_ttft_and_simulated_transfer_include_the_wan(tmp_path):
    plan = api.plan(_scenario(tmp_path, egress_usd_per_gb=0.0, allow_cross_provider=True, wan_latency_s=0.2),
                    "cauchy", analysis=False)  # fmt: skip
    cross = [c for c in plan.combos if c.cross_site]
    assert cross and all(c.predicted_ttft_s > 0.2 for c in cross)
    dep = deployment_from_plan(plan)
    for group, combo in zip(dep.groups, plan.combos, strict=True):
        base, _ = dep.kv_transfer_coeffs(group)
        if combo.cross_site:
            assert group.extra_latency_s == 0.2 and group.link_bytes_per_s <= 10e9
            assert base == pytest.approx(plan.settings.kv_transfer_base_latency_s + 0.2)
        else:
            assert group.extra_latency_s == 0.0


def test_default_is_one_site_per_combo_and_the_defaults_are_the_documented_ones(tmp_path):
    sc = _scenario(tmp_path)
    assert sc.allow_cross_provider is False and build_request(sc)[0].wan is None
    d = WanLink()
    fields = Scenario.model_fields
    defaults = (fields["wan_gb_per_s"].default, fields["wan_latency_s"].default, fields["egress_usd_per_gb"].default)
    assert defaults == (d.gb_per_s, d.latency_s, d.egress_usd_per_gb) == (1.25, 0.03, 0.09)
    assert not any(c.cross_site for c in enumerate_candidates(build_request(sc)[0]).combos)
    req = build_request(sc.model_copy(update={"allow_cross_provider": True}))[0]
    assert req.wan == WanLink(10.0, d.latency_s, d.egress_usd_per_gb)


def test_packed_milp_places_each_role_at_its_own_site():
    bins = [PackedBin("a", "H100", 1, 1.0, (1,)), PackedBin("b", "H100", 1, 5.0, (1,)),
            PackedBin("a", "L40S", 1, 4.0, (1,)), PackedBin("b", "L40S", 1, 0.5, (1,))]  # fmt: skip
    usage = ((("L40S", 1), 2), (("H100", 1), 1))
    units = [
        PackedUnit(usage, "a", value=1.0),
        PackedUnit(usage, "b", value=1.0),
        PackedUnit(usage, "b", value=1.0, extra_usd_per_hour=0.25, usage_sites=("b", "a")),
    ]
    res = solve_packed(units, bins, demand=1.0)
    assert res.units == (0, 0, 1) and res.bought == (1, 0, 0, 2)
    assert res.objective == pytest.approx(1.0 + 2 * 0.5 + 0.25)


def test_cli_flags_print_each_roles_site_and_bad_latency_exits_2(tmp_path):
    args = ["plan", "--model", "Llama-3-8B", "--weight-dtype", "bf16", "--synthetic", "balanced", "--rate", "100",
            "--gpus", "H100,L40S", "--prices", str(_prices(tmp_path)), "--strategy", "cauchy", "--no-analysis",
            "--no-verify", "--allow-cross-provider", "--wan-gb-per-s", "10", "--wan-latency", "30ms",
            "--egress-usd-per-gb", "0"]  # fmt: skip
    res = runner.invoke(app, cli([*args, "--json"]), env=ENV)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    cross = [c for c in doc["combos"] if c.get("cross_site")]
    assert cross and all(c["site"] == "acme/r1" and c["decode_site"] == "beta/r1" for c in cross)
    assert doc["scenario"]["cross_provider"]["wan_latency_s"] == 0.03
    table = runner.invoke(app, cli(args), env=ENV)
    assert table.exit_code == 0, table.output
    assert "cross-site, KV over the WAN" in table.output and "decode at beta/r1" in table.output
    bad = runner.invoke(app, cli([*args[:-6], "--allow-cross-provider", "--wan-latency", "30"]), env=ENV)
    assert bad.exit_code == 2 and "--wan-latency" in bad.output and "Traceback" not in bad.output
