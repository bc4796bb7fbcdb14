"""Every value the report reads from a plan's optional blocks (the typed fields of :class:`~hetplan.plan.types.Plan`
and its ``verification``), one function each. Nothing else in :mod:`hetplan.report` reads those blocks. The
report repeats some blocks as written (its JSON form), so a few functions take the block's document form
(``to_doc``) and keep it beside the typed values they read.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from hetplan.plan.types import Plan
from hetplan.report.decision_types import OwnedRow
from hetplan.report.types import CurvePoint, OverContext, SensitivityRow, VerificationSummary, WorkloadSummary
from hetplan.report.verification import ClassOutcome, block_status, block_verdict, class_outcomes, verification_report

#: The workload summary's fields the report repeats, in this order.
WORKLOAD_KEYS = ("name", "source", "requests", "prompt_tokens_mean", "output_tokens_mean", "over_context")


def cross_provider(plan: Plan) -> bool:
    """True when the plan was made with ``--allow-cross-provider`` (each combo's site is then shown)."""
    return plan.cross_provider is not None


def fleet_gpu(plan: Plan) -> str | None:
    """The one GPU type of a homogeneous plan (``gpu``), None when the plan file names none."""
    return plan.gpu_only


def quality_note(plan: Plan) -> str | None:
    """The plan's sentence about quantized weights or KV cache (None when there is none)."""
    return plan.quality_note or None


def usd_per_million_tokens(plan: Plan) -> float | None:
    """$ per million input+output tokens at the plan's goodput (None when the plan file gives none)."""
    return plan.usd_per_million_tokens


def tokens_per_usd_basis(plan: Plan) -> str:
    """The sentence saying what the tokens/USD figures count ("" when the plan file gives none)."""
    return plan.tokens_per_usd_basis or ""


def assignment(plan: Plan) -> str | None:
    """A mixed plan's request routing in words (by request size), None when not given."""
    return plan.assignment or None


def price_sensitivity(plan: Plan) -> tuple[SensitivityRow, ...]:
    """The analysis's price-sensitivity rows (empty when the plan was made without the analysis)."""
    rows = plan.analysis.price_sensitivity if plan.analysis is not None else []
    return tuple(
        SensitivityRow(
            gpu=r.gpu,
            price_factor=r.price_factor,
            plan_usd_per_hour=r.plan_usd_per_hour,
            replanned_usd_per_hour=r.replanned_usd_per_hour,
            best_alternative=r.best_alternative,
            best_alternative_usd_per_hour=r.best_alternative_usd_per_hour,
            doc=r.to_doc(),
        )
        for r in rows
    )


def cost_vs_goodput(plan: Plan) -> tuple[CurvePoint, ...]:
    """The analysis's cost-versus-goodput rows: each goodput target with every strategy's $/hour (the row's
    ``<strategy>_usd_per_hour`` fields, in the order written)."""
    suffix = "_usd_per_hour"
    points = []
    for r in plan.analysis.cost_vs_goodput if plan.analysis is not None else []:
        doc = r.to_doc()
        by_strategy = {k.removesuffix(suffix): v for k, v in doc.items() if k.endswith(suffix)}
        points.append(CurvePoint(goodput_req_per_s=r.goodput_req_per_s, usd_per_hour=by_strategy, doc=doc))
    return tuple(points)


def workload(plan: Plan) -> WorkloadSummary:
    """The workload summary the plan file carries (name, source, requests, token means, traffic left out)."""
    w = plan.workload
    if w is None:
        return WorkloadSummary(source="", over_context=None, doc={})
    written = w.to_doc()
    doc = {k: written[k] for k in WORKLOAD_KEYS if k in written}
    left = w.over_context
    over = None
    # requests the plan was sized without (hetplan.workload.context)
    if left is not None and left.refused and left.window_tokens is not None:
        over = OverContext(
            refused=left.refused,
            requests_total=left.requests_total,
            window_tokens=left.window_tokens,
            arrival_rate_per_s=left.arrival_rate_per_s,
        )
    return WorkloadSummary(source=w.source, over_context=over, doc=doc)


def owned_gpus(plan: Plan) -> tuple[OwnedRow, ...] | None:
    """One row per owned GPU type (sorted by name) from the plan's ``owned_gpus`` block; None when the plan owns
    none (reports of plans without owned GPUs stay as they were)."""
    if not plan.owned_gpus:
        return None
    return tuple(
        OwnedRow(
            gpu=str(g),
            owned=block.owned,
            used=block.used,
            idle=block.idle,
            idle_reason=block.idle_reason,
            doc={"gpu": str(g), **block.to_doc()},
        )
        for g, block in sorted(plan.owned_gpus.items())
    )


def verification(plan: Plan) -> VerificationSummary | None:
    """The report's view of the plan's simulated check; None for a plan made with --no-verify."""
    if plan.verification is None:  # only then: reports of unverified plans stay as they were
        return None
    return verification_report(plan.verification, plan.slo)


def workload_source(plan: Plan) -> Any:
    """The workload's ``source`` as the plan file writes it (None when not given), for the gate to compare."""
    return plan.workload.source if plan.workload is not None else None


def verification_status(plan: Plan) -> str | None:
    """The simulated check's status (``verified``, ...); None when the plan was not verified."""
    return block_status(plan.verification)


def verification_verdict(plan: Plan) -> Any:
    """The simulated check's verdict line; None when there is none."""
    return block_verdict(plan.verification)


def class_checks(plan: Plan) -> dict[str, ClassOutcome]:
    """Each request class's check in the plan's verification, by class (empty for one class or none)."""
    return class_outcomes(plan.verification)
