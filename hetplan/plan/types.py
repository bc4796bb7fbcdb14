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

from collections.abc import Mapping
from dataclasses import dataclass, field

from hetplan.catalog.schemas import GpuSpec, ModelSpec
from hetplan.errors import InputError
from hetplan.perf.settings import PerfSettings
from hetplan.plan.blocks import (
    Analysis,
    CascadeSettings,
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
from hetplan.plan.deployment import AggregatedUnit, ComboUnit, Purchase

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
        cascade: CASCADE's calibrated settings (``hetplan calibrate``, or a verification under CASCADE), typed
            and checked when the plan is read (:func:`hetplan.plan.docblocks.cascade_of` names a bad field);
            None: none.
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
    cascade: CascadeSettings | None = None
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
    "Plan",
    "Price",
    "Provenance",
    "ResolvedGpu",
    "ResolvedModel",
    "Slo",
    "StrategyResult",
]
