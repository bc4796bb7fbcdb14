"""Charts mark the chosen plan and carry a legend; the report labels predicted latencies as the model's and the
simulated ones as simulated (issue 31 item 3)."""

from __future__ import annotations

from typing import Any

from hetplan.report.charts import OTHER_COLOR, PLAN_COLOR, cost_by_strategy, cost_vs_goodput, latency_vs_slo
from hetplan.report.render.common import deployment_rows, verification_rows


def _plan(strategy: str = "melange") -> dict[str, Any]:
    return {
        "strategy": strategy,
        "strategies": {
            "cauchy": {"total_usd_per_hour": 81.93, "gpus_used": {"H100": 8}},
            "homogeneous": {"status": "infeasible", "reason": "x"},
            "melange": {"total_usd_per_hour": 71.10, "gpus_used": {"L40S": 8}},
        },
        "usd_per_hour": 71.10,
        "goodput_target_req_per_s": 5.0,
        "cost_vs_goodput": [
            {"goodput_req_per_s": 2.5, "cauchy_usd_per_hour": 40.0, "melange_usd_per_hour": 36.0},
            {"goodput_req_per_s": 5.0, "cauchy_usd_per_hour": 81.93, "melange_usd_per_hour": 71.10},
        ],
        "slo": {"ttft_s": 2.0, "tpot_s": 0.1, "percentile": 90.0},
        "deployment": [
            {
                "label": "a",
                "count": 1,
                "usd_per_hour_each": 1.0,
                "goodput_req_per_s_each": 1.0,
                "predicted_ttft_s": 0.5,
                "predicted_tpot_s": 0.05,
                "utilization": 0.5,
                "meets_ttft_slo": True,
                "meets_tpot_slo": True,
            }
        ],  # fmt: skip
        "verification": {"ttft_q_s": 0.7, "tpot_q_s": 0.03, "slo_held": True},
    }


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
    v = {"percentile": 90.0, "attainment": {"joint": 1.0, "ttft": 1.0, "tpot": 1.0}, "slo_held": True,
         "policy": "fcfs", "target_req_per_s": 5.0, "rate_scale": 1.0, "arrivals": "trace arrivals", "requests": 10,
         "unfinished": 0, "dropped": 0, "ttft_q_s": 0.7, "tpot_q_s": 0.03, "slo_ttft_s": 2.0, "slo_tpot_s": 0.1,
         "goodput_req_per_s": 4.9}  # fmt: skip
    keys = [row[0] for row in verification_rows(v)]
    assert "simulated p90 TTFT" in keys and "simulated p90 TPOT" in keys
