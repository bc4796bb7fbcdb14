"""Error messages, warnings and wording across commands: dtype errors, config-path model names, counts and
percentages, emit summaries, --router-image, KV dtypes."""

import json

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


def test_only_bf16_less_candidates_names_the_dtype_not_the_price():
    res = invoke("plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--goodput", "1", "--gpus", "T4")
    assert res.exit_code == 2
    assert "no bf16 tensor cores" in res.output and "--weight-dtype fp16" in res.output
    assert "no candidate GPU has" not in res.output and "matching price rows" not in res.output


def test_no_rent_without_an_owned_candidate_names_the_inventory_not_the_price():
    """Owned L4s beside candidates H100 and A100 with --no-rent said "no candidate GPU has an on-demand price on
    aws" and advised dropping --spot: the price was never the problem."""
    base = ("plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--goodput", "1", "--gpus", "H100,A100",
            "--cloud", "aws", "--no-rent", "--no-verify", "--no-analysis")  # fmt: skip
    for inventory, holds in (("L4=1", "1 L4"), ("H100=0", "no GPUs")):
        res = invoke(*base, "--inventory", inventory)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        flat = " ".join(res.output.split())
        assert "--no-rent: none of the candidate GPUs (H100-SXM, A100-80GB-SXM) is owned" in flat
        assert f"the inventory holds {holds}" in flat and "price" not in flat


def test_catalog_gpus_marks_fp16_figures():
    res = invoke("catalog", "gpus")
    assert res.exit_code == 0
    t4 = next(line for line in res.stdout.splitlines() if "│ T4 " in line)
    assert "65 (fp16)" in t4
    h100 = next(line for line in res.stdout.splitlines() if "│ H100-SXM " in line)
    assert "(fp16)" not in h100


def test_autoscale_carries_the_plan_gpu_warnings(tmp_path, examples):
    scenario = tmp_path / "a10g.yaml"
    scenario.write_text(
        "schema_version: 1\nkind: scenario\nname: a10g-only\nmodel: Llama-3-8B\n"
        "workload: {synthetic: {class: balanced, rate_per_s: 2}}\nslo: {ttft: 2s, tpot: 100ms, percentile: p90}\n"
        "gpus: [A10G, H100]\ncloud: aws\n"
    )
    out = tmp_path / "schedule.json"
    res = invoke("autoscale", scenario, "--diurnal", "1,4,1", "--out", out)
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    used = {g for g, h in doc["summary"]["gpu_hours"].items() if h}
    assert "A10G" in used
    estimate = [w for w in doc["warnings"] if w.startswith("A10G:") and "estimate" in w]
    assert estimate and estimate[0] in doc["deployment"]["warnings"]
    assert {w.split(":")[0] for w in doc["warnings"] if ":" in w} <= used
    assert "A10G: 70 TFLOPS is an estimate" in " ".join(res.output.split())
    for fmt in ("md", "term", "html"):
        report = invoke("report", out, "--format", fmt)
        assert report.exit_code == 0 and "A10G: 70 TFLOPS is an estimate" in " ".join(report.stdout.split()), fmt


@pytest.mark.slow
def test_plan_and_autoscale_take_router_image(tmp_path, examples):
    scenario = examples / "llama3-70b-azure-conv.yaml"
    image = "registry.example/vllm-router:1.0"
    for name, args in (
        ("plan", ("plan", scenario, "--no-analysis")),
        ("autoscale", ("autoscale", scenario, "--diurnal", "1,4,1")),
    ):
        out = tmp_path / name
        res = invoke(*args, "--emit", out, "--router-image", image)
        assert res.exit_code == 0, res.output
        routers = list((out / "kubernetes").glob("*-u*-router.yaml"))
        assert routers and all(image in p.read_text() for p in routers)
        assert "placeholder" not in res.output
        res = invoke(*args, "--router-image", image)
        assert res.exit_code == 2 and "--emit" in res.output


DENSE_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}


def test_model_from_a_config_path_is_named_by_its_folder(tmp_path):
    from hetplan.catalog import find_model

    folder = tmp_path / "my-llama"
    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps(DENSE_CONFIG))
    assert find_model(str(config)).name == "my-llama"
    assert find_model(str(config)).source == str(config)
    local = tmp_path / "other.json"
    local.write_text(json.dumps(dict(DENSE_CONFIG, _name_or_path="/models/checkpoints/llama-8b-ft/")))
    assert find_model(str(local)).name == "llama-8b-ft"
    repo = tmp_path / "repo.json"
    repo.write_text(json.dumps(dict(DENSE_CONFIG, _name_or_path="meta-llama/Meta-Llama-3-8B")))
    assert find_model(str(repo)).name == "meta-llama/Meta-Llama-3-8B"
    res = invoke(
        "plan",
        "--model",
        config,
        "--synthetic",
        "balanced",
        "--goodput",
        "1",
        "--gpus",
        "L4",
        "--json",
        "--no-analysis",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["scenario"]["model"] == "my-llama" and doc["scenario"]["model_config"] == str(config)
    assert str(tmp_path) not in " ".join(doc["warnings"])


def test_counts_and_percentages_read_well():
    from hetplan.cli.render.format import count_noun
    from hetplan.units import format_signed_percent

    assert [count_noun(n, "object") for n in (0, 1, 2)] == ["no objects", "1 object", "2 objects"]
    assert format_signed_percent(-0.0) == "+0.0 %" and format_signed_percent(-0.0004) == "+0.0 %"
    assert format_signed_percent(-0.657) == "-65.7 %" and format_signed_percent(0.1) == "+10.0 %"


def test_emit_validation_summary_with_no_objects(tmp_path):
    from tests.conftest import ROOT

    res = invoke(
        "emit",
        ROOT / "tests" / "fixtures" / "plan_two_combos.json",
        "--target",
        "vllm",
        "--validate",
        "--out",
        tmp_path / "e",
    )
    assert res.exit_code == 0, res.output
    assert "validated offline: no objects and 6 shell scripts" in res.output and "()" not in res.output


def test_autoscale_on_a_flat_curve_prints_no_negative_zero(tmp_path, examples):
    res = invoke("autoscale", examples / "llama3-70b-azure-conv.yaml", "--diurnal", "1,4,4")
    assert res.exit_code == 0, res.output
    assert "-0.0 %" not in res.output


def test_kv_dtypes_help_planner_and_emit_agree(tmp_path):
    from hetplan.perf.arch import KV_BYTES

    assert set(KV_BYTES) == {"bf16", "fp16", "fp8"}  # what --kv-dtype's help lists
    base = ("plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--goodput", "1", "--gpus", "L4")
    res = invoke(*base, "--kv-dtype", "auto")
    assert res.exit_code == 2 and "supported: bf16, fp16, fp8" in res.output
    for weight, kv in (("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "fp8")):
        plan = tmp_path / f"{weight}-{kv}.json"
        res = invoke(*base, "--weight-dtype", weight, "--kv-dtype", kv, "--no-analysis", "--out", plan)
        assert res.exit_code == 0, res.output
        res = invoke("emit", plan, "--target", "vllm", "--out", tmp_path / f"{weight}-{kv}")
        assert res.exit_code == 0, res.output


def test_tiny_goodput_targets_plan_or_are_refused_never_divide_by_zero():
    """Found by tests/fuzz: --goodput 1e-300 divided by zero; 1e-5 gave a Mélange baseline of zero instances."""
    # --no-verify: replaying 1e-5 req/s (a 2e8-second trace) and its capacity search takes minutes, and the
    # planner's arithmetic is what this checks
    base = ["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--gpus", "H100,A100",
            "--no-analysis", "--no-verify"]  # fmt: skip
    res = runner.invoke(app, [*base, "--goodput", "1e-300"], env=ENV)
    assert res.exit_code == 2 and "goodput_req_per_s (--goodput)" in res.output
    res = runner.invoke(app, [*base, "--goodput", "1e-05", "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # --strategy all may pick Mélange itself
    melange = doc if doc["strategy"] == "melange" else doc["baselines"]["melange"]
    assert melange["total_usd_per_hour"] > 0 and sum(melange["gpus_used"].values()) >= 1


def test_unicode_digits_in_counts_are_refused_with_the_flag():
    """Found by tests/fuzz: '²'.isdigit() is True but int('²') raises."""
    for flag, value in (("--inventory", "H100=²"), ("--tp", "²")):
        res = runner.invoke(app, ["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2",
                                  "--gpus", "H100", flag, value], env=ENV)  # fmt: skip
        assert res.exit_code == 2 and f"Error: {flag}: cannot read" in res.output
