"""Prefix blocks of requests: the trace's ``hash_ids`` kept compactly, a declared reuse model for traces without
them, and the LRU block cache the simulator and the planner share.

Data: the Mooncake trace format gives each request ``hash_ids``, one id per 512-token block of its prompt (the
last one possibly partial); two requests share a block id at position i exactly when their prompts agree up to the
end of that block (the ids hash the whole prefix). :class:`BlockHashes` stores them as one flat ``int64`` array
plus offsets (a 100k-request trace with 25 blocks per prompt: 2.5M ids, 20 MB), never one Python list per request.

Reuse model (:func:`declared_reuse`): for a trace without ids, a scenario declares the share of requests that
continue a session and the length of a system prompt every request shares; ids are drawn from these with a fixed
seed (see the function).

Cache (:class:`BlockCache`): one per serving instance, as vLLM's automatic prefix caching and SGLang's radix
cache keep computed KV blocks for reuse. Only full blocks are cached and matched (vLLM hashes full blocks only),
a hit is the longest run of the request's leading blocks present in the cache, and at most ``prompt − 1`` tokens
are reused (the engine computes the last prompt token to produce the first output token). Eviction is LRU with a
prefix-closed order: a request's blocks are touched last block first, so the first blocks of a prefix are the
most recent and the tail goes first (vLLM frees a request's blocks in reverse order for the same reason). The
capacity is set from outside at each use (the simulator: the instance's KV room left after its running batch).

Source: Mooncake trace format (kvcache-ai/Mooncake, FAST'25); caching rules after vLLM's automatic prefix
caching; the reuse model and the cache's placement in the simulator are hetplan's own reconstruction.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from hetplan.errors import InputError

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per ``hash_ids`` block in the Mooncake trace format."""


@dataclass(frozen=True, eq=False)
class BlockHashes:
    """Per-request prefix block ids, compact.

    Attributes:
        ids: shape (total,), int64, every request's block ids one after the other.
        offsets: shape (n + 1,), int64, request i's ids are ``ids[offsets[i]:offsets[i + 1]]``.
        block_tokens: tokens per block (512 for Mooncake).
    """

    ids: np.ndarray = field(repr=False)
    offsets: np.ndarray = field(repr=False)
    block_tokens: int = MOONCAKE_BLOCK_TOKENS

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.offsets.size - 1)

    def of(self, i: int) -> np.ndarray:
        """Request ``i``'s block ids, shape (k,)."""
        return self.ids[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def take(self, index: np.ndarray) -> BlockHashes:
        """The requests ``index`` (a permutation or a subset, in that order)."""
        index = np.asarray(index, dtype=np.int64)
        starts = self.offsets[:-1][index]
        lengths = np.diff(self.offsets)[index]
        offsets = np.zeros(index.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        pos = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1] - starts, lengths)
        return BlockHashes(self.ids[pos], offsets, self.block_tokens)


def block_hashes_from_lists(lists: list[list[int]], block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> BlockHashes:
    """Pack one list of ids per request into a :class:`BlockHashes`."""
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    flat = np.fromiter((h for x in lists for h in x), dtype=np.int64, count=int(offsets[-1]))
    return BlockHashes(flat, offsets, block_tokens)


def concat_block_hashes(parts: list[BlockHashes]) -> BlockHashes:
    """Requests of several traces one after the other; each trace's ids are shifted past the previous traces'
    (ids of different traces never match).

    Raises:
        InputError: the traces use different block sizes."""
    sizes = {p.block_tokens for p in parts}
    if len(sizes) > 1:
        raise InputError(f"traces use different prefix block sizes {sorted(sizes)}", fix="mix traces of one format")
    ids, offsets, shift, base = [], [np.zeros(1, dtype=np.int64)], 0, 0
    for p in parts:
        ids.append(p.ids - (int(p.ids.min()) if p.ids.size else 0) + shift)
        offsets.append(p.offsets[1:] + base)
        shift = int(ids[-1].max()) + 1 if p.ids.size else shift
        base += int(p.offsets[-1])
    return BlockHashes(np.concatenate(ids), np.concatenate(offsets), parts[0].block_tokens)


def declared_reuse(
    prompt_tokens: np.ndarray,
    session_share: float,
    system_prompt_tokens: int,
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    seed: int = 0,
) -> BlockHashes:
    """Block ids for a trace without them, from a declared reuse model.

    Every request starts with the shared system prompt (``system_prompt_tokens``: its full blocks have the same
    ids in every request). With probability ``session_share`` (drawn from ``seed``) a request continues one of
    the 8 most recent sessions (drawn uniformly): its prompt repeats that session's latest prompt, as much of it
    as its own length holds, before new text; otherwise it opens a new session. New text gets fresh ids.

    Args:
        prompt_tokens: shape (n,), prompts in arrival order.
        session_share: in [0, 1]. system_prompt_tokens: >= 0. block_tokens: > 0.

    Raises:
        InputError: a share outside [0, 1] or a negative length.
    """
    if not 0.0 <= session_share <= 1.0:
        raise InputError(f"reuse.session_share must be in [0, 1], got {session_share}", fix="e.g. 0.5")
    if system_prompt_tokens < 0 or block_tokens <= 0:
        raise InputError(f"reuse.system_prompt_tokens must be >= 0, got {system_prompt_tokens}", fix="e.g. 1024")
    rng = np.random.default_rng(seed)
    cont = rng.random(prompt_tokens.size) < session_share
    pick = rng.integers(0, 8, prompt_tokens.size)
    n_sys = system_prompt_tokens // block_tokens
    next_id = n_sys
    heads: list[list[int]] = []  # per open session: the ids of its latest prompt
    lists: list[list[int]] = []
    for i, s in enumerate(prompt_tokens.tolist()):
        k = -(-int(s) // block_tokens)
        if cont[i] and heads:
            j = len(heads) - 1 - int(pick[i]) % len(heads)
            base = heads[j][:k]
            del heads[j]
        else:
            base = list(range(min(n_sys, k)))
        ids = base + list(range(next_id, next_id + k - len(base)))
        next_id += k - len(base)
        heads.append(ids)
        if len(heads) > 8:
            del heads[0]
        lists.append(ids)
    return block_hashes_from_lists(lists, block_tokens)


class BlockCache:
    """An LRU cache of prefix blocks (module docstring); counts hits, misses and evictions in blocks."""

    __slots__ = ("blocks", "hits", "misses", "evictions")

    def __init__(self) -> None:
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def match(self, ids: np.ndarray, full_blocks: int) -> int:
        """How many of the first ``full_blocks`` ids are cached in an unbroken run from the start (no change)."""
        blocks = self.blocks
        m = 0
        for h in ids[:full_blocks].tolist():
            if h not in blocks:
                break
            m += 1
        return m

    def use(self, ids: np.ndarray, full_blocks: int, matched: int) -> None:
        """Record a lookup that reused ``matched`` of ``full_blocks`` blocks, and make the matched blocks the most
        recent (last block first, so the prefix stays the most recent)."""
        self.hits += matched
        self.misses += full_blocks - matched
        blocks = self.blocks
        for h in reversed(ids[:matched].tolist()):
            blocks.move_to_end(h)

    def insert(self, ids: np.ndarray, full_blocks: int, capacity_blocks: int) -> None:
        """Cache a computed prompt's full blocks (most recent, last block first), then evict to the capacity."""
        blocks = self.blocks
        for h in reversed(ids[:full_blocks].tolist()):
            blocks[h] = None
            blocks.move_to_end(h)
        self.trim(capacity_blocks)

    def trim(self, capacity_blocks: int) -> None:
        """Evict least recently used blocks until at most ``capacity_blocks`` remain."""
        blocks = self.blocks
        while len(blocks) > max(capacity_blocks, 0):
            blocks.popitem(last=False)
            self.evictions += 1


def reusable_blocks(prompt_tokens: int, block_tokens: int, n_ids: int) -> int:
    """Blocks of a prompt that may be cached and reused: full blocks, leaving at least the last prompt token to
    compute (``(prompt − 1) // block_tokens``), and no more than the request has ids for."""
    return min((prompt_tokens - 1) // block_tokens, n_ids)


def hit_tokens_single_cache(hashes: BlockHashes, prompt_tokens: np.ndarray, capacity_blocks: int) -> np.ndarray:
    """Shape (n,): tokens each request reuses when the whole stream, in order, passes one :class:`BlockCache` of
    ``capacity_blocks`` blocks (every prompt inserted once computed). The planner's hit-rate estimate."""
    cache = BlockCache()
    bt = hashes.block_tokens
    out = np.zeros(hashes.n, dtype=np.int64)
    for i, s in enumerate(prompt_tokens.tolist()):
        ids = hashes.of(i)
        full = reusable_blocks(int(s), bt, ids.size)
        m = cache.match(ids, full)
        cache.use(ids, full, m)
        out[i] = m * bt
        cache.insert(ids, full, capacity_blocks)
    return out


__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "BlockCache",
    "BlockHashes",
    "block_hashes_from_lists",
    "concat_block_hashes",
    "declared_reuse",
    "hit_tokens_single_cache",
    "reusable_blocks",
]
