"""``hetplan estimate --gpus N``: the search of a GPU budget (issue 31 item 4): aggregated and disaggregated layouts,
the Pareto front of tokens/s/GPU against tokens/s/user, the best layout under the SLO, ``--json``, 80 columns."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.perf.points import estimate_points
from hetplan.perf.search import BudgetPoint, best_under_slo, candidate_layouts, pareto_front, search_budget
from tests.helpers import cli

runner = CliRunner()
ACCEPTANCE = ("estimate", "--model", "Llama-3.1-70B", "--gpu", "H100", "--engine", "vllm", "--gpus", "8",
              "--isl", "2048", "--osl", "512")  # fmt: skip


def _point(user: float, gpu: float, ttft: float = 0.5, tpot: float = 0.02, layout: str = "x") -> BudgetPoint:
    return BudgetPoint("agg", layout, 8, 1.0, gpu, user, ttft, tpot, 1.0)


def test_pareto_front_drops_points_beaten_on_both_axes() -> None:
    pts = [_point(80, 10, layout="a"), _point(60, 100, layout="b"), _point(50, 90, layout="c"),
           _point(20, 400, layout="d"), _point(20, 300, layout="e")]  # fmt: skip
    assert [p.layout for p in pareto_front(pts)] == ["a", "b", "d"]


def test_best_under_slo_is_the_highest_throughput_that_meets_it() -> None:
    pts = [_point(80, 10, tpot=0.0125, layout="fast"), _point(15, 480, ttft=1.2, tpot=0.065, layout="dense"),
           _point(10, 600, ttft=3.0, tpot=0.1, layout="late")]  # fmt: skip
    best = best_under_slo(pts, 2.0, 0.1)
    assert best is not None and best.layout == "dense"
    assert best_under_slo(pts, 2.0, 0.05) is not None and best_under_slo(pts, 2.0, 0.05).layout == "fast"  # type: ignore[union-attr]
    assert best_under_slo(pts, 0.1, 0.01) is None


def test_candidate_layouts_stay_inside_the_budget_and_the_nvlink_domain() -> None:
    dense = candidate_layouts(False, 8, 8)
    assert {(la.tp, la.pp) for la in dense} >= {(1, 1), (2, 1), (4, 2), (8, 1), (2, 4)}
    assert all(la.gpus <= 8 and la.dp == 1 and la.ep == 1 for la in dense)
    moe = candidate_layouts(True, 8, 4)
    assert any(la.ep == la.tp * la.dp > 1 for la in moe) and all(la.tp * la.dp <= 4 for la in moe)


def test_search_finds_both_modes_and_reuses_the_closed_loop_model() -> None:
    res = search_budget("Llama-3.1-70B", "H100", 8, 2048, 512)
    modes = {p.mode for p in res.pareto}
    assert modes == {"agg", "disagg"}, [p.layout for p in res.pareto]
    assert any(s.startswith("TP1:") and "does not fit" in s for s in res.skipped)  # 140 GB of bf16 weights
    users = [p.tokens_per_s_per_user for p in res.pareto]
    gpus = [p.tokens_per_s_per_gpu for p in res.pareto]
    assert users == sorted(users, reverse=True) and gpus == sorted(gpus)
    # an aggregated point is the closed loop of 'estimate --concurrency' scaled by its replicas
    agg = next(p for p in res.pareto if p.mode == "agg")
    lay, c = agg.detail["layout"], agg.detail["concurrency_per_instance"]
    one = estimate_points([{"model": "Llama-3.1-70B", "gpu": "H100", "tp": lay["tp"], "pp": lay["pp"],
                            "concurrency": c, "isl": 2048, "osl": 512}])[0]  # fmt: skip
    assert abs(agg.tpot_s - one["tpot_s"]) < 1e-12 and abs(agg.ttft_s - one["ttft_s"]) < 1e-12
    reps = agg.detail["instances"]
    assert abs(agg.tokens_per_s_per_gpu - one["output_tokens_per_s"] * reps / agg.gpus) < 1e-6
    # a disaggregated point never uses more GPUs than the budget, and its prefill keeps up with its decode
    for p in res.pareto:
        assert p.gpus <= 8
    best = res.best["overall"]
    assert best is not None and best.ttft_s <= 2.0 and best.tpot_s <= 0.1


def test_acceptance_pareto_table_at_80_columns_keeps_numbers_whole() -> None:
    res = runner.invoke(app, cli(ACCEPTANCE), env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Pareto" in out and "tok/s/GPU" in out and "tok/s/user" in out and "best" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out and not re.search(r"\d(\.\.\.|…)", out)
    doc = json.loads(runner.invoke(app, cli((*ACCEPTANCE, "--json"))).stdout)
    flat = " ".join(out.split())
    for p in doc["pareto"]:  # every figure of the front is printed whole
        assert f"{p['ttft_s'] * 1e3:,.0f}" in flat and f"{p['tokens_per_s_per_gpu']:,.0f}" in flat


def test_json_document_and_determinism() -> None:
    a = runner.invoke(app, cli((*ACCEPTANCE, "--json", "--ttft", "1s", "--tpot", "40ms")))
    b = runner.invoke(app, cli((*ACCEPTANCE, "--json", "--ttft", "1s", "--tpot", "40ms")))
    assert a.exit_code == 0, a.output
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert doc["ttft_slo_s"] == 1.0 and doc["tpot_slo_s"] == 0.04
    for mode in ("overall", "agg", "disagg"):
        pt = doc["best"][mode]
        assert pt is None or (pt["ttft_s"] <= 1.0 and pt["tpot_s"] <= 0.04)


def test_no_disagg_searches_aggregated_layouts_only() -> None:
    doc = json.loads(runner.invoke(app, cli((*ACCEPTANCE, "--json", "--no-disagg"))).stdout)
    assert {p["mode"] for p in doc["pareto"]} == {"agg"} and doc["best"]["disagg"] is None


def test_bad_budget_inputs_are_one_line_errors() -> None:
    cases = [(("--gpus", "8"), "--isl"), (("--gpus", "0", "--isl", "8", "--osl", "8"), "--gpus"),
             (("--gpus", "1", "--isl", "2048", "--osl", "512"), "no layout"),
             (("--gpus", "8", "--isl", "8", "--osl", "8", "--concurrency", "4"), "--concurrency")]  # fmt: skip
    for args, word in cases:
        res = runner.invoke(app, cli(("estimate", "--model", "Llama-3.1-70B", "--gpu", "H100", *args)))
        assert res.exit_code in (1, 2), res.output
        assert "Traceback" not in res.output and word in res.output, res.output
