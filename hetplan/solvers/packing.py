"""Buy what clouds sell: deployments priced in whole purchased instances, one provider per deployment.

Cauchy's combos and Mélange's aggregated instance types are sized in serving instances (a TP group of one GPU
type); this module packs those serving instances onto purchasable offers (:mod:`hetplan.catalog.offers`) with
:func:`hetplan.solvers.milp_packed.solve_packed`, so the cost is Σ purchased instances × their price:

- a TP group stays inside one instance unless the offer's scale-up domain spans instances;
- several serving instances share one purchased instance when it has the GPUs (prefill and decode of one combo
  included);
- a deployment uses the owned GPUs plus at most one rented site (provider and region); every combo runs in one
  site. The MILP is solved once per rented site (each with the owned offers) and the cheapest answer is kept
  (ties: the site named first). With ``--no-rent`` only the owned offers are used.
- with ``--allow-cross-provider`` (``cross`` given), one MILP over every site instead: each combo gets a column per
  site that hosts it whole and, when it has a cross-site variant, a column per (prefill site, decode site) pair of
  two different sites that host its roles (columns only then, so the default MILP keeps its size).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hetplan.catalog.offers import Offer
from hetplan.errors import InfeasibleError
from hetplan.plan.deployment import Purchase
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings
from hetplan.solvers.milp_covering import solve_covering
from hetplan.solvers.milp_packed import PackedBin, PackedResult, PackedUnit, solve_packed


@dataclass(frozen=True)
class Placement:
    """Where the serving instances of one (site, GPU, TP) run: ``(offer, serving instances)`` pairs."""

    site: str
    gpu: str
    tp: int
    offers: tuple[tuple[Offer, int], ...]


@dataclass(frozen=True)
class CrossSiteNeed:
    """A unit's cross-site variant: serving instances per (GPU, TP) of its ``prefill`` and its ``decode`` role, and
    the $/hour one copy pays besides its instances (WAN egress)."""

    prefill: dict[tuple[str, int], int]
    decode: dict[tuple[str, int], int]
    extra_usd_per_hour: float = 0.0


@dataclass(frozen=True)
class Purchased:
    """A solved purchase: the chosen rented site ('' when only owned GPUs are used), the purchase lines, the
    placements, the unit copies per column, total $/hour, MILP status and gap, and the sites tried."""

    rented_site: str
    lines: tuple[Purchase, ...]
    placements: tuple[Placement, ...]
    counts: tuple[int, ...]
    unit_sites: tuple[str, ...]
    unit_index: tuple[int, ...]
    total_usd_per_hour: float
    status: str
    mip_gap: float
    sites_tried: tuple[str, ...]
    slices: tuple[tuple[int, ...], ...] = ()
    unit_decode_sites: tuple[str, ...] = ()
    """Per column, the site of its decode role (set only by cross-provider solves; ``unit_sites`` then holds
    the prefill role's site, equal to it for same-site columns)."""
    extra_usd_per_hour: float = 0.0
    """$/hour paid besides the purchase lines (cross-site combos' WAN egress); part of ``total_usd_per_hour``."""
    mix: tuple[float, ...] = ()

    def where(self, site: str, gpu: str, tp: int) -> Placement | None:
        """The placement of (site, GPU, TP), or None."""
        for p in self.placements:
            if (p.site, p.gpu, p.tp) == (site, gpu, tp):
                return p
        return None


def rented_sites(offers: Sequence[Offer]) -> list[str]:
    """The rented sites among ``offers``, sorted."""
    return sorted({o.site for o in offers if not o.owned})


def undominated(offers: Sequence[Offer]) -> list[Offer]:
    """``offers`` without rented offers that another rented offer of the same site, GPU, size and scale-up domain
    beats on price (ties: the first by instance type): dropping them cannot change the optimum, and it removes
    symmetric columns (AWS sells one L40S as g6e.2xlarge and, dearer, g6e.4xlarge)."""
    best: dict[tuple[str, str, int, int], Offer] = {}
    for o in offers:
        if o.owned or o.count is not None:
            continue
        key = (o.site, o.gpu, o.gpus_per_instance, o.scale_up_domain_gpus)
        if key not in best or (o.usd_per_instance_hour, o.instance_type) < (
            best[key].usd_per_instance_hour,
            best[key].instance_type,
        ):
            best[key] = o
    keep = set(map(id, best.values()))
    return [o for o in offers if o.owned or o.count is not None or id(o) in keep]


def _bins(offers: Sequence[Offer], tps: Sequence[int]) -> list[PackedBin]:
    return [
        PackedBin(
            o.site, o.gpu, o.gpus_per_instance, o.usd_per_instance_hour, tuple(t for t in tps if o.hosts_tp(t)), o.count
        )  # fmt: skip
        for o in offers
    ]


def solve_purchase(
    needs: Sequence[dict[tuple[str, int], int]],
    offers: Sequence[Offer],
    tps: Sequence[int],
    what: str,
    value: Sequence[float] | None = None,
    demand: float = 0.0,
    slice_load: Sequence[Sequence[float | None]] | None = None,
    slices_per_bucket: int = 1,
    upper: Sequence[int | None] | None = None,
    fewest_units: bool = True,
    time_limit_s: float = 30.0,
    cross: Sequence[CrossSiteNeed | None] | None = None,
    mix_load: Sequence[float | None] | None = None,
    cost_cap: float | None = None,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> Purchased:
    """Cheapest purchase for deployment units whose copy ``i`` needs ``needs[i]`` serving instances per (GPU, TP).

    Each unit becomes one column per site where all of its (GPU, TP) can be hosted: the owned site and the rented
    site of the group being solved (module docstring). Covering mode: ``value``/``demand`` (combos' goodput);
    slice mode: ``slice_load`` of shape (K, units) (Mélange). ``cross`` (``--allow-cross-provider``, covering mode
    only), shape (units,): one site group of every offer; unit ``i`` with ``cross[i]`` set is a cross-site
    variant, one column per pair of different sites hosting its prefill and decode roles, each copy paying
    ``cross[i].extra_usd_per_hour`` besides its instances. ``mix_load`` of shape (units,), for units that may also
    serve a share of the whole mix (the mixed strategy; :func:`hetplan.solvers.milp_packed.solve_packed`), slice mode
    only. ``cost_cap``: only purchases costing less are sought (none: :class:`InfeasibleError`). ``settings``: how
    HiGHS runs (:class:`hetplan.solvers.milp.SolveSettings`).

    Raises:
        InfeasibleError: no site group can buy or host the demand; the message lists every owned GPU type and
            every rented site tried.
    """
    tps = sorted(set(tps) | {t for need in needs for (_, t) in need})
    offers = undominated(offers)
    groups = [[o for o in offers if o.owned or o.site == site] for site in rented_sites(offers)]
    if cross is not None:
        groups = [list(offers)]
    if not groups:
        groups = [[o for o in offers if o.owned]]
    best: Purchased | None = None
    tried: list[str] = []
    for group in groups:
        site_names = sorted({o.site for o in group})
        tried.append(" + ".join(site_names))
        bins = _bins(group, tps)
        units: list[PackedUnit] = []
        index: list[int] = []
        sites: list[str] = []
        decode_sites: list[str] = []

        hosted = {(b.site, b.gpu, t) for b in bins for t in b.hosts}  # (site, GPU, TP) some bin can host

        def hosts(site: str, need: dict[tuple[str, int], int], hosted: set[tuple[str, str, int]] = hosted) -> bool:
            return all((site, g, t) in hosted for (g, t) in need)

        for i, need in enumerate(needs):
            split = cross[i] if cross is not None else None
            if split is not None:
                for sp in site_names:
                    if not hosts(sp, split.prefill):
                        continue
                    for sd in site_names:
                        if sd == sp or not hosts(sd, split.decode):
                            continue
                        usage = tuple(sorted(split.prefill.items())) + tuple(sorted(split.decode.items()))
                        units.append(
                            PackedUnit(
                                usage, sp, value[i] if value is not None else 0.0, split.extra_usd_per_hour,
                                None if upper is None else upper[i],
                                (sp,) * len(split.prefill) + (sd,) * len(split.decode),
                            )
                        )  # fmt: skip
                        index.append(i)
                        sites.append(sp)
                        decode_sites.append(sd)
                continue
            for site in site_names:
                if hosts(site, need):
                    units.append(
                        PackedUnit(
                            tuple(sorted(need.items())), site, value[i] if value is not None else 0.0,
                            upper=None if upper is None else upper[i],
                        )
                    )  # fmt: skip
                    index.append(i)
                    sites.append(site)
                    decode_sites.append(site)
        if not units:
            continue
        loads = None
        if slice_load is not None:
            loads = [[row[i] for i in index] for row in slice_load]
        mixes = [mix_load[i] for i in index] if mix_load is not None else None
        cap = cost_cap if best is None else best.total_usd_per_hour * (1 - 1e-9)
        linear = _linear_prices(group, tps) if slice_load is None and len(site_names) == 1 else None
        if linear is not None:  # every TP group is bought whole at its GPUs' price: the plain covering ILP is exact
            result = _solve_linear(units, bins, linear, demand, fewest_units, time_limit_s, cap, settings)
        else:
            result = solve_packed(
                units, bins, demand, loads, slices_per_bucket, 1e-9 if fewest_units else None, time_limit_s,
                cost_cap=cap, mix_load=mixes, settings=settings,
            )  # fmt: skip
        if result.status not in ("optimal", "time_limit"):
            continue
        made = _purchased(result, group, bins, units, index, sites)
        if cross is not None:
            made = replace(made, unit_decode_sites=tuple(decode_sites))
        if best is None or made.total_usd_per_hour < best.total_usd_per_hour - 1e-9:
            best = made
    if best is None:
        owned = sorted({f"{o.gpu}={o.gpus_per_instance * (o.count or 0)}" for o in offers if o.owned})
        raise InfeasibleError(
            f"no purchase can hold the {what}",
            f"tried {len(tried)} site group(s): {'; '.join(tried) or 'none (no offer prices the candidate GPUs)'}"
            + (f"; owned inventory: {', '.join(owned)}" if owned else ""),
            "add inventory or offers (--prices), allow renting (drop --no-rent), or lower --goodput",
        )
    return replace(best, sites_tried=tuple(tried))


def _linear_prices(offers: Sequence[Offer], tps: Sequence[int]) -> dict[str, float] | None:
    """$/GPU-hour per GPU when every GPU of ``offers`` is sold, unlimited, in an instance of exactly each TP degree
    at one per-GPU price (price files' ``usd_per_gpu_hour`` offers); else None."""
    prices: dict[str, float] = {}
    for gpu in {o.gpu for o in offers}:
        mine = [o for o in offers if o.gpu == gpu]
        per = {round(o.usd_per_gpu_hour, 12) for o in mine}
        sizes = {o.gpus_per_instance for o in mine}
        if len(per) != 1 or any(o.count is not None for o in mine) or not set(tps) <= sizes:
            return None
        prices[gpu] = mine[0].usd_per_gpu_hour
    return prices


def _solve_linear(
    units: Sequence[PackedUnit],
    bins: Sequence[PackedBin],
    price: dict[str, float],
    demand: float,
    fewest_units: bool,
    time_limit_s: float,
    cap: float | None,
    settings: SolveSettings = DEFAULT_SETTINGS,
) -> PackedResult:
    """The covering ILP with each unit at its GPUs' price, each serving instance on its own instance of its TP
    size (exact when :func:`_linear_prices` holds: any packing costs the same)."""
    cost = [sum(n * t * price[g] for (g, t), n in u.usage) for u in units]
    keep = _undominated_columns(cost, [u.value for u in units])
    kept = solve_covering(
        [cost[i] for i in keep], [units[i].value for i in keep], demand, upper=[units[i].upper or 10**9 for i in keep],
        second_stage_epsilon=1e-9 if fewest_units else None, time_limit_s=time_limit_s, settings=settings,
    )  # fmt: skip
    counts = [0] * len(units)
    for i, n in zip(keep, kept.counts, strict=True):
        counts[i] = n
    res = replace(kept, counts=tuple(counts))
    if res.status not in ("optimal", "time_limit") or (cap is not None and res.objective >= cap):
        return PackedResult("infeasible", (), (), {}, float("nan"), float("nan"))
    placed: dict[tuple[int, int], int] = {}
    bought = [0] * len(bins)
    for u, n in zip(units, res.counts, strict=True):
        if not n:
            continue
        for (g, t), k in u.usage:
            j = next(j for j, b in enumerate(bins) if b.gpu == g and b.gpus == t and b.site == u.site)
            placed[j, t] = placed.get((j, t), 0) + k * n
            bought[j] += k * n
    total = sum(b.usd_per_hour * x for b, x in zip(bins, bought, strict=True))
    return PackedResult(res.status, res.counts, tuple(bought), dict(sorted(placed.items())), total, res.gap)


def _undominated_columns(cost: Sequence[float], value: Sequence[float]) -> list[int]:
    """Indices (in order) of the covering columns that no other column strictly dominates: one costing no more
    with at least the value, better in one. Exact for the plain covering ILP (one demand row, no resource rows,
    as :func:`_solve_linear` solves): a dominated column's copies can be swapped one for one for the dominating
    column's at no more cost and no fewer req/s, and an optimum with the dominated column would then be strictly
    beaten or tied with more value; equal columns are all kept. With every catalog GPU this cuts the combo ILP from
    about 15,000 columns to a few hundred (``benchmarks/plan_speed.py``). hetplan's own reconstruction."""
    order = sorted(range(len(cost)), key=lambda i: (cost[i], -value[i], i))
    keep: list[int] = []
    best_value = -math.inf  # the most value among columns strictly cheaper than the current cost group
    i = 0
    while i < len(order):
        j = i
        group_cost = cost[order[i]]
        while j < len(order) and cost[order[j]] == group_cost:
            j += 1
        top = value[order[i]]  # the group's most value (sorted by value, descending)
        for k in order[i:j]:
            if value[k] > best_value and value[k] == top:  # not beaten by a cheaper column nor within its cost
                keep.append(k)
        best_value = max(best_value, top)
        i = j
    return sorted(keep)


def _purchased(
    result: PackedResult,
    offers: Sequence[Offer],
    bins: Sequence[PackedBin],
    units: Sequence[PackedUnit],
    index: Sequence[int],
    sites: Sequence[str],
) -> Purchased:
    lines = []
    used_gpus: dict[int, int] = {}
    for (j, t), n in result.placed.items():
        used_gpus[j] = used_gpus.get(j, 0) + t * n
    for j, (o, x) in enumerate(zip(offers, result.bought, strict=True)):
        if x:
            lines.append(
                Purchase(
                    o.provider,
                    o.instance_type,
                    o.region,
                    o.gpu,
                    o.gpus_per_instance,
                    int(x),
                    o.owned,
                    o.usd_per_instance_hour,
                    used_gpus.get(j, 0),
                )  # fmt: skip
            )
    lines.sort(key=lambda p: (not p.owned, p.provider, p.region, p.gpu, p.instance_type))
    grouped: dict[tuple[str, str, int], list[tuple[Offer, int]]] = {}
    for (j, t), n in result.placed.items():
        o = offers[j]
        grouped.setdefault((bins[j].site, o.gpu, t), []).append((o, n))
    placements = tuple(
        Placement(s, g, t, tuple(sorted(v, key=lambda x: (-x[1], x[0].instance_type))))
        for (s, g, t), v in sorted(grouped.items())
    )
    rented = sorted({p.provider + (f"/{p.region}" if p.region else "") for p in lines if not p.owned})
    extra = sum(u.extra_usd_per_hour * c for u, c in zip(units, result.units, strict=True))
    total = sum(p.count * p.usd_per_hour_each for p in lines) + extra
    return Purchased(
        " + ".join(rented),  # one site, except in cross-provider solves
        tuple(lines),
        placements,
        result.units,
        tuple(sites),
        tuple(index),
        total,
        result.status,
        0.0 if math.isnan(result.gap) else result.gap,
        (),
        result.slices,
        (),
        extra,
        result.mix,
    )


__all__ = ["Placement", "Purchased", "rented_sites", "solve_purchase"]
