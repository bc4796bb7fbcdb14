"""What the capacity searches read of a workload: the length sample (:class:`LengthStats`), the arrival trace the
burst bounds replay (:class:`ArrivalTrace`) and the prefix-cache reuse that shortens prefill work
(:class:`PrefillReuse`, :func:`prefill_work_tokens`).

The planner builds them (:mod:`hetplan.planning.request`, :mod:`hetplan.planning.prefix`); the queueing model that
reads them is :mod:`hetplan.perf.queueing`, the searches :mod:`hetplan.perf.capacity` and
:mod:`hetplan.perf.decode_capacity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hetplan.perf.latency import InstanceModel

if TYPE_CHECKING:
    from hetplan.perf.arch import ModelArch


@dataclass(frozen=True, eq=False)
class PrefillReuse:
    """Prefix-cache reuse for capacities: per cache size, the prompt lengths of the prefill work left.

    An instance's cache is its KV capacity less ``reserve_tokens`` (the prompt being computed), in blocks of
    ``block_tokens``; ``work_by_cache`` maps cache sizes (blocks) to the work lengths at that size, shape (n,)
    each (:func:`prefill_work_tokens`), computed by the planner for every candidate instance
    (:mod:`hetplan.planning.prefix`). An instance whose size is not listed takes the largest listed size below
    its own (none: no reuse), which errs towards less reuse.
    """

    block_tokens: int
    reserve_tokens: int
    work_by_cache: Mapping[int, np.ndarray]

    def cache_blocks(self, inst: InstanceModel) -> int:
        """``inst``'s cache, blocks (module rule above)."""
        return max(int(inst.kv_capacity_tokens) - self.reserve_tokens, 0) // self.block_tokens

    def work_for(self, inst: InstanceModel, prompt_tokens: np.ndarray) -> np.ndarray:
        """Shape (n,): the work lengths at ``inst``'s cache (``prompt_tokens`` when no listed size fits)."""
        size = self.cache_blocks(inst)
        fits = [k for k in self.work_by_cache if k <= size]
        return self.work_by_cache[max(fits)] if fits else prompt_tokens

    def take(self, index: np.ndarray) -> PrefillReuse:
        """The requests ``index`` (a mask or indices) of every size's work."""
        return PrefillReuse(
            self.block_tokens, self.reserve_tokens, {k: v[index] for k, v in self.work_by_cache.items()}
        )


@dataclass(frozen=True)
class LengthStats:
    """Length samples and the SLO percentile used for capacities.

    Attributes:
        prompt_tokens: shape (n,) prompt lengths.
        output_tokens: shape (n,) output lengths (>= 1).
        quantile: SLO percentile as a fraction, e.g. 0.9.
        prefill_reuse: prefix-cache reuse (:class:`PrefillReuse`): each instance's prefill is priced at the
            prompt lengths of the work its own cache leaves; None: every prompt computed whole. Only prefill
            service times read it; KV sizes, transfers and decode contexts use ``prompt_tokens``.
        class_labels: shape (n,), each request's class (a scenario's ``classes:``), for the per-class prefill
            capacities (:func:`hetplan.perf.capacity.class_prefill_capacities`); None: one class.
    """

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    quantile: float
    prefill_reuse: PrefillReuse | None = None
    class_labels: np.ndarray | None = None

    def prefill_tokens(self, inst: InstanceModel) -> np.ndarray:
        """Shape (n,): the prompt lengths ``inst``'s prefill service times are priced at (its prefix reuse)."""
        return (
            self.prompt_tokens if self.prefill_reuse is None else self.prefill_reuse.work_for(inst, self.prompt_tokens)
        )

    @property
    def mean_prompt(self) -> float:
        """Mean prompt length, tokens."""
        return float(self.prompt_tokens.mean())

    @property
    def mean_output(self) -> float:
        """Mean output length, tokens."""
        return float(self.output_tokens.mean())

    @property
    def decode_context(self) -> float:
        """Time-averaged context per decode slot, ``E[O·(S + O/2)] / E[O]`` tokens."""
        o = self.output_tokens.astype(float)
        return float((o * (self.prompt_tokens + o / 2)).sum() / o.sum())

    @property
    def max_context(self) -> float:
        """q-quantile of ``S + O``: a request of this size must fit one instance's KV cache."""
        return float(np.percentile(self.prompt_tokens + self.output_tokens, self.quantile * 100))


@dataclass(frozen=True)
class ArrivalTrace:
    """A workload's arrivals for the burst-aware capacities (module docstring).

    Attributes:
        arrival_s: shape (n,), sorted arrival times, seconds (the trace's own timeline).
        prompt_tokens: shape (n,), the prompts in arrival order.
        rate_per_s: the trace's own mean rate, req/s.
        sized_rate_per_s: the rate the plan is sized for (target x (1 + headroom)), req/s: the trace is replayed at
            it, its gaps shrunk by ``rate_per_s / sized_rate_per_s``.
        output_tokens: shape (n,), the outputs in arrival order (>= 1), for the decode burst bound
            (:func:`~hetplan.perf.decode_capacity.fluid_decode_rates`); None: every request is taken to have the
            length sample's mean output.
        prefill_reuse: as :attr:`LengthStats.prefill_reuse`, for these requests (None: no reuse).
        class_labels: as :attr:`LengthStats.class_labels`, for these requests (None: one class).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    rate_per_s: float
    sized_rate_per_s: float
    output_tokens: np.ndarray | None = None
    prefill_reuse: PrefillReuse | None = None
    class_labels: np.ndarray | None = None

    def prefill_tokens(self, inst: InstanceModel) -> np.ndarray:
        """Shape (n,): the prompt lengths ``inst``'s prefill service times are priced at (its prefix reuse)."""
        return (
            self.prompt_tokens if self.prefill_reuse is None else self.prefill_reuse.work_for(inst, self.prompt_tokens)
        )

    def decode_tokens(self, mean_output: float) -> np.ndarray:
        """Shape (n,): the tokens each request decodes after its first, ``o_i − 1`` (0 for a one-token output,
        which never takes a decode slot and has no TPOT), as floats; without outputs in the trace,
        ``max(mean_output − 1, 1)`` for every request."""
        if self.output_tokens is None:
            return np.full(self.arrival_s.size, max(mean_output - 1.0, 1.0))
        return np.maximum(self.output_tokens.astype(float) - 1.0, 0.0)

    @property
    def gaps_s(self) -> np.ndarray:
        """Shape (n-1,): the gaps between arrivals at ``sized_rate_per_s``, seconds."""
        return np.diff(self.arrival_s) * (self.rate_per_s / self.sized_rate_per_s)


def prefill_work_tokens(arch: ModelArch, prompt_tokens: np.ndarray, cached_tokens: np.ndarray) -> np.ndarray:
    """Shape (n,): the prompt length whose prefill FLOPs equal those of a prompt of ``prompt_tokens`` whose first
    ``cached_tokens`` come from the prefix cache. With ``arch.prefill_flops(s) = a·s + c·s² + lm`` (read off at
    s = 0, 1, 2), the work left is ``a·(S − h) + c·(S² − h²) + lm`` (the new tokens still attend to the cached
    prefix), and the equal length solves ``a·s + c·s² = a·(S − h) + c·(S² − h²)``. Pricing that length with the
    latency model keeps its memory floor and overhead per iteration. Source: hetplan's own reconstruction (the
    simulator prices prefill chunks the same way, :mod:`hetplan.sim.deployment`)."""
    f0, f1, f2 = (float(arch.prefill_flops(np.asarray(x, dtype=float), 1)) for x in (0, 1, 2))
    a_lin = (4.0 * f1 - 3.0 * f0 - f2) / 2.0
    c_quad = (f2 - 2.0 * f1 + f0) / 2.0
    s = np.asarray(prompt_tokens, dtype=float)
    h = np.minimum(np.asarray(cached_tokens, dtype=float), s - 1.0)
    work = a_lin * (s - h) + c_quad * (s * s - h * h)
    if c_quad > 0:
        out: np.ndarray = (-a_lin + np.sqrt(a_lin * a_lin + 4.0 * c_quad * work)) / (2.0 * c_quad)
    else:
        out = work / a_lin
    return np.where(h > 0, np.maximum(out, 1.0), s)
