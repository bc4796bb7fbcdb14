"""The one place hetplan calls PuLP and HiGHS.

:func:`solve_covering` solves the deployment ILP that Cauchy (and, later, Mélange) reduce to::

    minimize    Σ_c cost_c · y_c
    subject to  Σ_c value_c · y_c ≥ demand                   (goodput)
                Σ_c y_c ≥ 1                                 (a deployment is never empty)
                Σ_c use_{c,g} · y_c ≤ cap_g     for each g  (inventory)
                y_c ∈ {0, 1, 2, …}, y_c ≤ ub_c

and optionally a second, lexicographic stage: among solutions with cost ≤ (1+ε)·optimum, fewest units.

HiGHS prints a banner on stdout the first time a solver is created in a process, even with ``msg=False``
(DESIGN §3.5); stdout's file descriptor is pointed at /dev/null while HiGHS runs, so ``--json`` stays clean.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import pulp

from hetplan.solvers.highs_process import ProcessOutcome, solve_in_child

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


#: Set while :func:`solve_in_threads` unwinds after an exception in the calling thread (Ctrl-C, ``--timeout``):
#: HiGHS solves running in its worker threads stop within 50 ms.
_STOP = threading.Event()

T = TypeVar("T")


def solve_threads(settings: SolveSettings | None = None) -> int:
    """How many independent MILP solves :func:`solve_in_threads` runs at once: ``settings.threads`` when set (1
    turns it off), else 1 in a worker process of a pool, else the CPUs this process may use, at most 4. HiGHS
    itself always runs single-threaded, so every answer is the same whatever this is."""
    if settings is not None and settings.threads is not None:
        return settings.threads
    if multiprocessing.parent_process() is not None:
        return 1  # a sweep's or windowed simulation's worker process: the pool already uses the CPUs
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def solve_in_threads(
    tasks: Sequence[Callable[[], T]], workers: int | None = None, settings: SolveSettings | None = None
) -> list[T]:
    """Run independent solves side by side (HiGHS releases the GIL while it solves, or runs in its own process)
    and return their results in the order of ``tasks``, so callers see the same answer as a sequential loop. An
    exception in a task is re-raised here after the others finish; an exception in the calling thread (Ctrl-C,
    ``--timeout``) stops the running HiGHS solves and is re-raised. ``workers``: threads (default
    :func:`solve_threads` of ``settings``).

    Source: hetplan's own reconstruction.
    """
    workers = solve_threads(settings) if workers is None else workers
    if workers <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    pool = ThreadPoolExecutor(max_workers=min(workers, len(tasks)), thread_name_prefix="hetplan-milp")
    futures = [pool.submit(task) for task in tasks]
    try:
        return [f.result() for f in futures]
    except BaseException:
        _STOP.set()
        for f in futures:
            f.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
        _STOP.clear()


@dataclass(frozen=True)
class MilpResult:
    """Outcome: ``status`` ("optimal", "infeasible", "time_limit", …), integer ``counts`` per column,
    ``objective`` (cost), ``gap`` (relative MIP gap reported by HiGHS, 0 when proven optimal)."""

    status: str
    counts: tuple[int, ...]
    objective: float
    gap: float


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


def solve_covering(
    cost: Sequence[float],
    value: Sequence[float],
    demand: float,
    usage: Sequence[Sequence[float]] = (),
    capacity: Sequence[float | None] = (),
    upper: Sequence[int] | None = None,
    second_stage_epsilon: float | None = 1e-9,
    time_limit_s: float = 30.0,
    mip_gap: float = 0.0,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> MilpResult:
    """Solve the covering ILP above.

    Args:
        cost: shape (C,), cost per unit of column c (e.g. $/hour of one combo).
        value: shape (C,), value per unit (e.g. req/s of goodput).
        demand: required Σ value·y.
        usage: shape (G, C): resource g used per unit of column c (e.g. GPUs of type g).
        capacity: shape (G,): limit per resource (None = unlimited).
        upper: shape (C,): optional upper bound per column.
        second_stage_epsilon: if not None, re-solve for the fewest units at cost ≤ (1+ε)·optimum.
        time_limit_s, mip_gap: HiGHS limits; a time-limited answer is reported as ``time_limit``.
        settings: how HiGHS runs (:class:`SolveSettings`); a solve past its hard stop is reported as
            ``time_limit`` with its incumbent, or ``not_solved`` without one.

    Returns:
        :class:`MilpResult`; ``counts`` are rounded integers of the incumbent.
    """
    n = len(cost)

    def build(name: str) -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
        prob = pulp.LpProblem(name, pulp.LpMinimize)
        ys = [_var(prob, f"y{i:05d}", None if upper is None else int(upper[i])) for i in range(n)]
        prob += _affine(ys, value) >= float(demand), "demand"
        if n:
            prob += _affine(ys, [1.0] * n) >= 1, "not_empty"  # a deployment has at least one unit
        for g, row in enumerate(usage):
            cap = capacity[g] if g < len(capacity) else None
            if cap is not None and any(row):
                prob += _affine(ys, row) <= float(cap), f"cap{g:03d}"
        return prob, ys

    prob, ys = build("covering")
    prob.setObjective(_affine(ys, cost))
    status = _run(prob, _solver(time_limit_s, mip_gap, settings=settings))
    if status not in ("optimal", "time_limit"):
        if status == "not_solved" and all(v.varValue is not None for v in ys):
            status = "time_limit"
        else:
            return MilpResult(status, tuple(0 for _ in ys), float("nan"), float("nan"))
    best = float(pulp.value(prob.objective) or 0.0)
    counts = tuple(int(round(v.varValue or 0.0)) for v in ys)
    gap = _gap(prob)
    if second_stage_epsilon is not None and n:
        prob2, y2 = build("fewest_units")
        limit = best * (1 + second_stage_epsilon) + 1e-9
        prob2 += _affine(y2, cost) <= limit, "cost"
        prob2.setObjective(_affine(y2, [1.0] * n))
        if _run(prob2, _solver(time_limit_s, mip_gap, settings=settings)) in ("optimal", "time_limit"):
            counts = tuple(int(round(v.varValue or 0.0)) for v in y2)
            best = sum(float(cost[i]) * counts[i] for i in range(n))
    return MilpResult(status, counts, best, gap)


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


def max_value(
    value: Sequence[float],
    usage: Sequence[Sequence[float]],
    capacity: Sequence[float | None],
    time_limit_s: float = 10.0,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> float:
    """Largest Σ value·y (y integer ≥ 0) within the resource capacities; inf if some column is unbounded;
    ``settings``: :class:`SolveSettings`."""
    n = len(value)
    prob = pulp.LpProblem("max_value", pulp.LpMaximize)
    ys = [_var(prob, f"y{i:05d}", None) for i in range(n)]
    prob.setObjective(_affine(ys, value))
    bounded = [False] * n
    for g, row in enumerate(usage):
        cap = capacity[g]
        if cap is None:
            continue
        for i in range(n):
            if row[i]:
                bounded[i] = True
        if any(row):
            prob += _affine(ys, row) <= float(cap), f"cap{g:03d}"
    if not all(bounded):
        return float("inf")
    status = _run(prob, _solver(time_limit_s, 0.0, settings=settings))
    return float(pulp.value(prob.objective) or 0.0) if status in ("optimal", "time_limit") else 0.0


MAX_SLICE_LOAD = 1e4


@dataclass(frozen=True)
class AssignmentResult:
    """Outcome of :func:`solve_slice_assignment`: ``status``, instances per type (``counts``), slices of each
    bucket given to each type (``slices``, shape (B, G)) and the cost."""

    status: str
    counts: tuple[int, ...]
    slices: tuple[tuple[int, ...], ...]
    objective: float
    mix: tuple[float, ...] = ()


def solve_slice_assignment(
    type_cost: Sequence[float],
    slice_load: Sequence[Sequence[float | None]],
    slices_per_bucket: int,
    usage: Sequence[Sequence[float]] = (),
    capacity: Sequence[float | None] = (),
    time_limit_s: float = 30.0,
    link: bool = False,
    mix_load: Sequence[float | None] | None = None,
    cost_cap: float | None = None,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> AssignmentResult:
    """Mélange's ILP: put every slice of traffic on one instance type and buy enough instances of each type.

    A type that serves a slice needs at least one instance. With loads above the solver's feasibility tolerance
    that follows from the integer counts; when some type ends up serving slices with zero instances (loads below
    the tolerance, e.g. a goodput target of 1e-5 req/s), the model is solved again with the explicit links
    ``z[b, g] <= k * n[g]`` (``link``), so the answer stays optimal instead of costing $0/h.

    ::

        minimize    Σ_g cost_g · n_g
        subject to  Σ_g x_{s,g} = 1                       for every slice s
                    Σ_s load_{s,g} · x_{s,g} ≤ n_g          for every type g   (load = slice rate / T_{g,b(s)})
                    Σ_g use_{r,g} · n_g ≤ cap_r             for every resource r (inventory)
                    x binary, n_g ∈ ℕ

    The k slices of one bucket are identical, so instead of k binaries per (bucket, type) the model uses one
    integer z_{b,g} ∈ [0, k] with Σ_g z_{b,g} = k: the same optimum without k! symmetric solutions.

    Args:
        type_cost: shape (G,), $/hour of one instance of type g.
        slice_load: shape (B, G), instances of type g that ONE slice of bucket b occupies; None where g cannot
            serve b.
        slices_per_bucket: k.
        usage, capacity: shape (R, G) and (R,), e.g. GPUs of a GPU model used by one instance of each type.
        mix_load: shape (G,), optional (the mixed strategy, :mod:`hetplan.solvers.mixed`): instances of column g
            that ALL the demand, served as the workload's own mix, occupies (None: g has no such mode). Adds a
            continuous f_g ∈ [0, 1], the share of every bucket g serves as the mix: the bucket rows become
            ``Σ_g z_{b,g} + k·Σ_g f_g = k`` and the load rows gain ``mix_load_g · f_g``; ``mix`` of the result.
        cost_cap: when set, only answers costing less are sought (``infeasible`` otherwise).
        settings: how HiGHS runs (:class:`SolveSettings`: its ``slice_presolve`` applies here).

    Source: Mélange (Griggs et al., 2024) for the formulation; inventory rows and the aggregation of identical
    slices are hetplan's.
    """
    n_types, n_buckets, k = len(type_cost), len(slice_load), int(slices_per_bucket)
    prob = pulp.LpProblem("melange", pulp.LpMinimize)
    counts = [_var(prob, f"n{g:03d}", None) for g in range(n_types)]
    z: dict[tuple[int, int], pulp.LpVariable] = {}
    empty = AssignmentResult("infeasible", tuple(0 for _ in counts), (), float("nan"))
    mix = _mix_vars(prob, mix_load)
    for b in range(n_buckets):
        for g in range(n_types):
            load = slice_load[b][g]
            if load is not None and load <= MAX_SLICE_LOAD:  # a slice needing more instances is no option
                z[b, g] = _var(prob, f"z{b:04d}_{g:03d}", k)
        options = [z[b, g] for g in range(n_types) if (b, g) in z]
        if not options and not mix:
            return empty
        terms_b = [(v, 1.0) for v in options] + [(f, float(k)) for f in mix.values()]
        prob += pulp.LpAffineExpression(terms_b) == k, f"bucket{b:04d}"
    for g in range(n_types):
        terms = [(z[b, g], float(slice_load[b][g] or 0.0)) for b in range(n_buckets) if (b, g) in z]
        if g in mix:
            assert mix_load is not None
            terms.append((mix[g], float(mix_load[g] or 0.0)))
            if link:
                prob += pulp.LpAffineExpression([(mix[g], 1.0), (counts[g], -1.0)]) <= 0, f"linkmix{g:03d}"
        terms.append((counts[g], -1.0))
        prob += pulp.LpAffineExpression(terms) <= 0, f"type{g:03d}"
        for b in range(n_buckets) if link else ():
            if (b, g) in z:
                prob += pulp.LpAffineExpression([(z[b, g], 1.0), (counts[g], -float(k))]) <= 0, f"link{b:04d}_{g:03d}"
    for r, row in enumerate(usage):
        cap = capacity[r] if r < len(capacity) else None
        if cap is not None and any(row):
            prob += _affine(counts, row) <= float(cap), f"res{r:03d}"
    cutoff = float(cost_cap) - 1e-9 if cost_cap is not None and math.isfinite(cost_cap) else None
    prob.setObjective(_affine(counts, type_cost))
    # HiGHS 1.16's full presolve was seen to stall on such models (67 types x 44 buckets): see SLICE_PRESOLVE
    solver = _solver(time_limit_s, 0.0, settings.slice_presolve, cutoff, settings)
    status = _below_cutoff(prob, _run(prob, solver), cutoff)
    if status not in ("optimal", "time_limit"):
        return AssignmentResult(status, empty.counts, (), float("nan"))
    slices = tuple(
        tuple(int(round(z[b, g].varValue or 0.0)) if (b, g) in z else 0 for g in range(n_types))
        for b in range(n_buckets)
    )
    n = tuple(int(round(v.varValue or 0.0)) for v in counts)
    shares = _mix_values(mix, n_types) if mix else ()
    serving = [any(row[g] for row in slices) or (bool(shares) and shares[g] > 0) for g in range(n_types)]
    if not link and any(n[g] == 0 and serving[g] for g in range(n_types)):
        return solve_slice_assignment(
            type_cost, slice_load, slices_per_bucket, usage, capacity, time_limit_s, True, mix_load, cost_cap, settings
        )
    return AssignmentResult(status, n, slices, sum(float(c) * m for c, m in zip(type_cost, n, strict=True)), shares)


MIX_SHARE_DIGITS = 9
"""Digits the mix shares of a solved model keep (solver noise below them is dropped, so equal inputs print equal
plans)."""


def _mix_vars(prob: pulp.LpProblem, mix_load: Sequence[float | None] | None) -> dict[int, Any]:
    """The continuous mix-share variables f_u ∈ [0, 1] of the columns with a whole-mix load (see
    :func:`solve_slice_assignment`)."""
    if mix_load is None:
        return {}
    return {
        u: prob.add_variable(f"f{u:05d}", lowBound=0, upBound=1, cat="Continuous")
        for u, v in enumerate(mix_load)
        if v is not None
    }


def _mix_values(mix: dict[int, Any], n: int) -> tuple[float, ...]:
    return tuple(round(float(mix[u].varValue or 0.0), MIX_SHARE_DIGITS) + 0.0 if u in mix else 0.0 for u in range(n))


@dataclass(frozen=True)
class MakespanResult:
    """Outcome of :func:`solve_min_makespan`: ``status``, units of item k on device j (``units``, shape (K, J)),
    the makespan ``max_j t_j`` (seconds when the inputs are seconds) and the MIP gap."""

    status: str
    units: tuple[tuple[int, ...], ...]
    makespan: float
    gap: float


def solve_min_makespan(
    work: Sequence[Sequence[float]],
    demand: Sequence[int],
    fixed: Sequence[float],
    memory: Sequence[Sequence[float]],
    memory_capacity: Sequence[float],
    time_limit_s: float = 10.0,
    mip_gap: float = 0.0,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> MakespanResult:
    """Place integer units of K items on J devices so that the slowest device finishes first (Hetis head split)::

        minimize    T
        subject to  Σ_j x_{k,j} = demand_k                                   for every item k
                    Σ_k work_{k,j}·x_{k,j} + fixed_j·u_j ≤ T                 for every device j
                    Σ_k mem_{k,j}·x_{k,j} ≤ cap_j                           for every device j
                    x_{k,j} ≤ demand_k·u_j,  x ∈ ℕ,  u ∈ {0, 1}

    ``u_j`` is 1 when device j takes any unit; it pays ``fixed_j`` (e.g. link latency) only then.

    Args:
        work: shape (K, J), time device j spends per unit of item k.
        demand: shape (K,), units of item k to place.
        fixed: shape (J,), time device j pays when used at all.
        memory, memory_capacity: shape (K, J) memory per unit and (J,) memory per device (same unit).
        settings: how HiGHS runs (:class:`SolveSettings`).

    Returns:
        :class:`MakespanResult`; status ``infeasible`` when memory cannot hold the demand.

    Source: the min-max formulation of Hetis (SC '25) head dispatch as DESIGN §3.3 writes it; the linking of
    ``fixed`` through binaries is hetplan's.
    """
    n_items, n_dev = len(demand), len(fixed)
    prob = pulp.LpProblem("min_makespan", pulp.LpMinimize)
    t = prob.add_variable("T", lowBound=0, cat="Continuous")
    x = [[_var(prob, f"x{k:03d}_{j:03d}", int(demand[k])) for j in range(n_dev)] for k in range(n_items)]
    u = [prob.add_variable(f"u{j:03d}", lowBound=0, upBound=1, cat="Integer") for j in range(n_dev)]
    for k in range(n_items):
        prob += _affine(x[k], [1.0] * n_dev) == int(demand[k]), f"demand{k:03d}"
    for j in range(n_dev):
        terms = [(x[k][j], float(work[k][j])) for k in range(n_items) if work[k][j]]
        terms += [(u[j], float(fixed[j])), (t, -1.0)]
        prob += pulp.LpAffineExpression(terms) <= 0, f"time{j:03d}"
        mem = [(x[k][j], float(memory[k][j])) for k in range(n_items) if memory[k][j]]
        if mem:
            prob += pulp.LpAffineExpression(mem) <= float(memory_capacity[j]), f"mem{j:03d}"
        for k in range(n_items):
            prob += pulp.LpAffineExpression([(x[k][j], 1.0), (u[j], -float(demand[k]))]) <= 0, f"use{k:03d}_{j:03d}"
    prob.setObjective(pulp.LpAffineExpression([(t, 1.0)]))
    status = _run(prob, _solver(time_limit_s, mip_gap, settings=settings))
    if status == "not_solved" and all(v.varValue is not None for row in x for v in row):
        status = "time_limit"
    if status not in ("optimal", "time_limit"):
        return MakespanResult(status, (), float("nan"), float("nan"))
    units = tuple(tuple(int(round(v.varValue or 0.0)) for v in row) for row in x)
    return MakespanResult(status, units, float(t.varValue or 0.0), _gap(prob))


@dataclass(frozen=True)
class PackedUnit:
    """A deployment-unit column of :func:`solve_packed`: ``usage`` serving instances per (GPU, TP) in one copy,
    the ``site`` all of them must share (None: any site, each instance wherever), goodput ``value`` (req/s, for the
    covering row), $/hour not paid through purchases (``extra_usd_per_hour``, e.g. WAN egress) and an optional
    upper bound on copies. ``usage_sites``, when set, gives a site per ``usage`` entry instead (a cross-site combo:
    its prefill instances at one site, its decode instances at another)."""

    usage: tuple[tuple[tuple[str, int], int], ...]
    site: str | None
    value: float = 0.0
    extra_usd_per_hour: float = 0.0
    upper: int | None = None
    usage_sites: tuple[str, ...] = ()

    def placed_usage(self) -> tuple[tuple[str | None, str, int, int], ...]:
        """``(site, gpu, tp, serving instances)`` per usage entry (``usage_sites`` where set, else ``site``)."""
        sites: tuple[str | None, ...] = self.usage_sites or tuple(self.site for _ in self.usage)
        return tuple((s, g, t, n) for s, ((g, t), n) in zip(sites, self.usage, strict=True))


@dataclass(frozen=True)
class PackedBin:
    """A purchasable offer for :func:`solve_packed`: ``gpus`` GPUs of ``gpu`` per instance at ``usd_per_hour``,
    in ``site``; ``hosts``: the TP degrees one instance group can host; ``count``: instances available (None =
    unlimited)."""

    site: str
    gpu: str
    gpus: int
    usd_per_hour: float
    hosts: tuple[int, ...]
    count: int | None = None


@dataclass(frozen=True)
class PackedResult:
    """Outcome of :func:`solve_packed`: copies per unit, instances bought per bin, serving instances of each TP
    placed on each bin (``placed[(bin, tp)]``), total $/hour and the MIP gap."""

    status: str
    units: tuple[int, ...]
    bought: tuple[int, ...]
    placed: dict[tuple[int, int], int]
    objective: float
    gap: float
    slices: tuple[tuple[int, ...], ...] = ()
    mix: tuple[float, ...] = ()


def solve_packed(
    units: Sequence[PackedUnit],
    bins: Sequence[PackedBin],
    demand: float = 0.0,
    slice_load: Sequence[Sequence[float | None]] | None = None,
    slices_per_bucket: int = 1,
    second_stage_epsilon: float | None = 1e-9,
    time_limit_s: float = 30.0,
    mip_gap: float = 0.0,
    link: bool = False,
    cost_cap: float | None = None,
    mix_load: Sequence[float | None] | None = None,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> PackedResult:
    """The deployment MILP that buys whole instances and packs serving instances onto them::

        minimize    Σ_b price_b · x_b + Σ_u extra_u · y_u
        subject to  Σ_u value_u · y_u ≥ demand                                  (goodput; combos)
                    Σ_u z_{k,u} = K,  Σ_k load_{k,u} · z_{k,u} ≤ y_u            (Mélange slices, if given)
                    Σ_{u in s} use_{u,g,t} · y_u ≤ Σ_{b in s, gpu g} p_{b,t}     per site s, GPU g, TP t
                    Σ_u use_{u,g,t} · y_u ≤ Σ_{b, gpu g} p_{b,t}                 per g, t (only with any-site units)
                    Σ_t t · p_{b,t} ≤ gpus_b · x_b,   x_b ≤ count_b              per bin
                    x, y, p, z ∈ ℕ,   Σ_u y_u ≥ 1

    ``p_{b,t}`` exists only for TP degrees the bin hosts (a TP group inside one instance, or across instances of a
    scale-up domain). With power-of-two TP degrees that divide the instance's GPUs, the aggregate row packs
    exactly (first-fit decreasing fills each instance); :func:`pack_instances` does that placement.

    Args:
        units: the columns (combos at a site, or aggregated instance types at a site).
        bins: the offers that may be bought.
        demand: required Σ value·y (0 with ``slice_load``).
        slice_load: shape (K, U): units' worth of one slice of bucket k on unit u (None: cannot serve).
        slices_per_bucket: K slices per bucket.
        second_stage_epsilon: if not None, re-solve for the fewest unit copies at cost ≤ (1+ε)·optimum.
        cost_cap: when set, only answers costing less are sought (``infeasible`` otherwise): how a caller that
            already holds a cheaper answer elsewhere skips this model quickly.
        link: add ``z_{k,u} ≤ K·y_u`` (set on the retry when a unit serves slices with no copy, loads being below
            the solver's tolerance, as :func:`solve_slice_assignment` does).
        mix_load: shape (U,), with ``slice_load`` only: units' worth of ALL the demand served as the workload's mix
            on unit u (None: no such mode), as in :func:`solve_slice_assignment` (the mixed strategy).
        settings: how HiGHS runs (:class:`SolveSettings`; its ``slice_presolve`` applies with ``slice_load``).

    Returns:
        :class:`PackedResult`; status ``infeasible`` when no purchase meets the demand.

    Source: hetplan's own reconstruction (Cauchy's and Mélange's ILPs with a bin-packing purchase layer).
    """
    n, m = len(units), len(bins)
    empty = PackedResult("infeasible", tuple(0 for _ in units), tuple(0 for _ in bins), {}, float("nan"), float("nan"))
    if not n:
        return empty

    def build(name: str) -> tuple[pulp.LpProblem, list[Any], list[Any], dict[tuple[int, int], Any], dict[Any, Any]]:
        prob = pulp.LpProblem(name, pulp.LpMinimize)
        ys = [_var(prob, f"y{i:05d}", units[i].upper) for i in range(n)]
        xs = [_var(prob, f"x{j:04d}", bins[j].count) for j in range(m)]
        ps = {(j, t): _var(prob, f"p{j:04d}_{t}", None) for j in range(m) for t in bins[j].hosts}
        zs: dict[Any, Any] = {}
        if demand > 0:
            prob += _affine(ys, [u.value for u in units]) >= float(demand), "demand"
        prob += _affine(ys, [1.0] * n) >= 1, "not_empty"
        if slice_load is not None:
            k = int(slices_per_bucket)
            mix = _mix_vars(prob, mix_load)
            for u, f in mix.items():
                zs["mix", u] = f
            for b, row in enumerate(slice_load):
                opts = [(u, v) for u, v in enumerate(row) if v is not None and v <= MAX_SLICE_LOAD]
                if not opts and not mix:
                    return prob, ys, xs, ps, {"infeasible": True}
                for u, _ in opts:
                    zs[b, u] = _var(prob, f"z{b:04d}_{u:05d}", k)
                terms_b = [(zs[b, u], 1.0) for u, _ in opts] + [(f, float(k)) for f in mix.values()]
                prob += pulp.LpAffineExpression(terms_b) == k, f"bucket{b:04d}"
            for u in range(n):
                terms = [(zs[b, u], float(slice_load[b][u] or 0.0)) for b in range(len(slice_load)) if (b, u) in zs]
                if u in mix:
                    assert mix_load is not None
                    terms.append((mix[u], float(mix_load[u] or 0.0)))
                    if link:
                        prob += pulp.LpAffineExpression([(mix[u], 1.0), (ys[u], -1.0)]) <= 0, f"linkmix{u:05d}"
                if terms:
                    prob += pulp.LpAffineExpression([*terms, (ys[u], -1.0)]) <= 0, f"load{u:05d}"
            for b, u in sorted(key for key in zs if key[0] != "mix") if link else ():  # loads below the tolerance
                prob += pulp.LpAffineExpression([(zs[b, u], 1.0), (ys[u], -float(k))]) <= 0, f"link{b:04d}_{u:05d}"
        need: dict[tuple[str | None, str, int], list[tuple[Any, float]]] = {}
        for i, unit in enumerate(units):
            for site_of, gpu, tp, count in unit.placed_usage():
                need.setdefault((site_of, gpu, tp), []).append((ys[i], float(count)))
        any_site = any(u.site is None for u in units)
        rows = sorted(need.items(), key=lambda kv: (kv[0][0] or "", kv[0][1], kv[0][2]))
        for r, ((site, gpu, tp), terms) in enumerate(rows):
            if site is None:
                continue
            supply = [
                (ps[j, tp], -1.0) for j in range(m) if bins[j].site == site and bins[j].gpu == gpu and (j, tp) in ps
            ]
            prob += pulp.LpAffineExpression(terms + supply) <= 0, f"place{r:05d}"
        if any_site:
            total: dict[tuple[str, int], list[tuple[Any, float]]] = {}
            for (_, gpu, tp), terms in need.items():
                total.setdefault((gpu, tp), []).extend(terms)
            for r, ((gpu, tp), terms) in enumerate(sorted(total.items())):
                supply = [(ps[j, tp], -1.0) for j in range(m) if bins[j].gpu == gpu and (j, tp) in ps]
                prob += pulp.LpAffineExpression(terms + supply) <= 0, f"all{r:05d}"
        for j, one in enumerate(bins):
            terms = [(ps[j, t], float(t)) for t in one.hosts]
            if terms:
                prob += pulp.LpAffineExpression([*terms, (xs[j], -float(one.gpus))]) <= 0, f"bin{j:04d}"
        return prob, ys, xs, ps, zs

    def objective(ys: list[Any], xs: list[Any]) -> pulp.LpAffineExpression:
        terms = [(x, float(b.usd_per_hour)) for x, b in zip(xs, bins, strict=True) if b.usd_per_hour]
        terms += [(y, float(u.extra_usd_per_hour)) for y, u in zip(ys, units, strict=True) if u.extra_usd_per_hour]
        return pulp.LpAffineExpression(terms)

    prob, ys, xs, ps, zs = build("packed")
    if zs.get("infeasible"):
        return empty
    cutoff = float(cost_cap) - 1e-9 if cost_cap is not None and math.isfinite(cost_cap) else None
    prob.setObjective(objective(ys, xs))
    # slice (Mélange-shaped) models: HiGHS's light presolve, its full one stalls on some (SLICE_PRESOLVE)
    presolve = "on" if slice_load is None else settings.slice_presolve
    status = _run(prob, _solver(time_limit_s, mip_gap, presolve, cutoff, settings))
    if status == "not_solved" and all(v.varValue is not None for v in ys):
        status = "time_limit"
    status = _below_cutoff(prob, status, cutoff)
    if status not in ("optimal", "time_limit"):
        return empty
    gap = _gap(prob)
    best = float(pulp.value(prob.objective) or 0.0)
    if second_stage_epsilon is not None:
        prob2, y2, x2, p2, z2 = build("packed_fewest")
        prob2 += objective(y2, x2) <= best * (1 + second_stage_epsilon) + 1e-9, "cost"
        prob2.setObjective(_affine(y2, [1.0] * n))
        if _run(prob2, _solver(time_limit_s, mip_gap, presolve, settings=settings)) in ("optimal", "time_limit"):
            ys, xs, ps, zs = y2, x2, p2, z2
    out = _packed_result(status, units, bins, ys, ps, zs, slice_load, gap)
    if mix_load is not None and slice_load is not None:
        mixed = {u: zs["mix", u] for u in range(n) if ("mix", u) in zs}
        out = replace(out, mix=_mix_values(mixed, n))
    if (
        slice_load is not None
        and not link
        and any(
            out.units[u] == 0 and (any(row[u] for row in out.slices) or (out.mix and out.mix[u] > 0)) for u in range(n)
        )
    ):
        return solve_packed(units, bins, demand, slice_load, slices_per_bucket, second_stage_epsilon, time_limit_s,
                            mip_gap, True, cost_cap, mix_load, settings)  # fmt: skip
    return out


def _packed_result(
    status: str,
    units: Sequence[PackedUnit],
    bins: Sequence[PackedBin],
    ys: list[Any],
    ps: dict[tuple[int, int], Any],
    zs: dict[Any, Any],
    slice_load: Sequence[Sequence[float | None]] | None,
    gap: float,
) -> PackedResult:
    """Round the incumbent, keep only the placements units need, and buy the fewest instances that hold them
    (an owned instance at $0 may sit at any count in the optimum; the placement decides what is used)."""
    counts = tuple(int(round(v.varValue or 0.0)) for v in ys)
    raw = {key: int(round(v.varValue or 0.0)) for key, v in ps.items()}
    # trim placements above what the units need, per (site, gpu, tp), taking from the most expensive bins first
    need: dict[tuple[str | None, str, int], int] = {}
    for u, c in zip(units, counts, strict=True):
        for site_of, gpu, tp, k in u.placed_usage():
            need[(site_of, gpu, tp)] = need.get((site_of, gpu, tp), 0) + k * c
    placed: dict[tuple[int, int], int] = {}
    order = sorted(raw, key=lambda key: (bins[key[0]].usd_per_hour / bins[key[0]].gpus, key))
    for site, gpu, tp in sorted(need, key=lambda k: (k[0] is None, k[0] or "", k[1], k[2])):
        left = need[(site, gpu, tp)]
        for j, t in order:
            if left <= 0:
                break
            b = bins[j]
            if t != tp or b.gpu != gpu or (site is not None and b.site != site):
                continue
            take = min(left, raw[j, t] - placed.get((j, t), 0))
            if take > 0:
                placed[j, t] = placed.get((j, t), 0) + take
                left -= take
    bought = tuple(-(-sum(t * placed.get((j, t), 0) for t in b.hosts) // b.gpus) for j, b in enumerate(bins))
    objective = sum(b.usd_per_hour * x for b, x in zip(bins, bought, strict=True))
    objective += sum(u.extra_usd_per_hour * c for u, c in zip(units, counts, strict=True))
    slices: tuple[tuple[int, ...], ...] = ()
    if slice_load is not None:
        slices = tuple(
            tuple(int(round(zs[b, u].varValue or 0.0)) if (b, u) in zs else 0 for u in range(len(units)))
            for b in range(len(slice_load))
        )
    return PackedResult(status, counts, bought, {k: v for k, v in sorted(placed.items()) if v}, objective, gap, slices)


def pack_instances(gpus_per_instance: int, groups: Sequence[int]) -> list[list[int]]:
    """First-fit decreasing: the TP groups (sizes in GPUs) placed on instances of ``gpus_per_instance`` GPUs; a
    group larger than one instance takes whole instances (a scale-up domain). Returns the groups per instance."""
    inst: list[list[int]] = []
    free: list[int] = []
    for size in sorted(groups, reverse=True):
        if size >= gpus_per_instance:
            for _ in range(-(-size // gpus_per_instance)):
                inst.append([size])
                free.append(0)
            continue
        for i, room in enumerate(free):
            if room >= size:
                inst[i].append(size)
                free[i] -= size
                break
        else:
            inst.append([size])
            free.append(gpus_per_instance - size)
    return inst
