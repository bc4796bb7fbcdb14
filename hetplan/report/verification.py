"""The report's view of a plan's ``verification`` block: :func:`verification_report` reads the block as the plan
file writes it into a :class:`~hetplan.report.types.VerificationSummary`. The only reader of that block in the
report (through :func:`hetplan.report.plan_fields.verification`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


def verification_report(v: Mapping[str, Any], slo: Slo) -> VerificationSummary:
    """The report's view of a plan's ``verification`` block (``hetplan plan``'s simulated check, see
    :func:`hetplan.sim.verify.verify_plan`; ``resized`` after a re-size, see :func:`hetplan.api.plan_verified`):
    the status and verdict line, the analytic and simulated capacities, the figures behind them.

    Every value may be missing or None in the block (a non-finite percentile is written as null); it stays None here
    and the renderers print it as "-". ``ttft_q_s``/``tpot_q_s`` are the simulated p-``percentile`` TTFT/TPOT in
    seconds; ``slo_held`` is False when the simulation recorded any miss, None when the block says nothing.
    """
    q = slo.percentile
    raw = v.get("attainment_by_slo", v.get("attainment"))  # blocks before the verdict: attainment was the dict
    att: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    misses = tuple(str(m) for m in v.get("misses") or [])
    by_class = v.get("attainment_by_class")
    by_class = {str(k): by_class[k] for k in sorted(by_class)} if isinstance(by_class, dict) else None
    checks = v.get("classes")
    cascade = v.get("cascade")
    oos = v.get("out_of_sample")
    error = v.get("model_error")
    search = v.get("cheaper_search")
    resized = v.get("resized")
    return VerificationSummary(
        status=v.get("status"),
        verdict=v.get("verdict"),
        analytic_capacity_req_per_s=v.get("analytic_capacity_req_per_s"),
        simulated_capacity_req_per_s=v.get("simulated_capacity_req_per_s"),
        policy=v.get("policy"),
        target_req_per_s=v.get("target_req_per_s"),
        rate_scale=v.get("rate_scale"),
        arrivals=v.get("arrivals"),
        requests=v.get("requests"),
        unfinished=v.get("unfinished"),
        dropped=v.get("dropped"),
        attainment=Attainment(att.get("joint"), att.get("ttft"), att.get("tpot")),
        percentile=q,
        ttft_q_s=v.get("ttft_p_s", v.get(f"ttft_p{q:g}_s")),
        tpot_q_s=v.get("tpot_p_s", v.get(f"tpot_p{q:g}_s")),
        slo_ttft_s=slo.ttft_s,
        slo_tpot_s=slo.tpot_s,
        goodput_req_per_s=v.get("goodput_req_per_s"),
        goodput_definition=v.get("goodput_definition"),
        misses=misses,
        slo_held=(not misses) if "misses" in v else None,
        summary=v.get("summary"),
        warnings=tuple(str(w) for w in v.get("warnings") or []),
        # a workload with classes (only then: single-class reports stay as they were)
        attainment_by_class=by_class,
        jain_index=v.get("jain_index") if by_class is not None else None,
        # the scenario's request classes, each against its own SLOs
        classes=tuple(_class_check(c) for c in checks if isinstance(c, dict)) if isinstance(checks, list) else None,
        # verified under CASCADE with its calibrated settings
        cascade=_cascade(cascade) if isinstance(cascade, dict) else None,
        # verified out of sample too (only then: older plans' reports stay as they were)
        in_sample_status=v.get("in_sample_status") if isinstance(oos, dict) else None,
        out_of_sample=_out_of_sample(oos) if isinstance(oos, dict) else None,
        # checked against the model's own error (only then: older reports stay as they were)
        model_error=_model_error(error) if isinstance(error, dict) else None,
        # searched below a verified plan
        cheaper_search=_cheaper(search) if isinstance(search, dict) and search.get("tried") else None,
        resized=_resized(resized) if isinstance(resized, dict) else None,
    )


def _class_check(c: Mapping[str, Any]) -> ClassCheck:
    return ClassCheck(
        class_=c.get("class"),
        requests=c.get("requests"),
        attainment=c.get("attainment"),
        ttft_p_s=c.get("ttft_p_s"),
        tpot_p_s=c.get("tpot_p_s"),
        ttft_slo_s=c.get("ttft_slo_s"),  # type: ignore[arg-type]  # as written; the renderer needs it
        tpot_slo_s=c.get("tpot_slo_s"),  # type: ignore[arg-type]
        holds=c.get("holds"),
    )


def _cascade(c: Mapping[str, Any]) -> CascadeSummary:
    return CascadeSummary(
        kappa=c.get("kappa"),
        kappa_by_class=c.get("kappa_by_class"),
        q2=c.get("q2"),
        tier2_order=c.get("tier2_order"),
        quantile=c.get("quantile"),
    )


def _out_of_sample(oos: Mapping[str, Any]) -> OutOfSample:
    runs = tuple(
        OutOfSampleRun(
            label=r.get("label"),
            requests=r.get("requests"),
            attainment=r.get("attainment"),
            ttft_p_s=r.get("ttft_p_s"),
            tpot_p_s=r.get("tpot_p_s"),
            holds=not r.get("misses"),
        )
        for r in oos.get("runs") or []
        if isinstance(r, dict)
    )
    return OutOfSample(status=oos.get("status"), split=oos.get("split"), runs=runs)


def _model_error(e: Mapping[str, Any]) -> ModelErrorSummary:
    return ModelErrorSummary(
        confidence=e.get("confidence"),
        band_ttft=e.get("band_ttft"),
        band_tpot=e.get("band_tpot"),
        band_scope=e.get("band_scope"),
        holds_at_confidence=e.get("holds_at_confidence"),
        margin_step_slowdown=e.get("margin_step_slowdown"),
        margin_capped=e.get("margin_capped"),
        summary=e.get("summary"),
    )


def _cheaper(search: Mapping[str, Any]) -> CheaperSearch:
    tried = tuple(
        CheaperTry(
            usd_per_hour=t.get("usd_per_hour"),
            deployment=t.get("deployment"),
            status=t.get("status"),
            joint_attainment=t.get("joint_attainment"),
            infeasible=t.get("infeasible"),
        )
        for t in search["tried"]
        if isinstance(t, dict)
    )
    return CheaperSearch(
        from_usd_per_hour=search.get("from_usd_per_hour"),
        usd_per_hour_kept=search.get("usd_per_hour_kept"),
        tried=tried,
    )


def _resized(r: Mapping[str, Any]) -> Resized:
    return Resized(
        headroom_asked=r.get("headroom_asked"),
        headroom_used=r.get("headroom_used"),
        usd_per_hour_before=r.get("usd_per_hour_before"),
        usd_per_hour_after=r.get("usd_per_hour_after"),
        attempts=len(r.get("attempts") or []),
    )


@dataclass(frozen=True)
class ClassOutcome:
    """One request class's check as the gate compares it: attainment (0-1), whether it held its own SLOs, and
    those SLOs in seconds."""

    attainment: Any
    holds: Any
    ttft_slo_s: Any
    tpot_slo_s: Any


def block_status(v: Any) -> str | None:
    """The ``status`` of a verification block (None when there is no block or no verdict)."""
    return v.get("status") if isinstance(v, dict) else None


def block_verdict(v: Any) -> Any:
    """The ``verdict`` line of a verification block (None when there is none)."""
    return v.get("verdict") if isinstance(v, dict) else None


def class_outcomes(v: Any) -> dict[str, ClassOutcome]:
    """The per-class checks of a verification block by class name (request classes; empty for one class)."""
    rows = v.get("classes") if isinstance(v, dict) else None
    if not isinstance(rows, list):
        return {}
    return {
        str(r["class"]): ClassOutcome(r.get("attainment"), r.get("holds"), r.get("ttft_slo_s"), r.get("tpot_slo_s"))
        for r in rows
        if isinstance(r, dict) and "class" in r
    }
