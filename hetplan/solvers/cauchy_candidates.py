"""Cauchy's candidates: every (prefill, decode) instance-option pair at every coprime ratio, their goodput, and the
exact pruning that keeps the ILP small (:func:`enumerate_candidates`; the ILP itself: :mod:`hetplan.solvers.cauchy`).

Candidates are every ordered pair of (GPU type, TP) instance options that fit the model and pass the deployment
rules, homogeneous pairs included, with coprime ratios n:m ≤ the bound (a k·n:k·m combo is k copies of n:m, so
nothing is lost); a combo serves ``G = min(n·μ_p, m·μ_d, μ_kv)`` req/s (capacities from
:mod:`hetplan.perf.capacity` and :mod:`hetplan.perf.decode_capacity`). Pruning is exact: a combo is dropped only
when another one has at least its goodput and uses no more GPUs of any type
(:func:`hetplan.solvers.cauchy_pruning.pareto_filter`). With a WAN link, cross-site combos put the prefill and
decode instances in different sites (:func:`cross_site_combos`).

Source: Cauchy (SoCC 2025) for the combo formulation; the enumeration and pruning are hetplan's own
reconstruction.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.deploy_rules import Deployment, Finding, instance_findings, pair_findings
from hetplan.errors import InfeasibleError
from hetplan.perf.capacity import PrefillCapacity, class_prefill_capacities, prefill_capacities
from hetplan.perf.decode_capacity import decode_capacities
from hetplan.perf.latency import InstanceModel, network_bytes_per_s
from hetplan.solvers.cauchy import (
    CandidateSet,
    Combo,
    InstanceOption,
    PlanRequest,
    deployment_of,
    option_shape,
    wan_settings,
)
from hetplan.solvers.cauchy_infeasible import slo_infeasible
from hetplan.solvers.cauchy_pruning import PairCombos, pareto_filter


def _instance_options(req: PlanRequest) -> tuple[list[InstanceOption], list[str]]:
    """Every (GPU, TP) of ``req`` that passes the deployment rules' instance checks
    (:data:`hetplan.deploy_rules.RULES`), with its decode capacity; and why each other one was left out."""
    fits: list[tuple[GpuSpec, int, InstanceModel]] = []
    skipped: list[str] = []
    dep = deployment_of(req)
    for gpu in req.gpus:
        for tp in req.tp_options:
            inst = (
                InstanceModel(req.arch, gpu, tp, 1, req.settings, req.catalog)
                if req.arch.attention_heads % tp == 0
                else None
            )
            found = instance_findings(option_shape(req, gpu, tp, "instance", inst), dep)
            if found or inst is None:
                skipped.extend(f"{f.what} ({f.why})" for f in found)
                continue
            fits.append((gpu, tp, inst))
    # every decode capacity in one batched search (bit-identical to decode_capacity, hetplan.perf.capacity)
    # with a trace, also its burst bound on the decode slots
    decs = decode_capacities([(inst, req.stats) for _, _, inst in fits], req.tpot_slo_s, req.arrivals)
    options = [
        InstanceOption(gpu, tp, inst, dec, network_bytes_per_s(gpu, tp, req.settings))
        for (gpu, tp, inst), dec in zip(fits, decs, strict=True)
    ]
    return options, skipped


def combo_prefill_capacities(req: PlanRequest, items: list[tuple[InstanceModel, float]]) -> list[PrefillCapacity]:
    """The prefill capacity of every ``(instance, link bytes/s)`` for ``req``'s combos: under the TTFT SLO over
    every request (:func:`~hetplan.perf.capacity.prefill_capacities`), or, with request classes
    (``req.class_slos``), the rate at which every class holds its own TTFT over its own requests
    (:func:`~hetplan.perf.capacity.class_prefill_capacities`)."""
    labelled = req.stats.class_labels is not None and (req.arrivals is None or req.arrivals.class_labels is not None)
    if req.class_slos and labelled:
        slos = [(name, ttft) for name, ttft, _ in req.class_slos]
        return class_prefill_capacities(items, req.stats, slos, req.arrivals, req.max_ratio)
    return prefill_capacities(items, req.stats, req.ttft_slo_s, req.arrivals, req.max_ratio)


def _pair_findings(req: PlanRequest, dep: Deployment, p: InstanceOption, d: InstanceOption) -> list[Finding]:
    """The deployment rules' pair checks that prefill option ``p`` and decode option ``d`` break."""
    unit = f"{p.gpu.name} TP{p.tp} -> {d.gpu.name} TP{d.tp}"
    ps = replace(option_shape(req, p.gpu, p.tp, "prefill", p.model), unit=unit)
    ds = replace(option_shape(req, d.gpu, d.tp, "decode", d.model), unit=unit)
    return pair_findings(ps, ds, dep)


def enumerate_candidates(req: PlanRequest, prune: bool = True) -> CandidateSet:
    """Build and prune the candidate combos (see module docstring); ``prune=False`` keeps every combo with
    positive goodput (for tests and inspection).

    Raises:
        InfeasibleError: no instance option fits the model, or none meets the TTFT or TPOT SLO even idle.
    """
    options, skipped = _instance_options(req)
    if not options:
        raise InfeasibleError(
            f"{req.arch.spec.name} does not fit any candidate GPU at TP {'/'.join(map(str, req.tp_options))}",
            "; ".join(skipped[:6]) + (" ..." if len(skipped) > 6 else ""),
            "add GPUs with more memory, allow higher TP (--tp 1,2,4,8), or quantize (--weight-dtype fp8)",
        )
    s_mean_kv = float((req.stats.prompt_tokens * req.arch.kv_bytes_per_token).mean())
    caps: dict[tuple[str, int, float], PrefillCapacity] = {}

    def pcap(p: InstanceOption, link: float) -> PrefillCapacity:
        key = (p.gpu.name, p.tp, link)
        if key not in caps:
            caps[key] = combo_prefill_capacities(req, [(p.model, link)])[0]
        return caps[key]

    ratios = [(n, m) for n in range(1, req.max_ratio + 1) for m in range(1, req.max_ratio + 1) if math.gcd(n, m) == 1]
    rn = np.array([r[0] for r in ratios], dtype=float)
    rm = np.array([r[1] for r in ratios], dtype=float)
    n_index = rn.astype(int) - 1
    pairs: list[tuple[InstanceOption, InstanceOption, float]] = []
    dep = deployment_of(req)
    refused: dict[str, Finding] = {}
    # each option's shape in both roles, built once (the rules read the unit only for their messages)
    shapes = {
        id(o): (option_shape(req, o.gpu, o.tp, "prefill", o.model), option_shape(req, o.gpu, o.tp, "decode", o.model))
        for o in options
    }
    for p in options:
        for d in options:
            if d.decode.rate_per_s <= 0:
                continue
            if req.keep_pairs is not None and (p.gpu.name, d.gpu.name) not in req.keep_pairs:
                continue
            broken = pair_findings(shapes[id(p)][0], shapes[id(d)][1], dep)  # e.g. NixlConnector's TP rule
            if broken:  # again with the pair's name in the messages
                broken = _pair_findings(req, dep, p, d)
            if broken:
                refused.setdefault(broken[0].rule, broken[0])
                continue
            pairs.append((p, d, min(p.network_bytes_per_s, d.network_bytes_per_s)))
    if not pairs and refused:
        first = next(iter(refused.values()))
        raise InfeasibleError(
            f"no prefill/decode pair of the candidates passes the deployment rules ({', '.join(refused)})",
            f"e.g. {first.what}: {first.why}",
            first.fix,
        )
    # every prefill capacity the pairs need, in one batched computation (hetplan.perf.capacity.prefill_capacities)
    wanted: dict[tuple[str, int, float], tuple[InstanceOption, float]] = {}
    for p, _, link in pairs:
        wanted.setdefault((p.gpu.name, p.tp, link), (p, link))
    batch = combo_prefill_capacities(req, [(p.model, link) for p, link in wanted.values()])
    caps.update(zip(wanted, batch, strict=True))
    per_inst_by_key = {
        key: np.array([pc.per_instance(n) for n in range(1, req.max_ratio + 1)]) for key, pc in caps.items()
    }
    raw: list[PairCombos] = []
    for p, d, link in pairs:
        key = (p.gpu.name, p.tp, link)
        pc = caps[key]
        if pc.rate_per_s <= 0:
            continue
        kv_rate = np.minimum(rn * p.network_bytes_per_s, rm * d.network_bytes_per_s) / s_mean_kv
        # n prefill instances share one queue (M/G/n): per-instance capacity by n
        per_inst = per_inst_by_key[key][n_index]
        good = np.minimum(np.minimum(rn * per_inst, rm * d.decode.rate_per_s), kv_rate)
        raw.append(PairCombos(p, d, pc, link, kv_rate, good))
    if not raw:
        raise slo_infeasible(req, options, pcap)
    enumerated = len(raw) * len(ratios)
    best_by_pair: dict[tuple[str, str], float] = {}
    for pair in raw:
        price = (
            rn * pair.p.tp * req.prices[pair.p.gpu.name].usd_per_gpu_hour
            + rm * pair.d.tp * req.prices[pair.d.gpu.name].usd_per_gpu_hour
        )
        names = (pair.p.gpu.name, pair.d.gpu.name)
        best_by_pair[names] = max(best_by_pair.get(names, 0.0), float((pair.good / price).max()))
    if prune:
        keep = pareto_filter(raw, rn.astype(int), rm.astype(int))
    else:
        keep = [(k, int(i)) for k, pair in enumerate(raw) for i in np.nonzero(pair.good > 0)[0]]
    combos = [_make_combo(req, raw[k], ratios[i]) for k, i in keep]
    combos.sort(key=lambda c: (-c.goodput_req_per_s / c.usd_per_hour, c.usd_per_hour, c.label))
    exact = len(combos) <= req.max_ilp_combos or not prune
    if not exact:
        combos = combos[: req.max_ilp_combos] + [c for c in combos[req.max_ilp_combos :] if c.homogeneous]
    if req.wan is not None and req.offers:
        combos += cross_site_combos(req, [(pair.p, pair.d) for pair in raw], ratios, s_mean_kv, prune)
    return CandidateSet(tuple(combos), enumerated, tuple(options), caps, exact, dict(sorted(best_by_pair.items())))


def cross_site_combos(
    req: PlanRequest,
    pairs: list[tuple[InstanceOption, InstanceOption]],
    ratios: list[tuple[int, int]],
    s_mean_kv: float,
    prune: bool = True,
) -> list[Combo]:
    """The cross-site variant of every (prefill option, decode option) pair (``--allow-cross-provider``).

    Its KV cache crosses ``req.wan``: each transfer runs at ``min(prefill NIC, decode NIC, WAN bandwidth)`` plus the
    WAN's latency (adding to TTFT, so the prefill capacity under the TTFT SLO is recomputed; a pair whose idle
    TTFT misses the SLO over the WAN has no cross-site combo), a copy's KV transfer capacity is
    ``min(n·prefill NIC, m·decode NIC, WAN bandwidth) / E[prompt KV bytes]``, and a copy pays egress
    ``egress_usd_per_gb × E[prompt KV bytes] × its goodput`` ($/hour, at the copy's provisioned goodput, whatever
    share of it the traffic uses). Dominated variants are dropped as for same-site combos
    (:func:`~hetplan.solvers.cauchy_pruning.pareto_filter`); with egress > 0 that is a heuristic (a dominating combo
    with more goodput pays more egress).

    Source: hetplan's own reconstruction (Cauchy's combo model with a WAN link between the two roles).
    """
    wan = req.wan
    if wan is None or not pairs:
        return []
    settings = wan_settings(req)
    models: dict[tuple[str, int], InstanceModel] = {}
    for p, _ in pairs:
        if p.key not in models:
            models[p.key] = InstanceModel(req.arch, p.gpu, p.tp, 1, settings, req.catalog)
    links = [min(p.network_bytes_per_s, d.network_bytes_per_s, wan.bytes_per_s) for p, d in pairs]
    wanted: dict[tuple[str, int, float], tuple[InstanceModel, float]] = {}
    for (p, _), link in zip(pairs, links, strict=True):
        wanted.setdefault((p.gpu.name, p.tp, link), (models[p.key], link))
    batch = combo_prefill_capacities(req, list(wanted.values()))
    caps = dict(zip(wanted, batch, strict=True))
    rn = np.array([r[0] for r in ratios], dtype=float)
    rm = np.array([r[1] for r in ratios], dtype=float)
    n_index = rn.astype(int) - 1
    raw: list[PairCombos] = []
    for (p, d), link in zip(pairs, links, strict=True):
        pc = caps[(p.gpu.name, p.tp, link)]
        if pc.rate_per_s <= 0:
            continue
        kv_bytes = np.minimum(np.minimum(rn * p.network_bytes_per_s, rm * d.network_bytes_per_s), wan.bytes_per_s)
        kv_rate = kv_bytes / s_mean_kv
        per_inst = np.array([pc.per_instance(n) for n in range(1, req.max_ratio + 1)])[n_index]
        good = np.minimum(np.minimum(rn * per_inst, rm * d.decode.rate_per_s), kv_rate)
        raw.append(PairCombos(p, d, pc, link, kv_rate, good))
    if not raw:  # no pair meets the TTFT SLO across the WAN
        return []
    if prune:
        keep = pareto_filter(raw, rn.astype(int), rm.astype(int))
    else:
        keep = [(k, int(i)) for k, pair in enumerate(raw) for i in np.nonzero(pair.good > 0)[0]]
    out = []
    for k, i in keep:
        c = _make_combo(req, raw[k], ratios[i])
        egress = wan.egress_usd_per_hour(s_mean_kv, c.goodput_req_per_s)
        out.append(replace(c, cross_site=True, egress_usd_per_hour=egress))
    out.sort(key=lambda c: (-c.goodput_req_per_s / (c.usd_per_hour + c.egress_usd_per_hour), c.usd_per_hour, c.label))
    return out


def _make_combo(req: PlanRequest, pair: PairCombos, ratio: tuple[int, int]) -> Combo:
    n, m = ratio
    p, d, pc = pair.p, pair.d, pair.pc
    i = _RATIO_INDEX(req.max_ratio)[ratio]
    price = n * p.tp * req.prices[p.gpu.name].usd_per_gpu_hour + m * d.tp * req.prices[d.gpu.name].usd_per_gpu_hour
    limits = [n * pc.per_instance(n), m * d.decode.rate_per_s, float(pair.kv_rate[i])]
    bound = ("prefill", "decode", "kv_transfer")[limits.index(min(limits))]  # the first minimum, as np.argmin
    return Combo(
        p.gpu.name,
        p.tp,
        n,
        d.gpu.name,
        d.tp,
        m,
        float(pair.good[i]),
        float(price),
        pc.per_instance(n),
        d.decode.rate_per_s,
        float(pair.kv_rate[i]),
        d.decode.batch,
        d.decode.step_s,
        pair.link,
        bound,
    )


@functools.cache
def _RATIO_INDEX(max_ratio: int) -> dict[tuple[int, int], int]:  # noqa: N802
    ratios = [(n, m) for n in range(1, max_ratio + 1) for m in range(1, max_ratio + 1) if math.gcd(n, m) == 1]
    return {r: i for i, r in enumerate(ratios)}
