"""Evaluating a Hetis layout (DESIGN §3.3): its dense-only score (an upper bound on its throughput), each DP
replica at its largest batch under the TPOT SLO with decode attention split head by head over the primaries and
the attention workers (:mod:`hetplan.solvers.headsplit`), and the attention workers shared out to the replicas.
The layouts are :mod:`hetplan.solvers.hetis_layout`; the search that calls this is :mod:`hetplan.solvers.hetis`.

Source: Hetis (Mo et al., SC '25) for the head-wise split of decode attention; the dense bound, length classes by
decode context, workers shared out by memory bandwidth and the pipeline and throughput model
(:mod:`hetplan.solvers.hetis_model`) are hetplan's own reconstruction (see :mod:`hetplan.solvers.hetis`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np

from hetplan.errors import InfeasibleError
from hetplan.mathutil import apportion
from hetplan.perf.arch import ModelArch
from hetplan.pool import Device, Pool
from hetplan.solvers import headsplit
from hetplan.solvers.headsplit import AttentionDevice, HeadSplit, LengthClass
from hetplan.solvers.hetis_layout import Layout, Stage
from hetplan.solvers.hetis_model import (
    ACT_BYTES,
    HetisSettings,
    Workload,
    dense_stage_s,
    free_kv_gib,
    handoff_s,
    head_bytes_per_token,
    overhead_s,
    prefill_stage_s,
    query_bytes_per_head,
    s_per_head_token,
    weights_gib,
)
from hetplan.units import GIB


@dataclass(frozen=True)
class ReplicaResult:
    """One DP replica at its largest batch under the TPOT SLO; ``req_per_s`` is 0 and ``reason`` says why when
    it misses the TPOT SLO at batch 1 or the TTFT SLO."""

    batch: int
    tpot_s: float
    ttft_s: float
    req_per_s: float
    dense_s: float
    split: HeadSplit | None
    attention: tuple[AttentionDevice, ...]
    classes: tuple[LengthClass, ...]
    kv_capacity_tokens: float
    reason: str = ""


def length_classes(work: Workload, edges: tuple[int, ...]) -> list[tuple[str, float, float]]:
    """``(name, share of running sequences, mean decode context)`` per class, by decode context ``S + O/2``;
    a class's share of the running batch is its share of output tokens (long outputs stay longer)."""
    s = work.prompt_tokens.astype(float)
    o = work.output_tokens.astype(float)
    ctx = s + o / 2
    bounds = [0.0, *map(float, edges), float("inf")]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        mask = (ctx > lo) & (ctx <= hi) if lo > 0 else ctx <= hi
        if not mask.any():
            continue
        name = f"<= {int(hi)}" if hi != float("inf") else f"> {int(lo)}"
        share = float(o[mask].sum() / o.sum())
        context = float((o[mask] * ctx[mask]).sum() / o[mask].sum())
        out.append((name, share, context))
    return out


def _classes(batch: int, spec: list[tuple[str, float, float]]) -> list[LengthClass]:
    counts = apportion([share for _, share, _ in spec], batch, at_least_one=False)
    return [LengthClass(name, ctx, n) for (name, _, ctx), n in zip(spec, counts, strict=True)]


def attention_devices(
    arch: ModelArch, pool: Pool, replica: tuple[Stage, ...], workers: tuple[Device, ...], settings: HetisSettings
) -> list[AttentionDevice]:
    """Head-split devices of one replica: one per TP rank of the primaries (a rank's stages form a chain that
    covers every layer) and one per attention worker (all layers; queries cross its link to the replica)."""
    perf = settings.perf
    out = []
    tp = replica[0].tp
    for rank in range(tp):
        chain = [(st.devices[rank], st.layers, st) for st in replica]
        a = sum(s_per_head_token(arch, d.gpu, n, perf) for d, n, _ in chain)
        fixed = sum(n * settings.attention_kernel_s_per_layer for _, n, _ in chain)
        cap = min(
            free_kv_gib(d.gpu, weights_gib(arch, st.tp, n / arch.layers), perf) * GIB / head_bytes_per_token(arch, n)
            for d, n, st in chain
        )
        out.append(AttentionDevice("+".join(d.name for d, _, _ in chain), "primary", a, 0.0, fixed, max(cap, 0.0)))
    anchor = replica[0].devices[0]
    for w in workers:
        link = pool.link(w, anchor)
        layers = arch.layers
        free = free_kv_gib(w.gpu, 0.0, perf) * GIB
        if free <= 0:
            continue
        out.append(
            AttentionDevice(
                w.name,
                "attention",
                s_per_head_token(arch, w.gpu, layers, perf),
                layers * query_bytes_per_head(arch) / link.bytes_per_s,
                layers * (settings.attention_kernel_s_per_layer + 2 * link.latency_s),
                free / head_bytes_per_token(arch, layers),
            )
        )
    return out


def _dense_parts(
    arch: ModelArch, pool: Pool, replica: tuple[Stage, ...], batch: float, settings: HetisSettings
) -> tuple[list[float], float]:
    perf = settings.perf
    stages = [
        dense_stage_s(arch, st.gpu, st.tp, st.layers / arch.layers, batch, perf, settings.catalog) for st in replica
    ]
    link = min((pool.link(a.devices[0], b.devices[0]).bytes_per_s for a, b in pairwise(replica)), default=1.0)
    fixed = max(overhead_s(arch, st.gpu, st.tp, perf, settings.catalog) for st in replica) + handoff_s(
        arch, len(replica), batch, link, perf
    )
    return stages, fixed


def _prefill_bottleneck(
    arch: ModelArch, pool: Pool, replica: tuple[Stage, ...], work: Workload, settings: HetisSettings
) -> tuple[float, float]:
    """(mean bottleneck-stage prefill time per request, q-quantile idle TTFT without the decode step), s."""
    perf = settings.perf
    per_stage = [
        prefill_stage_s(arch, st.gpu, st.tp, st.layers / arch.layers, work.prompt_tokens, perf, settings.catalog)
        for st in replica
    ]
    bottleneck = max(float(p.mean()) for p in per_stage)
    link = min((pool.link(a.devices[0], b.devices[0]).bytes_per_s for a, b in pairwise(replica)), default=1.0)
    total = np.sum(per_stage, axis=0) + max(overhead_s(arch, st.gpu, st.tp, perf, settings.catalog) for st in replica)
    if len(replica) > 1:
        hops = len(replica) - 1
        total = total + hops * (perf.pp_link_latency_s + work.prompt_tokens * arch.d_model * ACT_BYTES / link)
    return bottleneck, float(np.percentile(total, work.quantile * 100))


def dense_score(
    arch: ModelArch, pool: Pool, layout: Layout, work: Workload, tpot_s: float, settings: HetisSettings
) -> float:
    """Request throughput of the layout's dense path alone (attention left out) under the TPOT SLO, req/s.

    It is an upper bound on the layout's full throughput (and on any subset of its replicas): attention only adds
    to the step time, the dense step time does not fall as the batch grows, and the time per sequence
    (``TPOT / B``) does not rise, so each replica's best dense rate is at its largest batch under the SLO, found by
    bisection (grid points below it are checked too). The planner skips full evaluations this bound rules out."""
    total = 0.0
    for rep in layout.replicas:
        pp = len(rep)
        cap = max(1, settings.max_batch_per_replica // pp)
        pre, _ = _prefill_bottleneck(arch, pool, rep, work, settings)

        def tpot(b: int, rep: tuple[Stage, ...] = rep, pp: int = pp) -> float:
            stages, fixed = _dense_parts(arch, pool, rep, b, settings)
            return pp * max(stages) + fixed

        if tpot(1) > tpot_s:
            continue
        lo = _dense_batch_cap(arch, pool, rep, tpot_s, settings)
        total += max(
            1.0 / (pre + work.mean_output * tpot(b) / (pp * b)) for b in {lo, *(g for g in _batch_grid(cap) if g <= lo)}
        )
    return total


def _dense_batch_cap(
    arch: ModelArch, pool: Pool, replica: tuple[Stage, ...], tpot_s: float, settings: HetisSettings
) -> int:
    """Largest micro-batch whose dense path alone (no attention) holds the TPOT SLO, at least 1 (bisection; the
    dense step time does not fall as the batch grows)."""
    pp = len(replica)

    def ok(b: int) -> bool:
        stages, fixed = _dense_parts(arch, pool, replica, b, settings)
        return pp * max(stages) + fixed <= tpot_s

    lo, hi = 1, max(1, settings.max_batch_per_replica // pp)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _batch_grid(cap: int) -> list[int]:
    grid = sorted({1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512} | {cap})
    return [b for b in grid if 1 <= b <= max(cap, 1)]


def evaluate_replica(
    arch: ModelArch,
    pool: Pool,
    replica: tuple[Stage, ...],
    workers: tuple[Device, ...],
    work: Workload,
    tpot_s: float,
    settings: HetisSettings,
    exact: bool = True,
    ttft_s: float | None = None,
) -> ReplicaResult:
    """Largest batch (micro-batch ``B`` × ``pp``) whose TPOT holds with the head split, and the replica's
    throughput, TTFT and KV capacity there (see :mod:`hetis_model`). Bisection uses the greedy split; the final
    batch is re-split exactly with the MILP when ``exact`` and the pool is small enough."""
    pp = len(replica)
    devs = attention_devices(arch, pool, replica, workers, settings)
    spec = length_classes(work, settings.length_class_edges_tokens)
    pre, ttft_idle = _prefill_bottleneck(arch, pool, replica, work, settings)
    kv_tokens = sum(d.kv_capacity_head_tokens for d in devs) / arch.kv_heads

    def step(b: int, exact_split: bool) -> tuple[float, HeadSplit | None, float]:
        classes = _classes(pp * b, spec)
        try:
            if exact_split:
                split = headsplit.solve(devs, classes, arch.kv_heads, settings.milp_max_devices)
            else:
                split = headsplit.solve_greedy(devs, classes, arch.kv_heads)
        except InfeasibleError:
            return float("inf"), None, 0.0
        stages, fixed = _dense_parts(arch, pool, replica, b, settings)
        # the split covers all pp micro-batches and every layer: per micro-batch a stage carries its layers' share
        stage_t = [s + split.makespan_s * st.layers / arch.layers / pp for s, st in zip(stages, replica, strict=True)]
        return pp * max(stage_t) + fixed, split, sum(stages)

    lo, hi = 0, _dense_batch_cap(arch, pool, replica, tpot_s, settings)  # attention only adds time: B <= hi
    if step(1, False)[0] > tpot_s:
        lo = 0
    else:
        lo = 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if step(mid, False)[0] <= tpot_s:
                lo = mid
            else:
                hi = mid - 1
    if lo == 0:
        reason = "misses the TPOT SLO even at batch 1"
        return ReplicaResult(0, float("inf"), float("inf"), 0.0, 0.0, None, tuple(devs), (), kv_tokens, reason)
    tpot, split, dense = step(lo, exact)
    if split is None or tpot > tpot_s:  # the exact split is never worse; fall back to the greedy answer
        tpot, split, dense = step(lo, False)
    rate = 1.0 / (pre + work.mean_output * tpot / (pp * lo))
    ttft = ttft_idle + tpot
    reason = ""
    if ttft_s is not None and ttft > ttft_s:
        rate, reason = 0.0, f"p{work.quantile * 100:g} TTFT {ttft:.3g} s is above the SLO {ttft_s:g} s"
    classes = tuple(_classes(pp * lo, spec))
    assert split is not None
    empty = [k for k, c in enumerate(classes) if not c.requests]
    if empty:  # a class with no request in the expected batch still needs a rule: place one representative request
        rows = list(split.heads)
        for k in empty:
            rows[k] = headsplit.place_representative(
                devs, list(classes), split, classes[k].context_tokens, arch.kv_heads
            )
        split = replace(split, heads=tuple(rows))
    # KV capacity counts only devices that hold heads: an idle worker (e.g. behind a slow link) adds none
    held = [any(row[j] for row in split.heads) for j in range(len(devs))]
    kv_tokens = sum(d.kv_capacity_head_tokens for d, h in zip(devs, held, strict=True) if h) / arch.kv_heads
    return ReplicaResult(lo * pp, tpot, ttft, rate, dense, split, tuple(devs), classes, kv_tokens, reason)


def _share_workers(layout: Layout, workers: list[Device]) -> list[tuple[Device, ...]]:
    """Attention workers shared out to replicas: fastest memory first, to the replica with the least so far."""
    load = [0.0] * layout.dp
    out: list[list[Device]] = [[] for _ in range(layout.dp)]
    for w in sorted(workers, key=lambda d: (-d.gpu.hbm_gb_per_s, d.name)):
        i = min(range(layout.dp), key=lambda r: (load[r], r))
        out[i].append(w)
        load[i] += w.gpu.hbm_gb_per_s
    return [tuple(sorted(ws, key=lambda d: d.name)) for ws in out]


def evaluate_layout(
    arch: ModelArch,
    pool: Pool,
    layout: Layout,
    work: Workload,
    tpot_s: float,
    settings: HetisSettings,
    exact: bool = True,
    ttft_s: float | None = None,
) -> tuple[list[ReplicaResult], list[tuple[Device, ...]]]:
    """Every replica of ``layout`` with every non-primary device as an attention worker."""
    primary = {d.name for d in layout.devices}
    workers = [d for d in pool.devices if d.name not in primary]
    shares = _share_workers(layout, workers)
    return [
        evaluate_replica(arch, pool, rep, ws, work, tpot_s, settings, exact, ttft_s)
        for rep, ws in zip(layout.replicas, shares, strict=True)
    ], shares
