"""The batched bisection the capacity searches run: many monotone searches side by side as numpy arrays, each
bit-identical to a plain one-at-a-time bisection (the tests' reference, ``largest`` in
``tests/unit/capacity_reference.py``).

A regula-falsi bracket first narrows every row, so that replaying the bisection's midpoints decides most of them
without evaluating the metric (:func:`largest_batch`). Used by :mod:`hetplan.perf.capacity`,
:mod:`hetplan.perf.decode_capacity` and the Mélange instance types (:mod:`hetplan.solvers.melange`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BISECT_STEPS = 40
"""Bisection steps of the capacity searches on [0, hi]: a relative precision of 2^-40 (about 1e-12)."""

MAX_BATCH_ELEMENTS = 2_000_000
"""Most float64 elements (16 MB) one batched bisection step of :func:`largest_batch` holds per array; more
rows are split into chunks (a long trace replayed for many instance options)."""


SEARCH_EVALUATIONS = 14
"""Regula-falsi evaluations per row before the bisection replay of :func:`largest_batch` (fewer: more of the
bisection's midpoints are evaluated exactly; the result is the same)."""


def largest_batch(
    metric: Callable[[np.ndarray, np.ndarray], np.ndarray],
    limit: float,
    hi: np.ndarray,
    steps: int,
    row_elements: int,
    search_evaluations: int = SEARCH_EVALUATIONS,
) -> np.ndarray:
    """A plain bisection (``steps`` steps on ``[0, hi]``: the largest x with a passing predicate, 0 when none) for many
    rows at once, where row r's predicate is ``metric(x, rows)[r] <= limit`` and ``metric`` is non-decreasing in x (a
    TTFT quantile against its SLO).

    Two phases, so that far fewer exact evaluations are needed than the bisection's ``steps``:

    1. *Bracket*: up to ``search_evaluations`` evaluations per row of a safeguarded regula falsi (Illinois) on
       ``metric(x) - limit`` (a bisection step where the metric is infinite or a side is unknown) keep the largest
       x known to pass (``L``) and the smallest known to fail (``U``); a row stops once they are adjacent floats.
    2. *Replay*: the bisection itself runs, midpoint for midpoint as the plain one would; a midpoint ≤ L passes
       and one ≥ U fails without evaluating (monotonicity), and only midpoints strictly between are evaluated.

    For a monotone metric the result is bit-identical to the plain bisection (the same midpoints, the same
    decisions); only a metric that is not monotone at rounding level between L and U could differ, and then by
    less than the bracket. Rows are processed in chunks of at most :data:`MAX_BATCH_ELEMENTS` / ``row_elements``.
    Source: hetplan's own reconstruction (Illinois: Dowell & Jarratt 1971)."""
    hi = np.array(hi, dtype=float)
    result = np.zeros_like(hi)
    chunk = max(1, MAX_BATCH_ELEMENTS // max(1, row_elements))
    for start in range(0, hi.size, chunk):
        rows = np.arange(start, min(hi.size, start + chunk))
        result[rows] = _Bracket(metric, limit, rows).largest(hi[rows], steps, search_evaluations)
    return result


class _Bracket:
    """Per row of one chunk: the largest x known to pass (``low_x``, with ``metric - limit`` ≤ 0 in ``low_f``) and
    the smallest known to fail (``up_x``, ``up_f`` > 0, possibly inf); see :func:`largest_batch`."""

    def __init__(self, metric: Callable[[np.ndarray, np.ndarray], np.ndarray], limit: float, rows: np.ndarray):
        self.metric, self.limit, self.rows = metric, limit, rows
        size = rows.size
        self.low_x, self.low_f = np.full(size, -np.inf), np.full(size, np.nan)
        self.up_x, self.up_f = np.full(size, np.inf), np.full(size, np.nan)
        self.side = np.zeros(size, dtype=int)  # Illinois: which side moved last (-1 low, +1 up)

    def record(self, x: np.ndarray, sel: np.ndarray) -> None:
        """Evaluate rows ``sel`` (chunk indices) at ``x`` and move their brackets."""
        f = self.metric(x, self.rows[sel]) - self.limit
        good = f <= 0
        g, b = sel[good], sel[~good]
        self.low_x[g], self.low_f[g] = x[good], f[good]
        self.up_x[b], self.up_f[b] = x[~good], f[~good]
        # Illinois: when the same side moves twice running, halve the other side's value
        self.up_f[g] = np.where(self.side[g] == -1, self.up_f[g] / 2, self.up_f[g])
        self.low_f[b] = np.where(self.side[b] == 1, self.low_f[b] / 2, self.low_f[b])
        self.side[g], self.side[b] = -1, 1

    def largest(self, top: np.ndarray, steps: int, search_evaluations: int) -> np.ndarray:
        """Phase 1 (bracket) then phase 2 (replay the bisection on [0, top]); returns its final lower ends."""
        grid = top / 2.0**steps
        for _ in range(search_evaluations):
            both = np.isfinite(self.low_x) & np.isfinite(self.up_x)
            # done: adjacent floats, or narrower than the bisection's last step (at most one midpoint inside)
            done = both & ((np.nextafter(self.low_x, np.inf) >= self.up_x) | (self.up_x - self.low_x < grid))
            active = np.nonzero(~done)[0]
            if not active.size:
                break
            lo_a = np.where(np.isfinite(self.low_x[active]), self.low_x[active], 0.0)
            up_a = np.where(np.isfinite(self.up_x[active]), self.up_x[active], top[active])
            x = (lo_a + up_a) / 2
            lf, uf = self.low_f[active], self.up_f[active]
            secant = both[active] & np.isfinite(uf) & np.isfinite(lf)
            if secant.any():
                lf, uf = lf[secant], uf[secant]
                with np.errstate(divide="ignore", invalid="ignore"):
                    guess = lo_a[secant] - lf * (up_a[secant] - lo_a[secant]) / (uf - lf)
                inside = np.isfinite(guess) & (guess > lo_a[secant]) & (guess < up_a[secant])
                x[secant] = np.where(inside, guess, x[secant])
            self.record(x, active)
        lo, up = np.zeros(top.size), top.copy()
        for _ in range(steps):
            mid = (lo + up) / 2
            passes = mid <= self.low_x
            unsure = np.nonzero(~passes & (mid < self.up_x))[0]
            if unsure.size:
                self.record(mid[unsure], unsure)
                passes[unsure] = mid[unsure] <= self.low_x[unsure]
            lo = np.where(passes, mid, lo)
            up = np.where(passes, up, mid)
        return lo
