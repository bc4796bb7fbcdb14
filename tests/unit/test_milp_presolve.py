"""HiGHS settings of the slice (Mélange-shaped) models and cost caps as a cutoff (hetplan.solvers.milp)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hetplan.solvers.milp import PRESOLVE_MODES, SLICE_PRESOLVE, SolveSettings
from hetplan.solvers.milp_slices import solve_slice_assignment
from tests.conftest import ROOT

STALLING = ROOT / "tests" / "fixtures" / "milp" / "stalling_slice_model.json"


def test_the_model_full_presolve_stalls_on_solves_with_the_slice_setting():
    """The purchased Mélange model (Llama-3.1-8B on H100/L40S, 238 variables, PuLP JSON) on which HiGHS 1.16's full
    presolve ran past its 10 s time limit and a 30 s kill (measured; not re-run here, it would burn the time):
    with the slice setting it solves to its optimum. In a subprocess with a timeout, so a regression fails the
    test instead of hanging the suite."""
    code = textwrap.dedent(
        f"""
        import pulp
        from hetplan.solvers import milp
        _, prob = pulp.LpProblem.from_json({str(STALLING)!r})
        status = milp._run(prob, milp._solver(10.0, 0.0, milp.SolveSettings().slice_presolve))
        print(status, round(pulp.value(prob.objective), 6))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["optimal", "2.24208"]


def test_slice_presolve_setting():
    assert SLICE_PRESOLVE == "light" and PRESOLVE_MODES["light"] == {"presolve_mode": 2}
    assert SolveSettings().slice_presolve == SLICE_PRESOLVE
    assert SolveSettings(slice_presolve="off").slice_presolve == "off"
    with pytest.raises(ValueError, match="slice_presolve"):
        SolveSettings(slice_presolve="bogus")


@pytest.mark.parametrize("seed", range(6))
def test_cost_cap_cutoff_finds_only_cheaper_answers(seed):
    """A cap above the optimum returns the optimum; a cap at or below it returns infeasible (random slice models)."""
    rng = np.random.default_rng(seed)
    n_types, n_buckets, k = 4, 5, 4
    cost = [float(c) for c in rng.uniform(1.0, 10.0, n_types).round(2)]
    loads = [[float(v) if v < 0.9 else None for v in rng.uniform(0.05, 1.1, n_types)] for _ in range(n_buckets)]
    for row in loads:  # every bucket has a type that serves it
        if all(v is None for v in row):
            row[0] = 0.3
    best = solve_slice_assignment(cost, loads, k)
    assert best.status == "optimal"
    again = solve_slice_assignment(cost, loads, k, cost_cap=best.objective * 1.01)
    assert again.status == "optimal" and again.objective == pytest.approx(best.objective)
    for cap in (best.objective, best.objective * 0.99):
        assert solve_slice_assignment(cost, loads, k, cost_cap=cap).status == "infeasible"
