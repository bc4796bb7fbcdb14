"""Cauchy: the cheapest set of heterogeneous prefill/decode GPU combos that meets a goodput target.

A combo ⟨n × GPU_p (TP t_p), m × GPU_d (TP t_d)⟩ serves ``G = min(n·μ_p, m·μ_d, μ_kv)`` req/s within the SLOs
(capacities from :mod:`hetplan.perf.capacity`) at ``P = n·t_p·π_p + m·t_d·π_d`` $/hour. Candidates are every ordered
pair of (GPU type, TP) instance options, homogeneous pairs included, with coprime ratios n:m ≤ the bound (a k·n:k·m
combo is k copies of n:m, so nothing is lost; enumerated by :mod:`hetplan.solvers.cauchy_candidates`). The deployment
ILP (DESIGN §3.1)::

    minimize    Σ_c P_c · y_c
    subject to  Σ_c G_c · y_c ≥ (1 + headroom) · goodput target
                Σ_c GPUs_{c,g} · y_c ≤ inventory_g        for every GPU type g with an inventory
                y_c ∈ ℕ

is solved by HiGHS through :mod:`hetplan.solvers.milp`; a second stage keeps the cost and picks the fewest
combos. Pruning is exact: a combo is dropped only when another one has at least its goodput and uses no more
GPUs of any type (see :func:`hetplan.solvers.cauchy_pruning.pareto_filter`), which cannot change the optimum; only
past ``max_ilp_combos`` survivors does a heuristic cut apply (the plan then says so). The homogeneous candidates
are a subset of the heterogeneous ones, so the heterogeneous optimum is never worse. Infeasibility names the
binding constraint (:mod:`hetplan.solvers.cauchy_infeasible`).

Source: Cauchy (SoCC 2025) for the combo formulation and the ILP; candidate pruning, the queueing model and
the diagnostics are hetplan's own reconstruction (no public code exists).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.catalog.offers import Offer, WanLink
from hetplan.catalog.pricing import GpuPrice
from hetplan.catalog.schemas import GpuSpec
from hetplan.deploy_rules import Deployment, InstanceShape, kv_cache_dtype
from hetplan.errors import InfeasibleError, InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.capacity import DecodeCapacity, PrefillCapacity
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats
from hetplan.perf.latency import InstanceModel, kv_transfer_s
from hetplan.perf.queueing import mgn_ttft_quantile_s
from hetplan.perf.queueing_batch import idle_ttft_points
from hetplan.perf.settings import PerfSettings
from hetplan.plan.deployment import combo_label
from hetplan.solvers.cauchy_infeasible import inventory_infeasible
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings
from hetplan.solvers.milp_covering import solve_covering
from hetplan.solvers.packing import CrossSiteNeed, Purchased, solve_purchase

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


@dataclass(frozen=True)
class PlanRequest:
    """Everything the Cauchy solver needs.

    Attributes:
        arch: model with dtypes.
        stats: length samples and SLO quantile.
        goodput_req_per_s: target goodput (req/s) before headroom.
        ttft_slo_s, tpot_slo_s: SLOs in seconds at ``stats.quantile``.
        gpus: GPU types that may be used.
        prices: $/GPU-hour per GPU name (every type in ``gpus`` must have one).
        inventory: GPU name -> count available (absent = unlimited).
        tp_options: TP degrees to consider.
        max_ratio: largest n and m in a combo.
        headroom: extra goodput fraction to provision (0.1 = 10 %).
        max_ilp_combos: cap on the ILP's size after exact (dominance) pruning; past it, the best by tokens/USD
            plus every homogeneous combo are kept and the plan says the pruning was heuristic.
        settings: performance-model settings.
        time_limit_s: each MILP solve's HiGHS time limit (a solve is killed a little past it).
        solve: how HiGHS runs (threads, slice presolve, the hard stop; :class:`hetplan.solvers.milp.SolveSettings`).
        keep_pairs: when set, only these (prefill GPU, decode GPU) type pairs are enumerated (``--prune-with``, an
            A1/A2 fit: :func:`hetplan.solvers.ce_fit.keep_pairs`); a heuristic, so the plan says so.
        arrivals: the workload's arrivals at the sized rate, for burst-aware prefill capacities (None: Poisson;
            :mod:`hetplan.perf.capacity`).
        deployment: engine, KV connector, ``--max-model-len`` and scale-up domain the candidates must be
            deployable with (:mod:`hetplan.deploy_rules`; None: :func:`deployment_of`'s defaults).
        offers: purchasable and owned offers (:mod:`hetplan.catalog.offers`); when set, deployments buy whole
            instances of them (:mod:`hetplan.solvers.packing`) and ``prices``/``inventory`` only rank candidates.
        wan: set by ``--allow-cross-provider`` (with offers): combos may also put prefill and decode at different
            sites, their KV transfer over this link (:func:`cross_site_combos`); None: every combo in one site.
        prefix_reuse: the prefix reuse ``stats``/``arrivals`` assume (their ``prefill_reuse``), as the plan's
            ``prefix_cache`` record (:func:`hetplan.planning.prefix.reuse_doc`); None: no reuse.
        class_slos: the scenario's request classes, ``(name, ttft_s, tpot_s)`` each (empty: one class, the SLOs
            above). With classes, ``ttft_slo_s``/``tpot_slo_s`` are the tightest among them, and the combos'
            prefill capacities judge each class on its own TTFT over its own requests (``stats.class_labels``,
            :func:`hetplan.perf.capacity.class_prefill_capacities`); decode is held to the tightest TPOT, since
            every class's requests share each decode step.
        catalog: the catalog the request's names were resolved in (profiled GPUs included), whose fitted engine
            curves its instances use (:class:`hetplan.perf.latency.InstanceModel`); None: the shipped catalogs.
    """

    arch: ModelArch
    stats: LengthStats
    goodput_req_per_s: float
    ttft_slo_s: float
    tpot_slo_s: float
    gpus: tuple[GpuSpec, ...]
    prices: dict[str, GpuPrice]
    inventory: dict[str, int] = field(default_factory=dict)
    tp_options: tuple[int, ...] = (1, 2, 4, 8)
    max_ratio: int = 8
    headroom: float = 0.1
    max_ilp_combos: int = 20000
    settings: PerfSettings = PerfSettings()
    time_limit_s: float = 30.0
    solve: SolveSettings = DEFAULT_SETTINGS
    keep_pairs: frozenset[tuple[str, str]] | None = None
    arrivals: ArrivalTrace | None = None
    deployment: Deployment | None = None
    offers: tuple[Offer, ...] = ()
    wan: WanLink | None = None
    prefix_reuse: dict[str, Any] | None = None
    class_slos: tuple[tuple[str, float, float], ...] = ()
    catalog: Catalog | None = None

    @property
    def demand_req_per_s(self) -> float:
        """Goodput to provision: target x (1 + headroom), req/s."""
        return self.goodput_req_per_s * (1.0 + self.headroom)


@dataclass(frozen=True)
class InstanceOption:
    """One (GPU type, TP) that fits the model, with its decode capacity."""

    gpu: GpuSpec
    tp: int
    model: InstanceModel
    decode: DecodeCapacity
    network_bytes_per_s: float

    @property
    def key(self) -> tuple[str, int]:
        """(GPU name, TP) of this option."""
        return (self.gpu.name, self.tp)


@dataclass(frozen=True)
class Combo:
    """One candidate combo and its predicted performance (one copy of it)."""

    prefill_gpu: str
    prefill_tp: int
    n_prefill: int
    decode_gpu: str
    decode_tp: int
    n_decode: int
    goodput_req_per_s: float
    usd_per_hour: float
    prefill_rate_per_instance: float
    decode_rate_per_instance: float
    kv_transfer_rate: float
    decode_batch: int
    decode_step_s: float
    link_bytes_per_s: float
    bound_by: str
    cross_site: bool = False
    egress_usd_per_hour: float = 0.0

    @property
    def homogeneous(self) -> bool:
        """True when prefill and decode run on the same GPU type."""
        return self.prefill_gpu == self.decode_gpu

    def gpus_used(self) -> dict[str, int]:
        """GPUs per type name used (by one copy, or by the whole allocation)."""
        used = {self.prefill_gpu: self.n_prefill * self.prefill_tp}
        used[self.decode_gpu] = used.get(self.decode_gpu, 0) + self.n_decode * self.decode_tp
        return used

    @property
    def label(self) -> str:
        """Human-readable ``n x GPU TP -> m x GPU TP`` (:func:`hetplan.plan.deployment.combo_label`)."""
        return combo_label(self.n_prefill, self.prefill_gpu, self.prefill_tp, self.n_decode, self.decode_gpu,
                           self.decode_tp)  # fmt: skip


@dataclass(frozen=True)
class Allocation:
    """A solved deployment: combos with counts, cost, capacity and solver status."""

    combos: tuple[tuple[Combo, int], ...]
    total_usd_per_hour: float
    goodput_req_per_s: float
    status: str
    mip_gap: float
    candidates: int
    purchase: Purchased | None = None
    sites: tuple[str, ...] = ()
    decode_sites: tuple[str, ...] = ()

    def gpus_used(self) -> dict[str, int]:
        """GPUs per type name used (by one copy, or by the whole allocation)."""
        used: dict[str, int] = {}
        for combo, count in self.combos:
            for name, n in combo.gpus_used().items():
                used[name] = used.get(name, 0) + n * count
        return dict(sorted(used.items()))


@dataclass(frozen=True)
class CandidateSet:
    """Every candidate kept for the ILP, plus counts for reporting."""

    combos: tuple[Combo, ...]
    enumerated: int
    options: tuple[InstanceOption, ...]
    prefill_caps: dict[tuple[str, int, float], PrefillCapacity]
    exact: bool = True
    best_req_per_s_per_usd_by_pair: dict[tuple[str, str], float] = field(default_factory=dict)


def deployment_of(req: PlanRequest) -> Deployment:
    """The :class:`~hetplan.deploy_rules.Deployment` the rules check ``req``'s candidates against: the request's
    own (``req.deployment``), or, when it sets none, vLLM defaults with ``--max-model-len`` the q-quantile request
    (``stats.max_context``, rounded up), the planner's rule before deployability was checked."""
    if req.deployment is not None:
        return req.deployment
    return Deployment(
        block_size_tokens=req.settings.block_size_tokens, max_model_len_tokens=math.ceil(req.stats.max_context)
    )


def option_shape(req: PlanRequest, gpu: GpuSpec, tp: int, role: str, inst: InstanceModel | None) -> InstanceShape:
    """How the deployment rules see one (GPU, TP) candidate of ``req`` in ``role``."""
    return InstanceShape(
        f"{gpu.name} TP{tp} {role}", gpu.name, req.arch, gpu.name, tp, 1, kv_cache_dtype(req.arch.kv_dtype),
        req.settings.block_size_tokens, inst,
    )  # fmt: skip


def wan_settings(req: PlanRequest) -> PerfSettings:
    """The performance settings of a cross-site KV transfer: the request's, with the WAN link's one-way latency
    added to the fixed latency of each transfer (``kv_transfer_base_latency_s``)."""
    if req.wan is None:
        return req.settings
    return replace(req.settings, kv_transfer_base_latency_s=req.settings.kv_transfer_base_latency_s + req.wan.latency_s)


def _usage(combos: tuple[Combo, ...] | list[Combo], names: list[str]) -> list[list[int]]:
    return [[c.gpus_used().get(g, 0) for c in combos] for g in names]


def solve_allocation(
    req: PlanRequest, combos: list[Combo] | tuple[Combo, ...], what: str = "plan", fewest_combos: bool = True
) -> Allocation:
    """Solve the deployment ILP over ``combos`` (``fewest_combos``: the second, tie-breaking stage; cost-only
    callers such as sensitivity analyses skip it).

    Raises:
        InfeasibleError: inventory cannot reach the demand; names each GPU type that binds and by how much.
    """
    combos = list(combos)
    if not combos:
        raise InfeasibleError(
            f"no candidate combos for the {what}", "every candidate failed the SLOs", "relax the SLOs or add GPU types"
        )
    if req.offers:
        return _purchased_allocation(req, combos, what, fewest_combos)
    # only GPU types with an inventory need a row; the others are unlimited
    names = sorted({g for c in combos for g in c.gpus_used()} & set(req.inventory))
    usage = _usage(combos, names)
    cap: list[int | None] = [req.inventory[g] for g in names]
    demand = req.demand_req_per_s
    upper = []
    for i, c in enumerate(combos):
        ub = math.ceil(demand / c.goodput_req_per_s)
        for limit, row in zip(cap, usage, strict=True):
            if row[i] and limit is not None:
                ub = min(ub, int(limit // row[i]))
        upper.append(max(ub, 0))
    result = solve_covering(
        [c.usd_per_hour for c in combos],
        [c.goodput_req_per_s for c in combos],
        demand,
        usage,
        cap,
        upper,
        second_stage_epsilon=1e-9 if fewest_combos else None,
        time_limit_s=req.time_limit_s,
        settings=req.solve,
    )
    if result.status not in ("optimal", "time_limit"):
        raise inventory_infeasible(req, combos, names, usage, cap, what)
    chosen = tuple((c, n) for c, n in zip(combos, result.counts, strict=True) if n > 0)
    chosen = tuple(sorted(chosen, key=lambda x: (x[0].label, x[1])))
    total = sum(c.usd_per_hour * n for c, n in chosen)
    goodput = sum(c.goodput_req_per_s * n for c, n in chosen)
    return Allocation(chosen, total, goodput, result.status, result.gap, len(combos))


def _purchased_allocation(req: PlanRequest, combos: list[Combo], what: str, fewest_combos: bool) -> Allocation:
    """The deployment ILP in whole purchased instances (:func:`hetplan.solvers.packing.solve_purchase`)."""
    demand = req.demand_req_per_s
    needs = []
    for c in combos:
        need = {(c.prefill_gpu, c.prefill_tp): c.n_prefill}
        need[(c.decode_gpu, c.decode_tp)] = need.get((c.decode_gpu, c.decode_tp), 0) + c.n_decode
        needs.append(need)
    cross = None
    if req.wan is not None:  # --allow-cross-provider: one MILP over every site, cross-site combos split by role
        cross = [
            CrossSiteNeed({(c.prefill_gpu, c.prefill_tp): c.n_prefill}, {(c.decode_gpu, c.decode_tp): c.n_decode},
                          c.egress_usd_per_hour) if c.cross_site else None
            for c in combos
        ]  # fmt: skip
    try:
        bought = solve_purchase(
            needs, req.offers, req.tp_options, what, value=[c.goodput_req_per_s for c in combos], demand=demand,
            upper=[math.ceil(demand / c.goodput_req_per_s) for c in combos], fewest_units=fewest_combos,
            time_limit_s=req.time_limit_s, cross=cross, settings=req.solve,
        )  # fmt: skip
    except InfeasibleError as exc:
        if any(not o.owned for o in req.offers) or not req.inventory:
            raise
        # owned GPUs only: say which inventory binds and by how much (GPU counts; packing can only need more)
        names = sorted({g for c in combos for g in c.gpus_used()} & set(req.inventory))
        found = inventory_infeasible(req, combos, names, _usage(combos, names), [req.inventory[g] for g in names],
                                     what)  # fmt: skip
        raise InfeasibleError(found.what, f"{found.why}; {exc.why}", found.fix) from None
    decode_sites = bought.unit_decode_sites or bought.unit_sites
    rows = sorted(
        ((combos[i], n, site, dsite) for i, n, site, dsite in zip(bought.unit_index, bought.counts, bought.unit_sites,
                                                                  decode_sites, strict=True) if n > 0),
        key=lambda x: (x[0].label, x[0].cross_site, x[2], x[3], x[1]),
    )  # fmt: skip
    chosen = tuple((c, n) for c, n, _, _ in rows)
    goodput = sum(c.goodput_req_per_s * n for c, n in chosen)
    return Allocation(
        chosen, bought.total_usd_per_hour, goodput, bought.status, bought.mip_gap, len(combos), bought,
        tuple(site for _, _, site, _ in rows),
        tuple(dsite for _, _, _, dsite in rows) if bought.unit_decode_sites else (),
    )  # fmt: skip


def predicted_latency(req: PlanRequest, cands: CandidateSet, combo: Combo, load_req_per_s: float) -> dict[str, float]:
    """Predicted q-quantile TTFT and TPOT of one combo copy carrying ``load_req_per_s`` (seconds).

    The TTFT is the q-quantile of the M/G/n wait convolved with the idle TTFT (prefill + KV transfer) over the
    workload's prompts (:func:`~hetplan.perf.capacity.mgn_ttft_quantile_s` on ``QUANTILE_POINTS`` quantiles), the
    rule the prefill capacity is sized by, so a combo at its capacity predicts the SLO, not more. (It added the
    wait's quantile to the idle TTFT's: at p99 on long prompts a combo sized to 0.5 s printed 0.58 s.)"""
    opt = {o.key: o for o in cands.options}
    p = opt[(combo.prefill_gpu, combo.prefill_tp)]
    service = np.asarray(p.model.prefill_latency_s(req.stats.prefill_tokens(p.model)), dtype=float)
    settings = wan_settings(req) if combo.cross_site else req.settings  # a cross-site copy's KV crosses the WAN
    kv = np.asarray(kv_transfer_s(req.arch, req.stats.prompt_tokens, combo.link_bytes_per_s, settings))
    q = req.stats.quantile  # the n prefill instances share one queue (M/G/n, hetplan.perf.capacity)
    own = idle_ttft_points((service + kv)[None, :])[0]
    mean_s, second_s2 = float(service.mean()), float((service**2).mean())
    ttft = mgn_ttft_quantile_s(load_req_per_s, combo.n_prefill, mean_s, second_s2, own, q)
    return {"ttft_s": ttft, "tpot_s": combo.decode_step_s, "utilization": load_req_per_s / combo.goodput_req_per_s}


def check_request(req: PlanRequest) -> None:
    """Validate ranges; raises :class:`InputError` naming the field."""
    if not req.goodput_req_per_s > 0:
        raise InputError(f"goodput must be > 0 req/s, got {req.goodput_req_per_s}", fix="pass e.g. --goodput 5")
    if not req.headroom > -1:  # below 0 only from verification's search for a cheaper plan that holds
        raise InputError(f"headroom must be > -1, got {req.headroom}", fix="pass e.g. --headroom 0.1")
    if req.max_ratio < 1:
        raise InputError(f"max ratio must be >= 1, got {req.max_ratio}", fix="pass e.g. --max-ratio 8")
    missing = [g.name for g in req.gpus if g.name not in req.prices]
    if missing:
        raise InputError(
            f"no price for {', '.join(missing)}",
            "every candidate GPU needs a $/GPU-hour",
            "pass --prices FILE with usd_per_gpu_hour for them, or pick another --cloud",
        )
