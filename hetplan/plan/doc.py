"""Plan files: :class:`~hetplan.plan.types.Plan` to and from the document ``hetplan plan --json/--out`` writes.

The document is checked at this edge (pydantic models below, with bounds) and then becomes frozen dataclasses;
nothing downstream reads the dict. Schema version 2 records the resolved model and GPU entries (``resolved``),
Mélange buckets as numbers, the engine and ``provenance``. Version 1 files are still read
(:mod:`hetplan.plan.v1`). The schema checked at the edge is :mod:`hetplan.plan.schema`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hetplan.catalog.loader import format_validation, read_yaml_file
from hetplan.errors import InputError
from hetplan.plan.blocks import Verification
from hetplan.plan.docblocks import block_of, scenario_extra_doc, scenario_fields, top_extra_doc, top_fields
from hetplan.plan.docunits import (
    combo_doc,
    combo_of,
    instance_doc,
    instance_of,
    purchase_doc,
    purchase_of,
    summary_doc,
    summary_of,
)
from hetplan.plan.schema import FIX, SCHEMA_VERSION, PlanDoc, PlanMapping, ProvenanceDoc, ResolvedDoc
from hetplan.plan.settings_doc import settings_from_doc, settings_to_doc
from hetplan.plan.types import (
    DEFAULT_ENGINE,
    Plan,
    Price,
    Provenance,
    ResolvedGpu,
    ResolvedModel,
    Slo,
)
from hetplan.plan.v1 import parse_bucket_label, upgrade_v1

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

# --- document order: known keys first in this order, then the rest as written ---------------------------------
_TOP = (
    "schema_version", "kind", "hetplan_version", "strategy", "engine", "scenario", "gpu", "status",
    "total_usd_per_hour", "usd_per_month", "usd_per_million_tokens", "goodput_req_per_s", "tokens_per_usd",
    "output_tokens_per_usd", "gpus_used", "purchase", "combos", "instances", "lower_bound_usd_per_hour",
    "tokens_per_usd_basis", "baselines",
)  # fmt: skip
_TAIL = ("warnings", "verification", "resolved", "provenance")
_SCENARIO = (
    "name", "model", "weight_dtype", "kv_dtype", "goodput_target_req_per_s", "headroom", "demand_req_per_s", "slo",
    "workload", "gpus", "inventory", "prices", "tp_options", "max_ratio", "perf_settings",
)  # fmt: skip


def _ordered(values: Mapping[str, Any], head: tuple[str, ...], tail: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {k: values[k] for k in head if k in values}
    out.update({k: v for k, v in values.items() if k not in out and k not in tail})
    out.update({k: values[k] for k in tail if k in values})
    return out


def to_doc(plan: Plan) -> dict[str, Any]:
    """The plan as a version-2 document (what ``--json`` prints and ``--out`` writes); plain data, stable order.

    ``from_doc(to_doc(p)) == p`` for every plan ``p``.
    """
    scenario: dict[str, Any] = scenario_extra_doc(plan)
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
    top: dict[str, Any] = top_extra_doc(plan)
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
            **({"purchase": [purchase_doc(p) for p in plan.purchase]} if plan.purchase else {}),
            "combos": [combo_doc(c) for c in plan.combos],
            "instances": [instance_doc(t) for t in plan.instances],
            "baselines": {name: summary_doc(s) for name, s in plan.baselines.items()},
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
                **(
                    {"perf_calibration_sha256": plan.provenance.perf_calibration_sha256}
                    if plan.provenance.perf_calibration_sha256
                    else {}
                ),
            },
        }
    )
    if plan.verification is not None:
        top["verification"] = plan.verification.to_doc()
    return _ordered(top, _TOP, _TAIL)


def verification_block(block: Mapping[str, Any], where: str = "the plan's verification") -> Verification:
    """The typed :class:`~hetplan.plan.blocks.Verification` of a verification block as
    :func:`hetplan.sim.verify.verify_plan` returns it (document data).

    Raises:
        InputError: a field of the wrong type (named).
    """
    return block_of(Verification, block, where)


def verification_doc(plan: Plan) -> dict[str, Any]:
    """The plan's verification block as document data (empty when it has none)."""
    return plan.verification.to_doc() if plan.verification is not None else {}


def check_plan(data: Any, where: str = "plan") -> None:
    """Validate a plan document already in memory (see :class:`PlanDoc`).

    Raises:
        InputError: not a mapping, a Hetis deployment spec (nothing to emit or report), or a field later stages
            need is missing, of the wrong type or out of range (named).
    """
    if not isinstance(data, Mapping):
        raise InputError(f"{where} is not a mapping", fix=FIX)
    if data.get("kind") == "hetis-deployment":  # Hetis (issue 7): a spec for an engine that does not exist yet
        raise InputError(
            f"{where} is a Hetis deployment spec, which emitters and reports cannot use",
            "no serving engine runs Hetis today, so there is nothing to emit, and the spec has no cost to report",
            "read the spec itself (JSON/YAML), or plan with --strategy cauchy|homogeneous|melange for emit/report",
        )
    if "schema_version" in data:  # a missing one is named with the other missing fields below
        check_schema_version(data, where, "plan", tuple(range(1, SCHEMA_VERSION + 1)))
    try:
        PlanDoc.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{where} is not a usable hetplan plan", format_validation(exc), FIX) from None


def check_schema_version(data: Mapping[str, Any], where: str, what: str, known: tuple[int, ...]) -> None:
    """Refuse a document whose ``schema_version`` is missing or not one of ``known`` (a file from a newer hetplan,
    or hand-edited), naming the field and the versions this hetplan reads.

    Raises:
        InputError: missing, not a whole number, or not among ``known``.
    """
    version = data.get("schema_version")
    versions = ", ".join(str(v) for v in known)
    if isinstance(version, int) and not isinstance(version, bool) and version in known:
        return
    got = "missing" if version is None else repr(version)
    head = f"{where} has no schema_version" if version is None else f"{where}: schema_version {got} is not known"
    raise InputError(
        f"{head} ({what} schema versions this hetplan knows: {versions})",
        "a file written by a newer hetplan, or edited by hand, may not mean what this version would read",
        f"write it again with this hetplan, or upgrade hetplan to one that knows schema_version {got}"
        if version is not None
        else "write it again with this hetplan",
    )


def from_doc(data: Any, where: str = "plan", catalog: Catalog | None = None) -> Plan:
    """Check a plan document (version 1 or 2) and build the typed :class:`Plan` (``catalog``: what a version-1
    plan's names are resolved in; None: the shipped catalogs).

    Raises:
        InputError: see :func:`check_plan`; for version 1, also a model or GPU that can no longer be resolved.
    """
    check_plan(data, where)
    doc = dict(data)
    if int(doc["schema_version"]) < SCHEMA_VERSION:
        doc = upgrade_v1(doc, where, catalog)
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
        provenance=Provenance(
            prov.hetplan_version, prov.catalog_sha256, prov.workload_sha256, prov.perf_calibration_sha256
        ),
        combos=tuple(combo_of(c) for c in doc.get("combos") or []),
        purchase=tuple(purchase_of(p, f"{where} purchase[{i}]") for i, p in enumerate(doc.get("purchase") or [])),
        instances=tuple(instance_of(t, f"{where} instances[{i}]") for i, t in enumerate(doc.get("instances") or [])),
        baselines={str(k): summary_of(v) for k, v in (doc.get("baselines") or {}).items()},
        warnings=tuple(str(w) for w in doc.get("warnings") or ()),
        engine=str(doc.get("engine", DEFAULT_ENGINE)),
        **top_fields(doc, where),
        **scenario_fields(sc, where),
    )
    unknown = sorted(set(plan.used_gpu_names()) - set(gpus))
    if unknown:
        raise InputError(
            f"{where} deploys {', '.join(unknown)} but its resolved GPU entries do not include them",
            f"resolved: {', '.join(sorted(gpus))}",
            "re-plan instead of editing GPU names by hand",
        )
    return plan


def load_plan(path: str | Path, catalog: Catalog | None = None) -> Plan:
    """Read a plan file (YAML or JSON, version 1 or 2) and return the typed :class:`Plan` (``catalog``: as
    :func:`from_doc`).

    Raises:
        InputError: the file is missing, unreadable, not a plan, or lacks a field that later stages need.
    """
    return from_doc(read_plan_doc(path), str(path), catalog)


def read_plan_doc(path: str | Path) -> dict[str, Any]:
    """A plan file's document, checked (see :func:`check_plan`) but not converted.

    Raises:
        InputError: as :func:`load_plan`.
    """
    doc = read_yaml_file(Path(path), PlanMapping, "plan file", FIX)
    data = doc.model_dump()
    check_plan(data, str(path))
    return data


__all__ = [
    "SCHEMA_VERSION",
    "check_schema_version",
    "PlanDoc",
    "PlanMapping",
    "check_plan",
    "from_doc",
    "load_plan",
    "parse_bucket_label",
    "read_plan_doc",
    "to_doc",
    "upgrade_v1",
    "verification_block",
    "verification_doc",
]
