"""Scenario files: what ``hetplan plan examples/<scenario>.yaml`` reads.

Unknown keys are rejected so a typo is an error, not a silently ignored setting. Paths inside a scenario are
relative to the scenario file. Command-line flags override the file.

Durations carry their unit: ``ttft: 2s``, ``tpot: 80ms``, ``cooldown: 30m``; or a field named with its unit holds a
plain number of seconds (``ttft_s: 2``, ``tpot_s: 0.08``, ``window_s: 600``). A bare number in a duration field
without a unit (``tpot: 50``: 50 ms or 50 s?) is refused with the fix. The field reference (every field, type,
unit and default) is generated from these models: ``docs/reference/scenario.md`` (``scripts/gen_docs.py``).

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
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PrivateAttr,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hetplan.catalog.loader import read_yaml_file

#: Smallest arrival rate or goodput target accepted, req/s (one request a day is 1.2e-5): below it the capacity
#: arithmetic underflows (a rate of 1e-300 gave a division by zero).
MIN_RATE_PER_S = 1e-6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


#: Duration fields that have a unit-named twin taking seconds (``ttft`` -> ``ttft_s``), for the refusal's fix.
_SECONDS_TWIN = {"ttft": "ttft_s", "tpot": "tpot_s", "window": "window_s", "startup_lag": "startup_lag_s",
                 "cooldown": "cooldown_s"}  # fmt: skip


def _refuse_bare_number(value: Any, info: ValidationInfo) -> Any:
    """A duration field's value before validation: a number (``50``) has no unit and is refused with the fix."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        twin = _SECONDS_TWIN.get(info.field_name or "")
        raise ValueError(
            f"{value!r} has no unit (a bare number is ambiguous: {value:g} ms or {value:g} s?); write it with a "
            f"unit, e.g. {info.field_name}: {value:g}s or {value:g}ms"
            + (f", or {twin}: {value:g} for seconds" if twin else "")
        )
    return value


def _percent_suffix(value: Any) -> Any:
    """``"10%"`` -> 0.1 for fraction fields (a bare number stays a fraction: ``headroom: 2`` is +200 %)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip().removesuffix("%").strip()) / 100.0
        except ValueError:
            return value  # pydantic then names the field and the value it cannot read
    return value


#: A duration with its unit, as text: ``2s``, ``80ms``, ``10m`` (minutes), ``1h``; parsed by
#: :func:`hetplan.units.parse_duration_s` where it is used. A bare number is refused (see :func:`_refuse_bare_number`).
Duration = Annotated[StrictStr, BeforeValidator(_refuse_bare_number)]
#: A share as a percent with its sign or a fraction: ``"p90"``, ``"90%"``, ``0.9`` (a bare ``90`` is refused:
#: :func:`hetplan.units.parse_share`'s one rule).
Percentile = StrictStr | StrictFloat | StrictInt


def _seconds_fields(data: Any, names: dict[str, str], where: str) -> Any:
    """Turn unit-named fields (``ttft_s: 2``) into their duration field (``ttft: "2s"``) before validation.

    Raises:
        ValueError: both forms given, or the unit-named value is not a number.
    """
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for named, field in names.items():
        if named not in out:
            continue
        value = out.pop(named)
        if field in out:
            raise ValueError(f"{named} and {field} both given ({where}{field}); keep one")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}{named} is a number of seconds; got {value!r} (write e.g. {named}: 2)")
        out[field] = f"{float(value)!r}s"
    return out


class SyntheticSpec(_Strict):
    """A synthetic workload: one of Cauchy's classes (or ``custom`` with medians) at ``rate_per_s``."""

    kind: str = Field(
        default="balanced",
        alias="class",
        description="long-input-short-output, balanced, short-input-long-output, or custom (give both medians).",
    )
    rate_per_s: float = Field(ge=MIN_RATE_PER_S, le=1e7, description="Arrival rate of the synthetic requests.")
    requests: int = Field(default=2000, gt=0, le=1_000_000, description="Requests drawn (the length sample).")
    seed: int = Field(default=0, ge=0, description="Random seed of the draw (same seed, same requests).")
    prompt_tokens_median: float | None = Field(
        default=None, gt=0, le=10_000_000, description="Median prompt length (class custom)."
    )
    output_tokens_median: float | None = Field(
        default=None, gt=0, le=10_000_000, description="Median output length (class custom)."
    )
    sigma: float = Field(default=0.6, gt=0, le=3, description="Lognormal sigma of both length distributions.")

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class ReuseSpec(_Strict):
    """A declared prefix-reuse model for a workload without ``hash_ids`` (:func:`hetplan.workload.prefix.
    declared_reuse`)."""

    session_share: float = Field(
        default=0.0, ge=0, le=1, description="Share of requests that continue an earlier session (0..1)."
    )
    system_prompt_tokens: int = Field(
        default=0, ge=0, le=10_000_000, description="Length of a system prompt every request starts with, tokens."
    )


class WorkloadSpec(_Strict):
    """A trace file (``path`` + ``format``) or a ``synthetic`` distribution, not both; ``rate_per_s``
    overrides the trace's own rate (needed for length-only files)."""

    path: str | None = Field(
        default=None,
        description="Trace file, relative to the scenario file: Azure CSV (TIMESTAMP, ContextTokens, "
        "GeneratedTokens), Mooncake JSONL (timestamp ms, input_length, output_length) or a length-only CSV.",
    )
    format: Literal["auto", "azure", "mooncake", "lengths"] = Field(
        default="auto", description="Trace format; auto reads it from the file's extension and columns."
    )
    rate_per_s: float | None = Field(
        default=None,
        ge=MIN_RATE_PER_S,
        le=1e7,
        description="Arrival rate replacing the trace's own (required for a length-only file).",
    )
    synthetic: SyntheticSpec | None = Field(default=None, description="A synthetic distribution instead of a trace.")
    class_column: str | None = Field(
        default=None,
        min_length=1,
        description="CSV column naming each request's class, for classes given by value (see classes).",
    )
    holdout: Annotated[float, BeforeValidator(_percent_suffix)] | None = Field(
        default=None,
        ge=0,
        le=0.9,
        description="Share of a trace's time span, at its end, that sizing leaves out so that verification replays "
        "traffic the plan was not sized on (a fraction, 0.3, or a percent, 30%). Unset: 0.3 when the plan is "
        "verified, 0 (the whole trace) with --no-verify; 0 sizes and verifies on the whole trace. A synthetic "
        "workload is verified out of sample on another seed instead.",
    )

    prefix_cache: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Prefix caching in sizing and verification: auto (on when the trace has hash_ids or reuse is "
        "declared), on (refused when there is neither), off (every prompt computed whole).",
    )
    reuse: ReuseSpec | None = Field(
        default=None,
        description="Declared prefix reuse for a workload without hash_ids: session_share, system_prompt_tokens.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        if (self.path is None) == (self.synthetic is None):
            raise ValueError("give exactly one of workload.path (a trace) and workload.synthetic")
        if self.synthetic is not None and (self.rate_per_s is not None or self.format != "auto" or self.holdout):
            raise ValueError(
                "workload.rate_per_s, workload.format and workload.holdout apply to trace files; "
                "set workload.synthetic.rate_per_s instead (a synthetic workload is verified on another seed)"
            )
        return self


class SloSpec(_Strict):
    """SLOs: durations with a unit like ``2s`` or ``80ms`` (or ``ttft_s``/``tpot_s`` in seconds); ``percentile``
    like "p90", "90%" or 0.9 (a bare number is a fraction: 90 is refused)."""

    #: Unit-named spellings accepted for the duration fields (seconds), field name -> duration field.
    SECONDS_FIELDS: ClassVar[dict[str, str]] = {"ttft_s": "ttft", "tpot_s": "tpot"}

    ttft: Duration = Field(default="2s", description="Time-to-first-token SLO (queueing + prefill + KV transfer).")
    tpot: Duration = Field(default="100ms", description="Time-per-output-token SLO (decode step time).")
    percentile: Percentile = Field(
        default="p90",
        description="Percentile both SLOs must hold at: p90, 90% or 0.9; a bare number is a fraction (p50 .. p99.99).",
    )

    @model_validator(mode="before")
    @classmethod
    def _unit_named(cls, data: Any) -> Any:
        return _seconds_fields(data, cls.SECONDS_FIELDS, "slo.")


class ClassSloSpec(_Strict):
    """One request class's SLOs (durations with a unit, or ``ttft_s``/``tpot_s`` in seconds); a field left out is
    the scenario's ``slo`` value. The percentile is the scenario's, shared by every class."""

    #: Unit-named spellings accepted for the duration fields (seconds), field name -> duration field.
    SECONDS_FIELDS: ClassVar[dict[str, str]] = {"ttft_s": "ttft", "tpot_s": "tpot"}

    ttft: Duration | None = Field(default=None, description="This class's time-to-first-token SLO (default: slo.ttft).")
    tpot: Duration | None = Field(
        default=None, description="This class's time-per-output-token SLO (default: slo.tpot)."
    )

    @model_validator(mode="before")
    @classmethod
    def _unit_named(cls, data: Any) -> Any:
        return _seconds_fields(data, cls.SECONDS_FIELDS, "classes[].slo.")


class ClassSpec(_Strict):
    """A request class with its own SLOs, and which requests are in it: a ``share`` of the workload's requests
    (drawn per request from a fixed seed), the ``value`` of the trace's ``workload.class_column``, or a trace
    ``path`` of its own (its requests are added to the workload's, each trace on its own clock from 0). A class
    without any of the three is the only class of the workload's own requests."""

    name: str = Field(min_length=1, max_length=64, description="Class name shown in verification and reports.")
    slo: ClassSloSpec = Field(default=ClassSloSpec(), description="The class's own TTFT/TPOT SLOs.")
    share: Annotated[float, BeforeValidator(_percent_suffix)] | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Share of the workload's requests in this class (a fraction, 0.3, or a percent, 30%); every "
        "class gives one and they sum to 1.",
    )
    value: str | None = Field(
        default=None,
        min_length=1,
        description="The value of the trace's workload.class_column that marks this class's requests.",
    )

    path: str | None = Field(
        default=None,
        min_length=1,
        description="A trace file of this class's own requests, relative to the scenario (Azure CSV or Mooncake "
        "JSONL with timestamps), added to the workload's.",
    )

    @model_validator(mode="after")
    def _one_rule(self) -> ClassSpec:
        if sum(x is not None for x in (self.share, self.value, self.path)) > 1:
            raise ValueError(f"class {self.name!r}: give one of share, value and path, not several")
        return self


class AutoscaleSpec(_Strict):
    """Settings of ``hetplan autoscale`` (durations with a unit like ``10m``, or ``window_s``/``startup_lag_s``/
    ``cooldown_s`` in seconds; see ``hetplan/autoscale/schedule.py``)."""

    #: Unit-named spellings accepted for the duration fields (seconds), field name -> duration field.
    SECONDS_FIELDS: ClassVar[dict[str, str]] = {
        "window_s": "window",
        "startup_lag_s": "startup_lag",
        "cooldown_s": "cooldown",
    }

    load_curve: str | None = Field(
        default=None,
        description="Load curve file, relative to the scenario: a ServeGen per-window CSV or any trace (binned).",
    )
    window: Duration | None = Field(
        default=None, description="Window of the schedule (default: the curve's own, 10m for a trace)."
    )
    startup_lag: Duration = Field(default="5m", description="Time from asking for capacity to serving with it.")
    startup_lag_by_gpu: dict[str, Duration] = Field(
        default_factory=dict, description="Start-up lag per GPU type, e.g. {H100: 10m}, overriding startup_lag."
    )
    cooldown: Duration = Field(default="30m", description="Minimum time before capacity is removed again.")
    hysteresis: Annotated[float, BeforeValidator(_percent_suffix)] = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="Scale in only when demand falls this fraction below capacity: a fraction (0.1) or a percent "
        "with its sign (10%).",
    )
    max_changes_per_window: int = Field(default=8, ge=1, le=10_000, description="Most combos changed per window.")
    min_goodput_req_per_s: float = Field(
        default=0.0, ge=0, le=1e7, description="Capacity kept at all times, even when the curve is lower."
    )
    level_step: float = Field(
        default=0.05, gt=0, le=1, description="Demand levels are rounded up to steps of this fraction of the peak."
    )
    design_utilization: float = Field(
        default=0.8, gt=0, lt=1, description="Utilisation the burstiness correction plans for (Allen-Cunneen)."
    )
    max_cv: float = Field(
        default=4.0, ge=1, le=100, description="Cap on a window's inter-arrival coefficient of variation."
    )

    @model_validator(mode="before")
    @classmethod
    def _unit_named(cls, data: Any) -> Any:
        return _seconds_fields(data, cls.SECONDS_FIELDS, "autoscale.")


class PerfSpec(_Strict):
    """Settings of the performance model."""

    calibration: str | None = Field(
        default=None,
        description="Calibration file from 'hetplan calibrate-perf' (your own benchmarks' corrections of the shipped "
        "curves), relative to the scenario; like --perf-calibration. Its SHA-256 goes into the plan's provenance.",
    )


class Scenario(_Strict):
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
    headroom: Annotated[float, BeforeValidator(_percent_suffix)] = Field(
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
