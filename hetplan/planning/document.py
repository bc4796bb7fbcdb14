"""Plan documents: solve a scenario with every strategy and write one document.

The document is what ``hetplan plan --json`` prints and ``--out`` writes, and what :func:`hetplan.plan.doc.from_doc`
makes the typed plan. Besides the chosen strategy's deployment it carries the other strategies as ``baselines``
and an ``analysis`` block (price sensitivity: the plan's cost and the re-optimised cost when one GPU type's price
moves ±20 %; cost versus goodput target for every strategy), the resolved model and GPU entries and provenance.
All numbers are rounded to fixed significant digits so equal inputs give byte-identical documents.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from typing import Any

from hetplan import __version__
from hetplan.catalog.context import Catalog
from hetplan.errors import InputError
from hetplan.plan.blocks import PrefixCache, ReuseRate, WithoutReuse
from hetplan.plan.doc import SCHEMA_VERSION
from hetplan.plan.types import STRATEGIES
from hetplan.planning.deployment_doc import combo_doc, mixed_solver_doc, solved_doc, summary_doc
from hetplan.planning.owned import owned_doc
from hetplan.planning.solve import Planner, Solved
from hetplan.planning.whatif import cost_vs_goodput, price_sensitivity
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import (
    CandidateSet,
    PlanRequest,
    deployment_of,
)
from hetplan.solvers.mixed import describe
from hetplan.units import rnd
from hetplan.workload.classes import classes_doc
from hetplan.workload.model import Workload

TOKENS_BASIS = "input+output tokens per USD at the plan's goodput capacity (output_tokens_per_usd: output only)"


def build_plan(
    req: PlanRequest,
    scenario: Scenario,
    workload: Workload,
    warnings: list[str],
    gpu_warnings: list[tuple[str, str]],
    strategy: str = "cauchy",
    analysis: bool = True,
    progress: Callable[[str], None] | None = None,
    profiled: Mapping[str, str] | None = None,
    workload_sha256: str | None = None,
    deferred: list[AnalysisLater] | None = None,
    catalog_sha: str | None = None,
    lean: bool = False,
) -> dict[str, Any]:
    """Solve every strategy for ``req`` and return the plan document of ``strategy`` (version 2: the resolved
    model and GPU entries, ``profiled`` naming the profile file each measured GPU came from, and provenance,
    whose catalog hash is ``catalog_sha`` -- default the hash of ``req.catalog``, profile overlays included; see
    :mod:`hetplan.plan.doc`, whose :func:`~hetplan.plan.doc.from_doc` makes it a typed plan).
    With ``analysis`` False and a ``deferred`` list, a function that computes the analysis block later
    (:data:`AnalysisLater`: from this planner, no second solve; its argument replaces ``progress``) (for
    the one plan kept of several, e.g. the weight-dtype search) is appended to it.
    ``lean`` (a named ``strategy`` only): solve that strategy alone (and what it builds on: the mixed strategy
    reads Cauchy's and Mélange's optima), with no baselines, no homogeneous baseline and no per-GPU homogeneous
    fleets: the deployment is the one the full document gives, for a re-size attempt that only simulates it.

    Raises:
        InputError: unknown strategy. InfeasibleError: the chosen strategy has no feasible plan (its message
        names the binding constraint); infeasible baselines are recorded, not raised.
    """
    if strategy not in (*STRATEGIES, ALL):
        raise InputError(
            f"unknown strategy {strategy!r}", f"known: {', '.join((ALL, *STRATEGIES))}", "pick one of them"
        )
    step = progress or (lambda _: None)
    step("enumerating combos")
    planner = Planner(req, (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean())))
    lean = lean and strategy != ALL and not analysis and deferred is None  # the analysis reads every optimum
    if lean:
        step(f"solving the {strategy} plan")
        solved = {strategy: planner.solve(strategy)}
    else:
        step("solving Cauchy, homogeneous, Mélange and mixed plans")
        solved = {name: planner.solve(name) for name in STRATEGIES}
    homo_solved = solved.get("homogeneous")
    by_gpu = (
        homo_solved.by_gpu
        if homo_solved is not None and homo_solved.by_gpu is not None
        else {}
        if lean
        else planner._homogeneous(req)[1]
    )
    requested = strategy
    if strategy == ALL:
        strategy = cheapest_strategy(solved)
    chosen = solved[strategy]
    if chosen.error is not None:
        raise chosen.error
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "plan",
        "hetplan_version": __version__,
        "strategy": strategy,
        "engine": req.settings.engine,  # the engine the plan was made for (its perf_settings say the same)
        "scenario": scenario_doc(scenario, req, workload),
    }
    doc.update(solved_doc(planner, chosen))
    doc["tokens_per_usd_basis"] = TOKENS_BASIS
    if requested == ALL:
        doc["strategy_requested"] = ALL
        doc["shape_won"] = shape_won(strategy, chosen, solved)
    doc["baselines"] = {name: summary_doc(planner, s) for name, s in solved.items() if name != strategy}
    homo = solved.get("homogeneous")
    doc["homogeneous_baseline"] = (
        {"status": "not solved (a re-size attempt)"}
        if homo is None
        else {"status": "infeasible", "reason": homo.error.why or homo.error.what}
        if homo.error is not None
        else solved_doc(planner, homo)
    )
    doc["homogeneous_by_gpu"] = by_gpu
    # why owned GPUs sit idle (an SLO search per idle type): for the plan shown, not a re-size attempt's
    owned = None if lean else owned_doc(req, chosen, planner)
    if owned is not None:
        doc["owned_gpus"] = {gpu: row.to_doc() for gpu, row in owned.items()}
    # every restricted optimum's gain with --strategy all; the two original fields otherwise
    for name in STRATEGIES if requested == ALL else ("homogeneous", "melange"):
        other = solved.get(name)
        gain = (
            None
            if other is None or other.error is not None or name == strategy or not other.cost
            else 1.0 - chosen.cost / other.cost
        )
        doc[f"gain_over_{name}"] = None if gain is None else round(gain, 4) + 0.0
    cands = planner.cands
    doc["solver"] = {
        "backend": "HiGHS via PuLP",
        "status": chosen.allocation.status
        if chosen.allocation is not None
        else chosen.melange.status
        if chosen.melange is not None
        else chosen.mixed.status
        if chosen.mixed is not None
        else "optimal",
        "mip_gap": rnd(chosen.allocation.mip_gap, 4) if chosen.allocation and chosen.allocation.mip_gap > 1e-9 else 0.0,
        "instance_options": len(cands.options),
        "combos_enumerated": cands.enumerated,
        "combos_in_ilp": len(cands.combos),
        "pruning": _pruning_text(req, cands),
        "melange_buckets": len(planner.buckets),
        "melange_slices_per_bucket": 4,
    }
    if "mixed" in solved and solved["mixed"].milp_size is not None:
        doc["solver"]["mixed"] = mixed_solver_doc(solved["mixed"])
    if req.prefix_reuse is not None and not lean:  # a re-size attempt is only simulated: no comparison needed
        step("solving again without prefix reuse")
        doc["prefix_cache"] = prefix_cache_doc(req, workload, strategy, chosen, doc).to_doc()
    if analysis:
        doc["analysis"] = analysis_of(planner, strategy, chosen, solved, progress)
    elif deferred is not None:
        deferred.append(lambda report=progress: analysis_of(planner, strategy, chosen, solved, report))
    used = set(doc["gpus_used"]) | set(doc["homogeneous_baseline"].get("gpus_used", {}))
    doc["warnings"] = warnings + [text for name, text in gpu_warnings if name in used]
    doc["resolved"] = resolved_doc(req, profiled or {})
    doc["provenance"] = {
        "hetplan_version": __version__,
        "catalog_sha256": (req.catalog or Catalog.shipped()).sha256 if catalog_sha is None else catalog_sha,
        "workload_sha256": workload_sha256,
        **({"perf_calibration_sha256": req.settings.calibration_sha256} if req.settings.calibration_sha256 else {}),
    }
    return doc


def prefix_cache_doc(
    req: PlanRequest, workload: Workload, strategy: str, chosen: Solved, doc: dict[str, Any]
) -> PrefixCache:
    """The plan's typed ``prefix_cache`` record: the reuse sizing assumed (:mod:`hetplan.planning.prefix`), the token
    hit rates of the instance types that prefill in the plan ``doc`` (``plan_token_hit_rate``: combos' prefill
    instances and aggregated instances), and ``strategy`` solved again with every prompt computed whole
    (``without_reuse``: its $/h, GPUs and how much more it costs; its error's reason when no plan meets the target
    then)."""
    assert req.prefix_reuse is not None
    plain = replace(
        req,
        stats=replace(req.stats, prefill_reuse=None),
        arrivals=None if req.arrivals is None else replace(req.arrivals, prefill_reuse=None),
        prefix_reuse=None,
    )
    other = Planner(plain, (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean()))).solve(strategy)
    if other.error is not None:
        without = WithoutReuse(status="infeasible", reason=other.error.why or other.error.what)
    else:
        without = WithoutReuse(
            cost_per_hour=rnd(other.cost),
            gpus_used=dict(sorted(other.gpus_used().items())),
            extra_cost=rnd(other.cost / chosen.cost - 1.0, 4) if chosen.cost else None,
        )
    serving = {(c["prefill_gpu"], c["prefill_tp"]) for c in doc.get("combos") or []}
    serving |= {(i["gpu"], i["tp"]) for i in doc.get("instances") or []}
    reuse = PrefixCache.from_doc(req.prefix_reuse)  # the sizing assumed (hetplan.planning.prefix), as written
    rates = [r for r in reuse.by_instance if (r.gpu, r.tp) in serving]
    return reuse.with_(
        plan_token_hit_rate=[ReuseRate(gpu=r.gpu, tp=r.tp, token_hit_rate=r.token_hit_rate) for r in rates],
        with_reuse_cost_per_hour=rnd(chosen.cost),
        without_reuse=without,
    )


AnalysisLater = Callable[..., dict[str, Any]]
"""A plan's analysis block computed later from the planner that made the plan (:func:`build_plan`'s ``deferred``):
called with no argument it reports to the plan's progress; with one, to that progress function (None: silent)."""


def analysis_of(
    planner: Planner,
    strategy: str,
    chosen: Solved,
    solved: Mapping[str, Solved],
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The plan's ``analysis`` block: price sensitivity and cost versus goodput (what-if solves of every strategy,
    reusing the plan's own optima at today's prices and target)."""
    if progress is not None:
        progress("price sensitivity and cost versus goodput")
    return {
        "price_sensitivity": price_sensitivity(planner, strategy, chosen, solved),
        "cost_vs_goodput": cost_vs_goodput(planner, solved),
    }


ALL = "all"
"""``--strategy all``: every strategy is solved and the cheapest restricted optimum is the plan."""


def cheapest_strategy(solved: Mapping[str, Solved]) -> str:
    """The strategy whose optimum costs least (ties: the order of :data:`STRATEGIES`, Cauchy first), or Cauchy
    when none is feasible (its error is then raised)."""
    feasible = [(s.cost, i, name) for i, (name, s) in enumerate(solved.items()) if s.error is None]
    return min(feasible)[2] if feasible else STRATEGIES[0]


def shape_won(strategy: str, chosen: Solved, solved: Mapping[str, Solved]) -> str:
    """One sentence: which deployment shape won and by how much over the others."""
    shape = {
        "cauchy": "prefill/decode combos (Cauchy)"
        + (
            ", over one GPU type at this optimum"
            if chosen.allocation is not None and all(c.homogeneous for c, _ in chosen.allocation.combos)
            else ", over mixed GPU types"
        ),
        "homogeneous": f"prefill/decode combos on one GPU type ({chosen.gpu})",
        "melange": "aggregated instances routed by prompt length (Mélange's size buckets)",
        "mixed": "aggregated instances and prefill/decode combos in one MILP, routed by prompt length ("
        + (describe(chosen.mixed) if chosen.mixed is not None else "")
        + ")",
    }[strategy]
    others = []
    for name, s in solved.items():
        if name == strategy:
            continue
        if s.error is not None:
            others.append(f"{name} is infeasible")
        elif abs(s.cost - chosen.cost) <= 1e-9 * max(1.0, s.cost):
            others.append(f"{name} costs the same (ties go to the order cauchy, homogeneous, melange, mixed)")
        else:
            more = f"{(s.cost / chosen.cost - 1) * 100:.1f} % more" if chosen.cost else f"${s.cost:.2f}/h"
            others.append(f"{name} costs {more}")
    return f"{shape} won at ${chosen.cost:.2f}/h; " + ", ".join(others)


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


def _pruning_text(req: PlanRequest, cands: CandidateSet) -> str:
    text = (
        "exact (dominated combos removed)"
        if cands.exact
        else f"heuristic (over {req.max_ilp_combos} non-dominated combos; best tokens/USD kept)"
    )
    if req.wan is not None and req.wan.egress_usd_per_gb > 0 and any(c.cross_site for c in cands.combos):
        # a dominating cross-site combo with more goodput pays more egress (cauchy.cross_site_combos)
        text += "; cross-site combos pruned by dominance, a heuristic with egress > 0"
    if req.keep_pairs is None:
        return text
    het = len(req.gpus) * (len(req.gpus) - 1)
    kept = sum(1 for p, d in req.keep_pairs if p != d)
    return f"A1/A2 fit kept {kept} of {het} heterogeneous GPU pairs and every homogeneous one (heuristic), then {text}"


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


__all__ = [
    "ALL",
    "TOKENS_BASIS",
    "cheapest_strategy",
    "shape_won",
    "build_plan",
    "combo_doc",
    "resolved_doc",
    "scenario_doc",
    "solved_doc",
    "summary_doc",
]
