"""The queueing model of per-instance capacity under TTFT/TPOT SLOs, with queueing headroom: the spec.

Method (hetplan's own reconstruction; DESIGN §2-3.1 give the roofline, not the queueing):

**Prefill instance → μ_p.** Requests arrive Poisson at rate λ and are prefilled one at a time (batch 1, which
is conservative: batching short prompts only helps). Service time T_i = prefill(S_i) from the roofline. One
instance alone is M/G/1: mean wait ``W = λ·E[T²] / (2(1-ρ))``, ρ = λ·E[T], and the waiting-time tail is taken as
exponential beyond the probability of waiting, ``P(wait > x) ≈ ρ·exp(-x·ρ/W)``, so its q-quantile is
``(W/ρ)·ln(ρ/(1-q))`` when ρ > 1-q, else 0. The n prefill instances of a combo share one queue (the simulator's
dispatch, :mod:`hetplan.sim.dispatch`), an M/G/n queue: Erlang C's probability of waiting replaces ρ and the mean
wait is Allen–Cunneen's ``C·E[T]/(n − a)·(1 + c_s²)/2`` (P-K for n = 1), so a combo's prefill capacity grows
faster than n (``PrefillCapacity.rate_by_n``). The q-quantile TTFT is that of ``wait + T_i +
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
the same fluid bound on their prefill work (:func:`~hetplan.perf.capacity.fluid_prefill_rates`). On a Poisson
trace the fluid bound is loose (it is the wait of a server as fast as the whole fleet), so smooth traffic keeps
the M/G/n capacity.

**Bursts on the decode slots.** The same replay bounds μ_d (:func:`~hetplan.perf.decode_capacity.fluid_decode_rates`): a
decode instance with B slots at step s carrying the share u of the traffic sees, per arrival i that decodes (``o_i ≥
2``), the work ``u·t̄·s/B`` (t̄ = the mean of ``o_i − 1`` over those requests: the slots as one server B times as fast,
holding each request for its mean residence), the slot wait W_i follows Lindley's recursion over the trace's gaps, and
the fluid TPOT of request i is ``s + W_i/(o_i − 1)`` (the wait spread over its own remaining tokens); μ_d is the largest
``u·Λ`` whose q-quantile fluid TPOT (over the requests that decode) is ≤ the TPOT SLO, and the decode capacity is
``min(Erlang C μ_d, this bound)``. Holds are the mean, not each request's own: a fluid server with per-request holds
lets one long output block every request behind it, which B slots do not (on a Poisson replay of the Azure code sample's
requests, H800 TP2 decode with 7 slots, per-request holds gave 0.47x Erlang C's 5.69 req/s, mean holds 0.82x, and an
exact FCFS replay of the 7 slots held the TPOT SLO up to 0.78x: both models are optimistic on smooth traffic with these
short, skewed outputs, Erlang C the more). Without outputs in the trace every request decodes the length sample's mean
output. On the Azure code sample at 4.4 req/s (Llama-3-70B, H800 TP2 decode: 7 KV slots) the bound is 0.62 req/s per
instance against Erlang C's 5.69; an exact FCFS replay of the slots the plan would size
(``tests/unit/test_capacity_bursts.py``) gives a p90 TPOT of 5.7 s at Erlang C's capacity and the 36 ms step at the
bound's.

Limits: the fluid view assumes the router splits every burst across instances in proportion to their capacity
(the simulator's weighted routing and shared queues do); it ignores that one request's prefill cannot be split,
and treats the replayed sample as the future (a burstier future needs the verification, :mod:`hetplan.sim.verify`,
to catch it). The decode bound replays the trace's arrivals, not their prefill completions (which prefill
smooths a little: the bound is conservative there); Mélange's aggregated capacity and the mixed strategy's
per-bucket decode capacities do not take it (only Cauchy's decode instances do).

Percentiles use numpy's linear estimator. Source: Lindley's recursion (Lindley 1952) and the fluid
approximation of a multi-server queue by one fast server; the combination with M/G/1 is hetplan's own
reconstruction.

Where each formula lives: this module keeps the scalar formulas the planner calls one at a time
(:func:`erlang_c`, :func:`mg1_wait_quantile_s` for Mélange's aggregated instances, :func:`mgn_ttft_quantile_s`
for a combo's predicted latency). The planner's capacity searches run them for hundreds of instances at once:
their element-by-element twins are in :mod:`hetplan.perf.queueing_batch`, the searches in
:mod:`hetplan.perf.capacity` (prefill, and the result types) and :mod:`hetplan.perf.decode_capacity` (decode), the
batched bisection in :mod:`hetplan.perf.batch_search`, and what they read of the workload in
:mod:`hetplan.perf.capacity_inputs`. The one-at-a-time searches the batched ones must reproduce bit for bit (the
M/G/n wait quantile, the fluid bounds, the decode capacity) are the tests' reference,
``tests/unit/capacity_reference.py``.
"""

from __future__ import annotations

import math

import numpy as np


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


def mg1_wait_quantile_s(rate: float, mean_s: float, second_moment_s2: float, quantile: float) -> float:
    """q-quantile of the M/G/1 waiting time under the exponential-tail approximation (inf when ρ ≥ 1)."""
    rho = rate * mean_s
    if rho >= 1.0:
        return math.inf
    if rho <= 1.0 - quantile or rate <= 0:
        return 0.0
    mean_wait = rate * second_moment_s2 / (2.0 * (1.0 - rho))
    return (mean_wait / rho) * math.log(rho / (1.0 - quantile))


def mgn_ttft_quantile_s(
    rate: float, servers: int, mean_s: float, second_moment_s2: float, own_s: np.ndarray, quantile: float
) -> float:
    """q-quantile of ``wait + own`` (seconds) in M/G/n: the wait is 0 with probability 1 − C and exponential with
    mean τ = W/C otherwise (C by :func:`erlang_c`, W Allen–Cunneen's mean wait of the module
    docstring), independent of the request's own idle TTFT, whose distribution the sorted, equally likely points
    ``own_s`` give; inf when the servers are saturated.

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
