"""The mixed strategy: aggregated instances (Mélange types) and prefill→decode combos (Cauchy) in one MILP.

Requests are bucketed by size as for Mélange (:func:`hetplan.solvers.melange.make_buckets`). Every column u is a
deployment unit: an aggregated instance type (capacity T_{u,b} per bucket, as Mélange) or a candidate combo, whose
per-bucket capacity is its goodput when it serves only bucket b's requests::

    G_{c,b} = min(n · P_b(n), m · D_b, KV_b)

with P_b(n) the per-instance prefill capacity of n pooled instances on bucket b's prompts (M/G/n, Poisson;
with a trace, capped by the combo's whole-trace prefill capacity scaled by the ratio of mean prefill times, the
rule Mélange's types use), D_b the decode capacity on bucket b's outputs and context, KV_b the KV link's rate on
bucket b's mean prompt KV. A combo may also serve a share f_c of *every* bucket at its whole-workload goodput
G_c (Cauchy's capacity), so the MILP (:func:`hetplan.solvers.milp_slices.solve_slice_assignment` with ``mix_load``,
or :func:`hetplan.solvers.milp_packed.solve_packed` when buying whole instances)::

    minimize    Σ_u c_u · n_u
    subject to  Σ_u z_{b,u} + k · Σ_c f_c = k                               for every bucket b
                Σ_b (λ_b / k / T_{u,b}) · z_{b,u} + (λ / G_u) · f_u ≤ n_u     for every column u
                inventory (or purchases),  z ∈ {0..k},  f ∈ [0, 1],  n ∈ ℕ

holds both restricted optima: Mélange's plan (f = 0) and Cauchy's (f_c = G_c·y_c / Σ G·y, z = 0) when the Cauchy
optimum's combos are columns, which the final solve makes sure of. So the mixed optimum over its columns is never
costlier than either (up to the solvers' time limits).

Column restriction (heuristic; the plan says so): every aggregated type is a column; of the combos, those of the
Cauchy optimum (final solves), the :data:`MIX_COLUMNS` best by whole-workload goodput per $ and, per bucket, the
:data:`BUCKET_COLUMNS` best by G_{c,b} per $ among the :data:`POOL` best by goodput per $ (per-bucket capacities
are computed for the pool only).

Source: hetplan's own reconstruction, combining Mélange's (Griggs et al., 2024) slice assignment with Cauchy's
(SoCC 2025) combos.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hetplan.errors import InfeasibleError
from hetplan.perf.capacity import PrefillCapacity, prefill_capacities_by_stats
from hetplan.perf.decode_capacity import decode_capacities
from hetplan.solvers.cauchy import CandidateSet, Combo, PlanRequest
from hetplan.solvers.melange import MIN_CAPACITY_REQ_PER_S, Bucket, InstanceType
from hetplan.solvers.milp_slices import MAX_SLICE_LOAD, solve_slice_assignment
from hetplan.solvers.packing import Purchased, solve_purchase

POOL = 200
"""Combos (best whole-workload goodput per $ first) whose per-bucket capacities are computed."""
MIX_COLUMNS = 6
"""Combo columns kept for their whole-workload goodput per $."""
BUCKET_COLUMNS = 2
"""Combo columns kept per bucket for their per-bucket capacity per $."""
BUCKET_QUANTILE_POINTS = 64
"""Idle-TTFT quantile points of the per-bucket prefill capacities (Cauchy's whole-workload ones use 256: a
bucket's prompts span a narrow range, and 64 points make the per-bucket search 4x cheaper)."""


@dataclass(frozen=True)
class BucketCombo:
    """A combo with its per-bucket capacities (req/s of one copy serving only that bucket; 0: it cannot) and the
    decode batch it runs on each bucket."""

    combo: Combo
    capacity_req_per_s: tuple[float, ...]
    decode_batch: tuple[int, ...]


@dataclass(frozen=True)
class MixedUnit:
    """One column of the mixed MILP: an aggregated instance type or a combo (exactly one is set); its $/hour,
    per-bucket capacities (req/s) and whole-workload capacity (combos: Cauchy's goodput; aggregated: 0)."""

    usd_per_hour: float
    capacity_req_per_s: tuple[float, ...]
    mix_capacity_req_per_s: float
    instance: InstanceType | None = None
    combo: BucketCombo | None = None

    @property
    def label(self) -> str:
        if self.combo is not None:
            return self.combo.combo.label
        assert self.instance is not None
        return f"{self.instance.gpu} TP{self.instance.tp} aggregated"

    def gpus(self) -> dict[str, int]:
        """GPUs per type of one copy."""
        if self.combo is not None:
            return self.combo.combo.gpus_used()
        assert self.instance is not None
        return {self.instance.gpu: self.instance.tp}

    def needs(self) -> dict[tuple[str, int], int]:
        """Serving instances per (GPU, TP) of one copy (what purchases host)."""
        if self.instance is not None:
            return {(self.instance.gpu, self.instance.tp): 1}
        assert self.combo is not None
        c = self.combo.combo
        need = {(c.prefill_gpu, c.prefill_tp): c.n_prefill}
        need[(c.decode_gpu, c.decode_tp)] = need.get((c.decode_gpu, c.decode_tp), 0) + c.n_decode
        return need


@dataclass(frozen=True)
class MixedPlan:
    """A solved mixed deployment: copies per column, slices of each bucket per column (shape (B, U)), the share of
    every bucket each column serves as the whole mix (shape (U,)), cost and the MILP's size and time."""

    units: tuple[MixedUnit, ...]
    counts: tuple[int, ...]
    buckets: tuple[Bucket, ...]
    slices: int
    assignment: tuple[tuple[int, ...], ...]
    mix: tuple[float, ...]
    total_usd_per_hour: float
    status: str
    demand_req_per_s: float
    combo_columns: int
    milp_variables: int
    milp_constraints: int
    milp_seconds: float
    purchase: Purchased | None = None
    sites: tuple[str, ...] = ()

    def bucket_shares(self, u: int) -> list[float]:
        """Share of ALL traffic (0-1) that column ``u`` takes from each bucket."""
        return [
            b.share * (self.assignment[i][u] / self.slices + (self.mix[u] if self.mix else 0.0))
            for i, b in enumerate(self.buckets)
        ]

    def load(self, u: int) -> float:
        """Copies' worth of traffic column ``u`` carries at the planned demand (≤ its count)."""
        unit = self.units[u]
        total = 0.0
        for i, b in enumerate(self.buckets):
            z = self.assignment[i][u]
            if z:
                total += self.demand_req_per_s * b.share * z / self.slices / unit.capacity_req_per_s[i]
        if self.mix and self.mix[u] > 0:
            total += self.demand_req_per_s * self.mix[u] / unit.mix_capacity_req_per_s
        return total

    @property
    def goodput_req_per_s(self) -> float:
        """Goodput capacity: the demand scaled until the first column's copies are full."""
        ratios = [n / self.load(u) for u, n in enumerate(self.counts) if n and self.load(u) > 0]
        return self.demand_req_per_s * min(ratios) if ratios else 0.0

    def gpus_used(self) -> dict[str, int]:
        used: dict[str, int] = {}
        for unit, n in zip(self.units, self.counts, strict=True):
            for g, k in unit.gpus().items() if n else ():
                used[g] = used.get(g, 0) + k * n
        return dict(sorted(used.items()))

    def serving(self) -> list[int]:
        """Columns with copies, in column order."""
        return [u for u, n in enumerate(self.counts) if n > 0]


def bucket_combos(req: PlanRequest, cands: CandidateSet, buckets: Sequence[Bucket]) -> list[BucketCombo]:
    """The per-bucket capacities of the :data:`POOL` best combos of ``cands`` (by goodput per $; module
    docstring), computed with the batched capacity functions Cauchy uses (:mod:`hetplan.perf.capacity`)."""
    pool = list(cands.combos[:POOL])
    opts = {o.key: o for o in cands.options}
    pre_keys = sorted({(c.prefill_gpu, c.prefill_tp, c.link_bytes_per_s) for c in pool})
    dec_keys = sorted({(c.decode_gpu, c.decode_tp) for c in pool})
    n_b = len(buckets)
    pre: dict[tuple[str, int, float], list[PrefillCapacity]] = {k: [] for k in pre_keys}
    dec: dict[tuple[str, int], list[tuple[float, int]]] = {k: [] for k in dec_keys}
    n_pools = max([c.n_prefill for c in pool], default=1)
    sizes: dict[tuple[str, int, float], set[int]] = {k: set() for k in pre_keys}
    for c in pool:
        sizes[(c.prefill_gpu, c.prefill_tp, c.link_bytes_per_s)].add(c.n_prefill)
    by_bucket = prefill_capacities_by_stats(
        [(opts[(g, t)].model, link) for g, t, link in pre_keys], [b.stats for b in buckets], req.ttft_slo_s, n_pools,
        [sorted(sizes[k]) for k in pre_keys], BUCKET_QUANTILE_POINTS,
    )  # fmt: skip
    for row in by_bucket:
        for key, cap in zip(pre_keys, row, strict=True):
            pre[key].append(cap)
    decs = decode_capacities([(opts[key].model, b.stats) for b in buckets for key in dec_keys], req.tpot_slo_s)
    for j, d_cap in enumerate(decs):
        dec[dec_keys[j % len(dec_keys)]].append((d_cap.rate_per_s, d_cap.batch))
    kv_bytes = [float((b.stats.prompt_tokens * req.arch.kv_bytes_per_token).mean()) for b in buckets]
    out = []
    for c in pool:
        whole = cands.prefill_caps.get((c.prefill_gpu, c.prefill_tp, c.link_bytes_per_s))
        p = opts[(c.prefill_gpu, c.prefill_tp)]
        d = opts[(c.decode_gpu, c.decode_tp)]
        caps, batches = [], []
        for i in range(n_b):
            pc = pre[(c.prefill_gpu, c.prefill_tp, c.link_bytes_per_s)][i]
            per = pc.per_instance(c.n_prefill)
            if req.arrivals is not None and whole is not None and pc.mean_service_s > 0:
                # the trace's bursts, as for Mélange's types: the whole trace's capacity in this bucket's requests
                per = min(per, whole.per_instance(c.n_prefill) * whole.mean_service_s / pc.mean_service_s)
            rate, batch = dec[(c.decode_gpu, c.decode_tp)][i]
            link = min(c.n_prefill * p.network_bytes_per_s, c.n_decode * d.network_bytes_per_s)
            kv = link / kv_bytes[i] if kv_bytes[i] > 0 else math.inf
            g = min(c.n_prefill * per, c.n_decode * rate, kv)
            caps.append(g if g >= MIN_CAPACITY_REQ_PER_S else 0.0)
            batches.append(batch)
        if any(caps) or c.goodput_req_per_s > 0:
            out.append(BucketCombo(c, tuple(caps), tuple(batches)))
    return out


def combo_columns(combos: Sequence[BucketCombo], n_buckets: int, must: Sequence[Combo] = ()) -> list[BucketCombo]:
    """The restricted combo columns (module docstring): ``must`` (the Cauchy optimum's combos, matched by label),
    the :data:`MIX_COLUMNS` best by goodput per $ and the :data:`BUCKET_COLUMNS` best per bucket; in pool order."""
    keep: set[int] = set()
    labels = {c.label for c in must}
    keep.update(i for i, bc in enumerate(combos) if bc.combo.label in labels)
    by_mix = sorted(
        range(len(combos)), key=lambda i: (-combos[i].combo.goodput_req_per_s / combos[i].combo.usd_per_hour, i)
    )
    keep.update(by_mix[:MIX_COLUMNS])
    for b in range(n_buckets):
        live = [i for i in range(len(combos)) if combos[i].capacity_req_per_s[b] > 0]
        live.sort(key=lambda i: (-combos[i].capacity_req_per_s[b] / combos[i].combo.usd_per_hour, i))
        keep.update(live[:BUCKET_COLUMNS])
    return [combos[i] for i in sorted(keep)]


def solve_mixed(
    types: Sequence[InstanceType],
    combos: Sequence[BucketCombo],
    buckets: Sequence[Bucket],
    req: PlanRequest,
    slices_per_bucket: int = 4,
    slo: str = "the SLOs",
    cost_cap: float | None = None,
) -> MixedPlan:
    """Solve the mixed MILP (module docstring) over aggregated ``types`` and combo columns ``combos`` (priced at
    ``req``'s prices: the combos' and types' ``usd_per_hour``), in whole purchased instances when ``req`` has
    offers. ``cost_cap``: only deployments costing less are sought (what-if solves that already hold the restricted
    optima; none: :class:`InfeasibleError`).

    Raises:
        InfeasibleError: a bucket no column can serve, or inventory/purchases too small for the demand (or none
            below ``cost_cap``).
    """
    k = max(1, int(slices_per_bucket))
    demand = req.demand_req_per_s
    units = [MixedUnit(t.usd_per_hour, t.capacity_req_per_s, 0.0, instance=t) for t in types]
    units += [
        MixedUnit(bc.combo.usd_per_hour, bc.capacity_req_per_s, bc.combo.goodput_req_per_s, combo=bc) for bc in combos
    ]
    loads: list[list[float | None]] = []
    for i, b in enumerate(buckets):
        rate = demand * b.share / k
        loads.append([rate / u.capacity_req_per_s[i] if u.capacity_req_per_s[i] > 0 else None for u in units])
    mix_load: list[float | None] = [
        demand / u.mix_capacity_req_per_s if u.mix_capacity_req_per_s > 0 else None for u in units
    ]
    if not any(v is not None for v in mix_load):
        for b, row in zip(buckets, loads, strict=True):
            if all(v is None for v in row):
                raise InfeasibleError(
                    f"mixed plan: no aggregated type or combo serves requests with {b.label} tokens within {slo}",
                    f"{b.share * 100:.1f} % of the traffic is in that bucket",
                    "relax the SLOs or add GPU types with more memory or compute",
                )
    n_z = sum(1 for row in loads for v in row if v is not None and v <= MAX_SLICE_LOAD)
    n_f = sum(1 for v in mix_load if v is not None)
    started = time.perf_counter()
    if req.offers:
        bought = solve_purchase(
            [u.needs() for u in units], req.offers, req.tp_options, "mixed plan", slice_load=loads,
            slices_per_bucket=k, time_limit_s=req.time_limit_s, fewest_units=False, mix_load=mix_load,
            cost_cap=cost_cap, settings=req.solve,
        )  # fmt: skip
        cols = [units[i] for i in bought.unit_index]
        seconds = time.perf_counter() - started
        n_rows = len(buckets) + len(cols) + len({(g, t) for u in cols for g, t in u.needs()}) + len(req.offers)
        return MixedPlan(
            tuple(cols), bought.counts, tuple(buckets), k, bought.slices, bought.mix or tuple(0.0 for _ in cols),
            bought.total_usd_per_hour, bought.status, demand, len(combos), len(cols) + n_z + n_f, n_rows, seconds,
            bought, bought.unit_sites,
        )  # fmt: skip
    names = sorted({g for u in units for g in u.gpus()} & set(req.inventory))
    usage = [[u.gpus().get(g, 0) for u in units] for g in names]
    cap: list[float | None] = [req.inventory[g] for g in names]
    result = solve_slice_assignment([u.usd_per_hour for u in units], loads, k, usage, cap, req.time_limit_s,
                                    mix_load=mix_load, cost_cap=cost_cap, settings=req.solve)  # fmt: skip
    seconds = time.perf_counter() - started
    if result.status not in ("optimal", "time_limit"):
        raise InfeasibleError(
            "mixed plan: the inventory cannot hold the demand with aggregated instances and combos",
            f"needs {demand:.2f} req/s; inventory {', '.join(f'{g}={req.inventory[g]}' for g in names) or 'none'}",
            "add GPUs to --inventory or lower --goodput",
        )
    return MixedPlan(
        tuple(units), result.counts, tuple(buckets), k, result.slices, result.mix or tuple(0.0 for _ in units),
        result.objective, result.status, demand, len(combos), len(units) + n_z + n_f,
        len(buckets) + len(units) + len(names), seconds,
    )  # fmt: skip


def mixed_size(
    types: Sequence[InstanceType],
    combos: Sequence[BucketCombo],
    buckets: Sequence[Bucket],
    req: PlanRequest,
    slices_per_bucket: int = 4,
) -> dict[str, int]:
    """The mixed MILP's columns and size before the purchase layer: ``aggregated_columns``, ``combo_columns``,
    ``variables`` (copies per column, slice assignments z, mix shares f) and ``constraints`` (bucket and load rows,
    inventory rows); with offers, each column is repeated per site and the purchase variables and rows come on
    top (:func:`hetplan.solvers.milp_packed.solve_packed`)."""
    demand = req.demand_req_per_s
    k = max(1, int(slices_per_bucket))
    caps = [t.capacity_req_per_s for t in types] + [bc.capacity_req_per_s for bc in combos]
    n_z = sum(
        1 for i, b in enumerate(buckets) for c in caps if c[i] > 0 and demand * b.share / k / c[i] <= MAX_SLICE_LOAD
    )
    n_u = len(types) + len(combos)
    names = {t.gpu for t in types} | {g for bc in combos for g in bc.combo.gpus_used()}
    return {
        "aggregated_columns": len(types),
        "combo_columns": len(combos),
        "variables": n_u + n_z + len(combos),
        "constraints": len(buckets) + n_u + (0 if req.offers else len(names & set(req.inventory))),
    }


def repriced(combos: Sequence[BucketCombo], price: dict[str, float]) -> list[BucketCombo]:
    """``combos`` at other $/GPU-hour prices (what-if solves)."""
    out = []
    for bc in combos:
        c = bc.combo
        usd = c.n_prefill * c.prefill_tp * price[c.prefill_gpu] + c.n_decode * c.decode_tp * price[c.decode_gpu]
        out.append(replace(bc, combo=replace(c, usd_per_hour=usd)))
    return out


def describe(plan: MixedPlan) -> str:
    """In words which unit serves which requests, e.g. "aggregated A100-80GB TP4 serve the short requests
    (in 0-512, ...); 1x H100 TP4 -> 2x A100-80GB TP4 serves the long ones (...)"."""
    parts = []
    for u in plan.serving():
        unit = plan.units[u]
        shares = plan.bucket_shares(u)
        served = [b for b, s in zip(plan.buckets, shares, strict=True) if s > 0]
        total = sum(shares)
        if total >= 1 - 1e-9:
            what = "all requests"
        elif not served:  # copies the MILP keeps at no extra cost (owned GPUs at $0/h)
            what = "no requests"
        else:
            lo = min(b.prompt_lo for b in served)
            hi = max(b.prompt_hi for b in served)
            span = f"prompts {lo:g}+ tokens" if math.isinf(hi) else f"prompts {lo:g}-{hi:g} tokens"
            what = f"{total * 100:.0f} % of requests ({len(served)} size buckets, {span})"
        kind = (
            f"{plan.counts[u]}x aggregated {unit.label.removesuffix(' aggregated')}"
            if unit.instance is not None
            else f"{plan.counts[u]}x combo {unit.label}"
        )
        parts.append(f"{kind} serve{'s' if plan.counts[u] == 1 else ''} {what}")
    return "; ".join(parts)


__all__ = [
    "BUCKET_COLUMNS",
    "BUCKET_QUANTILE_POINTS",
    "MIX_COLUMNS",
    "POOL",
    "BucketCombo",
    "MixedPlan",
    "MixedUnit",
    "bucket_combos",
    "combo_columns",
    "describe",
    "mixed_size",
    "repriced",
    "solve_mixed",
]
