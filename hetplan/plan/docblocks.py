"""The typed blocks of a plan document, read and written: the part of :mod:`hetplan.plan.doc` that converts the
fields beyond the deployment (top level and the scenario echo) between the document and
:class:`~hetplan.plan.types.Plan`'s typed fields (:mod:`hetplan.plan.blocks`).

Written in the order :mod:`hetplan.planning.document` writes them, so a plan it made reads and writes back to the
same bytes.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from hetplan.catalog.loader import format_validation
from hetplan.errors import InputError
from hetplan.plan.blocks import (
    Analysis,
    Block,
    CascadeSettings,
    ClassSlo,
    DeploymentRules,
    DtypeTry,
    GpuFleet,
    HomogeneousBaseline,
    OwnedGpu,
    PrefixCache,
    ProfileRecord,
    PruneWith,
    SolverStats,
    Verification,
    WanLink,
    WorkloadSummary,
)
from hetplan.plan.schema import FIX

if TYPE_CHECKING:
    from hetplan.plan.types import Plan

T = TypeVar("T", bound=Block)
GAIN = "gain_over_"
#: Top-level keys this module reads (the ``gain_over_<strategy>`` keys too).
TOP_KEYS = frozenset(
    {
        "gpu", "usd_per_million_tokens", "lower_bound_usd_per_hour", "tokens_per_usd_basis", "rented_site",
        "sites_tried", "egress_usd_per_hour", "assignment", "strategy_requested", "shape_won",
        "homogeneous_baseline", "homogeneous_by_gpu", "owned_gpus", "solver", "prefix_cache", "analysis",
        "quality_note", "dtype_search", "autoscaling", "cascade", "verification",
    }
)  # fmt: skip
#: Scenario keys this module reads.
SCENARIO_KEYS = frozenset(
    {"workload", "max_ratio", "deployment", "classes", "cross_provider", "model_config", "profiles", "prune_with"}
)


def block_of(kind: type[T], raw: Any, where: str) -> T:
    """The ``kind`` block of the mapping ``raw`` found at ``where``.

    Raises:
        InputError: ``raw`` is not a mapping, or a declared field has the wrong type (named, with the fix).
    """
    if not isinstance(raw, Mapping):
        raise InputError(f"{where} is not a mapping", fix=FIX)
    try:
        return kind.from_doc(raw)
    except ValidationError as exc:
        raise InputError(f"{where} is not a usable {kind.__name__} block", format_validation(exc), FIX) from None


def _rows(kind: type[T], raw: Any, where: str) -> tuple[T, ...]:
    if not isinstance(raw, list):
        raise InputError(f"{where} is not a list", fix=FIX)
    return tuple(block_of(kind, r, f"{where}[{i}]") for i, r in enumerate(raw))


def _by_name(kind: type[T], raw: Any, where: str) -> dict[str, T]:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where} is not a mapping", fix=FIX)
    return {str(k): block_of(kind, v, f"{where}.{k}") for k, v in raw.items()}


def _num(raw: Any) -> float | None:
    return None if raw is None else raw if isinstance(raw, int | float) and not isinstance(raw, bool) else float(raw)


def _text(raw: Any) -> str | None:
    return None if raw is None else str(raw)


def top_fields(doc: Mapping[str, Any], where: str) -> dict[str, Any]:
    """:class:`~hetplan.plan.types.Plan`'s typed fields from a (checked) document's top level.

    Raises:
        InputError: a block of the wrong shape (named, e.g. ``plan verification``).
    """
    g = doc.get
    sites = g("sites_tried")
    return {
        "gpu_only": _text(g("gpu")),
        "usd_per_million_tokens": _num(g("usd_per_million_tokens")),
        "lower_bound_usd_per_hour": _num(g("lower_bound_usd_per_hour")),
        "tokens_per_usd_basis": _text(g("tokens_per_usd_basis")),
        "rented_site": _text(g("rented_site")),
        "sites_tried": None if sites is None and "sites_tried" not in doc else tuple(str(s) for s in sites or ()),
        "egress_usd_per_hour": _num(g("egress_usd_per_hour")),
        "assignment": _text(g("assignment")),
        "strategy_requested": _text(g("strategy_requested")),
        "shape_won": _text(g("shape_won")),
        "homogeneous_baseline": None
        if g("homogeneous_baseline") is None
        else block_of(HomogeneousBaseline, g("homogeneous_baseline"), f"{where} homogeneous_baseline"),
        "homogeneous_by_gpu": None
        if g("homogeneous_by_gpu") is None
        else _by_name(GpuFleet, g("homogeneous_by_gpu"), f"{where} homogeneous_by_gpu"),
        "owned_gpus": None if g("owned_gpus") is None else _by_name(OwnedGpu, g("owned_gpus"), f"{where} owned_gpus"),
        "gains": {k.removeprefix(GAIN): _num(v) for k, v in doc.items() if k.startswith(GAIN)},
        "solver": None if g("solver") is None else block_of(SolverStats, g("solver"), f"{where} solver"),
        "prefix_cache": None
        if g("prefix_cache") is None
        else block_of(PrefixCache, g("prefix_cache"), f"{where} prefix_cache"),
        "analysis": None if g("analysis") is None else block_of(Analysis, g("analysis"), f"{where} analysis"),
        "quality_note": _text(g("quality_note")),
        "dtype_search": None
        if g("dtype_search") is None
        else _rows(DtypeTry, g("dtype_search"), f"{where} dtype_search"),
        "autoscaling": _text(g("autoscaling")),
        "cascade": None if g("cascade") is None else cascade_of(g("cascade"), where),
        "verification": None
        if g("verification") is None
        else block_of(Verification, g("verification"), f"{where} verification"),
    }


def cascade_of(raw: Any, where: str = "plan") -> CascadeSettings:
    """The typed ``cascade`` block of a plan document (see :mod:`hetplan.plan.blocks.cascade`).

    Raises:
        InputError: not a mapping, or a field of the wrong type or range; the message names it (e.g.
            ``cascade.classes.code.ttft_slo_s``) and what the simulator reads from the block.
    """
    try:
        if not isinstance(raw, Mapping):
            raise InputError(
                f"{where}'s cascade block is not a mapping (got {raw!r})",
                "the simulator reads kappa > 0, q2 in [0, 1] and per-class SLOs > 0 (seconds) from this block",
                "fix cascade in the plan, or re-run 'hetplan calibrate'",
            )
        return CascadeSettings.from_doc(raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = [str(x) for x in e["loc"]]
        if e["type"] in ("int_type", "float_type") and loc[-1:] in (["int"], ["float"]):
            loc = loc[:-1]  # a number's union member (StrictNum), not a field
        field = ".".join(["cascade", *loc])
        raise InputError(
            f"{where}'s {field} is invalid: {e['msg']} (got {e.get('input')!r})",
            "the simulator reads kappa > 0, q2 in [0, 1] and per-class SLOs > 0 (seconds) from this block",
            f"fix {field} in the plan, or re-run 'hetplan calibrate'",
        ) from None


def scenario_fields(sc: Mapping[str, Any], where: str) -> dict[str, Any]:
    """:class:`~hetplan.plan.types.Plan`'s typed fields from the scenario echo's other keys.

    Raises:
        InputError: a block of the wrong shape (named).
    """
    g = sc.get
    return {
        "workload": None if g("workload") is None else block_of(WorkloadSummary, g("workload"), f"{where} workload"),
        "max_ratio": _num(g("max_ratio")),
        "deployment": None
        if g("deployment") is None
        else block_of(DeploymentRules, g("deployment"), f"{where} scenario.deployment"),
        "classes": None if g("classes") is None else _rows(ClassSlo, g("classes"), f"{where} scenario.classes"),
        "cross_provider": None
        if g("cross_provider") is None
        else block_of(WanLink, g("cross_provider"), f"{where} scenario.cross_provider"),
        "model_config_path": _text(g("model_config")),
        "profiles": None
        if g("profiles") is None
        else _rows(ProfileRecord, g("profiles"), f"{where} scenario.profiles"),
        "prune_with": None
        if g("prune_with") is None
        else block_of(PruneWith, g("prune_with"), f"{where} scenario.prune_with"),
    }


def top_extra_doc(plan: Plan) -> dict[str, Any]:
    """The plan's top-level fields beyond the deployment as document data, in the planner's order (``gpu`` and
    the other totals are placed by :func:`hetplan.plan.doc.to_doc`)."""
    out: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if value is not None:
            out[key] = value.to_doc() if isinstance(value, Block) else value

    put("gpu", plan.gpu_only)
    put("usd_per_million_tokens", plan.usd_per_million_tokens)
    put("lower_bound_usd_per_hour", plan.lower_bound_usd_per_hour)
    put("tokens_per_usd_basis", plan.tokens_per_usd_basis)
    if plan.sites_tried is not None:  # a purchase layer: both written, rented_site None when nothing is rented
        out["rented_site"] = plan.rented_site
        out["sites_tried"] = list(plan.sites_tried)
    put("egress_usd_per_hour", plan.egress_usd_per_hour)
    put("assignment", plan.assignment)
    put("strategy_requested", plan.strategy_requested)
    put("shape_won", plan.shape_won)
    put("homogeneous_baseline", plan.homogeneous_baseline)
    if plan.homogeneous_by_gpu is not None:
        out["homogeneous_by_gpu"] = {g: f.to_doc() for g, f in plan.homogeneous_by_gpu.items()}
    if plan.owned_gpus is not None:
        out["owned_gpus"] = {g: o.to_doc() for g, o in plan.owned_gpus.items()}
    out.update({f"{GAIN}{name}": gain for name, gain in plan.gains.items()})
    put("solver", plan.solver)
    put("prefix_cache", plan.prefix_cache)
    put("analysis", plan.analysis)
    put("quality_note", plan.quality_note)
    if plan.dtype_search is not None:
        out["dtype_search"] = [d.to_doc() for d in plan.dtype_search]
    put("autoscaling", plan.autoscaling)
    put("cascade", plan.cascade)
    return out


def scenario_extra_doc(plan: Plan) -> dict[str, Any]:
    """The scenario echo's other fields as document data, in the planner's order."""
    out: dict[str, Any] = {}
    if plan.workload is not None:
        out["workload"] = plan.workload.to_doc()
    if plan.max_ratio is not None:
        out["max_ratio"] = plan.max_ratio
    if plan.deployment is not None:
        out["deployment"] = plan.deployment.to_doc()
    if plan.classes is not None:
        out["classes"] = [c.to_doc() for c in plan.classes]
    if plan.cross_provider is not None:
        out["cross_provider"] = plan.cross_provider.to_doc()
    if plan.model_config_path is not None:
        out["model_config"] = plan.model_config_path
    if plan.profiles is not None:
        out["profiles"] = [p.to_doc() for p in plan.profiles]
    if plan.prune_with is not None:
        out["prune_with"] = plan.prune_with.to_doc()
    return out


__all__ = [
    "GAIN",
    "block_of",
    "cascade_of",
    "SCENARIO_KEYS",
    "TOP_KEYS",
    "scenario_extra_doc",
    "scenario_fields",
    "top_extra_doc",
    "top_fields",
]
