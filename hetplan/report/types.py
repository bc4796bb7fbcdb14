"""The typed report model: what ``hetplan report`` renders, built once from typed plans
(:func:`hetplan.report.model.build_report`) and read by attribute by every renderer.

Frozen dataclasses; each knows its JSON form (:class:`~hetplan.report.docmodel.DocModel`), written in exactly the
key order the report document has always had (``hetplan report --format json`` and the golden report stay
byte-identical). The simulated check's types are in :mod:`hetplan.report.check_types`, the gate's in
:mod:`hetplan.report.gate_types` (both re-exported here), the decision block's in
:mod:`hetplan.report.decision_types`. Blocks passed through from a plan or a schedule as
written (owned-GPU rows, the price-sensitivity and cost-versus-goodput rows, the workload summary, schedule
documents) keep that mapping in ``doc`` for the JSON form and carry typed copies of the values the renderers read.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from hetplan.report.check_types import (
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
from hetplan.report.decision_types import Decision
from hetplan.report.docmodel import DocModel, plain
from hetplan.report.gate_types import GateResult, GateRun, GateSummary

if TYPE_CHECKING:
    from hetplan.report.schedule import ScheduleSummaryDoc, ScheduleWindowDoc


# --- a plan's section ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SloDoc(DocModel):
    """Latency SLOs in seconds, held at ``percentile`` (0-100)."""

    ttft_s: float
    tpot_s: float
    percentile: float


@dataclass(frozen=True)
class OverContext(DocModel):
    """Requests the plan was sized without: ``refused`` of ``requests_total`` had a prompt over the
    ``window_tokens``-token window; ``arrival_rate_per_s`` is the trace's rate with them (None when not given)."""

    refused: int
    requests_total: int
    window_tokens: int
    arrival_rate_per_s: float | None


@dataclass(frozen=True)
class WorkloadSummary(DocModel):
    """The workload a plan was sized on: its ``source`` in words, the traffic left out (None when none), and the
    summary as the plan file writes it (``doc``: name, source, requests, token means, over_context)."""

    source: str
    over_context: OverContext | None
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The JSON form: the plan's workload summary as written."""
        return dict(self.doc)


@dataclass(frozen=True)
class ComboRow(DocModel):
    """One combo of the deployment: ``count`` copies at ``usd_per_hour_each`` $/hour and
    ``goodput_req_per_s_each``, the model's predicted TTFT/TPOT (seconds), whether they meet the SLOs."""

    label: str
    count: int
    usd_per_hour_each: float
    goodput_req_per_s_each: float
    predicted_ttft_s: float
    predicted_tpot_s: float
    meets_ttft_slo: bool
    meets_tpot_slo: bool
    utilization: float
    bound_by: str


@dataclass(frozen=True)
class InstanceRow(DocModel):
    """One aggregated instance type of the deployment: ``traffic_share`` of all requests (0-1)."""

    label: str
    count: int
    usd_per_hour_each: float
    traffic_share: float
    utilization: float


@dataclass(frozen=True)
class StrategyRow(DocModel):
    """One strategy's outcome for the plan's scenario (the plan's own, or a baseline): totals in $/hour, req/s,
    tokens/USD (None when it costs $0/h), GPUs per type; or ``status`` infeasible and the ``reason``.
    ``planned``: the plan's own strategy (its tokens/USD is written even when None)."""

    status: str
    planned: bool = False
    reason: str | None = None
    gpu: str | None = None
    total_usd_per_hour: float | None = None
    goodput_req_per_s: float | None = None
    tokens_per_usd: float | None = None
    output_tokens_per_usd: float | None = None
    gpus_used: Mapping[str, int] = field(default_factory=dict)

    @property
    def infeasible(self) -> bool:
        """True when no fleet of this strategy holds the SLOs."""
        return self.status == "infeasible"

    @property
    def usd_per_hour(self) -> float:
        """Its $/hour (0 when the plan file gives none)."""
        return self.total_usd_per_hour or 0.0

    def to_doc(self) -> dict[str, Any]:
        """The JSON form: status and reason when infeasible; the plan's own with every total; a baseline's without
        the totals it lacks."""
        if self.infeasible:
            return {"status": self.status, "reason": self.reason}
        rows = (
            ("status", self.status), ("gpu", self.gpu), ("total_usd_per_hour", self.total_usd_per_hour),
            ("goodput_req_per_s", self.goodput_req_per_s), ("tokens_per_usd", self.tokens_per_usd),
            ("output_tokens_per_usd", self.output_tokens_per_usd), ("gpus_used", dict(self.gpus_used)),
        )  # fmt: skip
        return {k: v for k, v in rows if v is not None or (self.planned and k != "gpu")}


@dataclass(frozen=True)
class Gain(DocModel):
    """The plan against another strategy: 1 - plan cost / its cost, and plan tokens/USD over its (None where not
    defined)."""

    cost_saved_fraction: float | None
    tokens_per_usd_ratio: float | None


@dataclass(frozen=True)
class SensitivityRow(DocModel):
    """One price-sensitivity case: ``gpu``'s price times ``price_factor``, this plan's and the re-planned $/hour,
    and the best alternative strategy with its $/hour (None when there is none); ``doc``: the row as written."""

    gpu: str
    price_factor: float
    plan_usd_per_hour: float | None
    replanned_usd_per_hour: float | None
    best_alternative: str | None
    best_alternative_usd_per_hour: float | None
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The row as the plan's analysis wrote it."""
        return dict(self.doc)


@dataclass(frozen=True)
class CurvePoint(DocModel):
    """One goodput target of the cost-versus-goodput curve: $/hour per strategy (None where infeasible);
    ``doc``: the row as written."""

    goodput_req_per_s: float
    usd_per_hour: Mapping[str, float | None]
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The row as the plan's analysis wrote it."""
        return dict(self.doc)


@dataclass(frozen=True)
class PlanSection(DocModel):
    """One plan's part of the report (see :func:`hetplan.report.model.plan_report`). Money in $/hour (and
    $/month), rates in req/s; tokens/USD None where the plan costs $0/h. ``strategies`` in
    :data:`hetplan.plan.types.STRATEGIES` order; ``title`` is unique within the report once built."""

    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"quality_note", "verification", "title"})

    source: str
    name: str
    strategy: str
    model: str
    weight_dtype: str
    quality_note: str | None
    engine: str
    engine_version: str | None
    workload: WorkloadSummary
    slo: SloDoc
    goodput_target_req_per_s: float
    demand_req_per_s: float
    usd_per_hour: float
    usd_per_month: float
    usd_per_million_tokens: float | None
    goodput_req_per_s: float
    tokens_per_usd: float | None
    output_tokens_per_usd: float | None
    tokens_per_usd_basis: str
    gpus_used: Mapping[str, int]
    prices: Mapping[str, float]
    price_sources: Mapping[str, str]
    deployment: tuple[ComboRow | InstanceRow, ...]
    strategies: Mapping[str, StrategyRow]
    gains: Mapping[str, Gain]
    price_sensitivity: tuple[SensitivityRow, ...]
    cost_vs_goodput: tuple[CurvePoint, ...]
    warnings: tuple[str, ...]
    verification: VerificationSummary | None
    decision: Decision
    title: str | None = None


# --- schedules, the gate, the report ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleSection(DocModel):
    """An autoscaling schedule's part of the report: its typed summary and windows (what the renderers read),
    the curve's source, warnings, and the schedule document (``doc``) whose parts the JSON form repeats."""

    source: str
    scenario: str
    curve_source: str
    summary: ScheduleSummaryDoc
    windows: tuple[ScheduleWindowDoc, ...]
    warnings: tuple[str, ...]
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """source, scenario, curve, settings, summary and windows as the schedule wrote them, then warnings."""
        out: dict[str, Any] = {"source": self.source}
        out.update((k, self.doc[k]) for k in ("scenario", "curve", "settings", "summary", "windows"))
        out.update(warnings=list(self.warnings))
        return out


@dataclass(frozen=True)
class Report(DocModel):
    """The report: every plan's section, the schedules' (not written when none), the gate (when one ran)."""

    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"schedules", "gate"})

    schema_version: int
    kind: str
    hetplan_version: str
    plans: tuple[PlanSection, ...]
    schedules: tuple[ScheduleSection, ...] | None = None
    gate: GateSummary | None = None


__all__ = [
    "Attainment",
    "CascadeSummary",
    "CheaperSearch",
    "CheaperTry",
    "ClassCheck",
    "ComboRow",
    "CurvePoint",
    "GateResult",
    "GateRun",
    "GateSummary",
    "Gain",
    "InstanceRow",
    "ModelErrorSummary",
    "OutOfSample",
    "OutOfSampleRun",
    "OverContext",
    "PlanSection",
    "Report",
    "Resized",
    "ScheduleSection",
    "SensitivityRow",
    "SloDoc",
    "StrategyRow",
    "VerificationSummary",
    "WorkloadSummary",
    "plain",
]
