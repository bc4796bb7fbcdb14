"""Mélange: the cheapest mix of GPU types for aggregated (non-disaggregated) serving, per request size.

Requests are bucketed by (prompt length, output length); each instance type g (GPU model and TP) has a
capacity T_{g,b}, the highest rate of bucket-b requests one instance serves within the SLOs. Each bucket's traffic
is cut into k equal slices and every slice is assigned to one type; the ILP (DESIGN §3.2, solved by
:func:`hetplan.solvers.milp_slices.solve_slice_assignment`) buys enough instances of each type for the slices it holds:

    minimize Σ_g c_g·n_g  s.t.  Σ_g x_{s,g} = 1,  Σ_s (r_s / T_{g,b(s)})·x_{s,g} ≤ n_g,  inventory.

Properties the tests check: cost(k·m) ≤ cost(k); cost ≥ Σ_b λ_b · min_g c_g / T_{g,b}.

Aggregated capacity (hetplan's own reconstruction; Mélange profiles it on hardware): prefill runs first
(vLLM's default), taking a share f = λ·E[T_prefill] of the GPU; TTFT is the M/G/1 wait of those prefills at
utilisation f plus the prefill itself; decode steps run in the remaining 1 - f, so a request's TPOT is
step(B, c)/(1 - f), with B the concurrency Little's law gives, ``B = λ·(E[O]-1)·step(B, c)/(1 - f)``; at the SLO
percentile q the batch is ``B_q = B + z_q·√B`` (the number of decoding sequences is about Poisson around B), so
the TPOT checked is the q-quantile ``step(B_q, c)/(1 - f)``, not the mean. T_{g,b} is the largest λ that keeps
TTFT_q, TPOT_q, KV capacity and ``max_num_seqs``; found by bisection. For a trace, each type's bucket capacity is
also capped by the fluid bound of its prefill work on the trace's bursts
(:func:`hetplan.perf.capacity.fluid_prefill_rate`, scaled by the whole trace's mean prefill time over the
bucket's), the same burst rule as Cauchy's prefill instances.

Source: Mélange (Griggs et al., "Mélange: Cost Efficient Large Language Model Serving by Exploiting GPU
Heterogeneity", 2024) for buckets, slices and the ILP; inventory rows and the capacity model are hetplan's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from hetplan.catalog.pricing import GpuPrice
from hetplan.deploy_rules import instance_findings
from hetplan.errors import InfeasibleError
from hetplan.perf.batch_search import BISECT_STEPS
from hetplan.perf.capacity import fluid_prefill_rates
from hetplan.perf.capacity_inputs import LengthStats
from hetplan.perf.decode_capacity import decode_step_tables
from hetplan.perf.latency import InstanceModel
from hetplan.perf.queueing import mg1_wait_quantile_s
from hetplan.solvers.cauchy import PlanRequest, deployment_of, option_shape
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


def aggregated_capacity(inst: InstanceModel, stats: LengthStats, ttft_slo_s: float, tpot_slo_s: float) -> float:
    """Highest arrival rate (req/s) one aggregated instance serves within both SLOs (module docstring)."""
    service = np.asarray(inst.prefill_latency_s(stats.prefill_tokens(inst)), dtype=float)
    mean_s, second_s2 = float(service.mean()), float((service**2).mean())
    prefill_q = float(np.percentile(service, stats.quantile * 100))
    ctx = stats.decode_context
    kv_limit = int(inst.max_batch_size(stats.prompt_tokens.max() + stats.output_tokens.max()))
    kv_limit = min(kv_limit, int(inst.max_batch_size(ctx)), inst.settings.max_num_seqs)
    if kv_limit < 1 or prefill_q > ttft_slo_s:
        return 0.0
    batches = np.arange(1, kv_limit + 1)
    steps = np.asarray(inst.decode_step_latency_s(batches, ctx), dtype=float)
    tokens_after_first = max(stats.mean_output - 1.0, 1.0)

    z = NormalDist().inv_cdf(stats.quantile)

    def ok(rate: float) -> bool:
        busy = rate * mean_s
        if busy >= 1.0:
            return False
        if mg1_wait_quantile_s(rate, mean_s, second_s2, stats.quantile) + prefill_q > ttft_slo_s:
            return False
        stretched = steps / (1.0 - busy)
        enough = np.nonzero(batches >= rate * tokens_after_first * stretched)[0]
        if not enough.size:
            return False
        # the SLO percentile of the batch, not its mean: the number of decoding sequences is about Poisson around
        # Little's mean B (normal approximation), and the q-quantile request decodes in a batch of B_q
        mean_b = float(batches[enough[0]])
        b_q = min(int(math.ceil(mean_b + z * math.sqrt(mean_b))), kv_limit)
        return bool(mean_b + z * math.sqrt(mean_b) <= kv_limit + 1e-9) and bool(stretched[b_q - 1] <= tpot_slo_s)

    if not ok(1e-9):
        return 0.0
    lo, hi = 0.0, 1.0 / mean_s
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def aggregated_capacities(
    inst: InstanceModel, stats: list[LengthStats], ttft_slo_s: float, tpot_slo_s: float
) -> list[float]:
    """:func:`aggregated_capacity` of one instance for several length samples (the buckets); see
    :func:`aggregated_capacities_many`."""
    return aggregated_capacities_many([inst], stats, ttft_slo_s, tpot_slo_s)[0]


def aggregated_capacities_many(
    insts: list[InstanceModel], stats: list[LengthStats], ttft_slo_s: float, tpot_slo_s: float
) -> list[list[float]]:
    """:func:`aggregated_capacity` of every instance (rows of the result) for every length sample (the buckets,
    columns), all bisections run side by side as arrays; each element goes through the one-sample function's
    operations (``math.log`` for the M/G/1 tail included), so the capacities are bit-identical to it (a test
    checks this)."""
    rows = []
    by_bucket = _prefill_services(insts, stats)
    for st, services in zip(stats, by_bucket, strict=True):
        # one percentile call per bucket over every instance (rows of equal length): the same order statistics
        prefill_qs = np.percentile(np.asarray(services), st.quantile * 100, axis=1) if insts else []
        ctx = st.decode_context
        for inst, service, prefill_q in zip(insts, services, prefill_qs, strict=True):
            kv_limit = int(inst.max_batch_size(st.prompt_tokens.max() + st.output_tokens.max()))
            kv_limit = min(kv_limit, int(inst.max_batch_size(ctx)), inst.settings.max_num_seqs)
            rows.append((float(service.mean()), float((service**2).mean()), float(prefill_q), ctx, kv_limit, st, inst))
    n_b = len(stats)
    out = [[0.0] * n_b for _ in insts]
    # rows are bucket-major: row r is instance r % len(insts), bucket r // len(insts)
    live = [i for i, r in enumerate(rows) if r[4] >= 1 and r[2] <= ttft_slo_s]
    if not live:
        return out
    width = max(rows[i][4] for i in live)
    batches = np.arange(1, width + 1)
    steps = np.full((len(live), width), np.inf)
    tables = decode_step_tables([(rows[i][6], rows[i][3], rows[i][4]) for i in live])  # one call per instance
    for k, table in enumerate(tables):
        steps[k, : table.size] = table
    mean_arr = np.array([rows[i][0] for i in live])
    second_arr = np.array([rows[i][1] for i in live])
    prefill_arr = np.array([rows[i][2] for i in live])
    limit_arr = np.array([rows[i][4] for i in live])
    tokens = np.array([max(rows[i][5].mean_output - 1.0, 1.0) for i in live])
    quantile = np.array([rows[i][5].quantile for i in live])
    z = np.array([NormalDist().inv_cdf(float(q)) for q in quantile])
    index = np.arange(len(live))

    def ok(rate: np.ndarray) -> np.ndarray:
        busy = rate * mean_arr
        good = busy < 1.0
        rho = rate * mean_arr
        wait = np.zeros(rate.size)
        tail = good & (rho > 1.0 - quantile) & (rate > 0)
        for k in np.nonzero(tail)[0]:  # mg1_wait_quantile_s, with its math.log
            mean_wait = rate[k] * second_arr[k] / (2.0 * (1.0 - rho[k]))
            wait[k] = (mean_wait / rho[k]) * math.log(rho[k] / (1.0 - quantile[k]))
        good &= ~(wait + prefill_arr > ttft_slo_s)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            stretched = steps / (1.0 - busy)[:, None]
            need = (rate * tokens)[:, None] * stretched
        enough = batches[None, :] >= need
        has = enough.any(axis=1)
        good &= has
        mean_b = batches[np.argmax(enough, axis=1)].astype(float)
        spread = mean_b + z * np.sqrt(mean_b)
        b_q = np.minimum(np.ceil(spread).astype(int), limit_arr)
        good &= spread <= limit_arr + 1e-9
        at = stretched[index, np.clip(b_q - 1, 0, width - 1)]
        return np.asarray(good & (at <= tpot_slo_s))

    start = ok(np.full(len(live), 1e-9))
    lo, hi = np.zeros(len(live)), 1.0 / mean_arr
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        passes = ok(mid)
        lo, hi = np.where(passes, mid, lo), np.where(passes, hi, mid)
    for k, i in enumerate(live):
        out[i % len(insts)][i // len(insts)] = float(lo[k]) if start[k] else 0.0
    return out


def _prefill_services(insts: list[InstanceModel], stats: list[LengthStats]) -> list[list[np.ndarray]]:
    """Prefill seconds of every sample's prompts on every instance, shape [sample][instance] (arrays of the
    sample's size): one latency-model call per instance over all samples' prompts, cut back per sample (the
    model is element by element, so the values equal one call per sample; copies keep each array fresh)."""
    if not stats:
        return []
    edges = np.cumsum([0] + [np.asarray(st.prompt_tokens).size for st in stats])
    every = [
        np.asarray(inst.prefill_latency_s(np.concatenate([np.asarray(st.prefill_tokens(inst)) for st in stats])),
                   dtype=float)
        for inst in insts
    ]  # fmt: skip
    return [[e[edges[b] : edges[b + 1]].copy() for e in every] for b in range(len(stats))]


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
            inst = InstanceModel(req.arch, gpu, tp, 1, req.settings) if req.arch.attention_heads % tp == 0 else None
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
    per_bucket = _prefill_services(insts, [b.stats for b in buckets])
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
