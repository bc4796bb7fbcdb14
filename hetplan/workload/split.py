"""Traffic the plan was not sized on: a trace's held-out last stretch, and a trace re-drawn from its own windows.

``hetplan plan`` sizes a plan on the first part of a trace and verifies it on traffic it did not size on
(:mod:`hetplan.planning.verify`), because a plan checked only on the requests it was sized with says nothing of the
next hour of the same traffic (the same client's burstier stretch at the same mean rate can fall from 96 % to 80 %
joint attainment):

- :func:`time_split`: the trace cut at one instant; the planner sizes on the part before it, the verification
  replays the part after it (the held-out stretch). A cut in time, not a random sample of requests, keeps each
  part's bursts whole, as the next hour of traffic would be.
- :func:`redraw_windows`: a block bootstrap: the trace cut into windows of ``window_s`` seconds, windows drawn
  with replacement (a fixed seed) and laid end to end to the trace's length, each keeping its own arrivals and
  lengths. It is another stretch of the same traffic with its bursts in another order and count.

Both keep requests whole (prompt, output and the gaps between arrivals inside a window). Source: hetplan's own
reconstruction (the block bootstrap after Künsch, "The jackknife and the bootstrap for general stationary
observations", Ann. Statist. 1989).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hetplan.workload.model import Workload
from hetplan.workload.prefix import BlockHashes

#: Fewest requests either part of a time split must hold; a shorter trace is not split (verified in sample only).
MIN_SPLIT_REQUESTS = 50
#: Window length of :func:`redraw_windows`, seconds.
REDRAW_WINDOW_S = 60.0


def _own_rate(workload: Workload) -> bool:
    """Whether the workload's rate is its timestamps' own (not a ``rate_per_s`` the scenario set)."""
    if workload.arrival_s is None or not workload.duration_s or workload.arrival_rate_per_s is None:
        return False
    own = (workload.n_requests - 1) / workload.duration_s
    return bool(np.isclose(workload.arrival_rate_per_s, own, rtol=1e-9))


def _part(workload: Workload, keep: np.ndarray, name: str) -> Workload:
    arrival = None if workload.arrival_s is None else workload.arrival_s[keep]
    duration: float | None = None
    rate = workload.arrival_rate_per_s
    clock = workload.clock_start_s
    if arrival is not None and arrival.size:
        start = float(arrival.min())
        arrival = arrival - start
        clock = None if clock is None else clock + start
        duration = float(arrival.max())
        if duration > 0:
            rate = (arrival.size - 1) / duration if _own_rate(workload) else rate
    return replace(
        workload,
        name=name,
        prompt_tokens=workload.prompt_tokens[keep],
        output_tokens=workload.output_tokens[keep],
        class_labels=workload.labels_at(keep),
        arrival_s=arrival,
        duration_s=duration if arrival is not None else workload.duration_s,
        arrival_rate_per_s=rate,
        clock_start_s=clock,
        prefix_blocks=_blocks(workload, keep),
    )


def _blocks(workload: Workload, rows: np.ndarray) -> BlockHashes | None:
    """The prefix block ids of ``rows`` (a boolean mask or indices), or None without them."""
    if workload.prefix_blocks is None:
        return None
    index = np.nonzero(rows)[0] if rows.dtype == bool else rows
    return workload.prefix_blocks.take(index)


def time_split(workload: Workload, holdout: float) -> tuple[Workload, Workload] | None:
    """Cut ``workload`` at the instant that leaves the last ``holdout`` of its time span after it.

    Args:
        workload: a trace with timestamps (``arrival_s``), or a length-only one (then cut by row order, the last
            ``holdout`` of the rows held out).
        holdout: share of the span held out, in (0, 1).

    Returns:
        ``(sizing, held_out)``: the requests before the cut (keeping the trace's name) and after it (named
        ``NAME[held out]``), each with its arrivals re-based to 0 and its own mean rate; None when either part
        would hold fewer than :data:`MIN_SPLIT_REQUESTS` requests (the trace is then verified in sample only).

    Raises:
        ValueError: ``holdout`` outside (0, 1).
    """
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    n = workload.n_requests
    if workload.arrival_s is not None and workload.duration_s:
        cut = float(workload.arrival_s.min()) + (1 - holdout) * float(workload.duration_s)
        before = workload.arrival_s < cut
    else:
        before = np.arange(n) < round(n * (1 - holdout))
    if min(int(before.sum()), int((~before).sum())) < MIN_SPLIT_REQUESTS:
        return None
    return _part(workload, before, workload.name), _part(workload, ~before, f"{workload.name}[held out]")


def redraw_windows(workload: Workload, seed: int, window_s: float = REDRAW_WINDOW_S) -> Workload | None:
    """The trace re-drawn from its own windows (module docstring): ``ceil(span / window_s)`` windows drawn with
    replacement with ``numpy.random.default_rng(seed)``, laid end to end.

    Returns:
        A workload named ``NAME[re-drawn windows, seed S]`` with about the trace's span; None for a trace without
        timestamps or shorter than two windows.
    """
    if workload.arrival_s is None or not workload.duration_s or workload.duration_s < 2 * window_s:
        return None
    arrival = workload.arrival_s - float(workload.arrival_s.min())
    index = np.floor(arrival / window_s).astype(np.int64)
    count = int(np.ceil(workload.duration_s / window_s))
    index = np.minimum(index, count - 1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, count, size=count)
    parts = [np.nonzero(index == w)[0] for w in range(count)]
    rows = np.concatenate([parts[w] for w in picks])
    offsets = np.concatenate([np.full(parts[w].size, slot * window_s - w * window_s) for slot, w in enumerate(picks)])
    if rows.size < 2:
        return None
    times = arrival[rows] + offsets
    order = np.argsort(times, kind="stable")
    rows, times = rows[order], times[order]
    duration = float(times.max() - times.min())
    return replace(
        workload,
        name=f"{workload.name}[re-drawn windows, seed {seed}]",
        prompt_tokens=workload.prompt_tokens[rows],
        output_tokens=workload.output_tokens[rows],
        class_labels=workload.labels_at(rows),
        arrival_s=times - float(times.min()),
        duration_s=duration,
        arrival_rate_per_s=(rows.size - 1) / duration
        if duration > 0 and _own_rate(workload)
        else workload.arrival_rate_per_s,
        clock_start_s=None,
        prefix_blocks=_blocks(workload, rows),
    )


__all__ = ["MIN_SPLIT_REQUESTS", "REDRAW_WINDOW_S", "redraw_windows", "time_split"]
