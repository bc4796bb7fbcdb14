"""The simulated check as the report shows it: :class:`VerificationSummary` and its parts (typed view of a plan's
``verification`` block, built by :func:`hetplan.report.verification.verification_report`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from hetplan.report.docmodel import DocModel, plain


@dataclass(frozen=True)
class Attainment(DocModel):
    """Shares (0-1) of requests that met both SLOs (``joint``), the TTFT SLO and the TPOT SLO; None when unknown."""

    joint: float | None = None
    ttft: float | None = None
    tpot: float | None = None


@dataclass(frozen=True)
class ClassCheck(DocModel):
    """One request class against its own SLOs: requests, attainment (0-1), simulated p-quantile TTFT/TPOT and the
    class's SLOs in seconds, and whether it holds."""

    _KEYS: ClassVar[Mapping[str, str]] = {"class_": "class"}

    class_: str | None
    requests: int | None
    attainment: float | None
    ttft_p_s: float | None
    tpot_p_s: float | None
    ttft_slo_s: float
    tpot_slo_s: float
    holds: bool | None


@dataclass(frozen=True)
class CascadeSummary(DocModel):
    """The CASCADE settings a plan was verified with: ``kappa`` (and per class), ``q2``, Tier 2's order."""

    kappa: float | None
    kappa_by_class: Mapping[str, float] | None
    q2: float | None
    tier2_order: str | None
    quantile: float | None


@dataclass(frozen=True)
class OutOfSampleRun(DocModel):
    """One out-of-sample run: its label, requests, joint attainment (0-1), p-quantile TTFT/TPOT in seconds."""

    label: str | None
    requests: int | None
    attainment: float | None
    ttft_p_s: float | None
    tpot_p_s: float | None
    holds: bool


@dataclass(frozen=True)
class OutOfSample(DocModel):
    """The out-of-sample check: its status, how the trace was split, and each run."""

    status: str | None
    split: str | None
    runs: tuple[OutOfSampleRun, ...]


@dataclass(frozen=True)
class ModelErrorSummary(DocModel):
    """The check against the model's own error band (see :mod:`hetplan.sim.verify`)."""

    confidence: float | None
    band_ttft: Any
    band_tpot: Any
    band_scope: Any
    holds_at_confidence: bool | None
    margin_step_slowdown: float | None
    margin_capped: bool | None
    summary: str | None


@dataclass(frozen=True)
class CheaperTry(DocModel):
    """One cheaper plan tried below a verified one: its $/hour, deployment, status, joint attainment, or why it
    was infeasible."""

    usd_per_hour: float | None
    deployment: str | None
    status: str | None
    joint_attainment: float | None
    infeasible: str | None


@dataclass(frozen=True)
class CheaperSearch(DocModel):
    """The search below a verified plan: where it started and what it kept ($/hour), and every plan tried."""

    from_usd_per_hour: float | None
    usd_per_hour_kept: float | None
    tried: tuple[CheaperTry, ...]


@dataclass(frozen=True)
class Resized(DocModel):
    """A re-size after a simulated miss: headroom asked and used, $/hour before and after, attempts made."""

    headroom_asked: float | None
    headroom_used: float | None
    usd_per_hour_before: float | None
    usd_per_hour_after: float | None
    attempts: int


@dataclass(frozen=True)
class VerificationSummary(DocModel):
    """The report's view of a plan's ``verification`` block (built by
    :func:`hetplan.report.verification.verification_report`). Rates in req/s, latencies in seconds, attainment
    0-1; every figure may be None (a non-finite percentile is written as null) and renders as "-".
    ``ttft_q_s``/``tpot_q_s``: the simulated p-``percentile`` TTFT/TPOT; ``slo_held``: False when the simulation
    recorded a miss, None when the block says nothing. The optional blocks (per class, CASCADE, out of sample,
    model error, cheaper search, re-size) are None when the plan's block lacks them and are then not written."""

    status: str | None
    verdict: str | None
    analytic_capacity_req_per_s: float | None
    simulated_capacity_req_per_s: float | None
    policy: str | None
    target_req_per_s: float | None
    rate_scale: float | None
    arrivals: str | None
    requests: int | None
    unfinished: int | None
    dropped: int | None
    attainment: Attainment
    percentile: float
    ttft_q_s: float | None
    tpot_q_s: float | None
    slo_ttft_s: float
    slo_tpot_s: float
    goodput_req_per_s: float | None
    goodput_definition: str | None
    misses: tuple[str, ...]
    slo_held: bool | None
    summary: str | None
    warnings: tuple[str, ...]
    attainment_by_class: Mapping[str, float | None] | None = None
    jain_index: float | None = None
    classes: tuple[ClassCheck, ...] | None = None
    cascade: CascadeSummary | None = None
    in_sample_status: str | None = None
    out_of_sample: OutOfSample | None = None
    model_error: ModelErrorSummary | None = None
    cheaper_search: CheaperSearch | None = None
    resized: Resized | None = None

    def to_doc(self) -> dict[str, Any]:
        """The JSON form; the optional blocks only when present (reports of older plans stay as they were)."""
        out = super().to_doc()
        for name in ("attainment_by_class", "jain_index", "classes", "cascade", "in_sample_status", "out_of_sample",
                     "model_error", "cheaper_search", "resized"):  # fmt: skip
            del out[name]
        if self.attainment_by_class is not None:
            out.update(attainment_by_class=dict(self.attainment_by_class), jain_index=self.jain_index)
        if self.classes is not None:
            out.update(classes=plain(self.classes))
        if self.cascade is not None:
            out.update(cascade=self.cascade.to_doc())
        if self.out_of_sample is not None:
            out.update(in_sample_status=self.in_sample_status, out_of_sample=self.out_of_sample.to_doc())
        for name, block in (("model_error", self.model_error), ("cheaper_search", self.cheaper_search),
                            ("resized", self.resized)):  # fmt: skip
            if block is not None:
                out[name] = block.to_doc()
        return out
