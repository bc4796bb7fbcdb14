"""Discrete-event simulator of a deployment serving a request stream.

Events sit on one heap ordered by ``(time, sequence number)``: equal times resolve in the order the events were
created, so a run is deterministic; the seed only drives the ``random`` router. There is one event per engine
iteration per instance (never one per token), one per KV transfer and one per KV restore; arrivals are read from
the sorted stream.

Instances (vLLM-like engines, continuous batching):

- every iteration takes the running decode sequences (one token each) plus prefill work chosen by the policy
  within ``max_num_batched_tokens`` (minus the decode tokens when chunked prefill is on) and ``max_num_seqs``;
  without chunked prefill a prompt is prefilled whole (a prompt longer than the token cap runs alone);
- KV capacity comes from the performance model (``InstanceModel.kv_capacity_tokens``); accounting is per token
  (vLLM's 16-token blocks leave at most one partly filled block per sequence, ignored here). A prompt's KV is
  reserved when its prefill starts; a decoding sequence grows by one token per iteration. When the next iteration
  would not fit, the policy's victim is preempted by recompute (its prompt and generated tokens are prefilled
  again later; CASCADE may restore the KV from a host tier instead, see ``policies``);
- a prompt longer than the model's context window (``max_position_embeddings``) is dropped on arrival, as vLLM
  refuses it (counted as ``over_context``, apart from KV drops); the run stops ``drain_s`` after the last
  arrival (``cut_off``), requests still in flight then are unfinished;
- a ``prefill`` instance hands each finished prompt to a decode instance of its combo: the KV transfer queues on
  the prefill instance's NIC and takes ``kv_transfer_s`` of the perf model; the first token counts as delivered
  when the transfer ends (TTFT includes it, DESIGN §1). A ``decode`` instance admits transferred sequences;
  an ``aggregated`` instance does both in mixed iterations.

A decoding sequence's finish is found by step counting: joining at iteration k with r tokens left, it finishes
at iteration k + r, so an iteration costs O(1) plus O(1) per sequence that joins, leaves or finishes.

Routing across combos is in :mod:`hetplan.sim.router`.

Source: event/entity/scheduler split after Vidur (Agrawal et al., MLSys 2024); engine behaviour after vLLM's
scheduler; the step-counting design and the mixed-iteration pricing are hetplan's own reconstruction.
"""

from __future__ import annotations

import bisect
import heapq
import math
from array import array

import numpy as np

from hetplan.sim.deployment import Deployment, Group, StepCost
from hetplan.sim.policies import Policy, cascade_estimate_s
from hetplan.sim.result import SimResult
from hetplan.sim.router import ROUTERS, Router, SimConfig
from hetplan.sim.trace import RequestStream
from hetplan.units import GB, GIB

_STEP, _KV, _RESTORE = 1, 2, 3
_INF = float("inf")


class _Inst:
    __slots__ = (
        "idx", "role", "cost", "cap", "seqs_cap", "tok_cap", "group", "waiting", "prefilling", "running",
        "ctx_sum", "kv_used", "step_idx", "finish_at", "busy", "busy_s", "pieces", "n_dec", "new", "joiners",
        "nic_free", "step_est_s", "qtok", "qn", "outstanding", "last_end", "host_gib", "step_start", "t2_credit",
    )  # fmt: skip

    def __init__(self, idx: int, role: str, cost: StepCost, seqs: int, tokens: int, group: int) -> None:
        self.idx, self.role, self.cost, self.group = idx, role, cost, group
        self.cap = cost.kv_capacity_tokens
        self.seqs_cap, self.tok_cap = seqs, tokens
        self.waiting: list[tuple[float, int]] = []
        self.prefilling: list[int] = []
        self.running: dict[int, None] = {}
        self.ctx_sum = 0.0
        self.kv_used = 0.0
        self.step_idx = 0
        self.finish_at: dict[int, list[int]] = {}
        self.busy = False
        self.busy_s = 0.0
        self.pieces: list[tuple[int, int]] = []
        self.n_dec = 0
        self.new: list[int] = []
        self.joiners: list[int] = []
        self.nic_free = 0.0
        # time per remaining token in CASCADE's decode budgets: a step at half the batch cap, 1k-token contexts
        half = max(1, seqs // 2)
        self.step_est_s = cost.decode_s(half, half * 1024.0)
        self.qtok = 0.0
        self.qn = 0
        self.outstanding = 0
        self.last_end = 0.0
        self.host_gib = 0.0
        self.step_start = 0.0
        self.t2_credit = 0.0


class Simulator:
    """One run of ``stream`` through ``dep`` under ``policy`` (see the module docstring).

    Raises:
        InputError: bad router or settings.
    """

    def __init__(
        self,
        dep: Deployment,
        stream: RequestStream,
        policy: Policy,
        config: SimConfig | None = None,
        record_estimates: bool = False,
    ):
        self.dep, self.stream, self.policy = dep, stream, policy
        self.cfg = config or SimConfig()
        n = stream.n
        limit = int(dep.arch.spec.max_position_embeddings)
        served = stream.prompt_tokens <= limit  # longer prompts are dropped on arrival: keep them out of the tables
        max_ctx = int((stream.prompt_tokens + stream.output_tokens)[served].max()) if served.any() else 1
        costs: dict[tuple[str, int, int], StepCost] = {}
        self.insts: list[_Inst] = []
        for i, spec in enumerate(dep.instances):
            key = (spec.gpu, spec.tp, spec.max_num_seqs)
            if key not in costs:
                costs[key] = StepCost(dep.model(spec.gpu, spec.tp), spec.max_num_seqs, max(max_ctx, 1024))
            self.insts.append(
                _Inst(i, spec.role, costs[key], spec.max_num_seqs, spec.max_num_batched_tokens, spec.group)
            )
        self.kv_coeff = [dep.kv_transfer_coeffs(g) if not dep.aggregated else (0.0, 0.0) for g in dep.groups]
        self.kv_bytes_per_token = float(dep.arch.kv_bytes_per_token)
        # per-request state (python lists: faster than numpy for scalar access)
        self.arr = stream.arrival_s.tolist()
        self.prompt = stream.prompt_tokens.tolist()
        self.out = stream.output_tokens.tolist()
        self.ttft_slo = stream.ttft_slo_s.tolist()
        self.tpot_slo = stream.tpot_slo_s.tolist()
        self.need = [0] * n  # tokens to prefill in the current residency (0: KV is present)
        self.done_pref = [0] * n
        self.gen = [0] * n  # tokens generated (at join time while running)
        self.join = [0] * n
        self.where = [-1] * n
        self.grp = [-1] * n
        self.key = [0.0] * n
        self.offload = [0] * n  # CASCADE: 0 none, 1 DRAM, 2 SSD
        self.first = [_INF] * n
        self.last = [0.0] * n
        self.done = [_INF] * n
        self.dropped = [False] * n
        self.over_context = [False] * n
        self.context_tokens = int(dep.arch.spec.max_position_embeddings)
        self.cut_off = False
        self.record = record_estimates
        # when recording: CASCADE's unscaled T̂ and the time each request's prefill first started
        self.estimate_s = [float("nan")] * n
        self.scheduled_s = [float("nan")] * n
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.step_s = array("d")
        self.step_w = array("l")
        self.entry_gap = array("d")
        names = ("events", "iterations", "preemptions", "restores", "recomputes", "tier2_tokens", "saturated_tokens")
        self.counters: dict[str, float] = dict.fromkeys(names, 0.0)
        self.preempted: list[int] = []
        self.router = Router(dep.groups, dep.aggregated, self.cfg.router, self.cfg.seed)
        cas = policy.cascade
        self.q2 = cas.q2 if cas else 0.0
        self.kappa = cas.kappa if cas else 1.0
        self.group_fit = [
            min(min(self.insts[i].cap for i in g.prefill), min(self.insts[i].cap for i in g.decode)) for g in dep.groups
        ]

    # -- helpers ---------------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, a: int, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def _t_hat_s(self, inst: _Inst, kappa: float | None = None) -> float:
        """CASCADE's T̂ for a prompt joining ``inst``'s next batch now (seconds): T(current load) is the model's
        latency of the batch the queued prompt tokens would form (at most ``max_num_batched_tokens``), T(max
        load) that of a full batch of prompts of the queue's mean length. The wait so far is not in T̂: the
        budget subtracts it separately."""
        c = inst.cost
        full = float(inst.tok_cap)
        mean = inst.qtok / inst.qn if inst.qn > 0 and inst.qtok > 0 else 1024.0
        mean = min(max(mean, 1.0), full)
        cur = min(max(inst.qtok, mean), full)
        t_cur = c.prefill_s(cur, cur * mean, max(1, int(cur / mean + 0.5)))
        t_max = c.prefill_s(full, full * mean, max(1, int(full / mean + 0.5)))
        return cascade_estimate_s(t_cur, t_max, self.kappa if kappa is None else kappa)

    def _decode_key(self, inst: _Inst, rid: int, generated: int) -> float:
        """CASCADE's latest useful start of a sequence that has its first token: its E2E deadline
        ``first + TPOT SLO·(n−1)`` minus the remaining tokens at the instance's estimated step time."""
        left = self.out[rid] - generated
        return self.first[rid] + self.tpot_slo[rid] * (self.out[rid] - 1) - left * inst.step_est_s

    def _enqueue(self, inst: _Inst, rid: int, now: float) -> None:
        pol = self.policy
        if self.first[rid] < _INF and pol.kind == "cascade":
            k = self._decode_key(inst, rid, self.gen[rid])
        else:
            k = pol.key(self.arr[rid], self.prompt[rid], self.ttft_slo[rid])
        self.key[rid] = k
        bisect.insort(inst.waiting, (k, rid))
        self.where[rid] = inst.idx
        inst.outstanding += 1
        if self.need[rid]:
            inst.qtok += self.need[rid]
            inst.qn += 1
        if not inst.busy:
            self._start(inst, now)

    # -- routing ---------------------------------------------------------------------------------------
    def _arrive(self, rid: int, now: float) -> None:
        if self.prompt[rid] > self.context_tokens:  # the engine refuses prompts longer than its context window
            self.dropped[rid] = True
            self.over_context[rid] = True
            return
        gi = self.router.pick(self.prompt[rid], self.out[rid])
        size = self.prompt[rid] + self.out[rid]
        if size > self.group_fit[gi]:  # too long for this group's KV cache: the roomiest group that fits, if any
            fits = [k for k, cap in enumerate(self.group_fit) if cap >= size]
            if not fits:
                self.dropped[rid] = True  # fits no instance: counted as a miss
                return
            gi = max(fits, key=lambda k: (self.group_fit[k], -k))
        g: Group = self.dep.groups[gi]
        self.grp[rid] = gi
        self.router.outstanding[gi] += 1
        inst = min((self.insts[i] for i in g.prefill), key=lambda x: (x.qtok, x.outstanding, x.idx))
        self.need[rid] = self.prompt[rid]
        self._enqueue(inst, rid, now)

    # -- one iteration ---------------------------------------------------------------------------------
    def _preempt(self, inst: _Inst, now: float) -> None:
        pol, run = self.policy, inst.running
        if pol.kind == "cascade":
            step = inst.step_idx
            victim = max(run, key=lambda r: (self._decode_key(inst, r, self.gen[r] + step - self.join[r]), r))
        else:
            victim = max(run, key=lambda r: (pol.key(self.arr[r], self.prompt[r], self.ttft_slo[r]), r))
        del run[victim]
        g = self.gen[victim] + (inst.step_idx - self.join[victim])
        ctx = self.prompt[victim] + g
        inst.ctx_sum -= ctx
        inst.kv_used -= ctx
        inst.outstanding -= 1
        self.gen[victim] = g
        if inst.step_idx > self.join[victim]:  # it produced a token here: the last one ended the last iteration
            self.last[victim] = inst.last_end
        self.counters["preemptions"] += 1
        self.preempted.append(victim)
        if pol.cascade is not None:
            gib = ctx * self.kv_bytes_per_token / GIB
            self.offload[victim] = 1 if inst.host_gib + gib <= pol.cascade.dram_gib else 2
            if self.offload[victim] == 1:
                inst.host_gib += gib
        self.need[victim] = ctx
        self.done_pref[victim] = 0
        self._enqueue(inst, victim, now)

    def _restore_s(self, rid: int) -> float:
        cas = self.policy.cascade
        assert cas is not None
        bw = (cas.dram_gb_per_s if self.offload[rid] == 1 else cas.ssd_gb_per_s) * GB
        return self.need[rid] * self.kv_bytes_per_token / bw + cas.restore_latency_s

    def _start(self, inst: _Inst, now: float) -> None:
        run = inst.running
        if inst.role != "prefill":
            while run and inst.kv_used + len(run) > inst.cap:
                self._preempt(inst, now)
        n_dec = len(run)
        chunked = self.cfg.chunked_prefill
        budget = inst.tok_cap - (n_dec if chunked else 0)
        slots = inst.seqs_cap - n_dec - len(inst.prefilling)
        pieces: list[tuple[int, int]] = []
        tokens = 0.0
        sq = 0.0
        # partly prefilled prompts continue first
        for rid in inst.prefilling:
            if budget <= 0:
                break
            left = self.need[rid] - self.done_pref[rid]
            take = left if left <= budget else budget
            k = self.done_pref[rid]
            pieces.append((rid, take))
            tokens += take
            sq += (k + take) * (k + take) - k * k
            budget -= take
        waiting = inst.waiting
        if waiting and (slots > 0):
            total = inst.tok_cap - (n_dec if chunked else 0)
            chosen = self._admit(inst, now, budget, slots, n_dec, pieces, total)
            for rid, take in pieces[len(pieces) - chosen :]:
                k = self.done_pref[rid]
                tokens += take
                sq += (k + take) * (k + take) - k * k
        n_dec = len(run)
        if not pieces and not n_dec:
            inst.busy = False
            return
        dur = inst.cost.mixed_s(tokens, sq, len(pieces), n_dec, inst.ctx_sum)
        inst.pieces = pieces
        inst.n_dec = n_dec
        inst.new, inst.joiners = inst.joiners, []
        inst.busy = True
        inst.step_start = now
        inst.busy_s += dur
        self._push(now + dur, _STEP, inst.idx)

    def _admit(
        self, inst: _Inst, now: float, budget: float, slots: int, n_dec: int, pieces: list, total_budget: float
    ) -> int:
        """Move waiting requests into this iteration; returns how many prefill pieces were appended."""
        waiting = inst.waiting
        chunked = self.cfg.chunked_prefill
        cas = self.policy.cascade
        full = inst.tok_cap
        taken: list[int] = []  # indices into waiting
        before = len(pieces)
        state: list[float] = [budget, slots, 0.0]  # tokens left, slots left, tier-2 tokens

        def take(i: int, limit_tokens: float, limit_slots: float) -> bool:
            """Try to admit waiting[i] within the limits; False stops this pass."""
            rid = waiting[i][1]
            need = self.need[rid]
            if limit_slots <= 0:
                return False
            if need == 0:  # KV present (transferred or restored): joins decoding now
                ctx = self.prompt[rid] + self.gen[rid]
                if inst.kv_used + ctx + 1 > inst.cap:
                    return False
                self._join(inst, rid, now)
                inst.kv_used += ctx
                state[1] -= 1
                taken.append(i)
                return True
            if cas is not None and self.offload[rid] and self.first[rid] < _INF:
                restore = self._restore_s(rid)
                if inst.kv_used + need + 1 > inst.cap:
                    return False
                if restore <= self.key[rid] - now:  # fits the budget: transfer back instead of recompute
                    self._release_host(inst, rid)
                    inst.kv_used += need
                    inst.qtok -= need
                    inst.qn -= 1
                    self.need[rid] = 0
                    self.counters["restores"] += 1
                    self._push(now + restore, _RESTORE, inst.idx, rid)
                    state[1] -= 1
                    taken.append(i)
                    return True
                self._release_host(inst, rid)
            if limit_tokens <= 0:
                return False
            if need <= limit_tokens:
                grant = need
            elif chunked and limit_tokens >= 1:
                grant = int(limit_tokens)
            elif state[0] == full and not pieces and n_dec == 0:
                grant = need  # an over-long prompt runs alone
            else:
                return False
            if inst.kv_used + need + 1 > inst.cap:
                return False
            if self.record and self.first[rid] == _INF and self.scheduled_s[rid] != self.scheduled_s[rid]:
                self.scheduled_s[rid] = now
                self.estimate_s[rid] = self._t_hat_s(inst, 1.0)
            inst.kv_used += need
            pieces.append((rid, grant))
            state[0] -= grant
            state[1] -= 1
            taken.append(i)
            return True

        if cas is None:
            for i in range(len(waiting)):
                if not take(i, state[0], state[1]):
                    break
        else:
            thr = now + self._t_hat_s(inst)
            split = bisect.bisect_left(waiting, (thr, -1))
            key = self.key
            t2_cont = sum(g for rid, g in pieces[:before] if key[rid] < thr)  # Tier-2 prompts already started
            t2 = 0  # next Tier-2 entry (waiting[:split], least budget first)
            has_t2 = split > 0 or t2_cont > 0
            # Tier 2's reserved share: a credit of ceil(q2 x the iteration's token budget) per iteration, spent by
            # Tier-2 work (including chunks of prompts already started), so the long-run share is at least q2
            if self.q2 > 0 and has_t2:
                credit = min(inst.t2_credit + math.ceil(self.q2 * total_budget), float(full)) - t2_cont
                s_lim = max(1, int(self.q2 * state[1] + 0.5))
                used_s = 0.0
                while t2 < split and used_s < s_lim and credit >= 1:
                    t0 = state[0]
                    if not take(t2, min(credit, state[0]), state[1]):
                        break
                    t2 += 1
                    used_s += 1
                    credit -= t0 - state[0]
                    state[2] += t0 - state[0]
                inst.t2_credit = credit
            tier1_left = False
            for i in range(split, len(waiting)):
                if not take(i, state[0], state[1]):
                    tier1_left = True
                    break
            for i in range(t2, split):  # work conserving: Tier 2 takes what Tier 1 left
                t0 = state[0]
                if not take(i, state[0], state[1]):
                    break
                state[2] += t0 - state[0]
            if tier1_left and has_t2:
                self.counters["saturated_tokens"] += total_budget
                self.counters["tier2_tokens"] += state[2] + t2_cont
        if taken:
            for i in sorted(taken, reverse=True):
                del waiting[i]
        appended = len(pieces) - before
        for rid, _ in pieces[before:]:
            inst.prefilling.append(rid)
        return appended

    def _release_host(self, inst: _Inst, rid: int) -> None:
        if self.offload[rid] == 1:
            inst.host_gib = max(0.0, inst.host_gib - self.need[rid] * self.kv_bytes_per_token / GIB)
        self.offload[rid] = 0

    def _join(self, inst: _Inst, rid: int, now: float) -> None:
        """``rid`` (KV present, ``gen`` tokens so far) decodes from the next iteration on."""
        left = self.out[rid] - self.gen[rid]
        if left <= 0:
            self._finish(inst, rid, now)
            return
        inst.running[rid] = None
        inst.ctx_sum += self.prompt[rid] + self.gen[rid]
        self.join[rid] = inst.step_idx
        fin = inst.step_idx + left
        lst = inst.finish_at.get(fin)
        if lst is None:
            inst.finish_at[fin] = [rid]
        else:
            lst.append(rid)
        inst.joiners.append(rid)

    def _finish(self, inst: _Inst, rid: int, now: float) -> None:
        self.done[rid] = now
        self.last[rid] = now
        inst.outstanding -= 1
        self.router.outstanding[self.grp[rid]] -= 1

    def _step_end(self, inst: _Inst, now: float) -> None:
        inst.step_idx += 1
        inst.last_end = now
        self.counters["iterations"] += 1
        n_dec = inst.n_dec
        run = inst.running
        if n_dec:
            new = inst.new
            nw = 0
            for rid in new:
                if rid in run:
                    self.entry_gap.append(now - self.last[rid])
                    nw += 1
            self.step_s.append(now - inst.step_start)
            self.step_w.append(n_dec - nw)
            inst.ctx_sum += n_dec
            inst.kv_used += n_dec
            fin = inst.finish_at.pop(inst.step_idx, None)
            if fin:
                for rid in fin:
                    if rid in run and self.join[rid] + self.out[rid] - self.gen[rid] == inst.step_idx:
                        del run[rid]
                        ctx = self.prompt[rid] + self.out[rid]
                        inst.ctx_sum -= ctx
                        inst.kv_used -= ctx
                        self._finish(inst, rid, now)
        pieces = inst.pieces
        if pieces:
            keep: list[int] = []
            finished: set[int] = set()
            for rid, grant in pieces:
                self.done_pref[rid] += grant
                inst.qtok -= grant
                if self.done_pref[rid] >= self.need[rid]:
                    finished.add(rid)
            for rid in inst.prefilling:
                if rid not in finished:
                    keep.append(rid)
            inst.prefilling = keep
            for rid, _ in pieces:
                if rid in finished:
                    inst.qn -= 1
                    self._prefilled(inst, rid, now)
        inst.busy = False
        self._start(inst, now)

    def _prefilled(self, inst: _Inst, rid: int, now: float) -> None:
        need = self.need[rid]
        self.need[rid] = 0
        self.done_pref[rid] = 0
        if inst.role == "prefill":
            base, per = self.kv_coeff[self.grp[rid]]
            start = now if inst.nic_free < now else inst.nic_free
            end = start + base + per * self.prompt[rid]
            inst.nic_free = end
            self._push(end, _KV, inst.idx, rid)
            return
        # the prefill iteration produced the next token; the KV now holds prompt + generated tokens
        self.gen[rid] += 1
        inst.kv_used += 1
        if self.first[rid] == _INF:
            self.first[rid] = now
        else:  # a recompute produced the next token: the gap since the token before the preemption is an ITL
            self.entry_gap.append(now - self.last[rid])
            self.counters["recomputes"] += 1
        self.last[rid] = now
        if self.gen[rid] >= self.out[rid]:
            inst.kv_used -= need + 1
            self._finish(inst, rid, now)
            return
        self._join(inst, rid, now)

    def _kv_done(self, src: _Inst, rid: int, now: float) -> None:
        src.kv_used -= self.prompt[rid]
        src.outstanding -= 1
        self.gen[rid] = 1
        self.first[rid] = now
        self.last[rid] = now
        if self.out[rid] <= 1:
            self.done[rid] = now
            self.router.outstanding[self.grp[rid]] -= 1
        else:
            g = self.dep.groups[self.grp[rid]]
            dst = max(
                (self.insts[i] for i in g.decode),
                key=lambda x: (x.cap - x.kv_used - x.qtok, -x.outstanding, -x.idx),
            )
            self.need[rid] = 0
            self._enqueue(dst, rid, now)
        if not src.busy:
            self._start(src, now)

    # -- main loop -------------------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Replay the stream; returns the raw result (deterministic for equal inputs and seed)."""
        arr = self.arr
        n = len(arr)
        heap = self.heap
        horizon = (arr[-1] if n else 0.0) + self.cfg.drain_s
        i = 0
        events = 0
        now = 0.0
        while True:
            if i < n and (not heap or arr[i] <= heap[0][0]):
                now = arr[i]
                self._arrive(i, now)
                i += 1
                events += 1
                continue
            if not heap:
                break
            now, _, kind, a, b = heapq.heappop(heap)
            if now > horizon:
                self.cut_off = True
                break
            events += 1
            inst = self.insts[a]
            if kind == _STEP:
                self._step_end(inst, now)
            elif kind == _KV:
                self._kv_done(inst, b, now)
            else:  # KV restored from the host tier (its KV was reserved at admission)
                self._join(inst, b, now)
                if not inst.busy:
                    self._start(inst, now)
        self.counters["events"] = events
        return SimResult(
            np.array(self.first),
            np.array(self.done),
            np.array(self.dropped),
            np.array(self.step_s, dtype=float),
            np.array(self.step_w, dtype=np.int64),
            np.array(self.entry_gap, dtype=float),
            np.array([x.busy_s for x in self.insts]),
            min(now, horizon),
            dict(self.counters),
            tuple(s.name for s in self.dep.instances),
            tuple(s.role for s in self.dep.instances),
            tuple(self.preempted),
            np.array(self.over_context, dtype=bool),
            self.cut_off,
            self.cfg.drain_s,
            self.context_tokens,
        )


__all__ = ["ROUTERS", "SimConfig", "SimResult", "Simulator"]
