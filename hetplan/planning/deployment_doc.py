"""The deployment part of a plan document: one strategy's outcome as the combos, aggregated instances, purchase
lines and totals the document writes (:func:`solved_doc`), another strategy's summary (:func:`summary_doc`) and
the mixed MILP's record (:func:`mixed_solver_doc`). Money in $/hour, rates in req/s, latencies in seconds; every
number rounded (:func:`hetplan.units.rnd`) so equal inputs give byte-identical documents.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from typing import Any

from hetplan.plan.deployment import bucket_label
from hetplan.plan.types import HOURS_PER_MONTH
from hetplan.planning.solve import Planner, Solved
from hetplan.solvers.cauchy import CandidateSet, Combo, PlanRequest, predicted_latency
from hetplan.solvers.melange import Bucket, MelangePlan
from hetplan.solvers.mixed import BUCKET_COLUMNS, MIX_COLUMNS, POOL, MixedPlan, describe
from hetplan.solvers.packing import Purchased
from hetplan.units import rnd


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
            "status": s.melange.status
            if s.melange is not None
            else s.mixed.status
            if s.mixed is not None
            else s.allocation.status
            if s.allocation
            else "infeasible",
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
    bought = s.purchase
    if bought is not None:
        doc["purchase"] = purchase_doc(bought)
        doc["rented_site"] = bought.rented_site or None
        doc["sites_tried"] = list(bought.sites_tried)
        if bought.unit_decode_sites:  # --allow-cross-provider: total = Σ purchase + the WAN egress
            doc["egress_usd_per_hour"] = rnd(bought.extra_usd_per_hour)
    if s.allocation is not None:
        alloc = s.allocation
        sites = alloc.sites or tuple("" for _ in alloc.combos)
        decode_sites = alloc.decode_sites or sites
        for (combo, count), site, dsite in zip(alloc.combos, sites, decode_sites, strict=True):
            # goodput-weighted round robin: each copy carries the target times its share of the capacity
            load = req.goodput_req_per_s * combo.goodput_req_per_s / alloc.goodput_req_per_s
            row = combo_doc(req, planner.cands, combo, count, load, sum(planner.token_means))
            if bought is not None:
                row.update(_combo_placement(bought, combo, site, dsite))
                # tokens/USD at the price the combo's GPUs are bought at (owned nodes: their amortised price),
                # not the ranking price combo_doc starts from
                paid = float(row["usd_per_hour"])
                tokens = sum(planner.token_means)
                row["tokens_per_usd"] = rnd(3600 * combo.goodput_req_per_s * tokens / paid) if paid > 0 else None
            doc["combos"].append(row)
    if s.melange is not None:
        doc["instances"] = _melange_instances(s.melange)
        doc["lower_bound_usd_per_hour"] = rnd(s.melange.lower_bound_usd_per_hour)
    if s.mixed is not None:
        doc.update(_mixed_units(planner, s.mixed))
    return doc


def mixed_solver_doc(s: Solved) -> dict[str, Any]:
    """The mixed MILP's columns, size and outcome (the ``solver.mixed`` block; its time is printed by
    ``benchmarks/plan_speed.py``, not written, so equal inputs give equal plans)."""
    assert s.milp_size is not None
    return {
        "status": s.mixed.status if s.mixed is not None else "no cheaper mix",
        **s.milp_size,
        "columns": (
            f"heuristic: every aggregated type; of the combos, the Cauchy optimum's, the {MIX_COLUMNS} best by "
            f"goodput per $ and the {BUCKET_COLUMNS} best per bucket by per-bucket capacity per $ among the "
            f"{POOL} best by goodput per $"
        ),
        "bound": "only deployments cheaper than both the Cauchy and the Mélange optimum are sought",
        **({"note": s.note} if s.note else {}),
    }


def _mixed_units(planner: Planner, plan: MixedPlan) -> dict[str, Any]:
    """The ``combos`` and ``instances`` of a mixed plan: each with the request-size buckets it serves (share of all
    traffic) and its traffic share; combos' latencies predicted at the load they carry."""
    req = planner.req
    combos, instances = [], []
    for u in plan.serving():
        unit, n = plan.units[u], plan.counts[u]
        shares = plan.bucket_shares(u)
        buckets = [
            {
                "prompt_tokens": [b.prompt_lo, None if math.isinf(b.prompt_hi) else b.prompt_hi],
                "output_tokens": [b.output_lo, None if math.isinf(b.output_hi) else b.output_hi],
                "share": rnd(share, 4),
                "label": bucket_label(b.prompt_lo, b.prompt_hi, b.output_lo, b.output_hi),
            }
            for b, share in sorted(zip(plan.buckets, shares, strict=True), key=lambda x: x[0].label)
            if share > 0
        ]
        site = plan.sites[u] if plan.purchase is not None and plan.sites else ""
        util = plan.load(u) / n
        if unit.combo is not None:
            combo = unit.combo.combo
            served = [i for i, sh in enumerate(shares) if sh > 0]
            batch = min([unit.combo.decode_batch[i] for i in served if unit.combo.decode_batch[i] > 0]
                        + ([combo.decode_batch] if plan.mix[u] > 0 else []), default=combo.decode_batch)  # fmt: skip
            load = req.goodput_req_per_s * sum(shares) / n
            row = combo_doc(req, planner.cands, combo, n, load, sum(planner.token_means))
            row["decode_batch"] = max(1, batch)
            row["utilization"] = rnd(util, 4)
            if plan.purchase is not None:
                row.update(_combo_placement(plan.purchase, combo, site, site))  # mixed plans stay at one site
                paid = float(row["usd_per_hour"])
                row["tokens_per_usd"] = (
                    rnd(3600 * combo.goodput_req_per_s * sum(planner.token_means) / paid) if paid > 0 else None
                )
            row["traffic_share"] = rnd(sum(shares), 4)
            row["buckets"] = buckets
            combos.append(row)
        else:
            t = unit.instance
            assert t is not None
            place: dict[str, Any] = {}
            usd = t.usd_per_hour
            if plan.purchase is not None:
                where = plan.purchase.where(site, t.gpu, t.tp)
                offer = where.offers[0][0] if where is not None and where.offers else None
                place = {"site": site, "instance_type": offer.instance_type if offer else "",
                         "owned": bool(offer and offer.owned)}  # fmt: skip
                if where is not None and where.offers:
                    k = sum(m for _, m in where.offers)
                    usd = t.tp * sum(o.usd_per_gpu_hour * m for o, m in where.offers) / k
            instances.append(
                {
                    "role": "aggregated", "gpu": t.gpu, "tp": t.tp, "count": n, **place,
                    "usd_per_hour": rnd(usd), "utilization": rnd(util, 4),
                    "traffic_share": rnd(sum(shares), 4), "buckets": buckets,
                }
            )  # fmt: skip
    return {"combos": combos, "instances": instances, "assignment": describe(plan)}


def purchase_doc(bought: Purchased) -> list[dict[str, Any]]:
    """The ``purchase`` list: one line per offer bought or owned nodes used; Σ count x usd_per_hour_each equals
    the plan's total_usd_per_hour."""
    return [
        {
            "provider": p.provider,
            "instance_type": p.instance_type,
            "region": p.region,
            "gpu": p.gpu,
            "gpus_per_instance": p.gpus_per_instance,
            "count": p.count,
            "owned": p.owned,
            "usd_per_hour_each": p.usd_per_hour_each,
            "gpus_used": p.gpus_used,
        }
        for p in bought.lines
    ]


def _role_offer(bought: Purchased, site: str, gpu: str, tp: int) -> tuple[str, bool]:
    place = bought.where(site, gpu, tp)
    if place is None or not place.offers:
        return "", False
    offer = place.offers[0][0]  # the offer that hosts most of them
    return offer.instance_type, offer.owned


def _combo_placement(bought: Purchased, combo: Combo, site: str, decode_site: str) -> dict[str, Any]:
    """Where one combo runs: its site (the prefill role's), instance types, $/hour share and, for a cross-site
    combo (``--allow-cross-provider``), the decode role's site, the WAN link and the egress it pays."""
    p_type, p_owned = _role_offer(bought, site, combo.prefill_gpu, combo.prefill_tp)
    d_type, d_owned = _role_offer(bought, decode_site, combo.decode_gpu, combo.decode_tp)
    out: dict[str, Any] = {"site": site, "prefill_instance_type": p_type, "decode_instance_type": d_type}
    cost = 0.0
    for gpu, tp, n, where in ((combo.prefill_gpu, combo.prefill_tp, combo.n_prefill, site),
                              (combo.decode_gpu, combo.decode_tp, combo.n_decode, decode_site)):  # fmt: skip
        place = bought.where(where, gpu, tp)
        offers = place.offers if place is not None else ()
        k = sum(m for _, m in offers)
        cost += n * tp * (sum(o.usd_per_gpu_hour * m for o, m in offers) / k if k else 0.0)
    # the GPUs' share of the instances they run on; idle GPUs of a purchased instance are in the purchase lines
    out["usd_per_hour"] = rnd(cost + combo.egress_usd_per_hour)
    if combo.cross_site:
        out["decode_site"] = decode_site
        out["cross_site"] = True
        out["egress_usd_per_hour"] = rnd(combo.egress_usd_per_hour)
    if p_owned:
        out["prefill_owned"] = True
    if d_owned:
        out["decode_owned"] = True
    return out


def combo_doc(
    req: PlanRequest, cands: CandidateSet, combo: Combo, count: int, load: float, tokens: float
) -> dict[str, Any]:
    """One combo's part of a plan document; latencies predicted with one copy carrying ``load`` req/s and
    tokens/USD from ``tokens`` (mean prompt + output tokens per request).

    A copy offered more than its capacity (a plan the verification's search for a cheaper plan sized below the
    target: negative headroom, held in simulation) has an unbounded M/G/n wait; its TTFT is predicted at capacity
    (the SLO quantile) and ``utilization`` above 1 says it is over (the document holds no infinite number)."""
    lat = predicted_latency(req, cands, combo, min(load, combo.goodput_req_per_s * (1 - 1e-9)))
    lat["utilization"] = load / combo.goodput_req_per_s
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
        "tokens_per_usd": rnd(3600 * combo.goodput_req_per_s * tokens / combo.usd_per_hour)
        if combo.usd_per_hour > 0
        else None,  # a combo at $0/h (owned GPUs priced at $0): not defined
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
        served: dict[str, tuple[Bucket, float]] = {}
        for b, row in enumerate(plan.assignment):
            if row[g]:
                bucket = plan.buckets[b]
                prev = served.get(bucket.label, (bucket, 0.0))[1]
                served[bucket.label] = (bucket, prev + bucket.share * row[g] / plan.slices)
        place: dict[str, Any] = {}
        if plan.purchase is not None and plan.sites:
            site = plan.sites[g]
            where = plan.purchase.where(site, t.gpu, t.tp)
            offer = where.offers[0][0] if where is not None and where.offers else None
            place = {
                "site": site,
                "instance_type": offer.instance_type if offer else "",
                "owned": bool(offer and offer.owned),
            }
        rows.append(
            {
                "role": "aggregated",
                "gpu": t.gpu,
                "tp": t.tp,
                "count": n,
                **place,
                "usd_per_hour": rnd(t.usd_per_hour),
                "utilization": rnd(load[g] / n, 4),
                "traffic_share": rnd(sum(share for _, share in served.values()), 4),
                # in label order (the order the simulator's router has always read them in)
                "buckets": [
                    {
                        "prompt_tokens": [b.prompt_lo, None if math.isinf(b.prompt_hi) else b.prompt_hi],
                        "output_tokens": [b.output_lo, None if math.isinf(b.output_hi) else b.output_hi],
                        "share": rnd(share, 4),
                        "label": bucket_label(b.prompt_lo, b.prompt_hi, b.output_lo, b.output_hi),
                    }
                    for _, (b, share) in sorted(served.items())
                ],
            }
        )
    return rows


__all__ = ["combo_doc", "mixed_solver_doc", "purchase_doc", "solved_doc", "summary_doc"]
