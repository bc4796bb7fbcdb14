"""Every MILP solve stops at its hard deadline, whatever HiGHS does inside (hetplan.solvers.highs_process): a stalled
solve reports its incumbent and bound, or no answer, instead of hanging the plan."""

from __future__ import annotations

import gzip
import json
import random
import signal
import time
from collections.abc import Iterator
from typing import Any

import pulp
import pytest

from hetplan.solvers import milp, milp_covering
from tests.conftest import ROOT

GRACE_S = 0.5
LIMIT_S = 1.0
WATCHDOG_S = 30


class _Hung(Exception):
    pass


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    """Fail, instead of hanging the suite, when a solve is not stopped (the waits run signal handlers)."""

    def hung(signum: int, frame: Any) -> None:
        raise _Hung(f"the solve was not stopped within {WATCHDOG_S} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(WATCHDOG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _deaf(monkeypatch: pytest.MonkeyPatch, stall_after_incumbent: bool = False) -> None:
    """HiGHS as it behaves in the stalled presolve: its time limit is never checked (set to a million seconds
    behind hetplan's back); with ``stall_after_incumbent`` it also freezes once it has a solution (an interrupt
    callback that never returns), so only the hard stop ends the solve."""
    configure = milp._InterruptibleHiGHS.createAndConfigureSolver

    def deaf(self: Any, lp: Any) -> None:
        configure(self, lp)
        lp.solverModel.setOptionValue("time_limit", 1e6)
        if stall_after_incumbent:

            def freeze(event: Any) -> None:
                if event.data_out.objective_function_value < 1e300:
                    time.sleep(1e6)

            lp.solverModel.cbMipInterrupt.subscribe(freeze)

    monkeypatch.setattr(milp._InterruptibleHiGHS, "createAndConfigureSolver", deaf)


def _market_split() -> tuple[list[list[int]], list[int]]:
    """A market-split MIP (Cornuejols & Dawande 1999), which HiGHS does not finish in seconds."""
    rng = random.Random(0)
    a = [[rng.randint(0, 99) for _ in range(30)] for _ in range(4)]
    return a, [sum(r) // 2 for r in a]


def test_a_solve_that_ignores_its_time_limit_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    _deaf(monkeypatch)
    a, h = _market_split()
    usage = [a[0], *a[1:], *[[-x for x in r] for r in a[1:]]]
    capacity: list[float | None] = [h[0], *h[1:], *[-x for x in h[1:]]]
    start = time.perf_counter()
    settings = milp.SolveSettings(hard_stop_grace_s=GRACE_S, isolate_min_variables=0)
    result = milp_covering.solve_covering([1.0] * 30, a[0], h[0], usage, capacity, upper=[1] * 30, time_limit_s=LIMIT_S,
                                 second_stage_epsilon=None, settings=settings)  # fmt: skip
    elapsed = time.perf_counter() - start
    # stopped at 1.5 s without a solution, then solved once more without presolve under the same hard stop
    assert elapsed < 2 * (LIMIT_S + GRACE_S) + 2.0
    assert result.status == "not_solved" and sum(result.counts) == 0


def test_a_stalled_solve_reports_its_incumbent_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    _deaf(monkeypatch, stall_after_incumbent=True)
    rng = random.Random(3)
    n = 40
    cost = [rng.uniform(1.0, 2.0) for _ in range(n)]
    value = [rng.uniform(1.0, 2.0) for _ in range(n)]
    usage = [[rng.randint(0, 3) for _ in range(n)] for _ in range(3)]
    start = time.perf_counter()
    settings = milp.SolveSettings(hard_stop_grace_s=GRACE_S, isolate_min_variables=0)
    result = milp_covering.solve_covering(cost, value, 30.5, usage, [40.0] * 3, second_stage_epsilon=None,
                                 time_limit_s=LIMIT_S, settings=settings)  # fmt: skip
    elapsed = time.perf_counter() - start
    assert elapsed < LIMIT_S + GRACE_S + 2.0
    assert result.status == "time_limit"  # an incumbent, not a proven optimum
    assert sum(v * c for v, c in zip(value, result.counts, strict=True)) >= 30.5 - 1e-6  # a feasible answer
    assert result.objective == pytest.approx(sum(c * k for c, k in zip(cost, result.counts, strict=True)))
    assert 0.0 <= result.gap < 1.0  # its incumbent against the dual bound HiGHS reported with it


def test_in_process_a_deaf_solve_is_cancelled_and_a_frozen_one_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small models run in this process (``isolate_min_variables``): past the hard stop the watchdog cancels the
    solve; one that does not stop even then is abandoned to its thread and reported unsolved, so the plan goes on."""
    _deaf(monkeypatch)
    a, h = _market_split()
    usage = [a[0], *a[1:], *[[-x for x in r] for r in a[1:]]]
    capacity: list[float | None] = [h[0], *h[1:], *[-x for x in h[1:]]]
    settings = milp.SolveSettings(hard_stop_grace_s=GRACE_S, isolate_min_variables=1000)
    start = time.perf_counter()
    result = milp_covering.solve_covering([1.0] * 30, a[0], h[0], usage, capacity, upper=[1] * 30, time_limit_s=LIMIT_S,
                                 second_stage_epsilon=None, settings=settings)  # fmt: skip
    assert time.perf_counter() - start < LIMIT_S + GRACE_S + 2.0
    assert result.status == "not_solved" and sum(result.counts) == 0  # cancelled without a solution
    _deaf(monkeypatch, stall_after_incumbent=True)
    rng = random.Random(3)
    n = 40
    cost = [rng.uniform(1.0, 2.0) for _ in range(n)]
    value = [rng.uniform(1.0, 2.0) for _ in range(n)]
    usage2 = [[rng.randint(0, 3) for _ in range(n)] for _ in range(3)]
    start = time.perf_counter()
    frozen = milp_covering.solve_covering(cost, value, 30.5, usage2, [40.0] * 3, second_stage_epsilon=None,
                                 time_limit_s=LIMIT_S, settings=settings)  # fmt: skip
    assert time.perf_counter() - start < LIMIT_S + GRACE_S + milp.ABANDON_AFTER_S + 2.0
    assert frozen.status == "not_solved"
    assert milp._ABANDONED  # its thread runs on, holding the model


def test_isolated_and_in_process_solves_give_the_same_answers() -> None:
    rng = random.Random(5)
    for _ in range(4):
        n = 12
        cost = [round(rng.uniform(1.0, 9.0), 2) for _ in range(n)]
        value = [round(rng.uniform(0.5, 3.0), 2) for _ in range(n)]
        usage = [[rng.randint(0, 2) for _ in range(n)] for _ in range(2)]
        runs = [
            milp_covering.solve_covering(
                cost, value, 11.7, usage, [9.0, 9.0], settings=milp.SolveSettings(isolate=iso, isolate_min_variables=0)
            )  # fmt: skip
            for iso in (True, False)
        ]
        assert runs[0] == runs[1]


def test_solve_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="hard_stop_grace_s"):
        milp.SolveSettings(hard_stop_grace_s=float("inf"))
    with pytest.raises(ValueError, match="hard_stop_grace_s"):
        milp.SolveSettings(hard_stop_grace_s=-1.0)
    with pytest.raises(ValueError, match="isolate_min_variables"):
        milp.SolveSettings(isolate_min_variables=-1)


LIGHT_STALL = ROOT / "tests" / "fixtures" / "milp" / "stalling_light_presolve_model.json.gz"


def test_the_model_that_stalls_light_presolve_stops_at_its_hard_stop_with_its_incumbent() -> None:
    """A Mélange purchase MILP of a re-size (878 columns, PuLP JSON, gzipped: an MPS file's rounded coefficients
    solve): a 32B config.json model (Qwen2.5-32B's architecture), 15 minutes of the Azure conversation trace at
    14 req/s, 8 owned L40S, renting on AWS, TTFT 5 s. With HiGHS 1.16's light presolve it finds its optimum
    ($50.3099/h) within 3 s and then sits in presolve past its time limit (10 s: killed by a 120 s timeout; in a
    thread, cancelSolve() and Ctrl-C do not stop it either; full presolve solves it in 4 s, none in 6 s, on a loaded
    machine). Solved as the planner solves it, it stops at the hard stop with that incumbent and its gap."""
    _, prob = pulp.LpProblem.fromDict(json.loads(gzip.decompress(LIGHT_STALL.read_bytes())))
    solver = milp._solver(6.0, 0.0, "light", 54.165035833910004, milp.SolveSettings(hard_stop_grace_s=GRACE_S))
    start = time.perf_counter()
    status = milp._run(prob, solver)
    elapsed = time.perf_counter() - start
    assert elapsed < 6.0 + GRACE_S + 3.0
    assert status == "time_limit"  # the incumbent, unproven (stopped by HiGHS on a machine too slow to stall by 6 s)
    assert pulp.value(prob.objective) == pytest.approx(50.3099, abs=1e-6)
    assert 0.0 < milp._gap(prob) < 0.5
