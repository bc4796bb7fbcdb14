"""The report's first block for each plan (:class:`~hetplan.report.decision_types.Decision`): what to run, what it costs
and saves against the best single-GPU-type fleet, whether the simulator verified it, what each GPU type does, where
the prices come from, purchases, quality changes and the owned GPUs' use.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping

from hetplan.plan.types import Plan
from hetplan.report import plan_fields
from hetplan.report.decision_types import BestSingleType, Decision, GpuRole, OwnedRow, PriceRow
from hetplan.report.types import StrategyRow, VerificationSummary
from hetplan.units import cost_vs, money_per_month, purchase_words

#: Weight and KV-cache dtypes below 16 bits: they change the model's outputs, so the report lists them.
QUALITY_NOTES = {
    "fp8": "8-bit floating point",
    "int8": "8-bit integer",
    "int4": "4-bit integer",
}


def saved_fraction(usd_per_hour: float, other_usd_per_hour: float) -> float | None:
    """``1 - usd_per_hour / other_usd_per_hour`` rounded to 4 places (negative when this costs more); None when the
    other costs $0/h (an all-owned fleet without a price), where no fraction is defined."""
    if not other_usd_per_hour > 0:
        return None
    return round(1 - usd_per_hour / other_usd_per_hour, 4) + 0.0


def _gpu_roles(plan: Plan) -> dict[str, dict[str, int]]:
    """GPUs of each type by role (prefill, decode, aggregated), over every copy of every combo or instance type."""
    roles: dict[str, dict[str, int]] = {}
    for c in plan.combos:
        pre = roles.setdefault(c.prefill_gpu, {})
        pre["prefill"] = pre.get("prefill", 0) + c.count * c.n_prefill * c.prefill_tp * c.prefill_pp
        dec = roles.setdefault(c.decode_gpu, {})
        dec["decode"] = dec.get("decode", 0) + c.count * c.n_decode * c.decode_tp * c.decode_pp
    for inst in plan.instances:
        agg = roles.setdefault(inst.gpu, {})
        agg["aggregated"] = agg.get("aggregated", 0) + inst.count * inst.tp * inst.pp
    return roles


def _instances_by_role(plan: Plan, role: str) -> list[str]:
    """``["4x A100-80GB-SXM TP2"]``: the instances of one role (prefill or decode), summed over combo copies."""
    counts: dict[tuple[str, int], int] = {}
    for c in plan.combos:
        gpu, tp, n = (
            (c.prefill_gpu, c.prefill_tp, c.n_prefill) if role == "prefill" else (c.decode_gpu, c.decode_tp, c.n_decode)
        )
        counts[(gpu, tp)] = counts.get((gpu, tp), 0) + c.count * n
    return [f"{n}x {gpu} TP{tp}" for (gpu, tp), n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]


def best_single_type(
    strategy: str, strategies: Mapping[str, StrategyRow], usd_per_hour: float
) -> BestSingleType | None:
    """The homogeneous baseline (the best single-GPU-type fleet) as the report shows it against a plan of
    ``strategy`` costing ``usd_per_hour`` $/hour, or None when the plan carries none."""
    if strategy == "homogeneous":
        own = strategies.get(strategy, StrategyRow(status=""))
        return BestSingleType("this plan", usd_per_hour=own.total_usd_per_hour, gpu=own.gpu)
    base = strategies.get("homogeneous")
    if base is None:
        return None
    if base.infeasible:
        return BestSingleType("infeasible", reason=base.reason)
    cost = base.total_usd_per_hour
    return BestSingleType(
        base.status,
        usd_per_hour=cost,
        gpu=base.gpu or ", ".join(base.gpus_used),
        saved_fraction=saved_fraction(usd_per_hour, cost) if cost is not None else None,
    )


def _sentence(plan: Plan, best: BestSingleType | None) -> str:
    """``Rent 1 AWS p5.48xlarge in us-east-1 and run 1x H100-SXM TP2 for prefill and 1x H100-SXM TP4 for decode:
    $98.32/h ($71.8k/month), ...``: what is bought (instances, provider, region; owned nodes used) in a buyer's
    words first, then what runs on it, the cost per hour and per month, and the best single-GPU-type fleet."""
    cost = f"${plan.total_usd_per_hour:,.2f}/h ({money_per_month(plan.usd_per_month)})"
    if plan.combos:
        what = (
            f"Run {' + '.join(_instances_by_role(plan, 'prefill'))} for prefill and "
            f"{' + '.join(_instances_by_role(plan, 'decode'))} for decode"
        )
        if plan.instances:  # a mixed plan: aggregated instances too, requests routed by prompt length
            routed = plan_fields.assignment(plan)
            what += (
                ", and " + " + ".join(f"{i.count}x {i.gpu} TP{i.tp}" for i in plan.instances) + " aggregated"
                + (f" (by request size: {routed})" if routed else "")
            )  # fmt: skip
    else:
        what = "Run " + " + ".join(f"{i.count}x {i.gpu} TP{i.tp}" for i in plan.instances) + " (aggregated)"
    bought = purchase_words(plan.purchase)
    if bought:  # issue 31: the decision in purchase terms, not only engineer words
        words = " and ".join(bought)
        what = words[0].upper() + words[1:] + " and r" + what[1:]
    if best is None:
        vs = ""
    elif best.status == "this plan":
        vs = ": this plan is the best single-GPU-type fleet"
    elif best.status == "infeasible":
        vs = "; no single-GPU-type fleet holds the SLOs within the inventory"
    elif (best.saved_fraction is not None and abs(best.saved_fraction) < 5e-4) or (
        best.saved_fraction is None and best.usd_per_hour == plan.total_usd_per_hour
    ):
        vs = f", the same as the best single-GPU-type fleet ({best.gpu})"
    else:  # one rule for every comparison (hetplan.units.cost_vs): the other fleet against this plan
        other = best.usd_per_hour or 0.0
        fleet = f"({best.gpu}, ${other:,.2f}/h)"
        vs = f"; the best single-GPU-type fleet {fleet} costs {cost_vs(other, plan.total_usd_per_hour)}"
    return f"{what}: {cost}{vs}."


def _prices(plan: Plan) -> tuple[PriceRow, ...]:
    # what the purchases pay per GPU-hour: an 8-GPU instance can cost more per GPU than the catalog's lowest
    # per-GPU offer (the L40S's 1-GPU g6e.2xlarge), and the report must not show the lower figure alone
    usd: dict[str, float] = {}
    gpus: dict[str, int] = {}
    names: dict[str, list[str]] = {}
    for line in plan.purchase:
        usd[line.gpu] = usd.get(line.gpu, 0.0) + line.count * line.usd_per_hour_each
        gpus[line.gpu] = gpus.get(line.gpu, 0) + line.count * line.gpus_per_instance
        names.setdefault(line.gpu, []).append(f"{line.count}x {line.instance_type}")
    rows = []
    for gpu, price in sorted(plan.prices.items()):
        if not plan.gpus_used.get(gpu):
            continue
        bought = bool(gpus.get(gpu))
        rows.append(
            PriceRow(
                gpu=gpu,
                usd_per_gpu_hour=price.usd_per_gpu_hour,
                gpus=int(plan.gpus_used.get(gpu, 0)),
                source=price.source,
                usd_per_gpu_hour_bought=round(usd[gpu] / gpus[gpu], 4) if bought else None,
                bought_as=tuple(names[gpu]) if bought else None,
            )
        )
    return tuple(rows)


def decision(plan: Plan, strategies: Mapping[str, StrategyRow], verification: VerificationSummary | None) -> Decision:
    """The report's first block for ``plan`` (see the module docstring), given its section's ``strategies`` and
    simulated check (None when unverified). Money in $/hour; the best single-GPU-type fleet's ``saved_fraction`` is
    1 - plan cost / its cost (negative when the plan costs more)."""
    best = best_single_type(plan.strategy, strategies, plan.total_usd_per_hour)
    if verification is None:
        verdict = "not simulated (planned with --no-verify): every figure is the planner's model"
        status = "not simulated"
    else:
        verdict = str(verification.verdict or verification.summary or "-")
        status = str(verification.status or "-")
    roles = _gpu_roles(plan)
    role_rows = []
    for gpu in sorted(roles):
        parts = [f"{n} GPU{'' if n == 1 else 's'} {role}" for role, n in roles[gpu].items() if n]
        role_rows.append(GpuRole(gpu, tuple(roles[gpu].items()), ", ".join(parts)))
    quality = []
    for what_dtype, dtype in (("weights", plan.weight_dtype), ("KV cache", plan.kv_dtype)):
        if dtype in QUALITY_NOTES:
            quality.append(
                f"{what_dtype} in {dtype} ({QUALITY_NOTES[dtype]}), not the 16-bit checkpoint: outputs change; check "
                "the model's quality on your own evaluations before deploying"
            )
    return Decision(
        sentence=_sentence(plan, best),
        status=status,
        verdict=verdict,
        best_single_gpu_type=best,
        gpu_roles=tuple(role_rows),
        prices=_prices(plan),
        purchase=plan.purchase,  # the typed lines (issue 14)
        quality=tuple(quality),
        # owned GPUs per type and their use, with why idle ones are idle (hetplan.planning.owned)
        owned=plan_fields.owned_gpus(plan),
    )


def owned_text(row: OwnedRow) -> str:
    """One owned GPU type's use in words: ``8 owned, 0 used, 8 idle: <why>`` (a row of the decision's ``owned``)."""
    text = f"{row.owned} owned, {row.used} used"
    if row.idle:
        text += f", {row.idle} idle" + (f": {row.idle_reason}" if row.idle_reason else "")
    return text
