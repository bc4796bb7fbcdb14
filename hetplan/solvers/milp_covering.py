"""The covering ILP Cauchy (and the autoscaler) reduce to, and the most value a resource inventory can hold.

:func:`solve_covering` solves::

    minimize    Σ_c cost_c · y_c
    subject to  Σ_c value_c · y_c ≥ demand                   (goodput)
                Σ_c y_c ≥ 1                                 (a deployment is never empty)
                Σ_c use_{c,g} · y_c ≤ cap_g     for each g  (inventory)
                y_c ∈ {0, 1, 2, …}, y_c ≤ ub_c

and optionally a second, lexicographic stage: among solutions with cost ≤ (1+ε)·optimum, fewest units.
:func:`max_value` maximises Σ value·y within the capacities alone. How HiGHS runs them: :mod:`hetplan.solvers.milp`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulp

from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings, _affine, _gap, _run, _solver, _var


@dataclass(frozen=True)
class MilpResult:
    """Outcome: ``status`` ("optimal", "infeasible", "time_limit", …), integer ``counts`` per column,
    ``objective`` (cost), ``gap`` (relative MIP gap reported by HiGHS, 0 when proven optimal)."""

    status: str
    counts: tuple[int, ...]
    objective: float
    gap: float


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
