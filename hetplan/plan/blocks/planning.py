"""Typed blocks the planner writes besides the deployment: the solver's figures, the per-GPU homogeneous fleets,
the homogeneous baseline in full, the owned GPUs, the prefix-cache sizing, the weight-dtype search and the
analysis (price sensitivity, cost versus goodput). Money in $/hour, rates in req/s, latencies in seconds.

Source: hetplan's own reconstruction (what :mod:`hetplan.planning.document` and its helpers write).
"""

from __future__ import annotations

from pydantic import Field

from hetplan.plan.blocks.base import Block, Num


class MixedSolver(Block):
    """The mixed strategy's MILP: its columns, size and outcome (``solver.mixed``)."""

    status: str = ""
    aggregated_columns: int = 0
    combo_columns: int = 0
    variables: int = 0
    constraints: int = 0
    columns: str = ""
    bound: str = ""
    note: str | None = None


class SolverStats(Block):
    """The solver's figures: backend, status, MIP gap, the candidate set and how it was pruned."""

    backend: str = ""
    status: str | None = None
    mip_gap: Num = 0.0
    instance_options: int = 0
    combos_enumerated: int = 0
    combos_in_ilp: int = 0
    pruning: str = ""
    melange_buckets: int = 0
    melange_slices_per_bucket: int = 0
    mixed: MixedSolver | None = None


class GpuFleet(Block):
    """The cheapest fleet of one GPU type alone (``homogeneous_by_gpu``), or why none holds the target."""

    status: str = ""
    reason: str | None = None
    total_usd_per_hour: Num | None = None
    goodput_req_per_s: Num | None = None


class BucketRow(Block):
    """A request-size bucket a unit serves: ``[lo, hi)`` tokens (``hi`` None when open-ended) and its share."""

    prompt_tokens: list[Num | None] = Field(default_factory=list)
    output_tokens: list[Num | None] = Field(default_factory=list)
    share: Num = 0.0
    label: str = ""


class ComboRow(Block):
    """One combo of a deployment written in full (the homogeneous baseline's)."""

    prefill_gpu: str = ""
    prefill_tp: int = 1
    n_prefill: int = 1
    decode_gpu: str = ""
    decode_tp: int = 1
    n_decode: int = 1
    count: int = 1
    usd_per_hour: Num = 0.0
    goodput_req_per_s: Num = 0.0
    tokens_per_usd: Num | None = None
    bound_by: str = ""
    prefill_capacity_req_per_s: Num = 0.0
    decode_capacity_req_per_s: Num = 0.0
    kv_transfer_capacity_req_per_s: Num = 0.0
    decode_batch: int = 0
    predicted_ttft_s: Num = 0.0
    predicted_tpot_s: Num = 0.0
    utilization: Num = 0.0
    site: str = ""
    prefill_instance_type: str = ""
    decode_instance_type: str = ""
    decode_site: str = ""
    cross_site: bool = False
    egress_usd_per_hour: Num = 0.0
    prefill_owned: bool = False
    decode_owned: bool = False
    traffic_share: Num | None = None
    buckets: list[BucketRow] = Field(default_factory=list)


class InstanceRow(Block):
    """One aggregated instance type of a deployment written in full."""

    role: str = "aggregated"
    gpu: str = ""
    tp: int = 1
    count: int = 1
    site: str = ""
    instance_type: str = ""
    owned: bool = False
    usd_per_hour: Num = 0.0
    utilization: Num = 0.0
    traffic_share: Num = 0.0
    buckets: list[BucketRow] = Field(default_factory=list)


class PurchaseRow(Block):
    """One purchase line of a deployment written in full."""

    provider: str = ""
    instance_type: str = ""
    region: str = ""
    gpu: str = ""
    gpus_per_instance: int = 0
    count: int = 0
    owned: bool = False
    usd_per_hour_each: Num = 0.0
    gpus_used: int = 0


class HomogeneousBaseline(Block):
    """The best homogeneous fleet in full (``homogeneous_baseline``), why none holds the target (``reason``), or
    that it was not solved (a re-size attempt)."""

    gpu: str | None = None
    status: str = ""
    reason: str | None = None
    total_usd_per_hour: Num | None = None
    usd_per_month: Num | None = None
    usd_per_million_tokens: Num | None = None
    goodput_req_per_s: Num | None = None
    tokens_per_usd: Num | None = None
    output_tokens_per_usd: Num | None = None
    gpus_used: dict[str, int] = Field(default_factory=dict)
    combos: list[ComboRow] = Field(default_factory=list)
    instances: list[InstanceRow] = Field(default_factory=list)
    purchase: list[PurchaseRow] = Field(default_factory=list)
    rented_site: str | None = None
    sites_tried: list[str] = Field(default_factory=list)
    egress_usd_per_hour: Num | None = None
    lower_bound_usd_per_hour: Num | None = None
    assignment: str | None = None


class SloMiss(Block):
    """The SLO an owned GPU type misses even idle: which, its value and the best it reaches (seconds)."""

    slo: str = ""
    slo_s: Num | None = None
    best_s: Num | None = None
    layout: str | None = None
    also: SloMiss | None = None


class RelaxedSlo(Block):
    """The smallest SLO change (seconds) at which an idle owned type would hold ``goodput_req_per_s`` alone."""

    ttft_s: Num | None = None
    tpot_s: Num | None = None
    goodput_req_per_s: Num | None = None


class OwnedGpu(Block):
    """One owned GPU type: GPUs ``owned``, ``used`` and ``idle``; for idle ones why (:mod:`hetplan.planning.owned`)."""

    owned: int = 0
    used: int = 0
    idle: int = 0
    alone_req_per_s: Num | None = None
    alone_combo: str | None = None
    binding: SloMiss | None = None
    relaxed: RelaxedSlo | None = None
    idle_reason: str | None = None


class ReuseRate(Block):
    """One instance type's prefix-cache sizing: its cache (tokens) and token hit rate (0-1)."""

    gpu: str = ""
    tp: int = 1
    cache_tokens: int | None = None
    token_hit_rate: Num = 0.0


class WithoutReuse(Block):
    """The same strategy solved with every prompt computed whole: its cost and GPUs, or why it is infeasible."""

    status: str | None = None
    reason: str | None = None
    cost_per_hour: Num | None = None
    gpus_used: dict[str, int] = Field(default_factory=dict)
    extra_cost: Num | None = None


class PrefixCache(Block):
    """The plan's ``prefix_cache`` record (:mod:`hetplan.planning.prefix`): the reuse sizing assumed, the hit rates
    of the instance types that prefill in the plan and the plan without reuse."""

    source: str = ""
    method: str = ""
    block_tokens: int = 0
    by_instance: list[ReuseRate] = Field(default_factory=list)
    plan_token_hit_rate: list[ReuseRate] = Field(default_factory=list)
    with_reuse_cost_per_hour: Num | None = None
    without_reuse: WithoutReuse | None = None


class DtypeTry(Block):
    """One (engine, weight dtype) of a weight-dtype search: its cost, or why it is infeasible; ``chosen`` marks
    the plan kept. ``engine`` is set only when several engines were searched."""

    engine: str | None = None
    weight_dtype: str = ""
    kv_dtype: str = ""
    status: str = ""
    strategy: str = ""
    total_usd_per_hour: Num | None = None
    reason: str | None = None
    chosen: bool = False
    gpus: list[str] = Field(default_factory=list)


class PriceSensitivity(Block):
    """One GPU type's price moved by ``price_factor``: the plan's cost then, the re-optimised cost and GPUs, and
    the best other strategy."""

    gpu: str = ""
    price_factor: Num = 1.0
    plan_usd_per_hour: Num | None = None
    replanned_usd_per_hour: Num | None = None
    replanned_gpus_used: dict[str, int] | None = None
    best_alternative: str | None = None
    best_alternative_usd_per_hour: Num | None = None


class CostPoint(Block):
    """One point of the cost-versus-goodput curve: each strategy's $/hour at ``goodput_req_per_s`` (None where
    infeasible)."""

    goodput_req_per_s: Num = 0.0
    cauchy_usd_per_hour: Num | None = None
    homogeneous_usd_per_hour: Num | None = None
    melange_usd_per_hour: Num | None = None
    mixed_usd_per_hour: Num | None = None

    def usd_per_hour(self, strategy: str) -> Num | None:
        """The $/hour of ``strategy`` at this point (None: infeasible or not solved)."""
        return {
            "cauchy": self.cauchy_usd_per_hour,
            "homogeneous": self.homogeneous_usd_per_hour,
            "melange": self.melange_usd_per_hour,
            "mixed": self.mixed_usd_per_hour,
        }.get(strategy)


class Analysis(Block):
    """The plan's ``analysis``: price sensitivity and cost versus goodput target."""

    price_sensitivity: list[PriceSensitivity] = Field(default_factory=list)
    cost_vs_goodput: list[CostPoint] = Field(default_factory=list)


__all__ = [
    "Analysis",
    "BucketRow",
    "ComboRow",
    "CostPoint",
    "DtypeTry",
    "GpuFleet",
    "HomogeneousBaseline",
    "InstanceRow",
    "MixedSolver",
    "OwnedGpu",
    "PrefixCache",
    "PriceSensitivity",
    "PurchaseRow",
    "RelaxedSlo",
    "ReuseRate",
    "SloMiss",
    "SolverStats",
    "WithoutReuse",
]
