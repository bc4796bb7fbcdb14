"""What every plan echoes from its scenario and request (:func:`scenario_fields`): the planner's
:func:`hetplan.planning.document.build_plan` and autoscale's deployment (:mod:`hetplan.planning.autoscale`) take
the same fields from here.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from hetplan.plan.blocks import ClassSlo, DeploymentRules, WanLink, WorkloadSummary
from hetplan.plan.types import Price, ResolvedGpu, ResolvedModel, Slo
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import PlanRequest, deployment_of
from hetplan.units import rnd
from hetplan.workload.classes import classes_doc
from hetplan.workload.model import Workload


def resolved_gpus(req: PlanRequest, profiled: Mapping[str, str]) -> dict[str, ResolvedGpu]:
    """Every candidate GPU entry of ``req`` by name, with its source (a profile file, by name, or the catalog)."""
    return {
        g.name: ResolvedGpu(g, "profile", profiled[g.name]) if g.name in profiled else ResolvedGpu(g) for g in req.gpus
    }


def scenario_fields(
    req: PlanRequest, scenario: Scenario, workload: Workload, target: PlanRequest, profiled: Mapping[str, str]
) -> dict[str, Any]:
    """The :class:`~hetplan.plan.types.Plan` fields every plan echoes from its scenario and request, as keyword
    arguments (the planner's :func:`hetplan.planning.document.build_plan` and autoscale's deployment take the same):
    the name, the resolved model (with its local ``config.json`` path) and GPUs (``profiled``: GPU name -> the
    profile file it was measured in), dtypes, perf settings, SLO, prices, inventory, TP options, the workload
    summary, ``max_ratio``, the goodput target, demand, headroom and the deployment rules every candidate was
    checked against (of ``target``: autoscale's is the peak request), the request classes and the WAN link
    cross-site combos were priced with."""

    spec, wan = req.arch.spec, req.wan
    local = bool(spec.source) and "://" not in spec.source  # read from a local config.json: keep its path
    return {
        "name": str(scenario.name),
        "model": ResolvedModel(spec, "config.json", spec.source) if local else ResolvedModel(spec),
        "weight_dtype": str(req.arch.weight_dtype),
        "kv_dtype": str(req.arch.kv_dtype),
        "gpus": resolved_gpus(req, profiled),
        "settings": req.settings,
        "slo": Slo(float(req.ttft_slo_s), float(req.tpot_slo_s), rnd(req.stats.quantile * 100)),
        "goodput_target_req_per_s": rnd(target.goodput_req_per_s),
        "demand_req_per_s": rnd(target.demand_req_per_s),
        "headroom": float(target.headroom),
        "prices": {g: Price(float(p.usd_per_gpu_hour), str(p.source)) for g, p in sorted(req.prices.items())},
        "inventory": {str(g): int(n) for g, n in sorted(req.inventory.items())},
        "tp_options": tuple(int(t) for t in (req.tp_options or (1, 2, 4, 8))),
        "workload": WorkloadSummary.from_doc(workload.summary()),
        "max_ratio": req.max_ratio,
        # what the deployment rules checked every candidate against (hetplan.deploy_rules); emit deploys with it
        "deployment": DeploymentRules.from_doc(asdict(deployment_of(target))),
        # request classes: each one's SLOs (the plan's slo is the binding, tightest pair)
        "classes": tuple(ClassSlo.from_doc(c) for c in classes_doc(scenario, workload)) if scenario.classes else None,
        # --allow-cross-provider: the WAN link cross-site combos were priced with
        "cross_provider": None
        if wan is None
        else WanLink(wan_gb_per_s=wan.gb_per_s, wan_latency_s=wan.latency_s, egress_usd_per_gb=wan.egress_usd_per_gb),
        "model_config_path": spec.source if local else None,
    }


__all__ = ["resolved_gpus", "scenario_fields"]
