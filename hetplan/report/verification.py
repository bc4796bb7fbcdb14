"""The report's view of a plan's ``verification`` block: :func:`verification_report` reads the typed block
(:class:`hetplan.plan.blocks.Verification`) into a :class:`~hetplan.report.types.VerificationSummary`. The only
reader of that block in the report (through :func:`hetplan.report.plan_fields.verification`) and the gate's
(:func:`block_status`, :func:`block_verdict`, :func:`class_outcomes`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hetplan.plan import blocks
from hetplan.plan.blocks.verification import CascadeSettings
from hetplan.plan.types import Slo
from hetplan.report.types import (
    Attainment,
    CascadeSummary,
    CheaperSearch,
    CheaperTry,
    ClassCheck,
    ModelErrorSummary,
    OutOfSample,
    OutOfSampleRun,
    Resized,
    VerificationSummary,
)


def verification_report(v: blocks.Verification, slo: Slo) -> VerificationSummary:
    """The report's view of a plan's ``verification`` block (``hetplan plan``'s simulated check, see
    :func:`hetplan.sim.verify.verify_plan`; ``resized`` after a re-size, see :func:`hetplan.api.plan_verified`):
    the status and verdict line, the analytic and simulated capacities, the figures behind them.

    Every value may be missing or None in the block (a non-finite percentile is written as null); it stays None here
    and the renderers print it as "-". ``ttft_q_s``/``tpot_q_s`` are the simulated p-``percentile`` TTFT/TPOT in
    seconds; ``slo_held`` is False when the simulation recorded any miss, None when the block says nothing.
    """
    q = slo.percentile
    att = v.attainment_shares or blocks.Attainment()  # blocks before the verdict: attainment was the map
    by_class = v.attainment_by_class
    oos = v.out_of_sample
    search = v.cheaper_search
    cascade = v.cascade_settings
    return VerificationSummary(
        status=v.status,
        verdict=v.verdict,
        analytic_capacity_req_per_s=v.analytic_capacity_req_per_s,
        simulated_capacity_req_per_s=v.simulated_capacity_req_per_s,
        policy=v.policy,
        target_req_per_s=v.target_req_per_s,
        rate_scale=v.rate_scale,
        arrivals=v.arrivals,
        requests=v.requests,
        unfinished=v.unfinished,
        dropped=v.dropped,
        attainment=Attainment(att.joint, att.ttft, att.tpot),
        percentile=q,
        ttft_q_s=v.ttft_q_s(q),
        tpot_q_s=v.tpot_q_s(q),
        slo_ttft_s=slo.ttft_s,
        slo_tpot_s=slo.tpot_s,
        goodput_req_per_s=v.goodput_req_per_s,
        goodput_definition=v.goodput_definition,
        misses=tuple(v.misses),
        slo_held=v.slo_held,
        summary=v.summary,
        warnings=tuple(v.warnings),
        # a workload with classes (only then: single-class reports stay as they were)
        attainment_by_class={k: by_class[k] for k in sorted(by_class)} if by_class is not None else None,
        jain_index=v.jain_index if by_class is not None else None,
        # the scenario's request classes, each against its own SLOs
        classes=tuple(_class_check(c) for c in v.classes) if v.classes is not None else None,
        # verified under CASCADE with its calibrated settings
        cascade=_cascade(cascade) if cascade is not None else None,
        # verified out of sample too (only then: older plans' reports stay as they were)
        in_sample_status=v.in_sample_status if oos is not None else None,
        out_of_sample=_out_of_sample(oos) if oos is not None else None,
        # checked against the model's own error (only then: older reports stay as they were)
        model_error=_model_error(v.model_error) if v.model_error is not None else None,
        # searched below a verified plan
        cheaper_search=_cheaper(search) if search is not None and search.tried else None,
        resized=_resized(v.resized) if v.resized is not None else None,
    )


def _class_check(c: blocks.ClassCheck) -> ClassCheck:
    return ClassCheck(
        class_=c.class_,
        requests=c.requests,
        attainment=c.attainment,
        ttft_p_s=c.ttft_p_s,
        tpot_p_s=c.tpot_p_s,
        ttft_slo_s=c.ttft_slo_s,  # type: ignore[arg-type]  # as written; the renderer needs it
        tpot_slo_s=c.tpot_slo_s,  # type: ignore[arg-type]
        holds=c.holds,
    )


def _cascade(c: CascadeSettings) -> CascadeSummary:
    return CascadeSummary(
        kappa=c.kappa,
        kappa_by_class=c.kappa_by_class,
        q2=c.q2,
        tier2_order=c.tier2_order,
        quantile=c.quantile,
    )


def _out_of_sample(oos: blocks.OutOfSample) -> OutOfSample:
    runs = tuple(
        OutOfSampleRun(
            label=r.label,
            requests=r.requests,
            attainment=r.attainment,
            ttft_p_s=r.ttft_p_s,
            tpot_p_s=r.tpot_p_s,
            holds=not r.misses,
        )
        for r in oos.runs
    )
    return OutOfSample(status=oos.status, split=oos.split, runs=runs)


def _model_error(e: blocks.ModelError) -> ModelErrorSummary:
    return ModelErrorSummary(
        confidence=e.confidence,  # type: ignore[arg-type]  # as written (a confidence level's name)
        band_ttft=e.band_ttft,
        band_tpot=e.band_tpot,
        band_scope=e.band_scope,
        holds_at_confidence=e.holds_at_confidence,
        margin_step_slowdown=e.margin_step_slowdown,
        margin_capped=e.margin_capped,
        summary=e.summary,
    )


def _cheaper(search: blocks.CheaperSearch) -> CheaperSearch:
    tried = tuple(
        CheaperTry(
            usd_per_hour=t.usd_per_hour,
            deployment=t.deployment,
            status=t.status,
            joint_attainment=t.joint_attainment,
            infeasible=t.infeasible,
        )
        for t in search.tried
    )
    return CheaperSearch(
        from_usd_per_hour=search.from_usd_per_hour,
        usd_per_hour_kept=search.usd_per_hour_kept,
        tried=tried,
    )


def _resized(r: blocks.Resized) -> Resized:
    return Resized(
        headroom_asked=r.headroom_asked,
        headroom_used=r.headroom_used,
        usd_per_hour_before=r.usd_per_hour_before,
        usd_per_hour_after=r.usd_per_hour_after,
        attempts=len(r.attempts),
    )


@dataclass(frozen=True)
class ClassOutcome:
    """One request class's check as the gate compares it: attainment (0-1), whether it held its own SLOs, and
    those SLOs in seconds."""

    attainment: Any
    holds: Any
    ttft_slo_s: Any
    tpot_slo_s: Any


def block_status(v: blocks.Verification | None) -> str | None:
    """The ``status`` of a verification block (None when there is no block or no verdict)."""
    return v.status if v is not None else None


def block_verdict(v: blocks.Verification | None) -> Any:
    """The ``verdict`` line of a verification block (None when there is none)."""
    return v.verdict if v is not None else None


def class_outcomes(v: blocks.Verification | None) -> dict[str, ClassOutcome]:
    """The per-class checks of a verification block by class name (request classes; empty for one class)."""
    if v is None or v.classes is None:
        return {}
    return {
        str(r.class_): ClassOutcome(r.attainment, r.holds, r.ttft_slo_s, r.tpot_slo_s)
        for r in v.classes
        if r.class_ is not None
    }
