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
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pulp


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null for the duration (C-level prints included)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


@dataclass(frozen=True)
class MilpResult:
    """Outcome: ``status`` ("optimal", "infeasible", "time_limit", …), integer ``counts`` per column,
    ``objective`` (cost), ``gap`` (relative MIP gap reported by HiGHS, 0 when proven optimal)."""

    status: str
    counts: tuple[int, ...]
    objective: float
    gap: float


class _InterruptibleHiGHS(pulp.HiGHS):  # type: ignore[misc, name-defined, unused-ignore]
    """PuLP's HiGHS, solved so that Ctrl-C, SIGTERM and ``--timeout`` stop it within a fraction of a second.

    PuLP calls ``Highs.run()``, which holds the main thread in C++ until HiGHS returns: Python's signal handlers
    cannot run until then (a hard MIP ignored Ctrl-C for its whole time limit). Here HiGHS runs in highspy's
    solver thread while the main thread waits in 50 ms slices (a lock wait that signals interrupt); when a
    handler raises, HiGHS is told to stop (its interrupt callbacks are checked many times a second), the thread
    is joined and the exception goes on. Measured with ``benchmarks/highs_interrupt.py``."""

    def callSolver(self, lp: pulp.LpProblem) -> None:
        model = lp.solverModel
        model.HandleUserInterrupt = True  # subscribes the interrupt callbacks that cancelSolve() trips
        model.startSolve()
        try:
            while not model.wait(0.05)[0]:
                pass
        except BaseException:
            model.cancelSolve()
            model.wait()
            raise


def _solver(time_limit_s: float, gap: float, presolve: bool = True) -> pulp.LpSolver:
    options = {} if presolve else {"presolve": "off"}
    return _InterruptibleHiGHS(msg=False, timeLimit=time_limit_s, gapRel=gap, threads=1, **options)


def _run(prob: pulp.LpProblem, solver: pulp.LpSolver) -> str:
    with quiet_stdout():
        prob.solve(solver)
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
    status = _run(prob, _solver(time_limit_s, mip_gap))
    if status != "optimal":
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
        if _run(prob2, _solver(time_limit_s, mip_gap)) == "optimal":
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
) -> float:
    """Largest Σ value·y (y integer ≥ 0) within the resource capacities; inf if some column is unbounded."""
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
    status = _run(prob, _solver(time_limit_s, 0.0))
    return float(pulp.value(prob.objective) or 0.0) if status == "optimal" else 0.0


MAX_SLICE_LOAD = 1e4


@dataclass(frozen=True)
class AssignmentResult:
    """Outcome of :func:`solve_slice_assignment`: ``status``, instances per type (``counts``), slices of each
    bucket given to each type (``slices``, shape (B, G)) and the cost."""

    status: str
    counts: tuple[int, ...]
    slices: tuple[tuple[int, ...], ...]
    objective: float


def solve_slice_assignment(
    type_cost: Sequence[float],
    slice_load: Sequence[Sequence[float | None]],
    slices_per_bucket: int,
    usage: Sequence[Sequence[float]] = (),
    capacity: Sequence[float | None] = (),
    time_limit_s: float = 30.0,
    link: bool = False,
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

    Source: Mélange (Griggs et al., 2024) for the formulation; inventory rows and the aggregation of identical
    slices are hetplan's.
    """
    n_types, n_buckets, k = len(type_cost), len(slice_load), int(slices_per_bucket)
    prob = pulp.LpProblem("melange", pulp.LpMinimize)
    counts = [_var(prob, f"n{g:03d}", None) for g in range(n_types)]
    z: dict[tuple[int, int], pulp.LpVariable] = {}
    empty = AssignmentResult("infeasible", tuple(0 for _ in counts), (), float("nan"))
    for b in range(n_buckets):
        for g in range(n_types):
            load = slice_load[b][g]
            if load is not None and load <= MAX_SLICE_LOAD:  # a slice needing more instances is no option
                z[b, g] = _var(prob, f"z{b:04d}_{g:03d}", k)
        options = [z[b, g] for g in range(n_types) if (b, g) in z]
        if not options:
            return empty
        prob += _affine(options, [1.0] * len(options)) == k, f"bucket{b:04d}"
    for g in range(n_types):
        terms = [(z[b, g], float(slice_load[b][g] or 0.0)) for b in range(n_buckets) if (b, g) in z]
        terms.append((counts[g], -1.0))
        prob += pulp.LpAffineExpression(terms) <= 0, f"type{g:03d}"
        for b in range(n_buckets) if link else ():
            if (b, g) in z:
                prob += pulp.LpAffineExpression([(z[b, g], 1.0), (counts[g], -float(k))]) <= 0, f"link{b:04d}_{g:03d}"
    for r, row in enumerate(usage):
        cap = capacity[r] if r < len(capacity) else None
        if cap is not None and any(row):
            prob += _affine(counts, row) <= float(cap), f"res{r:03d}"
    prob.setObjective(_affine(counts, type_cost))
    # HiGHS 1.16's presolve was seen to stall on such models (67 types x 44 buckets) without honouring its time
    # limit; without presolve the same model solves to proven optimality in about 0.2 s.
    status = _run(prob, _solver(time_limit_s, 0.0, presolve=False))
    if status != "optimal":
        return AssignmentResult(status, empty.counts, (), float("nan"))
    slices = tuple(
        tuple(int(round(z[b, g].varValue or 0.0)) if (b, g) in z else 0 for g in range(n_types))
        for b in range(n_buckets)
    )
    n = tuple(int(round(v.varValue or 0.0)) for v in counts)
    if not link and any(n[g] == 0 and any(row[g] for row in slices) for g in range(n_types)):
        return solve_slice_assignment(type_cost, slice_load, slices_per_bucket, usage, capacity, time_limit_s, True)
    return AssignmentResult(status, n, slices, sum(float(c) * m for c, m in zip(type_cost, n, strict=True)))


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
    status = _run(prob, _solver(time_limit_s, mip_gap))
    if status == "not_solved" and all(v.varValue is not None for row in x for v in row):
        status = "time_limit"
    if status not in ("optimal", "time_limit"):
        return MakespanResult(status, (), float("nan"), float("nan"))
    units = tuple(tuple(int(round(v.varValue or 0.0)) for v in row) for row in x)
    return MakespanResult(status, units, float(t.varValue or 0.0), _gap(prob))
