"""The autoscaling schedule: how many copies of each combo to run in every window of a load curve.

Method (Cauchy scales whole combos; the rest is hetplan's own reconstruction):

1. **Demand per window**: the curve's rate made Poisson-equivalent for its burstiness (see ``curves.py``), times
   (1 + headroom), never below ``min_goodput_req_per_s``.
2. **Start-up lag**: a combo of GPU type g is ready ``startup_lag_s[g]`` after it is requested, so the capacity
   requested in window w covers the highest demand of windows w .. w + lag (lag in windows, the largest over the
   plan's GPU types). The curve itself serves as that look-ahead forecast; a live controller would use a forecast.
3. **Levels**: demands are rounded up to a geometric grid (``level_step``, 5 % by default), so the 2,016 windows of a
   14-day curve share a few dozen levels and each level is solved once.
4. **Nested fleets**: the fleet for the highest level is the cost-optimal Cauchy plan; each lower level keeps a
   cheapest subset of the next one that still covers it (the same ILP, with counts bounded by the bigger fleet).
   Moving between levels therefore only adds or removes whole combos.
5. **Hysteresis and cool-down**: scale out at once; scale in only after the target stayed below
   (1 - hysteresis) x the current level for ``cooldown_s``, and then to the highest level of that period. At most
   ``max_changes_per_window`` combos are added or removed per window (scale-in first stops; scale-out can then fall
   short, and the schedule says where).
6. **Availability**: removed combos stop at once; added ones count only after their start-up lag. A window is short
   when the available capacity is below its demand; the schedule lists how many and by how much.

Costs are paid from the moment a combo is requested. Owned GPUs (the inventory, :mod:`hetplan.catalog.offers`) are paid
whether they run or not: a schedule pays their amortised price in every window and rents GPUs only beyond them, so
switching an owned GPU off is never counted as a saving; their idle GPU-hours are reported instead
(:class:`~hetplan.autoscale.fleet_cost.OwnedCosting`). With offers (every plan built from a scenario has them), the
rented part is priced in whole purchasable instances (:class:`~hetplan.autoscale.fleet_cost.InstancePricing`): each
level's fleet is packed onto the owned nodes plus instances of the one rented site the peak fleet buys from, and the
schedule pays those instances' hours. Static fleets sized for the peak and for the mean demand (their cost-optimal
plans) are the comparisons; the mean fleet's short windows are reported too (:mod:`hetplan.autoscale.schedule_summary`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from hetplan.autoscale.curves import LoadCurve
from hetplan.autoscale.fleet_cost import Fleet, InstancePricing, OwnedCosting, combo_counts, owned_costing, used_gpus
from hetplan.budget import MAX_AUTOSCALE_LEVELS, check_fleet, fewest_gpus, refuse
from hetplan.errors import InfeasibleError, InputError
from hetplan.solvers.cauchy import Allocation, Combo, PlanRequest, solve_allocation
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from hetplan.solvers.milp_covering import solve_covering


@dataclass(frozen=True)
class ScheduleSettings:
    """Controller settings (defaults are hetplan's choices; set them to what your cluster does).

    Attributes:
        startup_lag_s: GPU type -> seconds from request to serving (model load); ``default_startup_lag_s`` otherwise.
        cooldown_s: how long demand must stay low before scaling in, seconds.
        hysteresis: scale in only when the target is below (1 - hysteresis) x the current level.
        max_changes_per_window: most combos added plus removed in one window.
        min_goodput_req_per_s: capacity never planned below this (the minimum fleet), req/s.
        level_step: relative spacing of demand levels.
        design_utilization, max_cv, service_cv: burstiness model (``curves.py``).
    """

    startup_lag_s: tuple[tuple[str, float], ...] = ()
    default_startup_lag_s: float = 300.0
    cooldown_s: float = 1800.0
    hysteresis: float = 0.1
    max_changes_per_window: int = 8
    min_goodput_req_per_s: float = 0.0
    level_step: float = 0.05
    design_utilization: float = 0.8
    max_cv: float = 4.0
    service_cv: float = 1.0

    def lag_for(self, gpu: str) -> float:
        return dict(self.startup_lag_s).get(gpu, self.default_startup_lag_s)

    def check(self) -> None:
        """Raise :class:`InputError` for out-of-range settings."""
        if not (
            0 <= self.hysteresis < 1
            and self.cooldown_s >= 0
            and self.max_changes_per_window >= 1
            and self.min_goodput_req_per_s >= 0
            and 0 < self.level_step <= 1
            and 0 < self.design_utilization < 1
            and self.max_cv >= 1
            and self.default_startup_lag_s >= 0
            and all(v >= 0 for _, v in self.startup_lag_s)
        ):
            raise InputError(
                "autoscale settings out of range",
                str(self),
                "use 0 <= hysteresis < 1, cooldown >= 0, max changes >= 1, 0 < level step <= 1, lags >= 0",
            )


@dataclass(frozen=True, eq=False)
class Schedule:
    """The schedule and its costs (arrays have one entry per window)."""

    curve: LoadCurve
    settings: ScheduleSettings
    combos: tuple[Combo, ...]
    levels: tuple[float, ...]
    fleets: tuple[Fleet, ...]
    demand_req_per_s: np.ndarray = field(repr=False)
    requested_level: np.ndarray = field(repr=False)
    available_level: np.ndarray = field(repr=False)
    lag_windows: int = 0
    capped_cv_windows: int = 0
    static_peak: Allocation | None = None
    static_mean: Allocation | None = None
    nesting: str = "top-down"
    per_window_optimum_usd_per_hour: np.ndarray | None = field(default=None, repr=False)
    costing: OwnedCosting | None = None
    pricing: InstancePricing | None = None

    def static_usd_per_hour(self, alloc: Allocation) -> float:
        """$/hour of a static fleet: in whole instances with :class:`InstancePricing`, else owned GPUs costed as
        :class:`OwnedCosting` says, else the allocation's GPU-hour cost."""
        if self.pricing is not None and alloc.purchase is not None:
            return self.pricing.bought(list(self.combos), alloc).usd_per_hour
        if self.costing is None:
            return alloc.total_usd_per_hour
        return self.costing.usd_per_hour(alloc.gpus_used())

    def capacity(self, which: np.ndarray) -> np.ndarray:
        return np.array([self.fleets[int(i)].capacity_req_per_s for i in which])

    def cost_per_window(self) -> np.ndarray:
        return np.array([self.fleets[int(i)].usd_per_hour for i in self.requested_level])

    @property
    def hours(self) -> float:
        return self.curve.windows * self.curve.window_s / 3600.0


def _levels(demand: np.ndarray, step: float, floor: float) -> tuple[np.ndarray, list[float]]:
    """Each window's level index and the levels used (req/s): demands rounded up to ``base x (1 + step)^k``.

    Raises:
        WorkBudgetError: more than :data:`hetplan.budget.MAX_AUTOSCALE_LEVELS` levels are used (one ILP each).
    """
    positive = demand[demand > 0]
    base = max(float(positive.min()) if positive.size else 1.0, floor, 1e-6)
    idx = np.where(demand > base, np.ceil(np.log(np.maximum(demand, base) / base) / math.log1p(step) - 1e-9), 0)
    used = sorted(set(idx.astype(np.int64).tolist()))  # only the used levels (a level_step of 1e-12 spans ~1e13)
    if len(used) > MAX_AUTOSCALE_LEVELS:
        raise refuse(
            f"autoscale.level_step {step:g} over demands from {base:.6g} to {float(demand.max()):.6g} req/s",
            len(used),
            MAX_AUTOSCALE_LEVELS,
            "demand levels",
            "raise autoscale.level_step (each level is two ILP solves; the default 0.05 gives a few dozen levels)",
        )
    remap = {k: i for i, k in enumerate(used)}
    return np.array([remap[k] for k in idx.astype(np.int64).tolist()]), [base * (1 + step) ** k for k in used]


def _fleet(
    combos: list[Combo],
    counts: tuple[int, ...],
    costing: OwnedCosting | None = None,
    pricing: InstancePricing | None = None,
) -> Fleet:
    cap = sum(c.goodput_req_per_s * n for c, n in zip(combos, counts, strict=True))
    cost = sum(c.usd_per_hour * n for c, n in zip(combos, counts, strict=True))
    if costing is not None:
        cost = costing.usd_per_hour(used_gpus(combos, counts))
    if pricing is not None:
        try:
            cost, lines = pricing.price(combos, counts)
        except InfeasibleError:  # the site cannot host this fleet: it keeps its GPU-hour cost (none seen so far)
            return Fleet(counts, cap, cost)
        return Fleet(counts, cap, cost, lines)
    return Fleet(counts, cap, cost)


def build_schedule(
    req: PlanRequest,
    curve: LoadCurve,
    settings: ScheduleSettings = ScheduleSettings(),
    progress: Callable[[int, int], None] | None = None,
) -> Schedule:
    """Plan the combo schedule for ``curve`` (module docstring); ``progress(done, total)`` is called as the demand
    levels are solved (one ILP each).

    ``req`` supplies the model, lengths, SLOs, GPUs, prices and inventory; its goodput is ignored (the curve sets
    the demand), its headroom is applied to every window.

    Raises:
        InputError: bad settings. InfeasibleError: even the peak's cheapest plan is infeasible under the SLOs.
    """
    settings.check()
    costing = owned_costing(req)
    offers = req.offers
    # levels are sized by the GPU-hour ILP (the owned GPUs cap the fleet only when nothing may be rented); the
    # fleets are then priced in whole instances (InstancePricing)
    rents = any(not o.owned for o in req.offers)
    req = replace(req, offers=(), inventory={} if rents and req.offers else req.inventory)
    cands = enumerate_candidates(req)
    combos = list(cands.combos)
    eff = curve.effective_rate(settings.design_utilization, settings.service_cv, settings.max_cv)
    capped = int(np.sum(curve.cv > settings.max_cv))
    demand = np.maximum(eff * (1 + req.headroom), settings.min_goodput_req_per_s)
    lag_s = max((settings.lag_for(g.name) for g in req.gpus), default=settings.default_startup_lag_s)
    lag_w = int(math.ceil(lag_s / curve.window_s - 1e-9))
    ahead = np.array([demand[w : w + lag_w + 1].max() for w in range(curve.windows)])
    level_idx, levels = _levels(ahead, settings.level_step, settings.min_goodput_req_per_s)
    check_fleet(
        f"the load curve's peak demand {levels[-1]:,.6g} req/s",
        fewest_gpus(combos, levels[-1]),
        "scale the load curve down (or split the traffic into several scenarios)",
    )
    pricing = None
    if offers:  # the peak level's purchased plan (every site) picks the one rented site every level buys from
        top = solve_allocation(replace(req, offers=offers, goodput_req_per_s=levels[-1], headroom=0.0), combos,
                               "peak of the load curve")  # fmt: skip
        fixed = costing.fixed_usd_per_hour if costing is not None else 0.0
        pricing = InstancePricing.for_peak(offers, req.tp_options, fixed, top, req.solve)
    buy = req if pricing is None else replace(req, offers=pricing.offers)

    per_level = _per_level(req, combos, levels, costing, progress, pricing)
    best: tuple[float, str, list[Fleet], np.ndarray] | None = None
    nested = _nest_down(req, combos, levels, costing, pricing)
    for name, fleets in (("top-down nested", nested), ("per-level optimum", per_level)):
        requested = _control(level_idx, fleets, curve, settings)
        total = float(sum(fleets[int(i)].usd_per_hour for i in requested))
        if best is None or total < best[0] - 1e-9:
            best = (total, name, fleets, requested)
    assert best is not None
    _, nesting, fleets, requested = best
    optimum = [f.usd_per_hour for f in per_level]
    available = np.array([requested[max(0, w - lag_w) : w + 1].min() for w in range(curve.windows)])
    peak_alloc = solve_allocation(
        replace(buy, goodput_req_per_s=float(demand.max()), headroom=0.0), combos, "peak of the load curve"
    )
    mean_req = replace(buy, goodput_req_per_s=max(float(demand.mean()), 1e-9), headroom=0.0)
    try:
        static_mean: Allocation | None = solve_allocation(mean_req, combos, "mean of the load curve")
    except InfeasibleError:
        static_mean = None
    return Schedule(
        curve,
        settings,
        tuple(combos),
        tuple(levels),
        tuple(fleets),
        demand,
        requested,
        available,
        lag_w,
        capped,
        peak_alloc,
        static_mean,
        nesting,
        np.array([optimum[int(i)] for i in level_idx]),
        costing,
        pricing,
    )


def _per_level(
    req: PlanRequest,
    combos: list[Combo],
    levels: list[float],
    costing: OwnedCosting | None = None,
    progress: Callable[[int, int], None] | None = None,
    pricing: InstancePricing | None = None,
) -> list[Fleet]:
    """The cost-optimal fleet of every level, solved independently (fewest combos among equal costs);
    ``progress(done, total)`` is called before each level's solve."""
    index = {id(c): i for i, c in enumerate(combos)}
    fleets: list[Fleet] = []
    buy = req if pricing is None else replace(req, offers=pricing.offers)
    for i, level in enumerate(levels):
        if progress is not None:
            progress(i, len(levels))
        try:
            alloc = solve_allocation(replace(buy, goodput_req_per_s=level, headroom=0.0), combos, "level")
        except InfeasibleError:
            fleets.append(fleets[-1] if fleets else Fleet(tuple(0 for _ in combos), 0.0, 0.0))
            continue
        if pricing is not None:  # a purchased plan of the level: its instances are the fleet's cost
            fleets.append(pricing.bought(combos, alloc))
            continue
        counts = [0] * len(combos)
        for combo, n in alloc.combos:
            counts[index[id(combo)]] += n
        fleets.append(_fleet(combos, tuple(counts), costing, pricing))
    return fleets


def _nest_down(
    req: PlanRequest,
    combos: list[Combo],
    levels: list[float],
    costing: OwnedCosting | None = None,
    pricing: InstancePricing | None = None,
) -> list[Fleet]:
    """Top-down nesting: the peak level's optimal fleet, then cheapest subsets for each lower level."""
    buy = req if pricing is None else replace(req, offers=pricing.offers)
    top = solve_allocation(replace(buy, goodput_req_per_s=levels[-1], headroom=0.0), combos, "peak of the load curve")
    fleets = [Fleet((), 0.0, 0.0)] * len(levels)
    fleets[-1] = (
        pricing.bought(combos, top) if pricing is not None else _fleet(combos, combo_counts(combos, top), costing)
    )
    for i in range(len(levels) - 2, -1, -1):
        parent = fleets[i + 1].counts
        cols = [k for k, n in enumerate(parent) if n]
        res = solve_covering(
            [combos[k].usd_per_hour for k in cols],
            [combos[k].goodput_req_per_s for k in cols],
            levels[i],
            upper=[parent[k] for k in cols],
            second_stage_epsilon=None,
            settings=req.solve,
        )
        child = [0] * len(combos)
        for k, n in zip(cols, res.counts, strict=True):
            child[k] = n
        fleets[i] = _fleet(combos, tuple(child), costing, pricing) if res.status == "optimal" else fleets[i + 1]
    return fleets


def _control(target: np.ndarray, fleets: list[Fleet], curve: LoadCurve, settings: ScheduleSettings) -> np.ndarray:
    """Requested level per window: scale out at once, scale in after the cool-down, at most
    ``max_changes_per_window`` combos changed per window (module docstring)."""
    counts = np.array([f.counts for f in fleets], dtype=int)
    changes = np.abs(counts[:, None, :] - counts[None, :, :]).sum(axis=2)
    cost = np.array([f.usd_per_hour for f in fleets])
    cap = np.array([f.capacity_req_per_s for f in fleets])
    bound = settings.max_changes_per_window
    cool = max(1, int(math.ceil(settings.cooldown_s / curve.window_s - 1e-9)))
    levels = np.arange(len(fleets))
    requested = np.zeros(curve.windows, dtype=int)
    current = int(target[0])
    low_since: int | None = None
    for w in range(curve.windows):
        want = int(target[w])
        if cap[want] > cap[current] + 1e-12:
            ok = levels[(levels >= want) & (changes[current] <= bound)]
            if ok.size:
                current = int(ok[np.argmin(cost[ok])])
            else:  # the change bound binds: get as close as it allows
                near = levels[(changes[current] <= bound) & (cap > cap[current])]
                current = int(near[np.argmax(cap[near])]) if near.size else current
            low_since = None
        elif cap[want] < (1 - settings.hysteresis) * cap[current]:
            low_since = w if low_since is None else low_since
            if w - low_since + 1 >= cool:
                goal = int(target[max(0, w - cool + 1) : w + 1].max())
                ok = levels[(levels >= goal) & (changes[current] <= bound) & (cost < cost[current])]
                if ok.size:
                    current = int(ok[np.argmin(cost[ok])])
                low_since = None
        else:
            low_since = None
        requested[w] = current
    return requested
