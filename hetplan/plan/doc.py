"""Plan files: :class:`~hetplan.plan.types.Plan` to and from the document ``hetplan plan --json/--out`` writes.

The document is checked at this edge (pydantic models below, with bounds) and then becomes frozen dataclasses;
nothing downstream reads the dict. Schema version 2 records the resolved model and GPU entries (``resolved``),
Mélange buckets as numbers, the engine and ``provenance``. Version 1 files (hetplan 0.1 before the typed plan)
are still read: their model and GPUs are resolved once here, from ``scenario.model_config``, the profiled entries
under ``scenario.profiles`` and the catalog, and their bucket labels are parsed; a v1 plan whose model or GPU
the catalog no longer knows is refused with the fix (re-plan).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, model_validator

from hetplan.catalog.loader import format_validation, read_yaml_file
from hetplan.catalog.schemas import GpuSpec, ModelSpec
from hetplan.errors import InputError
from hetplan.plan.settings_doc import settings_from_doc, settings_to_doc
from hetplan.plan.types import (
    DEFAULT_ENGINE,
    AggregatedUnit,
    BucketShare,
    ComboUnit,
    Plan,
    Price,
    Provenance,
    ResolvedGpu,
    ResolvedModel,
    Slo,
    StrategyResult,
)

SCHEMA_VERSION = 2
_FIX = "write one with 'hetplan plan ... --out plan.yaml'"


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
    min_count: int | None = Field(default=None, ge=0)
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
    engine: Literal["vllm"] = DEFAULT_ENGINE
    resolved: ResolvedDoc | None = None
    provenance: ProvenanceDoc | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> PlanDoc:
        if not self.combos and not self.instances:
            raise ValueError("a plan needs combos (disaggregated) or instances (aggregated)")
        if self.schema_version >= 2 and (self.resolved is None or self.provenance is None):
            raise ValueError("a version-2 plan needs 'resolved' (model and GPU entries) and 'provenance'")
        return self


# --- document order: known keys first in this order, then the rest as written ---------------------------------
_TOP = (
    "schema_version", "kind", "hetplan_version", "strategy", "engine", "scenario", "gpu", "status",
    "total_usd_per_hour", "usd_per_month", "usd_per_million_tokens", "goodput_req_per_s", "tokens_per_usd",
    "output_tokens_per_usd", "gpus_used", "combos", "instances", "lower_bound_usd_per_hour", "tokens_per_usd_basis",
    "baselines",
)  # fmt: skip
_TAIL = ("warnings", "verification", "resolved", "provenance")
_SCENARIO = (
    "name", "model", "weight_dtype", "kv_dtype", "goodput_target_req_per_s", "headroom", "demand_req_per_s", "slo",
    "workload", "gpus", "inventory", "prices", "tp_options", "max_ratio", "perf_settings",
)  # fmt: skip
_TYPED_TOP = set(_TOP) - {"gpu", "usd_per_million_tokens", "lower_bound_usd_per_hour", "tokens_per_usd_basis"}
_TYPED_TOP |= {"warnings", "verification", "resolved", "provenance"}
_TYPED_SCENARIO = set(_SCENARIO) - {"workload", "max_ratio"}
_COMBO_FIELDS = (
    "prefill_gpu", "prefill_tp", "n_prefill", "decode_gpu", "decode_tp", "n_decode", "count", "usd_per_hour",
    "goodput_req_per_s", "tokens_per_usd", "bound_by", "prefill_capacity_req_per_s", "decode_capacity_req_per_s",
    "kv_transfer_capacity_req_per_s", "decode_batch", "predicted_ttft_s", "predicted_tpot_s", "utilization",
    "min_count", "prefill_pp", "decode_pp",
)  # fmt: skip
_COMBO_OPTIONAL = {"min_count": None, "prefill_pp": 1, "decode_pp": 1}  # written only when set


def _ordered(values: Mapping[str, Any], head: tuple[str, ...], tail: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {k: values[k] for k in head if k in values}
    out.update({k: v for k, v in values.items() if k not in out and k not in tail})
    out.update({k: values[k] for k in tail if k in values})
    return out


def _hi(x: float) -> float | None:
    return None if math.isinf(x) else x


def _summary_doc(s: StrategyResult) -> dict[str, Any]:
    if s.status == "infeasible":
        return {"status": "infeasible", "reason": s.reason}
    doc: dict[str, Any] = {
        "status": s.status,
        "total_usd_per_hour": s.total_usd_per_hour,
        "goodput_req_per_s": s.goodput_req_per_s,
        "tokens_per_usd": s.tokens_per_usd,
        "output_tokens_per_usd": s.output_tokens_per_usd,
        "gpus_used": dict(s.gpus_used or {}),
    }
    if s.gpu is not None:
        doc["gpu"] = s.gpu
    if s.lower_bound_usd_per_hour is not None:
        doc["lower_bound_usd_per_hour"] = s.lower_bound_usd_per_hour
    return doc


def to_doc(plan: Plan) -> dict[str, Any]:
    """The plan as a version-2 document (what ``--json`` prints and ``--out`` writes); plain data, stable order.

    ``from_doc(to_doc(p)) == p`` for every plan ``p``.
    """
    scenario: dict[str, Any] = dict(plan.scenario_extra)
    scenario.update(
        {
            "name": plan.name,
            "model": plan.model.spec.name,
            "weight_dtype": plan.weight_dtype,
            "kv_dtype": plan.kv_dtype,
            "goodput_target_req_per_s": plan.goodput_target_req_per_s,
            "headroom": plan.headroom,
            "demand_req_per_s": plan.demand_req_per_s,
            "slo": {"ttft_s": plan.slo.ttft_s, "tpot_s": plan.slo.tpot_s, "percentile": plan.slo.percentile},
            "gpus": list(plan.gpus),
            "inventory": dict(plan.inventory),
            "prices": {g: {"usd_per_gpu_hour": p.usd_per_gpu_hour, "source": p.source} for g, p in plan.prices.items()},
            "tp_options": list(plan.tp_options),
            "perf_settings": settings_to_doc(plan.settings),
        }
    )
    top: dict[str, Any] = dict(plan.extra)
    top.update(
        {
            "schema_version": SCHEMA_VERSION,
            "kind": "plan",
            "hetplan_version": plan.provenance.hetplan_version,
            "strategy": plan.strategy,
            "engine": plan.engine,
            "scenario": _ordered(scenario, _SCENARIO),
            "status": plan.status,
            "total_usd_per_hour": plan.total_usd_per_hour,
            "usd_per_month": plan.usd_per_month,
            "goodput_req_per_s": plan.goodput_req_per_s,
            "tokens_per_usd": plan.tokens_per_usd,
            "output_tokens_per_usd": plan.output_tokens_per_usd,
            "gpus_used": dict(plan.gpus_used),
            "combos": [
                {
                    k: getattr(c, k)
                    for k in _COMBO_FIELDS
                    if k not in _COMBO_OPTIONAL or getattr(c, k) != _COMBO_OPTIONAL[k]
                }
                for c in plan.combos
            ],
            "instances": [
                {
                    "role": t.role,
                    "gpu": t.gpu,
                    "tp": t.tp,
                    "count": t.count,
                    "usd_per_hour": t.usd_per_hour,
                    "utilization": t.utilization,
                    "traffic_share": t.traffic_share,
                    **({"pp": t.pp} if t.pp != 1 else {}),
                    "buckets": [
                        {
                            "prompt_tokens": [b.prompt_lo_tokens, _hi(b.prompt_hi_tokens)],
                            "output_tokens": [b.output_lo_tokens, _hi(b.output_hi_tokens)],
                            "share": b.share,
                            "label": b.label,
                        }
                        for b in t.buckets
                    ],
                }
                for t in plan.instances
            ],
            "baselines": {name: _summary_doc(s) for name, s in plan.baselines.items()},
            "warnings": list(plan.warnings),
            "resolved": {
                "model": {
                    "source": plan.model.source,
                    **({"path": plan.model.path} if plan.model.path else {}),
                    "spec": plan.model.spec.model_dump(mode="json", exclude_none=True),
                },
                "gpus": [
                    {
                        "source": g.source,
                        **({"path": g.path} if g.path else {}),
                        "spec": g.spec.model_dump(mode="json", exclude_none=True),
                    }
                    for g in plan.gpus.values()
                ],
            },
            "provenance": {
                "hetplan_version": plan.provenance.hetplan_version,
                "catalog_sha256": plan.provenance.catalog_sha256,
                "workload_sha256": plan.provenance.workload_sha256,
            },
        }
    )
    if plan.verification is not None:
        top["verification"] = dict(plan.verification)
    return _ordered(top, _TOP, _TAIL)


def check_plan(data: Any, where: str = "plan") -> None:
    """Validate a plan document already in memory (see :class:`PlanDoc`).

    Raises:
        InputError: not a mapping, a Hetis deployment spec (nothing to emit or report), or a field later stages
            need is missing, of the wrong type or out of range (named).
    """
    if not isinstance(data, Mapping):
        raise InputError(f"{where} is not a mapping", fix=_FIX)
    if data.get("kind") == "hetis-deployment":  # Hetis (issue 7): a spec for an engine that does not exist yet
        raise InputError(
            f"{where} is a Hetis deployment spec, which emitters and reports cannot use",
            "no serving engine runs Hetis today, so there is nothing to emit, and the spec has no cost to report",
            "read the spec itself (JSON/YAML), or plan with --strategy cauchy|homogeneous|melange for emit/report",
        )
    try:
        PlanDoc.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{where} is not a usable hetplan plan", format_validation(exc), _FIX) from None


def from_doc(data: Any, where: str = "plan") -> Plan:
    """Check a plan document (version 1 or 2) and build the typed :class:`Plan`.

    Raises:
        InputError: see :func:`check_plan`; for version 1, also a model or GPU that can no longer be resolved.
    """
    check_plan(data, where)
    doc = dict(data)
    if int(doc["schema_version"]) < SCHEMA_VERSION:
        doc = upgrade_v1(doc, where)
        check_plan(doc, where)
    sc = dict(doc["scenario"])
    res = ResolvedDoc.model_validate(doc["resolved"])
    prov = ProvenanceDoc.model_validate(doc["provenance"])
    gpus = {g.spec.name: ResolvedGpu(g.spec, g.source, g.path) for g in res.gpus}
    plan = Plan(
        strategy=str(doc["strategy"]),
        status=str(doc["status"]),
        name=str(sc["name"]),
        model=ResolvedModel(res.model.spec, res.model.source, res.model.path),
        weight_dtype=str(sc["weight_dtype"]),
        kv_dtype=str(sc["kv_dtype"]),
        gpus=gpus,
        settings=settings_from_doc(sc.get("perf_settings", {})),
        slo=Slo(float(sc["slo"]["ttft_s"]), float(sc["slo"]["tpot_s"]), float(sc["slo"]["percentile"])),
        goodput_target_req_per_s=float(sc["goodput_target_req_per_s"]),
        demand_req_per_s=float(sc["demand_req_per_s"]),
        headroom=float(sc["headroom"]),
        prices={g: Price(float(p["usd_per_gpu_hour"]), str(p["source"])) for g, p in sc["prices"].items()},
        inventory={str(g): int(n) for g, n in (sc.get("inventory") or {}).items()},
        tp_options=tuple(int(t) for t in (sc.get("tp_options") or (1, 2, 4, 8))),
        total_usd_per_hour=float(doc["total_usd_per_hour"]),
        usd_per_month=float(doc["usd_per_month"]),
        goodput_req_per_s=float(doc["goodput_req_per_s"]),
        gpus_used={str(g): int(n) for g, n in doc["gpus_used"].items()},
        tokens_per_usd=float(doc["tokens_per_usd"]),
        output_tokens_per_usd=float(doc["output_tokens_per_usd"]),
        provenance=Provenance(prov.hetplan_version, prov.catalog_sha256, prov.workload_sha256),
        combos=tuple(_combo(c) for c in doc.get("combos") or []),
        instances=tuple(_instance(t, f"{where} instances[{i}]") for i, t in enumerate(doc.get("instances") or [])),
        baselines={str(k): _summary(v) for k, v in (doc.get("baselines") or {}).items()},
        verification=doc.get("verification"),
        warnings=tuple(str(w) for w in doc.get("warnings") or ()),
        engine=str(doc.get("engine", DEFAULT_ENGINE)),
        extra={k: v for k, v in doc.items() if k not in _TYPED_TOP},
        scenario_extra={k: v for k, v in sc.items() if k not in _TYPED_SCENARIO},
    )
    unknown = sorted(set(plan.used_gpu_names()) - set(gpus))
    if unknown:
        raise InputError(
            f"{where} deploys {', '.join(unknown)} but its resolved GPU entries do not include them",
            f"resolved: {', '.join(sorted(gpus))}",
            "re-plan instead of editing GPU names by hand",
        )
    return plan


def _combo(c: Mapping[str, Any]) -> ComboUnit:
    kw = {k: c[k] for k in _COMBO_FIELDS if k in c}
    return ComboUnit(**kw)


def _instance(t: Mapping[str, Any], where: str) -> AggregatedUnit:
    raw = t.get("buckets") or []
    if isinstance(raw, Mapping):  # written by a v1 plan: labels, parsed by upgrade_v1 already
        raise InputError(f"{where}.buckets is a mapping of labels", fix=_FIX)
    buckets = []
    for j, b in enumerate(raw):
        try:
            bd = BucketDoc.model_validate({k: v for k, v in b.items() if k != "label"})
        except (ValidationError, AttributeError) as exc:
            detail = format_validation(exc) if isinstance(exc, ValidationError) else "not a mapping"
            raise InputError(f"{where}.buckets[{j}] is not a bucket", detail, _FIX) from None
        inf = math.inf
        p_hi, o_hi = bd.prompt_tokens[1], bd.output_tokens[1]
        buckets.append(
            BucketShare(
                float(bd.prompt_tokens[0]),
                inf if p_hi is None else float(p_hi),
                float(bd.output_tokens[0]),
                inf if o_hi is None else float(o_hi),
                float(bd.share),
            )
        )
    return AggregatedUnit(
        gpu=str(t["gpu"]),
        tp=int(t["tp"]),
        count=int(t["count"]),
        usd_per_hour=float(t["usd_per_hour"]),
        utilization=float(t["utilization"]),
        traffic_share=float(t["traffic_share"]),
        buckets=tuple(buckets),
        role=str(t.get("role", "aggregated")),
        pp=int(t.get("pp", 1)),
    )


def _summary(v: Mapping[str, Any]) -> StrategyResult:
    return StrategyResult(
        status=str(v["status"]),
        reason=v.get("reason"),
        total_usd_per_hour=v.get("total_usd_per_hour"),
        goodput_req_per_s=v.get("goodput_req_per_s"),
        tokens_per_usd=v.get("tokens_per_usd"),
        output_tokens_per_usd=v.get("output_tokens_per_usd"),
        gpus_used=v.get("gpus_used"),
        gpu=v.get("gpu"),
        lower_bound_usd_per_hour=v.get("lower_bound_usd_per_hour"),
    )


# --- version 1 -------------------------------------------------------------------------------------------------
_RANGE = re.compile(
    r"^\s*in (?P<plo>[\d.e+]+?)(?:-(?P<phi>[\d.e+]+)|\+), out (?P<olo>[\d.e+]+?)(?:-(?P<ohi>[\d.e+]+)|\+)\s*$"
)


def parse_bucket_label(label: str) -> tuple[float, float, float, float]:
    """``"in 0-512, out 64-128"`` (a version-1 Mélange bucket label) → ``(0, 512, 64, 128)``; ``+`` → upper inf.

    Raises:
        InputError: the label is not in that form.
    """
    m = _RANGE.match(label)
    if not m:
        raise InputError(f"plan instance bucket {label!r} is not readable", fix="write the plan with this hetplan")
    inf = float("inf")
    return (
        float(m["plo"]),
        float(m["phi"]) if m["phi"] else inf,
        float(m["olo"]),
        float(m["ohi"]) if m["ohi"] else inf,
    )


def upgrade_v1(doc: dict[str, Any], where: str = "plan") -> dict[str, Any]:
    """A version-1 plan document as version 2: the model and GPU entries resolved (profiled entries recorded
    under ``scenario.profiles``, a ``config.json`` under ``scenario.model_config``, else the catalog), bucket
    labels parsed, provenance marked as unknown.

    Raises:
        InputError: the model or a deployed GPU cannot be resolved any more (the fix: re-plan).
    """
    from hetplan import __version__
    from hetplan.catalog.loader import active_gpus, catalog_sha256, find_gpu, find_model

    sc = dict(doc["scenario"])
    config = sc.get("model_config")
    try:
        if config:
            model = {"source": "config.json", "path": str(config), "spec": find_model(str(config))}
        else:
            model = {"source": "catalog", "spec": find_model(str(sc["model"]))}
    except InputError as exc:
        raise InputError(
            f"{where} (a version-1 plan) names model {sc['model']!r}, which cannot be resolved now",
            exc.why or exc.what,
            "re-plan with this hetplan: version-2 plans carry the model architecture",
        ) from None
    profiled: dict[str, tuple[GpuSpec, str]] = {}
    for rec in sc.get("profiles") or []:
        raw = rec.get("gpu_spec") if isinstance(rec, Mapping) else None
        if raw is not None:
            try:
                spec = GpuSpec.model_validate(raw)
            except ValidationError as exc:
                raise InputError(
                    f"{where} scenario.profiles[].gpu_spec is not a valid GPU entry: {exc.errors()[0]['msg']}",
                    fix="re-plan with hetplan plan --profile to record it again",
                ) from None
            profiled[spec.name] = (spec, str(rec.get("file", "")))
    used = {c[k] for c in doc.get("combos") or [] for k in ("prefill_gpu", "decode_gpu")}
    used |= {t["gpu"] for t in doc.get("instances") or []}
    gpus: list[dict[str, Any]] = []
    for name in list(dict.fromkeys(list(sc.get("gpus") or []) + sorted(used))):
        if name in profiled:
            gpus.append({"source": "profile", "path": profiled[name][1], "spec": profiled[name][0]})
            continue
        try:
            gpus.append({"source": "catalog", "spec": find_gpu(str(name), active_gpus())})
        except InputError as exc:
            if name in used:
                raise InputError(
                    f"{where} (a version-1 plan) deploys GPU {name!r}, which cannot be resolved now",
                    exc.why or exc.what,
                    "re-plan with this hetplan: version-2 plans carry the GPU entries",
                ) from None
    out = dict(doc)
    out["schema_version"] = SCHEMA_VERSION
    out["engine"] = DEFAULT_ENGINE
    out["resolved"] = {
        "model": {**model, "spec": model["spec"].model_dump(mode="json", exclude_none=True)},
        "gpus": [{**g, "spec": g["spec"].model_dump(mode="json", exclude_none=True)} for g in gpus],
    }
    out["provenance"] = {
        "hetplan_version": str(doc.get("hetplan_version") or __version__),
        "catalog_sha256": f"unknown (version-1 plan; resolved against {catalog_sha256()})",
        "workload_sha256": None,
    }
    out["instances"] = [
        {
            **t,
            "buckets": [
                dict(zip(("prompt_tokens", "output_tokens"), _pairs(parse_bucket_label(lbl)), strict=True))
                | {"share": float(share)}
                for lbl, share in sorted((t.get("buckets") or {}).items())
            ]
            if isinstance(t.get("buckets"), Mapping)
            else t.get("buckets", []),
        }
        for t in doc.get("instances") or []
    ]
    return out


def _pairs(b: tuple[float, float, float, float]) -> tuple[list[float | None], list[float | None]]:
    return [b[0], _hi(b[1])], [b[2], _hi(b[3])]


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (YAML or JSON, version 1 or 2) and return the typed :class:`Plan`.

    Raises:
        InputError: the file is missing, unreadable, not a plan, or lacks a field that later stages need.
    """
    return from_doc(read_plan_doc(path), str(path))


def read_plan_doc(path: str | Path) -> dict[str, Any]:
    """A plan file's document, checked (see :func:`check_plan`) but not converted.

    Raises:
        InputError: as :func:`load_plan`.
    """
    doc = read_yaml_file(Path(path), _Open, "plan file", _FIX)
    data = doc.model_dump()
    check_plan(data, str(path))
    return data


__all__ = [
    "SCHEMA_VERSION",
    "PlanDoc",
    "PlanMapping",
    "check_plan",
    "from_doc",
    "load_plan",
    "parse_bucket_label",
    "read_plan_doc",
    "to_doc",
    "upgrade_v1",
]
