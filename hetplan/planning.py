"""Plan documents: solve a scenario with Cauchy, the best homogeneous fleet and Mélange, and write one document.

The document is what ``hetplan plan --json`` prints and ``--out`` writes, and what reports, gates and emitters read;
they never re-solve. Besides the chosen strategy's deployment it carries the other strategies as ``baselines``
and an ``analysis`` block (price sensitivity: the plan's cost and the re-optimised cost when one GPU type's price
moves ±20 %; cost versus goodput target for every strategy). All numbers are rounded to fixed significant digits
so equal inputs give byte-identical documents.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from hetplan import __version__
from hetplan.catalog.pricing import GpuPrice
from hetplan.errors import InfeasibleError, InputError
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import (
    Allocation,
    CandidateSet,
    Combo,
    PlanRequest,
    enumerate_candidates,
    predicted_latency,
    solve_allocation,
)
from hetplan.solvers.melange import Bucket, InstanceType, MelangePlan, instance_types, make_buckets, solve_melange
from hetplan.workload.model import Workload

HOURS_PER_MONTH = 730.0
STRATEGIES = ("cauchy", "homogeneous", "melange")
PRICE_FACTORS = (0.8, 1.2)
GOODPUT_FACTORS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
TOKENS_BASIS = "input+output tokens per USD at the plan's goodput capacity (output_tokens_per_usd: output only)"


def rnd(x: float, digits: int = 6) -> float:
    """Round to ``digits`` significant digits for stable, readable output (0, inf and NaN unchanged)."""
    if x == 0 or not np.isfinite(x):
        return float(x)
    return float(f"{x:.{digits}g}")


@dataclass(frozen=True)
class Solved:
    """One strategy's outcome: an allocation (Cauchy or homogeneous), a Mélange plan, or the infeasibility."""

    strategy: str
    allocation: Allocation | None = None
    melange: MelangePlan | None = None
    gpu: str | None = None
    error: InfeasibleError | None = None

    @property
    def cost(self) -> float:
        if self.allocation is not None:
            return self.allocation.total_usd_per_hour
        if self.melange is not None:
            return self.melange.total_usd_per_hour
        return float("inf")

    @property
    def goodput(self) -> float:
        if self.allocation is not None:
            return self.allocation.goodput_req_per_s
        if self.melange is not None:
            return self.melange.goodput_req_per_s
        return 0.0

    def gpus_used(self) -> dict[str, int]:
        if self.allocation is not None:
            return self.allocation.gpus_used()
        if self.melange is not None:
            return self.melange.gpus_used()
        return {}


class Planner:
    """Solves one request with every strategy; reusable with other prices or demands for the analysis."""

    def __init__(self, req: PlanRequest, token_means: tuple[float, float] | None = None) -> None:
        self.req = req
        # tokens/USD accounting uses the whole workload's mean prompt and output lengths (the capacity model may
        # use a sample of it)
        self.token_means = token_means or (req.stats.mean_prompt, req.stats.mean_output)
        self.cands: CandidateSet = enumerate_candidates(req)
        self.buckets: list[Bucket] = make_buckets(req.stats)
        self._types: list[InstanceType] | None = None

    @property
    def types(self) -> list[InstanceType]:
        if self._types is None:
            self._types = instance_types(self.req, self.buckets)
        return self._types

    def solve(self, strategy: str, prices: dict[str, GpuPrice] | None = None, demand_scale: float = 1.0) -> Solved:
        """Solve ``strategy`` at ``prices`` (default the request's) and demand x ``demand_scale``; what-if
        solves (other prices or demand) skip the fewest-combos tie-break, which never changes the cost."""
        req = self.req
        final = prices is None and demand_scale == 1.0
        if prices is not None or demand_scale != 1.0:
            req = replace(req, prices=prices or req.prices, goodput_req_per_s=req.goodput_req_per_s * demand_scale)
        try:
            if strategy == "cauchy":
                alloc = solve_allocation(req, self._priced(req), "heterogeneous plan", fewest_combos=final)
                return Solved(strategy, allocation=alloc)
            if strategy == "homogeneous":
                return self._homogeneous(req, final)[0]
            if strategy == "melange":
                types = [replace(t, usd_per_hour=t.tp * req.prices[t.gpu].usd_per_gpu_hour) for t in self.types]
                slo = f"TTFT {req.ttft_slo_s:g} s, TPOT {req.tpot_slo_s * 1e3:g} ms"
                plan = solve_melange(types, self.buckets, req.demand_req_per_s, 4, req.inventory, req.time_limit_s, slo)
                return Solved(strategy, melange=plan)
        except InfeasibleError as exc:
            return Solved(strategy, error=exc)
        raise InputError(f"unknown strategy {strategy!r}", f"known: {', '.join(STRATEGIES)}", "pick one of them")

    def _priced(self, req: PlanRequest) -> list[Combo]:
        if req.prices is self.req.prices:
            return list(self.cands.combos)
        price = {g: p.usd_per_gpu_hour for g, p in req.prices.items()}
        return [
            replace(
                c,
                usd_per_hour=c.n_prefill * c.prefill_tp * price[c.prefill_gpu]
                + c.n_decode * c.decode_tp * price[c.decode_gpu],
            )
            for c in self.cands.combos
        ]

    def _homogeneous(self, req: PlanRequest, final: bool = True) -> tuple[Solved, dict[str, Any]]:
        by_gpu: dict[str, Any] = {}
        best: Solved | None = None
        combos = self._priced(req)
        for gpu in sorted({c.prefill_gpu for c in combos if c.homogeneous}):
            own = [c for c in combos if c.prefill_gpu == gpu and c.decode_gpu == gpu]
            try:
                alloc = solve_allocation(req, own, f"{gpu}-only fleet", fewest_combos=final)
            except InfeasibleError as exc:
                by_gpu[gpu] = {"status": "infeasible", "reason": exc.why or exc.what}
                continue
            by_gpu[gpu] = {
                "status": alloc.status,
                "total_usd_per_hour": rnd(alloc.total_usd_per_hour),
                "goodput_req_per_s": rnd(alloc.goodput_req_per_s),
            }
            if best is None or (alloc.total_usd_per_hour, gpu) < (best.cost, best.gpu or ""):
                best = Solved("homogeneous", allocation=alloc, gpu=gpu)
        for spec in req.gpus:
            by_gpu.setdefault(
                spec.name, {"status": "infeasible", "reason": "no single-type combo of this GPU meets the SLOs"}
            )
        if best is None:
            error = InfeasibleError(
                "no single GPU type can meet the target alone under the SLOs and inventory",
                "; ".join(f"{g}: {v['reason']}" for g, v in sorted(by_gpu.items())),
                "use the heterogeneous plan, add inventory or relax the SLOs",
            )
            return Solved("homogeneous", error=error), dict(sorted(by_gpu.items()))
        return best, dict(sorted(by_gpu.items()))


def build_plan(
    req: PlanRequest,
    scenario: Scenario,
    workload: Workload,
    warnings: list[str],
    gpu_warnings: list[tuple[str, str]],
    strategy: str = "cauchy",
    analysis: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Solve every strategy for ``req`` and return the plan document of ``strategy``.

    Raises:
        InputError: unknown strategy. InfeasibleError: the chosen strategy has no feasible plan (its message
        names the binding constraint); infeasible baselines are recorded, not raised.
    """
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}", f"known: {', '.join(STRATEGIES)}", "pick one of them")
    step = progress or (lambda _: None)
    step("enumerating combos")
    planner = Planner(req, (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean())))
    step("solving Cauchy, homogeneous and Mélange plans")
    solved = {name: planner.solve(name) for name in STRATEGIES}
    _, by_gpu = planner._homogeneous(req)
    chosen = solved[strategy]
    if chosen.error is not None:
        raise chosen.error
    doc: dict[str, Any] = {
        "schema_version": 1,
        "kind": "plan",
        "hetplan_version": __version__,
        "strategy": strategy,
        "scenario": scenario_doc(scenario, req, workload),
    }
    doc.update(solved_doc(planner, chosen))
    doc["tokens_per_usd_basis"] = TOKENS_BASIS
    doc["baselines"] = {name: summary_doc(planner, s) for name, s in solved.items() if name != strategy}
    homo = solved["homogeneous"]
    doc["homogeneous_baseline"] = (
        {"status": "infeasible", "reason": homo.error.why or homo.error.what}
        if homo.error is not None
        else solved_doc(planner, homo)
    )
    doc["homogeneous_by_gpu"] = by_gpu
    for name in ("homogeneous", "melange"):
        other = solved[name]
        gain = None if other.error is not None or name == strategy else 1.0 - chosen.cost / other.cost
        doc[f"gain_over_{name}"] = None if gain is None else round(gain, 4) + 0.0
    cands = planner.cands
    doc["solver"] = {
        "backend": "HiGHS via PuLP",
        "status": chosen.allocation.status if chosen.allocation is not None else "optimal",
        "mip_gap": rnd(chosen.allocation.mip_gap, 4) if chosen.allocation and chosen.allocation.mip_gap > 1e-9 else 0.0,
        "instance_options": len(cands.options),
        "combos_enumerated": cands.enumerated,
        "combos_in_ilp": len(cands.combos),
        "pruning": _pruning_text(req, cands),
        "melange_buckets": len(planner.buckets),
        "melange_slices_per_bucket": 4,
    }
    if analysis:
        step("price sensitivity and cost versus goodput")
        doc["analysis"] = {
            "price_sensitivity": _price_sensitivity(planner, strategy, chosen),
            "cost_vs_goodput": _cost_vs_goodput(planner),
        }
    used = set(doc["gpus_used"]) | set(doc["homogeneous_baseline"].get("gpus_used", {}))
    doc["warnings"] = warnings + [text for name, text in gpu_warnings if name in used]
    return doc


def _pruning_text(req: PlanRequest, cands: CandidateSet) -> str:
    text = (
        "exact (dominated combos removed)"
        if cands.exact
        else f"heuristic (over {req.max_ilp_combos} non-dominated combos; best tokens/USD kept)"
    )
    if req.keep_pairs is None:
        return text
    het = len(req.gpus) * (len(req.gpus) - 1)
    kept = sum(1 for p, d in req.keep_pairs if p != d)
    return f"A1/A2 fit kept {kept} of {het} heterogeneous GPU pairs and every homogeneous one (heuristic), then {text}"


def _tokens(means: tuple[float, float], goodput: float, cost: float) -> tuple[float, float]:
    if cost <= 0:
        return 0.0, 0.0
    both = 3600 * goodput * (means[0] + means[1]) / cost
    return rnd(both), rnd(3600 * goodput * means[1] / cost)


def summary_doc(planner: Planner, s: Solved) -> dict[str, Any]:
    """Cost, capacity, tokens/USD and GPUs of one strategy's outcome (or why it is infeasible)."""
    if s.error is not None:
        return {"status": "infeasible", "reason": s.error.why or s.error.what}
    both, out = _tokens(planner.token_means, s.goodput, s.cost)
    doc: dict[str, Any] = {
        "status": "optimal",
        "total_usd_per_hour": rnd(s.cost),
        "goodput_req_per_s": rnd(s.goodput),
        "tokens_per_usd": both,
        "output_tokens_per_usd": out,
        "gpus_used": s.gpus_used(),
    }
    if s.gpu is not None:
        doc["gpu"] = s.gpu
    if s.melange is not None:
        doc["lower_bound_usd_per_hour"] = rnd(s.melange.lower_bound_usd_per_hour)
    return doc


def solved_doc(planner: Planner, s: Solved) -> dict[str, Any]:
    """The full deployment part of a plan document for one strategy's outcome."""
    req = planner.req
    both, out = _tokens(planner.token_means, s.goodput, s.cost)
    tokens_per_req = sum(planner.token_means)
    doc: dict[str, Any] = {}
    if s.gpu is not None:
        doc["gpu"] = s.gpu
    doc.update(
        {
            "status": "optimal" if s.melange is not None else s.allocation.status if s.allocation else "infeasible",
            "total_usd_per_hour": rnd(s.cost),
            "usd_per_month": rnd(s.cost * HOURS_PER_MONTH),
            "usd_per_million_tokens": rnd(s.cost / (3600 * s.goodput * tokens_per_req) * 1e6) if s.goodput else None,
            "goodput_req_per_s": rnd(s.goodput),
            "tokens_per_usd": both,
            "output_tokens_per_usd": out,
            "gpus_used": s.gpus_used(),
            "combos": [],
            "instances": [],
        }
    )
    if s.allocation is not None:
        alloc = s.allocation
        for combo, count in alloc.combos:
            # goodput-weighted round robin: each copy carries the target times its share of the capacity
            load = req.goodput_req_per_s * combo.goodput_req_per_s / alloc.goodput_req_per_s
            doc["combos"].append(combo_doc(req, planner.cands, combo, count, load, sum(planner.token_means)))
    if s.melange is not None:
        doc["instances"] = _melange_instances(s.melange)
        doc["lower_bound_usd_per_hour"] = rnd(s.melange.lower_bound_usd_per_hour)
    return doc


def combo_doc(
    req: PlanRequest, cands: CandidateSet, combo: Combo, count: int, load: float, tokens: float
) -> dict[str, Any]:
    """One combo's part of a plan document; latencies predicted with one copy carrying ``load`` req/s and
    tokens/USD from ``tokens`` (mean prompt + output tokens per request)."""
    lat = predicted_latency(req, cands, combo, load)
    return {
        "prefill_gpu": combo.prefill_gpu,
        "prefill_tp": combo.prefill_tp,
        "n_prefill": combo.n_prefill,
        "decode_gpu": combo.decode_gpu,
        "decode_tp": combo.decode_tp,
        "n_decode": combo.n_decode,
        "count": count,
        "usd_per_hour": rnd(combo.usd_per_hour),
        "goodput_req_per_s": rnd(combo.goodput_req_per_s),
        "tokens_per_usd": rnd(3600 * combo.goodput_req_per_s * tokens / combo.usd_per_hour),
        "bound_by": combo.bound_by,
        "prefill_capacity_req_per_s": rnd(combo.prefill_rate_per_instance),
        "decode_capacity_req_per_s": rnd(combo.decode_rate_per_instance),
        "kv_transfer_capacity_req_per_s": rnd(combo.kv_transfer_rate),
        "decode_batch": combo.decode_batch,
        "predicted_ttft_s": rnd(lat["ttft_s"], 4),
        "predicted_tpot_s": rnd(lat["tpot_s"], 4),
        "utilization": rnd(lat["utilization"], 4),
    }


def _melange_instances(plan: MelangePlan) -> list[dict[str, Any]]:
    load = plan.type_load()
    rows = []
    for g, (t, n) in enumerate(zip(plan.types, plan.counts, strict=True)):
        if not n:
            continue
        served: dict[str, float] = {}
        for b, row in enumerate(plan.assignment):
            if row[g]:
                label = plan.buckets[b].label
                served[label] = served.get(label, 0.0) + plan.buckets[b].share * row[g] / plan.slices
        rows.append(
            {
                "role": "aggregated",
                "gpu": t.gpu,
                "tp": t.tp,
                "count": n,
                "usd_per_hour": rnd(t.usd_per_hour),
                "utilization": rnd(load[g] / n, 4),
                "traffic_share": rnd(sum(served.values()), 4),
                "buckets": {label: rnd(share, 4) for label, share in sorted(served.items())},
            }
        )
    return rows


def _price_sensitivity(planner: Planner, strategy: str, chosen: Solved) -> list[dict[str, Any]]:
    req = planner.req
    used = chosen.gpus_used()
    rows = []
    for gpu in sorted(req.prices):
        for factor in PRICE_FACTORS:
            prices = dict(req.prices)
            prices[gpu] = replace(req.prices[gpu], usd_per_gpu_hour=req.prices[gpu].usd_per_gpu_hour * factor)
            same = sum(n * prices[g].usd_per_gpu_hour for g, n in used.items())
            best = {name: planner.solve(name, prices) for name in STRATEGIES}
            rows.append(
                {
                    "gpu": gpu,
                    "price_factor": factor,
                    "plan_usd_per_hour": rnd(same),
                    "replanned_usd_per_hour": rnd(best[strategy].cost) if best[strategy].error is None else None,
                    "replanned_gpus_used": best[strategy].gpus_used(),
                    "best_alternative": min((s.cost, n) for n, s in best.items() if n != strategy)[1]
                    if any(s.error is None for n, s in best.items() if n != strategy)
                    else None,
                    "best_alternative_usd_per_hour": rnd(min(s.cost for n, s in best.items() if n != strategy))
                    if any(s.error is None for n, s in best.items() if n != strategy)
                    else None,
                }
            )
    return rows


def _cost_vs_goodput(planner: Planner) -> list[dict[str, Any]]:
    rows = []
    for factor in GOODPUT_FACTORS:
        row: dict[str, Any] = {"goodput_req_per_s": rnd(planner.req.goodput_req_per_s * factor)}
        for name in STRATEGIES:
            s = planner.solve(name, demand_scale=factor)
            row[f"{name}_usd_per_hour"] = rnd(s.cost) if s.error is None else None
        rows.append(row)
    return rows


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
        "perf_settings": asdict(req.settings),
    }
    if req.arch.spec.source and "://" not in req.arch.spec.source:  # read from a local config.json: keep its path
        doc["model_config"] = req.arch.spec.source
    return doc


__all__ = ["STRATEGIES", "Planner", "build_plan", "rnd", "scenario_doc", "solved_doc", "summary_doc"]
