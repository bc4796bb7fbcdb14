"""How hetplan runs PuLP and HiGHS: the one place it creates a solver.

:class:`SolveSettings` says how MILPs run (threads, slice presolve, the hard stop, isolation in a child process);
:func:`_solver` and :func:`_run` build and run an interruptible HiGHS (:class:`_InterruptibleHiGHS`: a stop
request or the hard stop ends it within a fraction of a second; a solve that ignores it is abandoned); independent
solves run side by side through :func:`hetplan.solvers.milp_threads.solve_in_threads`. The formulations are
in :mod:`hetplan.solvers.milp_covering` (Cauchy's covering ILP), :mod:`hetplan.solvers.milp_slices` (Mélange's
slices, the head split) and :mod:`hetplan.solvers.milp_packed` (whole instances on bins).

HiGHS prints a banner on stdout the first time a solver is created in a process, even with ``msg=False``
(DESIGN §3.5); stdout's file descriptor is pointed at /dev/null while HiGHS runs, so ``--json`` stays clean.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pulp

from hetplan.solvers.highs_process import ProcessOutcome, solve_in_child
from hetplan.solvers.milp_threads import _STOP

_QUIET_LOCK = threading.Lock()
_quiet_depth = 0
_quiet_saved: int | None = None


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null for the duration (C-level prints included). Safe to nest and to use
    from several threads at once (:func:`solve_in_threads`): the first to enter redirects, the last to leave
    restores."""
    global _quiet_depth, _quiet_saved
    with _QUIET_LOCK:
        if _quiet_depth == 0:
            try:
                sys.stdout.flush()
                saved = os.dup(1)
            except (OSError, ValueError):
                saved = -1
            if saved >= 0:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.close(devnull)
            _quiet_saved = saved
        _quiet_depth += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _quiet_depth -= 1
            if _quiet_depth == 0 and _quiet_saved is not None:
                if _quiet_saved >= 0:
                    os.dup2(_quiet_saved, 1)
                    os.close(_quiet_saved)
                _quiet_saved = None


SLICE_PRESOLVE = "light"
"""HiGHS presolve for Mélange-shaped (slice) models: ``"light"`` (HiGHS ``presolve_mode`` 2) or ``"off"``. HiGHS
1.16's full presolve stalls on some of them without honouring its time limit or an interrupt (a purchased
Llama-3.1-8B H100/L40S model of 214 slice variables ran for over 30 s where it solves in 0.01 s without presolve;
reproduced from its PuLP JSON dump, not from an MPS file, whose rounded coefficients solve); its light presolve
solves that model in 0.01 s and example (a)'s purchased Mélange model in 0.08 s (1 s without presolve). The light
mode can stall too (a sub-MIP of HiGHS's own heuristics presolves in full): every solve is therefore bounded by
:attr:`SolveSettings.isolate`, whatever the presolve. ``HETPLAN_SLICE_PRESOLVE=off`` (read by the CLI into
:class:`SolveSettings`) turns presolve off for these models."""

PRESOLVE_MODES: dict[str, dict[str, int | str]] = {"on": {}, "light": {"presolve_mode": 2}, "off": {"presolve": "off"}}

#: Seconds past its time limit at which a solve is killed (HiGHS usually stops within milliseconds of it).
HARD_STOP_GRACE_S = 2.0
#: Models with at least this many variables are solved in a killable process (:attr:`SolveSettings.isolate`). The
#: stalls seen were in slice models of 214 to 878 variables; a fork and its copied pages cost about 40 ms a solve on
#: a loaded 2-core machine, which the many small covering and purchase models of a plan (13 in example (a), most
#: under 100 variables) would pay for nothing: they run in this process, bounded by the watchdog of
#: :class:`_InterruptibleHiGHS`.
ISOLATE_MIN_VARIABLES = 100


@dataclass(frozen=True)
class SolveSettings:
    """How hetplan runs HiGHS: one value built by the caller (the CLI reads ``HETPLAN_SOLVE_THREADS`` and
    ``HETPLAN_SLICE_PRESOLVE`` into it, :mod:`hetplan.cli.resources`) and passed down; library code reads no
    environment variable.

    Attributes:
        threads: independent solves :func:`solve_in_threads` runs at once (1: one after another); None: the CPUs
            this process may use, at most 4 (1 in a worker process of a pool).
        slice_presolve: HiGHS presolve for slice (Mélange-shaped) models, a key of :data:`PRESOLVE_MODES`
            (:data:`SLICE_PRESOLVE`).
        isolate: run each solve of :attr:`isolate_min_variables` variables or more in a forked process that is
            killed :attr:`hard_stop_grace_s` seconds past its time limit (:mod:`hetplan.solvers.highs_process`), so
            that no solve outlives its limit whatever HiGHS does; smaller ones (and all where ``fork`` does not
            exist) run in this process, where a solve still running that long after its time limit is cancelled and,
            if HiGHS does not stop, abandoned (its thread runs on until the process exits) and reported unsolved.
        hard_stop_grace_s: seconds, see ``isolate``.
        isolate_min_variables: see ``isolate`` (:data:`ISOLATE_MIN_VARIABLES`).

    Raises:
        ValueError: ``threads`` below 1, an unknown ``slice_presolve`` or a negative or non-finite grace.
    """

    threads: int | None = None
    slice_presolve: str = SLICE_PRESOLVE
    isolate: bool = True
    hard_stop_grace_s: float = HARD_STOP_GRACE_S
    isolate_min_variables: int = ISOLATE_MIN_VARIABLES

    def __post_init__(self) -> None:
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be at least 1, not {self.threads}")
        if self.slice_presolve not in PRESOLVE_MODES:
            raise ValueError(f"slice_presolve must be one of {', '.join(PRESOLVE_MODES)}, not {self.slice_presolve!r}")
        if not (math.isfinite(self.hard_stop_grace_s) and self.hard_stop_grace_s >= 0):
            raise ValueError(f"hard_stop_grace_s must be a finite number >= 0, not {self.hard_stop_grace_s}")
        if self.isolate_min_variables < 0:
            raise ValueError(f"isolate_min_variables must be >= 0, not {self.isolate_min_variables}")


DEFAULT_SETTINGS = SolveSettings()


class _InterruptibleHiGHS(pulp.HiGHS):  # type: ignore[misc, name-defined, unused-ignore]
    """PuLP's HiGHS, solved so that Ctrl-C, SIGTERM, ``--timeout`` and a stalled HiGHS all stop it.

    With ``isolate`` (the default, :class:`SolveSettings`), a model of ``isolate_min_variables`` variables or more
    is solved in a forked process killed ``hard_stop_s`` seconds after the start
    (:func:`hetplan.solvers.highs_process.solve_in_child`): a signal handler runs within 50 ms, and HiGHS stuck
    where it checks neither its time limit nor an interrupt is killed;
    the improving solutions it reported give the stopped solve its incumbent and bound. A stopped solve without one
    is solved once more without presolve (the rule that stalls is a presolve rule), under the same hard stop.

    Otherwise: PuLP calls ``Highs.run()``, which holds the main thread in C++ until HiGHS returns, so Python's
    signal handlers cannot run until then. Here HiGHS runs in highspy's solver thread while the calling thread
    waits in 50 ms slices (a lock wait that signals interrupt); when a handler raises, HiGHS is told to stop (its
    interrupt callbacks are checked many times a second), the thread is joined and the exception goes on. Past
    ``hard_stop_s`` the solve is cancelled the same way (an incumbent is a time-limited answer), and a solve that
    does not stop within :data:`ABANDON_AFTER_S` is abandoned to its thread and reported unsolved. Measured with
    ``benchmarks/highs_interrupt.py``."""

    def __init__(
        self,
        *args: Any,
        isolate: bool = True,
        hard_stop_s: float | None = None,
        isolate_min_variables: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.isolate = isolate and hasattr(os, "fork")
        self.hard_stop_s = hard_stop_s
        self.isolate_min_variables = isolate_min_variables
        self._cancelled = False
        #: how the last solve ended: None (HiGHS returned), or the outcome of a stopped solve
        self.stopped: ProcessOutcome | None = None

    def actualSolve(self, lp: pulp.LpProblem) -> int:
        self.stopped = None
        if not self.isolate or lp.numVariables() < self.isolate_min_variables:
            self._cancelled = False
            try:
                status = int(super().actualSolve(lp))
                if self._cancelled:  # stopped by the watchdog: an incumbent is a time-limited answer, else none
                    self.stopped = _unsolved()
                    if int(lp.solverModel.getInfo().primal_solution_status) == 0:
                        raise _Abandoned(self.stopped)
                    lp._hetplan_gap = float(lp.solverModel.getInfo().mip_gap)
                    lp.assignStatus(pulp.constants.LpStatusOptimal, pulp.constants.LpSolutionIntegerFeasible)
                    return int(pulp.constants.LpStatusOptimal)
                return status
            except _Abandoned as gone:
                self.stopped = gone.outcome
                for var in lp.variables():
                    var.varValue = None
                lp._hetplan_gap = float("nan")
                lp.assignStatus(gone.outcome.status, gone.outcome.sol_status)
                return gone.outcome.status
        self.createAndConfigureSolver(lp)
        self.buildSolverModel(lp)
        out = self._in_child(lp)
        if out.stopped and out.values is None and self.optionsDict.get("presolve") != "off":
            lp.solverModel.setOptionValue("presolve", "off")  # the stalling rule is a presolve rule
            out = self._in_child(lp)
        self.stopped = out if out.stopped else None
        for var, value in zip(lp.variables(), out.values or (), strict=False):
            var.varValue = value
        if out.values is None:
            for var in lp.variables():
                var.varValue = None
        lp._hetplan_gap = out.gap
        lp.assignStatus(out.status, out.sol_status)
        return out.status

    def _in_child(self, lp: pulp.LpProblem) -> ProcessOutcome:
        model = lp.solverModel
        limit = self.hard_stop_s
        if limit is None:  # HiGHS's own time limit and the default grace
            limit = float(self.timeLimit) + HARD_STOP_GRACE_S if self.timeLimit is not None else math.inf

        def solve() -> tuple[int, int, list[float | None], float, float, float]:
            model.run()
            status, sol_status = self.findSolutionValues(lp)
            info = model.getInfo()
            return (status, sol_status, [v.varValue for v in lp.variables()],
                    float(info.objective_function_value), float(info.mip_gap), float(info.mip_dual_bound))  # fmt: skip

        def subscribe(report: Callable[[float, float, list[float]], None]) -> None:
            def improving(event: Any) -> None:
                out = event.data_out
                report(float(out.objective_function_value), float(out.mip_dual_bound), out.mip_solution.tolist())

            model.cbMipImprovingSolution.subscribe(improving)

        return solve_in_child(solve, subscribe, limit, _STOP.is_set)

    def callSolver(self, lp: pulp.LpProblem) -> None:
        model = lp.solverModel
        _own_solver_locks(model)
        model.HandleUserInterrupt = True  # subscribes the interrupt callbacks that cancelSolve() trips
        model.startSolve()
        limit = self.hard_stop_s
        if limit is None and self.timeLimit is not None:
            limit = float(self.timeLimit) + HARD_STOP_GRACE_S
        deadline = time.monotonic() + (limit if limit is not None else math.inf)
        try:
            while not model.wait(0.05)[0]:
                if _STOP.is_set():
                    raise InterruptedError("the calling thread stopped these solves")
                if time.monotonic() > deadline:  # HiGHS ignores its time limit: cancel, and abandon if deaf
                    model.cancelSolve()
                    if not model.wait(ABANDON_AFTER_S)[0]:
                        _ABANDONED.append(model)  # kept alive: its thread still uses it
                        raise _Abandoned(_unsolved())
                    self._cancelled = True
                    break
        except _Abandoned:
            raise
        except BaseException:
            model.cancelSolve()
            if not model.wait(ABANDON_AFTER_S)[0]:
                _ABANDONED.append(model)
            raise


#: Seconds an in-process solve gets to honour ``cancelSolve()`` before its thread is abandoned.
ABANDON_AFTER_S = 1.0
#: Models whose solver thread was abandoned (HiGHS deaf to its limit and to cancelSolve): kept referenced so the
#: thread never runs on freed memory; the threads are daemons and end with the process.
_ABANDONED: list[Any] = []


class _Abandoned(Exception):
    """An in-process solve that HiGHS would not stop; ``outcome``: the unsolved answer reported instead."""

    def __init__(self, outcome: ProcessOutcome) -> None:
        super().__init__("HiGHS did not stop at its hard deadline")
        self.outcome = outcome


def _unsolved() -> ProcessOutcome:
    nan = float("nan")
    return ProcessOutcome(
        pulp.constants.LpStatusNotSolved, pulp.constants.LpSolutionNoSolutionFound, None, nan, nan, nan, True
    )


def _own_solver_locks(model: Any) -> None:
    """Give one highspy model its own solver-thread locks. highspy (1.16) keeps the locks that ``startSolve`` and
    ``wait`` use as *class* attributes, shared by every ``Highs`` object, so two models solved at once from two
    threads (:func:`solve_in_threads`) fail with "Solver is already running"; per-instance locks behave as the
    class ones do for one model."""
    if hasattr(model, "_Highs__solver_stopped") and hasattr(model, "_Highs__solver_started"):
        model._Highs__solver_stopped = threading.RLock()
        model._Highs__solver_started = threading.Lock()


def _solver(
    time_limit_s: float,
    gap: float,
    presolve: str = "on",
    cutoff: float | None = None,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> pulp.LpSolver:
    """PuLP's HiGHS (:class:`_InterruptibleHiGHS`), one thread, with ``presolve`` one of :data:`PRESOLVE_MODES`.
    ``cutoff``: HiGHS's ``objective_bound`` (branch and bound prunes every node whose bound reaches it); read the
    outcome with :func:`_below_cutoff`. ``settings``: whether the solve runs in a killable process, and its grace
    past ``time_limit_s``."""
    options: dict[str, int | str | float] = dict(PRESOLVE_MODES[presolve])
    if cutoff is not None:
        options["objective_bound"] = float(cutoff)
    hard = time_limit_s + settings.hard_stop_grace_s
    return _InterruptibleHiGHS(msg=False, timeLimit=time_limit_s, gapRel=gap, threads=1, isolate=settings.isolate,
                               hard_stop_s=hard, isolate_min_variables=settings.isolate_min_variables,
                               **options)  # fmt: skip


def _below_cutoff(prob: pulp.LpProblem, status: str, cutoff: float | None) -> str:
    """The status of a solve with a ``cutoff`` (:func:`_solver`): a solution costing ``cutoff`` or more is not an
    answer (HiGHS may report one as "optimal": it pruned every node below the cutoff, so none cheaper exists, or
    none was found within the time limit), so the status becomes ``infeasible``.

    A cutoff instead of a ``cost ≤ cap`` row: the mixed MILP of ``benchmarks/plan_speed.py`` proves that nothing
    is cheaper than the restricted optima in 0.5 s this way, 2.2 to 3.5 s with the row (HiGHS 1.16)."""
    if cutoff is None or status not in ("optimal", "time_limit"):
        return status
    value = pulp.value(prob.objective)
    if value is None or float(value) >= cutoff:
        return "infeasible"
    return status


def _run(prob: pulp.LpProblem, solver: pulp.LpSolver) -> str:
    """Solve ``prob`` with ``solver`` (:func:`_solver`), stdout silenced; the status as hetplan names it
    ("optimal", "time_limit" for an incumbent without proof, also from a stopped solve, "infeasible", "not_solved",
    …)."""
    with quiet_stdout():
        prob.solve(solver)
    # PuLP reports HiGHS's time limit with an incumbent as status 1 ("optimal") and solution status "integer
    # feasible": that is a time-limited answer, not a proven optimum
    if prob.status == 1 and getattr(prob, "sol_status", 1) == pulp.constants.LpSolutionIntegerFeasible:
        return "time_limit"
    return {1: "optimal", 0: "not_solved", -1: "infeasible", -2: "unbounded", -3: "undefined"}.get(
        prob.status, "undefined"
    )


def _affine(ys: Sequence[pulp.LpVariable], coefficients: Sequence[float]) -> pulp.LpAffineExpression:
    """Σ coefficient·y over the non-zero coefficients, built in one call (much faster than ``lpSum`` of products)."""
    return pulp.LpAffineExpression([(y, float(c)) for y, c in zip(ys, coefficients, strict=True) if c])


def _var(prob: pulp.LpProblem, name: str, upper: int | None) -> pulp.LpVariable:
    """A non-negative integer variable attached to ``prob`` (PuLP >= 3.3 API)."""
    return prob.add_variable(name, lowBound=0, upBound=upper, cat="Integer")


def _gap(prob: pulp.LpProblem) -> float:
    """HiGHS's relative MIP gap of the last solve of ``prob`` (0 when unknown; a stopped solve's gap is its
    incumbent against its last dual bound, nan when it had none)."""
    isolated = getattr(prob, "_hetplan_gap", None)
    if isolated is not None:
        return float(isolated)
    solution_gap = getattr(prob, "solverModel", None)
    try:
        info = solution_gap.getInfo() if solution_gap is not None else None
        return float(getattr(info, "mip_gap", 0.0)) if info is not None else 0.0
    except Exception:  # noqa: BLE001 - the gap is informative only; HiGHS versions differ
        return 0.0
