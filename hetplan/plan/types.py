"""The typed plan: one frozen object that every stage after the planner reads.

A :class:`Plan` carries, as data rather than names, everything emitters, the simulator, reports, gates and the
autoscaler need: the resolved model architecture and GPU entries (from the catalog, a ``config.json``, a profile
or a price file, each with where it came from), the full :class:`~hetplan.perf.settings.PerfSettings`, the
engine, Mélange buckets as numbers, the deployment units, the other strategies' outcomes, the verification
block and provenance (hetplan version, catalog and workload SHA-256). No later stage looks a name up in the
catalog again: a plan made for a profiled GPU the catalog lacks, or for a local ``config.json`` model, emits and
simulates as it planned.

The plan itself is a plain frozen dataclass; the blocks the later stages do not decide on (the verification, the
price-sensitivity analysis, solver statistics, per-GPU homogeneous results, owned GPUs, ...) are typed pydantic
blocks (:mod:`hetplan.plan.blocks`), each written back exactly as read, so a plan file round-trips.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from hetplan.catalog.schemas import GpuSpec, ModelSpec
from hetplan.errors import InputError
from hetplan.perf.settings import PerfSettings
from hetplan.plan.blocks import (
    Analysis,
    ClassSlo,
    DeploymentRules,
    DtypeTry,
    GpuFleet,
    HomogeneousBaseline,
    OwnedGpu,
    PrefixCache,
    ProfileRecord,
    PruneWith,
    SolverStats,
    Verification,
    WanLink,
    WorkloadSummary,
)

#: Hours in the month that ``usd_per_month`` figures use (365 x 24 / 12, rounded).
HOURS_PER_MONTH = 730.0
#: The strategies ``hetplan plan`` solves (each has a solver in :data:`hetplan.planning.solve.SOLVERS`).
STRATEGIES = ("cauchy", "homogeneous", "melange", "mixed")
#: The engine the emitters deploy, and the one the performance model imitates.
DEFAULT_ENGINE = "vllm"


@dataclass(frozen=True)
class ResolvedModel:
    """The model architecture a plan was made for, and where it came from.

    Attributes:
        spec: the architecture (a catalog entry or one read from a Hugging Face ``config.json``).
        source: ``"catalog"`` or ``"config.json"``.
        path: for ``config.json`` models, the file as given when planning (kept for the record only: later
            stages use ``spec`` and never read the file again).
    """

    spec: ModelSpec
    source: str = "catalog"
    path: str | None = None


@dataclass(frozen=True)
class ResolvedGpu:
    """One GPU entry a plan considered, with where it came from (``"catalog"`` or ``"profile"``, the latter with
    the profile's file name in ``path``)."""

    spec: GpuSpec
    source: str = "catalog"
    path: str | None = None


@dataclass(frozen=True)
class Provenance:
    """What a plan was made from: hetplan's version, the SHA-256 of the catalog files (gpus, models, prices, in
    that order), of the workload (the trace file's bytes, or the synthetic workload's settings) and of the perf
    calibration file (``hetplan calibrate-perf``; None without one)."""

    hetplan_version: str
    catalog_sha256: str
    workload_sha256: str | None = None
    perf_calibration_sha256: str | None = None


@dataclass(frozen=True)
class Slo:
    """Latency SLOs: TTFT and TPOT in seconds, held at ``percentile`` (0-100)."""

    ttft_s: float
    tpot_s: float
    percentile: float


@dataclass(frozen=True)
class Price:
    """The $/GPU-hour a plan priced one GPU type at, and its source (catalog row or user file)."""

    usd_per_gpu_hour: float
    source: str


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


@dataclass(frozen=True)
class StrategyResult:
    """Another strategy's optimum (a baseline): its totals, or why it is infeasible."""

    status: str
    reason: str | None = None
    total_usd_per_hour: float | None = None
    goodput_req_per_s: float | None = None
    tokens_per_usd: float | None = None
    output_tokens_per_usd: float | None = None
    gpus_used: Mapping[str, int] | None = None
    gpu: str | None = None
    lower_bound_usd_per_hour: float | None = None


@dataclass(frozen=True)
class Plan:
    """A deployment plan (see the module docstring). Money in $/hour, rates in req/s, latencies in seconds.

    Attributes:
        strategy: ``cauchy``, ``homogeneous`` or ``melange``.
        status: ``optimal`` or ``time_limit`` (the MILP stopped at its time limit with an incumbent).
        name: the scenario's name.
        model: the resolved model. weight_dtype / kv_dtype: as planned.
        engine: the serving engine the plan is for (``vllm``).
        gpus: every GPU entry the planner considered, resolved, by canonical name.
        settings: the performance model's and engine's settings, all fields.
        slo / goodput_target_req_per_s / demand_req_per_s / headroom: what the plan must hold.
        prices: $/GPU-hour per GPU type, with sources. inventory: GPUs per type the plan may use.
        tp_options: the TP degrees considered.
        combos / instances: the deployment (disaggregated combos, or aggregated instances).
        total_usd_per_hour / usd_per_month (:data:`HOURS_PER_MONTH` hours) / goodput_req_per_s / gpus_used /
            tokens_per_usd / output_tokens_per_usd: its totals.
        baselines: the other strategies' optima. verification: the simulated check, when one ran.
        warnings: what the planner warned about. provenance: see :class:`Provenance`.
        gpu: the one GPU type of a homogeneous plan. usd_per_million_tokens / lower_bound_usd_per_hour (Mélange's
            LP bound) / tokens_per_usd_basis: more totals. rented_site / sites_tried / egress_usd_per_hour: where
            the purchase rents (``sites_tried`` None: no purchase layer). assignment: a mixed plan's routing by
            request size, in words. strategy_requested / shape_won: ``--strategy all`` and why the shape won.
        homogeneous_baseline / homogeneous_by_gpu / owned_gpus / gains (``gain_over_<strategy>``, 0-1, None where
            not comparable) / solver / prefix_cache / analysis / quality_note / dtype_search / autoscaling:
            the planner's other records (:mod:`hetplan.plan.blocks`); None (empty) where the plan has none.
        cascade: CASCADE's calibrated settings (``hetplan calibrate``) as written (None: none), checked where
            they are read (:func:`hetplan.sim.run.cascade_block`, whose messages name the bad field).
        workload / max_ratio / deployment / classes / cross_provider / model_config_path / profiles / prune_with:
            the scenario echo's other fields (the workload summary, the deployment rules, request classes, the WAN
            link, a local ``config.json``'s path, ``--profile`` records, the A1/A2 pruning fit).
    """

    strategy: str
    status: str
    name: str
    model: ResolvedModel
    weight_dtype: str
    kv_dtype: str
    gpus: Mapping[str, ResolvedGpu]
    settings: PerfSettings
    slo: Slo
    goodput_target_req_per_s: float
    demand_req_per_s: float
    headroom: float
    prices: Mapping[str, Price]
    inventory: Mapping[str, int]
    tp_options: tuple[int, ...]
    total_usd_per_hour: float
    usd_per_month: float
    goodput_req_per_s: float
    gpus_used: Mapping[str, int]
    tokens_per_usd: float
    output_tokens_per_usd: float
    provenance: Provenance
    combos: tuple[ComboUnit, ...] = ()
    instances: tuple[AggregatedUnit, ...] = ()
    baselines: Mapping[str, StrategyResult] = field(default_factory=dict)
    verification: Verification | None = None
    warnings: tuple[str, ...] = ()
    engine: str = DEFAULT_ENGINE
    purchase: tuple[Purchase, ...] = ()
    gpu_only: str | None = None
    usd_per_million_tokens: float | None = None
    lower_bound_usd_per_hour: float | None = None
    tokens_per_usd_basis: str | None = None
    rented_site: str | None = None
    sites_tried: tuple[str, ...] | None = None
    egress_usd_per_hour: float | None = None
    assignment: str | None = None
    strategy_requested: str | None = None
    shape_won: str | None = None
    homogeneous_baseline: HomogeneousBaseline | None = None
    homogeneous_by_gpu: Mapping[str, GpuFleet] | None = None
    owned_gpus: Mapping[str, OwnedGpu] | None = None
    gains: Mapping[str, float | None] = field(default_factory=dict)
    solver: SolverStats | None = None
    prefix_cache: PrefixCache | None = None
    analysis: Analysis | None = None
    quality_note: str | None = None
    dtype_search: tuple[DtypeTry, ...] | None = None
    autoscaling: str | None = None
    cascade: object = None
    workload: WorkloadSummary | None = None
    max_ratio: float | None = None
    deployment: DeploymentRules | None = None
    classes: tuple[ClassSlo, ...] | None = None
    cross_provider: WanLink | None = None
    model_config_path: str | None = None
    profiles: tuple[ProfileRecord, ...] | None = None
    prune_with: PruneWith | None = None

    @property
    def aggregated(self) -> bool:
        """True for plans of aggregated instances (Mélange), False for prefill/decode combos (mixed plans too)."""
        return not self.combos

    @property
    def mixed(self) -> bool:
        """True for plans with both combos and aggregated instances (the mixed strategy): requests are routed by
        size bucket to every unit."""
        return bool(self.combos) and bool(self.instances)

    def gpu(self, name: str) -> GpuSpec:
        """The resolved entry of GPU ``name`` (canonical name, as the plan writes it).

        Raises:
            InputError: the plan has no entry for ``name`` (a hand-edited plan naming a GPU it never considered).
        """
        found = self.gpus.get(name)
        if found is None:
            raise InputError(
                f"plan names GPU {name!r} but records no entry for it",
                f"the plan's resolved GPUs are: {', '.join(sorted(self.gpus)) or 'none'}",
                "re-plan with 'hetplan plan ... --out plan.json' instead of editing GPU names by hand",
            )
        return found.spec

    def used_gpu_names(self) -> tuple[str, ...]:
        """GPU types the deployment runs, in first-use order."""
        names = [n for c in self.combos for n in (c.prefill_gpu, c.decode_gpu)] + [t.gpu for t in self.instances]
        return tuple(dict.fromkeys(names))


__all__ = [
    "DEFAULT_ENGINE",
    "HOURS_PER_MONTH",
    "STRATEGIES",
    "AggregatedUnit",
    "BucketShare",
    "ComboUnit",
    "Plan",
    "Price",
    "Provenance",
    "Purchase",
    "ResolvedGpu",
    "ResolvedModel",
    "Slo",
    "StrategyResult",
    "bucket_label",
    "combo_label",
]
