"""The typed report model (issue 29): built once from the typed plan, read by attribute, written as the report
document in its fixed key order; only hetplan/report/plan_fields.py reads the plan's open blocks."""

from __future__ import annotations

import copy
import json
import re

from hetplan.plan.doc import from_doc, read_plan_doc
from hetplan.report.gate import failed
from hetplan.report.model import build_report
from hetplan.report.render.json import render_json
from hetplan.report.types import GateRun, PlanSection, StrategyRow
from tests.conftest import ROOT

PLAN = ROOT / "tests" / "fixtures" / "plan_example_a.json"


def _report_of(doc):
    return build_report([("plan.json", from_doc(copy.deepcopy(doc)))])


def test_only_the_adapter_reads_the_plans_open_blocks():
    """Plan.extra, Plan.scenario_extra and Plan.verification are read in plan_fields.py alone (one place to
    re-point when those blocks are typed); the report's own ``.verification`` attribute is the typed summary."""
    root = ROOT / "hetplan" / "report"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "plan_fields.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bplan\.(extra|scenario_extra|verification)\b", line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, offenders


def test_verification_keys_keep_their_order_and_their_nulls():
    """Optional blocks appear only when the plan has them; a present block's partner key is written even when null
    (``jain_index`` beside ``attainment_by_class``, ``in_sample_status`` before ``out_of_sample``)."""
    doc = read_plan_doc(PLAN)
    doc["verification"] = {
        "status": "verified",
        "misses": [],
        "attainment_by_class": {"b": 0.5, "a": 1.0},
        "out_of_sample": {"status": "holds", "runs": [{"label": "x", "misses": ["m"]}]},
        "resized": {"attempts": [{"headroom": 0.1}, {"headroom": 0.2}]},
    }
    v = json.loads(render_json(_report_of(doc)))["plans"][0]["verification"]
    assert list(v)[-6:] == ["warnings", "attainment_by_class", "jain_index", "in_sample_status", "out_of_sample",
                            "resized"]  # fmt: skip
    assert v["jain_index"] is None and v["in_sample_status"] is None and v["slo_held"] is True
    assert list(v["attainment_by_class"]) == ["a", "b"] and v["out_of_sample"]["runs"][0]["holds"] is False
    assert v["resized"]["attempts"] == 2 and "cascade" not in v and "classes" not in v


def test_renderers_read_attributes_of_one_model():
    rep = _report_of(read_plan_doc(PLAN))
    (p,) = rep.plans
    assert isinstance(p, PlanSection) and p.title and p.verification is None
    assert all(isinstance(s, StrategyRow) for s in p.strategies.values())
    assert p.decision.sentence.startswith("Rent ") and p.strategies[p.strategy].planned


def test_strategy_rows_write_a_baselines_missing_totals_as_absent_and_the_plans_as_null():
    own = StrategyRow("optimal", planned=True, total_usd_per_hour=0.0, gpus_used={"A": 1})
    other = StrategyRow("optimal", total_usd_per_hour=0.0, gpus_used={"A": 1})
    assert own.to_doc() == {"status": "optimal", "total_usd_per_hour": 0.0, "goodput_req_per_s": None,
                            "tokens_per_usd": None, "output_tokens_per_usd": None, "gpus_used": {"A": 1}}  # fmt: skip
    assert other.to_doc() == {"status": "optimal", "total_usd_per_hour": 0.0, "gpus_used": {"A": 1}}
    assert StrategyRow("infeasible", reason=None).to_doc() == {"status": "infeasible", "reason": None}


def test_gate_run_json_order():
    run = GateRun(False, (failed("s", "why"),), ("w",))
    doc = run.to_doc()
    assert list(doc) == ["passed", "results", "warnings"]
    assert list(doc["results"][0]) == ["name", "passed", "baseline_usd_per_hour", "usd_per_hour",
                                       "cost_change_fraction", "cost_change_usd_per_hour", "tokens_per_usd_ratio",
                                       "failures", "changes"]  # fmt: skip
    assert doc["results"][0]["usd_per_hour"] is None and doc["results"][0]["failures"] == ["why"]


def test_golden_report_is_the_models_json():
    plan = ROOT / "tests" / "fixtures" / "plan_report_golden.json"
    rep = build_report([(plan.name, from_doc(read_plan_doc(plan)))])
    golden = ROOT / "tests" / "golden" / "report_golden.json"
    assert render_json(rep) == golden.read_text()
