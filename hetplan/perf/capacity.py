"""Per-instance capacity under TTFT/TPOT SLOs, with queueing headroom.

Method (hetplan's own reconstruction; DESIGN §2-3.1 give the roofline, not the queueing):

**Prefill instance → μ_p.** Requests arrive Poisson at rate λ and are prefilled one at a time (batch 1, which
is conservative: batching short prompts only helps). Service time T_i = prefill(S_i) from the roofline. One
instance alone is M/G/1: mean wait ``W = λ·E[T²] / (2(1-ρ))``, ρ = λ·E[T], and the waiting-time tail is taken as
exponential beyond the probability of waiting, ``P(wait > x) ≈ ρ·exp(-x·ρ/W)``, so its q-quantile is
``(W/ρ)·ln(ρ/(1-q))`` when ρ > 1-q, else 0. The n prefill instances of a combo share one queue (the simulator's
dispatch, :mod:`hetplan.sim.dispatch`), an M/G/n queue: Erlang C's probability of waiting replaces ρ and the mean
wait is Allen–Cunneen's ``C·E[T]/(n − a)·(1 + c_s²)/2`` (:func:`mgn_wait_quantile_s`), so a combo's prefill
capacity grows faster than n (``PrefillCapacity.rate_by_n``). The q-quantile TTFT is that of ``wait + T_i +
kv_transfer_i`` with the wait independent of the request's own prefill (:func:`mgn_ttft_quantile_s`: the wait's
atom at 0 and exponential tail convolved with the idle TTFT's distribution; adding the two quantiles, as hetplan
did before, over-estimated by up to a quarter on long-prompt traces). μ_p is the largest λ with TTFT_q ≤ SLO,
found by bisection; 0 when even an idle instance misses the SLO.

**Decode instance → μ_d.** Continuous batching with B slots. A request holds KV for its prompt plus the tokens
generated so far; by Little's law the time-averaged context of a slot is ``c = E[O·(S + O/2)] / E[O]``
(long outputs stay longer). B = min(max_num_seqs, KV capacity / c, largest B whose decode step at context c
is ≤ the TPOT SLO). A slot is busy for ``R = max(E[O]-1, 1)·step(B, c)``. Waiting for a free slot is M/M/B
(Erlang C): ``P(wait > x) = C(B, λR)·exp(-(B/R - λ)·x)``. A wait w spreads over the request's remaining
tokens, so the TPOT SLO holds while ``w_q ≤ (SLO - step)·max(E[O]-1, 1)``; μ_d is the largest λ that keeps it.

**KV transfer → μ_kv.** ``link bytes/s / E[S·kv_bytes]`` over the prefill→decode link (see ``cauchy.py``).

**Bursts (a trace with timestamps) → the prefill bound above and a fluid bound.** M/G/1 assumes Poisson
arrivals; a real trace is burstier at the time scale of the TTFT SLO (the Azure code sample: inter-arrival CV
14.4, 23 times its mean rate in its busiest second), and the planner once promised six times what such a trace
got in simulation. So for a trace the prefill capacity also replays the trace's own arrivals, scaled to the rate
the plan is sized for (Λ = target x (1 + headroom)), through a *fluid* queue: the instances that carry a share
u of the traffic per instance drain work at rate 1/u relative to it, i.e. request i brings ``u·T_i`` seconds of
work and the wait obeys Lindley's recursion ``W_{i+1} = max(0, W_i + u·T_i − gap_i)`` (computed in closed form as
a running minimum of cumulative sums), and the fluid q-quantile TTFT is ``quantile_q(W_i + T_i + kv_i)``. μ_p is
the largest rate ``u·Λ`` that keeps both the fluid and the M/G/n TTFT within the SLO: the fluid bound carries the
trace's rate modulation (bursts), the M/G/n bound the randomness of a Poisson stream (each bound alone: on the
examples, adding the two waits made smooth traces 13 % too conservative). Aggregated (Mélange) instance types get
the same fluid bound on their prefill work (:func:`fluid_prefill_rate`). On a Poisson trace the fluid bound is
loose (it is the wait of a server as fast as the whole fleet), so smooth traffic keeps the M/G/n capacity.

**Bursts on the decode slots.** The same replay bounds μ_d (:func:`fluid_decode_rate`, batched
:func:`fluid_decode_rates`): a decode instance with B slots at step s carrying the share u of the traffic sees,
per arrival i that decodes (``o_i ≥ 2``), the work ``u·t̄·s/B`` (t̄ = the mean of ``o_i − 1`` over those requests:
the slots as one server B times as fast, holding each request for its mean residence), the slot wait W_i follows
Lindley's recursion over the trace's gaps, and the fluid TPOT of request i is ``s + W_i/(o_i − 1)`` (the wait
spread over its own remaining tokens); μ_d is the largest ``u·Λ`` whose q-quantile fluid TPOT (over the
requests that decode) is ≤ the TPOT SLO, and the decode capacity is ``min(Erlang C μ_d, this bound)``. Holds
are the mean, not each request's own: a fluid server with per-request holds lets one long output block every
request behind it, which B slots do not (on a Poisson replay of the Azure code sample's requests, H800 TP2
decode with 7 slots, per-request holds gave 0.47x Erlang C's 5.69 req/s, mean holds 0.82x, and an exact FCFS
replay of the 7 slots held the TPOT SLO up to 0.78x: both models are optimistic on smooth traffic with these
short, skewed outputs, Erlang C the more). Without outputs in the trace
every request decodes the length sample's mean output. On the Azure code sample at 4.4 req/s (Llama-3-70B, H800
TP2 decode: 7 KV slots) the bound is 0.62 req/s per instance against Erlang C's 5.69; an exact FCFS replay of
the slots the plan would size (``tests/unit/test_capacity_bursts.py``) gives a p90 TPOT of 5.7 s at Erlang C's
capacity and the 36 ms step at the bound's.

Limits: the fluid view assumes the router splits every burst across instances in proportion to their capacity
(the simulator's weighted routing and shared queues do); it ignores that one request's prefill cannot be split,
and treats the replayed sample as the future (a burstier future needs the verification, :mod:`hetplan.sim.verify`,
to catch it). The decode bound replays the trace's arrivals, not their prefill completions (which prefill
smooths a little: the bound is conservative there); Mélange's aggregated capacity and the mixed strategy's
per-bucket decode capacities do not take it (only Cauchy's decode instances do).

Speed: :func:`prefill_capacities` computes the capacities of many (instance, link) pairs at once (the planner's
enumeration needs hundreds): all bisections run side by side as numpy arrays, and a regula-falsi bracket lets the
bisection's midpoints be decided without evaluating most of them (:func:`_largest_batch`); the answers are those
of the one-at-a-time search (bit-identical for a monotone TTFT; see ``tests/unit/test_capacity_batch.py``).

Percentiles use numpy's linear estimator. Source: Lindley's recursion (Lindley 1952) and the fluid
approximation of a multi-server queue by one fast server; the combination with M/G/1 is hetplan's own
reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hetplan.perf.latency import InstanceModel, kv_transfer_s

if TYPE_CHECKING:
    from hetplan.perf.arch import ModelArch

BISECT_STEPS = 40
"""Bisection steps of the capacity searches on [0, hi]: a relative precision of 2^-40 (about 1e-12)."""


@dataclass(frozen=True, eq=False)
class PrefillReuse:
    """Prefix-cache reuse for capacities: per cache size, the prompt lengths of the prefill work left.

    An instance's cache is its KV capacity less ``reserve_tokens`` (the prompt being computed), in blocks of
    ``block_tokens``; ``work_by_cache`` maps cache sizes (blocks) to the work lengths at that size, shape (n,)
    each (:func:`prefill_work_tokens`), computed by the planner for every candidate instance
    (:mod:`hetplan.planning.prefix`). An instance whose size is not listed takes the largest listed size below
    its own (none: no reuse), which errs towards less reuse.
    """

    block_tokens: int
    reserve_tokens: int
    work_by_cache: Mapping[int, np.ndarray]

    def cache_blocks(self, inst: InstanceModel) -> int:
        """``inst``'s cache, blocks (module rule above)."""
        return max(int(inst.kv_capacity_tokens) - self.reserve_tokens, 0) // self.block_tokens

    def work_for(self, inst: InstanceModel, prompt_tokens: np.ndarray) -> np.ndarray:
        """Shape (n,): the work lengths at ``inst``'s cache (``prompt_tokens`` when no listed size fits)."""
        size = self.cache_blocks(inst)
        fits = [k for k in self.work_by_cache if k <= size]
        return self.work_by_cache[max(fits)] if fits else prompt_tokens

    def take(self, index: np.ndarray) -> PrefillReuse:
        """The requests ``index`` (a mask or indices) of every size's work."""
        return PrefillReuse(
            self.block_tokens, self.reserve_tokens, {k: v[index] for k, v in self.work_by_cache.items()}
        )


@dataclass(frozen=True)
class LengthStats:
    """Length samples and the SLO percentile used for capacities.

    Attributes:
        prompt_tokens: shape (n,) prompt lengths.
        output_tokens: shape (n,) output lengths (>= 1).
        quantile: SLO percentile as a fraction, e.g. 0.9.
        prefill_reuse: prefix-cache reuse (:class:`PrefillReuse`): each instance's prefill is priced at the
            prompt lengths of the work its own cache leaves; None: every prompt computed whole. Only prefill
            service times read it; KV sizes, transfers and decode contexts use ``prompt_tokens``.
    """

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    quantile: float
    prefill_reuse: PrefillReuse | None = None

    def prefill_tokens(self, inst: InstanceModel) -> np.ndarray:
        """Shape (n,): the prompt lengths ``inst``'s prefill service times are priced at (its prefix reuse)."""
        return (
            self.prompt_tokens if self.prefill_reuse is None else self.prefill_reuse.work_for(inst, self.prompt_tokens)
        )

    @property
    def mean_prompt(self) -> float:
        """Mean prompt length, tokens."""
        return float(self.prompt_tokens.mean())

    @property
    def mean_output(self) -> float:
        """Mean output length, tokens."""
        return float(self.output_tokens.mean())

    @property
    def decode_context(self) -> float:
        """Time-averaged context per decode slot, ``E[O·(S + O/2)] / E[O]`` tokens."""
        o = self.output_tokens.astype(float)
        return float((o * (self.prompt_tokens + o / 2)).sum() / o.sum())

    @property
    def max_context(self) -> float:
        """q-quantile of ``S + O``: a request of this size must fit one instance's KV cache."""
        return float(np.percentile(self.prompt_tokens + self.output_tokens, self.quantile * 100))


@dataclass(frozen=True)
class PrefillCapacity:
    """Capacity of one prefill instance: ``rate_per_s`` (req/s, 0 if the SLO cannot be met; alone in its queue),
    the q-quantile TTFT of an idle instance (``min_ttft_s``, prefill plus KV transfer), and ``rate_by_n``: the
    per-instance rate when n = 1, 2, … instances share one queue (M/G/n; empty: only n = 1 computed)."""

    rate_per_s: float
    min_ttft_s: float
    mean_service_s: float
    rate_by_n: tuple[float, ...] = ()

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


def mg1_wait_quantile_s(rate: float, mean_s: float, second_moment_s2: float, quantile: float) -> float:
    """q-quantile of the M/G/1 waiting time under the exponential-tail approximation (inf when ρ ≥ 1)."""
    rho = rate * mean_s
    if rho >= 1.0:
        return math.inf
    if rho <= 1.0 - quantile or rate <= 0:
        return 0.0
    mean_wait = rate * second_moment_s2 / (2.0 * (1.0 - rho))
    return (mean_wait / rho) * math.log(rho / (1.0 - quantile))


def prefill_ttft_quantile_s(rate: float, service_s: np.ndarray, kv_s: np.ndarray, quantile: float) -> float:
    """Predicted q-quantile TTFT of a prefill instance at arrival ``rate`` (see module docstring)."""
    return _ttft_q(
        rate,
        float(service_s.mean()),
        float((service_s**2).mean()),
        float(np.percentile(service_s + kv_s, quantile * 100)),
        quantile,
    )


def _ttft_q(rate: float, mean_s: float, second_s2: float, idle_q_s: float, quantile: float) -> float:
    return mg1_wait_quantile_s(rate, mean_s, second_s2, quantile) + idle_q_s


@dataclass(frozen=True)
class ArrivalTrace:
    """A workload's arrivals for the burst-aware capacities (module docstring).

    Attributes:
        arrival_s: shape (n,), sorted arrival times, seconds (the trace's own timeline).
        prompt_tokens: shape (n,), the prompts in arrival order.
        rate_per_s: the trace's own mean rate, req/s.
        sized_rate_per_s: the rate the plan is sized for (target x (1 + headroom)), req/s: the trace is replayed at
            it, its gaps shrunk by ``rate_per_s / sized_rate_per_s``.
        output_tokens: shape (n,), the outputs in arrival order (>= 1), for the decode burst bound
            (:func:`fluid_decode_rate`); None: every request is taken to have the length sample's mean output.
        prefill_reuse: as :attr:`LengthStats.prefill_reuse`, for these requests (None: no reuse).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    rate_per_s: float
    sized_rate_per_s: float
    output_tokens: np.ndarray | None = None
    prefill_reuse: PrefillReuse | None = None

    def prefill_tokens(self, inst: InstanceModel) -> np.ndarray:
        """Shape (n,): the prompt lengths ``inst``'s prefill service times are priced at (its prefix reuse)."""
        return (
            self.prompt_tokens if self.prefill_reuse is None else self.prefill_reuse.work_for(inst, self.prompt_tokens)
        )

    def decode_tokens(self, mean_output: float) -> np.ndarray:
        """Shape (n,): the tokens each request decodes after its first, ``o_i − 1`` (0 for a one-token output,
        which never takes a decode slot and has no TPOT), as floats; without outputs in the trace,
        ``max(mean_output − 1, 1)`` for every request."""
        if self.output_tokens is None:
            return np.full(self.arrival_s.size, max(mean_output - 1.0, 1.0))
        return np.maximum(self.output_tokens.astype(float) - 1.0, 0.0)

    @property
    def gaps_s(self) -> np.ndarray:
        """Shape (n-1,): the gaps between arrivals at ``sized_rate_per_s``, seconds."""
        return np.diff(self.arrival_s) * (self.rate_per_s / self.sized_rate_per_s)


def prefill_work_tokens(arch: ModelArch, prompt_tokens: np.ndarray, cached_tokens: np.ndarray) -> np.ndarray:
    """Shape (n,): the prompt length whose prefill FLOPs equal those of a prompt of ``prompt_tokens`` whose first
    ``cached_tokens`` come from the prefix cache. With ``arch.prefill_flops(s) = a·s + c·s² + lm`` (read off at
    s = 0, 1, 2), the work left is ``a·(S − h) + c·(S² − h²) + lm`` (the new tokens still attend to the cached
    prefix), and the equal length solves ``a·s + c·s² = a·(S − h) + c·(S² − h²)``. Pricing that length with the
    latency model keeps its memory floor and overhead per iteration. Source: hetplan's own reconstruction (the
    simulator prices prefill chunks the same way, :mod:`hetplan.sim.deployment`)."""
    f0, f1, f2 = (float(arch.prefill_flops(np.asarray(x, dtype=float), 1)) for x in (0, 1, 2))
    a_lin = (4.0 * f1 - 3.0 * f0 - f2) / 2.0
    c_quad = (f2 - 2.0 * f1 + f0) / 2.0
    s = np.asarray(prompt_tokens, dtype=float)
    h = np.minimum(np.asarray(cached_tokens, dtype=float), s - 1.0)
    work = a_lin * (s - h) + c_quad * (s * s - h * h)
    if c_quad > 0:
        out: np.ndarray = (-a_lin + np.sqrt(a_lin * a_lin + 4.0 * c_quad * work)) / (2.0 * c_quad)
    else:
        out = work / a_lin
    return np.where(h > 0, np.maximum(out, 1.0), s)


def fluid_wait_s(work_s: np.ndarray, gaps_s: np.ndarray) -> np.ndarray:
    """Waits of Lindley's recursion ``W_0 = 0, W_{i+1} = max(0, W_i + work_i − gap_i)`` (shape (n,), seconds), in
    closed form: ``W_i = X_i − min_{k≤i} X_k`` with ``X`` the cumulative sum of ``work − gap``."""
    x = np.concatenate(([0.0], np.cumsum(work_s[:-1] - gaps_s)))
    return np.asarray(x - np.minimum.accumulate(x))


def _largest(ok: Callable[[float], bool], hi: float, steps: int = BISECT_STEPS) -> float:
    """Largest x in [0, hi] with ``ok(x)`` (monotone), by bisection; 0 when none."""
    lo = 0.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def fluid_prefill_rate(
    service_s: np.ndarray, extra_s: np.ndarray, trace: ArrivalTrace, slo_s: float, quantile: float
) -> float:
    """Largest per-instance rate (req/s) whose fluid q-quantile ``W_i + service_i + extra_i`` stays ≤ ``slo_s`` on
    ``trace`` at its sized rate (``service_s``/``extra_s``: per request of the trace, in its order); an instance
    carrying rate r holds the share u = r / Λ of every burst (module docstring)."""
    lam = trace.sized_rate_per_s
    gaps = trace.gaps_s
    own = service_s + extra_s

    def ok(rate: float) -> bool:
        wait = fluid_wait_s(service_s * (rate / lam), gaps)
        return float(np.percentile(wait + own, quantile * 100)) <= slo_s

    return _largest(ok, 1.0 / float(service_s.mean()))


def mgn_wait_quantile_s(rate: float, servers: int, mean_s: float, second_moment_s2: float, quantile: float) -> float:
    """q-quantile of the wait in M/G/n (``servers`` sharing one queue, total arrival ``rate``), seconds: Erlang C's
    probability of waiting C, the mean wait ``C·E[T]/(n − a)·(1 + c_s²)/2`` (Allen–Cunneen; P-K for n = 1) and an
    exponential tail beyond C, so the quantile is ``(W/C)·ln(C/(1−q))`` when C > 1−q, else 0; inf when a ≥ n."""
    a = rate * mean_s
    if a >= servers:
        return math.inf
    if rate <= 0:
        return 0.0
    c = erlang_c(servers, a)
    if c <= 1.0 - quantile:
        return 0.0
    cs2 = second_moment_s2 / (mean_s * mean_s) - 1.0
    mean_wait = c * mean_s / (servers - a) * (1.0 + cs2) / 2.0
    return (mean_wait / c) * math.log(c / (1.0 - quantile))


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


MAX_BATCH_ELEMENTS = 2_000_000
"""Most float64 elements (16 MB) one batched bisection step of :func:`prefill_capacities` holds per array; more
rows are split into chunks (a long trace replayed for many instance options)."""


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
) -> list[PrefillCapacity]:
    """:func:`prefill_capacity` of every ``(instance, link bytes/s)`` in ``items``, in their order.

    The bisections of all items (and, for M/G/n, of every pool size 1..``max_instances``) run side by side as
    numpy arrays: each element goes through exactly the floating-point operations of the one-item computation
    (:func:`mgn_ttft_quantile_s`, :func:`fluid_prefill_rate`), so the capacities are bit-identical to it, in a
    few dozen array steps instead of tens of thousands of Python calls. Service times are computed once per
    instance object (items sharing one ``InstanceModel`` with different links share them). With a trace, the
    fluid burst bound is found first and the M/G/n bisection runs only for the rows (item, pool size) whose
    M/G/n TTFT misses the SLO at that bound; the others' capacity is the bound (the minimum of the two, as
    before, except within the bisection's 2^-30 precision of the M/G/n capacity).

    Returns:
        one :class:`PrefillCapacity` per item, with ``rate_by_n`` of length ``max(1, max_instances)``.
    """
    pools = max(1, max_instances)
    q = stats.quantile
    trace_service_by_inst: dict[int, np.ndarray] = {}
    out: list[PrefillCapacity | None] = [None] * len(items)
    live: list[int] = []  # items whose idle TTFT meets the SLO
    totals, moments = _idle_totals(items, stats.prompt_tokens, stats.prefill_reuse)
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
        fluid = fluid_prefill_rates(works, extras, trace, ttft_slo_s, q)
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
        mgn[search] = _largest_batch(
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

        mgn = _largest_batch(ttft, ttft_slo_s, 1.0 / mean_rows, CAPACITY_BISECT_STEPS, n_points)
        fluid = np.full(n_live, math.inf)  # no trace: the same min() as prefill_capacities
        by_n = np.full((n_live, pools), np.nan)
        by_n[row_item, servers - 1] = np.minimum(mgn, fluid[row_item])
        for k, (b, i) in enumerate(live):
            rates = tuple(float(r) for r in by_n[k])
            out[b][i] = PrefillCapacity(rates[0], idles[k], means[k], rates)
    return [[c for c in row if c is not None] for row in out]


def decode_step_tables(items: Sequence[tuple[InstanceModel, float, int]]) -> list[np.ndarray]:
    """Decode step seconds of every ``(instance, context tokens, width)`` for batches 1..width (shape (width,)
    each), with one latency-model call per instance object over all its items' contexts (the model is element by
    element, so each table equals its own call). Used by the batched decode and aggregated capacity searches.
    Source: hetplan's own reconstruction."""
    by_inst: dict[int, list[int]] = {}
    for i, (inst, _, _) in enumerate(items):
        by_inst.setdefault(id(inst), []).append(i)
    out: list[np.ndarray] = [np.zeros(0)] * len(items)
    for idx in by_inst.values():
        inst = items[idx[0]][0]
        width = max(items[i][2] for i in idx)
        ctxs = np.array([float(items[i][1]) for i in idx])
        grid = np.asarray(inst.decode_step_latency_s(np.arange(1, width + 1)[None, :], ctxs[:, None]), dtype=float)
        for j, i in enumerate(idx):
            out[i] = grid[j, : items[i][2]]
    return out


def decode_capacities(
    items: Sequence[tuple[InstanceModel, LengthStats]], tpot_slo_s: float, trace: ArrivalTrace | None = None
) -> list[DecodeCapacity]:
    """:func:`decode_capacity` of every ``(instance, length sample)``, the bisections run side by side (Erlang C
    by :func:`erlang_c_batch`, the wait's logarithm by ``math.log`` element by element; with a ``trace``, its
    burst bound by :func:`fluid_decode_rates`, per SLO quantile), so the capacities are bit-identical to the
    one-item function (a test checks this)."""
    out: list[DecodeCapacity | None] = [None] * len(items)
    rows: list[tuple[int, int, float, float, float, float, int, float]] = []
    limits = [int(inst.max_batch_size(st.decode_context)) for inst, st in items]
    tables = decode_step_tables(
        [(inst, st.decode_context, max(1, min(lim, inst.settings.max_num_seqs))) for (inst, st), lim in
         zip(items, limits, strict=True)]
    )  # fmt: skip
    for i, (inst, st) in enumerate(items):
        min_tpot = float(tables[i][0])
        kv_limit = limits[i]
        if min_tpot > tpot_slo_s or kv_limit < 1:
            out[i] = DecodeCapacity(0.0, 0, min_tpot, min_tpot, kv_limit)
            continue
        upper = min(kv_limit, inst.settings.max_num_seqs)
        batches = np.arange(1, upper + 1)
        steps = tables[i][:upper]
        ok = np.nonzero(steps <= tpot_slo_s)[0]
        batch = int(batches[ok[-1]])
        step = float(steps[ok[-1]])
        tokens_after_first = max(st.mean_output - 1.0, 1.0)
        residence = tokens_after_first * step
        budget = (tpot_slo_s - step) * tokens_after_first
        rows.append((i, batch, step, min_tpot, residence, budget, kv_limit, st.quantile))
    if rows:
        slots = np.array([r[1] for r in rows])
        residence_a = np.array([r[4] for r in rows])
        budget_a = np.array([r[5] for r in rows])
        quant = np.array([r[7] for r in rows])
        lo, hi = np.zeros(len(rows)), slots / residence_a
        for _ in range(BISECT_STEPS):
            mid = (lo + hi) / 2
            drain = slots / residence_a - mid
            wait = np.full(len(rows), math.inf)
            open_ = drain > 0
            c = erlang_c_batch(slots, mid * residence_a)
            zero = open_ & (c <= 1.0 - quant)
            wait[zero] = 0.0
            for j in np.nonzero(open_ & ~zero)[0]:  # decode_wait_quantile_s, with its math.log
                wait[j] = math.log(float(c[j]) / (1.0 - float(quant[j]))) / float(drain[j])
            passes = wait <= budget_a
            lo, hi = np.where(passes, mid, lo), np.where(passes, hi, mid)
        if trace is not None:  # the burst bound, one batched search per (quantile, per-request tokens)
            groups: dict[tuple[float, float], list[int]] = {}
            for k, r in enumerate(rows):
                mean_output = -1.0 if trace.output_tokens is not None else items[r[0]][1].mean_output
                groups.setdefault((r[7], mean_output), []).append(k)
            for (q, mean_output), ks in groups.items():
                sel = np.array(ks)
                burst = fluid_decode_rates(slots[sel], np.array([rows[k][2] for k in ks]),
                                           trace.decode_tokens(mean_output), trace, tpot_slo_s, q,
                                           cap=lo[sel])  # fmt: skip
                lo[sel] = np.minimum(lo[sel], burst)
        for k, r in enumerate(rows):
            out[r[0]] = DecodeCapacity(float(lo[k]), r[1], r[2], r[3], r[6])
    return [c for c in out if c is not None]


SEARCH_EVALUATIONS = 14
"""Regula-falsi evaluations per row before the bisection replay of :func:`_largest_batch` (fewer: more of the
bisection's midpoints are evaluated exactly; the result is the same)."""


def _largest_batch(
    metric: Callable[[np.ndarray, np.ndarray], np.ndarray],
    limit: float,
    hi: np.ndarray,
    steps: int,
    row_elements: int,
    search_evaluations: int = SEARCH_EVALUATIONS,
) -> np.ndarray:
    """:func:`_largest` with ``steps`` bisection steps on ``[0, hi]`` for many rows at once, where row r's predicate
    is ``metric(x, rows)[r] <= limit`` and ``metric`` is non-decreasing in x (a TTFT quantile against its SLO).

    Two phases, so that far fewer exact evaluations are needed than the bisection's ``steps``:

    1. *Bracket*: up to ``search_evaluations`` evaluations per row of a safeguarded regula falsi (Illinois) on
       ``metric(x) - limit`` (a bisection step where the metric is infinite or a side is unknown) keep the largest
       x known to pass (``L``) and the smallest known to fail (``U``); a row stops once they are adjacent floats.
    2. *Replay*: the bisection itself runs, midpoint for midpoint as :func:`_largest` would; a midpoint ≤ L passes
       and one ≥ U fails without evaluating (monotonicity), and only midpoints strictly between are evaluated.

    For a monotone metric the result is bit-identical to the plain bisection (the same midpoints, the same
    decisions); only a metric that is not monotone at rounding level between L and U could differ, and then by
    less than the bracket. Rows are processed in chunks of at most :data:`MAX_BATCH_ELEMENTS` / ``row_elements``.
    Source: hetplan's own reconstruction (Illinois: Dowell & Jarratt 1971)."""
    hi = np.array(hi, dtype=float)
    result = np.zeros_like(hi)
    chunk = max(1, MAX_BATCH_ELEMENTS // max(1, row_elements))
    for start in range(0, hi.size, chunk):
        rows = np.arange(start, min(hi.size, start + chunk))
        result[rows] = _Bracket(metric, limit, rows).largest(hi[rows], steps, search_evaluations)
    return result


class _Bracket:
    """Per row of one chunk: the largest x known to pass (``low_x``, with ``metric - limit`` ≤ 0 in ``low_f``) and
    the smallest known to fail (``up_x``, ``up_f`` > 0, possibly inf); see :func:`_largest_batch`."""

    def __init__(self, metric: Callable[[np.ndarray, np.ndarray], np.ndarray], limit: float, rows: np.ndarray):
        self.metric, self.limit, self.rows = metric, limit, rows
        size = rows.size
        self.low_x, self.low_f = np.full(size, -np.inf), np.full(size, np.nan)
        self.up_x, self.up_f = np.full(size, np.inf), np.full(size, np.nan)
        self.side = np.zeros(size, dtype=int)  # Illinois: which side moved last (-1 low, +1 up)

    def record(self, x: np.ndarray, sel: np.ndarray) -> None:
        """Evaluate rows ``sel`` (chunk indices) at ``x`` and move their brackets."""
        f = self.metric(x, self.rows[sel]) - self.limit
        good = f <= 0
        g, b = sel[good], sel[~good]
        self.low_x[g], self.low_f[g] = x[good], f[good]
        self.up_x[b], self.up_f[b] = x[~good], f[~good]
        # Illinois: when the same side moves twice running, halve the other side's value
        self.up_f[g] = np.where(self.side[g] == -1, self.up_f[g] / 2, self.up_f[g])
        self.low_f[b] = np.where(self.side[b] == 1, self.low_f[b] / 2, self.low_f[b])
        self.side[g], self.side[b] = -1, 1

    def largest(self, top: np.ndarray, steps: int, search_evaluations: int) -> np.ndarray:
        """Phase 1 (bracket) then phase 2 (replay the bisection on [0, top]); returns its final lower ends."""
        grid = top / 2.0**steps
        for _ in range(search_evaluations):
            both = np.isfinite(self.low_x) & np.isfinite(self.up_x)
            # done: adjacent floats, or narrower than the bisection's last step (at most one midpoint inside)
            done = both & ((np.nextafter(self.low_x, np.inf) >= self.up_x) | (self.up_x - self.low_x < grid))
            active = np.nonzero(~done)[0]
            if not active.size:
                break
            lo_a = np.where(np.isfinite(self.low_x[active]), self.low_x[active], 0.0)
            up_a = np.where(np.isfinite(self.up_x[active]), self.up_x[active], top[active])
            x = (lo_a + up_a) / 2
            lf, uf = self.low_f[active], self.up_f[active]
            secant = both[active] & np.isfinite(uf) & np.isfinite(lf)
            if secant.any():
                lf, uf = lf[secant], uf[secant]
                with np.errstate(divide="ignore", invalid="ignore"):
                    guess = lo_a[secant] - lf * (up_a[secant] - lo_a[secant]) / (uf - lf)
                inside = np.isfinite(guess) & (guess > lo_a[secant]) & (guess < up_a[secant])
                x[secant] = np.where(inside, guess, x[secant])
            self.record(x, active)
        lo, up = np.zeros(top.size), top.copy()
        for _ in range(steps):
            mid = (lo + up) / 2
            passes = mid <= self.low_x
            unsure = np.nonzero(~passes & (mid < self.up_x))[0]
            if unsure.size:
                self.record(mid[unsure], unsure)
                passes[unsure] = mid[unsure] <= self.low_x[unsure]
            lo = np.where(passes, mid, lo)
            up = np.where(passes, up, mid)
        return lo


def fluid_prefill_rates(
    works: list[np.ndarray], extras: list[np.ndarray], trace: ArrivalTrace, slo_s: float, quantile: float
) -> np.ndarray:
    """:func:`fluid_prefill_rate` of every ``(service_s, extra_s)`` pair (shape (n,) each, per request of the trace)
    on ``trace``, found side by side (:func:`_largest_batch`); shape (len(works),), req/s per instance."""
    lam = trace.sized_rate_per_s
    gaps = trace.gaps_s
    service = np.asarray(works)
    own = service + np.asarray(extras)

    def ttft(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
        wait = fluid_wait_batch_s(service[rows] * (rate / lam)[:, None], gaps)
        return np.asarray(np.percentile(wait + own[rows], quantile * 100, axis=1))

    hi = np.array([1.0 / float(w.mean()) for w in works])
    return _largest_batch(ttft, slo_s, hi, BISECT_STEPS, service.shape[1])


def fluid_wait_batch_s(work_s: np.ndarray, gaps_s: np.ndarray) -> np.ndarray:
    """:func:`fluid_wait_s` of every row of ``work_s`` (shape (rows, n)) with the shared ``gaps_s`` (shape (n-1,)),
    shape (rows, n), seconds; each row bit-identical to the one-row function."""
    steps = np.cumsum(work_s[:, :-1] - gaps_s[None, :], axis=1)
    x = np.concatenate((np.zeros((work_s.shape[0], 1)), steps), axis=1)
    return np.asarray(x - np.minimum.accumulate(x, axis=1))


def mgn_ttft_quantile_s_batch(
    rate: np.ndarray,
    servers: np.ndarray,
    mean_s: np.ndarray,
    second_moment_s2: np.ndarray,
    own_s: np.ndarray,
    quantile: float,
) -> np.ndarray:
    """:func:`mgn_ttft_quantile_s` of many queues at once: arrays of shape (rows,) and ``own_s`` of shape
    (rows, K), each row's sorted idle-TTFT points; shape (rows,), seconds. Each row goes through the scalar
    function's floating-point operations, so the results are bit-identical to it (a test checks this)."""
    rows, k_all = own_s.shape
    out = np.full(rows, math.inf)
    a = rate * mean_s
    open_ = a < servers
    if not open_.any():
        return out
    idx = np.nonzero(open_)[0]
    a, n = a[idx], servers[idx]
    mean, second, own, r = mean_s[idx], second_moment_s2[idx], own_s[idx], rate[idx]
    res = np.empty(idx.size)
    idle = r <= 0
    if idle.any():
        res[idle] = [float(np.percentile(o, quantile * 100)) for o in own[idle]]
    c = erlang_c_batch(n, a)
    cs2 = second / (mean * mean) - 1.0
    tau = mean / (n - a) * (1.0 + cs2) / 2.0
    flat = ~idle & ((c <= 0) | (tau <= 0))
    if flat.any():
        res[flat] = own[flat, min(k_all - 1, int(math.ceil(quantile * k_all)) - 1)]
    solve = ~idle & ~flat
    if solve.any():
        c_s, tau_s, own_v = c[solve], tau[solve], own[solve]
        k = np.arange(1, k_all + 1, dtype=float)
        scaled = own_v / tau_s[:, None]
        log_sum = np.logaddexp.accumulate(scaled, axis=1)
        need = k - quantile * k_all
        with np.errstate(divide="ignore", invalid="ignore"):
            x = tau_s[:, None] * (log_sum - np.log(np.where(need > 0, need[None, :] / c_s[:, None], np.nan)))
        upper = np.concatenate((own_v[:, 1:], np.full((own_v.shape[0], 1), np.inf)), axis=1)
        hit = (need > 0)[None, :] & (x >= own_v - 1e-12) & (x < upper)
        any_hit = hit.any(axis=1)
        first = np.argmax(hit, axis=1)
        picked = x[np.arange(x.shape[0]), first]
        if not any_hit.all():
            # F jumps past q at a point o_k (the wait's atom at 0 carries it): the quantile is that point
            left = k[None, :] / k_all - (c_s[:, None] / k_all) * np.exp(log_sum - scaled)
            jump = own_v[np.arange(x.shape[0]), np.argmax(left >= quantile, axis=1)]
            picked = np.where(any_hit, picked, jump)
        res[solve] = picked
    out[idx] = res
    return out


def erlang_c_batch(servers: np.ndarray, offered_load: np.ndarray) -> np.ndarray:
    """:func:`erlang_c` element by element (same operations, bit-identical), shape of ``offered_load``."""
    a = np.asarray(offered_load, dtype=float)
    n = np.asarray(servers)
    b = np.ones_like(a)
    for k in range(1, int(n.max()) + 1 if n.size else 1):
        b = np.where(k <= n, a * b / (k + a * b), b)
    c = n * b / (n - a * (1.0 - b))
    return np.where(a >= n, 1.0, np.where(a <= 0, 0.0, c))


QUANTILE_POINTS = 256
"""Points of the idle-TTFT distribution convolved with the M/G/n wait (:func:`mgn_ttft_quantile_s`)."""


def idle_ttft_points(totals_s: np.ndarray, n_points: int = QUANTILE_POINTS) -> np.ndarray:
    """The idle TTFT's distribution as ``n_points`` equally spaced quantiles, sorted (what
    :func:`mgn_ttft_quantile_s` convolves the wait with): ``totals_s`` of shape (rows, prompts) gives shape
    (rows, n_points), seconds."""
    grid = np.linspace(0.0, 100.0, n_points)
    return np.sort(np.percentile(totals_s, grid, axis=1).T, axis=1)


CAPACITY_BISECT_STEPS = 30
"""Bisection steps of the per-instance prefill capacity (a relative precision of 2^-30)."""


def mgn_ttft_quantile_s(
    rate: float, servers: int, mean_s: float, second_moment_s2: float, own_s: np.ndarray, quantile: float
) -> float:
    """q-quantile of ``wait + own`` (seconds) in M/G/n: the wait is 0 with probability 1 − C and exponential with
    mean τ = W/C otherwise (C, W as in :func:`mgn_wait_quantile_s`), independent of the request's own idle TTFT,
    whose distribution the sorted, equally likely points ``own_s`` give; inf when the servers are saturated.

    The CDF is ``F(x) = k/K − (C/K)·Σ_{j≤k} exp((o_j − x)/τ)`` on ``[o_k, o_{k+1})``, so on each interval
    ``F(x) = q`` solves in closed form: ``x = τ·(L_k − ln((k − qK)/C))`` with ``L_k = ln Σ_{j≤k} exp(o_j/τ)``
    (a running log-sum-exp); the answer is the first solution inside its interval."""
    a = rate * mean_s
    if a >= servers:
        return math.inf
    k_all = own_s.size
    if rate <= 0:
        return float(np.percentile(own_s, quantile * 100))
    c = erlang_c(servers, a)
    cs2 = second_moment_s2 / (mean_s * mean_s) - 1.0
    tau = mean_s / (servers - a) * (1.0 + cs2) / 2.0  # mean of the wait, given that it waits
    if c <= 0 or tau <= 0:
        return float(own_s[min(k_all - 1, int(math.ceil(quantile * k_all)) - 1)])
    k = np.arange(1, k_all + 1, dtype=float)
    log_sum = np.logaddexp.accumulate(own_s / tau)
    need = k - quantile * k_all
    with np.errstate(divide="ignore", invalid="ignore"):
        x = tau * (log_sum - np.log(np.where(need > 0, need / c, np.nan)))
    upper = np.append(own_s[1:], np.inf)
    hit = np.nonzero((need > 0) & (x >= own_s - 1e-12) & (x < upper))[0]
    if hit.size:
        return float(x[hit[0]])
    # F jumps past q at a point o_k (the wait's atom at 0 carries it): the quantile is that point
    left = k / k_all - (c / k_all) * np.exp(log_sum - own_s / tau)
    return float(own_s[int(np.argmax(left >= quantile))])


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability of waiting in M/M/c with ``servers`` servers and offered load a = λ/μ (1 when a ≥ c)."""
    if offered_load >= servers:
        return 1.0
    if offered_load <= 0:
        return 0.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    return servers * b / (servers - offered_load * (1.0 - b))


def decode_wait_quantile_s(rate: float, slots: int, residence_s: float, quantile: float) -> float:
    """q-quantile of the wait for a decode slot (M/M/c, Erlang C); inf when the slots are saturated."""
    drain = slots / residence_s - rate
    if drain <= 0:
        return math.inf
    c = erlang_c(slots, rate * residence_s)
    if c <= 1.0 - quantile:
        return 0.0
    return math.log(c / (1.0 - quantile)) / drain


def decode_capacity(
    inst: InstanceModel, stats: LengthStats, tpot_slo_s: float, trace: ArrivalTrace | None = None
) -> DecodeCapacity:
    """Largest arrival rate (req/s) one decode instance serves with TPOT ≤ ``tpot_slo_s`` at quantile q: the
    M/M/B (Erlang C) slot queue of the module docstring, and with a ``trace`` also within the fluid bound of its
    bursts on the decode slots (:func:`fluid_decode_rate`); the capacity is the smaller of the two. One item of
    :func:`decode_capacities` (which computes many at once, bit-identically)."""
    ctx = stats.decode_context
    min_tpot = float(inst.decode_step_latency_s(1, ctx))
    kv_limit = int(inst.max_batch_size(ctx))
    if min_tpot > tpot_slo_s or kv_limit < 1:
        return DecodeCapacity(0.0, 0, min_tpot, min_tpot, kv_limit)
    upper = min(kv_limit, inst.settings.max_num_seqs)
    batches = np.arange(1, upper + 1)
    steps = np.asarray(inst.decode_step_latency_s(batches, ctx), dtype=float)
    ok = np.nonzero(steps <= tpot_slo_s)[0]
    batch = int(batches[ok[-1]])
    step = float(steps[ok[-1]])
    tokens_after_first = max(stats.mean_output - 1.0, 1.0)
    residence = tokens_after_first * step
    budget = (tpot_slo_s - step) * tokens_after_first
    lo, hi = 0.0, batch / residence
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        if decode_wait_quantile_s(mid, batch, residence, stats.quantile) <= budget:
            lo = mid
        else:
            hi = mid
    if trace is not None:
        lo = min(lo, fluid_decode_rate(batch, step, trace.decode_tokens(stats.mean_output), trace, tpot_slo_s,
                                       stats.quantile, cap=lo))  # fmt: skip
    return DecodeCapacity(lo, batch, step, min_tpot, kv_limit)


def fluid_decode_rate(
    slots: int,
    step_s: float,
    tokens: np.ndarray,
    trace: ArrivalTrace,
    tpot_slo_s: float,
    quantile: float,
    cap: float | None = None,
) -> float:
    """Largest per-instance rate (req/s) whose fluid q-quantile TPOT ``step_s + W_i / tokens_i`` stays ≤
    ``tpot_slo_s`` on ``trace`` at its sized rate Λ (inf when no request decodes).

    ``tokens``: shape (n,), the tokens after the first per request of the trace, in its order
    (:meth:`ArrivalTrace.decode_tokens`). A request that decodes (``tokens_i ≥ 1``) holds one of ``slots`` decode
    slots for about ``t̄ · step_s`` seconds, t̄ the mean of ``tokens`` over those requests: the bound carries
    the trace's *rate* modulation (its bursts of arrivals); the randomness of each request's length is the
    Erlang C bound's (a fluid server with per-request holds lets one long output block every request behind it,
    while the B slots let the others pass: with per-request holds a Poisson replay of the Azure code sample got
    half the M/M/B capacity). An instance carrying rate r takes the share u = r / Λ of every burst, so its slots
    see the work ``u · t̄ · step_s / slots`` per decoding arrival (one server as fast as the B slots together) and
    the slot wait W_i follows Lindley's recursion over the trace's gaps (:func:`fluid_wait_s`). The wait is
    spread over the request's own remaining tokens, ``TPOT_i = step_s + W_i / tokens_i``, and the quantile is
    over the requests that decode (the simulator's TPOT is defined for two output tokens or more). Searched on
    [0, slots / mean(hold · step_s)] (the slots' saturation rate) by bisection. Source: hetplan's own
    reconstruction (the decode twin of :func:`fluid_prefill_rate`; Lindley 1952).

    ``cap``: a rate the caller takes the minimum with anyway (the Erlang C capacity): when the bound holds at
    ``cap`` it returns ``cap`` without searching (the wait grows with the rate, so the search could only find more)."""
    lam = trace.sized_rate_per_s
    gaps = trace.gaps_s
    decodes = tokens >= 1.0
    if not decodes.any():
        return math.inf
    spread = tokens[decodes]
    hold = np.where(decodes, float(spread.mean()), 0.0)
    work = hold * step_s / slots

    def ok(rate: float) -> bool:
        wait = fluid_wait_s(work * (rate / lam), gaps)
        return float(np.percentile(step_s + wait[decodes] / spread, quantile * 100)) <= tpot_slo_s

    if cap is not None and ok(cap):
        return cap
    return _largest(ok, slots / float((hold * step_s).mean()))


def fluid_decode_rates(
    slots: np.ndarray,
    step_s: np.ndarray,
    tokens: np.ndarray,
    trace: ArrivalTrace,
    tpot_slo_s: float,
    quantile: float,
    cap: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`fluid_decode_rate` of many decode instances at once (``slots``, ``step_s``, ``cap``: shape (rows,))
    sharing the per-request ``tokens`` (shape (n,)), found side by side (:func:`_largest_batch`); shape (rows,),
    req/s per instance, each bit-identical to the one-row function (rows that hold at their ``cap`` are not
    searched)."""
    lam = trace.sized_rate_per_s
    gaps = trace.gaps_s
    decodes = tokens >= 1.0
    if not decodes.any():
        return np.full(slots.size, math.inf)
    spread = tokens[decodes]
    hold = np.where(decodes, float(spread.mean()), 0.0)
    work = hold[None, :] * step_s[:, None] / slots[:, None]

    def tpot(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
        wait = fluid_wait_batch_s(work[rows] * (rate / lam)[:, None], gaps)
        return np.asarray(np.percentile(step_s[rows][:, None] + wait[:, decodes] / spread, quantile * 100, axis=1))

    hi = np.array([float(slots[k]) / float((hold * step_s[k]).mean()) for k in range(slots.size)])
    if cap is None:
        return _largest_batch(tpot, tpot_slo_s, hi, BISECT_STEPS, tokens.size)
    out = np.asarray(cap, dtype=float).copy()
    chunk = max(1, MAX_BATCH_ELEMENTS // max(1, tokens.size))  # the row chunks of _largest_batch, for memory
    parts = np.array_split(np.arange(slots.size), max(1, -(-slots.size // chunk)))
    holds = np.concatenate([tpot(out[rows], rows) <= tpot_slo_s for rows in parts])
    search = np.nonzero(~holds)[0]
    if search.size:

        def sub(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
            return tpot(rate, search[rows])

        out[search] = _largest_batch(sub, tpot_slo_s, hi[search], BISECT_STEPS, tokens.size)
    return out
