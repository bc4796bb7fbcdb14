"""The raw outcome of one simulation run (what :mod:`hetplan.sim.metrics` summarises).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SimResult:
    """Raw outcome of a run; :mod:`hetplan.sim.metrics` turns it into metrics.

    Attributes:
        first_token_s / done_s: shape (n,), absolute times (NaN: never reached).
        dropped: shape (n,), bool: the request (prompt + output) fits no group's KV cache (a request too long for
            the group the router picked goes to the group with the most room instead).
        step_s / step_weight: per iteration, its duration and how many sequences produced a token in it that
            also produced their previous token on that instance (pooled ITL samples, token-weighted).
        entry_gap_s: ITL samples of tokens whose previous token came from elsewhere (transfer, preemption).
        busy_s: per instance, seconds spent in iterations. end_s: time of the last event.
        counters: events, iterations, preemptions, restores, recomputes, prefix-cache totals (``prefix_*``,
            :mod:`hetplan.sim.prefix`; only when prefix caching is on), tier-2 share statistics
            (``tier2_tokens`` / ``saturated_tokens``: Tier 2's prefill tokens and the token budget over the CASCADE
            iterations in which Tier 1 had more work than fitted).
        instance_names / instance_roles: per instance. preempted: request ids in the order they were preempted.
        over_context: shape (n,), bool: dropped because the prompt is longer than the model's context window
            (``context_tokens``); these are also set in ``dropped``.
        cut_off: the run stopped at the drain cut-off (``drain_s`` after the last arrival) with events pending.
        output_tokens: shape (n,), the output each request was served with (cut at the context window,
            :mod:`hetplan.workload.context`); empty: the stream's. arrival_s: shape (n,), the arrival times the run
            used (a closed loop makes them; empty: the stream's). truncated: outputs cut at the window.
    """

    first_token_s: np.ndarray
    done_s: np.ndarray
    dropped: np.ndarray
    step_s: np.ndarray
    step_weight: np.ndarray
    entry_gap_s: np.ndarray
    busy_s: np.ndarray
    end_s: float
    counters: dict[str, float] = field(default_factory=dict)
    instance_names: tuple[str, ...] = ()
    instance_roles: tuple[str, ...] = ()
    preempted: tuple[int, ...] = ()
    over_context: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cut_off: bool = False
    drain_s: float = 3600.0
    context_tokens: int = 0
    output_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    arrival_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    truncated: int = 0

    def __post_init__(self) -> None:
        if self.over_context.shape != self.dropped.shape:
            self.over_context = np.zeros(self.dropped.shape, dtype=bool)


__all__ = ["SimResult"]
