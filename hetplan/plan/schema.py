"""The plan file's schema at the file edge: pydantic models with bounds for every field later stages read.

A document is checked against :class:`PlanDoc` before :func:`hetplan.plan.doc.from_doc` turns it into the typed
:class:`~hetplan.plan.types.Plan`; fields beyond the checked ones are kept (``extra="allow"``).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, model_validator

from hetplan.catalog.schemas import GpuSpec, ModelSpec

SCHEMA_VERSION = 2
FIX = "write one with 'hetplan plan ... --out plan.yaml'"


class _Open(BaseModel):
    """Any mapping (fields beyond the checked ones are kept)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


PlanMapping = _Open
Usd = Annotated[float, Field(ge=0)]
PositiveUsd = Annotated[float, Field(ge=0)]  # owned GPUs may be priced at $0/GPU-hour (a sunk cost)


class ComboDoc(_Open):
    """One combo of a plan: n prefill instances and m decode instances, deployed ``count`` times."""

    prefill_gpu: str
    prefill_tp: int = Field(ge=1)
    n_prefill: int = Field(ge=1)
    decode_gpu: str
    decode_tp: int = Field(ge=1)
    n_decode: int = Field(ge=1)
    count: int = Field(ge=1)
    usd_per_hour: PositiveUsd
    goodput_req_per_s: float = Field(gt=0)
    decode_batch: int = Field(ge=0)
    predicted_ttft_s: float = Field(ge=0)
    predicted_tpot_s: float = Field(ge=0)
    utilization: float = Field(ge=0)
    bound_by: str
    min_count: int | None = Field(default=None, ge=0)
    tokens_per_usd: Usd | None = None
    prefill_capacity_req_per_s: float = Field(default=0.0, ge=0)
    decode_capacity_req_per_s: float = Field(default=0.0, ge=0)
    kv_transfer_capacity_req_per_s: float = Field(default=0.0, ge=0)
    prefill_pp: int = Field(default=1, ge=1)
    decode_pp: int = Field(default=1, ge=1)


class BucketDoc(BaseModel):
    """A request-size bucket: ``[lo, hi)`` prompt and output tokens (``hi`` null when open-ended) and a share."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    prompt_tokens: tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(gt=0)] | None]
    output_tokens: tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(gt=0)] | None]
    share: float = Field(ge=0, le=1.0001)


class InstanceDoc(_Open):
    """One aggregated instance type of a Mélange plan: ``count`` instances of ``gpu`` at TP ``tp``."""

    role: str
    gpu: str
    tp: int = Field(ge=1)
    count: int = Field(ge=1)
    usd_per_hour: PositiveUsd
    utilization: float = Field(ge=0)
    traffic_share: float = Field(ge=0, le=1.0001)
    pp: int = Field(default=1, ge=1)


class PriceDoc(_Open):
    usd_per_gpu_hour: PositiveUsd
    source: str


class SloDoc(_Open):
    ttft_s: float = Field(gt=0)
    tpot_s: float = Field(gt=0)
    percentile: float = Field(gt=0, lt=100)


class WorkloadDoc(_Open):
    name: str
    source: str
    requests: int = Field(ge=1)
    prompt_tokens_mean: float = Field(gt=0)
    output_tokens_mean: float = Field(gt=0)


class ScenarioDoc(_Open):
    """The scenario echo inside a plan (model, dtypes, SLOs, prices, engine settings)."""

    name: str
    model: str
    weight_dtype: str
    kv_dtype: str
    goodput_target_req_per_s: float = Field(gt=0)
    demand_req_per_s: float = Field(gt=0)
    # below 0 only when verification found a cheaper plan sized under the target (the model under-promised it)
    headroom: float = Field(gt=-1)
    slo: SloDoc
    workload: WorkloadDoc
    prices: dict[str, PriceDoc]
    perf_settings: dict[str, Any]
    gpus: list[str] = Field(default_factory=list)
    inventory: dict[str, NonNegativeInt] = Field(default_factory=dict)
    tp_options: list[Annotated[int, Field(ge=1, le=1024)]] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)


class SummaryDoc(_Open):
    """Another strategy's outcome inside a plan: its totals, or why it is infeasible."""

    status: Literal["optimal", "time_limit", "infeasible"]
    reason: str | None = None
    total_usd_per_hour: PositiveUsd | None = None
    goodput_req_per_s: float | None = Field(default=None, gt=0)
    tokens_per_usd: Usd | None = None
    output_tokens_per_usd: Usd | None = None
    gpus_used: dict[str, NonNegativeInt] | None = None

    @model_validator(mode="after")
    def _complete(self) -> SummaryDoc:
        if self.status == "infeasible" and not self.reason:
            raise ValueError("an infeasible baseline needs a reason")
        if self.status != "infeasible" and None in (
            self.total_usd_per_hour,
            self.goodput_req_per_s,
            self.tokens_per_usd,
            self.gpus_used,
        ):
            raise ValueError("a solved baseline needs total_usd_per_hour, goodput_req_per_s, tokens_per_usd, gpus_used")
        return self


class SensitivityDoc(_Open):
    gpu: str
    price_factor: float = Field(gt=0)
    plan_usd_per_hour: Usd
    replanned_usd_per_hour: Usd | None
    best_alternative: str | None
    best_alternative_usd_per_hour: Usd | None


class CostPointDoc(_Open):
    """One point of the cost-versus-goodput curve: the goodput target (req/s) and each strategy's $/hour there
    (``<strategy>_usd_per_hour``, null where infeasible)."""

    goodput_req_per_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _costs(self) -> CostPointDoc:
        for key, value in (self.model_extra or {}).items():
            if not key.endswith("_usd_per_hour"):
                raise ValueError(f"{key}: not a cost (<strategy>_usd_per_hour)")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ValueError(f"{key}: {value!r} is not a cost in $/hour (a number >= 0, or null)")
        return self


class AnalysisDoc(_Open):
    price_sensitivity: list[SensitivityDoc] = Field(default_factory=list)
    cost_vs_goodput: list[CostPointDoc] = Field(default_factory=list)


class ResolvedModelDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    source: Literal["catalog", "config.json"]
    path: str | None = None
    spec: ModelSpec


class ResolvedGpuDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    source: Literal["catalog", "profile"]
    path: str | None = None
    spec: GpuSpec


class ResolvedDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    model: ResolvedModelDoc
    gpus: list[ResolvedGpuDoc] = Field(min_length=1)


class ProvenanceDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    hetplan_version: str
    catalog_sha256: str
    workload_sha256: str | None = None
    perf_calibration_sha256: str | None = None


class PlanDoc(_Open):
    """The checked part of a plan document: everything reports, gates, emitters and the simulator read."""

    schema_version: int = Field(ge=1, le=SCHEMA_VERSION)
    kind: Literal["plan"]
    strategy: str
    status: Literal["optimal", "time_limit"]
    scenario: ScenarioDoc
    total_usd_per_hour: PositiveUsd
    usd_per_month: PositiveUsd
    usd_per_million_tokens: Usd | None = None
    goodput_req_per_s: float = Field(gt=0)
    tokens_per_usd: Usd
    output_tokens_per_usd: Usd
    gpus_used: dict[str, NonNegativeInt]
    combos: list[ComboDoc] = Field(default_factory=list)
    instances: list[InstanceDoc] = Field(default_factory=list)
    baselines: dict[str, SummaryDoc] = Field(default_factory=dict)
    analysis: AnalysisDoc | None = None
    warnings: list[str] = Field(default_factory=list)
    engine: Literal["vllm", "sglang", "trtllm"] = "vllm"  # DEFAULT_ENGINE; the engine the plan was made for
    resolved: ResolvedDoc | None = None
    provenance: ProvenanceDoc | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> PlanDoc:
        if not self.combos and not self.instances:
            raise ValueError("a plan needs combos (disaggregated) or instances (aggregated)")
        if self.schema_version >= 2 and (self.resolved is None or self.provenance is None):
            raise ValueError("a version-2 plan needs 'resolved' (model and GPU entries) and 'provenance'")
        return self
