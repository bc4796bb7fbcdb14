"""Scenario files: what ``hetplan plan examples/<scenario>.yaml`` reads.

Unknown keys are rejected so a typo is an error, not a silently ignored setting. Paths inside a scenario are
relative to the scenario file. Command-line flags override the file.

Durations carry their unit: ``ttft: 2s``, ``tpot: 80ms``, ``cooldown: 30m``; or a field named with its unit holds a
plain number of seconds (``ttft_s: 2``, ``tpot_s: 0.08``, ``window_s: 600``). A bare number in a duration field
without a unit (``tpot: 50``: 50 ms or 50 s?) is refused with the fix. The field reference (every field, type,
unit and default) is generated from these models: ``docs/reference/scenario.md`` (``scripts/gen_docs.py``). The
blocks (workload, SLOs, classes, autoscale, perf) and their field types are in :mod:`hetplan.scenario_blocks`.

Example::

    schema_version: 1
    kind: scenario
    name: llama3-70b-azure-conv
    model: Llama-3-70B
    workload: {path: data/azure_conv_sample.csv}
    goodput_req_per_s: 5.5
    slo: {ttft: 2s, tpot: 100ms, percentile: p90}
    gpus: [H100, A100-80GB, L40S, L4, A10G]
    cloud: aws

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    NonNegativeInt,
    PrivateAttr,
    field_validator,
    model_validator,
)

from hetplan.catalog.loader import read_yaml_file
from hetplan.scenario_blocks import (
    MIN_RATE_PER_S,
    AutoscaleSpec,
    ClassSpec,
    PerfSpec,
    SloSpec,
    StrictBlock,
    WorkloadSpec,
    percent_suffix,
)


class Scenario(StrictBlock):
    """A planning scenario (see module docstring)."""

    schema_version: Literal[1] = Field(default=1, description="Version of the scenario file format.")
    kind: Literal["scenario"] = Field(default="scenario", description="Always scenario.")
    name: str = Field(default="scenario", description="Name shown in tables, reports and plan files.")
    description: str | None = Field(default=None, description="Free text for the reader.")
    model: str = Field(
        min_length=1,
        description="Catalog model name (hetplan catalog models) or a path to a Hugging Face config.json.",
    )
    weight_dtype: str = Field(
        default="auto",
        description="Weight dtype: auto (the model's own dtype), auto-quantized (the model's dtype and fp8 on GPUs "
        "with fp8 tensor cores, the cheaper plan kept: opts into quantized plans), bf16, fp16, fp8, int8 or int4.",
    )
    kv_dtype: str = Field(
        default="bf16", description="KV-cache dtype: bf16, fp16 or fp8 (a 16-bit KV cache follows the weights)."
    )
    engine: Literal["vllm", "sglang", "trtllm"] = Field(
        default="vllm",
        description="Serving engine whose memory rules and fitted speeds the plan uses (emit deploys it).",
    )
    engines: list[Literal["vllm", "sglang", "trtllm"]] | None = Field(
        default=None,
        min_length=1,
        description="Engines to search (plan: each is planned and the cheapest plan kept; the plan lists each under "
        "dtype_search). Default: engine alone.",
    )
    engine_version: str = Field(default="", description="Engine version recorded in the plan (empty: the fitted one).")
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="The engine's memory fraction (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static, "
        "TensorRT-LLM free_gpu_memory_fraction); sizes the KV cache and is emitted (default: the engine's).",
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1 << 24,
        description="Tokens in one engine step: the prefill chunk of the step model and the activation reserve of "
        "the memory budget; emitted (default: the engine's).",
    )
    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        le=1 << 20,
        description="Sequences in one engine step: caps the decode batch and sizes the sampler reserve; emitted "
        "(default: the engine's).",
    )
    max_model_len_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1 << 24,
        description="The engine's --max-model-len: requests longer (prompt + output) are dropped and reported like "
        "requests over the model's window (default: the longest request the workload keeps).",
    )
    workload: WorkloadSpec = Field(description="The traffic: a trace file or a synthetic distribution.")
    goodput_req_per_s: float | None = Field(
        default=None,
        ge=MIN_RATE_PER_S,
        le=1e7,
        description="Goodput target: requests per second that must meet every SLO (default: the trace's rate).",
    )
    slo: SloSpec = Field(default=SloSpec(), description="Latency SLOs and their percentile.")
    classes: list[ClassSpec] | None = Field(
        default=None,
        min_length=1,
        description="Request classes, each with its own SLOs (name, slo, and a share, a class_column value or a "
        "trace path of its own); the "
        "plan is sized against the tightest TTFT and TPOT among them and holds only if every class holds "
        "(docs/search.md). Unset: one class with slo.",
    )
    gpus: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Candidate GPU types (catalog names or aliases; default: the inventory's, else every priced GPU).",
    )
    inventory: dict[str, NonNegativeInt] = Field(
        default_factory=dict,
        description="GPUs you own, per type, e.g. {H800: 32, H20: 32} (nodes of 8), used first at their amortised "
        "price (price file; else $0); rented offers fill the rest unless rent is false.",
    )
    cloud: str | None = Field(
        default=None,
        description="Take catalog prices from this cloud: aws, gcp, azure, lambda, runpod, nebius "
        "(default: the cheapest listing that includes the host VM).",
    )
    region: str | None = Field(
        default=None,
        description="Rent only in this region (e.g. us-east-2, westus3; `hetplan catalog prices` lists them); "
        "default: the cheapest region that has the instances.",
    )
    spot: bool = Field(default=False, description="Use spot prices instead of on-demand.")
    prices: str | None = Field(
        default=None, description="Price file (your own $/GPU-hour), relative to the scenario; overrides the catalog."
    )
    rent: bool = Field(
        default=True, description="Rent offers beyond the owned inventory (false: owned GPUs only, like --no-rent)."
    )
    allow_cross_provider: bool = Field(
        default=False,
        description="Let a combo put prefill at one site (provider/region or owned) and decode at another, its KV "
        "cache over a WAN link (wan_gb_per_s, wan_latency_s, egress_usd_per_gb); like --allow-cross-provider.",
    )
    wan_gb_per_s: float = Field(
        default=1.25, gt=0, le=1e4, description="WAN bandwidth per cross-site combo copy, GB/s (default 10 Gbit/s)."
    )
    wan_latency_s: float = Field(
        default=0.03, ge=0, le=10, description="WAN one-way latency added to each cross-site KV transfer, seconds."
    )
    egress_usd_per_gb: float = Field(
        default=0.09,
        ge=0,
        le=100,
        description="Egress $/GB on KV bytes sent across sites (default: AWS internet egress, first 10 TB).",
    )
    headroom: Annotated[float, BeforeValidator(percent_suffix)] = Field(
        default=0.1,
        ge=0,
        le=10,
        description="Extra goodput to provision: the plan holds target x (1 + headroom); a fraction (0.1) or a "
        "percent with its sign (10%).",
    )
    tp: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8], min_length=1, description="Tensor-parallel degrees to consider (1..8)."
    )
    max_ratio: int = Field(default=8, ge=1, le=32, description="Largest n and m in an n:m prefill:decode combo.")
    max_ilp_combos: int = Field(
        default=20000,
        ge=1,
        description="Cap on combos in the ILP after exact pruning; past it the best by tokens/USD are kept.",
    )
    kv_connector: Literal["nixl", "mooncake"] = Field(
        default="nixl", description="KV connector between prefill and decode instances (sets the TP pairing rule)."
    )
    autoscale: AutoscaleSpec | None = Field(default=None, description="Settings of hetplan autoscale.")
    perf: PerfSpec | None = Field(default=None, description="Settings of the performance model (calibration).")
    _base_dir: str = PrivateAttr(default=".")

    @field_validator("engines")
    @classmethod
    def _engines_once(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            twice = sorted({e for e in v if v.count(e) > 1})
            raise ValueError(f"engines lists {', '.join(twice)} more than once: list each engine once")
        return v

    @model_validator(mode="after")
    def _classes_consistent(self) -> Scenario:
        if not self.classes:
            if self.workload.class_column:
                raise ValueError("workload.class_column is set but no classes are given: add classes or drop it")
            return self
        names = [c.name for c in self.classes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"classes lists {', '.join(twice)} more than once: give each class one entry")
        own = [c for c in self.classes if c.path is None]  # the classes of the workload's own requests
        if not own:
            raise ValueError("every class has its own path: give one class without path for workload's requests")
        if len(own) < len(self.classes) and (self.workload.synthetic is not None or self.workload.rate_per_s):
            raise ValueError("classes with their own path need a workload trace at its own rate (no synthetic, no "
                             "rate_per_s): each trace keeps its own timestamps")  # fmt: skip
        if len(own) == 1 and own[0].share is None and own[0].value is None:
            if self.workload.class_column:
                raise ValueError("workload.class_column is only read for classes given by value: drop it")
            return self  # one class takes all of the workload's requests
        by_share = [c.share for c in own if c.share is not None]
        if len(by_share) != len(own) and (by_share or any(c.value is None for c in own)):
            raise ValueError(
                "classes mix share and value (or give neither): give every class without a path a share, or every "
                "one a value"
            )
        if by_share and abs(sum(by_share) - 1.0) > 1e-6:
            raise ValueError(f"classes' shares sum to {sum(by_share):g}, not 1: make them add up to 1 (100%)")
        if not by_share and not self.workload.class_column:
            raise ValueError("classes given by value need workload.class_column, the CSV column holding the class")
        if by_share and self.workload.class_column:
            raise ValueError("workload.class_column is only read for classes given by value: drop it or use values")
        return self

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
    scenario = read_yaml_file(Path(path), Scenario, "scenario", "see docs/reference/scenario.md and examples/*.yaml")
    return scenario.with_base_dir(str(Path(path).parent))
