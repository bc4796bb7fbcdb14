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
