"""The raw outcome of one simulation run (:class:`SimResult`) and the typed documents made from it: the metrics of
a run (:class:`RunMetrics`, :mod:`hetplan.sim.metrics`), ``hetplan simulate``'s document (:class:`Simulation`), the
capacity search's (:class:`Capacity`), the closed loop's (:class:`ClosedLoop`) and ``hetplan calibrate``'s block
(:class:`CascadeCalibration`).

Each document is read by attribute; ``to_doc()`` gives the JSON-friendly dict ``--json`` prints, the fields in
their declaration order (optional blocks such as ``prefix_cache`` are left out when absent), and
``model_validate(doc)`` reads such a dict back.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator


@dataclass
class SimResult:
    """Raw outcome of a run; :mod:`hetplan.sim.metrics` turns it into metrics.

    Attributes:
        first_token_s / done_s: shape (n,), absolute times (NaN: never reached).
        dropped: shape (n,), bool: the request (prompt + output) fits no group's KV cache (a request too long for
            the group the router picked goes to the group with the most room instead).
        step_s / step_weight: per iteration, its duration and how many sequences produced a token in it that
            also produced their previous token on that instance (pooled ITL samples, token-weighted).
        entry_gap_s: ITL samples of tokens whose previous token came from elsewhere (transfer, preemption).
        busy_s: per instance, seconds spent in iterations. end_s: time of the last event.
        counters: events, iterations, preemptions, restores, recomputes, prefix-cache totals (``prefix_*``,
            :mod:`hetplan.sim.prefix`; only when prefix caching is on), tier-2 share statistics
            (``tier2_tokens`` / ``saturated_tokens``: Tier 2's prefill tokens and the token budget over the CASCADE
            iterations in which Tier 1 had more work than fitted).
        instance_names / instance_roles: per instance. preempted: request ids in the order they were preempted.
        over_context: shape (n,), bool: dropped because the prompt is longer than the model's context window
            (``context_tokens``); these are also set in ``dropped``.
        cut_off: the run stopped at the drain cut-off (``drain_s`` after the last arrival) with events pending.
        output_tokens: shape (n,), the output each request was served with (cut at the context window,
            :mod:`hetplan.workload.context`); empty: the stream's. arrival_s: shape (n,), the arrival times the run
            used (a closed loop makes them; empty: the stream's). truncated: outputs cut at the window.
    """

    first_token_s: np.ndarray
    done_s: np.ndarray
    dropped: np.ndarray
    step_s: np.ndarray
    step_weight: np.ndarray
    entry_gap_s: np.ndarray
    busy_s: np.ndarray
    end_s: float
    counters: dict[str, float] = field(default_factory=dict)
    instance_names: tuple[str, ...] = ()
    instance_roles: tuple[str, ...] = ()
    preempted: tuple[int, ...] = ()
    over_context: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cut_off: bool = False
    drain_s: float = 3600.0
    context_tokens: int = 0
    output_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    arrival_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    truncated: int = 0

    def __post_init__(self) -> None:
        if self.over_context.shape != self.dropped.shape:
            self.over_context = np.zeros(self.dropped.shape, dtype=bool)


def raw_result(sim: Simulator, end_s: float) -> SimResult:
    """The :class:`SimResult` of a finished run of ``sim`` (:meth:`hetplan.sim.engine.Simulator.run`), read off
    its per-request and per-instance state; ``end_s`` is the simulated time the run ended (at most its horizon)."""
    return SimResult(
        np.array(sim.first),
        np.array(sim.done),
        np.array(sim.dropped),
        np.array(sim.step_s, dtype=float),
        np.array(sim.step_w, dtype=np.int64),
        np.array(sim.entry_gap, dtype=float),
        np.array([x.busy_s for x in sim.insts]),
        end_s,
        dict(sim.counters),
        tuple(s.name for s in sim.dep.instances),
        tuple(s.role for s in sim.dep.instances),
        tuple(sim.preempted),
        np.array(sim.over_context, dtype=bool),
        sim.cut_off,
        sim.cfg.drain_s,
        sim.context_tokens,
        np.array(sim.out, dtype=np.int64),
        np.array(sim.arr, dtype=float),
        sim.truncated,
    )


def _absent(value: object) -> bool:
    """An optional block that is left out of the document when it is None."""
    return value is None


class Doc(BaseModel):
    """A typed, immutable document; ``to_doc()`` is the dict ``--json`` prints (keys in field order)."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    def to_doc(self) -> dict[str, Any]:
        """The JSON-friendly dict of this document (aliases as keys, e.g. ``class``)."""
        return self.model_dump(mode="python", by_alias=True)


class LatencyStats(Doc):
    """Mean and numpy-linear percentiles of one latency, seconds (None: no sample)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class Attainment(Doc):
    """Shares of requests that met the TTFT SLO, the TPOT SLO (of the eligible ones; None: none) and both."""

    ttft: float
    tpot: float | None
    joint: float


class ClassMetrics(Doc):
    """One request class's count, SLOs (s), attainment shares, goodput (req/s) and latencies."""

    name: str = Field(alias="class")
    requests: int
    ttft_slo_s: float | None
    tpot_slo_s: float | None
    attainment: float | None
    ttft_attainment: float | None
    tpot_attainment: float | None
    goodput_req_per_s: float
    ttft_s: LatencyStats
    tpot_s: LatencyStats


class Utilization(Doc):
    """Share of the run each role and each instance spent in iterations (0..1)."""

    by_role: dict[str, float]
    by_instance: dict[str, float]


class PrefixTierStats(Doc):
    """One host tier's prefix blocks (DRAM or SSD): hits, misses and evictions, in blocks."""

    hit: int
    miss: int
    evicted: int


class PrefixCacheStats(Doc):
    """Prefix-cache totals of a run (:mod:`hetplan.sim.prefix`): blocks, prompt tokens and the token hit rate; with
    a host tier also each tier's blocks (``dram``, ``ssd``), the tokens restored from it and the restore time (s)."""

    hit_blocks: int
    miss_blocks: int
    evicted_blocks: int
    hit_tokens: int
    lookup_tokens: int
    token_hit_rate: float
    dram: PrefixTierStats | None = Field(default=None, exclude_if=_absent)
    ssd: PrefixTierStats | None = Field(default=None, exclude_if=_absent)
    host_hit_tokens: int | None = Field(default=None, exclude_if=_absent)
    restore_s: float | None = Field(default=None, exclude_if=_absent)


class TimeWindow(Doc):
    """One arrival window of the time series: start and covered width (s), rates per second, p90 TTFT (s)."""

    start_s: float
    width_s: float
    requests: int
    arrival_rate_per_s: float
    attainment: float
    goodput_req_per_s: float
    ttft_p90_s: float | None


class RunMetrics(Doc):
    """The metrics of one run (:func:`hetplan.sim.metrics.measure`; the terms in that module's docstring)."""

    requests: int
    finished: int
    dropped: int
    dropped_over_context: int
    truncated_at_context: int
    unfinished: int
    tpot_ineligible: int
    duration_s: float
    serving_span_s: float
    arrival_rate_per_s: float | None
    attainment: Attainment
    goodput_req_per_s: float
    goodput_definition: str
    goodput_note: str | None
    jain_index: float | None
    ttft_s: LatencyStats
    tpot_s: LatencyStats
    itl_s: LatencyStats
    e2e_s: LatencyStats
    classes: list[ClassMetrics]
    utilization: Utilization
    counters: dict[str, float]
    prefix_cache: PrefixCacheStats | None = Field(default=None, exclude_if=_absent)
    percentile_estimator: str
    window_s: float
    time_series: list[TimeWindow]
    drain_s: float
    cut_off_reached: bool
    warnings: list[str]


class CascadeRunSettings(Doc):
    """The CASCADE settings a run used (the document's ``cascade`` block)."""

    kappa: float
    q2: float


class HostKvRun(Doc):
    """The host KV tier a run used (``--host-kv``, :class:`hetplan.sim.hostkv.HostKvTier`): per instance, DRAM and
    SSD room (GiB; ``ssd_gib`` None: unbounded), the restore bandwidths (GB/s) and the latency per restore (s)."""

    dram_gib: float
    ssd_gib: float | None
    dram_gb_per_s: float
    ssd_gb_per_s: float
    restore_latency_s: float


class WindowRun(Doc):
    """One window of a ``--windows`` run (:mod:`hetplan.sim.windows`); the renderer reads its wall time, s."""

    wall_s: float


class Windowed(Doc):
    """The ``windowed`` block of a ``--windows`` run (:mod:`hetplan.sim.windows`)."""

    windows: int
    warmup_s: float
    executor: str
    per_window: list[WindowRun]
    counters_note: str


class Simulation(RunMetrics):
    """``hetplan simulate``'s document: the run's settings, then its :class:`RunMetrics`."""

    kind: str = "simulation"
    policy: str
    router: str
    seed: int
    chunked_prefill: bool
    rate_scale: float
    trace: str
    instances: int
    plan_strategy: str
    plan_goodput_req_per_s: float
    slo_percentile: float
    cascade: CascadeRunSettings | None = Field(default=None, exclude_if=_absent)
    output_predictor: str | None = Field(default=None, exclude_if=_absent)
    host_kv: HostKvRun | None = Field(default=None, exclude_if=_absent)
    windowed: Windowed | None = Field(default=None, exclude_if=_absent)

    def to_doc(self) -> dict[str, Any]:
        """The document: the settings first, then the metrics, then ``windowed`` (as ``--json`` prints it)."""
        doc = super().to_doc()
        head = list(Simulation.model_fields)[len(RunMetrics.model_fields) :]
        first = [k for k in head if k in doc and k != "windowed"]
        return {k: doc[k] for k in first} | {k: v for k, v in doc.items() if k not in first}


class CapacityRun(Doc):
    """One run of the capacity search: its rate scale, joint attainment and goodput (req/s)."""

    rate_scale: float
    attainment: float
    goodput_req_per_s: float


class Capacity(Doc):
    """``hetplan simulate --find-capacity``'s document (:func:`hetplan.sim.run.find_capacity`)."""

    kind: str = "capacity"
    target: float
    policy: str
    rate_scale: float | None
    capped: bool
    failing_rate_scale: float | None
    arrival_rate_per_s: float | None
    goodput_capacity_req_per_s: float | None
    goodput_req_per_s: float | None
    runs: list[CapacityRun]
    metrics: Simulation | None

    def to_doc(self) -> dict[str, Any]:
        """The document, the metrics at the capacity in ``hetplan simulate``'s key order."""
        return super().to_doc() | {"metrics": None if self.metrics is None else self.metrics.to_doc()}


class ClosedLoop(Doc):
    """``hetplan simulate --concurrency``'s document (:func:`hetplan.sim.closed.closed_loop`)."""

    kind: str = "closed-loop"
    policy: str
    router: str
    instances: int
    plan_strategy: str
    concurrency: int
    isl: int
    osl: int
    requests: int
    finished: int
    dropped: int
    duration_s: float
    throughput_req_per_s: float | None
    output_tokens_per_s: float | None
    total_tokens_per_s: float | None
    littles_law_req_per_s: float | None
    ttft_s: LatencyStats
    tpot_s: LatencyStats
    itl_s: LatencyStats
    e2e_s: LatencyStats
    attainment: Attainment
    tpot_ineligible: int
    utilization: dict[str, float]
    counters: dict[str, float]
    warnings: list[str]


__all__ = [
    "Attainment",
    "Capacity",
    "CapacityRun",
    "CascadeRunSettings",
    "ClassMetrics",
    "ClosedLoop",
    "Doc",
    "LatencyStats",
    "PrefixCacheStats",
    "PrefixTierStats",
    "RunMetrics",
    "SimResult",
    "Simulation",
    "TimeWindow",
    "Utilization",
    "WindowRun",
    "Windowed",
]
