"""Verification of a plan by simulation, and re-sizing until the simulation holds the SLOs (``hetplan plan``'s
default).

:func:`plan_verified` plans, replays the workload through the plan (:func:`hetplan.sim.verify.verify_plan`: at the
goodput target and at the trace's own rate) and, on a miss, re-plans for more demand until the plan is verified:

1. The failing plan's simulated capacity C (req/s, the highest rate holding the SLO percentile) against its
   analytic capacity A says how far the model over-promised on this traffic. The next plan is solved for demand
   ``A x target x (1 + RESIZE_MARGIN) / C`` (at least ``RESIZE_MIN_STEP`` x A), so that, if it over-promises by
   the same factor, its simulated capacity is the target plus a margin; the solver may choose a different mix
   for it. A demand the inventory cannot meet is replaced by the midpoint between the last failing demand and
   it. This repeats (at most :data:`RESIZE_ROUNDS` plans) until one is verified.
2. Between the last failing demand and the first verified one, :data:`RESIZE_BISECT_STEPS` bisection steps look
   for a cheaper verified plan (plans are discrete: many demands give the same deployment, simulated once).

The search assumes that more demand never makes the simulated attainment worse, which holds for the plans tried
here but is not proven; it is bounded by the scenario's headroom limit (10) and the inventory.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hetplan.plan.blocks import ModelError, OutOfSample, Verification
from hetplan.plan.types import Plan
from hetplan.planning.document import ALL, PlanLater
from hetplan.planning.forked import Background, start_forked
from hetplan.planning.options import PlanOptions
from hetplan.planning.pipeline import plan
from hetplan.planning.request import build_whole_workload, build_workload
from hetplan.planning.resize import (
    MAX_HEADROOM,
    RESIZE_BISECT_STEPS,
    RESIZE_MARGIN,
    RESIZE_MIN_STEP,
    RESIZE_ROUNDS,
    SHRINK_FLOOR,
    SHRINK_STEPS,
    Attempt,
    Stage,
    final_plan,
    resize_until_verified,
    shrink,
    signature,
)
from hetplan.planning.shapes import resize_every_shape
from hetplan.resources import Resources
from hetplan.scenario import Scenario
from hetplan.workload.classes import assign_classes
from hetplan.workload.model import Workload
from hetplan.workload.split import MIN_SPLIT_REQUESTS, REDRAW_WINDOW_S, redraw_windows, time_split
from hetplan.workload.synthetic import synthetic_workload

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

#: Share of a trace's span held out of sizing when the scenario does not say (``workload.holdout``).
DEFAULT_HOLDOUT = 0.3
VERIFIED = PlanOptions(verify=True)
"""The default options of :func:`plan_verified`: Cauchy, with the analysis, FCFS, re-sized, checked at
:data:`~hetplan.perf.error_bands.DEFAULT_CONFIDENCE`."""


def plan_verified(
    scenario: Scenario,
    options: PlanOptions = VERIFIED,
    progress: Callable[[str], None] | None = None,
    catalog: Catalog | None = None,
    **plan_kwargs: Any,
) -> Plan:
    """:func:`plan_verified_in_sample_and_out` and then the verdict's third part: the kept plan against the
    performance model's own error at ``options.confidence`` (:func:`hetplan.sim.verify.error_check`; None skips
    it). With ``options.confidence_gates`` a plan that does not hold with steps as slow as the model's error at
    that confidence is not verified, so re-sizing sizes for it. ``plan_kwargs``: the planner's ``resources`` and
    ``solve`` (:func:`hetplan.planning.pipeline.plan`); ``catalog``: what every plan and simulation is made with.

    Raises:
        As :func:`plan_verified_in_sample_and_out`.
    """
    from hetplan.sim.verify import error_check

    step = progress or (lambda _: None)
    confidence = options.confidence
    gate = confidence if options.confidence_gates else None
    made = plan_verified_in_sample_and_out(
        scenario, options, progress, gate, None if gate else confidence, catalog, **plan_kwargs
    )
    v = made.verification
    # a model_error already made is the block's last part, after the re-size and the cheaper search (its field
    # comes last in the block, :class:`hetplan.plan.blocks.Verification`)
    if v is None or v.model_error is not None or confidence is None or not v.verified:
        return made
    step("checking the plan against the model's own error")
    _, workload, _, _ = verification_workloads(scenario, DEFAULT_HOLDOUT)
    error = error_check(made, workload, options.policy, confidence, catalog)
    if error is None:
        return made
    return replace(made, verification=v.with_(model_error=error, verdict=f"{v.verdict}; {error.summary}"))


def plan_verified_in_sample_and_out(
    scenario: Scenario,
    options: PlanOptions = VERIFIED,
    progress: Callable[[str], None] | None = None,
    gate_confidence: str | None = None,
    report_confidence: str | None = None,
    catalog: Catalog | None = None,
    **plan_kwargs: Any,
) -> Plan:
    """Plan ``scenario``, replay its workload through the plan, and, with ``resize``, re-plan for more demand until
    the simulation verifies it (module docstring), as ``options`` ask (:class:`hetplan.planning.options.PlanOptions`:
    strategy, analysis, policy, ``resize``; each plan is made with them, :func:`hetplan.planning.pipeline.plan`,
    whose ``resources`` and ``solve`` ``plan_kwargs`` holds). ``report_confidence``: the kept plan, when verified,
    is also checked against the model's own error at that confidence (:func:`hetplan.sim.verify.error_check`; the
    block's ``model_error``), while its analysis is made in another process. ``catalog``: what every plan and simulation
    is made with (None: the shipped catalogs).

    Returns:
        The plan with its ``verification`` block (:func:`hetplan.sim.verify.verify_plan`); after a re-size the
        block carries ``resized``: the headroom asked for and used, the $/hour before and after, every attempt.
        Without ``resize`` a plan that misses is returned with status "not verified".

    Raises:
        InputError, InfeasibleError: as :func:`plan` and :func:`hetplan.sim.verify.verify_plan`; InfeasibleError
        also when no demand up to the headroom limit (or the inventory) gives a verified plan.
    """
    from hetplan.sim.verify import CAPACITY_MODES, PlanCheck, error_check

    plan_kwargs = {**plan_kwargs, "catalog": catalog}  # each plan made with the caller's catalog
    strategy, analysis, policy, resize = options.strategy, options.analysis, options.policy, options.resize

    def asked(name: str, with_analysis: bool) -> PlanOptions:  # the options of one plan made here
        return replace(options, strategy=name, analysis=with_analysis)

    scenario, workload, out_of_sample, split = verification_workloads(scenario, DEFAULT_HOLDOUT)
    stage = Stage()

    def step(text: str) -> None:  # the planner's steps, named after the re-size attempt that runs them
        if progress is not None:
            progress(stage.named(text))

    base = scenario.headroom
    seen: dict[tuple[Any, ...], tuple[int, Verification]] = {}  # each deployment's block, by how much it measured
    kept: dict[int, tuple[Plan, PlanLater]] = {}  # each plan's completion, from the planner that made it

    def keep(made: Plan, later: list[PlanLater]) -> Plan:
        if later:
            kept[id(made)] = (made, later[0])
        return made

    def later_of(p: Plan) -> PlanLater | None:
        """``p`` whole and with its analysis, from the planner that made it (None: planned in worker processes)."""
        have = kept.get(id(p))
        return have[1] if have is not None and have[0] is p else None

    def planner_for(
        name: str, report: Callable[[str], None] | None = step if progress is not None else None
    ) -> Attempt:
        def attempt(headroom: float, with_analysis: bool, lean: bool = True) -> Plan:
            # an attempt is only simulated: its strategy alone, no baselines; its planner is kept, so the plan
            # kept is completed from it (the other strategies, baselines and analysis), not planned again
            sc = scenario.model_copy(update={"headroom": headroom})
            if with_analysis or "deferred" in plan_kwargs:
                return plan(sc, asked(name, with_analysis), report, lean=lean and not with_analysis, **plan_kwargs)
            later: list[PlanLater] = []
            return keep(plan(sc, asked(name, False), report, deferred=later, lean=lean, **plan_kwargs), later)

        return attempt

    checks: dict[tuple[Any, ...], PlanCheck] = {}  # each deployment simulated once, its runs kept
    errors: dict[tuple[Any, ...], ModelError | None] = {}

    def check(p: Plan, capacity: str) -> Verification:
        """``p``'s verification block, measuring as much of the simulated capacity as ``capacity`` says
        (:data:`hetplan.sim.verify.CAPACITY_MODES`: re-size attempts measure only what steers them)."""
        key = signature(p)
        have = seen.get(key)
        rank = CAPACITY_MODES.index(capacity)
        if have is not None and have[0] >= rank:
            return have[1]
        pc = checks.get(key)
        if pc is None:
            step(f"simulating the plan (${p.total_usd_per_hour:,.2f}/h)")
            pc = checks[key] = PlanCheck(p, workload, policy, out_of_sample, catalog)
        elif capacity != "none":
            step(f"measuring the plan's simulated capacity (${p.total_usd_per_hour:,.2f}/h)")
        v = pc.verdict(capacity)
        v = with_split(v, split)
        if gate_confidence is not None and v.verified:  # sized for the model's error too
            if key not in errors:
                errors[key] = error_check(p, workload, policy, gate_confidence, catalog)
            error = errors[key]
            if error is not None:
                v = v.with_(model_error=error, verdict=f"{v.verdict}; {error.summary}")
                if not error.holds_at_confidence:
                    v = v.with_(status="not verified", misses=[*v.misses, error.summary])
        seen[key] = (rank, v)
        return v

    attempt = planner_for(strategy)
    later: list[PlanLater] = []  # the first plan with its analysis, from the planner that made it
    first = keep(plan(scenario.model_copy(update={"headroom": base}), asked(strategy, False), progress, deferred=later,
                      **plan_kwargs), later)  # fmt: skip
    ahead = None
    resources: Resources = plan_kwargs.get("resources") or Resources()
    if analysis and later:  # the analysis alone, in a forked copy of this planner while this process simulates
        with_analysis = later[0]
        ahead = start_forked(lambda: with_analysis(None), resources.plan_workers)
    elif analysis:  # planned in worker processes (no planner here): the plan again, with its analysis, over there

        def quiet() -> Plan:  # no progress from the other process, one planning process there
            sc = scenario.model_copy(update={"headroom": base})
            return plan(sc, asked(strategy, True), None, **{**plan_kwargs, "resources": resources.serial()})

        ahead = start_forked(quiet, resources.plan_workers)

    def start_ahead(p: Plan, name: str) -> Callable[[float], Background | None]:
        """A function starting, in another process, plan ``p`` (of shape ``name``, made at a headroom) made whole
        with its analysis from the planner that made it; only a plan made in worker processes (no planner here) is
        planned again there, with its analysis."""

        def start(headroom: float) -> Background | None:
            done = later_of(p)
            if done is not None:  # no progress from the other process
                return start_forked(lambda: done(None, with_analysis=analysis), resources.plan_workers)
            if not analysis:
                return None

            def quiet() -> Plan:  # no progress from the other process, one planning process there
                sc = scenario.model_copy(update={"headroom": headroom})
                return plan(sc, asked(name, True), None, **{**plan_kwargs, "resources": resources.serial()})

            return start_forked(quiet, resources.plan_workers)

        return start

    def with_error(p: Plan, v: Verification) -> Verification:
        """The block with the model-error check (``report_confidence``), when the plan is verified."""
        if report_confidence is None or v.model_error is not None or not v.verified:
            return v
        step("checking the plan against the model's own error")
        error = error_check(p, workload, policy, report_confidence, catalog)
        if error is None:
            return v
        return v.with_(model_error=error, verdict=f"{v.verdict}; {error.summary}")

    try:
        v0 = check(first, "steer" if resize else "full")
        if v0.verified:  # the cheaper search starts from its simulated capacity
            v0 = check(first, "full")
    except BaseException:
        if ahead is not None:
            ahead.cancel()
        raise
    if v0.verified and resize:  # verified: is a cheaper deployment verified too?
        aheads: dict[int, Background] = {}  # a candidate's analysis, in another process while it is simulated

        def simulating(p: Plan) -> None:
            done = later_of(p)
            if analysis and done is not None:
                bg = start_forked(lambda: done(None), resources.plan_workers)
                if bg is not None:
                    aheads[id(p)] = bg

        def judged(p: Plan, verified: bool) -> None:  # only the best verified candidate's analysis is kept
            for key in [k for k in aheads if (k == id(p)) != verified]:
                aheads.pop(key).cancel()
            if verified and ahead is not None:  # the first plan is not kept any more
                ahead.cancel()

        try:
            best, hi, search = shrink(first, v0, base, attempt, check, step, simulating, judged)
        except BaseException:
            for bg in aheads.values():
                bg.cancel()
            raise
        if best is not first:
            if ahead is not None:
                ahead.cancel()
            best_ahead = aheads.pop(id(best), None)
            if best_ahead is not None:
                step("the plan's analysis (price sensitivity, cost versus goodput), in another process")
            made = final_plan(best, lambda: check(best, "full"), hi, analysis, attempt, check, None, best_ahead,
                              later_of(best), lean=strategy != ALL, start_ahead=start_ahead(best, strategy),
                              extra_check=with_error)  # fmt: skip
        else:
            for bg in aheads.values():
                bg.cancel()
            made = final_plan(first, lambda: v0, base, analysis, attempt, check, None, ahead,
                              later[0] if later else None, extra_check=with_error)  # fmt: skip
        if search.tried and made.verification is not None:
            made = replace(made, verification=made.verification.with_(cheaper_search=search))
        return made
    if v0.verified or not resize:
        if analysis and ahead is not None:  # its progress is not reported from the other process
            step("the plan's analysis (price sensitivity, cost versus goodput), in another process")
        return final_plan(first, lambda: v0, base, analysis, attempt, check, None, ahead, later[0] if later else None,
                          extra_check=with_error)  # fmt: skip
    if ahead is not None:
        ahead.cancel()
    if strategy != ALL:
        best, hi, resized = resize_until_verified(first, v0, base, attempt, check, stage=stage)
        stage.label = "the re-sized plan" + (" with its analysis" if analysis else "")
        return final_plan(best, lambda: check(best, "full"), hi, analysis, attempt, check, resized,
                          later=later_of(best), lean=best is not first, start_ahead=start_ahead(best, strategy),
                          extra_check=with_error)  # fmt: skip
    best, hi, resized, name = resize_every_shape(first, v0, base, planner_for, check, stage)
    stage.shape, stage.label = "", f"the re-sized {name} plan" + (" with its analysis" if analysis else "")
    return final_plan(best, lambda: check(best, "full"), hi, analysis, planner_for(name), check, resized,
                      later=later_of(best), lean=best is not first, start_ahead=start_ahead(best, name),
                      extra_check=with_error)  # fmt: skip


def verification_workloads(
    scenario: Scenario, default_holdout: float = 0.0
) -> tuple[Scenario, Workload, list[tuple[str, Workload]], str]:
    """The traffic a verified plan is sized on and the traffic it is checked on out of sample.

    A trace: the scenario's ``workload.holdout`` (``default_holdout`` when unset) is cut off its end
    (:func:`hetplan.workload.split.time_split`); the plan is sized and verified in sample on the rest, and verified
    out of sample on the held-out stretch and on the whole trace re-drawn from its own 60 s windows
    (:func:`hetplan.workload.split.redraw_windows`, seed 1), both at the goodput target. A synthetic workload is
    verified out of sample on the same distribution drawn from the next seed.

    Returns:
        ``(scenario, sizing workload, [(label, workload), ...], split)``: the scenario with the holdout applied
        (plan with it), the workload the planner sizes on, the out-of-sample workloads and one sentence saying
        what was held out.
    """
    spec = scenario.workload
    if spec.synthetic is not None:
        s = spec.synthetic
        other = synthetic_workload(
            s.kind, s.rate_per_s, s.requests, s.seed + 1, s.prompt_tokens_median, s.output_tokens_median, s.sigma
        )
        other = assign_classes(other, scenario, None)
        split = f"sized on seed {s.seed}; checked out of sample on seed {s.seed + 1} of the same distribution"
        return scenario, build_workload(scenario), [(f"draw with seed {s.seed + 1}", other)], split
    holdout = default_holdout if spec.holdout is None else spec.holdout
    if holdout:
        scenario = scenario.model_copy(update={"workload": spec.model_copy(update={"holdout": holdout})})
    whole = build_whole_workload(scenario)  # read once, split here (build_workload's split, without re-reading)
    parts = time_split(whole, holdout) if holdout else None
    sizing, held = parts if parts is not None else (whole, None)
    runs: list[tuple[str, Workload]] = []
    if held is not None:
        runs.append((f"held-out last {holdout * 100:g} % of the trace", held))
    redrawn = redraw_windows(whole, seed=1)
    if redrawn is not None:
        runs.append((f"trace re-drawn from its {REDRAW_WINDOW_S:g} s windows, seed 1", redrawn))
    if held is not None:
        split = (
            f"sized on the first {(1 - holdout) * 100:g} % of {whole.name}'s span ({sizing.n_requests:,} of "
            f"{whole.n_requests:,} requests); the last {holdout * 100:g} % ({held.n_requests:,}) held out"
        )
    elif holdout:
        need = MIN_SPLIT_REQUESTS
        split = f"{whole.name} is too short to hold out {holdout * 100:g} % (each part needs {need} requests)"
    else:
        split = f"sized on the whole of {whole.name} (holdout 0)"
    return scenario, sizing, runs, split


def with_split(v: Verification, split: str) -> Verification:
    """``v`` with its out-of-sample block saying how the workload was split (``split``, from
    :func:`verification_workloads`)."""
    return v.with_(out_of_sample=(v.out_of_sample or OutOfSample()).with_(split=split))


__all__ = [
    "DEFAULT_HOLDOUT",
    "MAX_HEADROOM",
    "RESIZE_BISECT_STEPS",
    "RESIZE_MARGIN",
    "RESIZE_MIN_STEP",
    "RESIZE_ROUNDS",
    "SHRINK_FLOOR",
    "SHRINK_STEPS",
    "plan_verified",
    "plan_verified_in_sample_and_out",
    "verification_workloads",
    "with_split",
]
