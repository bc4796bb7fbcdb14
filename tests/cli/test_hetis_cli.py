"""``hetplan plan --strategy hetis --pool``: output, determinism, and clear refusals."""

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POOL = EXAMPLES / "hetis" / "pool.yaml"


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


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


@pytest.mark.slow
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


def _finite_numbers(value):
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite_numbers(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def test_fp8_json_is_valid_and_baselines_are_consistent(tmp_path):
    out = tmp_path / "fp8.json"
    scenario = EXAMPLES / "hetis" / "llama2-13b.yaml"
    r = invoke("plan", scenario, "--strategy", "hetis", "--pool", POOL, "--weight-dtype", "fp8", "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON document"))
    assert _finite_numbers(doc)
    sw = doc["baselines"]["splitwise"]
    assert sw["status"] == "solved" and sw["tpot_s"] <= 0.1 and "P100-PCIe" not in sw["gpus_used"]
    ratio = doc["throughput_ratio_over"]["splitwise"]
    assert ratio == pytest.approx(doc["predicted"]["req_per_s"] / sw["req_per_s"], rel=1e-3)
    p100 = [d for d in doc["pool"]["devices"] if d["gpu"] == "P100-PCIe"]
    assert all(d["role"] != "primary" and "no fp8 support" in d["reason"] for d in p100)
    assert doc["layout"]["dp"] == len(doc["layout"]["replicas"]) == len(doc["head_split"])
    assert all(part["status"] != "infeasible" for part in doc["head_split"])


@pytest.mark.slow
def test_idle_workers_are_unused_and_estimates_and_ignored_flags_warn(tmp_path):
    slow = tmp_path / "slowlink.yaml"
    slow.write_text(
        POOL.read_text().replace(
            "bandwidth_gb_per_s: 6, latency_us: 50", "bandwidth_gb_per_s: 0.001, latency_us: 100000"
        )
    )
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", slow, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    p100 = [d for d in doc["pool"]["devices"] if d["gpu"] == "P100-PCIe"]
    assert p100 and all(d["role"] == "unused" and "holds no KV head" in d["reason"] for d in p100)
    a10g = tmp_path / "a10g.yaml"
    a10g.write_text("kind: pool\nnodes:\n  - {name: n, domains: [{gpus: [{type: A10G, count: 4}]}]}\n")
    args = ("--synthetic", "balanced", "--rate", "2", "--tp", "1,2", "--max-ratio", "2", "--headroom", "0.3")
    r = invoke("plan", "--model", "Llama-3-8B", *args, "--strategy", "hetis", "--pool", a10g, "--json")
    assert r.exit_code == 0, r.output
    warnings = json.loads(r.stdout)["warnings"]
    assert any("A10G: 70 TFLOPS is an estimate" in w for w in warnings)
    assert any(w.startswith("--tp, --max-ratio, --headroom ignored") for w in warnings)


def test_small_outputs_and_refusals(tmp_path):
    one = tmp_path / "one.yaml"
    one.write_text("kind: pool\nnodes:\n  - {name: n, domains: [{gpus: [{type: A100-40GB-PCIe, count: 1}]}]}\n")
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", one)
    assert r.exit_code == 0, r.output
    assert "(1 layout considered)" in r.output and "0 (1 rep.)" in r.output  # an empty class shows its placement
    assert "1.00x" in r.output  # HexGen-style is the same single-GPU layout: same score
    r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", POOL, "--ttft", "1ms")
    assert r.exit_code == 1 and "replica 0: p90 TTFT" in r.output and "DP1 x PP1 x TP1 (replica 0:" in r.output
    for wrong, kind in (
        (EXAMPLES / "hetis" / "opt-30b.yaml", "scenario"),
        (tmp_path / "spec.json", "hetis-deployment"),
    ):
        if kind == "hetis-deployment":
            invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", one, "--out", wrong)
        r = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", wrong)
        assert r.exit_code == 2 and f"is a {kind}" in r.output and "not a pool" in r.output


def _priced_pool(tmp_path: Path, prices: dict[str, float]) -> Path:
    """The example pool with an owned-GPU price table (issue 15: Hetis priced like the other strategies)."""
    import yaml

    doc = yaml.safe_load(POOL.read_text())
    doc["usd_per_gpu_hour"] = prices
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_hetis_plan_is_priced_at_the_owned_pools_amortised_price(tmp_path):
    pool = _priced_pool(tmp_path, {"A100-40GB-PCIe": 1.0, "RTX-3090": 0.25, "P100-PCIe": 0.0})
    res = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", pool, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["total_usd_per_hour"] == pytest.approx(4 * 1.0 + 4 * 0.25 + 4 * 0.0)
    assert doc["usd_per_month"] == pytest.approx(doc["total_usd_per_hour"] * 730)
    mean = doc["scenario"]["workload"]
    tokens = mean["prompt_tokens_mean"] + mean["output_tokens_mean"]
    want = 3600 * doc["predicted"]["req_per_s"] * tokens / doc["total_usd_per_hour"]
    assert doc["tokens_per_usd"] == pytest.approx(want, rel=1e-4)
    assert doc["prices"]["P100-PCIe"] == {"usd_per_gpu_hour": 0.0, "source": "pool file: owned, amortised"}
    table = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", pool)
    assert "cost: $5.00/h for the whole pool" in table.output


@pytest.mark.slow
def test_hetis_below_the_goodput_target_exits_1_naming_the_binding_constraint(tmp_path):
    pool = _priced_pool(tmp_path, {"A100-40GB-PCIe": 1.0, "RTX-3090": 0.25, "P100-PCIe": 0.0})
    args = ("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", pool)
    ok = json.loads(invoke(*args, "--json").stdout)
    capacity = ok["predicted"]["req_per_s"]
    res = invoke(*args, "--goodput", str(round(capacity * 2, 2)))
    assert res.exit_code == 1, res.output
    assert "below the goodput target" in res.output and "binding: replica 0:" in res.output
    assert "Traceback" not in res.output
    assert invoke(*args, "--goodput", str(round(capacity * 0.5, 2))).exit_code == 0


def test_pool_prices_must_name_the_pools_gpus(tmp_path):
    res = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool",
                 _priced_pool(tmp_path, {"H100": 2.0}))  # fmt: skip
    assert res.exit_code == 2 and "usd_per_gpu_hour prices H100-SXM, which the pool does not hold" in res.output


def test_an_owned_pools_purchase_lines_add_up_to_its_total(tmp_path):
    """Issue 14: an owned pool (every type priced by the pool file) lists its nodes as owned purchase lines."""
    pool = _priced_pool(tmp_path, {"A100-40GB-PCIe": 1.0, "RTX-3090": 0.25, "P100-PCIe": 0.0})
    res = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", pool, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    lines = doc["purchase"]
    assert lines and all(p["owned"] for p in lines)
    assert sum(p["count"] * p["usd_per_hour_each"] for p in lines) == pytest.approx(doc["total_usd_per_hour"])
    assert sum(p["count"] * p["gpus_per_instance"] for p in lines) == sum(doc["pool"]["gpus"].values())
    unused = sum(1 for d in doc["pool"]["devices"] if d["role"] == "unused")
    assert sum(p["gpus_used"] for p in lines) == len(doc["pool"]["devices"]) - unused
    # priced from the catalog: no purchase lines (a pool node is not an instance type)
    plain = invoke("plan", EXAMPLES / "hetis" / "llama2-13b.yaml", "--strategy", "hetis", "--pool", POOL, "--json")
    assert plain.exit_code == 0, plain.output
    assert "purchase" not in json.loads(plain.stdout)
