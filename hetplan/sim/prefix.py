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

- **Host tiers** (when the run has a host KV tier: ``SimConfig.host_kv``, or CASCADE's own, the tier its
  preempted sequences go to, :meth:`~hetplan.sim.scheduler.Scheduler.host_tier`): a block evicted from HBM spills
  to the instance's DRAM (room: ``dram_gib`` less the DRAM its offloaded sequences hold, in blocks of
  ``block_tokens · KV bytes per token``), DRAM's least recent block spills to SSD (``ssd_gib``), SSD's is dropped;
  each tier is LRU. A lookup then walks the prompt's reusable blocks in order: each is found in HBM, else DRAM,
  else SSD, and the walk stops at the first block in none of them (it and the rest are recomputed). The blocks
  found on a host tier are restored before the prefill continues: ``tokens · KV bytes / bandwidth + latency`` per
  tier used (DRAM, then SSD, one after the other), counted in the request's TTFT (the engine holds the prompt's
  prefill until the restore ends, its KV and slot reserved). Host copies stay where they are (a cache, as LMCache
  keeps them) and become the most recent of their tier. Counters added: ``prefix_dram_hit_blocks``,
  ``prefix_ssd_hit_blocks``, ``prefix_dram_miss_blocks`` (not in HBM nor DRAM), ``prefix_ssd_miss_blocks`` (nor
  SSD: recomputed), ``prefix_dram_evicted_blocks`` (spilled to SSD), ``prefix_ssd_evicted_blocks`` (dropped),
  ``prefix_host_hit_tokens`` and ``prefix_restore_s`` (seconds of restores); ``prefix_hit_blocks`` and
  ``prefix_hit_tokens`` stay HBM's, ``prefix_miss_blocks`` the blocks not in HBM, ``prefix_evicted_blocks``
  HBM's evictions. Without a host tier nothing of this exists and the counters are as before.
- **HBM limit** (``SimConfig.prefix_hbm_blocks``): an optional cap on HBM's cached blocks per instance, below the
  KV room (an engine that reserves less of its KV pool for the cache; small values make hand-checkable tests).

Routing for locality is the ``prefix`` router (:mod:`hetplan.sim.router`), which reads :meth:`PrefixCaches.
cached_blocks` per group.

Source: vLLM automatic prefix caching (full blocks, LRU, reverse-order eviction); placement and capacity rule are
hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING

from hetplan.units import GB, GIB
from hetplan.workload.prefix import BlockCache, BlockHashes, reusable_blocks

if TYPE_CHECKING:
    from hetplan.sim.hostkv import HostKvTier
    from hetplan.sim.instance import Instance


class _Tier:
    """One host tier of one instance: an LRU of block ids (most recent last) and its counters."""

    __slots__ = ("blocks", "hits", "misses", "evictions")

    def __init__(self) -> None:
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evictions = 0


class PrefixCaches:
    """The block caches of a simulated deployment, one per instance (decode-only instances keep none in use).

    Args:
        blocks: the stream's prefix block ids (stream order).
        n_instances: instances in the deployment.
        tier: the host tier evicted blocks spill to (module docstring); None: evicted blocks are dropped.
        kv_bytes_per_token: the model's KV bytes per token (sizes and restore times on the host tier).
        hbm_blocks: cap on HBM's cached blocks per instance (None: the KV room only).
    """

    def __init__(
        self,
        blocks: BlockHashes,
        n_instances: int,
        tier: HostKvTier | None = None,
        kv_bytes_per_token: float = 0.0,
        hbm_blocks: int | None = None,
    ) -> None:
        self.blocks = blocks
        self.bt = blocks.block_tokens
        self.caches = [BlockCache() for _ in range(n_instances)]
        self.hit_tokens = 0
        self.lookup_tokens = 0
        self.hbm_blocks = hbm_blocks
        self.tier = tier
        self.block_bytes = self.bt * kv_bytes_per_token
        self.dram = [_Tier() for _ in range(n_instances)] if tier is not None else []
        self.ssd = [_Tier() for _ in range(n_instances)] if tier is not None else []
        self.ssd_cap = (
            math.inf
            if tier is None or math.isinf(tier.ssd_gib) or self.block_bytes <= 0
            else tier.ssd_gib * GIB // self.block_bytes
        )
        self.host_hit_tokens = 0
        self.restore_total_s = 0.0
        self._host: tuple[int, int] = (0, 0)  # the last lookup's (DRAM, SSD) hit blocks

    def _room(self, inst: Instance) -> int:
        room = int(max(inst.cap - inst.kv_used, 0.0)) // self.bt
        return room if self.hbm_blocks is None else min(room, self.hbm_blocks)

    def _trim_hbm(self, inst: Instance) -> None:
        """Evict ``inst``'s HBM cache to its room; with a host tier the evicted blocks spill to it."""
        cache = self.caches[inst.idx]
        if self.tier is None:
            cache.trim(self._room(inst))
            return
        cap = max(self._room(inst), 0)
        blocks = cache.blocks
        while len(blocks) > cap:
            h, _ = blocks.popitem(last=False)
            cache.evictions += 1
            self._spill(inst, h)

    def _spill(self, inst: Instance, h: int) -> None:
        """Block ``h`` left ``inst``'s HBM: most recent in DRAM, whose least recent go to SSD, whose are dropped."""
        assert self.tier is not None
        dram, ssd = self.dram[inst.idx], self.ssd[inst.idx]
        dram.blocks[h] = None
        dram.blocks.move_to_end(h)
        free = max(self.tier.dram_gib - inst.host_gib, 0.0) * GIB  # offloaded sequences come first
        dram_cap = free // self.block_bytes if self.block_bytes > 0 else math.inf
        while len(dram.blocks) > dram_cap:
            d, _ = dram.blocks.popitem(last=False)
            dram.evictions += 1
            ssd.blocks[d] = None
            ssd.blocks.move_to_end(d)
            while len(ssd.blocks) > self.ssd_cap:
                ssd.blocks.popitem(last=False)
                ssd.evictions += 1

    def match(self, inst: Instance, rid: int, prompt_tokens: int) -> tuple[int, float]:
        """Tokens of ``rid``'s prompt cached for ``inst`` (evicting HBM to its current capacity first) and the
        seconds to restore those of them on its host tier (0.0 without one); remembers the lookup for :meth:`use`."""
        cache = self.caches[inst.idx]
        self._trim_hbm(inst)
        ids = self.blocks.of(rid)
        full = reusable_blocks(prompt_tokens, self.bt, ids.size)
        if self.tier is None:
            return cache.match(ids, full) * self.bt, 0.0
        hbm, dram, ssd = cache.blocks, self.dram[inst.idx].blocks, self.ssd[inst.idx].blocks
        n_dram = n_ssd = m = 0
        for h in ids[:full].tolist():
            if h in hbm:
                pass
            elif h in dram:
                n_dram += 1
            elif h in ssd:
                n_ssd += 1
            else:
                break
            m += 1
        self._host = (n_dram, n_ssd)
        tier, per_block = self.tier, self.block_bytes
        restore = 0.0
        if n_dram:
            restore += n_dram * per_block / (tier.dram_gb_per_s * GB) + tier.restore_latency_s
        if n_ssd:
            restore += n_ssd * per_block / (tier.ssd_gb_per_s * GB) + tier.restore_latency_s
        return m * self.bt, restore

    def use(self, inst: Instance, rid: int, prompt_tokens: int, hit_tokens: int, restore_s: float = 0.0) -> None:
        """Record the admitted lookup of ``rid`` on ``inst`` (the last :meth:`match`) that reused ``hit_tokens``,
        ``restore_s`` of them restored from the host tier."""
        ids = self.blocks.of(rid)
        full = reusable_blocks(prompt_tokens, self.bt, ids.size)
        cache = self.caches[inst.idx]
        self.lookup_tokens += prompt_tokens
        if self.tier is None:
            cache.use(ids, full, hit_tokens // self.bt)
            self.hit_tokens += hit_tokens
            return
        matched = ids[: hit_tokens // self.bt].tolist()
        hbm, dram, ssd = cache.blocks, self.dram[inst.idx], self.ssd[inst.idx]
        in_hbm = 0
        for h in reversed(matched):  # the most recent of its tier, last block first (prefixes stay whole)
            if h in hbm:
                hbm.move_to_end(h)
                in_hbm += 1
            elif h in dram.blocks:
                dram.blocks.move_to_end(h)
            else:
                ssd.blocks.move_to_end(h)
        n_dram, n_ssd = self._host
        cache.hits += in_hbm
        cache.misses += full - in_hbm
        dram.hits += n_dram
        dram.misses += full - in_hbm - n_dram
        ssd.hits += n_ssd
        ssd.misses += full - in_hbm - n_dram - n_ssd
        self.hit_tokens += in_hbm * self.bt
        self.host_hit_tokens += (n_dram + n_ssd) * self.bt
        self.restore_total_s += restore_s

    def computed(self, inst: Instance, rid: int, prompt_tokens: int) -> None:
        """``rid``'s prompt is prefilled on ``inst``: cache its full blocks (evicting to the room)."""
        ids = self.blocks.of(rid)
        full = reusable_blocks(prompt_tokens, self.bt, ids.size)
        if self.tier is None:
            self.caches[inst.idx].insert(ids, full, self._room(inst))
            return
        self.caches[inst.idx].insert(ids, full, 1 << 62)  # no eviction there: evicted blocks spill here
        self._trim_hbm(inst)

    def trim(self, inst: Instance) -> None:
        """Evict ``inst``'s cache to its current capacity."""
        self._trim_hbm(inst)

    def cached_blocks(self, rid: int, prompt_tokens: int, members: list[int]) -> int:
        """The most leading full blocks of ``rid``'s prompt cached on any of the instances ``members``."""
        ids = self.blocks.of(rid)
        full = reusable_blocks(prompt_tokens, self.bt, ids.size)
        return max((self.caches[i].match(ids, full) for i in members), default=0)

    def counters(self) -> dict[str, float]:
        """The run's totals (module docstring); the host tiers' only when the run has one."""
        out = {
            "prefix_hit_blocks": float(sum(c.hits for c in self.caches)),
            "prefix_miss_blocks": float(sum(c.misses for c in self.caches)),
            "prefix_evicted_blocks": float(sum(c.evictions for c in self.caches)),
            "prefix_hit_tokens": float(self.hit_tokens),
            "prefix_lookup_tokens": float(self.lookup_tokens),
        }
        if self.tier is not None:
            for name, tiers in (("dram", self.dram), ("ssd", self.ssd)):
                out[f"prefix_{name}_hit_blocks"] = float(sum(t.hits for t in tiers))
                out[f"prefix_{name}_miss_blocks"] = float(sum(t.misses for t in tiers))
                out[f"prefix_{name}_evicted_blocks"] = float(sum(t.evictions for t in tiers))
            out["prefix_host_hit_tokens"] = float(self.host_hit_tokens)
            out["prefix_restore_s"] = self.restore_total_s
        return out


__all__ = ["PrefixCaches"]
