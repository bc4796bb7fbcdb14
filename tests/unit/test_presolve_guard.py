"""HiGHS presolve is on for small slice-assignment models (hetplan.solvers.milp.MAX_PRESOLVED_SLICE_VARS): it must
give the same optimum as without it. An earlier formulation of the mixed MILP was seen to return a wrong 'optimal'
with presolve; this guards the shipped ones (Mélange purchased, mixed) on two scenarios and three demands."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetplan.solvers.milp as milp
from hetplan.planning.request import build_request
from hetplan.planning.solve import Planner
from hetplan.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["examples/llama3-70b-azure-conv.yaml", "tests/fixtures/mixed_code_70b.yaml"])
def test_presolve_gives_the_same_slice_model_optimum(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    req = build_request(load_scenario(ROOT / path))[0]
    planner = Planner(req)
    solver = milp._solver
    costs: dict[bool, list[float]] = {}
    for presolve in (True, False):
        monkeypatch.setattr(
            milp, "_solver", lambda t, gap, _p=True, on=presolve: solver(t, gap, on and _p)
        )  # off forces it off everywhere
        got = []
        for scale in (0.5, 1.0, 2.0):
            fresh = Planner.__new__(Planner)
            fresh.__dict__.update({k: v for k, v in planner.__dict__.items() if not k.startswith("_solved")})
            if hasattr(planner, "_solved"):
                fresh._solved = {}
            for strategy in ("melange", "mixed"):
                got.append(round(fresh.solve(strategy, demand_scale=scale).cost, 6))
        costs[presolve] = got
    assert costs[True] == costs[False]
    assert any(c != float("inf") for c in costs[True])
