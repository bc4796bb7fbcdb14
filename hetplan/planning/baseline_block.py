"""The plan's ``homogeneous_baseline`` block: the homogeneous strategy's deployment and totals written in full
(:class:`~hetplan.plan.blocks.HomogeneousBaseline`), each row in the order the planner has always written it so
plan files keep their bytes.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from typing import Any

from hetplan.plan.blocks import BucketRow, ComboRow, HomogeneousBaseline, InstanceRow, PurchaseRow
from hetplan.plan.deployment import AggregatedUnit, BucketShare, ComboUnit
from hetplan.planning.deployed import Deployed


def _bucket_row(b: BucketShare) -> BucketRow:
    return BucketRow(
        prompt_tokens=[b.prompt_lo_tokens, None if math.isinf(b.prompt_hi_tokens) else b.prompt_hi_tokens],
        output_tokens=[b.output_lo_tokens, None if math.isinf(b.output_hi_tokens) else b.output_hi_tokens],
        share=b.share,
        label=b.label,
    )


def _combo_row(c: ComboUnit, placed: bool) -> ComboRow:
    fields: dict[str, Any] = {
        "prefill_gpu": c.prefill_gpu, "prefill_tp": c.prefill_tp, "n_prefill": c.n_prefill,
        "decode_gpu": c.decode_gpu, "decode_tp": c.decode_tp, "n_decode": c.n_decode, "count": c.count,
        "usd_per_hour": c.usd_per_hour, "goodput_req_per_s": c.goodput_req_per_s, "tokens_per_usd": c.tokens_per_usd,
        "bound_by": c.bound_by, "prefill_capacity_req_per_s": c.prefill_capacity_req_per_s,
        "decode_capacity_req_per_s": c.decode_capacity_req_per_s,
        "kv_transfer_capacity_req_per_s": c.kv_transfer_capacity_req_per_s, "decode_batch": c.decode_batch,
        "predicted_ttft_s": c.predicted_ttft_s, "predicted_tpot_s": c.predicted_tpot_s, "utilization": c.utilization,
    }  # fmt: skip
    if placed:
        fields.update(site=c.site, prefill_instance_type=c.prefill_instance_type,
                      decode_instance_type=c.decode_instance_type)  # fmt: skip
        if c.cross_site:
            fields.update(decode_site=c.decode_site, cross_site=True, egress_usd_per_hour=c.egress_usd_per_hour)
        if c.prefill_owned:
            fields.update(prefill_owned=True)
        if c.decode_owned:
            fields.update(decode_owned=True)
    if c.traffic_share is not None:
        fields.update(traffic_share=c.traffic_share, buckets=[_bucket_row(b) for b in c.buckets])
    return ComboRow(**fields)


def _instance_row(t: AggregatedUnit, placed: bool) -> InstanceRow:
    place: dict[str, Any] = {"site": t.site, "instance_type": t.instance_type, "owned": t.owned} if placed else {}
    return InstanceRow(
        role=t.role, gpu=t.gpu, tp=t.tp, count=t.count, **place, usd_per_hour=t.usd_per_hour,
        utilization=t.utilization, traffic_share=t.traffic_share, buckets=[_bucket_row(b) for b in t.buckets],
    )  # fmt: skip


def baseline_block(d: Deployed) -> HomogeneousBaseline:
    """The homogeneous baseline written in full (the plan's ``homogeneous_baseline``): ``d``'s deployment and totals."""
    fields: dict[str, Any] = {"gpu": d.gpu} if d.gpu is not None else {}
    fields.update(
        status=d.status, total_usd_per_hour=d.total_usd_per_hour, usd_per_month=d.usd_per_month,
        usd_per_million_tokens=d.usd_per_million_tokens, goodput_req_per_s=d.goodput_req_per_s,
        tokens_per_usd=d.tokens_per_usd, output_tokens_per_usd=d.output_tokens_per_usd, gpus_used=d.gpus_used,
        combos=[_combo_row(c, d.placed) for c in d.combos], instances=[_instance_row(t, d.placed) for t in d.instances],
    )  # fmt: skip
    if d.placed:
        fields.update(
            purchase=[PurchaseRow(**vars(p)) for p in d.purchase], rented_site=d.rented_site,
            sites_tried=list(d.sites_tried or ()),
        )  # fmt: skip
        if d.egress_usd_per_hour is not None:
            fields.update(egress_usd_per_hour=d.egress_usd_per_hour)
    if d.lower_bound_usd_per_hour is not None:
        fields.update(lower_bound_usd_per_hour=d.lower_bound_usd_per_hour)
    if d.assignment is not None:
        fields.update(assignment=d.assignment)
    return HomogeneousBaseline(**fields)


__all__ = ["baseline_block"]
