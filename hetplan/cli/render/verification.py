"""The simulated check of ``hetplan plan`` (``--verify``, :mod:`hetplan.sim.verify`) in words: the capacity line,
and on stderr the re-size, the simulated prefix-cache hits, the cheaper search, per-class attainment, CASCADE's
settings and the simulated warnings and misses (the verdict itself is in the plan's first block,
:func:`hetplan.cli.render.plan.render_plan`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from hetplan.cli.render.format import print_warnings

if TYPE_CHECKING:  # the CLI loads hetplan.plan only when a command runs (tests/cli/test_structure.py)
    from hetplan.plan.blocks import CascadeSettings, CheaperSearch, Resized, Verification


def capacity_line(v: Verification) -> str:
    """The capacity against the target, e.g. ``capacity (the most it holds at 90 % joint attainment): simulated
    5.99 req/s, 1.20x the 5 req/s target; analytic 6.84 req/s (the planner's model; simulated 0.88x)``.

    Capacity is what the fleet sustains, the target what was asked for: capacity above the target is headroom."""
    a, c = v.analytic_capacity_req_per_s, v.simulated_capacity_req_per_s
    q = v.percentile if v.percentile is not None else 90
    target = v.target_req_per_s
    head = f"capacity (the most it holds at {q:g} % joint attainment): "
    vs = "" if not target else f"{target:.3g} req/s target"
    if c is None:
        sim = "simulated -"
    else:
        times = f", {c / target:.2f}x the {vs}" if target else ""
        sim = f"simulated {c:.3g} req/s{times} (find-capacity on the {v.arrivals or 'replay'})"
    ratio = f"; simulated {c / a:.2f}x" if c is not None and a else ""
    analytic = "-" if a is None else f"{a:.3g} req/s"
    return f"{head}{sim}; analytic {analytic} (the planner's model{ratio})"


def _cheaper_search_text(search: CheaperSearch) -> str:
    """One line: the cheaper plans verification tried below a verified one, and how each fared."""
    rows = []
    for t in search.tried:
        if t.infeasible is not None:
            rows.append(f"headroom {t.headroom:+g}: infeasible ({t.infeasible})")
            continue
        head = f"${t.usd_per_hour:,.2f}/h ({t.deployment})"
        status = str(t.status)
        if status == "verified":
            rows.append(f"{head}: verified in and out of sample")
        elif status.startswith("not cheaper"):
            rows.append(f"{head}: not cheaper")
        else:
            worst = [f"{r.joint_attainment * 100:.1f} % {r.label}" for r in t.out_of_sample
                     if r.joint_attainment is not None]  # fmt: skip
            joint = t.joint_attainment if t.joint_attainment is not None else float("nan")
            rows.append(f"{head}: NOT verified (joint {joint * 100:.1f} % in sample"
                        + (f"; {', '.join(worst)}" if worst else "") + ")")  # fmt: skip
    kept, start = search.usd_per_hour_kept, search.from_usd_per_hour
    outcome = (
        f"kept ${kept:,.2f}/h, {(1 - kept / start) * 100:.0f} % under the first verified plan's ${start:,.2f}/h"
        if kept is not None and start and kept < start
        else "the first verified plan is the cheapest found"
    )
    return f"verify: searched for a cheaper plan that holds: {'; '.join(rows)}; {outcome}"


def _resized_text(r: Resized) -> str:
    """One line: the plan re-sized until it held in simulation, from what to what, over how many plans."""
    before, held = r.simulated_capacity_before_req_per_s, r.out_of_sample_capacity_before_req_per_s
    caps = ([f"simulated capacity {before:.3g} req/s"] if before is not None else []) + (
        [f"{held:.3g} req/s out of sample"] if held is not None else []
    )
    after = r.strategy_after
    kept = (
        f"the cheapest verified plan is the {after} plan at headroom {r.headroom_used:g}"
        if after is not None and after != r.strategy_before
        else f"at headroom {r.headroom_used:g} it is"
    )
    shapes = [s for s in r.per_strategy if s.plans_tried is not None]
    tried = (  # --strategy all re-sizes every shape: count them all, not only the kept shape's
        f"{sum(s.plans_tried or 0 for s in shapes)} plans tried over {len(shapes)} shapes"
        if shapes
        else f"{len(r.attempts)} re-sized plans tried"
    )
    return (
        f"verify: resized: the {r.strategy_before + ' ' if r.strategy_before else ''}plan at "
        f"headroom {r.headroom_asked:g} was NOT verified"
        + (f" ({'; '.join(caps)})" if caps else "")
        + f"; {kept}: ${r.usd_per_hour_before:,.2f}/h -> ${r.usd_per_hour_after:,.2f}/h "
        f"({tried})"
    )


def render_verification(v: Verification, console: Console) -> None:
    """The ``verification`` block of a plan: re-sizing, simulated warnings and misses (the verdict itself is in
    the plan's first block, :func:`hetplan.cli.render.plan.render_plan`)."""
    if not v.verdict:  # a block written before verification gave a verdict
        console.print(f"verify: {v.summary}", highlight=False, markup=False)
    if v.resized is not None:
        console.print(_resized_text(v.resized), highlight=False, markup=False)
    pc = v.prefix_cache
    if pc is not None:  # the simulated prefix-cache hits (hetplan.sim.prefix)
        console.print(
            f"verify: prefix cache in simulation ({pc.router or 'round-robin'} router): "
            f"{(pc.token_hit_rate or 0.0) * 100:.1f} % of prompt tokens reused, "
            f"{pc.hit_blocks:,} block hits, {pc.miss_blocks:,} misses, {pc.evicted_blocks:,} evictions",
            highlight=False,
            markup=False,
        )
    search = v.cheaper_search
    if search is not None and search.tried:
        console.print(_cheaper_search_text(search), highlight=False, markup=False)
    by_class = v.attainment_by_class
    if by_class:  # a workload with classes: per-class attainment and Jain's index over them
        jain = v.jain_index
        console.print(
            "verify: attainment by class "
            + ", ".join(f"{k} {'-' if x is None else f'{x * 100:.1f} %'}" for k, x in by_class.items())
            + f"; Jain index {'-' if jain is None else f'{jain:.3f}'}",
            highlight=False,
            markup=False,
        )
    if v.cascade is not None:
        console.print(_cascade_text(v.cascade), highlight=False, markup=False)
    print_warnings(console, v.warnings, "warning (simulated)")
    print_warnings(console, v.misses, "SLO miss (simulated)")


def _cascade_text(c: CascadeSettings) -> str:
    """CASCADE's settings as calibrated on the workload (the typed ``cascade`` block, :mod:`hetplan.sim.calibrate`)."""
    kappa = "-" if c.kappa is None else f"{c.kappa:.4g}"
    q2 = "-" if c.q2 is None else f"{c.q2:g}"
    return (
        f"verify: CASCADE calibrated on this workload: kappa {kappa} "
        + ", ".join(f"{k} {x:.4g}" for k, x in (c.kappa_by_class or {}).items())
        + f"; q2 {q2} (written into the plan's cascade block)"
    )


__all__ = ["capacity_line", "render_verification"]
