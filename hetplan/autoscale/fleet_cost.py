"""A fleet of an autoscaling schedule (combo copies, capacity, $/hour) and how it is costed: owned GPUs paid whether
they run or not (:class:`OwnedCosting`), and fleets priced in whole purchasable instances (:class:`InstancePricing`).
The schedule that moves between fleets: :mod:`hetplan.autoscale.schedule`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hetplan.catalog.offers import Offer, owned_gpus
from hetplan.plan.deployment import Purchase
from hetplan.solvers.cauchy import Allocation, Combo, PlanRequest
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings
from hetplan.solvers.packing import Purchased, solve_purchase


@dataclass(frozen=True)
class Fleet:
    """A set of combos with counts; ``capacity_req_per_s`` and ``usd_per_hour`` are totals."""

    counts: tuple[int, ...]
    capacity_req_per_s: float
    usd_per_hour: float
    purchase: tuple[Purchase, ...] = ()


@dataclass(frozen=True)
class OwnedCosting:
    """Costs of a fleet beside owned GPUs: every owned GPU at its amortised price, always (``fixed_usd_per_hour``),
    plus the GPUs used beyond the owned ones at the rented $/GPU-hour. Source: hetplan's own reconstruction."""

    owned: tuple[tuple[str, int], ...]
    fixed_usd_per_hour: float
    rented_usd_per_gpu_hour: tuple[tuple[str, float], ...]

    def usd_per_hour(self, used: dict[str, int]) -> float:
        """$/hour of a fleet using ``used`` GPUs per type."""
        owned, price = dict(self.owned), dict(self.rented_usd_per_gpu_hour)
        return self.fixed_usd_per_hour + sum(max(0, n - owned.get(g, 0)) * price.get(g, 0.0) for g, n in used.items())

    def idle(self, used: dict[str, int]) -> dict[str, int]:
        """Owned GPUs per type a fleet using ``used`` leaves idle."""
        return {g: max(0, n - used.get(g, 0)) for g, n in self.owned}


def owned_costing(req: PlanRequest) -> OwnedCosting | None:
    """The :class:`OwnedCosting` of a request with owned offers, else None."""
    owned = owned_gpus(req.offers)
    if not owned:
        return None
    fixed = sum(o.usd_per_instance_hour * (o.count or 0) for o in req.offers if o.owned)
    rented: dict[str, float] = {}
    for o in req.offers:
        if not o.owned:
            rented[o.gpu] = min(rented.get(o.gpu, math.inf), o.usd_per_gpu_hour)
    return OwnedCosting(tuple(owned.items()), fixed, tuple(sorted(rented.items())))


@dataclass(eq=False)
class InstancePricing:
    """Fleets priced in whole purchasable instances: every owned node always (``fixed_usd_per_hour``, as
    :class:`OwnedCosting`), plus the rented instances that :func:`hetplan.solvers.packing.solve_purchase` buys
    to host the serving instances the owned nodes cannot, from ``offers`` (the owned nodes and the rented site
    ``site`` only, so every level of one schedule rents from one provider and region). Each copy of a combo runs
    at one site. Source: hetplan's own reconstruction.
    """

    offers: tuple[Offer, ...]
    tps: tuple[int, ...]
    fixed_usd_per_hour: float
    site: str
    _cache: dict[tuple[int, ...], tuple[float, tuple[Purchase, ...]]] = field(default_factory=dict)
    solve: SolveSettings = DEFAULT_SETTINGS  # how HiGHS runs (hetplan.solvers.milp.SolveSettings)

    @classmethod
    def for_peak(
        cls,
        offers: tuple[Offer, ...],
        tps: tuple[int, ...],
        fixed: float,
        peak: Allocation,
        solve: SolveSettings = DEFAULT_SETTINGS,
    ) -> InstancePricing:
        """The pricing whose rented site is the one the ``peak`` allocation (a purchased plan over every site)
        buys from."""
        site = peak.purchase.rented_site if peak.purchase is not None else ""
        keep = tuple(o for o in offers if o.owned or (site and o.site == site))
        return cls(keep, tps, fixed, site, solve=solve)

    def bought(self, combos: list[Combo], alloc: Allocation) -> Fleet:
        """The fleet of a purchased allocation (``alloc.purchase`` from these offers), at this pricing's cost."""
        counts = combo_counts(combos, alloc)
        cap = sum(c.goodput_req_per_s * n for c, n in zip(combos, counts, strict=True))
        lines = alloc.purchase.lines if alloc.purchase is not None else ()
        rented = sum(p.count * p.usd_per_hour_each for p in lines if not p.owned)
        self._cache.setdefault(counts, (self.fixed_usd_per_hour + rented, lines))
        cost, lines = self._cache[counts]
        return Fleet(counts, cap, cost, lines)

    def _solve(self, combos: list[Combo], counts: tuple[int, ...]) -> Purchased:
        used = [(c, n) for c, n in zip(combos, counts, strict=True) if n]
        needs = []
        for c, _ in used:
            need = {(c.prefill_gpu, c.prefill_tp): c.n_prefill}
            need[(c.decode_gpu, c.decode_tp)] = need.get((c.decode_gpu, c.decode_tp), 0) + c.n_decode
            needs.append(need)
        # one "slice" per copy, assigned to a site's column of its combo: the copies' count is met exactly
        rows = [[1.0 if j == i else None for j in range(len(used))] for i, (_, n) in enumerate(used) for _ in range(n)]
        return solve_purchase(needs, self.offers, self.tps, "schedule's fleet", slice_load=rows, fewest_units=False,
                              settings=self.solve)  # fmt: skip

    def price(
        self, combos: list[Combo] | tuple[Combo, ...], counts: tuple[int, ...]
    ) -> tuple[float, tuple[Purchase, ...]]:
        """$/hour of the fleet (owned nodes always, rented instances bought for it) and its purchase lines.

        Raises:
            InfeasibleError: the owned nodes and the site's offers cannot host the fleet.
        """
        if counts not in self._cache:
            if not any(counts):
                self._cache[counts] = (self.fixed_usd_per_hour, ())
            else:
                bought = self._solve(list(combos), counts)
                rented = sum(p.count * p.usd_per_hour_each for p in bought.lines if not p.owned)
                self._cache[counts] = (self.fixed_usd_per_hour + rented, bought.lines)
        return self._cache[counts]


def used_gpus(combos: list[Combo] | tuple[Combo, ...], counts: tuple[int, ...]) -> dict[str, int]:
    """GPUs of each type that ``counts`` copies of ``combos`` use."""
    used: dict[str, int] = {}
    for c, n in zip(combos, counts, strict=True):
        for g, k in c.gpus_used().items():
            used[g] = used.get(g, 0) + k * n
    return used


def fleet_changes(a: Fleet, b: Fleet) -> int:
    """Combo copies added or removed between fleets ``a`` and ``b``."""
    return sum(abs(x - y) for x, y in zip(a.counts, b.counts, strict=True))


def combo_counts(combos: list[Combo] | tuple[Combo, ...], alloc: Allocation) -> tuple[int, ...]:
    """Copies of each of ``combos`` (in their order) that ``alloc`` runs."""
    index = {id(c): i for i, c in enumerate(combos)}
    counts = [0] * len(combos)
    for combo, n in alloc.combos:
        counts[index[id(combo)]] += n
    return tuple(counts)
