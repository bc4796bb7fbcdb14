"""The typed report model: what ``hetplan report`` renders, built once from typed plans
(:func:`hetplan.report.model.build_report`) and read by attribute by every renderer.

Frozen dataclasses; each knows its JSON form (:meth:`_Doc.to_doc`), written in exactly the key order the report
document has always had (``hetplan report --format json`` and the golden report stay byte-identical). Fields are
written in declaration order; ``_OMIT_NONE`` names fields left out when None, ``_KEYS`` renames fields whose JSON
key is not a Python name. Blocks passed through from a plan or a schedule as written (owned-GPU rows, the
price-sensitivity and cost-versus-goodput rows, the workload summary, schedule documents) keep that mapping in
``doc`` for the JSON form and carry typed copies of the values the renderers read.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from hetplan.plan.types import Purchase

if TYPE_CHECKING:
    from hetplan.report.schedule import ScheduleSummaryDoc, ScheduleWindowDoc


def plain(x: Any) -> Any:
    """``x`` as plain JSON data: report dataclasses by :meth:`_Doc.to_doc`, tuples as lists, mappings as dicts."""
    if isinstance(x, _Doc):
        return x.to_doc()
    if isinstance(x, (tuple, list)):
        return [plain(i) for i in x]
    if isinstance(x, Mapping):
        return {k: plain(v) for k, v in x.items()}
    return x


class _Doc:
    """A report value with a JSON form: its dataclass fields in order (see the module docstring)."""

    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset()
    _KEYS: ClassVar[Mapping[str, str]] = {}

    def to_doc(self) -> dict[str, Any]:
        """The JSON form: a dict in the report document's key order."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in self._OMIT_NONE and value is None:
                continue
            out[self._KEYS.get(f.name, f.name)] = plain(value)
        return out


# --- the simulated check (a plan's ``verification`` block, as the report shows it) -----------------------------


@dataclass(frozen=True)
class Attainment(_Doc):
    """Shares (0-1) of requests that met both SLOs (``joint``), the TTFT SLO and the TPOT SLO; None when unknown."""

    joint: float | None = None
    ttft: float | None = None
    tpot: float | None = None


@dataclass(frozen=True)
class ClassCheck(_Doc):
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
class CascadeSummary(_Doc):
    """The CASCADE settings a plan was verified with: ``kappa`` (and per class), ``q2``, Tier 2's order."""

    kappa: float | None
    kappa_by_class: Mapping[str, float] | None
    q2: float | None
    tier2_order: str | None
    quantile: float | None


@dataclass(frozen=True)
class OutOfSampleRun(_Doc):
    """One out-of-sample run: its label, requests, joint attainment (0-1), p-quantile TTFT/TPOT in seconds."""

    label: str | None
    requests: int | None
    attainment: float | None
    ttft_p_s: float | None
    tpot_p_s: float | None
    holds: bool


@dataclass(frozen=True)
class OutOfSample(_Doc):
    """The out-of-sample check: its status, how the trace was split, and each run."""

    status: str | None
    split: str | None
    runs: tuple[OutOfSampleRun, ...]


@dataclass(frozen=True)
class ModelErrorSummary(_Doc):
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
class CheaperTry(_Doc):
    """One cheaper plan tried below a verified one: its $/hour, deployment, status, joint attainment, or why it
    was infeasible."""

    usd_per_hour: float | None
    deployment: str | None
    status: str | None
    joint_attainment: float | None
    infeasible: str | None


@dataclass(frozen=True)
class CheaperSearch(_Doc):
    """The search below a verified plan: where it started and what it kept ($/hour), and every plan tried."""

    from_usd_per_hour: float | None
    usd_per_hour_kept: float | None
    tried: tuple[CheaperTry, ...]


@dataclass(frozen=True)
class Resized(_Doc):
    """A re-size after a simulated miss: headroom asked and used, $/hour before and after, attempts made."""

    headroom_asked: float | None
    headroom_used: float | None
    usd_per_hour_before: float | None
    usd_per_hour_after: float | None
    attempts: int


@dataclass(frozen=True)
class VerificationSummary(_Doc):
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


# --- a plan's section ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SloDoc(_Doc):
    """Latency SLOs in seconds, held at ``percentile`` (0-100)."""

    ttft_s: float
    tpot_s: float
    percentile: float


@dataclass(frozen=True)
class OverContext(_Doc):
    """Requests the plan was sized without: ``refused`` of ``requests_total`` had a prompt over the
    ``window_tokens``-token window; ``arrival_rate_per_s`` is the trace's rate with them (None when not given)."""

    refused: int
    requests_total: int
    window_tokens: int
    arrival_rate_per_s: float | None


@dataclass(frozen=True)
class WorkloadSummary(_Doc):
    """The workload a plan was sized on: its ``source`` in words, the traffic left out (None when none), and the
    summary as the plan file writes it (``doc``: name, source, requests, token means, over_context)."""

    source: str
    over_context: OverContext | None
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The JSON form: the plan's workload summary as written."""
        return dict(self.doc)


@dataclass(frozen=True)
class ComboRow(_Doc):
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
class InstanceRow(_Doc):
    """One aggregated instance type of the deployment: ``traffic_share`` of all requests (0-1)."""

    label: str
    count: int
    usd_per_hour_each: float
    traffic_share: float
    utilization: float


@dataclass(frozen=True)
class StrategyRow(_Doc):
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
class Gain(_Doc):
    """The plan against another strategy: 1 - plan cost / its cost, and plan tokens/USD over its (None where not
    defined)."""

    cost_saved_fraction: float | None
    tokens_per_usd_ratio: float | None


@dataclass(frozen=True)
class SensitivityRow(_Doc):
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
class CurvePoint(_Doc):
    """One goodput target of the cost-versus-goodput curve: $/hour per strategy (None where infeasible);
    ``doc``: the row as written."""

    goodput_req_per_s: float
    usd_per_hour: Mapping[str, float | None]
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The row as the plan's analysis wrote it."""
        return dict(self.doc)


# --- the decision block ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BestSingleType(_Doc):
    """The best single-GPU-type fleet (the homogeneous baseline) against the plan: ``status`` "this plan" (the
    plan is it), "infeasible" (with ``reason``), or the baseline's status with its $/hour, GPU and
    ``saved_fraction`` (1 - plan cost / its cost)."""

    status: str
    usd_per_hour: float | None = None
    gpu: str | None = None
    reason: str | None = None
    saved_fraction: float | None = None

    def to_doc(self) -> dict[str, Any]:
        """The JSON form of each case."""
        if self.status == "this plan":
            return {"status": self.status, "usd_per_hour": self.usd_per_hour, "gpu": self.gpu}
        if self.status == "infeasible":
            return {"status": self.status, "reason": self.reason}
        return {"status": self.status, "usd_per_hour": self.usd_per_hour, "gpu": self.gpu,
                "saved_fraction": self.saved_fraction}  # fmt: skip


@dataclass(frozen=True)
class GpuRole(_Doc):
    """What one GPU type does: GPUs per role (prefill, decode, aggregated; in the order first met) and in words."""

    gpu: str
    counts: tuple[tuple[str, int], ...]
    text: str

    def to_doc(self) -> dict[str, Any]:
        """``{"gpu": ..., "prefill": n, "decode": m, "text": ...}``."""
        return {"gpu": self.gpu, **dict(self.counts), "text": self.text}


@dataclass(frozen=True)
class PriceRow(_Doc):
    """A GPU type the plan uses: its $/GPU-hour and source, GPUs used; when bought as instances, what they cost
    per GPU-hour and which (``bought_as``)."""

    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"usd_per_gpu_hour_bought", "bought_as"})

    gpu: str
    usd_per_gpu_hour: float
    gpus: int
    source: str
    usd_per_gpu_hour_bought: float | None = None
    bought_as: tuple[str, ...] | None = None


@dataclass(frozen=True)
class OwnedRow(_Doc):
    """One owned GPU type's use: GPUs ``owned``, ``used``, ``idle`` and why idle; ``doc``: the row as written."""

    gpu: str
    owned: Any
    used: Any
    idle: Any
    idle_reason: str | None
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The plan's ``owned_gpus`` row with its GPU first."""
        return dict(self.doc)


@dataclass(frozen=True)
class Decision(_Doc):
    """A plan's first block: the recommendation sentence, the verification status and verdict, the best
    single-GPU-type fleet, what each GPU type does, prices, purchases, quality changes, owned GPUs (None when the
    plan owns none)."""

    sentence: str
    status: str
    verdict: str
    best_single_gpu_type: BestSingleType | None
    gpu_roles: tuple[GpuRole, ...]
    prices: tuple[PriceRow, ...]
    purchase: tuple[Purchase, ...]
    quality: tuple[str, ...]
    owned: tuple[OwnedRow, ...] | None = None

    def to_doc(self) -> dict[str, Any]:
        """The JSON form (``owned`` only for plans with owned GPUs)."""
        best = self.best_single_gpu_type
        out = {
            "sentence": self.sentence,
            "status": self.status,
            "verdict": self.verdict,
            "best_single_gpu_type": None if best is None else best.to_doc(),
            "gpu_roles": plain(self.gpu_roles),
            "prices": plain(self.prices),
            "purchase": [dataclasses.asdict(line) for line in self.purchase],
            "quality": list(self.quality),
        }
        if self.owned is not None:
            out["owned"] = plain(self.owned)
        return out


@dataclass(frozen=True)
class PlanSection(_Doc):
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
class ScheduleSection(_Doc):
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
class GateResult(_Doc):
    """Outcome of one comparison. ``cost_change`` (a fraction) and ``tokens_per_usd_ratio`` are relative to the
    baseline; both are NaN where not defined (a $0.00/h baseline for the fraction, a $0.00/h plan on either side for
    the ratio, a scenario not compared for both). ``cost_change_usd_per_hour`` is the rise in dollars per hour."""

    name: str
    passed: bool
    baseline_usd_per_hour: float
    usd_per_hour: float
    cost_change: float
    tokens_per_usd_ratio: float
    failures: tuple[str, ...] = ()
    changes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cost_change_usd_per_hour(self) -> float:
        """``usd_per_hour - baseline_usd_per_hour`` (NaN when not compared)."""
        return self.usd_per_hour - self.baseline_usd_per_hour

    def change_text(self) -> str:
        """The cost change in words: ``+1.25 %``, or ``+$3.00/h`` from a $0.00/h baseline (no percentage)."""
        if math.isnan(self.cost_change):
            rise = self.cost_change_usd_per_hour
            return f"{'-' if rise < 0 else '+'}${abs(rise):,.2f}/h from $0.00/h"
        return f"{self.cost_change * 100:+.2f} %"

    def ratio_text(self) -> str:
        """``0.9800x``, or ``-`` where tokens/USD is not defined (a plan at $0.00/h)."""
        return "-" if math.isnan(self.tokens_per_usd_ratio) else f"{self.tokens_per_usd_ratio:.4f}x"

    def to_doc(self) -> dict[str, Any]:
        """The JSON form (``gate --json``, a report's ``gate.results``): money rounded to 6 places, NaN as null."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6) + 0.0

        return {
            "name": self.name,
            "passed": self.passed,
            "baseline_usd_per_hour": num(self.baseline_usd_per_hour),
            "usd_per_hour": num(self.usd_per_hour),
            "cost_change_fraction": num(self.cost_change),
            "cost_change_usd_per_hour": num(self.cost_change_usd_per_hour),
            "tokens_per_usd_ratio": num(self.tokens_per_usd_ratio),
            "failures": list(self.failures),
            "changes": list(self.changes),
        }

    def as_dict(self) -> dict[str, Any]:
        """Same as :meth:`to_doc` (the name callers used before the typed report)."""
        return self.to_doc()


@dataclass(frozen=True)
class GateRun(_Doc):
    """``hetplan gate --json``: whether every scenario passed, each result, and the warnings."""

    passed: bool
    results: tuple[GateResult, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class GateSummary(_Doc):
    """A report's ``gate`` block (``hetplan report --baseline``): the baseline file, the allowances (a fraction of
    the baseline's $/hour, dollars per hour, the tokens/USD ratio or None), each result and whether all passed."""

    baseline: str
    max_cost_increase_fraction: float
    max_cost_increase_usd_per_hour: float
    min_tokens_per_usd_ratio: float | None
    results: tuple[GateResult, ...]
    passed: bool


@dataclass(frozen=True)
class Report(_Doc):
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
    "BestSingleType",
    "CascadeSummary",
    "CheaperSearch",
    "CheaperTry",
    "ClassCheck",
    "ComboRow",
    "CurvePoint",
    "Decision",
    "GateResult",
    "GateRun",
    "GateSummary",
    "Gain",
    "GpuRole",
    "InstanceRow",
    "ModelErrorSummary",
    "OutOfSample",
    "OutOfSampleRun",
    "OverContext",
    "OwnedRow",
    "PlanSection",
    "PriceRow",
    "Report",
    "Resized",
    "ScheduleSection",
    "SensitivityRow",
    "SloDoc",
    "StrategyRow",
    "VerificationSummary",
    "WorkloadSummary",
    "plain",
    "Purchase",
]
