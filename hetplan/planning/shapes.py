"""``--strategy all`` re-sizing (:func:`hetplan.planning.verify.plan_verified`): when the analytically cheapest
shape misses in simulation, every feasible shape is re-sized on its own and the cheapest verified plan is kept.
Money in $/hour, headrooms as fractions of the goodput target.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetplan.errors import InfeasibleError
from hetplan.plan.blocks import ResizeAttempt, Resized, ShapeResize, Verification
from hetplan.plan.types import STRATEGIES, Plan
from hetplan.planning.resize import (
    RESIZE_METHOD,
    Attempt,
    NoCheaper,
    Stage,
    resize_until_verified,
    rnd_headroom,
    signature,
)


def resize_every_shape(
    first: Plan,
    v0: Verification,
    base: float,
    planner_for: Callable[[str], Attempt],
    check: Callable[[Plan, str], Verification],
    stage: Stage,
) -> tuple[Plan, float, Resized, str]:
    """Re-size each shape of ``first`` (its strategy and its baselines), cheapest first, from headroom ``base``
    (``v0``: ``first``'s verification block; ``planner_for(name)``: the attempts of shape ``name``; ``check``: a
    plan's block); returns the cheapest verified plan, its headroom, the ``resized`` record (every shape's
    outcome in ``per_strategy``) and its shape. ``stage`` names the shape and attempt that run (progress).

    Raises:
        InfeasibleError: no shape gives a verified plan (each shape's reason named).
    """
    # --strategy all: the analytically cheapest shape missed. Each feasible shape is re-sized on its own, cheapest
    # first, and the cheapest verified plan is kept: a shape the model over-promises more (aggregated instances on
    # bursty traffic) may need more re-sizing than another that was dearer on paper. A shape whose unverified plan
    # already costs more than a verified one is skipped (re-sizing only adds capacity).
    shapes = sorted(
        [(first.total_usd_per_hour, first.strategy)]
        + [(float(b.total_usd_per_hour), name) for name, b in first.baselines.items()
           if b.total_usd_per_hour is not None and name in STRATEGIES],
        key=lambda x: (x[0], STRATEGIES.index(x[1]) if x[1] in STRATEGIES else 99),
    )  # fmt: skip
    found: list[tuple[Plan, float, Resized | None, str]] = []  # None: verified without re-sizing
    per_shape: list[ShapeResize] = []
    # a shape whose first plan is another shape's deployment (a mixed plan that found no cheaper mix is the Mélange
    # plan) would re-size along the same plans: it waits until the others are done, when a verified plan's cost
    # stops it as soon as it is no cheaper
    queue: list[tuple[int, float, str, Plan | None]] = [
        (n, cost, name, None) for n, (cost, name) in enumerate(shapes, 1)
    ]
    starts: dict[tuple[Any, ...], str] = {}
    while queue:
        n_shape, cost, name, start_made = queue.pop(0)
        stage.shape = f"the {name} plan (shape {n_shape} of {len(shapes)})"
        stage.label = stage.shape
        if found and cost >= min(p.total_usd_per_hour for p, *_ in found) - 1e-9:
            per_shape.append(ShapeResize(strategy=name, skipped=f"its plan before re-sizing costs ${cost:,.2f}/h"))
            continue
        shape_attempt = planner_for(name)
        start = start_made or (first if name == first.strategy else shape_attempt(base, False))
        key = signature(start)
        if start_made is None and key in starts and queue:
            queue.append((n_shape, cost, name, start))
            continue
        starts.setdefault(key, name)
        v_start = v0 if start is first else check(start, "steer")
        log: list[ResizeAttempt] = []  # this shape's plans, as simulated (its first plan included)
        cap = min((p.total_usd_per_hour for p, *_ in found), default=None)
        resized: Resized | None
        try:
            if v_start.verified:
                best, hi, resized = start, base, None
            else:
                best, hi, resized = resize_until_verified(start, v_start, base, shape_attempt, check, log, stage, cap)
        except InfeasibleError as exc:
            per_shape.append(ShapeResize(strategy=name, infeasible=exc.why or exc.what, plans_tried=len(log)))
            continue
        except NoCheaper as exc:
            per_shape.append(ShapeResize(strategy=name, skipped=f"re-sized to ${exc.usd_per_hour:,.2f}/h, no cheaper "
                                         f"than the verified ${exc.cap:,.2f}/h", plans_tried=len(log)))  # fmt: skip
            continue
        per_shape.append(
            ShapeResize(
                strategy=name, usd_per_hour=best.total_usd_per_hour, headroom=rnd_headroom(hi), plans_tried=len(log)
            )  # fmt: skip
        )
        found.append((best, hi, resized, name))
    if not found:
        raise InfeasibleError(
            "no re-sized plan holds its SLOs in simulation, whichever shape (--strategy all re-sizes each)",
            "; ".join(f"{s.strategy}: {s.infeasible or s.skipped}" for s in per_shape),
            "lower the goodput target or relax the SLOs, add inventory, or plan with --no-resize to keep the "
            "unverified plan",
        )
    best, hi, kept, name = min(found, key=lambda x: (x[0].total_usd_per_hour, STRATEGIES.index(x[3])))
    method = RESIZE_METHOD + "; with --strategy all every shape is re-sized and the cheapest verified kept"
    # the shape kept may have verified without re-sizing (kept is then None): the first plan's figures; the fields
    # are written in the order given here (a re-sized shape's method after the costs, else last)
    if kept is None:
        fields: dict[str, Any] = {
            "attempts": [],
            "analytic_capacity_before_req_per_s": first.goodput_req_per_s,
            "simulated_capacity_before_req_per_s": v0.simulated_capacity_req_per_s,
            "out_of_sample_capacity_before_req_per_s": v0.out_of_sample_capacity_req_per_s,
        }
    else:
        fields = {
            "attempts": kept.attempts,
            "analytic_capacity_before_req_per_s": kept.analytic_capacity_before_req_per_s,
            "simulated_capacity_before_req_per_s": kept.simulated_capacity_before_req_per_s,
            "out_of_sample_capacity_before_req_per_s": kept.out_of_sample_capacity_before_req_per_s,
        }
    fields |= {
        "headroom_asked": base,
        "headroom_used": rnd_headroom(hi),
        "usd_per_hour_before": first.total_usd_per_hour,
        "usd_per_hour_after": best.total_usd_per_hour,
    }
    if kept is not None:
        fields["method"] = method
    fields.update(strategy_before=first.strategy, strategy_after=name, per_strategy=per_shape, method=method)
    return best, hi, Resized(**fields), name


__all__ = ["resize_every_shape"]
