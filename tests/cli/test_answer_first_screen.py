"""The first screen of ``hetplan plan`` (issue 31 item 3): traffic left out in the first five lines, the verdict,
the decision in purchase terms, the owned GPUs, the confidence, the other strategies as one number each under one
rule; solver internals only with --verbose; predicted latencies labelled as the model's."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.cli.render.answer import comparison_line, cost_vs, decision_line, money_per_month
from hetplan.plan.deployment import Purchase
from hetplan.plan.doc import load_plan
from hetplan.plan.types import StrategyResult
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
OWNED = ROOT / "tests" / "fixtures" / "owned_l40s_tight_ttft.yaml"
NARROW = {"COLUMNS": "80", "NO_COLOR": "1"}
runner = CliRunner()


def test_cost_vs_is_one_rule_for_more_less_and_the_same():
    assert cost_vs(130.5, 100.0) == "30.5 % more"
    assert cost_vs(88.0, 100.0) == "12.0 % less"
    assert cost_vs(100.004, 100.0) == "the same"
    assert cost_vs(0.0, 17.94) == "$17.94/h less"  # a $0 fleet (owned, no price): dollars, not "100 % less"
    assert cost_vs(17.94, 0.0) == "$17.94/h more"
    for other, this in ((130.5, 100.0), (88.0, 100.0), (0.0, 5.0)):
        assert "+" not in cost_vs(other, this) and "-" not in cost_vs(other, this)  # never "saves +13.2 %"


def test_money_per_month_reads_at_a_glance():
    assert money_per_month(71773.6) == "$71.8k/month"
    assert money_per_month(730.0) == "$730/month"
    assert money_per_month(1_234_000.0) == "$1.23M/month"
    # the edges of each range: a plan for 1e5 req/s costs $100M/month and more (was "$1.2e+03M/month")
    assert money_per_month(999.6) == "$1.0k/month" and money_per_month(999.4) == "$999/month"
    assert money_per_month(999_960.0) == "$1M/month"  # was "$1000.0k/month"
    assert money_per_month(999_960_000.0) == "$1,000M/month" and money_per_month(1.2e9) == "$1,200M/month"
    assert money_per_month(3.4e10) == "$34,000M/month"


def test_decision_names_instances_provider_region_and_both_costs():
    plan = replace(
        load_plan(ROOT / "tests" / "fixtures" / "plan_example_a.json"),
        total_usd_per_hour=115.0,
        usd_per_month=83950.0,
        gpus_used={"H100-SXM": 8, "L40S": 8},
        purchase=(
            Purchase("aws", "p5.48xlarge", "us-east-1", "H100-SXM", 8, 1, False, 98.32),
            Purchase("aws", "g6e.2xlarge", "us-east-1", "L40S", 1, 2, False, 2.24),
            Purchase("owned", "owned-L40S-8gpu", "", "L40S", 8, 1, True, 0.0),
        ),
    )
    assert decision_line(plan) == (
        "decision: rent 1 AWS p5.48xlarge and 2 AWS g6e.2xlarge in us-east-1; use 1 owned 8-GPU L40S node: "
        "$115.00/h, $84.0k/month"
    )
    plan = replace(plan, purchase=())  # per-GPU prices only: the GPUs
    assert decision_line(plan).startswith("decision: run 8x H100-SXM, 8x L40S: $115.00/h")


def test_decision_writes_large_counts_with_separators():
    """A plan at 1e5 req/s said "rent 3219 AWS p4de.24xlarge"; counts read as every other figure does."""
    plan = replace(
        load_plan(ROOT / "tests" / "fixtures" / "plan_example_a.json"),
        purchase=(Purchase("aws", "p4de.24xlarge", "us-east-1", "A100-80GB-SXM", 8, 3219, False, 40.97),),
    )
    assert decision_line(plan).startswith("decision: rent 3,219 AWS p4de.24xlarge in us-east-1: ")


def test_comparison_is_one_number_per_alternative():
    plan = replace(
        load_plan(ROOT / "tests" / "fixtures" / "plan_example_a.json"),
        total_usd_per_hour=100.0,
        baselines={"homogeneous": StrategyResult("optimal", total_usd_per_hour=100.0),
                   "melange": StrategyResult("optimal", total_usd_per_hour=130.5),
                   "mixed": StrategyResult("infeasible", reason="x")},
    )  # fmt: skip
    assert comparison_line(plan) == (
        "other strategies cost (the model's figures): homogeneous the same, melange 30.5 % more, mixed infeasible"
    )


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """azure_conv_200 with every 8th prompt made longer than Llama-2-7B's 4,096-token window."""
    frame = pd.read_csv(ROOT / "tests" / "fixtures" / "azure_conv_200.csv")
    frame.loc[frame.index % 8 == 0, "ContextTokens"] = 5000
    path = tmp_path_factory.mktemp("trace") / "long.csv"
    frame.to_csv(path, index=False)
    return path, len(frame), int((frame["ContextTokens"] > 4096).sum())


def _plan(trace: Path, *extra: str) -> list[str]:
    args = ["plan", "--model", "Llama-2-7B", "--workload", str(trace), "--gpus", "L40S", "--cloud", "aws",
            "--weight-dtype", "bf16", "--no-analysis", *extra]  # fmt: skip
    res = runner.invoke(app, cli(args), env=NARROW)
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def test_traffic_left_out_is_in_the_first_five_lines(long_trace):
    trace, total, refused = long_trace
    res = runner.invoke(
        app,
        cli(["plan", "--model", "Llama-2-7B", "--workload", str(trace), "--gpus", "L40S", "--cloud", "aws",
             "--weight-dtype", "bf16", "--no-analysis", "--json"]),
        env=NARROW,
    )  # fmt: skip
    left = json.loads(res.stdout)["scenario"]["workload"]["over_context"]
    assert (left["requests_total"], left["refused"], left["window_tokens"]) == (total, refused, 4096)
    head = " ".join(" ".join(_plan(trace)[:5]).split())
    assert f"{refused:,} of {total:,} requests ({refused / total * 100:.1f} %) left out" in head
    assert "prompt over the 4,096-token window" in head
    assert f"trace {left['arrival_rate_per_s']:.3g} req/s with them" in head
    assert f"{total - refused:,} of {total:,} requests sized" in head
    assert all(len(line) <= 80 for line in _plan(trace))


def test_solver_internals_only_with_verbose(long_trace):
    trace, _, _ = long_trace
    quiet = "\n".join(_plan(trace))
    loud = "\n".join(_plan(trace, "--verbose"))
    for internal in ("solver: HiGHS", "mixed MILP:", "ties go to the order"):
        assert internal not in quiet
    assert "solver: HiGHS" in loud and "mixed MILP:" in loud
    assert "plan saves" not in quiet and "vs plan" in quiet


def test_predicted_latencies_are_labelled_as_the_models():
    res = runner.invoke(app, cli(["plan", str(OWNED), "--no-analysis"]), env=NARROW)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "combo: prefill -> decode" in line)
    assert "p90 TTFT" in lines[header - 1] and lines[header].split()[-3:-1] == ["model", "model"]


@pytest.mark.slow
def test_verified_answer_comes_first_in_order():
    res = runner.invoke(app, ["plan", str(OWNED), "--no-analysis"], env=NARROW)
    assert res.exit_code == 0, res.output
    text = res.stdout
    order = [text.index(s) for s in ("VERIFIED", "decision: rent", "owned L40S:", "confidence: out of sample",
                                     "other strategies cost", "Cauchy plan")]  # fmt: skip
    assert order == sorted(order)
    assert "simulated on the trace: verified on" in text  # the verdict in full, after the tables


def test_auto_weights_are_the_models_own_and_the_opt_in_is_named():
    args = ["plan", "--model", "Llama-3-70B", "--synthetic", "balanced", "--rate", "2", "--gpus", "H100,L40S",
            "--cloud", "aws", "--no-analysis"]  # fmt: skip
    res = runner.invoke(app, cli(args), env=NARROW)
    assert res.exit_code == 0, res.output
    assert "Llama-3-70B (bf16)" in res.stdout and "quality change" not in res.stdout
    assert "weights: bf16, the model's own (weight_dtype auto; auto-quantized also plans fp8" in " ".join(
        res.stdout.split()
    )


def test_the_report_says_which_traffic_the_plan_left_out(long_trace, tmp_path):
    trace, total, refused = long_trace
    plan_file = tmp_path / "plan.json"
    args = ["plan", "--model", "Llama-2-7B", "--workload", str(trace), "--gpus", "L40S", "--cloud", "aws",
            "--weight-dtype", "bf16", "--no-analysis", "--out", str(plan_file)]  # fmt: skip
    assert runner.invoke(app, cli(args), env=NARROW).exit_code == 0
    for fmt in ("term", "md", "html"):
        res = runner.invoke(app, ["report", str(plan_file), "--format", fmt], env=NARROW)
        assert res.exit_code == 0, res.output
        text = " ".join(res.stdout.split())
        assert "traffic left out" in text and f"{refused:,} of {total:,} requests" in text, fmt
