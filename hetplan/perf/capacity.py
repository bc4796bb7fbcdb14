"""Per-instance prefill capacity under the TTFT SLO, and the capacity result types: the searches the planner runs.

The model is :mod:`hetplan.perf.queueing` (the spec: M/G/n with Erlang C and Allen–Cunneen, the fluid bound of a
trace's bursts, formulas and sources); this module computes it for many (instance, link) pairs at once (the
planner's enumeration needs hundreds): all bisections run side by side as numpy arrays
(:mod:`hetplan.perf.queueing_batch`), and a regula-falsi bracket lets the bisection's midpoints be decided without
evaluating most of them (:func:`~hetplan.perf.batch_search.largest_batch`); the answers are those of the
one-at-a-time search (bit-identical for a monotone TTFT; ``tests/unit/test_capacity_batch.py`` checks them against
``tests/unit/capacity_reference.py``). Decode capacities: :mod:`hetplan.perf.decode_capacity`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hetplan.perf.batch_search import BISECT_STEPS, largest_batch
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats, PrefillReuse
from hetplan.perf.latency import InstanceModel, kv_transfer_s
from hetplan.perf.queueing_batch import QUANTILE_POINTS, fluid_wait_batch_s, idle_ttft_points, mgn_ttft_quantile_s_batch


@dataclass(frozen=True)
class PrefillCapacity:
    """Capacity of one prefill instance: ``rate_per_s`` (req/s, 0 if the SLO cannot be met; alone in its queue),
    the q-quantile TTFT of an idle instance (``min_ttft_s``, prefill plus KV transfer), and ``rate_by_n``: the
    per-instance rate when n = 1, 2, … instances share one queue (M/G/n; empty: only n = 1 computed);
    ``binding_class``: with request classes, the class whose TTFT binds (:func:`class_prefill_capacities`; its
    ``min_ttft_s`` is that class's), else None."""

    rate_per_s: float
    min_ttft_s: float
    mean_service_s: float
    rate_by_n: tuple[float, ...] = ()
    binding_class: str | None = None

    def per_instance(self, n: int) -> float:
        """Per-instance rate (req/s) of a pool of ``n`` instances sharing one queue."""
        return self.rate_by_n[n - 1] if 0 < n <= len(self.rate_by_n) else self.rate_per_s


@dataclass(frozen=True)
class DecodeCapacity:
    """Capacity of one decode instance: ``rate_per_s`` (req/s), the batch it runs (``batch``), its step time
    at that batch (``step_s``, the predicted TPOT) and the step time at batch 1 (``min_tpot_s``)."""

    rate_per_s: float
    batch: int
    step_s: float
    min_tpot_s: float
    kv_batch_limit: int


CAPACITY_BISECT_STEPS = 30
"""Bisection steps of the per-instance prefill capacity (a relative precision of 2^-30)."""


def prefill_capacity(
    inst: InstanceModel,
    stats: LengthStats,
    ttft_slo_s: float,
    link_bytes_per_s: float,
    trace: ArrivalTrace | None = None,
    max_instances: int = 1,
) -> PrefillCapacity:
    """Largest arrival rate (req/s) per prefill instance with q-quantile TTFT ≤ ``ttft_slo_s``, for pools of 1 to
    ``max_instances`` instances sharing a queue (M/G/n); with a ``trace``, also within the fluid bound of its
    bursts (module docstring). One item of :func:`prefill_capacities`, which computes many at once."""
    return prefill_capacities([(inst, link_bytes_per_s)], stats, ttft_slo_s, trace, max_instances)[0]


def _idle_totals(
    items: Sequence[tuple[InstanceModel, float]], prompt_tokens: np.ndarray, reuse: PrefillReuse | None = None
) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Per (instance, link) item: idle TTFT per prompt (prefill + KV transfer; shape (items, prompts), seconds),
    and the prefill time's mean and second moment (s, s²), with one latency call per distinct instance; the
    prefill is priced at the work each instance's prefix cache leaves (``reuse``; None: the whole prompts), the
    transfer at the whole prompt. Shared by :func:`prefill_capacities` and :func:`prefill_capacities_by_stats`.
    Source: hetplan's own."""
    service_by_inst: dict[int, np.ndarray] = {}
    totals = np.empty((len(items), prompt_tokens.size))
    moments = []
    for i, (inst, link) in enumerate(items):
        service = service_by_inst.get(id(inst))
        if service is None:
            work = prompt_tokens if reuse is None else reuse.work_for(inst, prompt_tokens)
            service = np.asarray(inst.prefill_latency_s(work), dtype=float)
            service_by_inst[id(inst)] = service
        kv = np.asarray(kv_transfer_s(inst.arch, prompt_tokens, link, inst.settings), dtype=float)
        totals[i] = service + kv
        moments.append((float(service.mean()), float((service**2).mean())))
    return totals, moments


def prefill_capacities(
    items: Sequence[tuple[InstanceModel, float]],
    stats: LengthStats,
    ttft_slo_s: float,
    trace: ArrivalTrace | None = None,
    max_instances: int = 1,
    judged: np.ndarray | None = None,
    trace_judged: np.ndarray | None = None,
) -> list[PrefillCapacity]:
    """:func:`prefill_capacity` of every ``(instance, link bytes/s)`` in ``items``, in their order.

    ``judged`` / ``trace_judged``: boolean masks over ``stats``'s and ``trace``'s requests whose TTFT the quantile
    is taken over (one request class, :func:`class_prefill_capacities`): every request still queues and is
    served (the wait's moments and the fluid bound's backlog are the whole mix's), but only these requests'
    idle TTFTs are convolved with the wait and only their fluid TTFTs count in its quantile. None: every request.

    The bisections of all items (and, for M/G/n, of every pool size 1..``max_instances``) run side by side as numpy
    arrays: each element goes through exactly the floating-point operations of the one-item computation
    (:func:`~hetplan.perf.queueing.mgn_ttft_quantile_s`, the fluid bound's plain bisection), so the capacities are
    bit-identical to it, in a few dozen array steps instead of tens of thousands of Python calls. Service times are
    computed once per instance object (items sharing one ``InstanceModel`` with different links share them). With a
    trace, the fluid burst bound is found first and the M/G/n bisection runs only for the rows (item, pool size) whose
    M/G/n TTFT misses the SLO at that bound; the others' capacity is the bound (the minimum of the two, as before,
    except within the bisection's 2^-30 precision of the M/G/n capacity).

    Returns:
        one :class:`PrefillCapacity` per item, with ``rate_by_n`` of length ``max(1, max_instances)``.
    """
    pools = max(1, max_instances)
    q = stats.quantile
    trace_service_by_inst: dict[int, np.ndarray] = {}
    out: list[PrefillCapacity | None] = [None] * len(items)
    live: list[int] = []  # items whose idle TTFT meets the SLO
    totals, moments = _idle_totals(items, stats.prompt_tokens, stats.prefill_reuse)
    if judged is not None:  # one class's TTFTs; the moments above stay the mix's (every request queues)
        totals = totals[:, judged]
    idle_all = np.percentile(totals, q * 100, axis=1) if items else np.zeros(0)
    for i, (mean_s, _) in enumerate(moments):
        if float(idle_all[i]) > ttft_slo_s:
            out[i] = PrefillCapacity(0.0, float(idle_all[i]), mean_s, (0.0,) * pools)
        else:
            live.append(i)
    means = [moments[i][0] for i in live]
    seconds = [moments[i][1] for i in live]
    idles = [float(idle_all[i]) for i in live]
    # the idle TTFT's distribution, as QUANTILE_POINTS quantiles (the wait is convolved with it, not added to its
    # quantile: with long prompts the p90 prompt is not the one that waits)
    owns = idle_ttft_points(totals[live]) if live else np.zeros((0, QUANTILE_POINTS))
    if not live:
        return [c for c in out if c is not None]
    fluid = np.full(len(live), math.inf)
    if trace is not None:
        works, extras = [], []
        for i in live:
            inst, link = items[i]
            t_all = trace_service_by_inst.get(id(inst))
            if t_all is None:
                t_all = np.asarray(inst.prefill_latency_s(trace.prefill_tokens(inst)), dtype=float)
                trace_service_by_inst[id(inst)] = t_all
            works.append(t_all)
            extras.append(np.asarray(kv_transfer_s(inst.arch, trace.prompt_tokens, link, inst.settings), dtype=float))
        fluid = fluid_prefill_rates(works, extras, trace, ttft_slo_s, q, trace_judged)
    n_live = len(live)
    servers = np.tile(np.arange(1, pools + 1), n_live)
    row_item = np.repeat(np.arange(n_live), pools)
    mean_rows = np.asarray(means)[row_item]
    second_rows = np.asarray(seconds)[row_item]
    own_rows = owns[row_item]

    def ttft(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
        n = servers[rows]
        return mgn_ttft_quantile_s_batch(rate * n, n, mean_rows[rows], second_rows[rows], own_rows[rows], q)

    # where the trace's burst bound binds (M/G/n meets the SLO at the fluid rate: most rows on a bursty trace),
    # the capacity is that bound and the M/G/n bisection is skipped; it runs for the other rows only
    cap_rows = fluid[row_item]
    mgn = np.full(cap_rows.size, np.inf)
    bounded = np.nonzero(np.isfinite(cap_rows) & (cap_rows > 0))[0]
    if bounded.size:
        holds = ttft(cap_rows[bounded], bounded) <= ttft_slo_s
        mgn[bounded[holds]] = cap_rows[bounded[holds]]
    search = np.nonzero(~np.isfinite(mgn))[0]
    if search.size:
        mgn[search] = largest_batch(
            lambda x, rows: ttft(x, search[rows]),
            ttft_slo_s,
            1.0 / mean_rows[search],
            CAPACITY_BISECT_STEPS,
            QUANTILE_POINTS,
        )
    by_n = np.minimum(mgn, cap_rows).reshape(n_live, pools)
    for k, i in enumerate(live):
        rates = tuple(float(r) for r in by_n[k])
        out[i] = PrefillCapacity(rates[0], idles[k], means[k], rates)
    return [c for c in out if c is not None]


def class_prefill_capacities(
    items: Sequence[tuple[InstanceModel, float]],
    stats: LengthStats,
    class_ttft_s: Sequence[tuple[str, float]],
    trace: ArrivalTrace | None = None,
    max_instances: int = 1,
) -> list[PrefillCapacity]:
    """Per-class prefill capacity of every item (request classes, a scenario's ``classes:``): the largest
    per-instance rate of the **whole mix** at which **every** class's q-quantile TTFT, taken over that class's own
    requests, is within that class's own TTFT SLO (``class_ttft_s``: ``(class, ttft_s)`` pairs).

    Method: the classes share one FCFS prefill queue, so a class's request waits behind the whole mix (the M/G/n
    wait from the mix's service moments; with a trace, the fluid bound's backlog of every request at the sized
    rate) and is then served at its own prompt length. For each class, :func:`prefill_capacities` runs with the
    quantile over that class's requests only (``judged``: ``stats.class_labels`` / ``trace.class_labels`` equal
    to the class) against that class's SLO; the item's capacity for each pool size n is the minimum over the
    classes. A class with no request in ``stats`` is left out (nothing of it to size). With one class this is
    :func:`prefill_capacities` against its SLO over every request. Against the single tightest TTFT over the
    whole mix (the rule before) it differs where a class's prompts differ from the mix's: a tight-TTFT class of
    short prompts no longer waits on the mix's long ones in the sizing, and a loose class is held only to its own
    SLO. Source: hetplan's own reconstruction (no paper sizes per class).

    Returns:
        one :class:`PrefillCapacity` per item; ``min_ttft_s`` is that of the class with the smallest rate (the
        binding class).

    Raises:
        ValueError: ``stats`` without ``class_labels``, or a trace without them.
    """
    if stats.class_labels is None or (trace is not None and trace.class_labels is None):
        raise ValueError("class_prefill_capacities needs the requests' class labels (LengthStats/ArrivalTrace)")
    per_class: list[list[PrefillCapacity]] = []
    names: list[str] = []
    for name, ttft_s in class_ttft_s:
        judged = np.asarray(stats.class_labels == name)
        if not judged.any():
            continue
        names.append(name)
        t_judged = None if trace is None else np.asarray(trace.class_labels == name)
        if t_judged is not None and not t_judged.any():  # in the sample, not in the replayed arrivals: Poisson
            per_class.append(prefill_capacities(items, stats, ttft_s, None, max_instances, judged))
            continue
        per_class.append(prefill_capacities(items, stats, ttft_s, trace, max_instances, judged, t_judged))
    if not per_class:
        raise ValueError("class_prefill_capacities: no class has a request in the length sample")
    out = []
    for caps in zip(*per_class, strict=True):
        k = min(range(len(caps)), key=lambda i: caps[i].rate_per_s)  # the first minimum: the scenario's order
        rates = tuple(float(min(c.per_instance(n) for c in caps)) for n in range(1, max(1, max_instances) + 1))
        out.append(PrefillCapacity(rates[0], caps[k].min_ttft_s, caps[k].mean_service_s, rates, names[k]))
    return out


def prefill_capacities_by_stats(
    items: Sequence[tuple[InstanceModel, float]],
    stats: Sequence[LengthStats],
    ttft_slo_s: float,
    max_instances: int = 1,
    pools_by_item: Sequence[Sequence[int]] | None = None,
    points: int = 0,
) -> list[list[PrefillCapacity]]:
    """:func:`prefill_capacities` (Poisson arrivals, no trace) of every item for every length sample in ``stats``
    (e.g. the request-size buckets), shape (len(stats), len(items)): one batched bisection over all samples'
    rows instead of one per sample, each row through the same operations, so the capacities are bit-identical
    to ``prefill_capacities(items, stats[b], ...)`` (a test checks this). All samples must share one quantile.
    ``pools_by_item``: the pool sizes n (1..``max_instances``) to compute for each item (default all); the
    ``rate_by_n`` of the others are NaN (only ask ``per_instance`` for the sizes requested). ``points``: the
    idle-TTFT quantile points convolved with the wait (default :data:`QUANTILE_POINTS`, the bit-identical
    setting; fewer are faster and coarser).

    Raises:
        ValueError: samples with different quantiles."""
    pools = max(1, max_instances)
    if len({st.quantile for st in stats}) > 1:
        raise ValueError("prefill_capacities_by_stats needs one SLO quantile for every sample")
    out: list[list[PrefillCapacity | None]] = [[None] * len(items) for _ in stats]
    live: list[tuple[int, int]] = []
    means: list[float] = []
    seconds: list[float] = []
    idles: list[float] = []
    owns: list[np.ndarray] = []
    n_points = points or QUANTILE_POINTS
    q = stats[0].quantile if stats else 0.5
    for b, st in enumerate(stats):
        totals, moments = _idle_totals(items, st.prompt_tokens, st.prefill_reuse)
        idle_all = np.percentile(totals, q * 100, axis=1) if items else np.zeros(0)
        keep = [i for i in range(len(items)) if float(idle_all[i]) <= ttft_slo_s]
        for i, (mean_s, _) in enumerate(moments):
            if float(idle_all[i]) > ttft_slo_s:
                out[b][i] = PrefillCapacity(0.0, float(idle_all[i]), mean_s, (0.0,) * pools)
        if keep:
            own = idle_ttft_points(totals[keep], n_points)
            for row, i in enumerate(keep):
                live.append((b, i))
                means.append(moments[i][0])
                seconds.append(moments[i][1])
                idles.append(float(idle_all[i]))
                owns.append(own[row])
    if live:
        n_live = len(live)
        wanted = [
            sorted({n for n in pools_by_item[i] if 1 <= n <= pools} | {1}) if pools_by_item is not None
            else list(range(1, pools + 1))
            for _, i in live
        ]  # fmt: skip
        servers = np.array([n for ns in wanted for n in ns])
        row_item = np.array([k for k, ns in enumerate(wanted) for _ in ns])
        mean_rows = np.asarray(means)[row_item]
        second_rows = np.asarray(seconds)[row_item]
        own_rows = np.asarray(owns)[row_item]

        def ttft(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
            n = servers[rows]
            return mgn_ttft_quantile_s_batch(rate * n, n, mean_rows[rows], second_rows[rows], own_rows[rows], q)

        mgn = largest_batch(ttft, ttft_slo_s, 1.0 / mean_rows, CAPACITY_BISECT_STEPS, n_points)
        fluid = np.full(n_live, math.inf)  # no trace: the same min() as prefill_capacities
        by_n = np.full((n_live, pools), np.nan)
        by_n[row_item, servers - 1] = np.minimum(mgn, fluid[row_item])
        for k, (b, i) in enumerate(live):
            rates = tuple(float(r) for r in by_n[k])
            out[b][i] = PrefillCapacity(rates[0], idles[k], means[k], rates)
    return [[c for c in row if c is not None] for row in out]


def fluid_prefill_rates(
    works: list[np.ndarray],
    extras: list[np.ndarray],
    trace: ArrivalTrace,
    slo_s: float,
    quantile: float,
    judged: np.ndarray | None = None,
) -> np.ndarray:
    """The fluid burst bound of every ``(service_s, extra_s)`` pair (shape (n,) each, per request of the trace, in
    its order), found side by side (:func:`~hetplan.perf.batch_search.largest_batch`); shape (len(works),), req/s
    per instance: the largest per-instance rate whose fluid q-quantile ``W_i + service_i + extra_i`` stays ≤
    ``slo_s`` on ``trace`` at its sized rate Λ, where an instance carrying rate r holds the share u = r / Λ of every
    burst and the waits W_i follow Lindley's recursion over the trace's gaps (:mod:`hetplan.perf.queueing`).
    Searched on [0, 1 / mean(service_s)]; each row bit-identical to the one-row reference (``fluid_prefill_rate``,
    ``tests/unit/capacity_reference.py``). ``judged``: a boolean mask of the requests whose TTFT the quantile is
    taken over (one request class; every request still adds to the backlog); None: all. Source: hetplan's own
    reconstruction (Lindley 1952)."""
    lam = trace.sized_rate_per_s
    gaps = trace.gaps_s
    service = np.asarray(works)
    own = service + np.asarray(extras)

    def ttft(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
        wait = fluid_wait_batch_s(service[rows] * (rate / lam)[:, None], gaps)
        total = wait + own[rows]
        if judged is not None:
            total = total[:, judged]
        return np.asarray(np.percentile(total, quantile * 100, axis=1))

    hi = np.array([1.0 / float(w.mean()) for w in works])
    return largest_batch(ttft, slo_s, hi, BISECT_STEPS, service.shape[1])
