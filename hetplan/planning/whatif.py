"""The what-if solves of a plan's analysis: every strategy re-planned at each GPU's price x0.8 and x1.2
(:func:`price_sensitivity`) and at multiples of the goodput target (:func:`cost_vs_goodput`), through one
:class:`~hetplan.planning.solve.Planner` and :func:`hetplan.solvers.milp_threads.solve_in_threads`; and, for a
scenario with request classes, what the plan's strategy would cost with every request held to the tightest SLOs
(:func:`tightest_sizing_note`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from hetplan.catalog.pricing import GpuPrice
from hetplan.errors import HetplanError
from hetplan.plan.types import STRATEGIES
from hetplan.planning.solve import Planner, Solved
from hetplan.solvers.cauchy import PlanRequest
from hetplan.solvers.milp_threads import solve_in_threads
from hetplan.units import rnd
from hetplan.workload.model import Workload

PRICE_FACTORS = (0.8, 1.2)
GOODPUT_FACTORS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)


def _price_neutral(base: Solved, gpu: str, factor: float) -> bool:
    """Whether re-planning at ``gpu``'s price x ``factor`` must give ``base`` back, so the solve can be skipped
    (exact): prices never change feasibility, so an infeasible strategy stays infeasible; and when the price rises on
    a GPU the optimum neither uses nor buys, that optimum keeps its cost while every other deployment's cost stays
    or rises. hetplan's own shortcut (it halves example (a)'s price-sensitivity solves)."""
    if base.error is not None:
        return True
    bought = {line.gpu for line in base.purchase.lines} if base.purchase is not None else set()
    return factor >= 1.0 and gpu not in base.gpus_used() and gpu not in bought


def price_sensitivity(
    planner: Planner, strategy: str, chosen: Solved, solved: Mapping[str, Solved] | None = None
) -> list[dict[str, Any]]:
    """Per GPU type and price factor (x0.8, x1.2): the plan's cost at the new price, the re-planned cost and the
    best other strategy. ``solved``: every strategy's optimum at today's prices when the caller has them (the
    plan's own solves; re-solved otherwise)."""
    req = planner.req
    used = chosen.gpus_used()
    base = dict(solved) if solved is not None else {}
    missing = [name for name in STRATEGIES if name not in base]
    planner.types  # noqa: B018  (computed once here, before the threads share the planner)
    # what-if solves at today's prices
    base.update(
        zip(
            missing,
            solve_in_threads([_task(planner, n, dict(req.prices)) for n in missing], settings=req.solve),
            strict=True,
        )
    )
    cases = []
    for gpu in sorted(req.prices):
        for factor in PRICE_FACTORS:
            prices = dict(req.prices)
            prices[gpu] = replace(req.prices[gpu], usd_per_gpu_hour=req.prices[gpu].usd_per_gpu_hour * factor)
            cases.append((gpu, factor, prices))
    todo = [
        (i, name)
        for i, (gpu, factor, _) in enumerate(cases)
        for name in STRATEGIES
        if not _price_neutral(base[name], gpu, factor)
    ]
    found = dict(
        zip(todo, solve_in_threads([_task(planner, n, cases[i][2]) for i, n in todo], settings=req.solve), strict=True)
    )
    rows = []
    for i, (gpu, factor, prices) in enumerate(cases):
        same = sum(n * prices[g].usd_per_gpu_hour for g, n in used.items())
        bought = chosen.purchase
        if bought is not None:
            same = sum(p.usd_per_hour * (factor if p.gpu == gpu else 1.0) for p in bought.lines)
        best = {name: found.get((i, name), base[name]) for name in STRATEGIES}
        rows.append(
            {
                "gpu": gpu,
                "price_factor": factor,
                "plan_usd_per_hour": rnd(same),
                "replanned_usd_per_hour": rnd(best[strategy].cost) if best[strategy].error is None else None,
                "replanned_gpus_used": best[strategy].gpus_used(),
                "best_alternative": min((s.cost, n) for n, s in best.items() if n != strategy)[1]
                if any(s.error is None for n, s in best.items() if n != strategy)
                else None,
                "best_alternative_usd_per_hour": rnd(min(s.cost for n, s in best.items() if n != strategy))
                if any(s.error is None for n, s in best.items() if n != strategy)
                else None,
            }
        )
    return rows


def cost_vs_goodput(planner: Planner, solved: Mapping[str, Solved] | None = None) -> list[dict[str, Any]]:
    """Every strategy's cost at each goodput factor of the target (None where infeasible); ``solved``: the
    strategies' optima at the target itself (factor 1), when the caller has them."""
    known = dict(solved) if solved is not None else {}
    todo = [
        (factor, name) for factor in GOODPUT_FACTORS for name in STRATEGIES if not (factor == 1.0 and name in known)
    ]
    planner.types  # noqa: B018  (computed once here, before the threads share the planner)
    found = dict(
        zip(
            todo,
            solve_in_threads([_task(planner, n, None, f) for f, n in todo], settings=planner.req.solve),
            strict=True,
        )
    )
    rows = []
    for factor in GOODPUT_FACTORS:
        row: dict[str, Any] = {"goodput_req_per_s": rnd(planner.req.goodput_req_per_s * factor)}
        for name in STRATEGIES:
            s = found[factor, name] if (factor, name) in found else known[name]
            row[f"{name}_usd_per_hour"] = rnd(s.cost) if s.error is None else None
        rows.append(row)
    return rows


def _task(
    planner: Planner, strategy: str, prices: dict[str, GpuPrice] | None, demand_scale: float = 1.0
) -> Callable[[], Solved]:
    """One what-if solve, for :func:`hetplan.solvers.milp_threads.solve_in_threads`."""
    return lambda: planner.solve(strategy, prices, demand_scale)


#: The strategies whose combos are sized per class (the others have nothing to compare).
PER_CLASS_STRATEGIES = ("cauchy", "homogeneous", "mixed")


def tightest_sizing_note(req: PlanRequest, workload: Workload, strategy: str, cost_usd_per_hour: float) -> str | None:
    """One sentence for the plan's warnings: what ``strategy`` costs ($/h) when every request is held to the
    tightest SLOs among the classes (``PlanRequest.class_slos`` empty, the rule before per-class sizing), beside the
    per-class plan's ``cost_usd_per_hour``; None without classes, for a strategy whose instances are not sized per
    class (Mélange's buckets use the tightest SLOs either way), or for a plan without a cost. Costs one more solve of
    ``strategy`` (candidate enumeration and MILP). Source: hetplan's own reconstruction."""
    if not req.class_slos or strategy not in PER_CLASS_STRATEGIES or not cost_usd_per_hour > 0:
        return None
    tight = replace(req, class_slos=())
    slos = f"TTFT {req.ttft_slo_s:g} s, TPOT {req.tpot_slo_s * 1e3:g} ms"
    means = (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean()))
    head = f"request classes sized per class (each class's own TTFT over its own requests): ${cost_usd_per_hour:.2f}/h"
    try:
        other = Planner(tight, means).solve(strategy)
    except HetplanError as exc:  # a what-if: its failure is reported, never fatal to the plan
        return f"{head}; held to the tightest SLOs ({slos}) no {strategy} plan was found ({exc.what})"
    if other.error is not None:
        return f"{head}; held to the tightest SLOs ({slos}) no {strategy} plan meets the target ({other.error.what})"
    diff = other.cost / cost_usd_per_hour - 1.0
    change = "the same" if abs(diff) < 5e-5 else f"{diff:+.1%}"
    return f"{head}; held to the tightest SLOs ({slos}) the {strategy} plan would cost ${other.cost:.2f}/h ({change})"


__all__ = [
    "GOODPUT_FACTORS",
    "PER_CLASS_STRATEGIES",
    "PRICE_FACTORS",
    "cost_vs_goodput",
    "price_sensitivity",
    "tightest_sizing_note",
]
