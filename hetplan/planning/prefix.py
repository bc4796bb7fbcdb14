"""Prefix caching in sizing: which block ids a scenario's workload carries, and the hit rate the plan assumes.

**Switch** (``workload.prefix_cache``): ``auto`` (the default) reuses prefixes when the workload has block ids, a
Mooncake trace's ``hash_ids`` or a declared ``workload.reuse`` model; ``on`` refuses a workload with neither;
``off`` drops them (the plan and its verification compute every prompt whole, as before prefix caching existed).
:func:`apply_reuse` sets the workload's ``prefix_blocks`` accordingly, so sizing and the verification's
simulation (:mod:`hetplan.sim.prefix`) see the same ids.

**Hit rate at the planned cache size** (:func:`estimate_reuse`): each candidate instance type (GPU × TP that
holds the model) is sized with its own cache, its KV capacity less one full prefill batch
(``max_num_batched_tokens``, the prompt being computed). The workload's requests, in arrival order, pass one LRU
block cache of that size (:func:`hetplan.workload.prefix.hit_tokens_single_cache`): each request's hit is what
that cache holds of its prefix. This is the whole fleet's traffic through one instance's cache: optimistic
where n instances each compute a prefix many sessions share (up to n times) or the router scatters a session's
turns; it undercounts where sessions are kept apart on instances with room to spare. On example (c') it assumed
55.2 % and the simulated plan reused 37.3 % (docs/simulation.md#prefix-caching). The verification replays the plan
with per-instance caches and the ``prefix`` router (:func:`hetplan.sim.verify.verify_config`), reports the hits it
got and re-sizes a plan that misses. Cost: one replay per distinct cache size, O(blocks in the trace) each.

**Effect on capacity**: each request's prefill is priced at the equal length of its remaining work
(:func:`hetplan.perf.capacity_inputs.prefill_work_tokens`); KV sizes, KV transfers and decode contexts keep the whole
prompt (the cached blocks are in the KV cache all the same). The plan records the assumed hit rate and, solved
again without reuse, what the chosen strategy would cost then (``prefix_cache`` in the plan).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel
from hetplan.perf.settings import PerfSettings
from hetplan.scenario_blocks import WorkloadSpec
from hetplan.units import rnd
from hetplan.workload.model import Workload
from hetplan.workload.prefix import declared_reuse, hit_tokens_single_cache

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


@dataclass(frozen=True)
class ReuseEstimate:
    """The prefix reuse a plan assumes.

    Attributes:
        source: ``hash_ids`` (the trace's) or ``declared reuse`` (``workload.reuse``).
        block_tokens: tokens per block. reserve_tokens: KV kept free of cache per instance (one prefill batch).
        by_instance: per candidate instance that holds the model, ``(GPU, TP, cache tokens, token hit rate)``,
            sorted by GPU and TP.
        cached_by_cache: cache size (blocks) -> shape (n,), the tokens each request of the workload reuses.
    """

    source: str
    block_tokens: int
    reserve_tokens: int
    by_instance: tuple[tuple[str, int, int, float], ...]
    cached_by_cache: dict[int, np.ndarray]


def apply_reuse(spec: WorkloadSpec, workload: Workload) -> Workload:
    """``workload`` with the block ids the scenario's switch and reuse model give (module docstring).

    Raises:
        InputError: ``reuse`` declared for a trace with ``hash_ids``, or ``prefix_cache: on`` with neither."""
    mode = spec.prefix_cache
    if spec.reuse is not None and workload.prefix_blocks is not None:
        raise InputError(
            "workload.reuse declares prefix reuse for a trace without hash_ids",
            f"{workload.source} has hash_ids: its own prefix blocks decide the hits",
            "drop workload.reuse",
        )
    if mode == "off":
        return replace(workload, prefix_blocks=None) if workload.prefix_blocks is not None else workload
    if spec.reuse is not None:
        blocks = declared_reuse(workload.prompt_tokens, spec.reuse.session_share, spec.reuse.system_prompt_tokens)
        return replace(workload, prefix_blocks=blocks)
    if mode == "on" and workload.prefix_blocks is None:
        raise InputError(
            "workload.prefix_cache is on but the workload has no prefix blocks",
            f"{workload.source} has no hash_ids and no workload.reuse is declared",
            "declare workload.reuse (session_share, system_prompt_tokens), or set prefix_cache: auto or off",
        )
    return workload


def estimate_reuse(
    workload: Workload,
    arch: ModelArch,
    gpus: tuple[GpuSpec, ...],
    tps: tuple[int, ...],
    settings: PerfSettings,
    source: str = "hash_ids",
    catalog: Catalog | None = None,
) -> ReuseEstimate | None:
    """The hit rates at every candidate instance's own cache size (module docstring), ``source`` naming where the
    block ids came from, the instances made with ``catalog`` (:class:`hetplan.perf.latency.InstanceModel`); None
    when the workload has no block ids. One replay per distinct cache size (sizes
    beyond the workload's distinct blocks share one)."""
    blocks = workload.prefix_blocks
    if blocks is None:
        return None
    bt = blocks.block_tokens
    reserve = int(settings.max_num_batched_tokens)
    distinct = int(np.unique(blocks.ids).size)
    total = float(workload.prompt_tokens.sum())
    replays: dict[int, np.ndarray] = {}
    cached_by_cache: dict[int, np.ndarray] = {}
    rows = []
    for gpu in sorted(gpus, key=lambda g: g.name):
        for tp in sorted(tps):
            inst = InstanceModel(arch, gpu, tp, 1, settings, catalog)
            if not inst.fits:
                continue
            size = max(int(inst.kv_capacity_tokens) - reserve, 0) // bt
            key = min(size, distinct)  # a cache that holds every block behaves alike at any larger size
            if key not in replays:
                replays[key] = hit_tokens_single_cache(blocks, workload.prompt_tokens, key)
            cached_by_cache[size] = replays[key]
            rate = float(replays[key].sum()) / total if total else 0.0
            rows.append((gpu.name, tp, size * bt, rate))
    return ReuseEstimate(source, bt, reserve, tuple(rows), cached_by_cache)


def reuse_doc(est: ReuseEstimate) -> dict[str, Any]:
    """The plan's record of the assumed reuse (``prefix_cache``; the planner adds the plan's own hit rate and the
    cost without reuse)."""
    return {
        "source": est.source,
        "method": "per instance type: the workload in arrival order through one LRU block cache of that instance's "
        "KV room less one prefill batch (hetplan.planning.prefix)",
        "block_tokens": est.block_tokens,
        "by_instance": [
            {"gpu": g, "tp": tp, "cache_tokens": c, "token_hit_rate": rnd(r, 4)} for g, tp, c, r in est.by_instance
        ],
    }


__all__ = ["ReuseEstimate", "apply_reuse", "estimate_reuse", "reuse_doc"]
