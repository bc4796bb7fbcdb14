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
from typing import Any, Protocol

from hetplan.errors import InfeasibleError
from hetplan.perf.error_bands import DEFAULT_CONFIDENCE
from hetplan.plan.doc import from_doc, to_doc, verification_block, verification_doc
from hetplan.plan.types import STRATEGIES, Plan
from hetplan.planning.document import ALL
from hetplan.planning.forked import Background, start_forked
from hetplan.planning.pipeline import plan
from hetplan.planning.request import build_whole_workload, build_workload
from hetplan.resources import Resources
from hetplan.scenario import Scenario
from hetplan.workload.classes import assign_classes
from hetplan.workload.model import Workload
from hetplan.workload.split import MIN_SPLIT_REQUESTS, REDRAW_WINDOW_S, redraw_windows, time_split
from hetplan.workload.synthetic import synthetic_workload

#: Simulated capacity aimed at, above the goodput target, when re-sizing.
RESIZE_MARGIN = 0.05
#: Smallest demand step of a re-size, relative to the failing plan's analytic capacity.
RESIZE_MIN_STEP = 1.1
#: Plans tried before giving up (the first included).
RESIZE_ROUNDS = 6
#: Bisection steps between the last failing and the first verified demand.
RESIZE_BISECT_STEPS = 3
#: Share of a trace's span held out of sizing when the scenario does not say (``workload.holdout``).
DEFAULT_HOLDOUT = 0.3
#: The scenario's largest headroom.
MAX_HEADROOM = 10.0


def plan_verified(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    policy: str = "fcfs",
    resize: bool = True,
    progress: Callable[[str], None] | None = None,
    confidence: str | None = DEFAULT_CONFIDENCE,
    confidence_gates: bool = False,
    **plan_kwargs: Any,
) -> Plan:
    """:func:`plan_verified_in_sample_and_out` and then the verdict's third part: the kept plan against the
    performance model's own error at ``confidence`` (:func:`hetplan.sim.verify.error_check`; None skips it). With
    ``confidence_gates`` a plan that does not hold with steps as slow as the model's error at ``confidence`` is
    not verified, so re-sizing sizes for it.

    Raises:
        As :func:`plan_verified_in_sample_and_out`.
    """
    from hetplan.sim.verify import error_check

    step = progress or (lambda _: None)
    gate = confidence if confidence_gates else None
    made = plan_verified_in_sample_and_out(
        scenario, strategy, analysis, policy, resize, progress, gate, None if gate else confidence, **plan_kwargs
    )
    block = verification_doc(made)
    if "model_error" in block:  # the block's last part, after the re-size and the cheaper search
        block["model_error"] = block.pop("model_error")
        return replace(made, verification=verification_block(block))
    if confidence is None or block.get("status") != "verified":
        return made
    step("checking the plan against the model's own error")
    _, workload, _, _ = verification_workloads(scenario, DEFAULT_HOLDOUT)
    error = error_check(made, workload, policy, confidence)
    if error is None:
        return made
    block["model_error"] = error
    block["verdict"] = f"{block['verdict']}; {error['summary']}"
    return replace(made, verification=verification_block(block))


def plan_verified_in_sample_and_out(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    policy: str = "fcfs",
    resize: bool = True,
    progress: Callable[[str], None] | None = None,
    gate_confidence: str | None = None,
    report_confidence: str | None = None,
    **plan_kwargs: Any,
) -> Plan:
    """Plan ``scenario``, replay its workload through the plan, and, with ``resize``, re-plan for more demand until
    the simulation verifies it (module docstring). ``report_confidence``: the kept plan, when verified, is also
    checked against the model's own error at that confidence (:func:`hetplan.sim.verify.error_check`; the block's
    ``model_error``), while its analysis is made in another process.

    Returns:
        The plan with its ``verification`` block (:func:`hetplan.sim.verify.verify_plan`); after a re-size the
        block carries ``resized``: the headroom asked for and used, the $/hour before and after, every attempt.
        Without ``resize`` a plan that misses is returned with status "not verified".

    Raises:
        InputError, InfeasibleError: as :func:`plan` and :func:`hetplan.sim.verify.verify_plan`; InfeasibleError
        also when no demand up to the headroom limit (or the inventory) gives a verified plan.
    """
    from hetplan.sim.verify import CAPACITY_MODES, PlanCheck, error_check

    scenario, workload, out_of_sample, split = verification_workloads(scenario, DEFAULT_HOLDOUT)
    stage = _Stage()

    def step(text: str) -> None:  # the planner's steps, named after the re-size attempt that runs them
        if progress is not None:
            progress(stage.named(text))

    base = scenario.headroom
    seen: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = {}  # each deployment's block, by how much it measured
    analyses: dict[int, tuple[Plan, Callable[..., Plan]]] = {}  # an attempt's analysis, from the planner that made it

    def planner_for(
        name: str, report: Callable[[str], None] | None = step if progress is not None else None
    ) -> Attempt:
        def attempt(headroom: float, with_analysis: bool, lean: bool = True) -> Plan:
            # an attempt is only simulated: its strategy alone, no baselines (the plan kept is planned again whole);
            # --strategy all solves every shape anyway, and keeps its analysis for later (the plan kept needs no
            # second solve)
            sc = scenario.model_copy(update={"headroom": headroom})
            if name == ALL and not with_analysis and "deferred" not in plan_kwargs:
                later: list[Callable[..., Plan]] = []
                made = plan(sc, name, False, progress=report, deferred=later, **plan_kwargs)
                if later:
                    analyses[id(made)] = (made, later[0])
                return made
            return plan(sc, name, with_analysis, progress=report, lean=lean and not with_analysis, **plan_kwargs)

        return attempt

    checks: dict[tuple[Any, ...], PlanCheck] = {}  # each deployment simulated once, its runs kept
    errors: dict[tuple[Any, ...], dict[str, Any] | None] = {}

    def check(p: Plan, capacity: str) -> dict[str, Any]:
        """``p``'s verification block, measuring as much of the simulated capacity as ``capacity`` says
        (:data:`hetplan.sim.verify.CAPACITY_MODES`: re-size attempts measure only what steers them)."""
        key = _signature(p)
        have = seen.get(key)
        rank = CAPACITY_MODES.index(capacity)
        if have is not None and have[0] >= rank:
            return have[1]
        pc = checks.get(key)
        if pc is None:
            step(f"simulating the plan (${p.total_usd_per_hour:,.2f}/h)")
            pc = checks[key] = PlanCheck(p, workload, policy, out_of_sample)
        elif capacity != "none":
            step(f"measuring the plan's simulated capacity (${p.total_usd_per_hour:,.2f}/h)")
        v = pc.verdict(capacity)
        v["out_of_sample"]["split"] = split
        if gate_confidence is not None and v["status"] == "verified":  # sized for the model's error too
            if key not in errors:
                errors[key] = error_check(p, workload, policy, gate_confidence)
            error = errors[key]
            if error is not None:
                v["model_error"] = error
                v["verdict"] = f"{v['verdict']}; {error['summary']}"
                if not error["holds_at_confidence"]:
                    v["status"] = "not verified"
                    v["misses"] = [*v["misses"], error["summary"]]
        seen[key] = (rank, v)
        return v

    attempt = planner_for(strategy)
    later: list[Callable[..., Plan]] = []  # the first plan with its analysis, from the planner that made it
    first = plan(scenario.model_copy(update={"headroom": base}), strategy, False, progress, deferred=later,
                 **plan_kwargs)  # fmt: skip
    ahead = None
    resources: Resources = plan_kwargs.get("resources") or Resources()
    if analysis and later:  # the analysis alone, in a forked copy of this planner while this process simulates
        with_analysis = later[0]
        ahead = start_forked(lambda: to_doc(with_analysis(None)), resources.plan_workers)
    elif analysis:  # planned in worker processes (no planner here): the plan again, with its analysis, over there

        def quiet() -> dict[str, Any]:  # no progress from the other process, one planning process there
            sc = scenario.model_copy(update={"headroom": base})
            return to_doc(plan(sc, strategy, True, None, **{**plan_kwargs, "resources": resources.serial()}))

        ahead = start_forked(quiet, resources.plan_workers)

    def start_ahead(name: str) -> Callable[[float], Background | None]:
        """A function starting the plan of shape ``name`` at a headroom, with its analysis, in another process."""

        def start(headroom: float) -> Background | None:
            def quiet() -> dict[str, Any]:  # no progress from the other process, one planning process there
                sc = scenario.model_copy(update={"headroom": headroom})
                return to_doc(plan(sc, name, True, None, **{**plan_kwargs, "resources": resources.serial()}))

            return start_forked(quiet, resources.plan_workers)

        return start

    def with_error(p: Plan, v: dict[str, Any]) -> dict[str, Any]:
        """The block with the model-error check (``report_confidence``), when the plan is verified."""
        if report_confidence is None or "model_error" in v or v.get("status") != "verified":
            return v
        step("checking the plan against the model's own error")
        error = error_check(p, workload, policy, report_confidence)
        if error is None:
            return v
        return {**v, "model_error": error, "verdict": f"{v['verdict']}; {error['summary']}"}

    try:
        v0 = check(first, "steer" if resize else "full")
        if v0["status"] == "verified":  # the cheaper search starts from its simulated capacity
            v0 = check(first, "full")
    except BaseException:
        if ahead is not None:
            ahead.cancel()
        raise
    if v0["status"] == "verified" and resize:  # verified: is a cheaper deployment verified too?
        aheads: dict[int, Background] = {}  # a candidate's analysis, in another process while it is simulated

        def simulating(p: Plan) -> None:
            kept = analyses.get(id(p))
            if analysis and kept is not None and kept[0] is p:
                bg = start_forked(lambda: to_doc(kept[1](None)), resources.plan_workers)
                if bg is not None:
                    aheads[id(p)] = bg

        def judged(p: Plan, verified: bool) -> None:  # only the best verified candidate's analysis is kept
            for key in [k for k in aheads if (k == id(p)) != verified]:
                aheads.pop(key).cancel()
            if verified and ahead is not None:  # the first plan is not kept any more
                ahead.cancel()

        try:
            best, hi, search = _shrink(first, v0, base, attempt, check, step, simulating, judged)
        except BaseException:
            for bg in aheads.values():
                bg.cancel()
            raise
        if best is not first:
            if ahead is not None:
                ahead.cancel()
            kept = analyses.get(id(best))
            later_of = kept[1] if kept is not None and kept[0] is best else None
            best_ahead = aheads.pop(id(best), None)
            if best_ahead is not None:
                step("the plan's analysis (price sensitivity, cost versus goodput), in another process")
            made = _final(best, lambda: check(best, "full"), hi, analysis, attempt, check, None, best_ahead, later_of,
                          lean=strategy != ALL, start_ahead=start_ahead(strategy), extra_check=with_error)  # fmt: skip
        else:
            for bg in aheads.values():
                bg.cancel()
            made = _final(first, lambda: v0, base, analysis, attempt, check, None, ahead, later[0] if later else None,
                          extra_check=with_error)  # fmt: skip
        if search["tried"]:
            made = replace(made, verification=verification_block({**verification_doc(made), "cheaper_search": search}))
        return made
    if v0["status"] == "verified" or not resize:
        if analysis and ahead is not None:  # its progress is not reported from the other process
            step("the plan's analysis (price sensitivity, cost versus goodput), in another process")
        return _final(first, lambda: v0, base, analysis, attempt, check, None, ahead, later[0] if later else None,
                      extra_check=with_error)  # fmt: skip
    if ahead is not None:
        ahead.cancel()
    if strategy != ALL:
        best, hi, resized = _resize(first, v0, base, attempt, check, stage=stage)
        stage.label = "the re-sized plan" + (" with its analysis" if analysis else "")
        return _final(best, lambda: check(best, "full"), hi, analysis, attempt, check, resized,
                      lean=best is not first, start_ahead=start_ahead(strategy), extra_check=with_error)  # fmt: skip
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
    found: list[tuple[Plan, float, dict[str, Any], str]] = []
    per_shape: list[dict[str, Any]] = []
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
            per_shape.append({"strategy": name, "skipped": f"its plan before re-sizing costs ${cost:,.2f}/h"})
            continue
        shape_attempt = planner_for(name)
        start = start_made or (first if name == first.strategy else shape_attempt(base, False))
        key = _signature(start)
        if start_made is None and key in starts and queue:
            queue.append((n_shape, cost, name, start))
            continue
        starts.setdefault(key, name)
        v_start = v0 if start is first else check(start, "steer")
        log: list[dict[str, Any]] = []  # this shape's plans, as simulated (its first plan included)
        cap = min((p.total_usd_per_hour for p, *_ in found), default=None)
        try:
            if v_start["status"] == "verified":
                best, hi, resized = start, base, {}
            else:
                best, hi, resized = _resize(start, v_start, base, shape_attempt, check, log, stage, cap)
        except InfeasibleError as exc:
            per_shape.append({"strategy": name, "infeasible": exc.why or exc.what, "plans_tried": len(log)})
            continue
        except NoCheaper as exc:
            per_shape.append({"strategy": name, "skipped": f"re-sized to ${exc.usd_per_hour:,.2f}/h, no cheaper than "
                              f"the verified ${exc.cap:,.2f}/h", "plans_tried": len(log)})  # fmt: skip
            continue
        per_shape.append(
            {"strategy": name, "usd_per_hour": best.total_usd_per_hour, "headroom": _rnd_h(hi), "plans_tried": len(log)}
        )
        found.append((best, hi, resized, name))
    if not found:
        raise InfeasibleError(
            "no re-sized plan holds its SLOs in simulation, whichever shape (--strategy all re-sizes each)",
            "; ".join(f"{s['strategy']}: {s.get('infeasible') or s.get('skipped')}" for s in per_shape),
            "lower the goodput target or relax the SLOs, add inventory, or plan with --no-resize to keep the "
            "unverified plan",
        )
    best, hi, resized, name = min(found, key=lambda x: (x[0].total_usd_per_hour, STRATEGIES.index(x[3])))
    resized = {
        # the shape kept may have verified without re-sizing (resized is then empty): the first plan's figures
        "attempts": [],
        "analytic_capacity_before_req_per_s": first.goodput_req_per_s,
        "simulated_capacity_before_req_per_s": v0.get("simulated_capacity_req_per_s"),
        "out_of_sample_capacity_before_req_per_s": v0.get("out_of_sample_capacity_req_per_s"),
        **resized,
        "headroom_asked": base,
        "headroom_used": _rnd_h(hi),
        "usd_per_hour_before": first.total_usd_per_hour,
        "usd_per_hour_after": best.total_usd_per_hour,
        "strategy_before": first.strategy,
        "strategy_after": name,
        "per_strategy": per_shape,
    }
    resized["method"] = RESIZE_METHOD + "; with --strategy all every shape is re-sized and the cheapest verified kept"
    stage.shape, stage.label = "", f"the re-sized {name} plan" + (" with its analysis" if analysis else "")
    return _final(best, lambda: check(best, "full"), hi, analysis, planner_for(name), check, resized,
                  lean=best is not first, start_ahead=start_ahead(name), extra_check=with_error)  # fmt: skip


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


class Attempt(Protocol):
    """A plan at ``headroom`` (with its analysis when asked); ``lean``: its strategy alone, without baselines
    (:func:`hetplan.planning.pipeline.plan`), for an attempt that is only simulated."""

    def __call__(self, headroom: float, with_analysis: bool, lean: bool = True) -> Plan: ...


class NoCheaper(Exception):
    """Re-sizing a shape reached a plan no cheaper than one already verified (:func:`_resize`'s ``cost_cap``)."""

    def __init__(self, usd_per_hour: float, cap: float) -> None:
        super().__init__(f"${usd_per_hour:,.2f}/h >= ${cap:,.2f}/h")
        self.usd_per_hour, self.cap = usd_per_hour, cap


def _describe(p: Plan) -> str:
    """A deployment in one phrase: ``6x L40S TP1 -> 1x A10G TP4`` or ``1x A100-80GB-SXM TP8 + 2x L40S TP4``."""
    parts = [f"{c.count}x ({c.label})" if c.count > 1 else c.label for c in p.combos]
    parts += [f"{t.count}x {t.gpu} TP{t.tp}" for t in p.instances]
    return " + ".join(parts) or "no deployment"


def _shrink(
    first: Plan,
    v0: dict[str, Any],
    base: float,
    attempt: Attempt,
    check: Callable[[Plan, str], dict[str, Any]],
    step: Callable[[str], None],
    simulating: Callable[[Plan], None] = lambda p: None,
    judged: Callable[[Plan, bool], None] = lambda p, verified: None,
) -> tuple[Plan, float, dict[str, Any]]:
    """Look for a cheaper verified plan below a verified one whose simulated capacity is well above the target.

    The model may under-promise a deployment as it may over-promise one; re-sizing up only fixes the second. When
    the verified plan's simulated capacity C exceeds the target T by more than the re-size margin, the demand is
    lowered to what would give ``T x (1 + RESIZE_MARGIN)`` if the model under-promises the next plan by the same
    factor (headroom ``(1 + RESIZE_MARGIN) x A / C - 1`` for analytic capacity A, at least :data:`SHRINK_FLOOR`,
    below 0 when the model under-promises), then :data:`SHRINK_STEPS` bisections between that and the verified
    headroom. Each candidate is verified as the first was (in sample and out of sample); one that is not cheaper is
    not simulated. Returns the cheapest verified plan, its headroom and the record of every candidate tried.
    ``simulating`` is told of each candidate before it is simulated, ``judged`` of its verdict (the caller may
    prepare a candidate's analysis meanwhile).
    """
    target = first.goodput_target_req_per_s
    cap, analytic = v0.get("simulated_capacity_req_per_s"), first.goodput_req_per_s
    record: dict[str, Any] = {
        "from_usd_per_hour": first.total_usd_per_hour,
        "method": SHRINK_METHOD,
        "tried": [],
    }
    best, hi = first, base
    best_h = hi  # the headroom that made ``best`` (hi may move below it: a plan no cheaper is not kept)
    if not cap or not analytic or cap <= target * (1 + RESIZE_MARGIN):
        record["usd_per_hour_kept"] = first.total_usd_per_hour
        return best, hi, record
    low = max((1 + RESIZE_MARGIN) * analytic / cap - 1, SHRINK_FLOOR)
    h, fail = low, None
    for _ in range(SHRINK_STEPS + 1):
        if hi - h < 0.01 * (1 + abs(hi)):
            break
        step(f"searching cheaper: demand {target * (1 + h):.3g} req/s (headroom {h:+.2f})")
        try:
            p = attempt(h, False)
        except InfeasibleError as exc:
            record["tried"].append({"headroom": _rnd_h(h), "infeasible": exc.what})
            fail, h = h, (h + hi) / 2
            continue
        row: dict[str, Any] = {"headroom": _rnd_h(h), "usd_per_hour": p.total_usd_per_hour, "deployment": _describe(p)}
        if p.total_usd_per_hour >= best.total_usd_per_hour - 1e-9:
            row["status"] = "not cheaper (not simulated)"
            record["tried"].append(row)
            hi = h  # the same or a dearer deployment at less demand: a cheaper one needs less still
        else:
            simulating(p)
            v = check(p, "none")
            judged(p, v["status"] == "verified")
            oos = v.get("out_of_sample") or {}
            row |= {
                "status": v["status"],
                "joint_attainment": v["attainment"],
                "out_of_sample": [
                    {"label": r["label"], "joint_attainment": r["attainment"], "holds": not r["misses"]}
                    for r in oos.get("runs") or []
                ],
                "misses": v["misses"][:3],
            }
            record["tried"].append(row)
            if v["status"] == "verified":
                best, hi, best_h = p, h, h
            else:
                fail = h
        if fail is None:  # the lowest demand held (or was not cheaper): nothing below it is tried
            break
        h = (fail + hi) / 2
    record["usd_per_hour_kept"] = best.total_usd_per_hour
    return best, best_h, record


SHRINK_METHOD = (
    "demand lowered to analytic x target x 1.05 / simulated capacity, then bisection towards the verified plan "
    "(hetplan.planning.verify)"
)
#: Bisection steps of the search for a cheaper verified plan.
SHRINK_STEPS = 3
#: Lowest headroom the search for a cheaper plan tries (the demand at half the target).
SHRINK_FLOOR = -0.5


RESIZE_METHOD = "demand x target / simulated capacity until verified, then bisection (hetplan.planning.verify)"


def _resize(
    first: Plan,
    v0: dict[str, Any],
    base: float,
    attempt: Attempt,
    check: Callable[[Plan, str], dict[str, Any]],
    log: list[dict[str, Any]] | None = None,
    stage: _Stage | None = None,
    cost_cap: float | None = None,
) -> tuple[Plan, float, dict[str, Any]]:
    """Re-size ``first`` (which missed) until a plan is verified, then bisect (module docstring); returns the
    cheapest verified plan, its headroom and the ``resized`` record. ``log``, when given, receives every attempt
    record as it is made (``first`` included), also when no re-sized plan verifies; ``stage`` is set to the attempt
    that runs (progress messages). ``cost_cap``: the $/hour of a plan already verified (another shape's); a
    re-sized plan that costs as much is not simulated, and re-sizing stops there (it only adds capacity).

    Raises:
        InfeasibleError: no demand up to the headroom limit (or the inventory) gives a verified plan.
        NoCheaper: a re-sized plan costs ``cost_cap`` or more before one verifies.
    """
    target = first.goodput_target_req_per_s
    tried: list[dict[str, Any]] = log if log is not None else []
    tried.append(_record(base, first, v0))
    fail_h, fail_p, fail_v = base, first, v0
    ceiling = MAX_HEADROOM  # the lowest headroom found infeasible (inventory), or the scenario's limit
    passing: tuple[float, Plan, dict[str, Any]] | None = None
    at = stage or _Stage()
    for n_round in range(1, RESIZE_ROUNDS):
        cap = fail_v.get("simulated_capacity_req_per_s")
        held = fail_v.get("out_of_sample_capacity_req_per_s")
        if held is not None:  # it held in sample but not out of sample: size for the traffic it missed
            cap = min(cap, held) if cap else held
        analytic = fail_p.goodput_req_per_s
        factor = target * (1 + RESIZE_MARGIN) / cap if cap else 2.0
        headroom = analytic * max(factor, RESIZE_MIN_STEP) / target - 1
        if headroom >= ceiling:  # past what the inventory (or the limit) allows: halfway to it instead
            headroom = (fail_h + ceiling) / 2
            if ceiling - fail_h < 0.01 * (1 + fail_h):
                break
        at.attempt(f"re-size attempt {n_round} of {RESIZE_ROUNDS - 1} (headroom {headroom:.3g})")
        try:
            p = attempt(headroom, False)
        except InfeasibleError as exc:  # inventory runs out before the SLOs hold
            tried.append({"headroom": _rnd_h(headroom), "infeasible": exc.what})
            ceiling = headroom
            continue
        if cost_cap is not None and p.total_usd_per_hour >= cost_cap - 1e-9:
            tried.append({"headroom": _rnd_h(headroom), "usd_per_hour": p.total_usd_per_hour,
                          "status": "no cheaper than a verified plan (not simulated)"})  # fmt: skip
            raise NoCheaper(p.total_usd_per_hour, cost_cap)
        v = check(p, "steer")
        tried.append(_record(headroom, p, v))
        if v["status"] == "verified":
            passing = (headroom, p, v)
            break
        fail_h, fail_p, fail_v = headroom, p, v
    if passing is None:
        last = tried[-1]
        raise InfeasibleError(
            "no re-sized plan holds its SLOs in simulation",
            f"tried {len(tried)} plans up to headroom {max(t['headroom'] for t in tried):g}; the last: "
            + (last.get("infeasible") or "; ".join(last.get("misses", []))),
            "lower the goodput target or relax the SLOs, add inventory, or plan with --no-resize to keep the "
            "unverified plan"
            + (
                f"; {last['dropped']} request(s) were dropped because they fit no instance's KV cache, which more "
                "copies of the same instances do not change: a GPU with more memory or a higher TP would"
                if last.get("dropped")
                else ""
            ),
        )
    lo, (hi, best, _) = fail_h, passing
    best_h = hi  # the headroom that made ``best`` (hi may move below it: a plan no cheaper is not kept)
    for n_step in range(1, RESIZE_BISECT_STEPS + 1):
        mid = (lo + hi) / 2
        at.attempt(f"re-size bisection step {n_step} of {RESIZE_BISECT_STEPS} (headroom {mid:.3g})")
        try:
            p = attempt(mid, False)
        except InfeasibleError:
            lo = mid
            continue
        if p.total_usd_per_hour >= best.total_usd_per_hour - 1e-9:  # no cheaper: nothing to simulate
            hi = mid
            continue
        v = check(p, "none")
        tried.append(_record(mid, p, v))
        if v["status"] == "verified" and p.total_usd_per_hour <= best.total_usd_per_hour:
            hi, best, best_h = mid, p, mid
        else:
            lo = mid
    resized = {
        "headroom_asked": base,
        "headroom_used": _rnd_h(best_h),
        "usd_per_hour_before": first.total_usd_per_hour,
        "usd_per_hour_after": best.total_usd_per_hour,
        "analytic_capacity_before_req_per_s": first.goodput_req_per_s,
        "simulated_capacity_before_req_per_s": v0.get("simulated_capacity_req_per_s"),
        "out_of_sample_capacity_before_req_per_s": v0.get("out_of_sample_capacity_req_per_s"),
        "attempts": tried,
        "method": RESIZE_METHOD,
    }
    return best, best_h, resized


class _Stage:
    """Where :func:`plan_verified` is, for its progress messages: the shape being re-sized (``--strategy all``) and
    the re-size attempt or bisection step that runs."""

    def __init__(self) -> None:
        self.shape = ""
        self.label = ""

    def attempt(self, what: str) -> None:
        """Name the attempt that starts (after the shape, if any)."""
        self.label = f"{self.shape}: {what}" if self.shape else what

    def named(self, text: str) -> str:
        """``text`` (a planner or simulator step) after the current label."""
        return f"{self.label}: {text}" if self.label else text


def _final(
    p: Plan,
    v_of: Callable[[], dict[str, Any]],
    headroom: float,
    analysis: bool,
    attempt: Attempt,
    check: Callable[[Plan, str], dict[str, Any]],
    resized: dict[str, Any] | None,
    ahead: Background | None = None,
    with_analysis: Callable[..., Plan] | None = None,
    lean: bool = False,
    start_ahead: Callable[[float], Background | None] | None = None,
    extra_check: Callable[[Plan, dict[str, Any]], dict[str, Any]] | None = None,
) -> Plan:
    """The chosen plan with its analysis when asked (the same deployment: its verification, ``v_of()``, is kept):
    ``ahead``, the plan with its analysis made in another process (:func:`hetplan.planning.forked.start_forked`),
    else ``with_analysis`` (the analysis from the planner that made ``p``), else ``p`` planned again with it (a
    re-sized plan): in another process (``start_ahead``) while this one finishes the verification (``v_of`` and
    ``extra_check``, the model-error check), where the cores allow. Without the analysis, a ``lean`` plan (a
    re-size attempt: no baselines) is planned again whole."""
    if analysis and ahead is None and with_analysis is None and start_ahead is not None:
        ahead = start_ahead(headroom)
    try:
        v = v_of()
        if extra_check is not None:
            v = extra_check(p, v)
    except BaseException:
        if ahead is not None:
            ahead.cancel()
        raise
    if analysis or lean:
        if not analysis:
            full = attempt(headroom, False, False)
        elif ahead is not None:
            full = from_doc(ahead.result(), "the plan hetplan made")
        elif with_analysis is not None:
            full = with_analysis()
        else:
            full = attempt(headroom, True)
        if _signature(full) != _signature(p):
            v = check(full, "full")
            if extra_check is not None:
                v = extra_check(full, v)
        p = full
    block = dict(v)
    if resized is not None:
        block["resized"] = resized
    if "cascade" in block:  # verified under CASCADE: the calibrated settings go into the plan (and its router config)
        p = replace(p, cascade=block["cascade"])
    return replace(p, verification=verification_block(block))


def _signature(p: Plan) -> tuple[Any, ...]:
    """What the simulator replays of a plan (:func:`hetplan.sim.deployment.deployment_from_plan`): its combos, with
    the request-size buckets a mixed plan's combos serve, and its aggregated instances with theirs, at its goodput
    target. Two plans with one signature simulate the same whichever strategy made them: a mixed plan that found
    no cheaper mix is the Mélange plan, and ``--strategy all`` re-sizes both (example (b) simulated each of its six
    re-sized Mélange plans twice)."""
    combos = tuple(
        (c.label, c.count, c.decode_batch, c.goodput_req_per_s, tuple((b.label, b.share) for b in c.buckets))
        for c in p.combos
    )
    insts = tuple((t.gpu, t.tp, t.count, tuple((b.label, b.share) for b in t.buckets)) for t in p.instances)
    return (combos, insts, p.goodput_target_req_per_s)


def _rnd_h(headroom: float) -> float:
    """Headroom rounded for the plan document (4 decimals)."""
    return round(headroom, 4)


def _record(headroom: float, p: Plan, v: dict[str, Any]) -> dict[str, Any]:
    return {
        "headroom": _rnd_h(headroom),
        "usd_per_hour": p.total_usd_per_hour,
        "analytic_capacity_req_per_s": p.goodput_req_per_s,
        "simulated_capacity_req_per_s": v.get("simulated_capacity_req_per_s"),
        "out_of_sample_capacity_req_per_s": v.get("out_of_sample_capacity_req_per_s"),
        "status": v["status"],
        "joint_attainment": v["attainment"],
        "dropped": v["dropped"],
        "misses": v["misses"],
    }


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
]
