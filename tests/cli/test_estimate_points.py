"""``hetplan estimate --engine/--concurrency`` and ``--points``: good rows, bad rows, bad files (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}


def invoke(*args: str | Path):  # type: ignore[no-untyped-def]
    return runner.invoke(app, cli(args), env=ENV)


def test_closed_loop_json_fields() -> None:
    res = invoke("estimate", "--engine", "sglang", "--model", "Llama-3.1-70B", "--gpu", "H200-SXM", "--tp", "4",
                 "--weight-dtype", "fp8", "--concurrency", "16", "--isl", "1024", "--osl", "512", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    for key in ("ttft_s", "tpot_s", "itl_s", "output_tokens_per_s", "requests_per_s", "kv_capacity_tokens", "fits"):
        assert key in doc
    assert doc["engine"] == "sglang" and doc["fits"] is True
    assert doc["output_tokens_per_s"] == doc["requests_per_s"] * 512


def test_per_iteration_estimate_still_works_and_records_the_engine() -> None:
    res = invoke("estimate", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--engine", "trtllm", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["engine"] == "trtllm" and doc["decode_step_latency_s"] > 0


def test_closed_loop_needs_isl_and_osl() -> None:
    res = invoke("estimate", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--concurrency", "4")
    assert res.exit_code == 2
    assert "--isl" in res.output and "Traceback" not in res.output


def test_points_rows_in_order_with_row_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text(
        "engine,model,gpu,tp,concurrency,isl,osl\n"
        "vllm,Llama-3.1-8B,H100-SXM,1,8,1024,128\n"
        "vllm,No-Such-Model,H100-SXM,1,8,1024,128\n"
        ",Llama-3.1-8B,H100-SXM,,nan,1024,128\n"
        "trtllm,Llama-3.1-8B,H100-SXM,1,8,-5,128\n"
        "tgi,Llama-3.1-8B,H100-SXM,1,8,1024,128\n"
        "sglang,Llama-3.1-8B,H100-SXM,,4,1024,128\n"
    )
    res = invoke("estimate", "--points", f, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [r["row"] for r in doc] == [1, 2, 3, 4, 5, 6]
    assert "ttft_s" in doc[0] and "ttft_s" in doc[5]
    assert "unknown model" in doc[1]["error"]
    assert "concurrency" in doc[2]["error"]
    assert "isl" in doc[3]["error"]
    assert "unknown engine" in doc[4]["error"]
    assert doc[5]["engine"] == "sglang" and doc[5]["tp"] == 1  # blanks take defaults


def test_points_missing_column_exits_2_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("model,gpu,concurrency,isl\nLlama-3.1-8B,H100-SXM,8,1024\n")
    res = invoke("estimate", "--points", f, "--json")
    assert res.exit_code == 2
    assert "osl" in res.output and "Traceback" not in res.output


def test_points_unknown_column_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("model,gpu,concurrency,isl,osl,batchsize\nLlama-3.1-8B,H100-SXM,8,1024,12,3\n")
    res = invoke("estimate", "--points", f)
    assert res.exit_code == 2 and "batchsize" in res.output
    res = invoke("estimate", "--points", tmp_path / "nope.csv")
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_points_table_output(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("model,gpu,concurrency,isl,osl\nLlama-3.1-8B,H100-SXM,8,1024,128\nLlama-3.1-8B,H100-SXM,0,1,1\n")
    res = invoke("estimate", "--points", f)
    assert res.exit_code == 0, res.output
    assert "error" in res.output and "TTFT" in res.output


@pytest.mark.slow
def test_emit_refuses_a_plan_for_another_engine(tmp_path: Path) -> None:
    from tests.conftest import EXAMPLES

    plan = tmp_path / "plan.json"
    res = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--engine", "sglang", "--no-verify", "--out", plan)
    assert res.exit_code == 0, res.output
    doc = json.loads(plan.read_text())
    assert doc["scenario"]["perf_settings"]["engine"] == "sglang"
    res = invoke("emit", plan, "--out", tmp_path / "deploy", "--validate")
    assert res.exit_code == 0, res.output  # issue 33: emit deploys the plan's engine
    assert (tmp_path / "deploy" / "sglang" / "README.md").is_file() and not (tmp_path / "deploy" / "vllm").exists()


def test_simulate_engine_override_changes_the_replay() -> None:
    from tests.conftest import FIXTURES

    args = ("simulate", FIXTURES / "plan_example_a.json", "--concurrency", "4", "--isl", "256", "--osl", "16",
            "--requests", "8", "--json")  # fmt: skip
    vllm, sglang = invoke(*args), invoke(*args, "--engine", "sglang")
    assert vllm.exit_code == 0 and sglang.exit_code == 0, vllm.output + sglang.output
    assert json.loads(vllm.stdout)["tpot_s"]["mean"] != json.loads(sglang.stdout)["tpot_s"]["mean"]
    bad = invoke(*args, "--engine", "tgi")
    assert bad.exit_code == 2 and "unknown engine" in bad.output
