"""Regression tests for problems a new-user walk-through of the CLI found (wrong errors, missing warnings, wording)."""

import json

from typer.testing import CliRunner

from hetplan.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, list(map(str, args)), env=ENV)


def test_only_bf16_less_candidates_names_the_dtype_not_the_price():
    res = invoke("plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--goodput", "1", "--gpus", "T4")
    assert res.exit_code == 2
    assert "no bf16 tensor cores" in res.output and "--weight-dtype fp16" in res.output
    assert "no candidate GPU has" not in res.output and "matching price rows" not in res.output


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
        "workload: {synthetic: {class: balanced, rate_per_s: 2}}\nslo: {ttft: 2s, tpot: 100ms, percentile: 90}\n"
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
