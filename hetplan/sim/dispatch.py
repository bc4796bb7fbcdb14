"""Work-conserving dispatch inside a routing group: one shared queue per role, served by the group's instances.

A request the router sends to a group (:mod:`hetplan.sim.router`) waits in the group's :class:`Pool` of its role
(prefill or aggregated instances for a new prompt, decode instances for a transferred KV) until an instance of the
pool admits it. The pool's queue *is* the waiting queue of every member (one list), so the scheduler of whichever
instance builds an iteration (:func:`hetplan.sim.batching.start_iteration`) admits from it, in its own order, within
that instance's sequence slots, token budget and KV room: :func:`queue_in_pool` queues a request and the engine then
starts every idle member, and a busy member with free slots takes it at its next iteration boundary, as a vLLM
engine admits new requests between steps. No request waits while an instance of its pool is idle and could admit
it: this is the M/G/k queue the planner's Erlang C assumes. Binding each request to one instance on arrival (what
the simulator did before) made mean waits 1.2–2.3x Erlang C's on k aggregated instances.

A preempted sequence re-enters its pool's queue; one whose KV the scheduler kept on a host tier (CASCADE) is
pinned to the instance that holds it (``Simulator.home``): other members pass over it. The scheduler's key of a
pooled request is computed with the pool's first instance: a pool's instances are of one GPU type and TP, so the
key hooks give the same value for each of them.

Source: a shared queue per role, as vllm-router and llm-d's endpoint picker send a request to an engine that can
take it; hetplan's own reconstruction.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from hetplan.sim.instance import Instance, Pool

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator


def queue_in_pool(sim: Simulator, pool: Pool, rid: int) -> None:
    """Queue ``rid`` in ``pool`` at the scheduler's key (the engine then starts the pool's idle instances)."""
    k = sim.scheduler.key(sim, pool.members[0], rid)
    sim.key[rid] = k
    bisect.insort(pool.queue, (k, rid))
    need = sim.need[rid]
    if need:
        pool.qtok += need
        pool.qn += 1


def make_pools(
    insts: list[Instance], groups_members: list[tuple[tuple[int, ...], tuple[int, ...]]]
) -> list[tuple[Pool, Pool]]:
    """One ``(prefill pool, decode pool)`` per group from its ``(prefill, decode)`` instance indices (an aggregated
    group has one pool, used for both); each instance's ``pool`` is set to the pool it pulls from."""
    pools: list[tuple[Pool, Pool]] = []  # (the decode pool of an aggregated group is its prefill pool)
    for pre, dec in groups_members:
        p = Pool([insts[i] for i in pre])
        d = p if tuple(pre) == tuple(dec) else Pool([insts[i] for i in dec])
        for pool in (p, d):
            for inst in pool.members:
                inst.pool = pool
                inst.waiting = pool.queue  # one list: the pool's queue is every member's waiting queue
        pools.append((p, d))
    return pools


__all__ = ["make_pools", "queue_in_pool"]
