"""Baselines Hetis is compared with on the same pool, priced with the same perf model (:mod:`hetis_model`).

- **Splitwise-style phase split** (Patel et al., ISCA 2024, as Hetis's evaluation uses it): every GPU type's
  instances (the smallest TP inside one domain that fits the weights) are either prefill or decode instances;
  KV cache lives only on decode instances. Throughput = min(Σ prefill capacity, Σ decode capacity, KV-transfer
  capacity); every split of each type's instances between the phases is tried.
- **HexGen-style asymmetric pipeline** (Jiang et al., ICML 2024): ``dp`` pipelines over *all* GPUs, one stage per
  domain (TP = the domain's share of the pipeline), layers in proportion to stage speed (capped by memory and
  re-spread), attention local to each stage; every ``dp`` that divides the domains is tried.

Capacities are at full utilisation with no queueing, the same basis as the Hetis figure; TTFT is the idle
q-quantile prefill (plus KV transfer for the phase split, plus one decode step for the aggregated pipelines).

Source: hetplan's own reconstruction of both systems' planning rules (neither search is reproduced in full).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from hetplan.perf.arch import ModelArch
from hetplan.pool import Device, Pool
from hetplan.solvers.hetis_model import (
    HetisSettings,
    Workload,
    dense_stage_s,
    device_speed,
    free_kv_gib,
    handoff_s,
    instance,
    local_attention_s,
    overhead_s,
    prefill_stage_s,
    split_layers,
    weights_gib,
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
    """Smallest TP (dividing the heads, at most the domain size) at which the whole model fits one group."""
    for tp in TP_OPTIONS:
        if tp <= len(devices) and arch.attention_heads % tp == 0:
            if instance(arch, devices[0].gpu, tp, settings.perf).fits:
                return tp
    return None


def splitwise(
    arch: ModelArch, pool: Pool, work: Workload, ttft_s: float, tpot_s: float, settings: HetisSettings
) -> BaselineResult:
    """Best prefill/decode split of the pool's instances (see module docstring)."""
    perf = settings.perf
    by_type: dict[str, list[tuple[int, Device]]] = {}
    for dom in pool.domains():
        usable = [d for d in dom if device_speed(arch, d) > 0]
        tp = _tp_for(arch, usable, settings) if usable else None
        if tp is None:
            continue
        for i in range(len(usable) // tp):
            by_type.setdefault(usable[i * tp].gpu.name, []).append((tp, usable[i * tp]))
    if not by_type:
        return _infeasible("splitwise", "no domain holds the weights at any TP")
    ctx = work.decode_context
    q = work.quantile * 100
    prefill: dict[str, tuple[float, float]] = {}
    decode: dict[str, tuple[float, int, float, float]] = {}
    for name, insts in by_type.items():
        tp, dev = insts[0]
        m = instance(arch, dev.gpu, tp, perf)
        lat = np.asarray(m.prefill_latency_s(work.prompt_tokens), dtype=float)
        kv_s = (
            work.prompt_tokens * arch.kv_bytes_per_token / pool.inter_node.bytes_per_s + perf.kv_transfer_base_latency_s
        )
        prefill[name] = (1.0 / float(lat.mean()), float(np.percentile(lat + kv_s, q)))
        cap = min(settings.max_batch_per_replica, int(m.max_batch_size(ctx)))
        best = (0.0, 0, float("inf"))
        for b in range(cap, 0, -1):
            step = float(m.decode_step_latency_s(b, ctx))
            if step <= tpot_s:
                best = (b / (step * work.mean_output), b, step)
                break
        decode[name] = (best[0], best[1], best[2], float(m.kv_capacity_tokens))
    names = sorted(by_type)
    kv_rate = pool.inter_node.bytes_per_s / (float(work.prompt_tokens.mean()) * arch.kv_bytes_per_token)
    top: tuple[float, ...] | None = None
    choice: tuple[int, ...] = ()
    for split in itertools.product(*(range(len(by_type[n]) + 1) for n in names)):
        pre = [(n, k) for n, k in zip(names, split, strict=True) if k and prefill[n][1] <= ttft_s]
        dec = [
            (n, len(by_type[n]) - k) for n, k in zip(names, split, strict=True) if len(by_type[n]) - k and decode[n][1]
        ]
        if not pre or not dec or any(k and prefill[n][1] > ttft_s for n, k in zip(names, split, strict=True)):
            continue
        mu_p = sum(prefill[n][0] * k for n, k in pre)
        mu_d = sum(decode[n][0] * k for n, k in dec)
        rate = min(mu_p, mu_d, kv_rate * len(pre))
        kv = sum(decode[n][3] * k for n, k in dec)
        key = (rate, kv)
        if top is None or key > top:
            top, choice = key, split
    if top is None or top[0] <= 0:
        return _infeasible("splitwise", "no prefill/decode split meets the TTFT and TPOT SLOs")
    pre = [(n, k) for n, k in zip(names, choice, strict=True) if k]
    dec = [(n, len(by_type[n]) - k) for n, k in zip(names, choice, strict=True) if len(by_type[n]) - k]
    used: dict[str, int] = {}
    for n, k in pre + dec:
        used[n] = used.get(n, 0) + k * by_type[n][0][0]
    layout = (
        "prefill: "
        + ", ".join(f"{k}x {n} TP{by_type[n][0][0]}" for n, k in pre)
        + "; decode: "
        + ", ".join(f"{k}x {n} TP{by_type[n][0][0]}" for n, k in dec)
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
    """Best ``dp`` of asymmetric pipelines over every usable GPU (see module docstring)."""
    perf = settings.perf
    domains = [[d for d in dom if device_speed(arch, d) > 0] for dom in pool.domains()]
    domains = [sorted(dom, key=lambda d: d.name) for dom in domains if dom]
    if not domains:
        return _infeasible("hexgen", "no GPU runs the model's dtype")
    best: BaselineResult | None = None
    reasons = []
    q = work.quantile * 100
    for dp in range(1, min(len(d) for d in domains) + 1):
        if any(len(d) % dp for d in domains):
            continue
        stages: list[tuple[list[Device], float]] = []
        for dom in domains:
            share = len(dom) // dp
            tp = max(t for t in TP_OPTIONS if t <= share and arch.attention_heads % t == 0)
            devs = dom[:tp]
            stages.append((devs, tp * min(device_speed(arch, d) for d in devs)))
        stages.sort(key=lambda s: (-s[1], s[0][0].name))
        layers = _memory_layers(arch, stages, settings)
        if layers is None:
            reasons.append(f"DP{dp}: the weights do not fit")
            continue
        kv_tokens = min(
            free_kv_gib(devs[0].gpu, weights_gib(arch, len(devs), n / arch.layers), perf)
            * GIB
            * arch.kv_shards(len(devs))
            / (arch.kv_bytes_per_token * n / arch.layers)
            for (devs, _), n in zip(stages, layers, strict=True)
        )
        pp = len(stages)
        link = pool.inter_node.bytes_per_s
        pre_stage = [
            prefill_stage_s(arch, devs[0].gpu, len(devs), n / arch.layers, work.prompt_tokens, perf)
            for (devs, _), n in zip(stages, layers, strict=True)
        ]
        fixed = max(overhead_s(arch, devs[0].gpu, len(devs), perf) for devs, _ in stages)
        pre_mean = max(float(p.mean()) for p in pre_stage)
        ttft_idle = float(np.percentile(np.sum(pre_stage, axis=0) + fixed, q))
        ctx = work.decode_context
        top = None
        for b in range(max(1, settings.max_batch_per_replica // pp), 0, -1):
            if pp * b * ctx > kv_tokens:
                continue
            stage_t = [
                dense_stage_s(arch, devs[0].gpu, len(devs), n / arch.layers, b, perf)
                + local_attention_s(arch, devs[0].gpu, len(devs), n / arch.layers, b, ctx, perf)
                for (devs, _), n in zip(stages, layers, strict=True)
            ]
            tpot = pp * max(stage_t) + fixed + handoff_s(arch, pp, b, link, perf)
            if tpot <= tpot_s:
                top = (b, tpot)
                break
        if top is None:
            reasons.append(f"DP{dp}: TPOT above the SLO at batch 1 or no KV room")
            continue
        b, tpot = top
        ttft = ttft_idle + tpot
        if ttft > ttft_s:
            reasons.append(f"DP{dp}: TTFT {ttft:.3g} s above the SLO")
            continue
        rate = dp / (pre_mean + work.mean_output * tpot / (pp * b))
        used: dict[str, int] = {}
        for devs, _ in stages:
            used[devs[0].gpu.name] = used.get(devs[0].gpu.name, 0) + dp * len(devs)
        layout = f"DP{dp}: " + " -> ".join(
            f"{devs[0].gpu.name} TP{len(devs)} x {n} layers" for (devs, _), n in zip(stages, layers, strict=True)
        )
        res = BaselineResult("hexgen", rate, tpot, ttft, kv_tokens * dp, layout, dict(sorted(used.items())))
        if best is None or res.req_per_s > best.req_per_s:
            best = res
    return best or _infeasible("hexgen", "; ".join(reasons) or "no pipeline fits")
