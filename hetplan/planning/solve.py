"""Every strategy's solver behind one registry.

:class:`Planner` enumerates one request's candidates once and solves any strategy of :data:`SOLVERS` at other
prices or demand; the what-if solves of a plan's analysis (price sensitivity, cost versus goodput target) are in
:mod:`hetplan.planning.whatif`. The plan document is assembled in :mod:`hetplan.planning.document`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from hetplan.budget import check_fleet, fewest_gpus
from hetplan.catalog.offers import scale_offers
from hetplan.catalog.pricing import GpuPrice
from hetplan.errors import InfeasibleError, InputError
from hetplan.plan.types import STRATEGIES
from hetplan.solvers.cauchy import (
    Allocation,
    CandidateSet,
    Combo,
    PlanRequest,
    solve_allocation,
)
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from hetplan.solvers.melange import (
    Bucket,
    InstanceType,
    MelangePlan,
    instance_types,
    make_buckets,
    solve_melange,
    solve_melange_purchased,
)
from hetplan.solvers.mixed import (
    BucketCombo,
    MixedPlan,
    bucket_combos,
    combo_columns,
    mixed_size,
    repriced,
    solve_mixed,
)
from hetplan.solvers.packing import Purchased
from hetplan.units import rnd


@dataclass(frozen=True)
class Solved:
    """One strategy's outcome: an allocation (Cauchy or homogeneous), a Mélange plan, or the infeasibility."""

    strategy: str
    allocation: Allocation | None = None
    melange: MelangePlan | None = None
    gpu: str | None = None
    error: InfeasibleError | None = None
    mixed: MixedPlan | None = None
    note: str | None = None
    milp_size: dict[str, int] | None = None
    #: the homogeneous solve's outcome per GPU type (its cheapest single-type fleet, or why none holds the target):
    #: set by that solve at the request's own prices and demand, None otherwise
    by_gpu: dict[str, Any] | None = None

    @property
    def cost(self) -> float:
        if self.allocation is not None:
            return self.allocation.total_usd_per_hour
        if self.melange is not None:
            return self.melange.total_usd_per_hour
        if self.mixed is not None:
            return self.mixed.total_usd_per_hour
        return float("inf")

    @property
    def goodput(self) -> float:
        if self.allocation is not None:
            return self.allocation.goodput_req_per_s
        if self.melange is not None:
            return self.melange.goodput_req_per_s
        if self.mixed is not None:
            return self.mixed.goodput_req_per_s
        return 0.0

    @property
    def purchase(self) -> Purchased | None:
        """What the deployment buys (None for plans priced per GPU-hour, without offers)."""
        if self.allocation is not None:
            return self.allocation.purchase
        if self.melange is not None:
            return self.melange.purchase
        if self.mixed is not None:
            return self.mixed.purchase
        return None

    def gpus_used(self) -> dict[str, int]:
        if self.allocation is not None:
            return self.allocation.gpus_used()
        if self.melange is not None:
            return self.melange.gpus_used()
        if self.mixed is not None:
            return self.mixed.gpus_used()
        return {}


class Planner:
    """Solves one request with every strategy; reusable with other prices or demands for the analysis.

    Raises (on construction):
        WorkBudgetError: the target needs more than :data:`hetplan.budget.MAX_FLEET_GPUS` GPUs
        (:func:`hetplan.budget.fewest_gpus`).
    """

    def __init__(self, req: PlanRequest, token_means: tuple[float, float] | None = None) -> None:
        self.req = req
        # tokens/USD accounting uses the whole workload's mean prompt and output lengths (the capacity model may
        # use a sample of it)
        self.token_means = token_means or (req.stats.mean_prompt, req.stats.mean_output)
        self.cands: CandidateSet = enumerate_candidates(req)
        check_fleet(
            f"the goodput target {req.goodput_req_per_s:,.6g} req/s (x {1 + req.headroom:g} headroom)",
            fewest_gpus(self.cands.combos, req.demand_req_per_s),
            "plan a lower goodput_req_per_s (or split the traffic into several scenarios)",
        )
        self.buckets: list[Bucket] = make_buckets(req.stats)
        self._types: list[InstanceType] | None = None
        self._bucket_combos: list[BucketCombo] | None = None
        self._solved: dict[tuple[Any, ...], Solved] = {}

    @property
    def types(self) -> list[InstanceType]:
        if self._types is None:
            self._types = instance_types(self.req, self.buckets)
        return self._types

    @property
    def bucket_combos(self) -> list[BucketCombo]:
        """The combos the mixed strategy may use, with per-bucket capacities
        (:func:`hetplan.solvers.mixed.bucket_combos`)."""
        if self._bucket_combos is None:
            self._bucket_combos = bucket_combos(self.req, self.cands, self.buckets)
        return self._bucket_combos

    def solve(self, strategy: str, prices: dict[str, GpuPrice] | None = None, demand_scale: float = 1.0) -> Solved:
        """Solve ``strategy`` at ``prices`` (default the request's) and demand x ``demand_scale``; what-if
        solves (other prices or demand) skip the fewest-combos tie-break, which never changes the cost."""
        req = self.req
        final = prices is None and demand_scale == 1.0
        if prices is not None or demand_scale != 1.0:
            factors = {
                g: p.usd_per_gpu_hour / req.prices[g].usd_per_gpu_hour
                for g, p in (prices or {}).items()
                if g in req.prices and req.prices[g].usd_per_gpu_hour > 0 and p is not req.prices[g]
            }
            req = replace(
                req,
                prices=prices or req.prices,
                goodput_req_per_s=req.goodput_req_per_s * demand_scale,
                offers=scale_offers(req.offers, factors),
            )
        solver = SOLVERS.get(strategy)
        if solver is None:
            raise InputError(f"unknown strategy {strategy!r}", f"known: {', '.join(STRATEGIES)}", "pick one of them")
        # equal prices and demand give equal answers: each is solved once (the mixed strategy reads Cauchy's and
        # Mélange's optimum at the same prices and demand)
        key = (strategy, demand_scale, tuple(sorted((g, p.usd_per_gpu_hour) for g, p in (prices or {}).items())),
               prices is None)  # fmt: skip
        if key in self._solved:
            return self._solved[key]
        try:
            out = solver(self, req, final, prices, demand_scale)
        except InfeasibleError as exc:
            out = Solved(strategy, error=exc)
        self._solved[key] = out
        return out

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
                # what failed and why ("no purchase can hold the L40S-only fleet: tried ... owned inventory ...")
                by_gpu[gpu] = {"status": "infeasible", "reason": f"{exc.what}: {exc.why}" if exc.why else exc.what}
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


class Solver(Protocol):
    """A strategy's solver: the cheapest deployment of ``req`` (its prices and demand) with the planner's
    candidates; ``final`` is False for what-if solves, which may skip cost-neutral tie-breaks. ``prices`` and
    ``demand_scale`` are the what-if arguments ``req`` was made with (:meth:`Planner.solve`), for a solver that
    builds on other strategies' optima at the same prices and demand. A solver returns what it found and changes
    nothing in the planner beyond its caches.

    Raises:
        InfeasibleError: no deployment of this shape meets the target (the message names the binding constraint).
    """

    def __call__(
        self,
        planner: Planner,
        req: PlanRequest,
        final: bool,
        prices: dict[str, GpuPrice] | None = None,
        demand_scale: float = 1.0,
    ) -> Solved: ...


def _solve_cauchy(
    planner: Planner,
    req: PlanRequest,
    final: bool,
    prices: dict[str, GpuPrice] | None = None,
    demand_scale: float = 1.0,
) -> Solved:
    """Cauchy: prefill/decode combos over every GPU pair, one MILP (:func:`hetplan.solvers.cauchy.solve_allocation`)."""
    alloc = solve_allocation(req, planner._priced(req), "heterogeneous plan", fewest_combos=final)
    return Solved("cauchy", allocation=alloc)


def _solve_homogeneous(
    planner: Planner,
    req: PlanRequest,
    final: bool,
    prices: dict[str, GpuPrice] | None = None,
    demand_scale: float = 1.0,
) -> Solved:
    """The cheapest single-GPU-type fleet of combos; at the request's own prices and demand (``final``) with every
    GPU type's outcome (``by_gpu``)."""
    best, by_gpu = planner._homogeneous(req, final)
    return replace(best, by_gpu=by_gpu) if final else best


def _solve_melange(
    planner: Planner,
    req: PlanRequest,
    final: bool,
    prices: dict[str, GpuPrice] | None = None,
    demand_scale: float = 1.0,
) -> Solved:
    """Mélange: aggregated instances serving request-size bucket slices (see ``solvers.melange.solve_melange``)."""
    types = [replace(t, usd_per_hour=t.tp * req.prices[t.gpu].usd_per_gpu_hour) for t in planner.types]
    slo = f"TTFT {req.ttft_slo_s:g} s, TPOT {req.tpot_slo_s * 1e3:g} ms"
    if req.offers:
        return Solved("melange", melange=solve_melange_purchased(types, planner.buckets, req, 4, slo))
    plan = solve_melange(types, planner.buckets, req.demand_req_per_s, 4, req.inventory, req.time_limit_s, slo,
                         req.solve)  # fmt: skip
    return Solved("melange", melange=plan)


def _solve_mixed(
    planner: Planner,
    req: PlanRequest,
    final: bool,
    prices: dict[str, GpuPrice] | None = None,
    demand_scale: float = 1.0,
) -> Solved:
    """Aggregated instances and combos in one MILP, requests assigned by size bucket
    (:func:`hetplan.solvers.mixed.solve_mixed`), over the Cauchy optimum's combos plus the restricted columns.

    Only deployments cheaper than both Cauchy's and Mélange's optimum (at the same prices and demand) are sought:
    that bound makes the MILP fast (example (a): 0.08 s instead of 5 s when nothing is cheaper). When none is,
    the mixed optimum over its columns *is* the cheaper of the two (both are feasible mixed plans: Mélange's with
    no combo, Cauchy's with its combos serving the whole mix), and that plan is returned with a ``note``."""
    cauchy = planner.solve("cauchy", prices, demand_scale)
    melange = planner.solve("melange", prices, demand_scale)
    price = {g: p.usd_per_gpu_hour for g, p in req.prices.items()}
    types = [replace(t, usd_per_hour=t.tp * price[t.gpu]) for t in planner.types]
    must = [c for c, _ in cauchy.allocation.combos] if cauchy.allocation is not None else []
    pool = planner.bucket_combos
    have = {bc.combo.label for bc in pool}
    extra = [c for c in planner.cands.combos if c.label in {m.label for m in must} - have]
    if extra:  # Cauchy chose a combo beyond the pool: its per-bucket capacities too
        pool = pool + bucket_combos(req, replace(planner.cands, combos=tuple(extra)), planner.buckets)
    columns = combo_columns(repriced(pool, price) if req.prices is not planner.req.prices else pool,
                            len(planner.buckets), must)  # fmt: skip
    slo = f"TTFT {req.ttft_slo_s:g} s, TPOT {req.tpot_slo_s * 1e3:g} ms"
    best = min((s for s in (cauchy, melange) if s.error is None), key=lambda s: s.cost, default=None)
    cap = best.cost * (1 - 1e-6) if best is not None else None
    size = mixed_size(types, columns, planner.buckets, req, 4)
    try:
        plan = solve_mixed(types, columns, planner.buckets, req, 4, slo, cap)
    except InfeasibleError:
        if best is None:
            raise
        note = (
            f"the mixed MILP ({size['aggregated_columns']} aggregated and {size['combo_columns']} combo columns) found "
            f"no deployment cheaper than the {best.strategy} optimum, which is a mixed plan too: this is it"
        )
        return replace(best, strategy="mixed", note=note, milp_size=size)
    return Solved("mixed", mixed=plan, milp_size=size)


#: The strategies ``hetplan plan`` solves, by name (Hetis plans a fixed pool instead: :mod:`hetplan.planning.hetis`).
SOLVERS: dict[str, Solver] = {
    "cauchy": _solve_cauchy,
    "homogeneous": _solve_homogeneous,
    "melange": _solve_melange,
    "mixed": _solve_mixed,
}
assert tuple(SOLVERS) == STRATEGIES, "hetplan.plan.types.STRATEGIES names the registered solvers"


__all__ = [
    "SOLVERS",
    "STRATEGIES",
    "Planner",
    "Solved",
    "Solver",
]
