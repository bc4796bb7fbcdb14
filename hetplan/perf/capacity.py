"""Per-instance capacity under TTFT/TPOT SLOs, with queueing headroom.

Method (hetplan's own reconstruction; DESIGN §2-3.1 give the roofline, not the queueing):

**Prefill instance → μ_p.** Requests arrive Poisson at rate λ and are prefilled one at a time (batch 1, which
is conservative: batching short prompts only helps). Service time T_i = prefill(S_i) from the roofline. The
queue is M/G/1: mean wait ``W = λ·E[T²] / (2(1-ρ))``, ρ = λ·E[T], and the waiting-time tail is taken as
exponential beyond the probability of waiting, ``P(wait > x) ≈ ρ·exp(-x·ρ/W)``, so its q-quantile is
``(W/ρ)·ln(ρ/(1-q))`` when ρ > 1-q, else 0. The predicted q-quantile TTFT is
``wait_q + quantile_q(T_i + kv_transfer_i)`` (adding quantiles over-estimates, on the safe side). μ_p is the
largest λ with TTFT_q ≤ SLO, found by bisection; 0 when even an idle instance misses the SLO.

**Decode instance → μ_d.** Continuous batching with B slots. A request holds KV for its prompt plus the tokens
generated so far; by Little's law the time-averaged context of a slot is ``c = E[O·(S + O/2)] / E[O]``
(long outputs stay longer). B = min(max_num_seqs, KV capacity / c, largest B whose decode step at context c
is ≤ the TPOT SLO). A slot is busy for ``R = max(E[O]-1, 1)·step(B, c)``. Waiting for a free slot is M/M/B
(Erlang C): ``P(wait > x) = C(B, λR)·exp(-(B/R - λ)·x)``. A wait w spreads over the request's remaining
tokens, so the TPOT SLO holds while ``w_q ≤ (SLO - step)·max(E[O]-1, 1)``; μ_d is the largest λ that keeps it.

**KV transfer → μ_kv.** ``link bytes/s / E[S·kv_bytes]`` over the prefill→decode link (see ``cauchy.py``).

Percentiles use numpy's linear estimator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetplan.perf.latency import InstanceModel, kv_transfer_s

BISECT_STEPS = 60


@dataclass(frozen=True)
class LengthStats:
    """Length samples and the SLO percentile used for capacities.

    Attributes:
        prompt_tokens: shape (n,) prompt lengths.
        output_tokens: shape (n,) output lengths (>= 1).
        quantile: SLO percentile as a fraction, e.g. 0.9.
    """

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    quantile: float

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
    """Capacity of one prefill instance: ``rate_per_s`` (req/s, 0 if the SLO cannot be met) and the
    q-quantile TTFT of an idle instance (``min_ttft_s``, prefill plus KV transfer)."""

    rate_per_s: float
    min_ttft_s: float
    mean_service_s: float


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


def prefill_capacity(
    inst: InstanceModel, stats: LengthStats, ttft_slo_s: float, link_bytes_per_s: float
) -> PrefillCapacity:
    """Largest arrival rate (req/s) one prefill instance serves with q-quantile TTFT ≤ ``ttft_slo_s``."""
    service = np.asarray(inst.prefill_latency_s(stats.prompt_tokens), dtype=float)
    kv = np.asarray(kv_transfer_s(inst.arch, stats.prompt_tokens, link_bytes_per_s, inst.settings), dtype=float)
    mean_s, second_s2 = float(service.mean()), float((service**2).mean())
    idle = float(np.percentile(service + kv, stats.quantile * 100))
    if idle > ttft_slo_s:
        return PrefillCapacity(0.0, idle, mean_s)
    lo, hi = 0.0, 1.0 / mean_s
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        if _ttft_q(mid, mean_s, second_s2, idle, stats.quantile) <= ttft_slo_s:
            lo = mid
        else:
            hi = mid
    return PrefillCapacity(lo, idle, mean_s)


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


def decode_capacity(inst: InstanceModel, stats: LengthStats, tpot_slo_s: float) -> DecodeCapacity:
    """Largest arrival rate (req/s) one decode instance serves with TPOT ≤ ``tpot_slo_s`` at quantile q."""
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
    return DecodeCapacity(lo, batch, step, min_tpot, kv_limit)
