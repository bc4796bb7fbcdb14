"""One strategy's outcome as a plan deploys it, typed: the combos, aggregated instances, purchase lines and totals
(:func:`deployed`, a :class:`Deployed`), another strategy's summary (:func:`strategy_result`), the mixed MILP's
record (:func:`mixed_solver`); :mod:`hetplan.planning.baseline_block` writes the homogeneous one in full. Money in
$/hour, rates in req/s, latencies in seconds; every number rounded (:func:`hetplan.units.rnd`) so equal inputs give
byte-identical plan files (:func:`hetplan.plan.doc.to_doc` writes them).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hetplan.plan.blocks import MixedSolver
from hetplan.plan.deployment import AggregatedUnit, BucketShare, ComboUnit, Purchase
from hetplan.plan.types import HOURS_PER_MONTH, StrategyResult
from hetplan.planning.solve import Planner, Solved
from hetplan.solvers.cauchy import CandidateSet, Combo, PlanRequest, predicted_latency
from hetplan.solvers.melange import Bucket, MelangePlan
from hetplan.solvers.mixed import BUCKET_COLUMNS, MIX_COLUMNS, POOL, MixedPlan, describe
from hetplan.solvers.packing import Purchased
from hetplan.units import rnd


@dataclass(frozen=True)
class Deployed:
    """One strategy's outcome as a plan deploys it: its status, totals ($/hour, $/month at
    :data:`~hetplan.plan.types.HOURS_PER_MONTH` hours, $/million tokens -- None at zero goodput --, req/s,
    tokens/USD), GPUs, units and, with offers, the purchase (``placed``: a purchase layer ran, so ``sites_tried`` is
    set and every unit records where it runs). ``gpu``: a homogeneous plan's GPU type; ``lower_bound_usd_per_hour``:
    Mélange's LP bound; ``assignment``: a mixed plan's routing by request size, in words."""

    status: str
    total_usd_per_hour: float
    usd_per_month: float
    usd_per_million_tokens: float | None
    goodput_req_per_s: float
    tokens_per_usd: float
    output_tokens_per_usd: float
    gpus_used: dict[str, int]
    combos: tuple[ComboUnit, ...] = ()
    instances: tuple[AggregatedUnit, ...] = ()
    purchase: tuple[Purchase, ...] = ()
    gpu: str | None = None
    placed: bool = False
    rented_site: str | None = None
    sites_tried: tuple[str, ...] | None = None
    egress_usd_per_hour: float | None = None
    lower_bound_usd_per_hour: float | None = None
    assignment: str | None = None


def _tokens(means: tuple[float, float], goodput: float, cost: float) -> tuple[float, float]:
    if cost <= 0:
        return 0.0, 0.0
    both = 3600 * goodput * (means[0] + means[1]) / cost
    return rnd(both), rnd(3600 * goodput * means[1] / cost)


def strategy_result(planner: Planner, s: Solved) -> StrategyResult:
    """Cost, capacity, tokens/USD and GPUs of one strategy's outcome (or why it is infeasible): a plan's baseline."""
    if s.error is not None:
        return StrategyResult(status="infeasible", reason=s.error.why or s.error.what)
    both, out = _tokens(planner.token_means, s.goodput, s.cost)
    return StrategyResult(
        status="optimal",
        total_usd_per_hour=rnd(s.cost),
        goodput_req_per_s=rnd(s.goodput),
        tokens_per_usd=both,
        output_tokens_per_usd=out,
        gpus_used=s.gpus_used(),
        gpu=s.gpu,
        lower_bound_usd_per_hour=rnd(s.melange.lower_bound_usd_per_hour) if s.melange is not None else None,
    )


def deployed(planner: Planner, s: Solved) -> Deployed:
    """The deployment and totals of one strategy's outcome (see :class:`Deployed`)."""
    req = planner.req
    both, out = _tokens(planner.token_means, s.goodput, s.cost)
    tokens_per_req = sum(planner.token_means)
    status = (
        s.melange.status
        if s.melange is not None
        else s.mixed.status
        if s.mixed is not None
        else s.allocation.status
        if s.allocation
        else "infeasible"
    )
    made = Deployed(
        status=str(status),
        total_usd_per_hour=rnd(s.cost),
        usd_per_month=rnd(s.cost * HOURS_PER_MONTH),
        usd_per_million_tokens=rnd(s.cost / (3600 * s.goodput * tokens_per_req) * 1e6) if s.goodput else None,
        goodput_req_per_s=rnd(s.goodput),
        tokens_per_usd=both,
        output_tokens_per_usd=out,
        gpus_used={str(g): int(n) for g, n in s.gpus_used().items()},
        gpu=s.gpu,
    )
    bought = s.purchase
    if bought is not None:
        made = replace(
            made,
            purchase=purchase_lines(bought),
            placed=True,
            rented_site=bought.rented_site or None,
            sites_tried=tuple(str(site) for site in bought.sites_tried),
            # --allow-cross-provider: total = Σ purchase + the WAN egress
            egress_usd_per_hour=rnd(bought.extra_usd_per_hour) if bought.unit_decode_sites else None,
        )
    if s.allocation is not None:
        alloc = s.allocation
        sites = alloc.sites or tuple("" for _ in alloc.combos)
        decode_sites = alloc.decode_sites or sites
        combos = []
        for (combo, count), site, dsite in zip(alloc.combos, sites, decode_sites, strict=True):
            # goodput-weighted round robin: each copy carries the target times its share of the capacity
            load = req.goodput_req_per_s * combo.goodput_req_per_s / alloc.goodput_req_per_s
            unit = combo_unit(req, planner.cands, combo, count, load, tokens_per_req)
            if bought is not None:
                unit = _placed(unit, bought, combo, site, dsite, tokens_per_req)
            combos.append(unit)
        made = replace(made, combos=tuple(combos))
    if s.melange is not None:
        made = replace(
            made,
            instances=_melange_instances(s.melange),
            lower_bound_usd_per_hour=rnd(s.melange.lower_bound_usd_per_hour),
        )
    if s.mixed is not None:
        combos_m, instances_m = _mixed_units(planner, s.mixed)
        made = replace(made, combos=combos_m, instances=instances_m, assignment=describe(s.mixed))
    return made


def mixed_solver(s: Solved) -> MixedSolver:
    """The mixed MILP's columns, size and outcome (the ``solver.mixed`` block; its time is printed by
    ``benchmarks/plan_speed.py``, not written, so equal inputs give equal plans)."""
    assert s.milp_size is not None
    return MixedSolver(
        status=s.mixed.status if s.mixed is not None else "no cheaper mix",
        **s.milp_size,
        columns=(
            f"heuristic: every aggregated type; of the combos, the Cauchy optimum's, the {MIX_COLUMNS} best by "
            f"goodput per $ and the {BUCKET_COLUMNS} best per bucket by per-bucket capacity per $ among the "
            f"{POOL} best by goodput per $"
        ),
        bound="only deployments cheaper than both the Cauchy and the Mélange optimum are sought",
        **({"note": s.note} if s.note else {}),
    )


def _bucket(prompt_lo: float, prompt_hi: float, output_lo: float, output_hi: float, share: float) -> BucketShare:
    inf = math.inf
    return BucketShare(
        float(prompt_lo),
        inf if math.isinf(prompt_hi) else float(prompt_hi),
        float(output_lo),
        inf if math.isinf(output_hi) else float(output_hi),
        rnd(share, 4),
    )


def _mixed_units(planner: Planner, plan: MixedPlan) -> tuple[tuple[ComboUnit, ...], tuple[AggregatedUnit, ...]]:
    """The combos and aggregated instances of a mixed plan: each with the request-size buckets it serves (share of
    all traffic) and its traffic share; combos' latencies predicted at the load they carry."""
    req = planner.req
    tokens = sum(planner.token_means)
    combos, instances = [], []
    for u in plan.serving():
        unit, n = plan.units[u], plan.counts[u]
        shares = plan.bucket_shares(u)
        buckets = tuple(
            _bucket(b.prompt_lo, b.prompt_hi, b.output_lo, b.output_hi, share)
            for b, share in sorted(zip(plan.buckets, shares, strict=True), key=lambda x: x[0].label)
            if share > 0
        )
        site = plan.sites[u] if plan.purchase is not None and plan.sites else ""
        util = plan.load(u) / n
        if unit.combo is not None:
            combo = unit.combo.combo
            served = [i for i, sh in enumerate(shares) if sh > 0]
            batch = min([unit.combo.decode_batch[i] for i in served if unit.combo.decode_batch[i] > 0]
                        + ([combo.decode_batch] if plan.mix[u] > 0 else []), default=combo.decode_batch)  # fmt: skip
            load = req.goodput_req_per_s * sum(shares) / n
            row = replace(
                combo_unit(req, planner.cands, combo, n, load, tokens), decode_batch=max(1, batch),
                utilization=rnd(util, 4),
            )  # fmt: skip
            if plan.purchase is not None:
                row = _placed(row, plan.purchase, combo, site, site, tokens)  # mixed plans stay at one site
            combos.append(replace(row, traffic_share=rnd(sum(shares), 4), buckets=buckets))
        else:
            t = unit.instance
            assert t is not None
            usd, instance_type, owned = t.usd_per_hour, "", False
            if plan.purchase is not None:
                where = plan.purchase.where(site, t.gpu, t.tp)
                offer = where.offers[0][0] if where is not None and where.offers else None
                instance_type, owned = (offer.instance_type if offer else ""), bool(offer and offer.owned)
                if where is not None and where.offers:
                    k = sum(m for _, m in where.offers)
                    usd = t.tp * sum(o.usd_per_gpu_hour * m for o, m in where.offers) / k
            instances.append(
                AggregatedUnit(
                    gpu=str(t.gpu), tp=int(t.tp), count=int(n), usd_per_hour=rnd(usd), utilization=rnd(util, 4),
                    traffic_share=rnd(sum(shares), 4), buckets=buckets, site=str(site),
                    instance_type=str(instance_type), owned=owned,
                )
            )  # fmt: skip
    return tuple(combos), tuple(instances)


def purchase_lines(bought: Purchased) -> tuple[Purchase, ...]:
    """The purchase lines: one per offer bought or owned nodes used; Σ count x usd_per_hour_each equals the plan's
    total_usd_per_hour."""
    return tuple(
        Purchase(
            str(p.provider),
            str(p.instance_type),
            str(p.region),
            str(p.gpu),
            int(p.gpus_per_instance),
            int(p.count),
            bool(p.owned),
            float(p.usd_per_hour_each),
            int(p.gpus_used),
        )  # fmt: skip
        for p in bought.lines
    )


def _role_offer(bought: Purchased, site: str, gpu: str, tp: int) -> tuple[str, bool]:
    place = bought.where(site, gpu, tp)
    if place is None or not place.offers:
        return "", False
    offer = place.offers[0][0]  # the offer that hosts most of them
    return offer.instance_type, offer.owned


def _placed(unit: ComboUnit, bought: Purchased, combo: Combo, site: str, decode_site: str, tokens: float) -> ComboUnit:
    """``unit`` placed: its site (the prefill role's), instance types, $/hour share and, for a cross-site combo
    (``--allow-cross-provider``), the decode role's site and the egress it pays; tokens/USD at the price its GPUs
    are bought at (owned nodes: their amortised price), not the ranking price :func:`combo_unit` starts from."""
    p_type, p_owned = _role_offer(bought, site, combo.prefill_gpu, combo.prefill_tp)
    d_type, d_owned = _role_offer(bought, decode_site, combo.decode_gpu, combo.decode_tp)
    cost = 0.0
    for gpu, tp, n, where in ((combo.prefill_gpu, combo.prefill_tp, combo.n_prefill, site),
                              (combo.decode_gpu, combo.decode_tp, combo.n_decode, decode_site)):  # fmt: skip
        place = bought.where(where, gpu, tp)
        offers = place.offers if place is not None else ()
        k = sum(m for _, m in offers)
        cost += n * tp * (sum(o.usd_per_gpu_hour * m for o, m in offers) / k if k else 0.0)
    # the GPUs' share of the instances they run on; idle GPUs of a purchased instance are in the purchase lines
    paid = rnd(cost + combo.egress_usd_per_hour)
    cross = bool(combo.cross_site)
    return replace(
        unit,
        site=site,
        prefill_instance_type=p_type,
        decode_instance_type=d_type,
        usd_per_hour=paid,
        decode_site=decode_site if cross else "",
        cross_site=cross,
        egress_usd_per_hour=rnd(combo.egress_usd_per_hour) if cross else 0.0,
        prefill_owned=bool(p_owned),
        decode_owned=bool(d_owned),
        tokens_per_usd=rnd(3600 * combo.goodput_req_per_s * tokens / paid) if paid > 0 else None,
    )


def combo_unit(
    req: PlanRequest, cands: CandidateSet, combo: Combo, count: int, load: float, tokens: float
) -> ComboUnit:
    """One combo as a plan deploys it; latencies predicted with one copy carrying ``load`` req/s and tokens/USD from
    ``tokens`` (mean prompt + output tokens per request).

    A copy offered more than its capacity (a plan the verification's search for a cheaper plan sized below the
    target: negative headroom, held in simulation) has an unbounded M/G/n wait; its TTFT is predicted at capacity
    (the SLO quantile) and ``utilization`` above 1 says it is over (the plan holds no infinite number)."""
    lat = predicted_latency(req, cands, combo, min(load, combo.goodput_req_per_s * (1 - 1e-9)))
    return ComboUnit(
        prefill_gpu=combo.prefill_gpu,
        prefill_tp=combo.prefill_tp,
        n_prefill=combo.n_prefill,
        decode_gpu=combo.decode_gpu,
        decode_tp=combo.decode_tp,
        n_decode=combo.n_decode,
        count=count,
        usd_per_hour=rnd(combo.usd_per_hour),
        goodput_req_per_s=rnd(combo.goodput_req_per_s),
        # a combo at $0/h (owned GPUs priced at $0): not defined
        tokens_per_usd=rnd(3600 * combo.goodput_req_per_s * tokens / combo.usd_per_hour)
        if combo.usd_per_hour > 0
        else None,
        bound_by=combo.bound_by,
        prefill_capacity_req_per_s=rnd(combo.prefill_rate_per_instance),
        decode_capacity_req_per_s=rnd(combo.decode_rate_per_instance),
        kv_transfer_capacity_req_per_s=rnd(combo.kv_transfer_rate),
        decode_batch=combo.decode_batch,
        predicted_ttft_s=rnd(lat["ttft_s"], 4),
        predicted_tpot_s=rnd(lat["tpot_s"], 4),
        utilization=rnd(load / combo.goodput_req_per_s, 4),
    )


def _melange_instances(plan: MelangePlan) -> tuple[AggregatedUnit, ...]:
    load = plan.type_load()
    rows = []
    for g, (t, n) in enumerate(zip(plan.types, plan.counts, strict=True)):
        if not n:
            continue
        served: dict[str, tuple[Bucket, float]] = {}
        for b, row in enumerate(plan.assignment):
            if row[g]:
                bucket = plan.buckets[b]
                prev = served.get(bucket.label, (bucket, 0.0))[1]
                served[bucket.label] = (bucket, prev + bucket.share * row[g] / plan.slices)
        site, instance_type, owned = "", "", False
        if plan.purchase is not None and plan.sites:
            site = plan.sites[g]
            where = plan.purchase.where(site, t.gpu, t.tp)
            offer = where.offers[0][0] if where is not None and where.offers else None
            instance_type, owned = (offer.instance_type if offer else ""), bool(offer and offer.owned)
        rows.append(
            AggregatedUnit(
                gpu=str(t.gpu),
                tp=int(t.tp),
                count=int(n),
                usd_per_hour=rnd(t.usd_per_hour),
                utilization=rnd(load[g] / n, 4),
                traffic_share=rnd(sum(share for _, share in served.values()), 4),
                # in label order (the order the simulator's router has always read them in)
                buckets=tuple(
                    _bucket(b.prompt_lo, b.prompt_hi, b.output_lo, b.output_hi, share)
                    for _, (b, share) in sorted(served.items())
                ),
                site=str(site),
                instance_type=str(instance_type),
                owned=owned,
            )
        )
    return tuple(rows)


__all__ = ["Deployed", "combo_unit", "deployed", "mixed_solver", "purchase_lines", "strategy_result"]
