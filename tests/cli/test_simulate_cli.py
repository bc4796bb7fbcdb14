"""CLI tests of ``hetplan simulate`` and ``hetplan calibrate``: clean --json stdout, exit codes, outputs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.conftest import FIXTURES

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
PLAN = FIXTURES / "plan_example_a.json"
TRACE = FIXTURES / "azure_conv_200.csv"


def invoke(*args):
    return runner.invoke(app, list(map(str, args)), env=ENV)


def test_simulate_table():
    r = invoke("simulate", PLAN, "--trace", TRACE, "--policy", "cascade", "--rate-scale", "2")
    assert r.exit_code == 0, r.output
    for text in ("goodput", "SLO attainment joint", "TTFT", "TPOT", "ITL", "E2E", "per class", "azure_conv_200"):
        assert text in r.stdout


def test_simulate_json_is_clean_and_deterministic():
    a = invoke("simulate", PLAN, "--trace", TRACE, "--json", "--rate-scale", "3", "--policy", "edf")
    b = invoke("simulate", PLAN, "--trace", TRACE, "--json", "--rate-scale", "3", "--policy", "edf")
    assert a.exit_code == 0, a.output
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)  # stdout holds the JSON document and nothing else
    assert doc["kind"] == "simulation" and doc["policy"] == "edf" and doc["requests"] == 200
    assert 0 <= doc["attainment"]["joint"] <= 1


def test_simulate_mixed_classes_with_their_own_slos():
    r = invoke(
        "simulate", PLAN, "--trace", TRACE, "--trace", FIXTURES / "mooncake_300.jsonl", "--slo",
        "mooncake_300=4s,150ms", "--json", "--max-requests", "300",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    classes = {c["class"]: c for c in doc["classes"]}
    assert set(classes) == {"azure_conv_200", "mooncake_300"}
    assert classes["mooncake_300"]["ttft_slo_s"] == 4.0 and classes["azure_conv_200"]["ttft_slo_s"] == 2.0
    assert doc["jain_index"] is None or 0.5 <= doc["jain_index"] <= 1


def test_find_capacity_json():
    r = invoke("simulate", PLAN, "--trace", TRACE, "--find-capacity", "--target", "90", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "capacity" and doc["target"] == 0.9 and doc["rate_scale"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--trace", "missing.csv"), "does not exist"),
        (("--trace", TRACE, "--policy", "lifo"), "unknown policy"),
        (("--trace", TRACE, "--rate-scale", "-1"), "rate-scale"),
        (("--trace", TRACE, "--router", "hash"), "unknown router"),
        (("--trace", TRACE, "--slo", "nope=1s"), "unknown request classes"),
        (("--trace", TRACE, "--slo", "azure_conv_200=800"), "has no unit"),
        (("--trace", TRACE, "--q2", "2"), "q2"),
        (("--trace", TRACE, "--find-capacity", "--target", "150"), "--target"),
        ((), "no trace given"),
    ],
)
def test_simulate_bad_input_exits_2_without_traceback(args, message):
    r = invoke("simulate", PLAN, *args)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_simulate_rejects_a_file_that_is_not_a_plan():
    r = invoke("simulate", TRACE, "--trace", TRACE)
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_calibrate_writes_plan_and_router_config(tmp_path):
    out, router = tmp_path / "plan-cascade.json", tmp_path / "router.yaml"
    r = invoke("calibrate", PLAN, "--trace", TRACE, "--rate-scale", "2", "--out", out, "--router-config", router)
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())
    block = plan["cascade"]
    assert block["coverage"] >= block["quantile"] == 0.95
    assert "kappa" in router.read_text() and "groups" in router.read_text()
    again = invoke("calibrate", PLAN, "--trace", TRACE, "--out", out)
    assert again.exit_code == 2 and "--force" in again.output
    sim = invoke("simulate", out, "--trace", TRACE, "--policy", "cascade", "--json")
    assert json.loads(sim.stdout)["cascade"] == {"kappa": block["kappa"], "q2": block["q2"]}


def test_plan_verify_records_the_simulation():
    from tests.conftest import EXAMPLES

    r = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--no-analysis", "--verify", "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)["verification"]
    assert v["requests"] == 4424 and v["policy"] == "fcfs"
    assert 0 <= v["attainment"]["joint"] <= 1 and isinstance(v["misses"], list)
    assert "verify: simulated 4424 requests" in r.stderr


def test_simulate_out_is_written_once_without_force(tmp_path):
    out = tmp_path / "metrics.yaml"
    r = invoke("simulate", PLAN, "--trace", TRACE, "--out", out)
    assert r.exit_code == 0, r.output
    assert "goodput_req_per_s:" in out.read_text()
    again = invoke("simulate", PLAN, "--trace", TRACE, "--out", out)
    assert again.exit_code == 2 and "--force" in again.output
    assert invoke("simulate", PLAN, "--trace", TRACE, "--out", out, "--force").exit_code == 0
