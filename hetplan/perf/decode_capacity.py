"""Per-instance decode capacity under the TPOT SLO: the searches the planner runs.

The model is :mod:`hetplan.perf.queueing` (the spec: B continuous-batching slots as an M/M/B queue by Erlang C, and
the fluid bound of a trace's bursts on the slots, formulas and sources); this module computes it for many
(instance, length sample) items at once, every bisection side by side as numpy arrays, each bit-identical to the
one-at-a-time search (``decode_capacity`` in ``tests/unit/capacity_reference.py``, which
``tests/unit/test_capacity_bursts.py`` and ``tests/unit/test_mixed.py`` check it against). The result type,
:class:`~hetplan.perf.capacity.DecodeCapacity`, sits with the prefill one in :mod:`hetplan.perf.capacity`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hetplan.perf.batch_search import BISECT_STEPS, MAX_BATCH_ELEMENTS, largest_batch
from hetplan.perf.capacity import DecodeCapacity
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats
from hetplan.perf.latency import InstanceModel
from hetplan.perf.queueing_batch import erlang_c_batch, fluid_wait_batch_s


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
    """Largest arrival rate (req/s) each decode instance serves with TPOT ≤ ``tpot_slo_s`` at its sample's quantile
    q, per ``(instance, length sample)``: the M/M/B (Erlang C) slot queue of :mod:`hetplan.perf.queueing` (B the
    largest batch whose step at the sample's decode context meets the SLO, within the KV cache and
    ``max_num_seqs``; a slot busy for ``max(E[O] − 1, 1)`` steps; the wait's q-quantile spread over those tokens
    within the SLO's slack), and with a ``trace`` also within the fluid bound of its bursts on the decode slots
    (:func:`fluid_decode_rates`); the capacity is the smaller of the two.

    The bisections run side by side (Erlang C by :func:`~hetplan.perf.queueing_batch.erlang_c_batch`, the wait's
    logarithm by ``math.log`` element by element; with a ``trace``, its burst bound by :func:`fluid_decode_rates`, per
    SLO quantile), so the capacities are bit-identical to the
    one-item reference (``decode_capacity``, ``tests/unit/capacity_reference.py``; a test checks this)."""
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


def fluid_decode_rates(
    slots: np.ndarray,
    step_s: np.ndarray,
    tokens: np.ndarray,
    trace: ArrivalTrace,
    tpot_slo_s: float,
    quantile: float,
    cap: np.ndarray | None = None,
) -> np.ndarray:
    """Largest per-instance rate (req/s) whose fluid q-quantile TPOT ``step_s + W_i / tokens_i`` stays ≤
    ``tpot_slo_s`` on ``trace`` at its sized rate Λ, for many decode instances at once (``slots``, ``step_s``,
    ``cap``: shape (rows,)); shape (rows,), inf when no request decodes.

    ``tokens``: shape (n,), the tokens after the first per request of the trace, in its order
    (:meth:`~hetplan.perf.capacity_inputs.ArrivalTrace.decode_tokens`). A request that decodes (``tokens_i ≥ 1``)
    holds one of ``slots`` decode slots for about ``t̄ · step_s`` seconds, t̄ the mean of ``tokens`` over those
    requests: the bound carries the trace's *rate* modulation (its bursts of arrivals); the randomness of each
    request's length is the Erlang C bound's (a fluid server with per-request holds lets one long output block
    every request behind it, while the B slots let the others pass: with per-request holds a Poisson replay of the
    Azure code sample got half the M/M/B capacity). An instance carrying rate r takes the share u = r / Λ of every
    burst, so its slots see the work ``u · t̄ · step_s / slots`` per decoding arrival (one server as fast as the B
    slots together) and the slot wait W_i follows Lindley's recursion over the trace's gaps
    (:func:`~hetplan.perf.queueing_batch.fluid_wait_batch_s`). The wait is spread over the request's own remaining
    tokens, ``TPOT_i = step_s + W_i / tokens_i``, and the quantile is over the requests that decode (the
    simulator's TPOT is defined for two output tokens or more). Searched on [0, slots / mean(hold · step_s)] (the
    slots' saturation rate), side by side (:func:`~hetplan.perf.batch_search.largest_batch`), each row
    bit-identical to the one-row reference (``fluid_decode_rate``, ``tests/unit/capacity_reference.py``).

    ``cap``: a rate the caller takes the minimum with anyway (the Erlang C capacity): rows whose bound holds at
    their ``cap`` return it without searching (the wait grows with the rate, so the search could only find more).
    Source: hetplan's own reconstruction (the decode twin of the prefill fluid bound; Lindley 1952)."""
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
        return largest_batch(tpot, tpot_slo_s, hi, BISECT_STEPS, tokens.size)
    out = np.asarray(cap, dtype=float).copy()
    chunk = max(1, MAX_BATCH_ELEMENTS // max(1, tokens.size))  # the row chunks of largest_batch, for memory
    parts = np.array_split(np.arange(slots.size), max(1, -(-slots.size // chunk)))
    holds = np.concatenate([tpot(out[rows], rows) <= tpot_slo_s for rows in parts])
    search = np.nonzero(~holds)[0]
    if search.size:

        def sub(rate: np.ndarray, rows: np.ndarray) -> np.ndarray:
            return tpot(rate, search[rows])

        out[search] = largest_batch(sub, tpot_slo_s, hi[search], BISECT_STEPS, tokens.size)
    return out
