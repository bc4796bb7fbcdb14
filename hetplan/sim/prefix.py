"""Prefix caching in the simulator: one LRU block cache per prefill or aggregated instance.

The stream's prefix block ids (:attr:`~hetplan.workload.model.RequestStream.prefix_blocks`: a Mooncake trace's
``hash_ids`` or a declared reuse model's, :mod:`hetplan.workload.prefix`) decide hits; the cache itself is
:class:`hetplan.workload.prefix.BlockCache`, shared with the planner's hit-rate estimate.

- **Capacity**: the instance's KV room left after its running batch, ``(KV capacity − KV tokens held) //
  block_tokens`` blocks, checked at every lookup, insertion and iteration end (eviction is LRU down to it). Cached
  blocks a running request uses are counted in its KV too (the engine shares them; hetplan counts them twice,
  a conservative simplification: the cache is at most the free room).
- **Lookup** when the instance admits a prompt for prefill (first time or a recompute): the longest run of the
  prompt's leading full blocks in this instance's cache, at most ``prompt − 1`` tokens; the prefill starts after
  the hit (``done_pref`` = hit tokens), so the step pays only for the rest of the prompt, with the attention of
  the new tokens over the cached prefix (the batch's ``Σ (k+c)² − k²`` with k = hit). The KV of the whole prompt
  is reserved as before, and a disaggregated prefill still transfers the whole prompt's KV.
- **Insertion** when the prompt's prefill ends on the instance: its full blocks become the most recent.
- **Counters** (:class:`~hetplan.sim.result.SimResult` ``counters``): ``prefix_hit_blocks``,
  ``prefix_miss_blocks`` (full blocks looked up and not found), ``prefix_evicted_blocks``,
  ``prefix_hit_tokens`` and ``prefix_lookup_tokens`` (the prompt tokens of the lookups).

Routing for locality is the ``prefix`` router (:mod:`hetplan.sim.router`), which reads :meth:`PrefixCaches.
cached_blocks` per group.

Source: vLLM automatic prefix caching (full blocks, LRU, reverse-order eviction); placement and capacity rule are
hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetplan.workload.prefix import BlockCache, BlockHashes, reusable_blocks

if TYPE_CHECKING:
    from hetplan.sim.instance import Instance


class PrefixCaches:
    """The block caches of a simulated deployment, one per instance (decode-only instances keep none in use).

    Args:
        blocks: the stream's prefix block ids (stream order).
        n_instances: instances in the deployment.
    """

    def __init__(self, blocks: BlockHashes, n_instances: int) -> None:
        self.blocks = blocks
        self.bt = blocks.block_tokens
        self.caches = [BlockCache() for _ in range(n_instances)]
        self.hit_tokens = 0
        self.lookup_tokens = 0

    def _room(self, inst: Instance) -> int:
        return int(max(inst.cap - inst.kv_used, 0.0)) // self.bt

    def match(self, inst: Instance, rid: int, prompt_tokens: int) -> int:
        """Tokens of ``rid``'s prompt cached on ``inst`` (evicting to the current capacity first); no other change."""
        cache = self.caches[inst.idx]
        cache.trim(self._room(inst))
        ids = self.blocks.of(rid)
        return cache.match(ids, reusable_blocks(prompt_tokens, self.bt, ids.size)) * self.bt

    def use(self, inst: Instance, rid: int, prompt_tokens: int, hit_tokens: int) -> None:
        """Record the admitted lookup of ``rid`` on ``inst`` that reused ``hit_tokens``."""
        ids = self.blocks.of(rid)
        self.caches[inst.idx].use(ids, reusable_blocks(prompt_tokens, self.bt, ids.size), hit_tokens // self.bt)
        self.hit_tokens += hit_tokens
        self.lookup_tokens += prompt_tokens

    def computed(self, inst: Instance, rid: int, prompt_tokens: int) -> None:
        """``rid``'s prompt is prefilled on ``inst``: cache its full blocks."""
        ids = self.blocks.of(rid)
        self.caches[inst.idx].insert(ids, reusable_blocks(prompt_tokens, self.bt, ids.size), self._room(inst))

    def trim(self, inst: Instance) -> None:
        """Evict ``inst``'s cache to its current capacity."""
        self.caches[inst.idx].trim(self._room(inst))

    def cached_blocks(self, rid: int, prompt_tokens: int, members: list[int]) -> int:
        """The most leading full blocks of ``rid``'s prompt cached on any of the instances ``members``."""
        ids = self.blocks.of(rid)
        full = reusable_blocks(prompt_tokens, self.bt, ids.size)
        return max((self.caches[i].match(ids, full) for i in members), default=0)

    def counters(self) -> dict[str, float]:
        """The run's totals (module docstring)."""
        return {
            "prefix_hit_blocks": float(sum(c.hits for c in self.caches)),
            "prefix_miss_blocks": float(sum(c.misses for c in self.caches)),
            "prefix_evicted_blocks": float(sum(c.evictions for c in self.caches)),
            "prefix_hit_tokens": float(self.hit_tokens),
            "prefix_lookup_tokens": float(self.lookup_tokens),
        }


__all__ = ["PrefixCaches"]
