"""Charts mark the chosen plan and carry a legend; the report labels predicted latencies as the model's and the
simulated ones as simulated (issue 31 item 3)."""

from __future__ import annotations

from dataclasses import replace

from hetplan.plan.doc import load_plan, verification_block
from hetplan.plan.types import Slo
from hetplan.report.charts import OTHER_COLOR, PLAN_COLOR, cost_by_strategy, cost_vs_goodput, latency_vs_slo
from hetplan.report.model import plan_report
from hetplan.report.render.common import deployment_rows, verification_rows
from hetplan.report.types import ComboRow, CurvePoint, PlanSection, SloDoc, StrategyRow
from hetplan.report.verification import verification_report
from tests.conftest import ROOT

SLO = Slo(ttft_s=2.0, tpot_s=0.1, percentile=90.0)
SECTION = plan_report(load_plan(ROOT / "tests" / "fixtures" / "plan_example_a.json"), "plan.json")


def _plan(strategy: str = "melange") -> PlanSection:
    """The fixture's report section with hand-set strategies, curve, one combo and a simulated check."""
    curve = [
        {"goodput_req_per_s": 2.5, "cauchy_usd_per_hour": 40.0, "melange_usd_per_hour": 36.0},
        {"goodput_req_per_s": 5.0, "cauchy_usd_per_hour": 81.93, "melange_usd_per_hour": 71.10},
    ]
    return replace(
        SECTION,
        strategy=strategy,
        strategies={
            "cauchy": StrategyRow("optimal", total_usd_per_hour=81.93, gpus_used={"H100": 8}),
            "homogeneous": StrategyRow("infeasible", reason="x"),
            "melange": StrategyRow("optimal", total_usd_per_hour=71.10, gpus_used={"L40S": 8}),
        },
        usd_per_hour=71.10,
        goodput_target_req_per_s=5.0,
        cost_vs_goodput=tuple(
            CurvePoint(
                r["goodput_req_per_s"], {"cauchy": r["cauchy_usd_per_hour"], "melange": r["melange_usd_per_hour"]}, r
            )
            for r in curve
        ),
        slo=SloDoc(2.0, 0.1, 90.0),
        deployment=(ComboRow("a", 1, 1.0, 1.0, 0.5, 0.05, True, True, 0.5, "decode"),),
        verification=verification_report(verification_block({"ttft_p_s": 0.7, "tpot_p_s": 0.03, "misses": []}), SLO),
    )


def test_cost_chart_colours_only_the_chosen_plan_and_has_a_legend():
    svg = cost_by_strategy(_plan("melange"))
    assert "this plan (melange)" in svg and "other strategies" in svg  # the legend's entries
    assert svg.count(PLAN_COLOR) >= 2 and OTHER_COLOR in svg  # the chosen bar and its legend patch
    other = cost_by_strategy(_plan("cauchy"))
    assert "this plan (cauchy)" in other and "this plan (melange)" not in other


def test_cost_curve_marks_the_plan_and_the_target_in_its_legend():
    svg = cost_vs_goodput(_plan("melange"))
    assert "melange (this plan)" in svg and "goodput target 5 req/s" in svg and "this plan" in svg


def test_latency_chart_says_model_predicts_and_simulated_on_the_trace():
    svg = latency_vs_slo(_plan())
    assert svg is not None and "model predicts" in svg and "simulated on" in svg and "the trace" in svg
    assert "SLO 2 s" in svg and "SLO 100 ms" in svg  # the dashed line is in the legend
    assert "predicted (model)" not in svg


def test_report_tables_name_whose_latency_it_is():
    p = _plan()
    head, _ = deployment_rows(p)
    assert "model p90 TTFT" in head and "model TPOT" in head
    block = {"attainment_by_slo": {"joint": 1.0, "ttft": 1.0, "tpot": 1.0}, "misses": [], "policy": "fcfs",
             "target_req_per_s": 5.0, "rate_scale": 1.0, "arrivals": "trace arrivals", "requests": 10,
             "unfinished": 0, "dropped": 0, "ttft_p_s": 0.7, "tpot_p_s": 0.03, "goodput_req_per_s": 4.9}  # fmt: skip
    keys = [row[0] for row in verification_rows(verification_report(verification_block(block), SLO))]
    assert "simulated p90 TTFT" in keys and "simulated p90 TPOT" in keys
