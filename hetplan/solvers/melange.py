"""Mélange: the cheapest mix of GPU types for aggregated (non-disaggregated) serving, per request size.

Requests are bucketed by (prompt length, output length); each instance type g (GPU model and TP) has a
capacity T_{g,b}, the highest rate of bucket-b requests one instance serves within the SLOs. Each bucket's traffic
is cut into k equal slices and every slice is assigned to one type; the ILP (DESIGN §3.2, solved by
:func:`hetplan.solvers.milp_slices.solve_slice_assignment`) buys enough instances of each type for the slices it holds:

    minimize Σ_g c_g·n_g  s.t.  Σ_g x_{s,g} = 1,  Σ_s (r_s / T_{g,b(s)})·x_{s,g} ≤ n_g,  inventory.

Properties the tests check: cost(k·m) ≤ cost(k); cost ≥ Σ_b λ_b · min_g c_g / T_{g,b}.

Aggregated capacity T_{g,b} (prefill first, the M/G/1 wait of the prefills, decode steps in the GPU's remaining
share, the SLO percentile of the batch): :mod:`hetplan.solvers.melange_capacity`. For a trace, each type's bucket
capacity is also capped by the fluid bound of its prefill work on the trace's bursts
(:func:`hetplan.perf.capacity.fluid_prefill_rates`, scaled by the whole trace's mean prefill time over the
bucket's), the same burst rule as Cauchy's prefill instances.

Source: Mélange (Griggs et al., "Mélange: Cost Efficient Large Language Model Serving by Exploiting GPU
Heterogeneity", 2024) for buckets, slices and the ILP; inventory rows and the capacity model are hetplan's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hetplan.catalog.pricing import GpuPrice
from hetplan.deploy_rules import instance_findings
from hetplan.errors import InfeasibleError
from hetplan.perf.capacity import fluid_prefill_rates
from hetplan.perf.capacity_inputs import LengthStats
from hetplan.perf.latency import InstanceModel
from hetplan.solvers.cauchy import PlanRequest, deployment_of, option_shape
from hetplan.solvers.melange_capacity import aggregated_capacities_many, prefill_services
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings
from hetplan.solvers.milp_slices import solve_slice_assignment
from hetplan.solvers.packing import Purchased, solve_purchase

PROMPT_EDGES = (0, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, math.inf)
OUTPUT_EDGES = (0, 64, 128, 256, 512, 1024, 2048, math.inf)


@dataclass(frozen=True)
class Bucket:
    """Requests with prompt in [prompt_lo, prompt_hi) and output in [output_lo, output_hi) tokens."""

    prompt_lo: float
    prompt_hi: float
    output_lo: float
    output_hi: float
    share: float
    stats: LengthStats

    @property
    def label(self) -> str:
        def rng(lo: float, hi: float) -> str:
            return f"{lo:g}+" if math.isinf(hi) else f"{lo:g}-{hi:g}"

        return f"in {rng(self.prompt_lo, self.prompt_hi)}, out {rng(self.output_lo, self.output_hi)}"


def make_buckets(
    stats: LengthStats, prompt_edges: tuple[float, ...] = PROMPT_EDGES, output_edges: tuple[float, ...] = OUTPUT_EDGES
) -> list[Bucket]:
    """Split the length samples into non-empty buckets (shares sum to 1), in edge order."""
    p, o = stats.prompt_tokens, stats.output_tokens
    buckets = []
    for i in range(len(prompt_edges) - 1):
        for j in range(len(output_edges) - 1):
            mask = (
                (p >= prompt_edges[i]) & (p < prompt_edges[i + 1]) & (o >= output_edges[j]) & (o < output_edges[j + 1])
            )
            if mask.any():
                buckets.append(
                    Bucket(
                        prompt_edges[i],
                        prompt_edges[i + 1],
                        output_edges[j],
                        output_edges[j + 1],
                        float(mask.mean()),
                        LengthStats(
                            p[mask],
                            o[mask],
                            stats.quantile,
                            None if stats.prefill_reuse is None else stats.prefill_reuse.take(mask),
                        ),
                    )
                )
    return buckets


@dataclass(frozen=True)
class InstanceType:
    """One (GPU, TP) instance type: $/hour of one instance and capacity (req/s) per bucket."""

    gpu: str
    tp: int
    usd_per_hour: float
    capacity_req_per_s: tuple[float, ...]


@dataclass(frozen=True)
class MelangePlan:
    """Solved Mélange deployment: instances per type, which type serves each bucket slice, cost, capacity."""

    types: tuple[InstanceType, ...]
    counts: tuple[int, ...]
    buckets: tuple[Bucket, ...]
    slices: int
    assignment: tuple[tuple[int, ...], ...]  # slices of bucket b on type g, shape (B, G)
    total_usd_per_hour: float
    status: str
    lower_bound_usd_per_hour: float
    demand_req_per_s: float
    purchase: Purchased | None = None
    sites: tuple[str, ...] = ()

    def type_load(self) -> list[float]:
        """Instances' worth of traffic each type carries at the planned demand (≤ its count)."""
        load = [0.0] * len(self.types)
        for b, row in enumerate(self.assignment):
            for g, slices in enumerate(row):
                if slices:
                    rate = self.demand_req_per_s * self.buckets[b].share * slices / self.slices
                    load[g] += rate / self.types[g].capacity_req_per_s[b]
        return load

    @property
    def goodput_req_per_s(self) -> float:
        """Goodput capacity: the demand scaled until the first type's instances are full."""
        ratios = [n / load for n, load in zip(self.counts, self.type_load(), strict=True) if load > 0]
        return self.demand_req_per_s * min(ratios) if ratios else 0.0

    def gpus_used(self) -> dict[str, int]:
        used: dict[str, int] = {}
        for t, n in zip(self.types, self.counts, strict=True):
            if n:
                used[t.gpu] = used.get(t.gpu, 0) + n * t.tp
        return dict(sorted(used.items()))


MIN_CAPACITY_REQ_PER_S = 1e-3


def _usable(capacity: float) -> float:
    """Capacities that only just meet the SLO (below 0.001 req/s, i.e. one request in 17 minutes) count as 0: they
    would need thousands of instances and make the ILP numerically hard."""
    return capacity if capacity >= MIN_CAPACITY_REQ_PER_S else 0.0


def instance_types(req: PlanRequest, buckets: list[Bucket]) -> list[InstanceType]:
    """Every (GPU, TP) of the request that fits the model, with its per-bucket aggregated capacity."""
    types = []
    found: list[tuple[InstanceType, InstanceModel]] = []
    candidates: list[tuple[InstanceType, InstanceModel]] = []
    dep = deployment_of(req)
    for gpu in req.gpus:
        price: GpuPrice = req.prices[gpu.name]
        for tp in req.tp_options:
            inst = (
                InstanceModel(req.arch, gpu, tp, 1, req.settings, req.catalog)
                if req.arch.attention_heads % tp == 0
                else None
            )
            # the deployment rules' instance checks (hetplan.deploy_rules), as for Cauchy's instance options
            if inst is None or instance_findings(option_shape(req, gpu, tp, "aggregated", inst), dep):
                continue
            candidates.append((InstanceType(gpu.name, tp, tp * price.usd_per_gpu_hour, ()), inst))
    every = aggregated_capacities_many(
        [inst for _, inst in candidates], [b.stats for b in buckets], req.ttft_slo_s, req.tpot_slo_s
    )
    for (t, inst), row in zip(candidates, every, strict=True):
        if any(c > 0 for c in row):
            found.append((replace(t, capacity_req_per_s=tuple(row)), inst))
    if req.arrivals is not None and found:
        capped = _burst_capped([inst for _, inst in found], req, buckets, [t.capacity_req_per_s for t, _ in found])
        found = [(replace(t, capacity_req_per_s=c), inst) for (t, inst), c in zip(found, capped, strict=True)]
    for t, _ in found:
        caps = tuple(_usable(c) for c in t.capacity_req_per_s)
        if any(c > 0 for c in caps):
            types.append(replace(t, capacity_req_per_s=caps))
    return types


def _burst_capped(
    insts: list[InstanceModel], req: PlanRequest, buckets: list[Bucket], caps: list[tuple[float, ...]]
) -> list[tuple[float, ...]]:
    """Bucket capacities of each instance type capped by the fluid prefill bound on the trace's bursts (module
    docstring): the bound, in requests of the whole trace, is converted to bucket b's by the ratio of mean prefill
    times. The bounds of all types are found in one batched search
    (:func:`hetplan.perf.capacity.fluid_prefill_rates`)."""
    assert req.arrivals is not None
    services = [np.asarray(inst.prefill_latency_s(req.arrivals.prefill_tokens(inst)), dtype=float) for inst in insts]
    zeros = [np.zeros_like(s) for s in services]
    bounds = fluid_prefill_rates(services, zeros, req.arrivals, req.ttft_slo_s, req.stats.quantile)
    out = []
    per_bucket = prefill_services(insts, [b.stats for b in buckets])
    for k, (service, bound, row) in enumerate(zip(services, bounds, caps, strict=True)):
        mean_all = float(service.mean())
        capped = []
        for b, cap in enumerate(row):
            mean_b = float(per_bucket[b][k].mean())
            capped.append(min(cap, float(bound) * mean_all / mean_b))
        out.append(tuple(capped))
    return out


def solve_melange(
    types: list[InstanceType],
    buckets: list[Bucket],
    demand_req_per_s: float,
    slices_per_bucket: int = 4,
    inventory: dict[str, int] | None = None,
    time_limit_s: float = 30.0,
    slo: str = "the SLOs",
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> MelangePlan:
    """Solve Mélange's ILP for ``demand_req_per_s`` spread over ``buckets`` by their shares (HiGHS run as
    ``settings`` says, :class:`hetplan.solvers.milp.SolveSettings`).

    Raises:
        InfeasibleError: a bucket no type can serve, or an inventory too small for the demand.
    """
    inventory = inventory or {}
    k = max(1, int(slices_per_bucket))
    loads = _slice_loads(types, buckets, demand_req_per_s, k, slo)
    names = sorted({t.gpu for t in types} & set(inventory))
    usage = [[t.tp if t.gpu == g else 0 for t in types] for g in names]
    cap: list[float | None] = [inventory[g] for g in names]
    result = solve_slice_assignment([t.usd_per_hour for t in types], loads, k, usage, cap, time_limit_s,
                                    settings=settings)  # fmt: skip
    if result.status not in ("optimal", "time_limit"):
        raise InfeasibleError(
            "Mélange: the inventory cannot hold the demand with aggregated instances",
            f"needs {demand_req_per_s:.2f} req/s; inventory {', '.join(f'{g}={inventory[g]}' for g in names)}",
            "add GPUs to --inventory or lower --goodput",
        )
    return MelangePlan(
        tuple(types),
        result.counts,
        tuple(buckets),
        k,
        result.slices,
        result.objective,
        result.status,
        lower_bound(types, buckets, demand_req_per_s),
        demand_req_per_s,
    )


def _slice_loads(
    types: list[InstanceType], buckets: list[Bucket], demand_req_per_s: float, k: int, slo: str
) -> list[list[float | None]]:
    """Per bucket and type, the fraction of one instance a 1/``k`` slice of the bucket's demand takes (None where
    the type cannot serve the bucket): the coefficients of Mélange's slice assignment (DESIGN §3.2).

    Raises:
        InfeasibleError: a bucket no type can serve within ``slo``.
    """
    loads: list[list[float | None]] = []
    for i, b in enumerate(buckets):
        rate = demand_req_per_s * b.share / k
        row = [rate / t.capacity_req_per_s[i] if t.capacity_req_per_s[i] > 0 else None for t in types]
        if all(v is None for v in row):
            raise InfeasibleError(
                f"Mélange: no GPU type serves requests with {b.label} tokens within {slo}",
                f"{b.share * 100:.1f} % of the traffic is in that bucket",
                "relax the SLOs or add GPU types with more memory or compute",
            )
        loads.append(row)
    return loads


def lower_bound(types: list[InstanceType], buckets: list[Bucket], demand: float) -> float:
    """LP bound Σ_b λ_b · min_g c_g / T_{g,b} ($/hour): no integer plan can be cheaper (DESIGN §3.2)."""
    total = 0.0
    for i, b in enumerate(buckets):
        unit = [t.usd_per_hour / t.capacity_req_per_s[i] for t in types if t.capacity_req_per_s[i] > 0]
        total += demand * b.share * min(unit) if unit else math.inf
    return total


def solve_melange_purchased(
    types: list[InstanceType],
    buckets: list[Bucket],
    req: PlanRequest,
    slices_per_bucket: int = 4,
    slo: str = "the SLOs",
) -> MelangePlan:
    """Mélange's slice assignment with whole purchased instances (:func:`hetplan.solvers.packing.solve_purchase`):
    each aggregated instance type is a column per site; ``types`` of the result are those columns.

    Raises:
        InfeasibleError: a bucket no type can serve, or no purchase holds the demand.
    """
    k = max(1, int(slices_per_bucket))
    demand = req.demand_req_per_s
    loads = _slice_loads(types, buckets, demand, k, slo)
    bought = solve_purchase(
        [{(t.gpu, t.tp): 1} for t in types], req.offers, req.tp_options, "aggregated (Mélange) plan",
        slice_load=loads, slices_per_bucket=k, time_limit_s=req.time_limit_s, fewest_units=False,
        settings=req.solve,
    )  # fmt: skip
    cols = [types[i] for i in bought.unit_index]
    priced = []
    for t, site in zip(cols, bought.unit_sites, strict=True):
        place = bought.where(site, t.gpu, t.tp)
        per_gpu = _placed_usd_per_gpu_hour(place) if place is not None else t.usd_per_hour / t.tp
        priced.append(InstanceType(t.gpu, t.tp, per_gpu * t.tp, t.capacity_req_per_s))
    return MelangePlan(
        tuple(priced), bought.counts, tuple(buckets), k, bought.slices, bought.total_usd_per_hour, bought.status,
        lower_bound(types, buckets, demand), demand, bought, bought.unit_sites,
    )  # fmt: skip


def _placed_usd_per_gpu_hour(place: object) -> float:
    """Mean $/GPU-hour of the offers a placement uses, weighted by the serving instances on each."""
    offers = getattr(place, "offers", ())
    n = sum(k for _, k in offers)
    return sum(o.usd_per_gpu_hour * k for o, k in offers) / n if n else 0.0
