"""One engine iteration of an instance: batch formation, admission and preemption.

:func:`start_iteration` builds the next iteration of an instance (vLLM-like continuous batching): the running decode
sequences (one token each), then chunks of prompts already being prefilled, then waiting requests in the scheduler's
order (:meth:`~hetplan.sim.scheduler.Scheduler.admit`), within ``max_num_batched_tokens`` (minus the decode tokens
when chunked prefill is on), ``max_num_seqs`` and the KV cache. When the running sequences would outgrow the KV
cache, the scheduler's victim is preempted first (:func:`preempt`). A waiting request whose KV is present
(transferred, restored) joins decoding; one whose KV sits on a host tier is restored when the scheduler's
``restore_ok`` says so (CASCADE: the transfer fits its budget), else recomputed; a prompt whose prefix blocks sit on
the host tier (:mod:`hetplan.sim.prefix`) takes its slot and KV and waits for their restore before its prefill
continues; a prompt longer than the token cap runs alone without chunked prefill. An engine that prefills in steps
of its own (SGLang; :attr:`~hetplan.sim.step_cost.StepCost.separate_prefill`) runs an iteration with prompt pieces
as a prefill-only step, within the whole token budget, while its decoding sequences wait (no token for them). The
waiting queue is the instance's pool's, shared with the other instances of its role in its group
(:mod:`hetplan.sim.dispatch`); a request whose KV sits on another instance's host tier is passed over. The engine
(:mod:`hetplan.sim.engine`) calls these on arrivals and iteration ends; exactly one iteration of an instance is in
flight at a time (:func:`start_iteration`).

Source: engine behaviour after vLLM's scheduler; the details are hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetplan.sim.instance import PREFIX_RESTORED, RESTORED, STEP_END, Instance
from hetplan.units import GIB

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator

_INF = float("inf")


def preempt(sim: Simulator, inst: Instance, now: float) -> None:
    """Preempt the scheduler's victim among ``inst``'s running sequences; it re-enters the waiting queue."""
    run = inst.running
    victim = sim.scheduler.victim(sim, inst)
    del run[victim]
    g = sim.gen[victim] + (inst.step_idx - sim.join[victim])
    ctx = sim.prompt[victim] + g
    inst.ctx_sum -= ctx
    inst.kv_used -= ctx
    inst.outstanding -= 1
    sim.gen[victim] = g
    if inst.step_idx > sim.join[victim]:  # it produced a token here: the last one ended the last iteration
        sim.last[victim] = inst.last_end
    sim.counters["preemptions"] += 1
    sim.preempted.append(victim)
    sim.scheduler.on_preempt(sim, inst, victim, ctx)
    sim.need[victim] = ctx
    sim.done_pref[victim] = 0
    sim.home[victim] = inst.idx
    sim.pin[victim] = -1  # a recompute may run on any instance of the pool
    sim.enqueue(inst, victim)  # back to the pool's queue; starts no iteration here (one is being built)


def start_iteration(sim: Simulator, inst: Instance, now: float) -> None:
    """Build ``inst``'s next iteration and schedule its end; an instance with nothing to run goes idle.

    One iteration is in flight per instance, always: a busy instance returns at once (it builds its next
    iteration when the current one ends), and nothing called from here starts another one (a preempted victim
    only re-enters the waiting queue; a restore that ends mid-iteration joins at the next one, ``inst.ready``)."""
    if inst.busy:
        return
    inst.busy = True  # while it is being built too: nothing called from here re-enters it
    run = inst.running
    if inst.ready:
        for rid in inst.ready:  # KV restored during the last iteration (reserved at admission)
            sim.start_decoding(inst, rid, now)
        inst.ready = []
    if inst.role != "prefill" and run and inst.kv_used + len(run) > inst.cap:
        while run and inst.kv_used + len(run) > inst.cap:
            preempt(sim, inst, now)
        for peer in inst.pool.members:  # work conserving: an idle instance of the pool may take a victim
            if peer is not inst and not peer.busy:
                start_iteration(sim, peer, now)
    n_dec = len(run)
    chunked = sim.cfg.chunked_prefill
    # an engine that prefills in steps of its own (SGLang) gives a prompt step the whole token budget
    separate = inst.cost.separate_prefill
    budget = inst.tok_cap - (n_dec if chunked and not separate else 0)
    slots = inst.seqs_cap - n_dec - len(inst.prefilling)
    pieces: list[tuple[int, int]] = []
    tokens = 0.0
    sq = 0.0
    # partly prefilled prompts continue first (not those whose prefix is still being restored)
    restoring = sim.restoring
    for rid in inst.prefilling:
        if budget <= 0:
            break
        if restoring and rid in restoring:
            continue
        left = sim.need[rid] - sim.done_pref[rid]
        take = left if left <= budget else budget
        k = sim.done_pref[rid]
        pieces.append((rid, take))
        tokens += take
        sq += (k + take) * (k + take) - k * k
        budget -= take
    waiting = inst.waiting
    if waiting and (slots > 0):
        total = inst.tok_cap - (n_dec if chunked and not separate else 0)
        chosen = _admit(sim, inst, now, budget, slots, n_dec, pieces, total)
        for rid, take in pieces[len(pieces) - chosen :]:
            k = sim.done_pref[rid]
            tokens += take
            sq += (k + take) * (k + take) - k * k
    n_dec = len(run)
    if not pieces and not n_dec:
        inst.busy = False
        return
    if separate and pieces:
        n_dec = 0  # a prefill step of its own: the running sequences wait for the next decode step
    dur = inst.cost.mixed_s(tokens, sq, len(pieces), n_dec, inst.ctx_sum)
    inst.pieces = pieces
    inst.n_dec = n_dec
    if n_dec:  # sequences that joined since the last decode step produce their first decode token in this one
        inst.new, inst.joiners = inst.joiners, []
    else:
        inst.new = []
    inst.step_start = now
    inst.busy_s += dur
    sim.push(now + dur, STEP_END, inst.idx)


def _admit(
    sim: Simulator,
    inst: Instance,
    now: float,
    budget: float,
    slots: int,
    n_dec: int,
    pieces: list[tuple[int, int]],
    total_budget: float,
) -> int:
    """Move waiting requests into this iteration, in the scheduler's choice (``take`` admits one); returns
    how many prefill pieces were appended."""
    waiting = inst.waiting
    chunked = sim.cfg.chunked_prefill
    sched = sim.scheduler
    full = inst.tok_cap
    taken: list[int] = []  # indices into waiting
    restoring: list[int] = []  # admitted with a prefix restore from the host tier (no piece this iteration)
    before = len(pieces)
    state: list[float] = [budget, slots]  # tokens left, slots left

    def take(i: int, limit_tokens: float, limit_slots: float) -> bool:
        """Try to admit waiting[i] within the limits; False stops this pass."""
        rid = waiting[i][1]
        need = sim.need[rid]
        if limit_slots <= 0:
            return False
        if sim.offload[rid] and sim.home[rid] != inst.idx:  # its KV is on another instance's host tier
            return True
        if sim.pin[rid] >= 0 and sim.pin[rid] != inst.idx:  # the prefix router bound it to another instance
            return True
        if need == 0:  # KV present (transferred or restored): joins decoding now
            ctx = sim.prompt[rid] + sim.gen[rid]
            if inst.kv_used + ctx + 1 > inst.cap:
                return False
            sim.start_decoding(inst, rid, now)
            inst.kv_used += ctx
            state[1] -= 1
            taken.append(i)
            return True
        if sim.offload[rid] and sim.first[rid] < _INF:  # KV kept on a host tier by the scheduler
            restore = sched.restore_s(sim, rid)
            if inst.kv_used + need + 1 > inst.cap:
                return False
            if sched.restore_ok(sim, inst, rid, restore, now):  # the policy's rule: transfer back, else recompute
                release_host(sim, inst, rid)
                inst.kv_used += need
                inst.pool.qtok -= need
                inst.pool.qn -= 1
                sim.need[rid] = 0
                sim.counters["restores"] += 1
                sim.push(now + restore, RESTORED, inst.idx, rid)
                state[1] -= 1
                taken.append(i)
                return True
            release_host(sim, inst, rid)
        if limit_tokens <= 0:
            return False
        # prefix caching (hetplan.sim.prefix): the prompt's leading blocks cached here are not computed again
        prefix = sim.prefix
        hit, restore = (
            prefix.match(inst, rid, sim.prompt[rid]) if prefix is not None and inst.role != "decode" else (0, 0.0)
        )
        left = need - hit
        if restore > 0.0:  # part of the prefix sits on the host tier: restored first, then the rest is prefilled
            assert prefix is not None
            if inst.kv_used + need + 1 > inst.cap:
                return False
            prefix.use(inst, rid, sim.prompt[rid], hit, restore)
            sim.done_pref[rid] = hit
            inst.pool.qtok -= hit
            if sim.record and sim.first[rid] == _INF and sim.scheduled_s[rid] != sim.scheduled_s[rid]:
                sim.scheduled_s[rid] = now
                sim.estimate_s[rid] = sched.estimate_s(sim, inst, rid, now)
            inst.kv_used += need
            sim.restoring.add(rid)  # in ``prefilling`` (its slot taken), computed from the restore's end on
            sim.push(now + restore, PREFIX_RESTORED, inst.idx, rid)
            if sim.pin[rid] >= 0:  # admitted where the prefix router bound it
                sim.pinned_n[sim.pin[rid]] -= 1
            restoring.append(rid)
            state[1] -= 1
            taken.append(i)
            return True
        if left <= limit_tokens:
            grant = left
        elif chunked and limit_tokens >= 1:
            grant = int(limit_tokens)
        elif state[0] == full and not pieces and n_dec == 0:
            grant = left  # an over-long prompt runs alone
        else:
            return False
        if inst.kv_used + need + 1 > inst.cap:
            return False
        if prefix is not None and inst.role != "decode":
            prefix.use(inst, rid, sim.prompt[rid], hit)
            sim.done_pref[rid] = hit  # the prefill continues after the cached prefix
            inst.pool.qtok -= hit
        if sim.record and sim.first[rid] == _INF and sim.scheduled_s[rid] != sim.scheduled_s[rid]:
            sim.scheduled_s[rid] = now
            sim.estimate_s[rid] = sched.estimate_s(sim, inst, rid, now)
        inst.kv_used += need
        if sim.pin[rid] >= 0:  # admitted where the prefix router bound it
            sim.pinned_n[sim.pin[rid]] -= 1
        pieces.append((rid, grant))
        state[0] -= grant
        state[1] -= 1
        taken.append(i)
        return True

    sched.admit(sim, inst, now, take, state, pieces, before, total_budget)
    if taken:
        taken.sort()
        if taken[-1] == len(taken) - 1:  # the usual case, a prefix: one move of the rest (a queue of a million
            del waiting[: len(taken)]  # waiting requests moved once per admitted request took minutes)
        else:
            for i in reversed(taken):
                del waiting[i]
    appended = len(pieces) - before
    for rid, _ in pieces[before:]:
        inst.prefilling.append(rid)
    inst.prefilling.extend(restoring)
    return appended


def release_host(sim: Simulator, inst: Instance, rid: int) -> None:
    """Forget ``rid``'s host-tier copy of its KV (restored or given up for a recompute)."""
    if sim.offload[rid] == 1:
        inst.host_gib = max(0.0, inst.host_gib - sim.need[rid] * sim.kv_bytes_per_token / GIB)
    sim.offload[rid] = 0


__all__ = ["preempt", "release_host", "start_iteration"]
