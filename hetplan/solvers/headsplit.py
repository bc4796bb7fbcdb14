"""Head-wise split of decode attention over primary and attention workers (Hetis, SC '25; DESIGN §3.3).

Every decode step, each KV head of each running request is read by exactly one device. Requests are grouped into
length classes c (n_c requests holding L_c tokens each); the split chooses integers h_{c,j}, the KV heads of every
request of class c that device j holds, with

    Σ_j h_{c,j} = H_kv                                         (heads conserved; a GQA group is one KV head, so
                                                                 integer KV heads never split a group)
    Σ_c n_c·h_{c,j}·L_c ≤ M_j                                   (KV memory of device j, in head·token units)
    t_j = Σ_c n_c·h_{c,j}·(a_j·L_c + q_j) + [device used]·f_j    (device time of one decode step)

and minimises max_j t_j. ``a_j`` is the time to read (and multiply) one head's KV for one token over the layers the
device covers, ``q_j`` the time to ship that head's queries in and outputs back over the device's link (0 on a
primary worker), ``f_j`` the fixed time a device pays when used: kernel launches, plus the link latency of one
round trip per layer for an attention worker. A link with high latency therefore only pays off for long contexts.

Two solvers: :func:`solve_milp` (exact, through :func:`hetplan.solvers.milp_slices.solve_min_makespan`) and
:func:`solve_greedy` (water-filling: place one head at a time on the device whose finishing time grows least,
largest work first, then move single heads off the slowest device while that helps). ``benchmarks``-free check:
the tests hold greedy within 5 % of the MILP on small pools.

Source: the min-max objective and the per-device time ``a_j·Σ h·L + b_j + link`` follow Hetis (SC '25) as
DESIGN §3.3 states them; length classes, the fixed-cost binaries and the greedy's refinement step are hetplan's
own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetplan.errors import InfeasibleError
from hetplan.solvers.milp_slices import solve_min_makespan

EPS = 1e-12


@dataclass(frozen=True)
class AttentionDevice:
    """One device as the head split sees it.

    Attributes:
        name: device name (``node/gpuN``), or several joined by ``+`` for a pipeline rank chain.
        role: ``primary`` (runs the dense modules too) or ``attention`` (attention worker).
        s_per_head_token: a_j, seconds per KV head per cached token per step.
        s_per_head_request: q_j, seconds per KV head per request per step for queries in / outputs back.
        fixed_s: f_j, seconds per step when the device holds any head (launches + link latency).
        kv_capacity_head_tokens: M_j, KV memory in head·token units (one head of one token over all layers).
    """

    name: str
    role: str
    s_per_head_token: float
    s_per_head_request: float
    fixed_s: float
    kv_capacity_head_tokens: float


@dataclass(frozen=True)
class LengthClass:
    """Requests of one length class in the running batch: ``requests`` of ``context_tokens`` each."""

    name: str
    context_tokens: float
    requests: int


@dataclass(frozen=True)
class HeadSplit:
    """Result: ``heads[c][j]`` KV heads of class c on device j, per-device step time ``device_s`` (s), the
    makespan ``max_j t_j`` (s), ``method`` (``milp`` or ``greedy``) and ``status``."""

    heads: tuple[tuple[int, ...], ...]
    device_s: tuple[float, ...]
    makespan_s: float
    method: str
    status: str

    def kv_head_tokens(self, classes: list[LengthClass]) -> tuple[float, ...]:
        """KV held per device, head·token units."""
        n_dev = len(self.device_s)
        return tuple(
            sum(c.requests * c.context_tokens * self.heads[k][j] for k, c in enumerate(classes)) for j in range(n_dev)
        )


def _matrices(
    devices: list[AttentionDevice], classes: list[LengthClass]
) -> tuple[list[list[float]], list[list[float]]]:
    work = [
        [c.requests * (d.s_per_head_token * c.context_tokens + d.s_per_head_request) for d in devices] for c in classes
    ]
    mem = [[float(c.requests * c.context_tokens) for _ in devices] for c in classes]
    return work, mem


def device_times(
    devices: list[AttentionDevice], classes: list[LengthClass], heads: list[list[int]] | tuple[tuple[int, ...], ...]
) -> tuple[float, ...]:
    """t_j for a given split (see the module docstring), seconds."""
    work, _ = _matrices(devices, classes)
    out = []
    for j, d in enumerate(devices):
        used = any(heads[k][j] for k in range(len(classes)))
        out.append(sum(work[k][j] * heads[k][j] for k in range(len(classes))) + (d.fixed_s if used else 0.0))
    return tuple(out)


def _infeasible(devices: list[AttentionDevice], classes: list[LengthClass], kv_heads: int) -> InfeasibleError:
    need = sum(c.requests * c.context_tokens for c in classes) * kv_heads
    have = sum(d.kv_capacity_head_tokens for d in devices)
    return InfeasibleError(
        "the KV cache of the batch does not fit the pool",
        f"needs {need:,.0f} head-tokens, devices hold {have:,.0f}",
        "lower the batch or add devices",
    )


def solve_milp(
    devices: list[AttentionDevice], classes: list[LengthClass], kv_heads: int, time_limit_s: float = 10.0
) -> HeadSplit:
    """Exact head split (see module docstring) through the shared MILP layer.

    Raises:
        InfeasibleError: the KV cache of the batch does not fit the devices' memory.
    """
    work, mem = _matrices(devices, classes)
    # times in microseconds: HiGHS's absolute MIP gap (1e-6) would otherwise be a visible share of a makespan
    res = solve_min_makespan(
        [[w * 1e6 for w in row] for row in work],
        [kv_heads if c.requests else 0 for c in classes],
        [d.fixed_s * 1e6 for d in devices],
        mem,
        [d.kv_capacity_head_tokens for d in devices],
        time_limit_s,
    )
    if res.status not in ("optimal", "time_limit"):
        raise _infeasible(devices, classes, kv_heads)
    times = device_times(devices, classes, res.units)
    return HeadSplit(res.units, times, max(times), "milp", res.status)


def solve_greedy(devices: list[AttentionDevice], classes: list[LengthClass], kv_heads: int) -> HeadSplit:
    """Water-filling head split for large pools: place one head at a time where the finishing time grows least
    (largest work first), move single heads off the slowest device while that helps, then try closing each used
    device (its fixed cost may not pay) and keep the best. O(J·(K·H·J + moves)).

    Raises:
        InfeasibleError: a head fits no device's remaining memory.
    """
    best = _fill(devices, classes, kv_heads, frozenset())
    if best is None:
        raise _infeasible(devices, classes, kv_heads)
    for j in range(len(devices)):
        if not any(best.heads[k][j] for k in range(len(classes))):
            continue
        trial = _fill(devices, classes, kv_heads, frozenset({j}))
        if trial is not None and trial.makespan_s < best.makespan_s - 1e-15:
            best = trial
    return best


def _fill(
    devices: list[AttentionDevice], classes: list[LengthClass], kv_heads: int, closed: frozenset[int]
) -> HeadSplit | None:
    work, mem = _matrices(devices, classes)
    n_dev = len(devices)
    heads = [[0] * n_dev for _ in classes]
    t = [0.0] * n_dev
    used = [False] * n_dev
    free = [d.kv_capacity_head_tokens if j not in closed else -1.0 for j, d in enumerate(devices)]
    order = sorted(range(len(classes)), key=lambda k: -max(work[k]) if classes[k].requests else 0.0)
    for k in order:
        if not classes[k].requests:
            continue
        for _ in range(kv_heads):
            best, best_t = -1, float("inf")
            for j, d in enumerate(devices):
                if free[j] + EPS < mem[k][j]:
                    continue
                new = t[j] + work[k][j] + (0.0 if used[j] else d.fixed_s)
                if new < best_t - EPS:
                    best, best_t = j, new
            if best < 0:
                return None
            heads[k][best] += 1
            t[best], used[best] = best_t, True
            free[best] -= mem[k][best]
    _refine(devices, work, mem, heads, free)
    times = device_times(devices, classes, heads)
    return HeadSplit(tuple(tuple(r) for r in heads), times, max(times), "greedy", "heuristic")


def _refine(
    devices: list[AttentionDevice],
    work: list[list[float]],
    mem: list[list[float]],
    heads: list[list[int]],
    free: list[float],
) -> None:
    """Move single heads off the slowest device while the slowest time drops (at most 10·K·H·J moves)."""
    n_dev, n_cls = len(devices), len(work)

    def times() -> list[float]:
        return [
            sum(work[k][j] * heads[k][j] for k in range(n_cls))
            + (devices[j].fixed_s if any(heads[k][j] for k in range(n_cls)) else 0.0)
            for j in range(n_dev)
        ]

    for _ in range(10 * max(1, sum(map(sum, heads))) * n_dev):
        t = times()
        worst = max(range(n_dev), key=lambda j: (t[j], -j))
        best_move, best_peak = None, t[worst]
        for k in range(n_cls):
            if not heads[k][worst]:
                continue
            left = any(heads[q][worst] - (q == k) for q in range(n_cls))
            t_from = t[worst] - work[k][worst] - (0.0 if left else devices[worst].fixed_s)
            for j in range(n_dev):
                if j == worst or free[j] + EPS < mem[k][j]:
                    continue
                opened = not any(heads[q][j] for q in range(n_cls))
                t_to = t[j] + work[k][j] + (devices[j].fixed_s if opened else 0.0)
                peak = max([t_from, t_to] + [t[i] for i in range(n_dev) if i not in (j, worst)])
                if peak < best_peak - 1e-15:
                    best_move, best_peak = (k, j), peak
        if best_move is not None:
            k, j = best_move
            heads[k][worst] -= 1
            heads[k][j] += 1
            free[worst] += mem[k][worst]
            free[j] -= mem[k][j]
            continue
        if not _swap(work, mem, heads, free, t, worst):
            return


def _swap(
    work: list[list[float]],
    mem: list[list[float]],
    heads: list[list[int]],
    free: list[float],
    t: list[float],
    worst: int,
) -> bool:
    """Exchange one head of class k on the slowest device for one of class q on another device when that lowers
    the larger of the two times below the current peak (devices stay used, so fixed costs do not change)."""
    n_cls, n_dev = len(work), len(t)
    peak = t[worst]
    for k in range(n_cls):
        if not heads[k][worst]:
            continue
        for j in range(n_dev):
            if j == worst:
                continue
            for q in range(n_cls):
                if q == k or not heads[q][j]:
                    continue
                t_w = t[worst] - work[k][worst] + work[q][worst]
                t_j = t[j] - work[q][j] + work[k][j]
                mem_ok = free[worst] + mem[k][worst] - mem[q][worst] >= -EPS and free[j] + mem[q][j] - mem[k][j] >= -EPS
                if mem_ok and max(t_w, t_j) < peak - 1e-15:
                    heads[k][worst] -= 1
                    heads[q][worst] += 1
                    heads[q][j] -= 1
                    heads[k][j] += 1
                    free[worst] += mem[k][worst] - mem[q][worst]
                    free[j] += mem[q][j] - mem[k][j]
                    return True
    return False


def place_representative(
    devices: list[AttentionDevice],
    classes: list[LengthClass],
    split: HeadSplit,
    context_tokens: float,
    kv_heads: int,
) -> tuple[int, ...]:
    """KV heads per device for *one* request of a length class that has no request in the expected batch.

    The rule (hetplan's own): the request's heads are placed one at a time, on top of the batch's split, on the
    device whose step time grows least and whose free KV memory still holds the head (a device the batch leaves
    unused pays its fixed cost ``f_j`` when opened). If no device has room left, memory is ignored (the batch
    is an expectation, not a reservation). The batch's split and makespan are not changed. Shape: one entry per
    device, summing to ``kv_heads``.
    """
    t = list(split.device_s)
    free = [d.kv_capacity_head_tokens - held for d, held in zip(devices, split.kv_head_tokens(classes), strict=True)]
    used = [any(split.heads[k][j] for k in range(len(classes))) for j in range(len(devices))]
    out = [0] * len(devices)
    for _ in range(kv_heads):
        fits = [j for j in range(len(devices)) if free[j] + EPS >= context_tokens] or list(range(len(devices)))
        grow = {
            j: devices[j].s_per_head_token * context_tokens
            + devices[j].s_per_head_request
            + (0.0 if used[j] else devices[j].fixed_s)
            for j in fits
        }
        best = min(fits, key=lambda j: (t[j] + grow[j], j))
        out[best] += 1
        t[best] += grow[best]
        used[best] = True
        free[best] -= context_tokens
    return tuple(out)


def solve(
    devices: list[AttentionDevice],
    classes: list[LengthClass],
    kv_heads: int,
    milp_max_devices: int = 16,
    time_limit_s: float = 10.0,
) -> HeadSplit:
    """The MILP for up to ``milp_max_devices`` devices, else the greedy water-filling.

    Raises:
        InfeasibleError: the batch's KV cache does not fit.
    """
    if len(devices) <= milp_max_devices:
        return solve_milp(devices, classes, kv_heads, time_limit_s)
    return solve_greedy(devices, classes, kv_heads)
