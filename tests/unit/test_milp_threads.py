"""Independent MILP solves run side by side (:func:`hetplan.solvers.milp_threads.solve_in_threads`): same answers, in
order, as one after another; errors and stdout handled."""

from __future__ import annotations

import functools
import os

import pytest

from hetplan.solvers import milp, milp_covering, milp_threads


def _problems() -> list[tuple[list[float], list[float], float]]:
    # small knapsack-like covering problems with distinct optima
    out = []
    for k in range(8):
        cost = [3.0 + k, 5.0, 7.5 - 0.5 * k, 11.0]
        value = [1.0, 2.0 + 0.1 * k, 3.0, 5.0]
        out.append((cost, value, 7.3 + k))
    return out


def test_threads_give_the_sequential_answers_in_order() -> None:
    tasks = [functools.partial(milp_covering.solve_covering, c, v, d) for c, v, d in _problems()]
    sequential = [t() for t in tasks]
    threaded = milp_threads.solve_in_threads(tasks, workers=3)
    assert [r.counts for r in threaded] == [r.counts for r in sequential]
    assert [r.objective for r in threaded] == [r.objective for r in sequential]
    assert len({r.objective for r in sequential}) > 1  # the problems differ, so order matters


def test_an_error_in_a_task_reaches_the_caller() -> None:
    def bad() -> milp_covering.MilpResult:
        raise ValueError("task failed")

    ok = [lambda: milp_covering.solve_covering([1.0], [1.0], 2.0)] * 3
    with pytest.raises(ValueError, match="task failed"):
        milp_threads.solve_in_threads([*ok, bad, *ok], workers=2)
    assert not milp_threads._STOP.is_set()  # the next solves are not stopped


def test_stdout_is_restored_after_threaded_solves(capfd: pytest.CaptureFixture[str]) -> None:
    before = os.fstat(1)
    milp_threads.solve_in_threads([lambda: milp_covering.solve_covering([1.0, 2.0], [1.0, 3.0], 4.0)] * 6, workers=4)
    after = os.fstat(1)
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)
    print("visible")
    assert "visible" in capfd.readouterr().out


def test_thread_count_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert milp_threads.solve_threads(milp.SolveSettings(threads=1)) == 1
    assert milp_threads.solve_threads(milp.SolveSettings(threads=3)) == 3
    monkeypatch.setenv("HETPLAN_SOLVE_THREADS", "1")  # the library reads no environment variable (the CLI does)
    monkeypatch.setattr(milp_threads.os, "sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    assert milp_threads.solve_threads() == 4  # the CPUs this process may use, at most 4
    assert milp_threads.solve_threads(milp.SolveSettings()) == 4
    monkeypatch.setattr(milp_threads.os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert milp_threads.solve_threads() == 1
    with pytest.raises(ValueError, match="threads"):
        milp.SolveSettings(threads=0)
