"""CASCADE's settings travel: ``plan --verify-policy cascade`` and ``calibrate`` write them into the plan, the
emitted vLLM files carry them for the router, and the report shows per-class attainment and Jain's index."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hetplan.emit.ir_build import build_ir
from hetplan.emit.vllm import emit_vllm
from hetplan.plan.blocks import CascadeSettings as CascadeBlock
from hetplan.plan.doc import from_doc, load_plan, to_doc, verification_block
from hetplan.plan.types import Slo
from hetplan.report.model import verification_report
from hetplan.report.render.common import verification_rows
from hetplan.sim.calibrate import calibrate, router_config
from hetplan.sim.run import SimRequest, plan_cascade, simulation
from hetplan.sim.verify import verify_plan
from hetplan.workload.formats import read_azure_csv
from hetplan.workload.readers import read_stream
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def plan_a():
    return load_plan(FIXTURES / "plan_two_combos.json")


def test_verify_policy_cascade_calibrates_and_the_plan_carries_the_settings(plan_a):
    workload = read_azure_csv(FIXTURES / "azure_conv_200.csv")
    v = verify_plan(plan_a, workload, "cascade", capacity=False)
    block = v.to_doc()
    c = block["cascade"]
    assert c["kappa"] > 0 and set(c["kappa_by_class"]) == {workload.name} and 0 <= c["q2"] <= 1
    assert "attainment_by_class" not in block  # one class: the single-class report stays as it was
    plan = replace(plan_a, cascade=v.cascade, verification=v)
    assert plan_cascade(plan).kappa_by_class == ((workload.name, c["kappa_by_class"][workload.name]),)
    files = emit_vllm(build_ir(plan))
    router = json.loads(files["vllm/cascade-router.json"])
    assert router["policy"] == "cascade" and router["kappa_by_class"] == c["kappa_by_class"]
    assert router["q2"] == c["q2"] and router["tier2_order"] == "least-budget"
    assert "vllm/cascade-router.json" not in emit_vllm(build_ir(plan_a))  # uncalibrated plans emit as before
    rows = dict(
        map(
            tuple,
            verification_rows(verification_report(v, Slo(ttft_s=2.0, tpot_s=0.1, percentile=90))),
        )
    )
    assert rows["CASCADE settings"].startswith(f"kappa {c['kappa']:.4g}")


def test_calibrate_writes_per_class_kappa_and_the_router_config_carries_it(plan_a):
    stream = read_stream([FIXTURES / "azure_conv_200.csv", FIXTURES / "mooncake_300.jsonl"])
    block = calibrate(SimRequest(plan_a, stream))
    assert set(block["kappa_by_class"]) <= set(stream.class_names)
    best = max(block["q2_sweep"], key=lambda r: (r["objective"], -r["q2"]))
    assert block["q2"] == best["q2"]
    for r in block["q2_sweep"]:
        assert r["objective"] == pytest.approx((r["goodput_req_per_s"] or 0) * (r["jain_index"] or 0), abs=1e-5)
    plan = replace(plan_a, cascade=CascadeBlock.from_doc(block))
    rc = router_config(plan, block)
    assert rc["kappa_by_class"] == block["kappa_by_class"] and rc["q2"] == block["q2"]
    # q2 per class (issue 32): present only where it beat the single q2; the settings and the router read it
    assert plan_cascade(plan).q2_by_class == tuple(sorted(block.get("q2_by_class", {}).items()))
    assert rc.get("q2_by_class") == block.get("q2_by_class")
    m = simulation(SimRequest(plan, stream, policy="cascade")).to_doc()
    assert m["jain_index"] is not None and len(m["classes"]) == 2


def test_a_verification_with_classes_reports_per_class_attainment_and_jain():
    v = {"status": "verified", "verdict": "verified", "attainment_by_class": {"long": 0.5, "chat": 1.0},
         "jain_index": 0.9, "misses": [], "warnings": [], "attainment_by_slo": {"joint": 0.75}}  # fmt: skip
    rep = verification_report(verification_block(v), Slo(ttft_s=2.0, tpot_s=0.1, percentile=90))
    assert rep.attainment_by_class == {"chat": 1.0, "long": 0.5} and rep.jain_index == 0.9
    rows = dict(map(tuple, verification_rows(rep)))
    assert rows["attainment by class"] == "chat 100.0 %, long 50.0 %" and rows["Jain index (classes)"] == "0.900"


def test_the_plans_cascade_block_carries_q2_per_class(plan_a):
    from hetplan.errors import InputError

    block = {"kappa": 1.2, "q2": 0.1, "q2_by_class": {"long": 0.3, "chat": 0.0}}
    plan = from_doc({**to_doc(plan_a), "cascade": block})
    assert plan_cascade(plan).q2_by_class == (("chat", 0.0), ("long", 0.3))
    assert to_doc(plan)["cascade"] == block  # written back as read
    with pytest.raises(InputError, match=r"cascade\.q2_by_class is invalid: .*q2 of class 'long' must be"):
        from_doc({**to_doc(plan_a), "cascade": {"q2_by_class": {"long": 2.0}}})


def test_the_emitted_router_config_carries_q2_per_class(plan_a):
    block = {"kappa": 1.2, "kappa_by_class": {"chat": 1.1, "long": 1.4}, "q2": 0.1,
             "q2_by_class": {"chat": 0.05, "long": 0.3}, "tier2_order": "least-budget"}  # fmt: skip
    typed = replace(plan_a, cascade=CascadeBlock.from_doc(block))
    router = json.loads(emit_vllm(build_ir(typed))["vllm/cascade-router.json"])
    assert router["q2_by_class"] == {"chat": 0.05, "long": 0.3} and router["q2"] == 0.1
    single = {k: v for k, v in block.items() if k != "q2_by_class"}  # none chosen: no key, as calibrate writes it
    assert "q2_by_class" not in json.loads(
        emit_vllm(build_ir(replace(plan_a, cascade=CascadeBlock.from_doc(single))))["vllm/cascade-router.json"]
    )
