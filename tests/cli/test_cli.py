import json

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.helpers import cli, owned_only_scenario

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


@pytest.fixture(scope="module")
def example_a_json():
    from tests.conftest import EXAMPLES

    first = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json")
    second = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json")  # with the analysis block
    assert first.exit_code == 0, first.output
    return first.stdout, second.stdout


@pytest.mark.slow
def test_plan_json_is_byte_identical(example_a_json):
    a, b = example_a_json
    assert a == b


def test_plan_json_fields_and_invariants(example_a_json):
    doc = json.loads(example_a_json[0])
    for key in (
        "status",
        "total_usd_per_hour",
        "goodput_req_per_s",
        "tokens_per_usd",
        "gpus_used",
        "combos",
        "homogeneous_baseline",
    ):
        assert key in doc
    assert doc["status"] == "optimal"
    # whole instances are bought: the total is the purchase (idle GPUs of a bought instance included)
    bought = sum(p["count"] * p["usd_per_hour_each"] for p in doc["purchase"])
    assert doc["total_usd_per_hour"] == pytest.approx(bought, rel=1e-5)
    for gpu, n in doc["gpus_used"].items():
        assert n <= sum(p["count"] * p["gpus_per_instance"] for p in doc["purchase"] if p["gpu"] == gpu)
    assert doc["goodput_req_per_s"] >= doc["scenario"]["demand_req_per_s"]
    for combo in doc["combos"]:
        for key in (
            "prefill_gpu",
            "prefill_tp",
            "n_prefill",
            "decode_gpu",
            "decode_tp",
            "n_decode",
            "count",
            "usd_per_hour",
            "goodput_req_per_s",
        ):
            assert key in combo
        assert combo["predicted_ttft_s"] <= doc["scenario"]["slo"]["ttft_s"]
        assert combo["predicted_tpot_s"] <= doc["scenario"]["slo"]["tpot_s"]
    homo = doc["homogeneous_baseline"]
    assert doc["total_usd_per_hour"] <= homo["total_usd_per_hour"]
    assert len(homo["gpus_used"]) == 1


def test_example_b_respects_inventory(examples):
    res = invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--json", "--no-analysis")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    inv = doc["scenario"]["inventory"]
    assert all(n <= inv[g] for g, n in doc["gpus_used"].items())
    assert any("illustrative" in w for w in doc["warnings"])


def test_plan_table_output(examples):
    # --strategy cauchy: with the refitted model (issue 13) the default plan of example (a) is Mélange's
    res = invoke("plan", examples / "llama3-70b-azure-conv.yaml", "--no-analysis", "--strategy", "cauchy")
    assert res.exit_code == 0, res.output
    assert "Cauchy plan (cheapest mixed prefill/decode deployment)" in res.stdout and "homogeneous" in res.stdout


@pytest.mark.slow
def test_out_never_overwrites_without_force(tmp_path, examples):
    out = tmp_path / "plan.yaml"
    assert invoke("plan", examples / "llama3-70b-azure-conv.yaml", "--out", out, "--no-analysis").exit_code == 0
    first = out.read_text()
    res = invoke("plan", examples / "llama3-70b-azure-conv.yaml", "--out", out, "--goodput", 1, "--no-analysis")
    assert res.exit_code == 2 and "--force" in res.output
    assert out.read_text() == first
    assert (
        invoke("plan", examples / "llama3-70b-azure-conv.yaml", "--out", out, "--force", "--goodput", 1).exit_code == 0
    )
    assert out.read_text() != first


def test_plan_from_flags_with_synthetic_workload():
    res = invoke(
        "plan",
        "--model",
        "Llama-3-8B",
        "--synthetic",
        "balanced",
        "--goodput",
        4,
        "--gpus",
        "H100,L4",
        "--cloud",
        "aws",
        "--ttft",
        "1s",
        "--tpot",
        "50ms",
        "--json",
        "--no-analysis",
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "optimal"


def test_infeasible_inventory_exit_1(examples):
    res = invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--inventory", "H800=2,A800=2,H20=2")
    assert res.exit_code == 1
    assert "Error: inventory cannot meet" in res.output and "To fix:" in res.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (("--gpus", "H10O"), "did you mean"),
        (("--ttft", "fast"), "ttft"),
        (("--percentile", "150"), "percentile"),
        (("--inventory", "H800"), "GPU=COUNT"),
        (("--cloud", "mars"), "unknown cloud"),
        (("--model", "Llama-9"), "unknown model"),
    ],
)
def test_bad_input_exit_2(examples, args, needle):
    res = invoke("plan", examples / "llama3-70b-azure-conv.yaml", *args)
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert "Traceback" not in res.output


def test_estimate_json():
    res = invoke(
        "estimate",
        "--model",
        "Llama-2-70B",
        "--gpu",
        "A100-80GB",
        "--tp",
        4,
        "--batch",
        1,
        "--prompt-tokens",
        512,
        "--context-tokens",
        576,
        "--output-tokens",
        128,
        "--json",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    for key in (
        "prefill_latency_s",
        "decode_step_latency_s",
        "kv_capacity_tokens",
        "max_batch_size",
        "weights_gib_per_gpu",
        "max_output_tokens_per_s",
    ):
        assert key in doc


@pytest.mark.xfail(
    strict=True,
    reason="since the all-reduce tables are read in elements (the fix is right: half and int8 rows of the same "
    "bytes take the same time), Llama-2-70B TP4 prefill of 512 tokens on A100 is predicted 100 ms against the "
    "DGX-A100 file's measured 127 ms (-21 %): the A100 curves leaned on the too-slow all-reduce (issue 30)",
)
def test_estimate_prefill_is_within_15_percent_of_the_measured_dgx_a100():
    res = invoke("estimate", "--model", "Llama-2-70B", "--gpu", "A100-80GB", "--tp", 4, "--batch", 1,
                 "--prompt-tokens", 512, "--context-tokens", 576, "--output-tokens", 128, "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["prefill_latency_s"] == pytest.approx(0.127, rel=0.15)  # measured median 127 ms


def test_estimate_oom_exit_1():
    res = invoke("estimate", "--model", "Llama-3-70B", "--gpu", "L4")
    assert res.exit_code == 1 and "does not fit" in res.output


@pytest.mark.parametrize("what,needle", [("gpus", "H100-SXM"), ("models", "Llama-3-70B"), ("prices", "p5.48xlarge")])
def test_catalog_lists(what, needle):
    res = invoke("catalog", what, "--json")
    assert res.exit_code == 0 and needle in res.stdout


def test_only_used_gpus_are_warned_about(examples):
    doc = json.loads(invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--json", "--no-analysis").stdout)
    used = set(doc["gpus_used"]) | set(doc["homogeneous_baseline"].get("gpus_used", {}))
    warned = {w.split(":")[0] for w in doc["warnings"]}
    assert warned and warned <= used


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (("--tp", "3"), 2, "divides"),
        (("--spot", "--cloud", "lambda"), 2, "spot price"),
        (("--goodput", "inf"), 2, "--goodput"),
        (("--gpus", ""), 2, "empty"),
        (("--ttft", "800"), 2, "no unit"),
        (("--workload", "examples/data/azure_conv_15min.csv"), 2, "both given"),
    ],
)
def test_flag_errors(args, code, needle):
    res = invoke("plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--goodput", 4, *args)
    assert res.exit_code == code, res.output
    assert needle in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (("--batch", "100000000"), 1, "does not fit the KV cache"),
        (("--prompt-tokens", "10000000"), 2, "window"),
        (("--tp", "12"), 2, "TP 12 does not divide"),  # TP 16 spans two nodes and is estimated (issue 30)
    ],
)
def test_estimate_refuses_impossible_points(args, code, needle):
    res = invoke("estimate", "--model", "Llama-3-8B", "--gpu", "H100", *args)
    assert res.exit_code == code, res.output
    assert needle in res.output


def test_plan_source_does_not_depend_on_working_directory(examples, monkeypatch):
    first = invoke("plan", examples / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis").stdout
    monkeypatch.chdir(examples)
    second = invoke("plan", "llama3-70b-azure-conv.yaml", "--json", "--no-analysis").stdout
    assert first == second


def test_plan_records_every_strategy_and_analysis(example_a_json):
    doc = json.loads(example_a_json[0])
    # every strategy but the plan's own is a baseline (example (a)'s plan is Mélange's with the refitted model)
    assert set(doc["baselines"]) == {"cauchy", "homogeneous", "melange", "mixed"} - {doc["strategy"]}
    if doc["strategy"] != "melange":
        assert doc["gain_over_melange"] == pytest.approx(
            1 - doc["total_usd_per_hour"] / doc["baselines"]["melange"]["total_usd_per_hour"], abs=1e-4
        )
    else:
        assert doc["gain_over_melange"] is None
    sens = doc["analysis"]["price_sensitivity"]
    assert {row["gpu"] for row in sens} == set(doc["scenario"]["prices"])
    for row in sens:  # re-optimising can only match or beat keeping the same deployment at the new prices
        assert row["replanned_usd_per_hour"] <= row["plan_usd_per_hour"] + 1e-6
    curve = doc["analysis"]["cost_vs_goodput"]
    costs = [row["cauchy_usd_per_hour"] for row in curve]
    assert costs == sorted(costs)
    at_target = next(row for row in curve if row["goodput_req_per_s"] == doc["scenario"]["goodput_target_req_per_s"])
    assert at_target[f"{doc['strategy']}_usd_per_hour"] == doc["total_usd_per_hour"]


@pytest.mark.parametrize("strategy", ["homogeneous", "melange"])
def test_other_strategies(examples, tmp_path, strategy):
    out = tmp_path / "plan.json"
    # 40 H800: the H800-only fleet needs 36 for example (b)'s bursty trace (32 are not enough)
    res = invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--strategy", strategy, "--no-analysis", "--out", out,
                 "--inventory", "H800=40,A800=32,H20=32")  # fmt: skip
    assert res.exit_code == 0, res.output
    from hetplan.plan.doc import read_plan_doc

    doc = read_plan_doc(out)
    assert doc["strategy"] == strategy and "cauchy" in doc["baselines"]
    melange = doc if strategy == "melange" else doc["baselines"]["melange"]
    assert melange["total_usd_per_hour"] >= melange["lower_bound_usd_per_hour"]  # never below the LP bound
    assert doc["total_usd_per_hour"] >= doc["baselines"]["cauchy"]["total_usd_per_hour"] or strategy == "melange"
    inv = doc["scenario"]["inventory"]
    assert all(n <= inv[g] for g, n in doc["gpus_used"].items())
    # whole instances are bought: the total is the purchase (idle GPUs of a bought instance included)
    bought = sum(p["count"] * p["usd_per_hour_each"] for p in doc["purchase"])
    assert doc["total_usd_per_hour"] == pytest.approx(bought, rel=1e-5)
    for gpu, n in doc["gpus_used"].items():
        assert n <= sum(p["count"] * p["gpus_per_instance"] for p in doc["purchase"] if p["gpu"] == gpu)


def test_plan_emit_writes_all_targets_and_validates(tmp_path, examples):
    out = tmp_path / "deploy"
    res = invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--no-analysis", "--emit", out, "--validate")
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    targets = {entry["target"] for entry in manifest["files"]} if isinstance(manifest, dict) else set()
    assert {"vllm", "kubernetes", "llmd", "dynamo"} <= targets
    assert "all passed" in res.output
    assert invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--validate").exit_code == 2


@pytest.mark.slow
def test_owned_only_plan_renders_and_emits(tmp_path):
    """A plan on owned GPUs only costs $0.00/h: tokens/USD is not defined (null per combo, 0 in the plan file),
    and the terminal tables, --json and emit all finish (this used to print a TypeError after $0.00/h, exit 1)."""
    from rich.console import Console

    from hetplan.cli.render.plan import render_plan
    from hetplan.plan.doc import from_doc

    scenario = owned_only_scenario(tmp_path)
    out = tmp_path / "plan.json"
    res = invoke("plan", scenario, "--out", out)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # rich wraps the table title
    assert "$0.00/h" in text and "tokens/USD not defined at $0/h" in text
    doc = json.loads(out.read_text())
    assert doc["total_usd_per_hour"] == 0.0 and doc["combos"][0]["tokens_per_usd"] is None
    for strategy in ("melange", "homogeneous", "mixed"):  # each strategy's own table at $0.00/h
        res = invoke("plan", scenario, "--strategy", strategy, "--json")
        assert res.exit_code == 0, res.output
        part = json.loads(res.stdout)
        assert part["total_usd_per_hour"] == 0.0
        for width in (60, 80, 140):  # narrow (tok/$ inside the $/h cell) and wide tables
            console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
            render_plan(from_doc(part), console)
            assert "$0.00/h" in console.export_text()
    res = invoke("emit", out, "--target", "all", "--out", tmp_path / "deploy")
    assert res.exit_code == 0, res.output
    assert any((tmp_path / "deploy").rglob("*.sh"))


@pytest.mark.parametrize("gap", ["1e-9", "0.5", "90000"])
def test_load_curve_windows_outside_the_window_bounds_are_refused(tmp_path, gap):
    """A load curve's window is the gap between its rows: one of 1e-9 s was planned and written (a schedule of
    zero-length windows that reports then divided by), while --window refuses anything outside 1 s .. 1 day."""
    curve = tmp_path / "curve.csv"
    curve.write_text(f"0,1,1\n{gap},2,1\n")
    out = tmp_path / "s.json"
    res = invoke("autoscale", owned_only_scenario(tmp_path, rented=True), "--load-curve", curve, "--out", out)
    assert res.exit_code == 2, res.output
    assert "outside 1 s .. 86400 s" in " ".join(res.output.split()) and not out.exists()
