"""Grid files: expansion into cases, case ids and inputs hashes, and bad grids refused with exit 2 naming the axis."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.errors import InputError
from hetplan.sweep.grid import expand
from hetplan.sweep.report import pareto_front
from hetplan.sweep.table import SweepRow
from tests.conftest import EXAMPLES
from tests.sweep.helpers import write_grid

BASE = "schema_version: 1\nkind: sweep\nbase: scenario.yaml\n"


def test_the_fleet_review_grid_expands_to_24_cases_in_order():
    grid = expand(EXAMPLES / "sweeps" / "fleet-review.yaml")
    assert len(grid.cases) == 24
    assert [c.id for c in grid.cases] == sorted(c.id for c in grid.cases)
    assert grid.axes == ("scenarios", "gpu_sets", "goodputs", "slos", "clouds")
    first = grid.cases[0]
    assert first.axes == (
        ("scenarios", "llama3-70b-azure-conv"), ("gpu_sets", "H100+A100-80GB+L4"), ("goodputs", "3"),
        ("slos", "standard"), ("clouds", "aws"),
    )  # fmt: skip
    assert first.scenario["gpus"] == ["H100", "A100-80GB", "L4"] and first.scenario["cloud"] == "aws"
    assert all(c.verify for c in grid.cases), "both scenarios replay a trace: every case is simulated"
    assert grid.group_by == ("scenarios", "goodputs", "slos") and grid.pareto_by == ("scenarios",)
    # the other scenario keeps its own inventory and price file (which wins over the cloud for its GPUs)
    b = grid.cases[12]
    assert b.axes[0] == ("scenarios", "cauchy-h800-a800-h20") and b.scenario["inventory"] == {"H800": 32, "A800": 32,
                                                                                              "H20": 32}  # fmt: skip
    assert len({c.inputs_sha256 for c in grid.cases}) == 24


def test_inputs_hash_is_stable_and_follows_file_contents(tmp_path, small):
    path = write_grid(tmp_path)
    a, b = expand(path, small), expand(path, small)
    assert [c.inputs_sha256 for c in a.cases] == [c.inputs_sha256 for c in b.cases]
    prices = tmp_path / "prices.yaml"
    prices.write_text("schema_version: 1\nkind: prices\nsource: test\nas_of: '2026-01-01'\n"
                      "usd_per_gpu_hour: {H100: 2.0}\n", encoding="utf-8")  # fmt: skip
    grid = BASE + "axes:\n  prices: [prices.yaml]\n"
    (tmp_path / "g2.yaml").write_text(grid, encoding="utf-8")
    before = expand(tmp_path / "g2.yaml", small).cases[0].inputs_sha256
    prices.write_text(prices.read_text().replace("2.0", "2.5"), encoding="utf-8")
    assert expand(tmp_path / "g2.yaml", small).cases[0].inputs_sha256 != before, "a changed price file is a new input"


def test_explicit_cases_alone_and_engines_vllm_are_accepted(tmp_path, small):
    write_grid(tmp_path)
    grid = BASE + "cases:\n  - {goodputs: 1, engines: vllm}\n  - {goodputs: 2, strategies: melange}\n"
    (tmp_path / "g.yaml").write_text(grid, encoding="utf-8")
    cases = expand(tmp_path / "g.yaml", small).cases
    assert [(c.strategy, c.engine, c.scenario["goodput_req_per_s"]) for c in cases] == [
        ("cauchy", "vllm", 1.0), ("melange", "vllm", 2.0)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "body, message",
    [
        ("axes:\n  goodput: [1, 2]\n", "unknown axis 'goodput' (axes); did you mean 'goodputs'?"),
        ("axes:\n  purchases: [a]\n", "axis 'purchases' (axes) is not supported"),
        ("axes:\n  regions: [us-west-2, mars-1]\n", "axis 'regions': unknown region 'mars-1' for aws in case-001"),
        ("axes:\n  goodputs: [1]\n  clouds: []\n", "empty product: axis 'clouds' has no values"),
        ("cases: []\n", "empty product: 'cases' is an empty list"),
        ("description: nothing\n", "the grid has no axes and no cases"),
        ("axes:\n  slos: [{ttft: 1s}]\n  ttfts: [2s]\n", "axes 'slos' and 'ttfts' conflict"),
        ("axes:\n  workloads: [a.csv]\n  traces: [b.csv]\n", "axes 'workloads' and 'traces' conflict"),
        ("axes:\n  goodputs: [1]\ncases:\n  - {goodputs: 2}\n", "axes 'goodputs' conflict: cases[0] sets"),
        ("axes:\n  scenarios: [scenario.yaml]\n", "axes 'scenarios' conflicts with 'base'"),
        ("strategy: melange\naxes:\n  strategies: [cauchy]\n", "axes 'strategies' conflict with the top-level"),
        ("axes:\n  goodputs: [1, -1]\n", "axis 'goodputs': invalid value in case-001 (goodputs=-1)"),
        ("axes:\n  clouds: [aws, oracle]\n", "axis 'clouds': unknown cloud 'oracle'"),
        ("axes:\n  engines: [vllm, sglang]\n", "axis 'engines' in case-001 (engines=sglang): engine 'sglang'"),
        ("axes:\n  strategies: [hetis]\n", "axis 'strategies' in case-000 (strategies=hetis): unknown strategy"),
        ("axes:\n  policies: [lifo]\n", "axis 'policies' in case-000 (policies=lifo): unknown policy"),
        ("axes:\n  dtypes: [fp7]\n", "axis 'dtypes': weight dtype 'fp7' is not supported"),
        ("axes:\n  ttfts: [fast]\n", "axis 'ttfts': ttft: cannot read 'fast'"),
        ("axes:\n  traces: [missing.csv]\n", "axis 'traces':"),
        ("axes:\n  goodputs: 3\n", "axis 'goodputs' must be a list of values"),
        ("axes:\n  goodputs: [1]\ngroup_by: [clouds]\n", "group_by: 'clouds' is not an axis of this grid"),
        ("bse: x\naxes:\n  goodputs: [1]\n", "bse: Extra inputs are not permitted"),
    ],
)
def test_bad_grids_are_refused_naming_the_axis(tmp_path, small, body, message):
    write_grid(tmp_path)
    (tmp_path / "bad.yaml").write_text(BASE + body, encoding="utf-8")
    with pytest.raises(InputError) as err:
        expand(tmp_path / "bad.yaml", small)
    assert message in (err.value.what + " " + err.value.why), err.value.render()


def test_a_bad_grid_exits_2_with_an_error_line_and_writes_nothing(tmp_path, small_catalog):
    write_grid(tmp_path)
    (tmp_path / "bad.yaml").write_text(BASE + "axes:\n  goodput: [1]\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["sweep", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert r.output.startswith("Error: unknown axis 'goodput'") and "Traceback" not in r.output
    assert not (tmp_path / "out").exists()


_INPUTS = {"axes": "", "scenario": "s", "model": "m", "workload": "w", "slo_tier": "", "gpus": "", "inventory": "",
           "cloud": "aws", "prices": "", "spot": False, "strategy": "cauchy", "engine": "vllm", "weight_dtype": "bf16",
           "kv_dtype": "bf16", "headroom": 0.1, "policy": "fcfs", "verify": False, "status": "ok",
           "inputs_sha256": ""}  # fmt: skip


def _row(case_id, cost, goodput, ttft, tpot=0.1, pct=90.0):
    return SweepRow(**_INPUTS, case_id=case_id, usd_per_hour=cost, goodput_target_req_per_s=goodput, slo_ttft_s=ttft,
                    slo_tpot_s=tpot, slo_percentile=pct, goodput_capacity_req_per_s=goodput)  # fmt: skip


def test_pareto_front_keeps_the_plans_no_other_plan_beats():
    rows = [
        _row("a", 10, 3, 2.0),  # cheapest at 3 req/s, loose SLO
        _row("b", 12, 3, 1.0),  # dearer, but a tighter SLO: on the front
        _row("c", 13, 3, 2.0),  # dearer than a for the same: dominated
        _row("d", 12, 5, 2.0),  # more goodput for 12: dominates c, not b (looser SLO)
        _row("e", 12, 5, 2.0),  # equal to d: neither dominates the other
    ]
    assert [r.case_id for r in pareto_front(rows)] == ["a", "b", "d", "e"]


def test_a_row_at_zero_cost_has_no_tokens_per_usd(tmp_path, small_catalog):
    """A case planned on owned GPUs without a price costs $0/h; its plan file writes tokens_per_usd 0 (not
    defined), which the row showed as 0 tokens per dollar."""
    import json

    from hetplan.sweep.table import build_row
    from tests.conftest import FIXTURES

    case = expand(write_grid(tmp_path)).cases[0]
    doc = json.loads((FIXTURES / "plan_two_combos.json").read_text())
    assert build_row(case, "ok", doc, None).tokens_per_usd == doc["tokens_per_usd"] > 0
    doc.update(total_usd_per_hour=0.0, usd_per_month=0.0, tokens_per_usd=0.0)
    row = build_row(case, "ok", doc, None)
    assert row.usd_per_hour == 0.0 and row.tokens_per_usd is None
