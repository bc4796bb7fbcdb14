"""Scenario files: what ``hetplan plan examples/<scenario>.yaml`` reads.

Unknown keys are rejected so a typo is an error, not a silently ignored setting. Paths inside a scenario are
relative to the scenario file. Command-line flags override the file.

Example::

    schema_version: 1
    kind: scenario
    name: llama3-70b-azure-conv
    model: Llama-3-70B
    workload: {path: data/azure_conv_sample.csv}
    goodput_req_per_s: 5.5
    slo: {ttft: 2s, tpot: 100ms, percentile: 90}
    gpus: [H100, A100-80GB, L40S, L4, A10G]
    cloud: aws

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PrivateAttr,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from hetplan.catalog.loader import read_yaml_file

#: Smallest arrival rate or goodput target accepted, req/s (one request a day is 1.2e-5): below it the capacity
#: arithmetic underflows (a rate of 1e-300 gave a division by zero).
MIN_RATE_PER_S = 1e-6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


Duration = StrictStr | StrictFloat | StrictInt


class SyntheticSpec(_Strict):
    """A synthetic workload: one of Cauchy's classes (or ``custom`` with medians) at ``rate_per_s``."""

    kind: str = Field(default="balanced", alias="class")
    rate_per_s: float = Field(ge=MIN_RATE_PER_S, le=1e7)
    requests: int = Field(default=2000, gt=0, le=1_000_000)
    seed: int = Field(default=0, ge=0)
    prompt_tokens_median: float | None = Field(default=None, gt=0, le=10_000_000)
    output_tokens_median: float | None = Field(default=None, gt=0, le=10_000_000)
    sigma: float = Field(default=0.6, gt=0, le=3)

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class WorkloadSpec(_Strict):
    """A trace file (``path`` + ``format``) or a ``synthetic`` distribution, not both; ``rate_per_s``
    overrides the trace's own rate (needed for length-only files)."""

    path: str | None = None
    format: Literal["auto", "azure", "mooncake", "lengths"] = "auto"
    rate_per_s: float | None = Field(default=None, ge=MIN_RATE_PER_S, le=1e7)
    synthetic: SyntheticSpec | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        if (self.path is None) == (self.synthetic is None):
            raise ValueError("give exactly one of workload.path (a trace) and workload.synthetic")
        if self.synthetic is not None and (self.rate_per_s is not None or self.format != "auto"):
            raise ValueError(
                "workload.rate_per_s and workload.format apply to trace files; "
                "set workload.synthetic.rate_per_s instead"
            )
        return self


class SloSpec(_Strict):
    """SLOs: durations like ``2s`` or ``80ms`` (a bare number is seconds); ``percentile`` like 90, "p99" or 0.9."""

    ttft: Duration = "2s"
    tpot: Duration = "100ms"
    percentile: Duration = 90.0


class AutoscaleSpec(_Strict):
    """Settings of ``hetplan autoscale`` (durations like ``10m``; see ``hetplan/autoscale/schedule.py``)."""

    load_curve: str | None = None
    window: Duration | None = None
    startup_lag: Duration = "5m"
    startup_lag_by_gpu: dict[str, Duration] = Field(default_factory=dict)
    cooldown: Duration = "30m"
    hysteresis: float = Field(default=0.1, ge=0, lt=1)
    max_changes_per_window: int = Field(default=8, ge=1, le=10_000)
    min_goodput_req_per_s: float = Field(default=0.0, ge=0, le=1e7)
    level_step: float = Field(default=0.05, gt=0, le=1)
    design_utilization: float = Field(default=0.8, gt=0, lt=1)
    max_cv: float = Field(default=4.0, ge=1, le=100)


class Scenario(_Strict):
    """A planning scenario (see module docstring)."""

    schema_version: Literal[1] = 1
    kind: Literal["scenario"] = "scenario"
    name: str = "scenario"
    description: str | None = None
    model: str = Field(min_length=1)
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: Literal["vllm", "sglang", "trtllm"] = "vllm"
    engine_version: str = ""
    workload: WorkloadSpec
    goodput_req_per_s: float | None = Field(default=None, ge=MIN_RATE_PER_S, le=1e7)
    slo: SloSpec = SloSpec()
    gpus: list[str] | None = Field(default=None, min_length=1)
    inventory: dict[str, NonNegativeInt] = Field(default_factory=dict)
    cloud: str | None = None
    spot: bool = False
    prices: str | None = None
    headroom: float = Field(default=0.1, ge=0, le=10)
    tp: list[int] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)
    max_ratio: int = Field(default=8, ge=1, le=32)
    max_ilp_combos: int = Field(default=20000, ge=1)
    autoscale: AutoscaleSpec | None = None
    _base_dir: str = PrivateAttr(default=".")

    @field_validator("cloud")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.lower() if value else value

    @field_validator("tp")
    @classmethod
    def _tp_range(cls, value: list[int]) -> list[int]:
        bad = [t for t in value if not 1 <= t <= MAX_TP]
        if bad:
            raise ValueError(f"TP degrees must be 1..{MAX_TP} (one node); got {bad}")
        return value

    @property
    def base_dir(self) -> str:
        """Folder that relative paths in the scenario are resolved against."""
        return self._base_dir

    def with_base_dir(self, folder: str) -> Scenario:
        """A copy whose relative paths resolve against ``folder``."""
        copy = self.model_copy()
        copy._base_dir = folder
        return copy

    def resolve(self, relative: str | None) -> str | None:
        """A path from the scenario, made relative to the scenario file's folder."""
        if relative is None:
            return None
        path = Path(relative)
        return str(path if path.is_absolute() else Path(self.base_dir) / path)


MAX_TP = 8


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file.

    Raises:
        InputError / CatalogError: unreadable file or invalid fields (named in the message).
    """
    scenario = read_yaml_file(Path(path), Scenario, "scenario", "see examples/*.yaml and hetplan/scenario.py")
    return scenario.with_base_dir(str(Path(path).parent))
