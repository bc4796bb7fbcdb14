"""Exact pruning of Cauchy's candidate combos: a combo is dropped only when another one has at least its goodput
and uses no more GPUs of any type (:func:`pareto_filter`), which cannot change the deployment ILP's optimum.
:func:`hetplan.solvers.cauchy_candidates.enumerate_candidates` builds the :class:`PairCombos` and keeps what survives.

Source: hetplan's own reconstruction (Cauchy, SoCC 2025, publishes no pruning rule and no code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hetplan.perf.capacity import PrefillCapacity

if TYPE_CHECKING:
    from hetplan.solvers.cauchy import InstanceOption


@dataclass(frozen=True, eq=False)
class PairCombos:
    """All ratios of one (prefill option, decode option) pair, as arrays over the ratio list."""

    p: InstanceOption
    d: InstanceOption
    pc: PrefillCapacity
    link: float
    kv_rate: np.ndarray
    good: np.ndarray


def pareto_filter(raw: list[PairCombos], rn: np.ndarray, rm: np.ndarray) -> list[tuple[int, int]]:
    """Indices (pair, ratio) of the combos no other combo dominates.

    Combo c' dominates c when it has at least c's goodput and uses at most as many GPUs of every type (so it
    also costs no more). Replacing c by c' in any deployment keeps it feasible and no dearer, so dropping
    dominated combos never changes the ILP optimum. Only combos whose GPU types are a subset of c's can dominate
    c; GPU counts are small integers, so each type pair is a grid and a 2-D running maximum finds the survivors.
    Ties (equal usage and goodput) keep the first in enumeration order.
    """
    names = sorted({x.gpu.name for pair in raw for x in (pair.p, pair.d)})
    tid = {n: i for i, n in enumerate(names)}
    n_ratio = rn.size
    pair_idx = np.repeat(np.arange(len(raw)), n_ratio)
    ratio_idx = np.tile(np.arange(n_ratio), len(raw))
    tp_p = np.repeat([pair.p.tp for pair in raw], n_ratio)
    tp_d = np.repeat([pair.d.tp for pair in raw], n_ratio)
    t_p = np.repeat([tid[pair.p.gpu.name] for pair in raw], n_ratio)
    t_d = np.repeat([tid[pair.d.gpu.name] for pair in raw], n_ratio)
    good = np.concatenate([pair.good for pair in raw])
    use_p = np.tile(rn, len(raw)) * tp_p
    use_d = np.tile(rm, len(raw)) * tp_d
    homo = t_p == t_d
    swap = t_p > t_d
    t_a = np.where(swap, t_d, t_p)
    t_b = np.where(swap, t_p, t_d)
    u_a = np.where(homo, use_p + use_d, np.where(swap, use_d, use_p))
    u_b = np.where(homo, 0, np.where(swap, use_p, use_d))
    alive = good > 0
    keep_mask = np.zeros(good.size, dtype=bool)

    def first_of_cells(mask: np.ndarray, cell: np.ndarray) -> np.ndarray:
        idx = np.nonzero(mask)[0]
        _, first = np.unique(cell[idx], return_index=True)
        return idx[first]

    single: dict[int, np.ndarray] = {}
    for t in np.unique(t_a[homo & alive]):
        sel = homo & alive & (t_a == t)
        best = np.zeros(int(u_a[sel].max()) + 1)
        np.maximum.at(best, u_a[sel], good[sel])
        single[int(t)] = np.maximum.accumulate(best)
        below = np.concatenate(([0.0], single[int(t)][:-1]))
        ok = sel.copy()
        ok[sel] = (good[sel] == best[u_a[sel]]) & (good[sel] > below[u_a[sel]])
        keep_mask[first_of_cells(ok, u_a)] = True
    group = t_a * len(names) + t_b
    het_idx = np.nonzero(~homo & alive)[0]
    het_idx = het_idx[np.argsort(group[het_idx], kind="stable")]  # by type pair, ascending index within one
    gids, starts = np.unique(group[het_idx], return_index=True)
    ends = np.append(starts[1:], het_idx.size) if starts.size else starts
    for gid, start, end in zip(gids, starts, ends, strict=True):
        sel = het_idx[start:end]
        a, b = int(gid) // len(names), int(gid) % len(names)
        ua, ub, g = u_a[sel], u_b[sel], good[sel]
        grid = np.zeros((int(ua.max()) + 1, int(ub.max()) + 1))
        np.maximum.at(grid, (ua, ub), g)
        if a in single:
            col = single[a][: grid.shape[0]]
            grid[: col.size, 0] = np.maximum(grid[: col.size, 0], col)
        if b in single:
            row = single[b][: grid.shape[1]]
            grid[0, : row.size] = np.maximum(grid[0, : row.size], row)
        prefix = np.maximum.accumulate(np.maximum.accumulate(grid, axis=0), axis=1)
        left = np.where(ua > 0, prefix[np.maximum(ua - 1, 0), ub], 0.0)
        down = np.where(ub > 0, prefix[ua, np.maximum(ub - 1, 0)], 0.0)
        ok = sel[(g == grid[ua, ub]) & (g > np.maximum(left, down))]
        _, first = np.unique(u_a[ok] * 100_000 + u_b[ok], return_index=True)
        keep_mask[ok[first]] = True
    chosen = np.nonzero(keep_mask)[0]
    return [(int(pair_idx[i]), int(ratio_idx[i])) for i in chosen]
