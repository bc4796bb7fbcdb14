"""The blocks of a scenario file (:mod:`hetplan.scenario`): the workload, the SLOs, request classes, autoscaling
and performance settings, and the field types they share (durations with their unit, percentiles).

Unknown keys are rejected; a duration carries its unit (``ttft: 2s``) or sits in a field named with its unit
(``ttft_s: 2``), and a bare number in a duration field is refused with the fix. The field reference is generated
from these models (``docs/reference/scenario.md``, ``scripts/gen_docs.py``).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    model_validator,
)

#: Smallest arrival rate or goodput target accepted, req/s (one request a day is 1.2e-5): below it the capacity
#: arithmetic underflows (a rate of 1e-300 gave a division by zero).
MIN_RATE_PER_S = 1e-6


class StrictBlock(BaseModel):
    """Base of every scenario block: unknown keys, inf and NaN are refused."""

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


def percent_suffix(value: Any) -> Any:
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


class SyntheticSpec(StrictBlock):
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


class ReuseSpec(StrictBlock):
    """A declared prefix-reuse model for a workload without ``hash_ids`` (:func:`hetplan.workload.prefix.
    declared_reuse`)."""

    session_share: float = Field(
        default=0.0, ge=0, le=1, description="Share of requests that continue an earlier session (0..1)."
    )
    system_prompt_tokens: int = Field(
        default=0, ge=0, le=10_000_000, description="Length of a system prompt every request starts with, tokens."
    )


class WorkloadSpec(StrictBlock):
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
    holdout: Annotated[float, BeforeValidator(percent_suffix)] | None = Field(
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


class SloSpec(StrictBlock):
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


class ClassSloSpec(StrictBlock):
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


class ClassSpec(StrictBlock):
    """A request class with its own SLOs, and which requests are in it: a ``share`` of the workload's requests
    (drawn per request from a fixed seed), the ``value`` of the trace's ``workload.class_column``, or a trace
    ``path`` of its own (its requests are added to the workload's, each trace on its own clock from 0). A class
    without any of the three is the only class of the workload's own requests."""

    name: str = Field(min_length=1, max_length=64, description="Class name shown in verification and reports.")
    slo: ClassSloSpec = Field(default=ClassSloSpec(), description="The class's own TTFT/TPOT SLOs.")
    share: Annotated[float, BeforeValidator(percent_suffix)] | None = Field(
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


class AutoscaleSpec(StrictBlock):
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
    hysteresis: Annotated[float, BeforeValidator(percent_suffix)] = Field(
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


class PerfSpec(StrictBlock):
    """Settings of the performance model."""

    calibration: str | None = Field(
        default=None,
        description="Calibration file from 'hetplan calibrate-perf' (your own benchmarks' corrections of the shipped "
        "curves), relative to the scenario; like --perf-calibration. Its SHA-256 goes into the plan's provenance.",
    )
