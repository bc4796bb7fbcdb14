"""What a typed plan (:class:`hetplan.plan.types.Plan`) deploys and buys: Cauchy combos (:class:`ComboUnit`),
aggregated instance types with the Mélange buckets they serve (:class:`AggregatedUnit`, :class:`BucketShare`), the
purchase lines (:class:`Purchase`), and the one label of a combo and of a bucket every output uses.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ComboUnit:
    """One Cauchy (or homogeneous) combo: ``n_prefill`` prefill and ``n_decode`` decode instances sharing one
    router, deployed ``count`` times. Capacities in req/s per instance (KV transfer: per combo copy); predicted
    latencies in seconds at the copy's planned load. ``min_count`` is set on autoscaling schedules only (the
    fewest copies over the schedule). Pipeline-parallel degrees (``prefill_pp``, ``decode_pp``) are 1 unless a
    plan file sets them. ``site`` is where the combo runs (its prefill role's site); a cross-site combo
    (``--allow-cross-provider``) has ``cross_site``, its decode role's ``decode_site`` and the WAN egress it pays
    (``egress_usd_per_hour``, part of ``usd_per_hour``). ``buckets`` / ``traffic_share``: set in mixed plans only
    (the request-size buckets the combo serves, as aggregated units list them; empty: it serves every request its
    router share sends)."""

    prefill_gpu: str
    prefill_tp: int
    n_prefill: int
    decode_gpu: str
    decode_tp: int
    n_decode: int
    count: int
    usd_per_hour: float
    goodput_req_per_s: float
    decode_batch: int
    predicted_ttft_s: float
    predicted_tpot_s: float
    utilization: float
    bound_by: str
    tokens_per_usd: float | None = None
    prefill_capacity_req_per_s: float = 0.0
    decode_capacity_req_per_s: float = 0.0
    kv_transfer_capacity_req_per_s: float = 0.0
    min_count: int | None = None
    prefill_pp: int = 1
    decode_pp: int = 1
    site: str = ""
    prefill_instance_type: str = ""
    decode_instance_type: str = ""
    prefill_owned: bool = False
    decode_owned: bool = False
    decode_site: str = ""
    cross_site: bool = False
    egress_usd_per_hour: float = 0.0
    buckets: tuple[BucketShare, ...] = ()
    traffic_share: float | None = None

    @property
    def label(self) -> str:
        """``"2x H100-SXM TP4 -> 3x A100-80GB-SXM TP2"``: the one combo label every output uses."""
        return combo_label(self.n_prefill, self.prefill_gpu, self.prefill_tp, self.n_decode, self.decode_gpu,
                           self.decode_tp)  # fmt: skip


def combo_label(
    n_prefill: int, prefill_gpu: str, prefill_tp: int, n_decode: int, decode_gpu: str, decode_tp: int
) -> str:
    """The label of a combo (see :attr:`ComboUnit.label`)."""
    return f"{n_prefill}x {prefill_gpu} TP{prefill_tp} -> {n_decode}x {decode_gpu} TP{decode_tp}"


@dataclass(frozen=True)
class BucketShare:
    """A Mélange request-size bucket an aggregated instance type serves: prompts in ``[prompt_lo_tokens,
    prompt_hi_tokens)`` and outputs in ``[output_lo_tokens, output_hi_tokens)`` (``inf`` for open-ended), and the
    share of all traffic (0-1) routed to this type from it."""

    prompt_lo_tokens: float
    prompt_hi_tokens: float
    output_lo_tokens: float
    output_hi_tokens: float
    share: float

    @property
    def label(self) -> str:
        """``"in 0-512, out 64-128"`` (``"in 8192+"`` when open-ended), as the Mélange solver names buckets."""
        return bucket_label(self.prompt_lo_tokens, self.prompt_hi_tokens, self.output_lo_tokens,
                            self.output_hi_tokens)  # fmt: skip


def bucket_label(prompt_lo: float, prompt_hi: float, output_lo: float, output_hi: float) -> str:
    """The label of a request-size bucket (see :attr:`BucketShare.label`)."""

    def rng(lo: float, hi: float) -> str:
        return f"{lo:g}+" if math.isinf(hi) else f"{lo:g}-{hi:g}"

    return f"in {rng(prompt_lo, prompt_hi)}, out {rng(output_lo, output_hi)}"


@dataclass(frozen=True)
class AggregatedUnit:
    """``count`` aggregated (prefill and decode in one engine) instances of ``gpu`` at TP ``tp``, serving the
    request-size ``buckets`` (Mélange); ``traffic_share`` is the share of all requests they take (0-1)."""

    gpu: str
    tp: int
    count: int
    usd_per_hour: float
    utilization: float
    traffic_share: float
    buckets: tuple[BucketShare, ...] = ()
    role: str = "aggregated"
    pp: int = 1
    site: str = ""
    instance_type: str = ""
    owned: bool = False


@dataclass(frozen=True)
class Purchase:
    """One line of what a plan buys (or uses of what the user owns): ``count`` instances of ``instance_type``
    from ``provider`` in ``region``, each with ``gpus_per_instance`` GPUs of ``gpu`` at ``usd_per_hour_each``
    (owned: the amortised price); ``gpus_used`` of their GPUs host serving instances (the rest are idle)."""

    provider: str
    instance_type: str
    region: str
    gpu: str
    gpus_per_instance: int
    count: int
    owned: bool
    usd_per_hour_each: float
    gpus_used: int = 0

    @property
    def usd_per_hour(self) -> float:
        """count x usd_per_hour_each."""
        return self.count * self.usd_per_hour_each


__all__ = ["AggregatedUnit", "BucketShare", "ComboUnit", "Purchase", "bucket_label", "combo_label"]
