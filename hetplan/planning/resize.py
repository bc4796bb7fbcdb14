"""Re-sizing a plan until its simulation holds the SLOs, and the search for a cheaper verified plan below one that
holds: the steps :func:`hetplan.planning.verify.plan_verified` takes between simulations (its module docstring
gives the method). Each works through an :class:`Attempt` (a plan at a headroom) and a check (the plan's
verification block), so nothing here plans or simulates by itself. Headrooms are fractions of the goodput target,
money in $/hour, rates in req/s.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from hetplan.errors import InfeasibleError
from hetplan.plan.blocks import CheaperSearch, CheaperTry, HeldOutHold, ResizeAttempt, Resized, Verification
from hetplan.plan.types import Plan
from hetplan.planning.forked import Background

if TYPE_CHECKING:
    from hetplan.planning.document import PlanLater

#: Simulated capacity aimed at, above the goodput target, when re-sizing.
RESIZE_MARGIN = 0.05
#: Smallest demand step of a re-size, relative to the failing plan's analytic capacity.
RESIZE_MIN_STEP = 1.1
#: Plans tried before giving up (the first included).
RESIZE_ROUNDS = 6
#: Bisection steps between the last failing and the first verified demand.
RESIZE_BISECT_STEPS = 3
#: The scenario's largest headroom.
MAX_HEADROOM = 10.0


class Attempt(Protocol):
    """A plan at ``headroom`` (with its analysis when asked); ``lean``: its strategy alone, without baselines
    (:func:`hetplan.planning.pipeline.plan`), for an attempt that is only simulated."""

    def __call__(self, headroom: float, with_analysis: bool, lean: bool = True) -> Plan: ...


class NoCheaper(Exception):
    """Re-sizing a shape reached a plan no cheaper than one already verified (``cost_cap`` of
    :func:`resize_until_verified`)."""

    def __init__(self, usd_per_hour: float, cap: float) -> None:
        super().__init__(f"${usd_per_hour:,.2f}/h >= ${cap:,.2f}/h")
        self.usd_per_hour, self.cap = usd_per_hour, cap


def describe_deployment(p: Plan) -> str:
    """A deployment in one phrase: ``6x L40S TP1 -> 1x A10G TP4`` or ``1x A100-80GB-SXM TP8 + 2x L40S TP4``."""
    parts = [f"{c.count}x ({c.label})" if c.count > 1 else c.label for c in p.combos]
    parts += [f"{t.count}x {t.gpu} TP{t.tp}" for t in p.instances]
    return " + ".join(parts) or "no deployment"


def shrink(
    first: Plan,
    v0: Verification,
    base: float,
    attempt: Attempt,
    check: Callable[[Plan, str], Verification],
    step: Callable[[str], None],
    simulating: Callable[[Plan], None] = lambda p: None,
    judged: Callable[[Plan, bool], None] = lambda p, verified: None,
) -> tuple[Plan, float, CheaperSearch]:
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
    cap, analytic = v0.simulated_capacity_req_per_s, first.goodput_req_per_s
    tried: list[CheaperTry] = []

    def record(kept: Plan) -> CheaperSearch:
        return CheaperSearch(from_usd_per_hour=first.total_usd_per_hour, method=SHRINK_METHOD, tried=tried,
                             usd_per_hour_kept=kept.total_usd_per_hour)  # fmt: skip

    best, hi = first, base
    best_h = hi  # the headroom that made ``best`` (hi may move below it: a plan no cheaper is not kept)
    if not cap or not analytic or cap <= target * (1 + RESIZE_MARGIN):
        return best, hi, record(first)
    low = max((1 + RESIZE_MARGIN) * analytic / cap - 1, SHRINK_FLOOR)
    h, fail = low, None
    for _ in range(SHRINK_STEPS + 1):
        if hi - h < 0.01 * (1 + abs(hi)):
            break
        step(f"searching cheaper: demand {target * (1 + h):.3g} req/s (headroom {h:+.2f})")
        try:
            p = attempt(h, False)
        except InfeasibleError as exc:
            tried.append(CheaperTry(headroom=rnd_headroom(h), infeasible=exc.what))
            fail, h = h, (h + hi) / 2
            continue
        row = CheaperTry(headroom=rnd_headroom(h), usd_per_hour=p.total_usd_per_hour, deployment=describe_deployment(p))
        if p.total_usd_per_hour >= best.total_usd_per_hour - 1e-9:
            tried.append(row.with_(status="not cheaper (not simulated)"))
            hi = h  # the same or a dearer deployment at less demand: a cheaper one needs less still
        else:
            simulating(p)
            v = check(p, "none")
            judged(p, v.verified)
            held = v.out_of_sample.runs if v.out_of_sample is not None else []
            row = row.with_(
                status=v.status,
                joint_attainment=v.joint_attainment,
                out_of_sample=[
                    HeldOutHold(label=r.label, joint_attainment=r.attainment, holds=not r.misses) for r in held
                ],  # fmt: skip
                misses=v.misses[:3],
            )
            tried.append(row)
            if v.verified:
                best, hi, best_h = p, h, h
            else:
                fail = h
        if fail is None:  # the lowest demand held (or was not cheaper): nothing below it is tried
            break
        h = (fail + hi) / 2
    return best, best_h, record(best)


SHRINK_METHOD = (
    "demand lowered to analytic x target x 1.05 / simulated capacity, then bisection towards the verified plan "
    "(hetplan.planning.verify)"
)
#: Bisection steps of the search for a cheaper verified plan.
SHRINK_STEPS = 3
#: Lowest headroom the search for a cheaper plan tries (the demand at half the target).
SHRINK_FLOOR = -0.5


RESIZE_METHOD = "demand x target / simulated capacity until verified, then bisection (hetplan.planning.verify)"


def resize_until_verified(
    first: Plan,
    v0: Verification,
    base: float,
    attempt: Attempt,
    check: Callable[[Plan, str], Verification],
    log: list[ResizeAttempt] | None = None,
    stage: Stage | None = None,
    cost_cap: float | None = None,
) -> tuple[Plan, float, Resized]:
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
    tried: list[ResizeAttempt] = log if log is not None else []
    tried.append(attempt_record(base, first, v0))
    fail_h, fail_p, fail_v = base, first, v0
    ceiling = MAX_HEADROOM  # the lowest headroom found infeasible (inventory), or the scenario's limit
    passing: tuple[float, Plan, Verification] | None = None
    at = stage or Stage()
    for n_round in range(1, RESIZE_ROUNDS):
        cap = fail_v.simulated_capacity_req_per_s
        held = fail_v.out_of_sample_capacity_req_per_s
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
            tried.append(ResizeAttempt(headroom=rnd_headroom(headroom), infeasible=exc.what))
            ceiling = headroom
            continue
        if cost_cap is not None and p.total_usd_per_hour >= cost_cap - 1e-9:
            tried.append(ResizeAttempt(headroom=rnd_headroom(headroom), usd_per_hour=p.total_usd_per_hour,
                                       status="no cheaper than a verified plan (not simulated)"))  # fmt: skip
            raise NoCheaper(p.total_usd_per_hour, cost_cap)
        v = check(p, "steer")
        tried.append(attempt_record(headroom, p, v))
        if v.verified:
            passing = (headroom, p, v)
            break
        fail_h, fail_p, fail_v = headroom, p, v
    if passing is None:
        last = tried[-1]
        raise InfeasibleError(
            "no re-sized plan holds its SLOs in simulation",
            f"tried {len(tried)} plans up to headroom {max(t.headroom or 0.0 for t in tried):g}; the last: "
            + (last.infeasible or "; ".join(last.misses)),
            "lower the goodput target or relax the SLOs, add inventory, or plan with --no-resize to keep the "
            "unverified plan"
            + (
                f"; {last.dropped} request(s) were dropped because they fit no instance's KV cache, which more "
                "copies of the same instances do not change: a GPU with more memory or a higher TP would"
                if last.dropped
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
        tried.append(attempt_record(mid, p, v))
        if v.verified and p.total_usd_per_hour <= best.total_usd_per_hour:
            hi, best, best_h = mid, p, mid
        else:
            lo = mid
    resized = Resized(
        headroom_asked=base,
        headroom_used=rnd_headroom(best_h),
        usd_per_hour_before=first.total_usd_per_hour,
        usd_per_hour_after=best.total_usd_per_hour,
        analytic_capacity_before_req_per_s=first.goodput_req_per_s,
        simulated_capacity_before_req_per_s=v0.simulated_capacity_req_per_s,
        out_of_sample_capacity_before_req_per_s=v0.out_of_sample_capacity_req_per_s,
        attempts=tried,
        method=RESIZE_METHOD,
    )
    return best, best_h, resized


class Stage:
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


def signature(p: Plan) -> tuple[Any, ...]:
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


def rnd_headroom(headroom: float) -> float:
    """Headroom rounded for the plan document (4 decimals)."""
    return round(headroom, 4)


def attempt_record(headroom: float, p: Plan, v: Verification) -> ResizeAttempt:
    """The ``resized.attempts`` record of plan ``p`` made at ``headroom``, with its verification ``v``."""
    return ResizeAttempt(
        headroom=rnd_headroom(headroom),
        usd_per_hour=p.total_usd_per_hour,
        analytic_capacity_req_per_s=p.goodput_req_per_s,
        simulated_capacity_req_per_s=v.simulated_capacity_req_per_s,
        out_of_sample_capacity_req_per_s=v.out_of_sample_capacity_req_per_s,
        status=v.status,
        joint_attainment=v.joint_attainment,
        dropped=v.dropped,
        misses=v.misses,
    )


def final_plan(
    p: Plan,
    v_of: Callable[[], Verification],
    headroom: float,
    analysis: bool,
    attempt: Attempt,
    check: Callable[[Plan, str], Verification],
    resized: Resized | None,
    ahead: Background | None = None,
    later: PlanLater | None = None,
    lean: bool = False,
    start_ahead: Callable[[float], Background | None] | None = None,
    extra_check: Callable[[Plan, Verification], Verification] | None = None,
) -> Plan:
    """The chosen plan whole, with its analysis when asked (the same deployment: its verification, ``v_of()``, is
    kept). A ``lean`` plan (a re-size attempt: its strategy alone, no baselines) is made whole, and the analysis
    computed, once, from the planner that made ``p``: ``ahead``, already started in another process
    (:func:`hetplan.planning.forked.start_forked`), else started now (``start_ahead``) while this one finishes the
    verification (``v_of`` and ``extra_check``, the model-error check), where the cores allow, else ``later``
    (:data:`hetplan.planning.document.PlanLater`) in this process. Only a plan made in worker processes (no
    planner here) is planned again (``attempt``)."""
    if (analysis or lean) and ahead is None and start_ahead is not None:
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
        if ahead is not None:
            full = ahead.result()  # the typed plan, pickled back from the other process
        elif later is not None:
            full = later(with_analysis=analysis)
        else:
            full = attempt(headroom, analysis, False)
        if signature(full) != signature(p):
            v = check(full, "full")
            if extra_check is not None:
                v = extra_check(full, v)
        p = full
    if resized is not None:
        v = v.with_(resized=resized)
    if v.cascade is not None:  # verified under CASCADE: the calibrated settings go into the plan (and its router)
        p = replace(p, cascade=v.cascade)
    return replace(p, verification=v)


__all__ = [
    "MAX_HEADROOM",
    "RESIZE_BISECT_STEPS",
    "RESIZE_MARGIN",
    "RESIZE_METHOD",
    "RESIZE_MIN_STEP",
    "RESIZE_ROUNDS",
    "SHRINK_FLOOR",
    "SHRINK_METHOD",
    "SHRINK_STEPS",
    "Attempt",
    "NoCheaper",
    "Stage",
    "attempt_record",
    "describe_deployment",
    "final_plan",
    "resize_until_verified",
    "rnd_headroom",
    "shrink",
    "signature",
]
