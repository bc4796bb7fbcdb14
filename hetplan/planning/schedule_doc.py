"""The parts of a plan document the autoscale schedule's deployment writes as data
(:func:`hetplan.planning.autoscale.autoscale`, which checks the whole with :func:`hetplan.plan.doc.from_doc`): the
scenario as resolved (:func:`scenario_doc`), the resolved model and GPU entries (:func:`resolved_doc`) and one combo
(:func:`combo_doc`). ``hetplan plan`` itself assembles the typed plan (:mod:`hetplan.planning.document`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from hetplan.plan.docunits import combo_doc as unit_doc
from hetplan.planning.deployed import combo_unit
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import CandidateSet, Combo, PlanRequest, deployment_of
from hetplan.units import rnd
from hetplan.workload.classes import classes_doc
from hetplan.workload.model import Workload


def resolved_doc(req: PlanRequest, profiled: Mapping[str, str]) -> dict[str, Any]:
    """The ``resolved`` block of a plan: the model architecture and every candidate GPU entry, with sources, so
    later stages never look a name up in the catalog again."""
    spec = req.arch.spec
    local = bool(spec.source) and "://" not in spec.source  # read from a local config.json
    model: dict[str, Any] = {"source": "config.json", "path": spec.source} if local else {"source": "catalog"}
    model["spec"] = spec.model_dump(mode="json", exclude_none=True)
    gpus = []
    for g in req.gpus:
        entry: dict[str, Any] = {"source": "profile", "path": profiled[g.name]} if g.name in profiled else {}
        gpus.append((entry or {"source": "catalog"}) | {"spec": g.model_dump(mode="json", exclude_none=True)})
    return {"model": model, "gpus": gpus}


def combo_doc(
    req: PlanRequest, cands: CandidateSet, combo: Combo, count: int, load: float, tokens: float
) -> dict[str, Any]:
    """One combo as a plan file writes it (:func:`hetplan.planning.deployed.combo_unit`, whose docstring says how
    latencies and tokens/USD are predicted)."""
    return unit_doc(combo_unit(req, cands, combo, count, load, tokens))


def scenario_doc(scenario: Scenario, req: PlanRequest, workload: Workload) -> dict[str, Any]:
    """The scenario as resolved (model, dtypes, SLOs, workload summary, prices with sources, settings)."""
    doc: dict[str, Any] = {
        "name": scenario.name,
        "model": req.arch.spec.name,
        "weight_dtype": req.arch.weight_dtype,
        "kv_dtype": req.arch.kv_dtype,
        "goodput_target_req_per_s": rnd(req.goodput_req_per_s),
        "headroom": req.headroom,
        "demand_req_per_s": rnd(req.demand_req_per_s),
        "slo": {"ttft_s": req.ttft_slo_s, "tpot_s": req.tpot_slo_s, "percentile": rnd(req.stats.quantile * 100)},
        "workload": workload.summary(),
        "gpus": [g.name for g in req.gpus],
        "inventory": dict(sorted(req.inventory.items())),
        "prices": {
            name: {"usd_per_gpu_hour": p.usd_per_gpu_hour, "source": p.source} for name, p in sorted(req.prices.items())
        },
        "tp_options": list(req.tp_options),
        "max_ratio": req.max_ratio,
        "perf_settings": _perf_settings_doc(req.settings),
        # what the deployment rules checked every candidate against (hetplan.deploy_rules); emit deploys with it
        "deployment": asdict(deployment_of(req)),
    }
    if scenario.classes:  # request classes: each one's SLOs (the plan's slo is the binding, tightest pair)
        doc["classes"] = classes_doc(scenario, workload)
    if req.wan is not None:  # --allow-cross-provider: the WAN link cross-site combos were priced with
        doc["cross_provider"] = {
            "wan_gb_per_s": req.wan.gb_per_s,
            "wan_latency_s": req.wan.latency_s,
            "egress_usd_per_gb": req.wan.egress_usd_per_gb,
        }
    if req.arch.spec.source and "://" not in req.arch.spec.source:  # read from a local config.json: keep its path
        doc["model_config"] = req.arch.spec.source
    return doc


def _perf_settings_doc(settings: Any) -> dict[str, Any]:
    """The plan's ``perf_settings``: every field, the calibration's corrections and file hash only when a
    calibration file was given (:func:`hetplan.plan.settings_doc.settings_to_doc`; plans without one keep their
    bytes)."""
    from hetplan.plan.settings_doc import settings_to_doc

    doc = asdict(settings)
    calibrated = settings_to_doc(settings)
    for key in ("corrections", "calibration_sha256"):
        if key in calibrated:
            doc[key] = calibrated[key]
        else:
            doc.pop(key)
    return doc


__all__ = ["combo_doc", "resolved_doc", "scenario_doc"]
