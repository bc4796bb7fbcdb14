import itertools

import numpy as np
import pytest

from hetplan.solvers.milp_covering import max_value, solve_covering


def brute_force(cost, value, demand, usage, cap, bound=8):
    best = None
    for ys in itertools.product(range(bound + 1), repeat=len(cost)):
        if sum(v * y for v, y in zip(value, ys, strict=False)) < demand - 1e-9:
            continue
        if any(
            c is not None and sum(u * y for u, y in zip(row, ys, strict=False)) > c
            for row, c in zip(usage, cap, strict=False)
        ):
            continue
        total = sum(c * y for c, y in zip(cost, ys, strict=False))
        if best is None or total < best - 1e-9:
            best = total
    return best


@pytest.mark.parametrize("seed", range(12))
def test_ilp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 4
    cost = list(np.round(rng.uniform(1, 10, n), 2))
    value = list(np.round(rng.uniform(0.5, 5, n), 2))
    usage = [list(rng.integers(0, 4, n)), list(rng.integers(0, 4, n))]
    cap = [int(rng.integers(4, 12)), None]
    demand = float(np.round(rng.uniform(2, 12), 2))
    expected = brute_force(cost, value, demand, usage, cap)
    got = solve_covering(cost, value, demand, usage, cap, upper=[8] * n)
    if expected is None:
        assert got.status == "infeasible"
    else:
        assert got.status == "optimal"
        assert got.objective == pytest.approx(expected, abs=1e-6)
        assert sum(c * y for c, y in zip(cost, got.counts, strict=False)) == pytest.approx(expected, abs=1e-6)


def test_second_stage_prefers_fewer_units_at_equal_cost():
    # two units of A (cost 2 each) or one unit of B (cost 4) both reach value 2 at cost 4
    got = solve_covering([2.0, 4.0], [1.0, 2.0], 2.0)
    assert got.counts == (0, 1)


def test_max_value_under_capacity():
    assert max_value([3.0, 1.0], [[2, 1]], [5]) == pytest.approx(7.0)
    assert max_value([3.0], [[0]], [None]) == float("inf")


def test_no_banner_on_stdout(capfd):
    solve_covering([1.0], [1.0], 1.0)
    assert capfd.readouterr().out == ""
