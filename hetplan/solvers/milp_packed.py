"""The packed MILP: whole instances bought on multi-GPU bins (nodes, sites), the purchase layer's formulation
(:func:`solve_packed`, called by :mod:`hetplan.solvers.packing`), and the first-fit packing of instances on nodes
(:func:`pack_instances`). How HiGHS runs it: :mod:`hetplan.solvers.milp`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pulp

from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings, _affine, _below_cutoff, _gap, _run, _solver, _var
from hetplan.solvers.milp_slices import MAX_SLICE_LOAD, _mix_values, _mix_vars


@dataclass(frozen=True)
class PackedUnit:
    """A deployment-unit column of :func:`solve_packed`: ``usage`` serving instances per (GPU, TP) in one copy,
    the ``site`` all of them must share (None: any site, each instance wherever), goodput ``value`` (req/s, for the
    covering row), $/hour not paid through purchases (``extra_usd_per_hour``, e.g. WAN egress) and an optional
    upper bound on copies. ``usage_sites``, when set, gives a site per ``usage`` entry instead (a cross-site combo:
    its prefill instances at one site, its decode instances at another)."""

    usage: tuple[tuple[tuple[str, int], int], ...]
    site: str | None
    value: float = 0.0
    extra_usd_per_hour: float = 0.0
    upper: int | None = None
    usage_sites: tuple[str, ...] = ()

    def placed_usage(self) -> tuple[tuple[str | None, str, int, int], ...]:
        """``(site, gpu, tp, serving instances)`` per usage entry (``usage_sites`` where set, else ``site``)."""
        sites: tuple[str | None, ...] = self.usage_sites or tuple(self.site for _ in self.usage)
        return tuple((s, g, t, n) for s, ((g, t), n) in zip(sites, self.usage, strict=True))


@dataclass(frozen=True)
class PackedBin:
    """A purchasable offer for :func:`solve_packed`: ``gpus`` GPUs of ``gpu`` per instance at ``usd_per_hour``,
    in ``site``; ``hosts``: the TP degrees one instance group can host; ``count``: instances available (None =
    unlimited)."""

    site: str
    gpu: str
    gpus: int
    usd_per_hour: float
    hosts: tuple[int, ...]
    count: int | None = None


@dataclass(frozen=True)
class PackedResult:
    """Outcome of :func:`solve_packed`: copies per unit, instances bought per bin, serving instances of each TP
    placed on each bin (``placed[(bin, tp)]``), total $/hour and the MIP gap."""

    status: str
    units: tuple[int, ...]
    bought: tuple[int, ...]
    placed: dict[tuple[int, int], int]
    objective: float
    gap: float
    slices: tuple[tuple[int, ...], ...] = ()
    mix: tuple[float, ...] = ()


def solve_packed(
    units: Sequence[PackedUnit],
    bins: Sequence[PackedBin],
    demand: float = 0.0,
    slice_load: Sequence[Sequence[float | None]] | None = None,
    slices_per_bucket: int = 1,
    second_stage_epsilon: float | None = 1e-9,
    time_limit_s: float = 30.0,
    mip_gap: float = 0.0,
    link: bool = False,
    cost_cap: float | None = None,
    mix_load: Sequence[float | None] | None = None,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> PackedResult:
    """The deployment MILP that buys whole instances and packs serving instances onto them::

        minimize    Σ_b price_b · x_b + Σ_u extra_u · y_u
        subject to  Σ_u value_u · y_u ≥ demand                                  (goodput; combos)
                    Σ_u z_{k,u} = K,  Σ_k load_{k,u} · z_{k,u} ≤ y_u            (Mélange slices, if given)
                    Σ_{u in s} use_{u,g,t} · y_u ≤ Σ_{b in s, gpu g} p_{b,t}     per site s, GPU g, TP t
                    Σ_u use_{u,g,t} · y_u ≤ Σ_{b, gpu g} p_{b,t}                 per g, t (only with any-site units)
                    Σ_t t · p_{b,t} ≤ gpus_b · x_b,   x_b ≤ count_b              per bin
                    x, y, p, z ∈ ℕ,   Σ_u y_u ≥ 1

    ``p_{b,t}`` exists only for TP degrees the bin hosts (a TP group inside one instance, or across instances of a
    scale-up domain). With power-of-two TP degrees that divide the instance's GPUs, the aggregate row packs
    exactly (first-fit decreasing fills each instance); :func:`pack_instances` does that placement.

    Args:
        units: the columns (combos at a site, or aggregated instance types at a site).
        bins: the offers that may be bought.
        demand: required Σ value·y (0 with ``slice_load``).
        slice_load: shape (K, U): units' worth of one slice of bucket k on unit u (None: cannot serve).
        slices_per_bucket: K slices per bucket.
        second_stage_epsilon: if not None, re-solve for the fewest unit copies at cost ≤ (1+ε)·optimum.
        cost_cap: when set, only answers costing less are sought (``infeasible`` otherwise): how a caller that
            already holds a cheaper answer elsewhere skips this model quickly.
        link: add ``z_{k,u} ≤ K·y_u`` (set on the retry when a unit serves slices with no copy, loads being below
            the solver's tolerance, as :func:`solve_slice_assignment` does).
        mix_load: shape (U,), with ``slice_load`` only: units' worth of ALL the demand served as the workload's mix
            on unit u (None: no such mode), as in :func:`solve_slice_assignment` (the mixed strategy).
        settings: how HiGHS runs (:class:`SolveSettings`; its ``slice_presolve`` applies with ``slice_load``).

    Returns:
        :class:`PackedResult`; status ``infeasible`` when no purchase meets the demand.

    Source: hetplan's own reconstruction (Cauchy's and Mélange's ILPs with a bin-packing purchase layer).
    """
    n, m = len(units), len(bins)
    empty = PackedResult("infeasible", tuple(0 for _ in units), tuple(0 for _ in bins), {}, float("nan"), float("nan"))
    if not n:
        return empty

    def build(name: str) -> tuple[pulp.LpProblem, list[Any], list[Any], dict[tuple[int, int], Any], dict[Any, Any]]:
        prob = pulp.LpProblem(name, pulp.LpMinimize)
        ys = [_var(prob, f"y{i:05d}", units[i].upper) for i in range(n)]
        xs = [_var(prob, f"x{j:04d}", bins[j].count) for j in range(m)]
        ps = {(j, t): _var(prob, f"p{j:04d}_{t}", None) for j in range(m) for t in bins[j].hosts}
        zs: dict[Any, Any] = {}
        if demand > 0:
            prob += _affine(ys, [u.value for u in units]) >= float(demand), "demand"
        prob += _affine(ys, [1.0] * n) >= 1, "not_empty"
        if slice_load is not None:
            k = int(slices_per_bucket)
            mix = _mix_vars(prob, mix_load)
            for u, f in mix.items():
                zs["mix", u] = f
            for b, row in enumerate(slice_load):
                opts = [(u, v) for u, v in enumerate(row) if v is not None and v <= MAX_SLICE_LOAD]
                if not opts and not mix:
                    return prob, ys, xs, ps, {"infeasible": True}
                for u, _ in opts:
                    zs[b, u] = _var(prob, f"z{b:04d}_{u:05d}", k)
                terms_b = [(zs[b, u], 1.0) for u, _ in opts] + [(f, float(k)) for f in mix.values()]
                prob += pulp.LpAffineExpression(terms_b) == k, f"bucket{b:04d}"
            for u in range(n):
                terms = [(zs[b, u], float(slice_load[b][u] or 0.0)) for b in range(len(slice_load)) if (b, u) in zs]
                if u in mix:
                    assert mix_load is not None
                    terms.append((mix[u], float(mix_load[u] or 0.0)))
                    if link:
                        prob += pulp.LpAffineExpression([(mix[u], 1.0), (ys[u], -1.0)]) <= 0, f"linkmix{u:05d}"
                if terms:
                    prob += pulp.LpAffineExpression([*terms, (ys[u], -1.0)]) <= 0, f"load{u:05d}"
            for b, u in sorted(key for key in zs if key[0] != "mix") if link else ():  # loads below the tolerance
                prob += pulp.LpAffineExpression([(zs[b, u], 1.0), (ys[u], -float(k))]) <= 0, f"link{b:04d}_{u:05d}"
        need: dict[tuple[str | None, str, int], list[tuple[Any, float]]] = {}
        for i, unit in enumerate(units):
            for site_of, gpu, tp, count in unit.placed_usage():
                need.setdefault((site_of, gpu, tp), []).append((ys[i], float(count)))
        any_site = any(u.site is None for u in units)
        rows = sorted(need.items(), key=lambda kv: (kv[0][0] or "", kv[0][1], kv[0][2]))
        for r, ((site, gpu, tp), terms) in enumerate(rows):
            if site is None:
                continue
            supply = [
                (ps[j, tp], -1.0) for j in range(m) if bins[j].site == site and bins[j].gpu == gpu and (j, tp) in ps
            ]
            prob += pulp.LpAffineExpression(terms + supply) <= 0, f"place{r:05d}"
        if any_site:
            total: dict[tuple[str, int], list[tuple[Any, float]]] = {}
            for (_, gpu, tp), terms in need.items():
                total.setdefault((gpu, tp), []).extend(terms)
            for r, ((gpu, tp), terms) in enumerate(sorted(total.items())):
                supply = [(ps[j, tp], -1.0) for j in range(m) if bins[j].gpu == gpu and (j, tp) in ps]
                prob += pulp.LpAffineExpression(terms + supply) <= 0, f"all{r:05d}"
        for j, one in enumerate(bins):
            terms = [(ps[j, t], float(t)) for t in one.hosts]
            if terms:
                prob += pulp.LpAffineExpression([*terms, (xs[j], -float(one.gpus))]) <= 0, f"bin{j:04d}"
        return prob, ys, xs, ps, zs

    def objective(ys: list[Any], xs: list[Any]) -> pulp.LpAffineExpression:
        terms = [(x, float(b.usd_per_hour)) for x, b in zip(xs, bins, strict=True) if b.usd_per_hour]
        terms += [(y, float(u.extra_usd_per_hour)) for y, u in zip(ys, units, strict=True) if u.extra_usd_per_hour]
        return pulp.LpAffineExpression(terms)

    prob, ys, xs, ps, zs = build("packed")
    if zs.get("infeasible"):
        return empty
    cutoff = float(cost_cap) - 1e-9 if cost_cap is not None and math.isfinite(cost_cap) else None
    prob.setObjective(objective(ys, xs))
    # slice (Mélange-shaped) models: HiGHS's light presolve, its full one stalls on some (SLICE_PRESOLVE)
    presolve = "on" if slice_load is None else settings.slice_presolve
    status = _run(prob, _solver(time_limit_s, mip_gap, presolve, cutoff, settings))
    if status == "not_solved" and all(v.varValue is not None for v in ys):
        status = "time_limit"
    status = _below_cutoff(prob, status, cutoff)
    if status not in ("optimal", "time_limit"):
        return empty
    gap = _gap(prob)
    best = float(pulp.value(prob.objective) or 0.0)
    if second_stage_epsilon is not None:
        prob2, y2, x2, p2, z2 = build("packed_fewest")
        prob2 += objective(y2, x2) <= best * (1 + second_stage_epsilon) + 1e-9, "cost"
        prob2.setObjective(_affine(y2, [1.0] * n))
        if _run(prob2, _solver(time_limit_s, mip_gap, presolve, settings=settings)) in ("optimal", "time_limit"):
            ys, xs, ps, zs = y2, x2, p2, z2
    out = _packed_result(status, units, bins, ys, ps, zs, slice_load, gap)
    if mix_load is not None and slice_load is not None:
        mixed = {u: zs["mix", u] for u in range(n) if ("mix", u) in zs}
        out = replace(out, mix=_mix_values(mixed, n))
    if (
        slice_load is not None
        and not link
        and any(
            out.units[u] == 0 and (any(row[u] for row in out.slices) or (out.mix and out.mix[u] > 0)) for u in range(n)
        )
    ):
        return solve_packed(units, bins, demand, slice_load, slices_per_bucket, second_stage_epsilon, time_limit_s,
                            mip_gap, True, cost_cap, mix_load, settings)  # fmt: skip
    return out


def _packed_result(
    status: str,
    units: Sequence[PackedUnit],
    bins: Sequence[PackedBin],
    ys: list[Any],
    ps: dict[tuple[int, int], Any],
    zs: dict[Any, Any],
    slice_load: Sequence[Sequence[float | None]] | None,
    gap: float,
) -> PackedResult:
    """Round the incumbent, keep only the placements units need, and buy the fewest instances that hold them
    (an owned instance at $0 may sit at any count in the optimum; the placement decides what is used)."""
    counts = tuple(int(round(v.varValue or 0.0)) for v in ys)
    raw = {key: int(round(v.varValue or 0.0)) for key, v in ps.items()}
    # trim placements above what the units need, per (site, gpu, tp), taking from the most expensive bins first
    need: dict[tuple[str | None, str, int], int] = {}
    for u, c in zip(units, counts, strict=True):
        for site_of, gpu, tp, k in u.placed_usage():
            need[(site_of, gpu, tp)] = need.get((site_of, gpu, tp), 0) + k * c
    placed: dict[tuple[int, int], int] = {}
    order = sorted(raw, key=lambda key: (bins[key[0]].usd_per_hour / bins[key[0]].gpus, key))
    for site, gpu, tp in sorted(need, key=lambda k: (k[0] is None, k[0] or "", k[1], k[2])):
        left = need[(site, gpu, tp)]
        for j, t in order:
            if left <= 0:
                break
            b = bins[j]
            if t != tp or b.gpu != gpu or (site is not None and b.site != site):
                continue
            take = min(left, raw[j, t] - placed.get((j, t), 0))
            if take > 0:
                placed[j, t] = placed.get((j, t), 0) + take
                left -= take
    bought = tuple(-(-sum(t * placed.get((j, t), 0) for t in b.hosts) // b.gpus) for j, b in enumerate(bins))
    objective = sum(b.usd_per_hour * x for b, x in zip(bins, bought, strict=True))
    objective += sum(u.extra_usd_per_hour * c for u, c in zip(units, counts, strict=True))
    slices: tuple[tuple[int, ...], ...] = ()
    if slice_load is not None:
        slices = tuple(
            tuple(int(round(zs[b, u].varValue or 0.0)) if (b, u) in zs else 0 for u in range(len(units)))
            for b in range(len(slice_load))
        )
    return PackedResult(status, counts, bought, {k: v for k, v in sorted(placed.items()) if v}, objective, gap, slices)


def pack_instances(gpus_per_instance: int, groups: Sequence[int]) -> list[list[int]]:
    """First-fit decreasing: the TP groups (sizes in GPUs) placed on instances of ``gpus_per_instance`` GPUs; a
    group larger than one instance takes whole instances (a scale-up domain). Returns the groups per instance."""
    inst: list[list[int]] = []
    free: list[int] = []
    for size in sorted(groups, reverse=True):
        if size >= gpus_per_instance:
            for _ in range(-(-size // gpus_per_instance)):
                inst.append([size])
                free.append(0)
            continue
        for i, room in enumerate(free):
            if room >= size:
                inst[i].append(size)
                free[i] -= size
                break
        else:
            inst.append([size])
            free.append(gpus_per_instance - size)
    return inst
