"""What happens when a request arrives at the simulator (:class:`hetplan.sim.engine.Simulator`), before it
waits in a pool (:mod:`hetplan.sim.dispatch`):

- the over-context rule is the engine's (:mod:`hetplan.workload.context`, shared with the planner): a prompt longer
  than the model's context window (``max_position_embeddings``, or the settings' ``max_model_len_tokens`` when
  smaller) is refused on arrival (``over_context``, apart
  from KV drops), any other output is cut at the window (``truncated``); the run stops ``drain_s`` after the last
  arrival (``cut_off``), requests still in flight then are unfinished;
- routing sees the prompt only (:mod:`hetplan.sim.router`): a prompt that does not fit the chosen group's KV cache
  goes to the roomiest group that holds it (dropped when none does), and an output that would outgrow the KV
  cache of its instance alone is cut there, as vLLM stops a sequence at ``max_model_len`` (which its start-up
  check keeps within the KV cache); the counter ``cut_at_kv_capacity`` counts them (present only when nonzero);
- under the ``prefix`` router a request is also bound to the prefill instance of its group that holds its prefix
  (:func:`pin_prefix`).

Source: engine behaviour after vLLM (context window, ``max_model_len``) and llm-d's endpoint picker (prefix
binding); hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator


def arrive(sim: Simulator, rid: int, now: float) -> None:
    """A request arrives at ``now``: refused over the context window, else routed to a group (the roomiest that holds
    its prompt when the router's does not), its output cut at the group's KV room, pinned to the instance holding
    its prefix under the prefix router, and queued in the group's prefill pool."""
    if sim.refused[rid]:  # the engine refuses prompts longer than its context window
        sim.dropped[rid] = True
        sim.over_context[rid] = True
        sim.client_next(now)
        return
    prompt = sim.prompt[rid]
    locality = sim.prefix is not None and sim.cfg.router == "prefix"
    if locality:  # the prompt's cached blocks (hetplan.sim.prefix)
        assert sim.prefix is not None
        gi = sim.router.pick_prefix(prompt, cached_blocks(sim, rid, prompt), (prompt - 1) // sim.prefix.bt)
    else:
        gi = sim.router.pick(prompt)  # from the prompt length only: no router knows the output length
    if prompt + 1 > sim.group_fit[gi]:  # the prompt does not fit this group's KV: the roomiest that holds it
        fits = [k for k, cap in enumerate(sim.group_fit) if cap >= prompt + 1]
        if not fits:
            sim.dropped[rid] = True  # fits no instance: counted as a miss
            sim.client_next(now)
            return
        gi = max(fits, key=lambda k: (sim.group_fit[k], -k))
    room = sim.group_fit[gi] - prompt
    if sim.out[rid] > room:  # the engine stops a sequence that fills its KV alone (vLLM's max_model_len)
        sim.out[rid] = room
        sim.counters["cut_at_kv_capacity"] = sim.counters.get("cut_at_kv_capacity", 0.0) + 1
    sim.grp[rid] = gi
    sim.router.outstanding[gi] += 1
    sim.need[rid] = sim.prompt[rid]
    if locality:  # bound to the instance of the group (as finally chosen) that holds its prefix, if one does
        sim.pin[rid] = pin_prefix(sim, gi, rid, prompt)
    sim.dispatch(sim.pools[gi][0], rid, now)


def cached_blocks(sim: Simulator, rid: int, prompt: int) -> list[int]:
    """Per group: the most leading blocks of ``rid``'s prompt cached on one of its prefill instances."""
    assert sim.prefix is not None
    return [sim.prefix.cached_blocks(rid, prompt, list(g.prefill)) for g in sim.dep.groups]


def pin_prefix(sim: Simulator, gi: int, rid: int, prompt: int) -> int:
    """The prefix router inside group ``gi``: the prefill instance with the best score ``cached share − load
    share`` (load: its running and prefilling requests plus those bound to it and still waiting, over the
    pool's most), when that instance holds part of the prompt's prefix; -1 (the pool's shared queue) when none
    does. A request that groups could route anywhere is so bound to the cache that holds its prefix, as llm-d's
    endpoint picker binds it to a pod. (The load was ``Instance.outstanding``, which counts only preempted
    sequences in and every finish out: it sent arrivals to the instance that had finished most, and a run
    with a shared system prompt queued nearly everything on one instance.)"""
    assert sim.prefix is not None
    members = sim.pools[gi][0].members
    if len(members) < 2:
        return -1
    whole = (prompt - 1) // sim.prefix.bt
    cached = [sim.prefix.cached_blocks(rid, prompt, [m.idx]) for m in members]
    if not max(cached):
        return -1
    load = [len(m.running) + len(m.prefilling) + sim.pinned_n[m.idx] for m in members]
    top = max(max(load), 1)
    score = [c / max(whole, 1) - x / top for c, x in zip(cached, load, strict=True)]
    best = max(range(len(members)), key=lambda k: (score[k], -k))
    if not cached[best]:
        return -1
    sim.pinned_n[members[best].idx] += 1
    return members[best].idx
