"""The slice MILPs: Mélange's assignment of request-size slices to instance types (:func:`solve_slice_assignment`,
with the mixed strategy's shares of a whole mix), and the fewest-seconds split of work over devices
(:func:`solve_min_makespan`, Hetis's head split, :mod:`hetplan.solvers.headsplit`). How HiGHS runs them:
:mod:`hetplan.solvers.milp`.

Source: hetplan's own reconstruction of Mélange's slice ILP (Griggs et al. 2024) and of Hetis's head split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulp

from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings, _affine, _below_cutoff, _gap, _run, _solver, _var

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
