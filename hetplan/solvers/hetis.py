"""Hetis planner: primary-worker search and head-wise decode attention over a mixed GPU pool (DESIGN §3.3).

What follows the Hetis paper (Mo et al., "Hetis: Serving LLMs in Heterogeneous GPU Clusters with Fine-grained and
Dynamic Parallelism", SC '25):
- dense modules (QKV/O projections, MLP, LM head) and prefill run on a chosen set of strong *primary* workers in a
  DP × PP × TP layout; every other GPU becomes an *attention worker* that holds KV cache and computes decode
  attention for some KV heads of some requests;
- primary sets are tried from the strongest compute tier down; TP stays inside one NVLink/PCIe domain; PP layers
  are split in proportion to stage speed; a layout is feasible when weights/(pp·tp) plus activations fit; the
  layout with the best dense throughput under the TPOT SLO wins, and a device whose inclusion slows the dense
  path (a straggler) is left out and serves attention;
- decode attention is split head by head to minimise the slowest device's time (:mod:`headsplit`).

hetplan's own reconstruction (no Hetis code is public):
- tiers are GPU models ranked by dense TFLOPS in the model's dtype (measured figures from the pool file win);
  a TP group is ``tp`` devices of one domain, fastest first, and runs at its slowest member's speed;
- the dense score of a layout is its request throughput with attention left out, an upper bound on its full
  throughput (layouts scoring 0 miss the TPOT SLO even without attention); layouts are taken best bound first and
  each is evaluated in full with the greedy head split unless its bound is below a throughput already reached
  (then it cannot win); replicas that serve nothing are dropped and their GPUs become attention workers, so DP
  counts serving replicas only; the best ``full_eval_top_n`` are re-evaluated with the exact MILP split (never
  worse than the greedy one) and the best wins;
- the pipeline and throughput model of :mod:`hetis_model`; length classes by decode context; workers are shared
  out to DP replicas by memory bandwidth; a device is a straggler when the best layout that includes it has a lower
  dense throughput than the chosen one.

Every unknown constant is in :class:`HetisSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InfeasibleError, InputError
from hetplan.mathutil import apportion
from hetplan.perf.arch import ModelArch
from hetplan.pool import Device, Pool
from hetplan.solvers import headsplit
from hetplan.solvers.headsplit import AttentionDevice, HeadSplit, LengthClass
from hetplan.solvers.hetis_model import (
    ACT_BYTES,
    HetisSettings,
    Workload,
    dense_stage_s,
    device_speed,
    eight_bit_refusal,
    free_kv_gib,
    group_gpu,
    group_label,
    handoff_s,
    head_bytes_per_token,
    overhead_s,
    prefill_stage_s,
    query_bytes_per_head,
    s_per_head_token,
    split_layers,
    weights_gib,
)
from hetplan.units import GIB

TP_OPTIONS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: a TP group (devices of one domain) holding ``layers`` layers."""

    devices: tuple[Device, ...]
    layers: int

    @property
    def tp(self) -> int:
        return len(self.devices)

    @property
    def gpu(self) -> GpuSpec:
        """The group's spec: the slowest member's, every figure at the group's minimum (:func:`group_gpu`)."""
        return group_gpu([d.gpu for d in self.devices])

    @property
    def label(self) -> str:
        """GPU types of the group (``A+B`` when mixed)."""
        return group_label([d.gpu for d in self.devices])


@dataclass(frozen=True)
class Layout:
    """Primary workers: ``dp`` replicas, each a pipeline of stages (``pp`` stages of ``tp`` GPUs)."""

    replicas: tuple[tuple[Stage, ...], ...]

    @property
    def dp(self) -> int:
        return len(self.replicas)

    @property
    def pp(self) -> int:
        return len(self.replicas[0])

    @property
    def tp(self) -> int:
        return self.replicas[0][0].tp

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(d for rep in self.replicas for st in rep for d in st.devices)

    def label(self) -> str:
        return f"DP{self.dp} x PP{self.pp} x TP{self.tp}"


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


@dataclass(frozen=True)
class LayoutScore:
    """Dense-only score of a layout (request throughput without attention), or why it is infeasible."""

    layout: Layout
    dense_req_per_s: float
    reason: str = ""


@dataclass(frozen=True)
class HetisPlan:
    """The chosen layout, per-replica results, worker assignment, excluded devices with reasons, the layouts
    considered (``scores``, dense bounds) and how many of them the dense bound did not rule out
    (``evaluated_in_full``, with the head split)."""

    layout: Layout
    replicas: tuple[ReplicaResult, ...]
    workers: tuple[tuple[Device, ...], ...]
    excluded: tuple[tuple[Device, str], ...]
    scores: tuple[LayoutScore, ...]
    tiers: tuple[tuple[str, float, int], ...]
    evaluated_in_full: int = 0

    @property
    def req_per_s(self) -> float:
        return sum(r.req_per_s for r in self.replicas)

    @property
    def kv_capacity_tokens(self) -> float:
        return sum(r.kv_capacity_tokens for r in self.replicas)


# -- layouts ----------------------------------------------------------------------------------------------------
def tiers(pool: Pool, arch: ModelArch) -> list[tuple[float, list[Device]]]:
    """Devices grouped by dense compute (TFLOPS, measured where given), strongest first; devices that cannot run
    the model's GEMMs (speed 0) are left out."""
    groups: dict[float, list[Device]] = {}
    for d in pool.devices:
        speed = device_speed(arch, d)
        if speed > 0:
            groups.setdefault(round(speed, 6), []).append(d)
    return sorted(groups.items(), key=lambda x: -x[0])


def _tp_groups(devices: list[Device], tp: int, arch: ModelArch) -> list[tuple[Device, ...]]:
    """TP groups of ``tp`` devices inside one domain, fastest members together; fastest groups first."""
    by_domain: dict[int, list[Device]] = {}
    for d in devices:
        by_domain.setdefault(d.domain, []).append(d)
    groups = []
    for dom in sorted(by_domain):
        members = sorted(by_domain[dom], key=lambda d: (-device_speed(arch, d), -d.gpu.hbm_gb_per_s, d.name))
        for i in range(0, len(members) - tp + 1, tp):
            groups.append(tuple(members[i : i + tp]))
    return sorted(groups, key=lambda g: (-min(device_speed(arch, d) for d in g), g[0].name))


def _fits(arch: ModelArch, stage: Stage, settings: HetisSettings) -> bool:
    fraction = stage.layers / arch.layers
    return all(free_kv_gib(d.gpu, weights_gib(arch, stage.tp, fraction), settings.perf) > 0 for d in stage.devices)


def enumerate_layouts(pool: Pool, arch: ModelArch, settings: HetisSettings) -> list[Layout]:
    """Every distinct DP × PP × TP layout over primary sets made of the top-k tiers (k = 1, 2, ...), whose
    weights fit (see module docstring). Deterministic order."""
    seen: set[tuple[tuple[tuple[str, ...], ...], ...]] = set()
    out: list[Layout] = []
    ranked = tiers(pool, arch)
    for k in range(1, len(ranked) + 1):
        members = [d for _, devs in ranked[:k] for d in devs]
        for tp in TP_OPTIONS:
            if arch.attention_heads % tp:
                continue
            groups = _tp_groups(members, tp, arch)
            for pp in range(1, min(settings.max_pp, len(groups), arch.layers) + 1):
                for dp in range(1, len(groups) // pp + 1):
                    chosen = groups[: dp * pp]
                    reps: list[list[tuple[Device, ...]]] = [[] for _ in range(dp)]
                    for i, g in enumerate(chosen):  # snake order balances the replicas
                        row = i % (2 * dp)
                        reps[row if row < dp else 2 * dp - 1 - row].append(g)
                    replicas = []
                    for rep in reps:
                        speeds = [len(g) * min(device_speed(arch, d) for d in g) for g in rep]
                        layers = split_layers(arch.layers, speeds)
                        replicas.append(tuple(Stage(g, n) for g, n in zip(rep, layers, strict=True)))
                    key = tuple(tuple(tuple(d.name for d in st.devices) for st in rep) for rep in replicas)
                    if key in seen:
                        continue
                    seen.add(key)
                    if all(_fits(arch, st, settings) for rep in replicas for st in rep):
                        out.append(Layout(tuple(replicas)))
    return out


# -- evaluation -------------------------------------------------------------------------------------------------
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
    stages = [dense_stage_s(arch, st.gpu, st.tp, st.layers / arch.layers, batch, perf) for st in replica]
    link = min((pool.link(a.devices[0], b.devices[0]).bytes_per_s for a, b in pairwise(replica)), default=1.0)
    fixed = max(overhead_s(arch, st.gpu, st.tp, perf) for st in replica) + handoff_s(
        arch, len(replica), batch, link, perf
    )
    return stages, fixed


def _prefill_bottleneck(
    arch: ModelArch, pool: Pool, replica: tuple[Stage, ...], work: Workload, settings: HetisSettings
) -> tuple[float, float]:
    """(mean bottleneck-stage prefill time per request, q-quantile idle TTFT without the decode step), s."""
    perf = settings.perf
    per_stage = [
        prefill_stage_s(arch, st.gpu, st.tp, st.layers / arch.layers, work.prompt_tokens, perf) for st in replica
    ]
    bottleneck = max(float(p.mean()) for p in per_stage)
    link = min((pool.link(a.devices[0], b.devices[0]).bytes_per_s for a, b in pairwise(replica)), default=1.0)
    total = np.sum(per_stage, axis=0) + max(overhead_s(arch, st.gpu, st.tp, perf) for st in replica)
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


def plan_hetis(
    arch: ModelArch,
    pool: Pool,
    work: Workload,
    tpot_s: float,
    settings: HetisSettings | None = None,
    ttft_s: float | None = None,
) -> HetisPlan:
    """Search primary workers and split attention (see module docstring). ``tpot_s`` and ``ttft_s`` are the SLOs
    in seconds (a replica whose predicted TTFT misses ``ttft_s`` counts for no throughput).

    Raises:
        InputError: the pool has no GPU that can run the model's GEMMs in its dtype.
        InfeasibleError: no layout fits the weights, or none meets the TPOT SLO even at batch 1.
    """
    settings = settings or HetisSettings()
    ranked = tiers(pool, arch)
    if not ranked:
        raise InputError(
            f"no GPU in pool {pool.name} can run {arch.spec.name}'s matrix multiplies in {arch.weight_dtype}",
            "every device lacks tensor cores for that dtype",
            "plan with --weight-dtype fp16 or add newer GPUs",
        )
    layouts = enumerate_layouts(pool, arch, settings)
    if not layouts:
        raise InfeasibleError(
            f"{arch.spec.name} ({arch.weight_dtype}) fits no primary layout of pool {pool.name}",
            f"weights {arch.weight_bytes / GIB:.1f} GiB; tried TP {TP_OPTIONS} inside each domain and PP up to "
            f"{settings.max_pp}",
            "add GPUs to a domain or quantize the weights (--weight-dtype fp8/int8); max PP has no CLI flag: from "
            "Python, pass settings=HetisSettings(max_pp=...) (hetplan.solvers.hetis_model) to "
            "hetplan.planning.hetis.hetis_plan",
        )
    scores = sorted(
        (LayoutScore(lay, dense_score(arch, pool, lay, work, tpot_s, settings)) for lay in layouts),
        key=lambda s: (-s.dense_req_per_s, len(s.layout.devices), s.layout.label()),
    )
    feasible = [s for s in scores if s.dense_req_per_s > 0]
    if not feasible:
        raise InfeasibleError(
            f"no primary layout meets the TPOT SLO of {tpot_s * 1e3:g} ms even at batch 1",
            f"{len(layouts)} layouts fit the weights; the fastest dense step alone exceeds the SLO",
            "relax --tpot or add faster GPUs",
        )
    # every feasible layout gets the full evaluation with the greedy head split (fast), serving replicas only;
    # the best ``full_eval_top_n`` are then re-evaluated with the exact MILP split and the best of those wins
    greedy: list[tuple[float, LayoutScore, list[ReplicaResult], list[tuple[Device, ...]]]] = []
    seen: set[tuple[tuple[tuple[str, ...], ...], ...]] = set()
    for s in feasible:  # best dense bound first
        if greedy and s.dense_req_per_s < max(g[0] for g in greedy) - 1e-12:
            continue  # its dense bound is below a throughput already reached: it cannot win
        lay, reps, shares = _serving(arch, pool, s.layout, work, tpot_s, settings, False, ttft_s)
        key = _layout_key(lay)
        if key in seen:
            continue
        seen.add(key)
        score = s if lay is s.layout else LayoutScore(lay, dense_score(arch, pool, lay, work, tpot_s, settings))
        greedy.append((sum(r.req_per_s for r in reps), score, reps, shares))
    greedy.sort(key=lambda x: (-x[0], len(x[1].layout.devices), x[1].layout.label()))
    if greedy[0][0] <= 0:
        whys = []
        for _, sc, reps, _ in greedy[:3]:
            parts = "; ".join(f"replica {i}: {r.reason}" for i, r in enumerate(reps) if r.reason)
            whys.append(f"{sc.layout.label()} ({_stage_words(sc.layout)}): {parts or 'serves no request'}")
        raise InfeasibleError(
            f"no Hetis layout of pool {pool.name} meets the SLOs",
            f"{len(greedy)} layouts evaluated, none serves a request; the smallest: " + " | ".join(whys),
            "relax --ttft or --tpot, or add faster GPUs",
        )
    best: tuple[float, LayoutScore, list[ReplicaResult], list[tuple[Device, ...]]] | None = None
    for rate0, sc, _, _ in greedy[: max(1, settings.full_eval_top_n)]:
        if rate0 <= 0:
            break
        lay, reps, shares = _serving(arch, pool, sc.layout, work, tpot_s, settings, True, ttft_s)
        rate = sum(r.req_per_s for r in reps)
        if best is None or rate > best[0] + 1e-12:
            best = (rate, sc if lay is sc.layout else LayoutScore(lay, sc.dense_req_per_s), reps, shares)
    assert best is not None
    evaluated = [(sc, rate) for rate, sc, _, _ in greedy]
    chosen, reps, shares = best[1], best[2], best[3]
    excluded = _excluded(pool, arch, chosen, best[0], scores, evaluated)
    tier_rows = tuple((devs[0].gpu.name, speed, len(devs)) for speed, devs in ranked)
    return HetisPlan(chosen.layout, tuple(reps), tuple(shares), tuple(excluded), tuple(scores), tier_rows, len(greedy))


def _layout_key(layout: Layout) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Device names per stage per replica: two layouts with the same key are the same layout."""
    return tuple(tuple(tuple(d.name for d in st.devices) for st in rep) for rep in layout.replicas)


def _stage_words(layout: Layout) -> str:
    """``replica 0: A100 TP1 -> RTX-3090 TP1`` style words for an error message."""
    return ", ".join(
        f"replica {i}: " + " -> ".join(f"{st.label} TP{st.tp}" for st in rep) for i, rep in enumerate(layout.replicas)
    )


def _serving(
    arch: ModelArch,
    pool: Pool,
    layout: Layout,
    work: Workload,
    tpot_s: float,
    settings: HetisSettings,
    exact: bool,
    ttft_s: float | None,
) -> tuple[Layout, list[ReplicaResult], list[tuple[Device, ...]]]:
    """Evaluate ``layout``; while some replicas serve nothing (TPOT missed at batch 1, or TTFT above the SLO) and
    others do, drop the idle ones (their devices become attention workers) and evaluate again, so DP counts only
    replicas that serve. Returns the (possibly smaller) layout, its replica results and worker shares."""
    while True:
        reps, shares = evaluate_layout(arch, pool, layout, work, tpot_s, settings, exact, ttft_s)
        keep = [rep for rep, r in zip(layout.replicas, reps, strict=True) if r.req_per_s > 0]
        if not keep or len(keep) == layout.dp:
            return layout, reps, shares
        layout = Layout(tuple(keep))


def _excluded(
    pool: Pool,
    arch: ModelArch,
    chosen: LayoutScore,
    chosen_full: float,
    scores: list[LayoutScore],
    evaluated: list[tuple[LayoutScore, float]],
) -> list[tuple[Device, str]]:
    """Why each device outside the chosen primaries serves attention only (greedy-split throughputs quoted)."""
    primary = {d.name for d in chosen.layout.devices}
    out = []
    for d in pool.devices:
        if d.name in primary:
            continue
        if device_speed(arch, d) <= 0:
            why = eight_bit_refusal(d.gpu, arch) or f"no {arch.weight_dtype} tensor cores"
            out.append((d, f"{why}: no dense work"))
            continue
        with_it = [s for s in scores if any(x.name == d.name for x in s.layout.devices)]
        if not with_it:
            out.append((d, "no primary layout that includes it fits the weights"))
            continue
        top = with_it[0]
        tried = [(s, r) for s, r in evaluated if any(x.name == d.name for x in s.layout.devices)]
        if top.dense_req_per_s <= 0:
            out.append((d, "every layout that includes it misses the TPOT SLO"))
        elif not tried and top.dense_req_per_s >= chosen.dense_req_per_s:
            out.append(
                (
                    d,
                    f"more useful for attention: the best layout with it ({top.layout.label()}) can serve at most "
                    f"{top.dense_req_per_s:.3g} req/s (its dense path alone), below the {chosen_full:.3g} the chosen "
                    "one serves",
                )
            )
        elif top.dense_req_per_s < chosen.dense_req_per_s or not tried:
            out.append(
                (
                    d,
                    f"straggler: the best layout with it ({top.layout.label()}) reaches {top.dense_req_per_s:.3g} "
                    f"req/s dense, the chosen one {chosen.dense_req_per_s:.3g}",
                )
            )
        else:
            s, rate = max(tried, key=lambda x: x[1])  # a layout with it beat the chosen one on dense throughput
            if rate >= chosen_full * (1 - 1e-9):
                out.append(
                    (
                        d,
                        f"a layout with it ({s.layout.label()}) ties with the chosen one at {rate:.3g} req/s; the "
                        "chosen one uses another GPU of the same speed",
                    )
                )
                continue
            out.append(
                (
                    d,
                    f"more useful for attention: best layout with it ({s.layout.label()}) serves {rate:.2f} req/s "
                    f"in all, the chosen one {chosen_full:.2f}",
                )
            )
    return out


__all__ = [
    "HetisPlan",
    "HetisSettings",
    "Layout",
    "Stage",
    "dense_score",
    "enumerate_layouts",
    "evaluate_layout",
    "length_classes",
    "plan_hetis",
    "tiers",
]
