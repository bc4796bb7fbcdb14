"""``hetplan explore``: what-if points planned as ``hetplan plan`` plans them, the price and owned what-ifs, the
simulated check per point, clear errors for bad axes, and output that fits 80 columns."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.cli.render.explore import explore_lines
from hetplan.errors import InputError
from hetplan.explore import parse_axis
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}

SCENARIO = """schema_version: 1
kind: scenario
name: small
model: Llama-3-8B
weight_dtype: bf16
workload:
  path: {trace}
goodput_req_per_s: 2
slo: {{ttft: 2s, tpot: 100ms, percentile: p90}}
gpus: [L4, A10G, L40S]
cloud: aws
tp: [1, 2]
max_ratio: 4
"""


@pytest.fixture
def scenario(tmp_path: Path, fixtures: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SCENARIO.format(trace=fixtures / "azure_conv_200.csv"))
    return path


def invoke(*args: object) -> object:
    return runner.invoke(app, cli(args), env=ENV)


def explore_json(*args: object) -> dict:
    res = invoke("explore", *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def plan_json(*args: object) -> dict:
    res = invoke("plan", *args, "--no-analysis", "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_goodput_points_are_the_plans_plan_makes(scenario):
    first = invoke("explore", scenario, "--vary", "goodput=1x,2x,+150%", "--no-verify", "--json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    rows = doc["points"]
    assert [r["point"] for r in rows] == ["goodput=1x (2 req/s)", "goodput=2x (4 req/s)", "goodput=+150% (5 req/s)"]
    assert [r["goodput_target_req_per_s"] for r in rows] == [2.0, 4.0, 5.0]
    for r in rows:
        planned = plan_json(scenario, "--goodput", r["goodput_target_req_per_s"], "--no-verify")
        assert r["usd_per_hour"] == planned["total_usd_per_hour"]
        assert r["strategy"] == planned["strategy"] and r["check"] == "not run"
        assert r["deployment"]  # one line naming the units
    assert rows[0]["usd_per_hour"] <= rows[1]["usd_per_hour"] <= rows[2]["usd_per_hour"]
    assert doc["check"].startswith("none (--no-verify)")
    # byte-identical output for the same inputs (no timings in the document)
    again = invoke("explore", scenario, "--vary", "goodput=1x,2x,+150%", "--no-verify", "--json")
    assert again.stdout == first.stdout


def test_json_is_the_api_explore(scenario):
    from hetplan import api
    from hetplan.io import to_json
    from hetplan.scenario import load_scenario

    res = invoke("explore", scenario, "--vary", "tpot=50ms,100ms", "--no-verify", "--json")
    assert res.exit_code == 0, res.output
    assert res.stdout == to_json(api.explore(load_scenario(scenario), ["tpot=50ms,100ms"], verify=False))


def test_price_what_if_moves_that_gpus_prices(scenario):
    doc = explore_json(scenario, "--vary", "price:L40S=-60%,+0%,3x", "--vary", "goodput=2x", "--no-verify")
    cheap, same, dear = doc["points"]
    base = plan_json(scenario, "--goodput", 4, "--no-verify")
    assert same["usd_per_hour"] == base["total_usd_per_hour"]
    assert cheap["usd_per_hour"] < same["usd_per_hour"] <= dear["usd_per_hour"]
    assert "L40S" in same["gpus_used"] and "L40S" not in dear["gpus_used"]  # dearer L40S: another plan


def test_owned_what_if_adds_gpus_to_the_inventory(scenario):
    doc = explore_json(scenario, "--vary", "owned:L40S=+0,+8", "--no-verify")
    none, eight = doc["points"]
    assert none["point"] == "owned:L40S=+0 (0)" and eight["point"] == "owned:L40S=+8 (8)"
    assert eight["owned_gpus"]["L40S"]["owned"] == 8
    # owned GPUs without a price file cost $0/GPU-hour: owning 8 more can only make the plan cheaper
    assert eight["usd_per_hour"] <= none["usd_per_hour"]


@pytest.mark.slow
def test_each_point_is_checked_as_plan_no_resize_checks_it(scenario):
    res = invoke("explore", scenario, "--vary", "ttft=1s,5s", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert "explore: point 1 of 2: ttft=1s" in res.stderr  # the progress names the point
    for r in doc["points"]:
        planned = plan_json(scenario, "--ttft", r["values"]["ttft"], "--no-resize", "--confidence", "none")
        assert r["usd_per_hour"] == planned["total_usd_per_hour"]
        held = planned["verification"]["status"] == "verified"
        assert r["check"] == ("held" if held else "missed")
        assert r["attainment"] == planned["verification"]["attainment"]


@pytest.mark.parametrize(
    ("vary", "named"),
    [
        (["speed=1,2"], "unknown axis 'speed'"),
        (["goodput=1x,fast"], "--vary goodput: cannot read 'fast'"),
        (["ttft=5"], "--vary ttft: ttft: '5' has no unit"),
        (["price=-20%"], "--vary price: no GPU named"),
        (["price:H100=-20%"], "--vary price:H100: H100-SXM is not a candidate GPU"),
        (["owned:L4=many"], "--vary owned: cannot read 'many'"),
        (["owned:L4=-3"], "--vary owned:L4=-3: -3 owned"),
        (["goodput=0x"], "--vary goodput: '0x' makes a factor of 0"),
        (["goodput=1x", "ttft=1s", "tpot=50ms"], "--vary given 3 times"),
        (["ttft=1s", "ttft=2s"], "--vary ttft given twice"),
        (["goodput=1x,1x"], "1x given twice"),
        ([], "explore needs an axis"),
    ],
)
def test_bad_axes_are_refused_naming_the_field(scenario, vary, named):
    args = [a for v in vary for a in ("--vary", v)]
    res = invoke("explore", scenario, *args, "--no-verify")
    assert res.exit_code == 2, res.output
    assert "Error" in res.output and named in res.output
    assert "Traceback" not in res.output


def test_axis_values_are_read_as_written():
    assert [(v.kind, v.number) for v in parse_axis("goodput=1.5x,+50%,-50%,7.5").values] == [
        ("factor", 1.5), ("factor", 1.5), ("factor", 0.5), ("absolute", 7.5),
    ]  # fmt: skip
    assert [v.number for v in parse_axis("price:L40S=-20%,0.8x").values] == pytest.approx([0.8, 0.8])
    assert [(v.kind, v.number) for v in parse_axis("owned:L40S=+4,12").values] == [("delta", 4), ("absolute", 12)]
    assert [v.number for v in parse_axis("tpot=50ms,0.1s").values] == pytest.approx([0.05, 0.1])


def test_goodput_in_scientific_notation_is_read_and_an_infinite_one_refused():
    """'goodput=1e9' said "cannot read '1e9'" (a number, and the user's own way of writing it): it is read, and the
    field's bound refuses it at planning; '1e400' (infinite) is refused here."""
    assert [v.number for v in parse_axis("goodput=2e4,1.5E1").values] == pytest.approx([2e4, 15.0])
    with pytest.raises(InputError, match="'1e400' is not a positive finite number"):
        parse_axis("goodput=1e400")


def test_the_curve_fits_80_columns_and_keeps_every_number():
    row = {
        "point": "goodput=1.5x (7.5 req/s), price:A100-80GB=-20%", "values": {}, "status": "ok",
        "strategy": "cauchy", "usd_per_hour": 12345.678, "usd_per_month": 9012345.6, "check": "held",
        "attainment": 0.94104, "deployment": "; ".join(["1x [5x A100-80GB-SXM TP2 -> 1x A100-80GB-SXM TP4]"] * 3),
    }  # fmt: skip
    failed = {"point": "goodput=3x (15 req/s)", "values": {}, "status": "infeasible", "check": "not run",
              "error": "inventory cannot meet the goodput target " * 3}  # fmt: skip
    doc = {"scenario": "s", "axes": [{"axis": "goodput", "values": ["1.5x", "3x"]}], "strategy": "all",
           "base_goodput_target_req_per_s": 5.0, "check": "x " * 80, "points": [row, failed],
           "counts": {"ok": 1, "infeasible": 1, "error": 0}, "cheapest": row["point"],
           "cheapest_held": row["point"]}  # fmt: skip
    lines = explore_lines(doc, 80)
    assert max(map(len, lines)) <= 80
    text = "\n".join(lines)
    assert "12,345.68" in text and "9,012,346" in text and "94.1%" in text and "infeasible" in text


def test_short_labels_sit_beside_their_figures():
    row = {"point": "ttft=1s", "values": {}, "status": "ok", "strategy": "melange", "usd_per_hour": 71.1,
           "usd_per_month": 51901.0, "check": "held", "attainment": 0.9, "deployment": "2x L40S TP4"}  # fmt: skip
    doc = {"scenario": "s", "axes": [{"axis": "ttft", "values": ["1s"]}], "strategy": "all",
           "base_goodput_target_req_per_s": 5.0, "check": "c", "points": [row],
           "counts": {"ok": 1, "infeasible": 0, "error": 0}, "cheapest": "ttft=1s", "cheapest_held": None}  # fmt: skip
    lines = explore_lines(doc, 80)
    assert any(line.startswith("ttft=1s") and "71.10" in line and "held" in line for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bf16", "auto"])
def test_price_factors_move_the_plans_prices(scenario, dtype):
    """``price:GPU`` reaches the plan through ``price_factors``, on the dtype search's path too."""
    from hetplan import api
    from hetplan.resources import Resources
    from hetplan.scenario import load_scenario

    sc = load_scenario(scenario).model_copy(update={"weight_dtype": dtype})
    base = api.to_doc(api.plan(sc, "all", False, resources=Resources(plan_workers=1)))
    moved = api.to_doc(api.plan(sc, "all", False, resources=Resources(plan_workers=1), price_factors={"L40S": 0.5}))
    was, now = base["scenario"]["prices"]["L40S"], moved["scenario"]["prices"]["L40S"]
    assert now["usd_per_gpu_hour"] == pytest.approx(was["usd_per_gpu_hour"] * 0.5)
    assert now["source"] == f"{was['source']}, x0.5 (what-if)"
    assert moved["scenario"]["prices"]["L4"] == base["scenario"]["prices"]["L4"]
    assert moved["total_usd_per_hour"] < base["total_usd_per_hour"]  # the base plan buys L40S (test above)
