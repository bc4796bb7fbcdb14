"""Discrete-event simulator of a deployment serving a request stream.

Events sit on one heap ordered by ``(time, sequence number)``: equal times resolve in the order the events were
created, so a run is deterministic; the seed only drives the ``random`` router. There is one event per engine
iteration per instance (never one per token), one per KV transfer and one per KV restore; arrivals are read from
the sorted stream.

Instances (vLLM-like engines, continuous batching):

- every iteration takes the running decode sequences (one token each) plus prefill work chosen by the
  scheduler within ``max_num_batched_tokens`` (minus the decode tokens when chunked prefill is on) and
  ``max_num_seqs``; without chunked prefill a prompt is prefilled whole (a prompt longer than the token cap runs
  alone). Batch formation is in :mod:`hetplan.sim.batching`; every policy decision (queue order, admission,
  victim, KV offload) goes through the :class:`~hetplan.sim.scheduler.Scheduler` interface;
- KV capacity comes from the performance model (``InstanceModel.kv_capacity_tokens``); accounting is per token
  (vLLM's 16-token blocks leave at most one partly filled block per sequence, ignored here). A prompt's KV is
  reserved when its prefill starts; a decoding sequence grows by one token per iteration. When the next iteration
  would not fit, the scheduler's victim is preempted by recompute (its prompt and generated tokens are
  prefilled again later; CASCADE may restore the KV from a host tier instead, see ``cascade``);
- arrivals (:mod:`hetplan.sim.arrival`): refused over the context window, routed to a group, output cut at the
  window or the KV cache; the run stops ``drain_s`` after the last arrival (``cut_off``);
- dispatch inside a routing group is work conserving (:mod:`hetplan.sim.dispatch`): each role's instances serve
  one shared queue, so a request waits only while no instance of its role can admit it (before, each request was
  bound to an instance on arrival and waited behind it while a peer stood idle: mean waits 1.2–2.3x Erlang C);
- exactly one iteration per instance is in flight (:func:`~hetplan.sim.batching.start_iteration`): preempting
  a victim while building an iteration only re-queues it, and a KV restore that ends mid-iteration joins at the
  next one (before, preemption re-entered the iteration being built, so under KV pressure dozens of iterations of
  one instance ran at once and latencies came out far too low);
- a closed loop (``clients`` > 0, :mod:`hetplan.sim.closed`): the first ``clients`` requests arrive at 0 and
  each one that ends sends the next (an ``ARRIVE`` event at its end);
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
from array import array

from hetplan.budget import charge_events, check_sim_start, events_exhausted, events_left
from hetplan.errors import InputError
from hetplan.sim.arrival import arrive
from hetplan.sim.batching import start_iteration
from hetplan.sim.deployment import Deployment
from hetplan.sim.dispatch import make_pools, queue_in_pool
from hetplan.sim.instance import ARRIVE, KV_DONE, PREFIX_RESTORED, STEP_END, Instance, Pool
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.prefix import PrefixCaches
from hetplan.sim.result import SimResult, raw_result
from hetplan.sim.router import ROUTERS, Router, SimConfig
from hetplan.sim.scheduler import Scheduler
from hetplan.sim.ttft_estimate import TtftEstimator
from hetplan.workload.context import apply_context_window
from hetplan.workload.model import RequestStream

_INF = float("inf")
STEP_EWMA = 0.05
"""Weight of the newest decode iteration in an instance's running average of its step time (``step_est_s``:
about the last 20 iterations)."""


class Simulator:
    """One run of ``stream`` through ``dep`` under ``scheduler`` (see the module docstring).

    ``predictor`` gives policies a predicted remaining output (:mod:`hetplan.sim.predict`; default: learnt from
    ``stream``'s own length distribution). ``out`` holds each request's true output: the engine ends requests
    with it, and only policies labelled ``oracle`` may read it (``Scheduler.oracle``).

    Raises:
        InputError: bad router or settings. WorkBudgetError: more arrivals than the command's simulator events left
        or more than :data:`hetplan.budget.MAX_SIM_INSTANCES` instances (here), or the run reaching that budget
        (:meth:`run`).
    """

    def __init__(
        self,
        dep: Deployment,
        stream: RequestStream,
        scheduler: Scheduler,
        config: SimConfig | None = None,
        record_estimates: bool = False,
        clients: int = 0,
        predictor: OutputPredictor | None = None,
    ) -> None:
        self.dep, self.stream, self.scheduler = dep, stream, scheduler
        # what policies may know of a request's output: a prediction from the sizing data's distribution
        # (default: the replayed workload's own, as ``hetplan plan`` verifies on the data it sized on)
        self.predictor = predictor or OutputPredictor(stream.prompt_tokens, stream.output_tokens)
        self.cfg = config or SimConfig()
        n = stream.n
        # the work budget (hetplan.budget): every arrival is an event, and the deployment must be a sane size
        check_sim_start(n, len(dep.instances))
        limit = int(dep.arch.spec.max_position_embeddings)
        if dep.settings.max_model_len_tokens is not None:  # the engine's --max-model-len, when the plan sets one
            limit = min(limit, int(dep.settings.max_model_len_tokens))
        # the engine's over-context rule (hetplan.workload.context): refuse prompts longer than the window, cut
        # the others' output at the window
        window = apply_context_window(stream.prompt_tokens, stream.output_tokens, limit)
        served = ~window.refused
        self.truncated = window.n_truncated
        sizes = stream.prompt_tokens + window.output_tokens
        max_ctx = int(sizes[served].max()) if served.any() else 1
        self.insts: list[Instance] = []
        for i, spec in enumerate(dep.instances):
            cost = dep.step_cost(spec.gpu, spec.tp, spec.max_num_seqs, max(max_ctx, 1024))
            self.insts.append(Instance(i, spec.role, cost, spec.max_num_seqs, spec.max_num_batched_tokens, spec.group))
        # a KV transfer in disaggregated groups only (a mixed plan has both kinds)
        self.kv_coeff = [
            dep.kv_transfer_coeffs(g) if not dep.aggregated and g.prefill != g.decode else (0.0, 0.0)
            for g in dep.groups
        ]
        self.kv_bytes_per_token = float(dep.arch.kv_bytes_per_token)
        # per-request state (python lists: faster than numpy for scalar access)
        self.arr: list[float] = stream.arrival_s.tolist()
        self.prompt: list[int] = stream.prompt_tokens.tolist()
        self.out: list[int] = window.output_tokens.tolist()
        self.refused: list[bool] = window.refused.tolist()
        self.ttft_slo: list[float] = stream.ttft_slo_s.tolist()
        self.tpot_slo: list[float] = stream.tpot_slo_s.tolist()
        self.need = [0] * n  # tokens to prefill in the current residency (0: KV is present)
        self.done_pref = [0] * n
        self.gen = [0] * n  # tokens generated (at join time while running)
        self.join = [0] * n
        self.grp = [-1] * n
        self.key = [0.0] * n
        self.offload = [0] * n  # KV kept by the scheduler on preemption: 0 none, 1 DRAM, 2 SSD
        self.home = [-1] * n  # the instance that preempted it last (holds an offloaded KV)
        self.pin = [-1] * n  # the prefix router's instance for the request's prefill (-1: any of its pool)
        self.pinned_n = [0] * len(dep.instances)  # per instance: requests bound to it by ``pin``, not yet admitted
        self.first = [_INF] * n
        self.last = [0.0] * n
        self.done = [_INF] * n
        self.dropped = [False] * n
        self.over_context = [False] * n
        self.context_tokens = int(dep.arch.spec.max_position_embeddings)
        self.cut_off = False
        self.record = record_estimates
        # when recording: the scheduler's unscaled T̂ and the time each request's prefill first started
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
        self.router = Router(dep.routing_table(), self.cfg.router, self.cfg.seed)
        # prefix caching (hetplan.sim.prefix): with the stream's block ids, unless the settings switch it off
        blocks = stream.prefix_blocks
        # evicted blocks spill to the host tier the scheduler offloads to (none: dropped)
        self.prefix = (
            PrefixCaches(
                blocks, len(self.insts), scheduler.host_tier(self), self.kv_bytes_per_token, self.cfg.prefix_hbm_blocks
            )
            if blocks is not None and self.cfg.prefix_cache
            else None
        )
        self.restoring: set[int] = set()  # prompts whose prefix blocks are being restored from the host tier
        if self.cfg.router == "prefix" and self.prefix is None:
            raise InputError(
                "the prefix router needs prefix caching",
                "the trace has no hash_ids (and no declared reuse), or prefix caching is off",
                "pass a trace with hash_ids or declare reuse, or pick another router",
            )
        self.group_fit = [
            min(min(self.insts[i].cap for i in g.prefill), min(self.insts[i].cap for i in g.decode)) for g in dep.groups
        ]
        self.pools = make_pools(self.insts, [(g.prefill, g.decode) for g in dep.groups])
        # closed loop: ``clients`` requests start at 0; each completion sends the next one (ARRIVE events)
        self.clients = int(clients)
        self.next_rid = min(self.clients, n) if self.clients else n
        # the per-request TTFT estimators (hetplan.sim.ttft_estimate), one per instance type, built on first use
        self.estimators: dict[tuple[int, str, int, int], TtftEstimator] = {}
        self.max_prompt_tokens = int(stream.prompt_tokens[served].max()) if served.any() else 1
        scheduler.bind(self)

    # -- helpers ---------------------------------------------------------------------------------------
    def push(self, t: float, kind: int, a: int, b: int = 0) -> None:
        """Schedule an event of ``kind`` at ``t`` for instance ``a`` (and request ``b``)."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def enqueue(self, inst: Instance, rid: int) -> None:
        """``rid`` waits on ``inst`` (a preempted sequence) at the scheduler's key; starts nothing."""
        k = self.scheduler.key(self, inst, rid)
        self.key[rid] = k
        bisect.insort(inst.waiting, (k, rid))
        inst.outstanding += 1
        if self.need[rid]:
            inst.pool.qtok += self.need[rid]
            inst.pool.qn += 1

    def dispatch(self, pool: Pool, rid: int, now: float) -> None:
        """``rid`` waits in ``pool``'s shared queue; every idle instance of the pool builds an iteration (and pulls
        it if it can admit it), in index order, until the queue is empty (:mod:`hetplan.sim.dispatch`)."""
        queue_in_pool(self, pool, rid)
        for inst in pool.members:
            if not inst.busy:
                start_iteration(self, inst, now)
                if not pool.queue:
                    break

    def client_next(self, now: float) -> None:
        """Closed loop: a client whose request ended sends the next one now."""
        if self.clients and self.next_rid < len(self.arr):
            rid = self.next_rid
            self.next_rid += 1
            self.arr[rid] = now
            self.push(now, ARRIVE, 0, rid)

    # -- routing ---------------------------------------------------------------------------------------
    def _arrive(self, rid: int, now: float) -> None:
        """Request ``rid`` arrives (:func:`hetplan.sim.arrival.arrive`); a hook subclasses extend."""
        arrive(self, rid, now)

    def start_decoding(self, inst: Instance, rid: int, now: float) -> None:
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

    def _finish(self, inst: Instance, rid: int, now: float) -> None:
        self.done[rid] = now
        self.last[rid] = now
        inst.outstanding -= 1
        self.router.outstanding[self.grp[rid]] -= 1
        if self.clients:
            self.client_next(now)

    def _step_end(self, inst: Instance, now: float) -> None:
        inst.last_end = now
        self.counters["iterations"] += 1
        n_dec = inst.n_dec
        run = inst.running
        if n_dec or not inst.cost.separate_prefill:  # a prefill step of its own (SGLang) advances no sequence
            inst.step_idx += 1
        if n_dec:
            new = inst.new
            nw = 0
            for rid in new:
                if rid in run:
                    self.entry_gap.append(now - self.last[rid])
                    nw += 1
            dur = now - inst.step_start
            self.step_s.append(dur)
            self.step_w.append(n_dec - nw)
            inst.step_est_s += STEP_EWMA * (dur - inst.step_est_s)  # the measured time per output token
            inst.ctx_sum += n_dec
            inst.kv_used += n_dec
            if self.prefix is not None:
                self.prefix.trim(inst)  # the running batch grew: the cache shrinks to the room left
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
                inst.pool.qtok -= grant
                if self.done_pref[rid] >= self.need[rid]:
                    finished.add(rid)
            for rid in inst.prefilling:
                if rid not in finished:
                    keep.append(rid)
            inst.prefilling = keep
            for rid, _ in pieces:
                if rid in finished:
                    inst.pool.qn -= 1
                    self._prefilled(inst, rid, now)
        inst.busy = False
        start_iteration(self, inst, now)

    def _prefilled(self, inst: Instance, rid: int, now: float) -> None:
        need = self.need[rid]
        self.pin[rid] = -1
        if self.prefix is not None:
            self.prefix.computed(inst, rid, self.prompt[rid])
        self.need[rid] = 0
        self.done_pref[rid] = 0
        if inst.role == "prefill":
            base, per = self.kv_coeff[self.grp[rid]]
            start = now if inst.nic_free < now else inst.nic_free
            end = start + base + per * self.prompt[rid]
            inst.nic_free = end
            self.push(end, KV_DONE, inst.idx, rid)
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
        self.start_decoding(inst, rid, now)

    def _kv_done(self, src: Instance, rid: int, now: float) -> None:
        src.kv_used -= self.prompt[rid]
        src.outstanding -= 1
        self.gen[rid] = 1
        self.first[rid] = now
        self.last[rid] = now
        if self.out[rid] <= 1:
            self.done[rid] = now
            self.router.outstanding[self.grp[rid]] -= 1
            self.client_next(now)
        else:  # the group's decode pool: the first decode instance that can admit it
            self.need[rid] = 0
            self.dispatch(self.pools[self.grp[rid]][1], rid, now)
        if not src.busy:
            start_iteration(self, src, now)

    # -- main loop -------------------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Replay the stream; returns the raw result (deterministic for equal inputs and seed)."""
        arr = self.arr
        n = self.next_rid  # arrivals read from the stream (closed loop: the first clients' requests)
        heap = self.heap
        horizon = (arr[n - 1] if n else 0.0) + self.cfg.drain_s if not self.clients else _INF
        i = 0
        events = 0
        now = 0.0
        left = events_left()  # the command's work budget (hetplan.budget); None: none
        limit = _INF if left is None else left
        while True:
            if events >= limit and (i < n or heap):  # more to do, and the budget spent
                charge_events(events)
                raise events_exhausted(events, self.stream.n)
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
            if kind == STEP_END:
                self._step_end(inst, now)
            elif kind == KV_DONE:
                self._kv_done(inst, b, now)
            elif kind == ARRIVE:
                self._arrive(b, now)
            elif kind == PREFIX_RESTORED:  # the prompt's prefill continues from the next iteration
                self.restoring.discard(b)
                if not inst.busy:
                    start_iteration(self, inst, now)
            else:  # KV restored from the host tier (reserved at admission): joins at the next iteration
                inst.ready.append(b)
                if not inst.busy:
                    start_iteration(self, inst, now)
        self.counters["events"] = events
        if self.prefix is not None:
            self.counters.update(self.prefix.counters())
        charge_events(events)
        return raw_result(self, min(now, horizon))


__all__ = ["ROUTERS", "SimConfig", "SimResult", "Simulator"]
