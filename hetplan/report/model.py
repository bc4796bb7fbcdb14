"""The report: what every report format renders, built once from typed plans without re-solving
(:func:`build_report`), as the typed model of :mod:`hetplan.report.types`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from hetplan import __version__
from hetplan.plan.types import STRATEGIES, Plan
from hetplan.report import plan_fields
from hetplan.report.decision import QUALITY_NOTES, decision, owned_text, saved_fraction
from hetplan.report.schedule import ScheduleDoc, check_schedule, schedule_report
from hetplan.report.types import (
    ComboRow,
    Gain,
    InstanceRow,
    PlanSection,
    Report,
    SloDoc,
    StrategyRow,
)
from hetplan.report.verification import verification_report

REPORT_SCHEMA_VERSION = 1


def per_usd(value: float | None, usd_per_hour: float) -> float | None:
    """A tokens/USD figure for the report: None when the cost is $0/h (owned GPUs without a price; the plan file
    writes 0 there, and tokens per dollar is not defined)."""
    return value if usd_per_hour > 0 else None


def _deployment(plan: Plan) -> tuple[ComboRow | InstanceRow, ...]:
    rows: list[ComboRow | InstanceRow] = []
    cross_provider = plan_fields.cross_provider(plan)  # planned with --allow-cross-provider
    for combo in plan.combos:
        label = combo.label
        if cross_provider and combo.site:  # each role's site; a cross-site combo says so
            label += (
                f" (prefill at {combo.site}, decode at {combo.decode_site}: cross-site, KV over the WAN)"
                if combo.cross_site
                else f" (at {combo.site})"
            )
        rows.append(
            ComboRow(
                label=label,
                count=combo.count,
                usd_per_hour_each=combo.usd_per_hour,
                goodput_req_per_s_each=combo.goodput_req_per_s,
                predicted_ttft_s=combo.predicted_ttft_s,
                predicted_tpot_s=combo.predicted_tpot_s,
                meets_ttft_slo=combo.predicted_ttft_s <= plan.slo.ttft_s,
                meets_tpot_slo=combo.predicted_tpot_s <= plan.slo.tpot_s,
                utilization=combo.utilization,
                bound_by=combo.bound_by,
            )
        )
    for inst in plan.instances:
        rows.append(
            InstanceRow(
                label=f"{inst.gpu} TP{inst.tp} (aggregated)",
                count=inst.count,
                usd_per_hour_each=inst.usd_per_hour,
                traffic_share=inst.traffic_share,
                utilization=inst.utilization,
            )
        )
    return tuple(rows)


def _strategies(plan: Plan) -> dict[str, StrategyRow]:
    """The plan's own strategy first, then its baselines as the plan lists them."""
    rows = {
        plan.strategy: StrategyRow(
            status=plan.status,
            planned=True,
            gpu=plan_fields.fleet_gpu(plan),
            total_usd_per_hour=plan.total_usd_per_hour,
            goodput_req_per_s=plan.goodput_req_per_s,
            tokens_per_usd=per_usd(plan.tokens_per_usd, plan.total_usd_per_hour),
            output_tokens_per_usd=per_usd(plan.output_tokens_per_usd, plan.total_usd_per_hour),
            gpus_used=dict(plan.gpus_used),
        )
    }
    for name, other in plan.baselines.items():
        if other.status == "infeasible":
            rows[name] = StrategyRow(status="infeasible", reason=other.reason)
        else:
            cost = other.total_usd_per_hour or 0.0
            rows[name] = StrategyRow(
                status=other.status,
                gpu=other.gpu,
                total_usd_per_hour=other.total_usd_per_hour,
                goodput_req_per_s=other.goodput_req_per_s,
                tokens_per_usd=per_usd(other.tokens_per_usd, cost),
                output_tokens_per_usd=per_usd(other.output_tokens_per_usd, cost),
                gpus_used=dict(other.gpus_used or {}),
            )
    return rows


def _gains(plan: Plan, strategies: Mapping[str, StrategyRow]) -> dict[str, Gain]:
    gains = {}
    for name, part in strategies.items():
        if name != plan.strategy and not part.infeasible:
            gains[name] = Gain(
                cost_saved_fraction=saved_fraction(plan.total_usd_per_hour, part.usd_per_hour),
                tokens_per_usd_ratio=round(plan.tokens_per_usd / part.tokens_per_usd, 4)
                if plan.total_usd_per_hour > 0 and part.tokens_per_usd and part.usd_per_hour > 0
                else None,
            )
    return gains


def plan_report(plan: Plan, source: str) -> PlanSection:
    """Report section for one typed plan (see :class:`~hetplan.report.types.PlanSection`); ``source`` names the
    plan file."""
    rows = _strategies(plan)
    strategies = {name: rows[name] for name in STRATEGIES if name in rows}
    verification = plan_fields.verification(plan)
    return PlanSection(
        source=source,
        name=plan.name,
        strategy=plan.strategy,
        model=plan.model.spec.name,
        weight_dtype=plan.weight_dtype,
        quality_note=plan_fields.quality_note(plan),
        engine=plan.settings.engine,
        engine_version=plan.settings.engine_version,
        workload=plan_fields.workload(plan),
        slo=SloDoc(plan.slo.ttft_s, plan.slo.tpot_s, plan.slo.percentile),
        goodput_target_req_per_s=plan.goodput_target_req_per_s,
        demand_req_per_s=plan.demand_req_per_s,
        usd_per_hour=plan.total_usd_per_hour,
        usd_per_month=plan.usd_per_month,
        usd_per_million_tokens=plan_fields.usd_per_million_tokens(plan),
        goodput_req_per_s=plan.goodput_req_per_s,
        tokens_per_usd=per_usd(plan.tokens_per_usd, plan.total_usd_per_hour),
        output_tokens_per_usd=per_usd(plan.output_tokens_per_usd, plan.total_usd_per_hour),
        tokens_per_usd_basis=plan_fields.tokens_per_usd_basis(plan),
        gpus_used=dict(plan.gpus_used),
        prices={g: p.usd_per_gpu_hour for g, p in plan.prices.items()},
        price_sources={g: p.source for g, p in plan.prices.items()},
        deployment=_deployment(plan),
        strategies=strategies,
        gains=_gains(plan, rows),
        price_sensitivity=plan_fields.price_sensitivity(plan),
        cost_vs_goodput=plan_fields.cost_vs_goodput(plan),
        warnings=tuple(plan.warnings),
        verification=verification,
        decision=decision(plan, strategies, verification),
    )


def base_title(p: PlanSection) -> str:
    """``name: model (dtype, engine), strategy plan``: a plan section's title before it is made unique."""
    return f"{p.name}: {p.model} ({p.weight_dtype}, {p.engine}), {p.strategy} plan"


def _unique_titles(sections: list[PlanSection]) -> list[PlanSection]:
    """Give every plan section a ``title`` no other section of the report has: name, model, dtype and strategy,
    then the plan file when two plans share them, then the position when even that repeats."""
    base = [base_title(p) for p in sections]
    titles = [t if base.count(t) == 1 else f"{t} ({p.source})" for t, p in zip(base, sections, strict=True)]
    return [
        replace(p, title=t if titles.count(t) == 1 else f"{t} #{i + 1}")
        for i, (t, p) in enumerate(zip(titles, sections, strict=True))
    ]


def build_report(
    plans: Sequence[tuple[str, Plan]], schedules: Sequence[tuple[str, Mapping[str, Any]]] | None = None
) -> Report:
    """The report for ``(source, plan)`` pairs and autoscaling schedules (documents checked by
    :func:`check_schedule`), in the given order.

    Raises:
        InputError: a schedule lacks what the report reads (see :func:`check_schedule`).
    """
    return Report(
        schema_version=REPORT_SCHEMA_VERSION,
        kind="report",
        hetplan_version=__version__,
        plans=tuple(_unique_titles([plan_report(doc, source) for source, doc in plans])),
        schedules=tuple(schedule_report(doc, source) for source, doc in schedules) if schedules else None,
    )


__all__ = [
    "QUALITY_NOTES",
    "REPORT_SCHEMA_VERSION",
    "ScheduleDoc",
    "base_title",
    "build_report",
    "check_schedule",
    "decision",
    "owned_text",
    "per_usd",
    "plan_report",
    "saved_fraction",
    "schedule_report",
    "verification_report",
]
