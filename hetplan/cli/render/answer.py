"""The first screen of ``hetplan plan``'s terminal answer, for a buyer (issue 31): the verdict, the decision in
purchase terms (instances, provider, region, $/h and $/month), the owned GPUs' use, the traffic left out of sizing
and why, the confidence (out of sample and against the model's own error), then the other strategies as one number
each. Plain strings, so the same lines print on any console and tests read them without a terminal.

Comparisons follow one fixed rule (:func:`hetplan.units.cost_vs`): another plan's cost against this plan's,
"X % more" or "X % less" of this plan's $/h ("the same" within half a cent; dollars when either costs $0/h, owned
GPUs without a price).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetplan.units import PROVIDER_NAMES, cost_vs, format_duration, money_per_month, purchase_words

if TYPE_CHECKING:  # the CLI loads hetplan.plan only when a command runs (tests/cli/test_structure.py)
    from hetplan.plan.types import Plan


def decision_line(plan: Plan) -> str:
    """``decision: rent 1 AWS p5.48xlarge in us-east-1: $98.32/h, $71.8k/month``; owned nodes the plan uses are
    named too (``use 1 owned 8-GPU L40S node``); a plan without purchase lines names its GPUs."""
    parts = purchase_words(plan.purchase)
    if not parts:  # no instance offers (per-GPU prices): the GPUs
        parts.append("run " + ", ".join(f"{n}x {g}" for g, n in plan.gpus_used.items()))
    cost = f"${plan.total_usd_per_hour:,.2f}/h, {money_per_month(plan.usd_per_month)}"
    return f"decision: {'; '.join(parts)}: {cost}"


def traffic_line(plan: Plan) -> str | None:
    """The traffic the plan was sized without, and why: ``traffic: 230 of 2,728 requests (8.4 %) left out: prompt
    over the 32,768-token window; trace 3.03 req/s with them`` (None when nothing was left out)."""
    left = plan.workload.over_context if plan.workload is not None else None
    if left is None or not (left.refused or left.truncated):
        return None
    total = left.requests_total
    text = "traffic: "
    if left.refused:
        text += (
            f"{left.refused:,} of {total:,} requests ({left.refused / total * 100:.1f} %) left out: prompt over "
            f"the {left.window_tokens:,}-token window"
        )
    if left.truncated:
        text += ("; " if left.refused else "") + f"{left.truncated:,} outputs cut at the window"
    if left.arrival_rate_per_s is not None:
        text += f"; trace {left.arrival_rate_per_s:.3g} req/s with them"
    return text


def verdict_line(plan: Plan) -> str:
    """One line: whether the simulator held the SLOs with this plan, at what rate, and what it measured."""
    v = plan.verification
    if v is None:
        return "not simulated (--no-verify): every figure below is the planner's model"
    head = "VERIFIED" if v.verified else "NOT VERIFIED"
    q = v.percentile if v.percentile is not None else plan.slo.percentile
    text = f"{head} in simulation on the trace"
    if v.joint_attainment is not None:
        text += f": {v.joint_attainment * 100:.1f} % of requests meet both SLOs (needs {q:g} %)"
    if v.target_req_per_s is not None:
        text += f" at {v.target_req_per_s:.3g} req/s"
    if v.ttft_p_s is not None and v.tpot_p_s is not None:
        text += f"; simulated p{q:g} TTFT {format_duration(v.ttft_p_s)}, TPOT {format_duration(v.tpot_p_s)}"
    return text


def confidence_line(plan: Plan) -> str | None:
    """Out of sample and against the model's error, from the verification block (None without one)."""
    v = plan.verification
    if v is None:
        return None
    parts = []
    oos = v.out_of_sample
    if oos is not None and oos.runs:
        runs = ", ".join(f"{r.label} {r.attainment * 100:.1f} %" for r in oos.runs if r.attainment is not None)
        parts.append(f"out of sample it {oos.status or '-'} ({runs})")
    err = v.model_error
    if err is not None:
        margin = err.margin_step_slowdown
        text = "model error: "
        if margin is not None:
            text += f"holds with steps up to {margin * 100:.0f} % slower than predicted"
        if err.confidence and err.holds_at_confidence is not None:
            text += ("; " if margin is not None else "") + (
                f"{'holds' if err.holds_at_confidence else 'misses'} at the model's {err.confidence} error"
            )
        parts.append(text)
    return "confidence: " + "; ".join(parts) if parts else None


def comparison_line(plan: Plan) -> str | None:
    """``other strategies (the model's cost): homogeneous the same, melange 30.5 % more, mixed infeasible``."""
    parts = []
    for name, part in plan.baselines.items():
        if part.status == "infeasible" or part.total_usd_per_hour is None:
            parts.append(f"{name} infeasible")
        else:
            parts.append(f"{name} {cost_vs(part.total_usd_per_hour, plan.total_usd_per_hour)}")
    return f"other strategies cost (the model's figures): {', '.join(parts)}" if parts else None


def owned_lines(plan: Plan) -> list[str]:
    """``owned L40S: 8 owned, 0 used, 8 idle: <why>``, one per owned type (:mod:`hetplan.planning.owned`)."""
    out = []
    for gpu, row in (plan.owned_gpus or {}).items():
        text = f"owned {gpu}: {row.owned} owned, {row.used} used"
        if row.idle:
            text += f", {row.idle} idle" + (f": {row.idle_reason}" if row.idle_reason else "")
        out.append(text)
    return out


def answer_lines(plan: Plan) -> list[str]:
    """The answer's first lines after the scenario line: traffic left out (when any), the verdict, the decision,
    the owned GPUs, the confidence, the other strategies."""
    lines = [line for line in (traffic_line(plan), verdict_line(plan), decision_line(plan)) if line]
    lines += owned_lines(plan)
    lines += [line for line in (confidence_line(plan), comparison_line(plan)) if line]
    return lines


__all__ = [
    "PROVIDER_NAMES",
    "answer_lines",
    "comparison_line",
    "confidence_line",
    "cost_vs",  # re-exported from hetplan.units, as are PROVIDER_NAMES and money_per_month
    "decision_line",
    "money_per_month",
    "owned_lines",
    "traffic_line",
    "verdict_line",
]
