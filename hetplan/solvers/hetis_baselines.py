"""Baselines Hetis is compared with on the same pool, priced with the same perf model (:mod:`hetis_model`).

- **Splitwise-style phase split** (Patel et al., ISCA 2024, as Hetis's evaluation uses it): every GPU type's
  instances (the smallest TP inside one domain that fits the weights) are either prefill or decode instances;
  KV cache lives only on decode instances. Throughput = min(Σ prefill capacity, Σ decode capacity, KV-transfer
  capacity); every split of each type's instances between the phases is tried, and a decode kind that misses the
  TPOT SLO even at batch 1 is left idle (not listed, not counted in ``gpus_used``).
- **HexGen-style asymmetric pipeline** (Jiang et al., ICML 2024): ``dp`` pipelines over *all* GPUs, one stage per
  domain (TP = the domain's share of the pipeline), layers in proportion to stage speed (capped by memory and
  re-spread), attention local to each stage; every ``dp`` that divides the domains is tried. Each pipeline is scored
  by the Hetis replica model (:func:`hetplan.solvers.hetis_eval.evaluate_replica`) with no attention workers: its
  TP ranks hold the KV heads, so a layout Hetis and this baseline share gets the same throughput from both.

A TP group of two GPU types (one domain holding, say, an A100 and an RTX 3090) is priced by
:func:`hetis_model.group_gpu` (slowest member, smallest memory) and labelled ``A100-40GB-PCIe+RTX-3090``;
``gpus_used`` counts every member under its own type.

Capacities are at full utilisation with no queueing, the same basis as the Hetis figure; TTFT is the idle
q-quantile prefill (plus KV transfer for the phase split, plus one decode step for the aggregated pipelines).

Source: hetplan's own reconstruction of both systems' planning rules (neither search is reproduced in full).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.perf.arch import ModelArch
from hetplan.pool import Device, Pool
from hetplan.solvers.hetis_model import (
    HetisSettings,
    Workload,
    device_speed,
    group_gpu,
    group_label,
    instance,
    split_layers,
)
from hetplan.units import GIB

TP_OPTIONS = (1, 2, 4, 8)


@dataclass(frozen=True)
class BaselineResult:
    """A baseline's outcome: throughput (req/s), predicted TPOT/TTFT (s), KV capacity (tokens), the layout in
    words, the GPUs used per type, or ``reason`` when no configuration works."""

    name: str
    req_per_s: float
    tpot_s: float
    ttft_s: float
    kv_capacity_tokens: float
    layout: str
    gpus_used: dict[str, int]
    reason: str = ""


def _infeasible(name: str, reason: str) -> BaselineResult:
    return BaselineResult(name, 0.0, float("inf"), float("inf"), 0.0, "", {}, reason)


def _tp_for(arch: ModelArch, devices: list[Device], settings: HetisSettings) -> int | None:
    """Smallest TP (dividing the heads, at most the domain size) at which the whole model fits every group of
    ``tp`` consecutive devices (a mixed group is priced by :func:`group_gpu`: slowest member, smallest memory)."""
    for tp in TP_OPTIONS:
        if tp <= len(devices) and arch.attention_heads % tp == 0:
            groups = [devices[i : i + tp] for i in range(0, len(devices) - tp + 1, tp)]
            if all(
                instance(arch, group_gpu([d.gpu for d in g]), tp, settings.perf, settings.catalog).fits for g in groups
            ):
                return tp
    return None


def splitwise(
    arch: ModelArch, pool: Pool, work: Workload, ttft_s: float, tpot_s: float, settings: HetisSettings
) -> BaselineResult:
    """Best prefill/decode split of the pool's instances (see module docstring). Instances are grouped by kind
    (GPU types of the group and TP); a mixed group runs at its slowest member's speed with its smallest memory."""
    perf = settings.perf
    by_kind: dict[str, list[tuple[Device, ...]]] = {}
    spec_of: dict[str, GpuSpec] = {}
    for dom in pool.domains():
        usable = sorted((d for d in dom if device_speed(arch, d) > 0), key=lambda d: (-device_speed(arch, d), d.name))
        tp = _tp_for(arch, usable, settings) if usable else None
        if tp is None:
            continue
        for i in range(len(usable) // tp):
            group = tuple(usable[i * tp : (i + 1) * tp])
            gpus = [d.gpu for d in group]
            kind = f"{group_label(gpus)} TP{tp}"
            by_kind.setdefault(kind, []).append(group)
            spec_of[kind] = group_gpu(gpus)
    if not by_kind:
        return _infeasible("splitwise", "no domain holds the weights at any TP")
    ctx = work.decode_context
    q = work.quantile * 100
    prefill: dict[str, tuple[float, float]] = {}
    decode: dict[str, tuple[float, int, float, float]] = {}
    for kind, insts in by_kind.items():
        tp = len(insts[0])
        m = instance(arch, spec_of[kind], tp, perf, settings.catalog)
        lat = np.asarray(m.prefill_latency_s(work.prompt_tokens), dtype=float)
        kv_s = (
            work.prompt_tokens * arch.kv_bytes_per_token / pool.inter_node.bytes_per_s + perf.kv_transfer_base_latency_s
        )
        prefill[kind] = (1.0 / float(lat.mean()), float(np.percentile(lat + kv_s, q)))
        cap = min(settings.max_batch_per_replica, int(m.max_batch_size(ctx)))
        best = (0.0, 0, float("inf"))
        for b in range(cap, 0, -1):
            step = float(m.decode_step_latency_s(b, ctx))
            if step <= tpot_s:
                best = (b / (step * work.mean_output), b, step)
                break
        decode[kind] = (best[0], best[1], best[2], float(m.kv_capacity_tokens))
    kinds = sorted(by_kind)
    kv_rate = pool.inter_node.bytes_per_s / (float(work.prompt_tokens.mean()) * arch.kv_bytes_per_token)
    top: tuple[float, ...] | None = None
    chosen: tuple[list[tuple[str, int]], list[tuple[str, int]]] = ([], [])
    for split in itertools.product(*(range(len(by_kind[n]) + 1) for n in kinds)):
        if any(k and prefill[n][1] > ttft_s for n, k in zip(kinds, split, strict=True)):
            continue
        pre = [(n, k) for n, k in zip(kinds, split, strict=True) if k]
        # a decode kind that cannot hold the TPOT SLO even at batch 1 serves nothing: it is left idle, not listed
        dec = [(n, len(by_kind[n]) - k) for n, k in zip(kinds, split, strict=True) if len(by_kind[n]) - k]
        dec = [(n, k) for n, k in dec if decode[n][1]]
        if not pre or not dec:
            continue
        mu_p = sum(prefill[n][0] * k for n, k in pre)
        mu_d = sum(decode[n][0] * k for n, k in dec)
        rate = min(mu_p, mu_d, kv_rate * len(pre))
        kv = sum(decode[n][3] * k for n, k in dec)
        key = (rate, kv)
        if top is None or key > top:
            top, chosen = key, (pre, dec)
    if top is None or top[0] <= 0:
        return _infeasible("splitwise", "no prefill/decode split meets the TTFT and TPOT SLOs")
    pre, dec = chosen
    used: dict[str, int] = {}
    groups = [g for n, k in pre for g in by_kind[n][:k]] + [
        g for n, k in dec for g in by_kind[n][len(by_kind[n]) - k :]
    ]
    for d in (d for g in groups for d in g):
        used[d.gpu.name] = used.get(d.gpu.name, 0) + 1
    layout = (
        "prefill: " + ", ".join(f"{k}x {n}" for n, k in pre) + "; decode: " + ", ".join(f"{k}x {n}" for n, k in dec)
    )
    return BaselineResult(
        "splitwise",
        top[0],
        max(decode[n][2] for n, _ in dec),
        max(prefill[n][1] for n, _ in pre),
        top[1],
        layout,
        dict(sorted(used.items())),
    )


def _memory_layers(
    arch: ModelArch, stages: list[tuple[list[Device], float]], settings: HetisSettings
) -> list[int] | None:
    """Layers ∝ speed, capped by what each stage's memory holds with room left for KV; None if they do not fit."""
    caps = []
    for devs, _ in stages:
        tp = len(devs)
        per_layer = arch.weight_bytes / arch.layers / tp / GIB
        room = (
            min(d.gpu.hbm_gib for d in devs) * settings.perf.gpu_memory_utilization
            - settings.perf.activation_reserve_gib
        )
        caps.append(max(0, math.floor(0.9 * room / per_layer)))
    if sum(caps) < arch.layers or any(c < 1 for c in caps):
        return None
    layers = split_layers(arch.layers, [s for _, s in stages])
    for _ in range(arch.layers * len(stages)):
        over = [i for i, n in enumerate(layers) if n > caps[i]]
        if not over:
            return layers
        i = over[0]
        extra = layers[i] - caps[i]
        layers[i] = caps[i]
        open_stages = [j for j in range(len(layers)) if layers[j] < caps[j]]
        if not open_stages:
            return None
        add = split_layers(extra + len(open_stages), [stages[j][1] for j in open_stages])
        for j, a in zip(open_stages, add, strict=True):
            layers[j] += a - 1
    return layers if all(n <= c for n, c in zip(layers, caps, strict=True)) else None


def hexgen(
    arch: ModelArch, pool: Pool, work: Workload, ttft_s: float, tpot_s: float, settings: HetisSettings
) -> BaselineResult:
    """Best ``dp`` of asymmetric pipelines over every usable GPU (see module docstring). Each replica is scored
    by the Hetis replica model itself (:func:`hetplan.solvers.hetis_eval.evaluate_replica`) with no attention workers,
    so a layout that Hetis and this baseline share gets the same throughput from both."""
    from hetplan.solvers.hetis_eval import evaluate_replica  # the planner imports this module's callers
    from hetplan.solvers.hetis_layout import Stage

    domains = [[d for d in dom if device_speed(arch, d) > 0] for dom in pool.domains()]
    domains = [sorted(dom, key=lambda d: (-device_speed(arch, d), d.name)) for dom in domains if dom]
    if not domains:
        return _infeasible("hexgen", "no GPU runs the model's dtype")
    best: BaselineResult | None = None
    reasons = []
    for dp in range(1, min(len(d) for d in domains) + 1):
        if any(len(d) % dp for d in domains):
            continue
        tps = [max(t for t in TP_OPTIONS if t <= len(dom) // dp and arch.attention_heads % t == 0) for dom in domains]
        replicas = []
        for r in range(dp):
            groups = [dom[r * tp : (r + 1) * tp] for dom, tp in zip(domains, tps, strict=True)]
            stages = sorted(
                ((g, len(g) * min(device_speed(arch, d) for d in g)) for g in groups),
                key=lambda s: (-s[1], s[0][0].name),
            )
            layers = _memory_layers(arch, stages, settings)
            if layers is None:
                break
            replicas.append(tuple(Stage(tuple(g), n) for (g, _), n in zip(stages, layers, strict=True)))
        if len(replicas) < dp:
            reasons.append(f"DP{dp}: the weights do not fit")
            continue
        results = [evaluate_replica(arch, pool, rep, (), work, tpot_s, settings, True, ttft_s) for rep in replicas]
        failed = [f"replica {i}: {x.reason}" for i, x in enumerate(results) if x.req_per_s <= 0]
        if failed:
            reasons.append(f"DP{dp}: " + "; ".join(failed))
            continue
        used: dict[str, int] = {}
        for d in (d for rep in replicas for st in rep for d in st.devices):
            used[d.gpu.name] = used.get(d.gpu.name, 0) + 1
        layout = f"DP{dp}: " + " -> ".join(
            f"{group_label([d.gpu for rep in replicas for d in rep[k].devices])} TP{st.tp} x {st.layers} layers"
            for k, st in enumerate(replicas[0])
        )
        res = BaselineResult(
            "hexgen",
            sum(x.req_per_s for x in results),
            max(x.tpot_s for x in results),
            max(x.ttft_s for x in results),
            sum(x.kv_capacity_tokens for x in results),
            layout,
            dict(sorted(used.items())),
        )
        if best is None or res.req_per_s > best.req_per_s:
            best = res
    return best or _infeasible("hexgen", "; ".join(reasons) or "no pipeline fits")
