"""Plans: solve a scenario with every strategy and assemble the typed :class:`~hetplan.plan.types.Plan` of one.

The plan is assembled from the solvers' typed results (:mod:`hetplan.planning.deployed`); nothing is built as a
dict first (:func:`hetplan.plan.doc.to_doc` writes what ``hetplan plan --json`` prints and ``--out`` writes).
Besides the chosen strategy's deployment it carries the other strategies as ``baselines`` and an ``analysis``
block (price sensitivity: the plan's cost and the re-optimised cost when one GPU type's price moves ±20 %; cost
versus goodput target for every strategy), the resolved model and GPU entries and provenance. All numbers are
rounded to fixed significant digits so equal inputs give byte-identical plan files.

The autoscale schedule's deployment is assembled the same way (:func:`hetplan.planning.autoscale.deployment_plan`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from hetplan import __version__
from hetplan.catalog.context import Catalog
from hetplan.errors import InputError
from hetplan.plan.blocks import (
    Analysis,
    GpuFleet,
    HomogeneousBaseline,
    PrefixCache,
    ReuseRate,
    SolverStats,
    WithoutReuse,
)
from hetplan.plan.types import STRATEGIES, Plan, Provenance
from hetplan.planning.baseline_block import baseline_block
from hetplan.planning.deployed import (
    Deployed,
    deployed,
    mixed_solver,
    strategy_result,
)
from hetplan.planning.echo import scenario_fields
from hetplan.planning.owned import owned_doc
from hetplan.planning.solve import Planner, Solved
from hetplan.planning.whatif import cost_vs_goodput, price_sensitivity
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import (
    CandidateSet,
    PlanRequest,
)
from hetplan.solvers.mixed import describe
from hetplan.units import rnd
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
    deferred: list[PlanLater] | None = None,
    catalog_sha: str | None = None,
    lean: bool = False,
) -> Plan:
    """Solve every strategy for ``req`` and return the typed plan of ``strategy``, assembled from the solvers'
    results (:func:`hetplan.plan.doc.to_doc` writes it as the version-2 plan file: the resolved model and GPU
    entries, ``profiled`` naming the profile file each measured GPU came from, and provenance, whose catalog hash
    is ``catalog_sha`` -- default the hash of ``req.catalog``, profile overlays included).
    With ``analysis`` False and a ``deferred`` list, a :class:`PlanLater` is appended to it: the plan whole with
    its analysis block, computed later from this planner (no second solve), for the one plan kept of several (the
    weight-dtype search, the re-size attempts of ``plan --verify``).
    ``lean`` (a named ``strategy`` only): solve that strategy alone (and what it builds on: the mixed strategy
    reads Cauchy's and Mélange's optima), with no baselines, no homogeneous baseline and no per-GPU homogeneous
    fleets: the deployment is the one the full plan gives, for a re-size attempt that only simulates it. Its
    :class:`PlanLater` solves the other strategies on the same planner (the chosen optimum is reused) and
    assembles the plan a full solve gives.

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
    lean = lean and strategy != ALL and not analysis  # the analysis reads every optimum
    if lean:
        step(f"solving the {strategy} plan")
        solved = {strategy: planner.solve(strategy)}
    else:
        step("solving Cauchy, homogeneous, Mélange and mixed plans")
        solved = {name: planner.solve(name) for name in STRATEGIES}

    def assemble(solved: Mapping[str, Solved], lean: bool, with_analysis: bool,
                 report: Callable[[str], None] | None) -> Plan:  # fmt: skip
        """The plan of ``solved`` (every strategy's optimum, or ``lean``: the chosen one's alone), with its
        analysis when asked (``report``: its progress)."""
        step = report or (lambda _: None)
        homo_solved = solved.get("homogeneous")
        by_gpu = (
            homo_solved.by_gpu
            if homo_solved is not None and homo_solved.by_gpu is not None
            else {}
            if lean
            else planner._homogeneous(req)[1]
        )
        picked = cheapest_strategy(solved) if strategy == ALL else strategy
        chosen = solved[picked]
        if chosen.error is not None:
            raise chosen.error
        made = deployed(planner, chosen)
        homo = solved.get("homogeneous")
        baseline = (
            HomogeneousBaseline(status="not solved (a re-size attempt)")
            if homo is None
            else HomogeneousBaseline(status="infeasible", reason=homo.error.why or homo.error.what)
            if homo.error is not None
            else baseline_block(deployed(planner, homo))
        )
        # why owned GPUs sit idle (an SLO search per idle type): for the plan shown, not a re-size attempt's
        owned = None if lean else owned_doc(req, chosen, planner)
        # every restricted optimum's gain with --strategy all; the two original fields otherwise
        gains: dict[str, float | None] = {}
        for name in STRATEGIES if strategy == ALL else ("homogeneous", "melange"):
            other = solved.get(name)
            gain = (
                None
                if other is None or other.error is not None or name == picked or not other.cost
                else 1.0 - chosen.cost / other.cost
            )
            gains[name] = None if gain is None else round(gain, 4) + 0.0
        prefix = None
        if req.prefix_reuse is not None and not lean:  # a re-size attempt is only simulated: no comparison needed
            step("solving again without prefix reuse")
            prefix = prefix_cache_of(req, workload, picked, chosen, made)
        block = analysis_of(planner, picked, chosen, solved, report) if with_analysis else None
        used = set(made.gpus_used) | set(baseline.gpus_used)
        return Plan(
            strategy=picked,
            status=made.status,
            total_usd_per_hour=made.total_usd_per_hour,
            usd_per_month=made.usd_per_month,
            goodput_req_per_s=made.goodput_req_per_s,
            gpus_used=made.gpus_used,
            tokens_per_usd=made.tokens_per_usd,
            output_tokens_per_usd=made.output_tokens_per_usd,
            provenance=Provenance(
                __version__,
                (req.catalog or Catalog.shipped()).sha256 if catalog_sha is None else catalog_sha,
                workload_sha256,
                req.settings.calibration_sha256 or None,
            ),
            combos=made.combos,
            instances=made.instances,
            purchase=made.purchase,
            baselines={name: strategy_result(planner, s) for name, s in solved.items() if name != picked},
            warnings=tuple(warnings) + tuple(text for name, text in gpu_warnings if name in used),
            engine=str(req.settings.engine),  # the engine the plan was made for (its perf_settings say the same)
            gpu_only=made.gpu,
            usd_per_million_tokens=made.usd_per_million_tokens,
            lower_bound_usd_per_hour=made.lower_bound_usd_per_hour,
            tokens_per_usd_basis=TOKENS_BASIS,
            rented_site=made.rented_site,
            sites_tried=made.sites_tried,
            egress_usd_per_hour=made.egress_usd_per_hour,
            assignment=made.assignment,
            strategy_requested=ALL if strategy == ALL else None,
            shape_won=shape_won(picked, chosen, solved) if strategy == ALL else None,
            homogeneous_baseline=baseline,
            homogeneous_by_gpu={str(g): GpuFleet.from_doc(f) for g, f in by_gpu.items()},
            owned_gpus=owned,
            gains=gains,
            solver=solver_stats(req, planner, chosen, solved.get("mixed")),
            prefix_cache=prefix,
            analysis=block,
            **scenario_fields(req, scenario, workload, req, profiled or {}),
        )

    made = assemble(solved, lean, analysis, progress)
    if deferred is not None and not analysis:

        def later(*report: Callable[[str], None] | None, with_analysis: bool = True) -> Plan:
            say = report[0] if report else progress
            if lean:  # a re-size attempt kept: the other strategies on its planner (its own optimum is reused)
                if say is not None:
                    say("solving the other strategies on the same planner")
                return assemble({name: planner.solve(name) for name in STRATEGIES}, False, with_analysis, say)
            if not with_analysis:
                return made
            return replace(made, analysis=analysis_of(planner, made.strategy, solved[made.strategy], solved, say))

        deferred.append(later)
    return made


def solver_stats(req: PlanRequest, planner: Planner, chosen: Solved, mixed: Solved | None) -> SolverStats:
    """The plan's ``solver`` block: backend, the chosen optimum's status and MIP gap, the candidate set and how it
    was pruned, Mélange's buckets and, when the mixed MILP ran, its record."""
    cands = planner.cands
    alloc = chosen.allocation
    return SolverStats(
        backend="HiGHS via PuLP",
        status=alloc.status
        if alloc is not None
        else chosen.melange.status
        if chosen.melange is not None
        else chosen.mixed.status
        if chosen.mixed is not None
        else "optimal",
        mip_gap=rnd(alloc.mip_gap, 4) if alloc and alloc.mip_gap > 1e-9 else 0.0,
        instance_options=len(cands.options),
        combos_enumerated=cands.enumerated,
        combos_in_ilp=len(cands.combos),
        pruning=_pruning_text(req, cands),
        melange_buckets=len(planner.buckets),
        melange_slices_per_bucket=4,
        **({"mixed": mixed_solver(mixed)} if mixed is not None and mixed.milp_size is not None else {}),
    )


def prefix_cache_of(req: PlanRequest, workload: Workload, strategy: str, chosen: Solved, made: Deployed) -> PrefixCache:
    """The plan's typed ``prefix_cache`` record: the reuse sizing assumed (:mod:`hetplan.planning.prefix`), the token
    hit rates of the instance types that prefill in the deployment ``made`` (``plan_token_hit_rate``: combos' prefill
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
    serving = {(c.prefill_gpu, c.prefill_tp) for c in made.combos} | {(i.gpu, i.tp) for i in made.instances}
    reuse = PrefixCache.from_doc(req.prefix_reuse)  # the sizing assumed (hetplan.planning.prefix), as written
    rates = [r for r in reuse.by_instance if (r.gpu, r.tp) in serving]
    # the sizing's fields as written, then the plan's (one block, so it equals the one its plan file reads back as)
    return PrefixCache.model_validate(
        {
            **req.prefix_reuse,
            "plan_token_hit_rate": [ReuseRate(gpu=r.gpu, tp=r.tp, token_hit_rate=r.token_hit_rate) for r in rates],
            "with_reuse_cost_per_hour": rnd(chosen.cost),
            "without_reuse": without,
        }
    )


class PlanLater(Protocol):
    """A plan made whole later from the planner that made it (:func:`build_plan`'s ``deferred``): a lean plan's
    other strategies are solved on that planner and its baselines assembled, and the analysis block is computed
    there (``with_analysis``), so the plan is never solved twice. Called with no positional argument it reports to
    the plan's progress; with one, to that progress function (None: silent)."""

    def __call__(self, *report: Callable[[str], None] | None, with_analysis: bool = True) -> Plan: ...


def analysis_of(
    planner: Planner,
    strategy: str,
    chosen: Solved,
    solved: Mapping[str, Solved],
    progress: Callable[[str], None] | None = None,
) -> Analysis:
    """The plan's ``analysis`` block: price sensitivity and cost versus goodput (what-if solves of every strategy,
    reusing the plan's own optima at today's prices and target)."""
    if progress is not None:
        progress("price sensitivity and cost versus goodput")
    return Analysis(
        price_sensitivity=price_sensitivity(planner, strategy, chosen, solved),
        cost_vs_goodput=cost_vs_goodput(planner, solved),
    )


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


__all__ = [
    "ALL",
    "TOKENS_BASIS",
    "cheapest_strategy",
    "shape_won",
    "PlanLater",
    "analysis_of",
    "build_plan",
    "prefix_cache_of",
    "solver_stats",
]
