"""The deployment units of a plan document (combos, aggregated instances, request-size buckets, purchase lines,
other strategies' summaries) to and from :mod:`hetplan.plan.types`'s dataclasses: the part of
:mod:`hetplan.plan.doc` that converts them, each checked and named by where it sits.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from hetplan.catalog.loader import format_validation
from hetplan.errors import InputError
from hetplan.plan.deployment import AggregatedUnit, BucketShare, ComboUnit, Purchase
from hetplan.plan.schema import FIX, BucketDoc
from hetplan.plan.types import StrategyResult

COMBO_FIELDS = (
    "prefill_gpu", "prefill_tp", "n_prefill", "decode_gpu", "decode_tp", "n_decode", "count", "usd_per_hour",
    "goodput_req_per_s", "tokens_per_usd", "bound_by", "prefill_capacity_req_per_s", "decode_capacity_req_per_s",
    "kv_transfer_capacity_req_per_s", "decode_batch", "predicted_ttft_s", "predicted_tpot_s", "utilization",
    "min_count", "prefill_pp", "decode_pp", "site", "prefill_instance_type", "decode_instance_type", "prefill_owned",
    "decode_owned", "decode_site", "cross_site", "egress_usd_per_hour",
)  # fmt: skip
COMBO_OPTIONAL = {
    "min_count": None, "prefill_pp": 1, "decode_pp": 1, "site": "", "prefill_instance_type": "",
    "decode_instance_type": "", "prefill_owned": False, "decode_owned": False, "decode_site": "",
    "cross_site": False, "egress_usd_per_hour": 0.0,
}  # fmt: skip  # written only when set
PURCHASE_FIELDS = (
    "provider", "instance_type", "region", "gpu", "gpus_per_instance", "count", "owned", "usd_per_hour_each",
    "gpus_used",
)  # fmt: skip


def _hi(x: float) -> float | None:
    return None if math.isinf(x) else x


def summary_doc(s: StrategyResult) -> dict[str, Any]:
    """Another strategy's outcome as the document writes it: its totals, or why it is infeasible."""
    if s.status == "infeasible":
        return {"status": "infeasible", "reason": s.reason}
    doc: dict[str, Any] = {
        "status": s.status,
        "total_usd_per_hour": s.total_usd_per_hour,
        "goodput_req_per_s": s.goodput_req_per_s,
        "tokens_per_usd": s.tokens_per_usd,
        "output_tokens_per_usd": s.output_tokens_per_usd,
        "gpus_used": dict(s.gpus_used or {}),
    }
    if s.gpu is not None:
        doc["gpu"] = s.gpu
    if s.lower_bound_usd_per_hour is not None:
        doc["lower_bound_usd_per_hour"] = s.lower_bound_usd_per_hour
    return doc


def combo_doc(c: ComboUnit) -> dict[str, Any]:
    """One combo as the document writes it: the optional fields only when set, a mixed plan's buckets last."""
    return {
        **{k: getattr(c, k) for k in COMBO_FIELDS if k not in COMBO_OPTIONAL or getattr(c, k) != COMBO_OPTIONAL[k]},
        **({"traffic_share": c.traffic_share} if c.traffic_share is not None else {}),
        **({"buckets": [bucket_doc(b) for b in c.buckets]} if c.buckets else {}),
    }


def instance_doc(t: AggregatedUnit) -> dict[str, Any]:
    """One aggregated instance type as the document writes it (``pp`` and the placement only when set)."""
    return {
        "role": t.role,
        "gpu": t.gpu,
        "tp": t.tp,
        "count": t.count,
        "usd_per_hour": t.usd_per_hour,
        "utilization": t.utilization,
        "traffic_share": t.traffic_share,
        **({"pp": t.pp} if t.pp != 1 else {}),
        **({"site": t.site, "instance_type": t.instance_type, "owned": t.owned} if t.site else {}),
        "buckets": [bucket_doc(b) for b in t.buckets],
    }


def purchase_doc(p: Purchase) -> dict[str, Any]:
    """One purchase line as the document writes it."""
    return {k: getattr(p, k) for k in PURCHASE_FIELDS}


def bucket_doc(b: BucketShare) -> dict[str, Any]:
    return {
        "prompt_tokens": [b.prompt_lo_tokens, _hi(b.prompt_hi_tokens)],
        "output_tokens": [b.output_lo_tokens, _hi(b.output_hi_tokens)],
        "share": b.share,
        "label": b.label,
    }


def combo_of(c: Mapping[str, Any], where: str = "plan combos[]") -> ComboUnit:
    kw: dict[str, Any] = {k: c[k] for k in COMBO_FIELDS if k in c}
    if c.get("buckets"):  # a mixed plan's combo: the request-size buckets it serves
        kw["buckets"] = buckets_of(c["buckets"], where)
    if c.get("traffic_share") is not None:
        kw["traffic_share"] = float(c["traffic_share"])
    return ComboUnit(**kw)


def purchase_of(p: Any, where: str) -> Purchase:
    try:
        return Purchase(
            str(p["provider"]), str(p["instance_type"]), str(p.get("region", "")), str(p["gpu"]),
            int(p["gpus_per_instance"]), int(p["count"]), bool(p["owned"]), float(p["usd_per_hour_each"]),
            int(p.get("gpus_used", 0)),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{where} is not a purchase line", f"{type(exc).__name__}: {exc}", FIX) from None


def instance_of(t: Mapping[str, Any], where: str) -> AggregatedUnit:
    buckets = buckets_of(t.get("buckets") or [], where)
    return AggregatedUnit(
        gpu=str(t["gpu"]),
        tp=int(t["tp"]),
        count=int(t["count"]),
        usd_per_hour=float(t["usd_per_hour"]),
        utilization=float(t["utilization"]),
        traffic_share=float(t["traffic_share"]),
        buckets=buckets,
        role=str(t.get("role", "aggregated")),
        pp=int(t.get("pp", 1)),
        site=str(t.get("site", "")),
        instance_type=str(t.get("instance_type", "")),
        owned=bool(t.get("owned", False)),
    )


def buckets_of(raw: Any, where: str) -> tuple[BucketShare, ...]:
    """The ``buckets`` list of an instance type (or a mixed plan's combo), checked."""
    if isinstance(raw, Mapping):  # written by a v1 plan: labels, parsed by upgrade_v1 already
        raise InputError(f"{where}.buckets is a mapping of labels", fix=FIX)
    buckets = []
    for j, b in enumerate(raw):
        try:
            bd = BucketDoc.model_validate({k: v for k, v in b.items() if k != "label"})
        except (ValidationError, AttributeError) as exc:
            detail = format_validation(exc) if isinstance(exc, ValidationError) else "not a mapping"
            raise InputError(f"{where}.buckets[{j}] is not a bucket", detail, FIX) from None
        inf = math.inf
        p_hi, o_hi = bd.prompt_tokens[1], bd.output_tokens[1]
        buckets.append(
            BucketShare(
                float(bd.prompt_tokens[0]),
                inf if p_hi is None else float(p_hi),
                float(bd.output_tokens[0]),
                inf if o_hi is None else float(o_hi),
                float(bd.share),
            )
        )
    return tuple(buckets)


def summary_of(v: Mapping[str, Any]) -> StrategyResult:
    return StrategyResult(
        status=str(v["status"]),
        reason=v.get("reason"),
        total_usd_per_hour=v.get("total_usd_per_hour"),
        goodput_req_per_s=v.get("goodput_req_per_s"),
        tokens_per_usd=v.get("tokens_per_usd"),
        output_tokens_per_usd=v.get("output_tokens_per_usd"),
        gpus_used=v.get("gpus_used"),
        gpu=v.get("gpu"),
        lower_bound_usd_per_hour=v.get("lower_bound_usd_per_hour"),
    )


__all__ = [
    "COMBO_FIELDS",
    "bucket_doc",
    "buckets_of",
    "combo_doc",
    "combo_of",
    "instance_doc",
    "instance_of",
    "purchase_doc",
    "purchase_of",
    "summary_doc",
    "summary_of",
]
