"""Mélange's aggregated capacity: the highest rate of a bucket's requests one aggregated (prefill and decode on
the same GPUs) instance serves within both SLOs (:func:`aggregated_capacity`; many at once, bit-identically:
:func:`aggregated_capacities_many`). The ILP that buys instances from these capacities: :mod:`hetplan.solvers.melange`.

Method (hetplan's own reconstruction; Mélange profiles it on hardware): prefill runs first (vLLM's default), taking
a share f = λ·E[T_prefill] of the GPU; TTFT is the M/G/1 wait of those prefills at utilisation f plus the prefill
itself (:func:`hetplan.perf.queueing.mg1_wait_quantile_s`); decode steps run in the remaining 1 - f, so a
request's TPOT is step(B, c)/(1 - f), with B the concurrency Little's law gives,
``B = λ·(E[O]-1)·step(B, c)/(1 - f)``; at the SLO percentile q the batch is ``B_q = B + z_q·√B``, so the TPOT
checked is the q-quantile ``step(B_q, c)/(1 - f)``. The capacity is the largest λ that keeps TTFT_q, TPOT_q, KV
capacity and ``max_num_seqs``, found by bisection.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from hetplan.perf.batch_search import BISECT_STEPS
from hetplan.perf.capacity_inputs import LengthStats
from hetplan.perf.decode_capacity import decode_step_tables
from hetplan.perf.latency import InstanceModel
from hetplan.perf.queueing import mg1_wait_quantile_s


def aggregated_capacity(inst: InstanceModel, stats: LengthStats, ttft_slo_s: float, tpot_slo_s: float) -> float:
    """Highest arrival rate (req/s) one aggregated instance serves within both SLOs (module docstring)."""
    service = np.asarray(inst.prefill_latency_s(stats.prefill_tokens(inst)), dtype=float)
    mean_s, second_s2 = float(service.mean()), float((service**2).mean())
    prefill_q = float(np.percentile(service, stats.quantile * 100))
    ctx = stats.decode_context
    kv_limit = int(inst.max_batch_size(stats.prompt_tokens.max() + stats.output_tokens.max()))
    kv_limit = min(kv_limit, int(inst.max_batch_size(ctx)), inst.settings.max_num_seqs)
    if kv_limit < 1 or prefill_q > ttft_slo_s:
        return 0.0
    batches = np.arange(1, kv_limit + 1)
    steps = np.asarray(inst.decode_step_latency_s(batches, ctx), dtype=float)
    tokens_after_first = max(stats.mean_output - 1.0, 1.0)

    z = NormalDist().inv_cdf(stats.quantile)

    def ok(rate: float) -> bool:
        busy = rate * mean_s
        if busy >= 1.0:
            return False
        if mg1_wait_quantile_s(rate, mean_s, second_s2, stats.quantile) + prefill_q > ttft_slo_s:
            return False
        stretched = steps / (1.0 - busy)
        enough = np.nonzero(batches >= rate * tokens_after_first * stretched)[0]
        if not enough.size:
            return False
        # the SLO percentile of the batch, not its mean: the number of decoding sequences is about Poisson around
        # Little's mean B (normal approximation), and the q-quantile request decodes in a batch of B_q
        mean_b = float(batches[enough[0]])
        b_q = min(int(math.ceil(mean_b + z * math.sqrt(mean_b))), kv_limit)
        return bool(mean_b + z * math.sqrt(mean_b) <= kv_limit + 1e-9) and bool(stretched[b_q - 1] <= tpot_slo_s)

    if not ok(1e-9):
        return 0.0
    lo, hi = 0.0, 1.0 / mean_s
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def aggregated_capacities(
    inst: InstanceModel, stats: list[LengthStats], ttft_slo_s: float, tpot_slo_s: float
) -> list[float]:
    """:func:`aggregated_capacity` of one instance for several length samples (the buckets); see
    :func:`aggregated_capacities_many`."""
    return aggregated_capacities_many([inst], stats, ttft_slo_s, tpot_slo_s)[0]


def aggregated_capacities_many(
    insts: list[InstanceModel], stats: list[LengthStats], ttft_slo_s: float, tpot_slo_s: float
) -> list[list[float]]:
    """:func:`aggregated_capacity` of every instance (rows of the result) for every length sample (the buckets,
    columns), all bisections run side by side as arrays; each element goes through the one-sample function's
    operations (``math.log`` for the M/G/1 tail included), so the capacities are bit-identical to it (a test
    checks this)."""
    rows = []
    by_bucket = prefill_services(insts, stats)
    for st, services in zip(stats, by_bucket, strict=True):
        # one percentile call per bucket over every instance (rows of equal length): the same order statistics
        prefill_qs = np.percentile(np.asarray(services), st.quantile * 100, axis=1) if insts else []
        ctx = st.decode_context
        for inst, service, prefill_q in zip(insts, services, prefill_qs, strict=True):
            kv_limit = int(inst.max_batch_size(st.prompt_tokens.max() + st.output_tokens.max()))
            kv_limit = min(kv_limit, int(inst.max_batch_size(ctx)), inst.settings.max_num_seqs)
            rows.append((float(service.mean()), float((service**2).mean()), float(prefill_q), ctx, kv_limit, st, inst))
    n_b = len(stats)
    out = [[0.0] * n_b for _ in insts]
    # rows are bucket-major: row r is instance r % len(insts), bucket r // len(insts)
    live = [i for i, r in enumerate(rows) if r[4] >= 1 and r[2] <= ttft_slo_s]
    if not live:
        return out
    width = max(rows[i][4] for i in live)
    batches = np.arange(1, width + 1)
    steps = np.full((len(live), width), np.inf)
    tables = decode_step_tables([(rows[i][6], rows[i][3], rows[i][4]) for i in live])  # one call per instance
    for k, table in enumerate(tables):
        steps[k, : table.size] = table
    mean_arr = np.array([rows[i][0] for i in live])
    second_arr = np.array([rows[i][1] for i in live])
    prefill_arr = np.array([rows[i][2] for i in live])
    limit_arr = np.array([rows[i][4] for i in live])
    tokens = np.array([max(rows[i][5].mean_output - 1.0, 1.0) for i in live])
    quantile = np.array([rows[i][5].quantile for i in live])
    z = np.array([NormalDist().inv_cdf(float(q)) for q in quantile])
    index = np.arange(len(live))

    def ok(rate: np.ndarray) -> np.ndarray:
        busy = rate * mean_arr
        good = busy < 1.0
        rho = rate * mean_arr
        wait = np.zeros(rate.size)
        tail = good & (rho > 1.0 - quantile) & (rate > 0)
        for k in np.nonzero(tail)[0]:  # mg1_wait_quantile_s, with its math.log
            mean_wait = rate[k] * second_arr[k] / (2.0 * (1.0 - rho[k]))
            wait[k] = (mean_wait / rho[k]) * math.log(rho[k] / (1.0 - quantile[k]))
        good &= ~(wait + prefill_arr > ttft_slo_s)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            stretched = steps / (1.0 - busy)[:, None]
            need = (rate * tokens)[:, None] * stretched
        enough = batches[None, :] >= need
        has = enough.any(axis=1)
        good &= has
        mean_b = batches[np.argmax(enough, axis=1)].astype(float)
        spread = mean_b + z * np.sqrt(mean_b)
        b_q = np.minimum(np.ceil(spread).astype(int), limit_arr)
        good &= spread <= limit_arr + 1e-9
        at = stretched[index, np.clip(b_q - 1, 0, width - 1)]
        return np.asarray(good & (at <= tpot_slo_s))

    start = ok(np.full(len(live), 1e-9))
    lo, hi = np.zeros(len(live)), 1.0 / mean_arr
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        passes = ok(mid)
        lo, hi = np.where(passes, mid, lo), np.where(passes, hi, mid)
    for k, i in enumerate(live):
        out[i % len(insts)][i // len(insts)] = float(lo[k]) if start[k] else 0.0
    return out


def prefill_services(insts: list[InstanceModel], stats: list[LengthStats]) -> list[list[np.ndarray]]:
    """Prefill seconds of every sample's prompts on every instance, shape [sample][instance] (arrays of the
    sample's size): one latency-model call per instance over all samples' prompts, cut back per sample (the
    model is element by element, so the values equal one call per sample; copies keep each array fresh)."""
    if not stats:
        return []
    edges = np.cumsum([0] + [np.asarray(st.prompt_tokens).size for st in stats])
    every = [
        np.asarray(inst.prefill_latency_s(np.concatenate([np.asarray(st.prefill_tokens(inst)) for st in stats])),
                   dtype=float)
        for inst in insts
    ]  # fmt: skip
    return [[e[edges[b] : edges[b + 1]].copy() for e in every] for b in range(len(stats))]
