"""``hetplan plan --strategy hetis --pool``: output, determinism, and clear refusals."""

import json
from pathlib import Path

from typer.testing import CliRunner

from hetplan.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POOL = EXAMPLES / "hetis" / "pool.yaml"


def invoke(*args):
    return runner.invoke(app, list(map(str, args)), env=ENV)


def test_hetis_json_is_deterministic_and_complete(tmp_path):
    args = ("plan", EXAMPLES / "hetis" / "opt-30b.yaml", "--strategy", "hetis", "--pool", POOL, "--json")
    first, second = invoke(*args), invoke(*args)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    assert doc["kind"] == "hetis-deployment" and "No serving engine runs Hetis" in doc["engine_note"]
    roles = {d["name"]: d["role"] for d in doc["pool"]["devices"]}
    assert len(roles) == 12 and not any(
        d["role"] == "primary" for d in doc["pool"]["devices"] if d["gpu"] == "P100-PCIe"
    )
    for part in doc["head_split"]:
        for c in part["classes"]:
            if c["requests"]:
                assert sum(c["kv_heads"].values()) == 56  # OPT-30B: 56 KV heads, all placed
    assert set(doc["baselines"]) == {"splitwise", "hexgen"}
    assert doc["predicted"]["tpot_s"] <= 0.1 and doc["predicted"]["req_per_s"] > 0


def test_hetis_tables_and_out_file_refused_by_emit_and_report(tmp_path):
    out = tmp_path / "hetis.json"
    res = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", POOL, "--out", out)
    assert res.exit_code == 0, res.output
    for text in ("Roles per device", "KV heads per request", "splitwise-style", "hexgen-style", "No serving engine"):
        assert text in res.output
    assert json.loads(out.read_text())["strategy"] == "hetis"
    again = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", POOL, "--out", out)
    assert again.exit_code == 2  # no overwrite without --force
    for cmd in (("emit", out, "--out", tmp_path / "deploy"), ("report", out)):
        r = invoke(*cmd)
        assert r.exit_code == 2 and "Hetis deployment spec" in r.output and "Traceback" not in r.output


def test_hetis_flag_errors():
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis")
    assert r.exit_code == 2 and "--pool" in r.output
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--pool", POOL)
    assert r.exit_code == 2 and "--strategy hetis" in r.output
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", EXAMPLES / "nope.yaml")
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_hetis_infeasible_slo_names_the_bound():
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", POOL, "--ttft", "50ms")
    assert r.exit_code == 1 and "TTFT" in r.output and "Traceback" not in r.output
