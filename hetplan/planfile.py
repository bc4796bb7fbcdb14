"""Reading plan files written by ``hetplan plan --out`` (YAML or JSON).

The plan document is the one object every later stage reads (emitters, reports, gates): nothing downstream
re-derives what the solver decided. :func:`load_plan` checks the parts those stages rely on and returns the
document as a plain dict, unchanged.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, model_validator

from hetplan.catalog.loader import format_validation, read_yaml_file
from hetplan.errors import InputError


class _Open(BaseModel):
    """Any mapping (fields beyond the checked ones are kept)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


PlanMapping = _Open
Usd = Annotated[float, Field(ge=0)]
PositiveUsd = Annotated[float, Field(gt=0)]


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


class InstanceDoc(_Open):
    """One aggregated instance type of a Mélange plan: ``count`` instances of ``gpu`` at TP ``tp``."""

    role: str
    gpu: str
    tp: int = Field(ge=1)
    count: int = Field(ge=1)
    usd_per_hour: PositiveUsd
    utilization: float = Field(ge=0)
    traffic_share: float = Field(ge=0, le=1.0001)


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
    headroom: float = Field(ge=0)
    slo: SloDoc
    workload: WorkloadDoc
    prices: dict[str, PriceDoc]
    perf_settings: dict[str, Any]


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


class AnalysisDoc(_Open):
    price_sensitivity: list[SensitivityDoc] = Field(default_factory=list)
    cost_vs_goodput: list[dict[str, float | None]] = Field(default_factory=list)


class PlanDoc(_Open):
    """The checked part of a plan document: everything reports, gates and emitters read."""

    schema_version: int = Field(ge=1, le=1)
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

    @model_validator(mode="after")
    def _not_empty(self) -> PlanDoc:
        if not self.combos and not self.instances:
            raise ValueError("a plan needs combos (disaggregated) or instances (aggregated)")
        return self


def load_plan(path: str | Path) -> dict[str, Any]:
    """Read a plan file and check its structure.

    Returns:
        The plan document as written (a dict).

    Raises:
        InputError: the file is missing, unreadable, not a plan, or lacks a field that later stages need.
    """
    doc = read_yaml_file(Path(path), _Open, "plan file", "write one with 'hetplan plan ... --out plan.yaml'")
    data = doc.model_dump()
    check_plan(data, str(path))
    return data


def check_plan(data: dict[str, Any], where: str = "plan") -> None:
    """Validate a plan document already in memory (see :class:`PlanDoc`)."""
    if data.get("kind") == "hetis-deployment":  # Hetis (issue 7): a spec for an engine that does not exist yet
        raise InputError(
            f"{where} is a Hetis deployment spec, which emitters and reports cannot use",
            "no serving engine runs Hetis today, so there is nothing to emit, and the spec has no cost to report",
            "read the spec itself (JSON/YAML), or plan with --strategy cauchy|homogeneous|melange for emit/report",
        )
    try:
        PlanDoc.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"{where} is not a usable hetplan plan",
            format_validation(exc),
            "write one with 'hetplan plan ... --out plan.yaml'",
        ) from None
