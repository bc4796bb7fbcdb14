"""The queueing formulas of :mod:`hetplan.perf.queueing` (:func:`erlang_c`, :func:`mgn_ttft_quantile_s`, there)
for many queues at once: each element goes through the scalar formula's floating-point operations, so the batched
capacity searches (:mod:`hetplan.perf.capacity`, :mod:`hetplan.perf.decode_capacity`) are bit-identical to
one-at-a-time ones (``tests/unit/test_capacity_batch.py`` checks each against the scalar formula or the tests'
reference, ``tests/unit/capacity_reference.py``).
"""

from __future__ import annotations

import math

import numpy as np


def erlang_c_batch(servers: np.ndarray, offered_load: np.ndarray) -> np.ndarray:
    """:func:`erlang_c` element by element (same operations, bit-identical), shape of ``offered_load``."""
    a = np.asarray(offered_load, dtype=float)
    n = np.asarray(servers)
    b = np.ones_like(a)
    for k in range(1, int(n.max()) + 1 if n.size else 1):
        b = np.where(k <= n, a * b / (k + a * b), b)
    c = n * b / (n - a * (1.0 - b))
    return np.where(a >= n, 1.0, np.where(a <= 0, 0.0, c))


def fluid_wait_batch_s(work_s: np.ndarray, gaps_s: np.ndarray) -> np.ndarray:
    """Waits of Lindley's recursion ``W_0 = 0, W_{i+1} = max(0, W_i + work_i − gap_i)`` for every row of ``work_s``
    (shape (rows, n)) with the shared ``gaps_s`` (shape (n-1,)): shape (rows, n), seconds. In closed form,
    ``W_i = X_i − min_{k≤i} X_k`` with ``X`` the cumulative sum of ``work − gap``; each row bit-identical to the
    one-row reference (``fluid_wait_s``, ``tests/unit/capacity_reference.py``). Source: Lindley 1952."""
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


QUANTILE_POINTS = 256
"""Points of the idle-TTFT distribution convolved with the M/G/n wait (:func:`mgn_ttft_quantile_s`)."""


def idle_ttft_points(totals_s: np.ndarray, n_points: int = QUANTILE_POINTS) -> np.ndarray:
    """The idle TTFT's distribution as ``n_points`` equally spaced quantiles, sorted (what
    :func:`mgn_ttft_quantile_s` convolves the wait with): ``totals_s`` of shape (rows, prompts) gives shape
    (rows, n_points), seconds."""
    grid = np.linspace(0.0, 100.0, n_points)
    return np.sort(np.percentile(totals_s, grid, axis=1).T, axis=1)
