"""The one-at-a-time capacity searches the planner's batched ones are tested against (moved from
``hetplan/perf/capacity.py``, issue 29: production computes every capacity in batches, :mod:`hetplan.perf.capacity`
and :mod:`hetplan.perf.decode_capacity`). Each is the plain, readable form of the queueing model
(:mod:`hetplan.perf.queueing`): a scalar bisection per instance. The batched searches must give their answers bit
for bit (``tests/unit/test_capacity_batch.py``, ``test_capacity_bursts.py``, ``test_perf.py``, ``test_mixed.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from hetplan.perf.batch_search import BISECT_STEPS
from hetplan.perf.capacity import DecodeCapacity
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats
from hetplan.perf.latency import InstanceModel
from hetplan.perf.queueing import erlang_c


def fluid_wait_s(work_s: np.ndarray, gaps_s: np.ndarray) -> np.ndarray:
    """Waits of Lindley's recursion ``W_0 = 0, W_{i+1} = max(0, W_i + work_i − gap_i)`` (shape (n,), seconds), in
    closed form: ``W_i = X_i − min_{k≤i} X_k`` with ``X`` the cumulative sum of ``work − gap``."""
    x = np.concatenate(([0.0], np.cumsum(work_s[:-1] - gaps_s)))
    return np.asarray(x - np.minimum.accumulate(x))


def largest(ok: Callable[[float], bool], hi: float, steps: int = BISECT_STEPS) -> float:
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

    return largest(ok, 1.0 / float(service_s.mean()))


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
    return largest(ok, slots / float((hold * step_s).mean()))
