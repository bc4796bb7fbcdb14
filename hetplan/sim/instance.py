"""Per-instance state of the simulator (one vLLM-like engine) and the kinds of events on its heap.

The engine (:mod:`hetplan.sim.engine`) owns and updates it; schedulers (:mod:`hetplan.sim.scheduler`) read it and
keep their own per-instance state here (``step_est_s``, ``host_gib``, ``t2_credit``), so that no per-request
lookup goes through a dictionary. ``__slots__`` keeps attribute access fast in the event loop.

Source: hetplan's own reconstruction (entity split after Vidur, Agrawal et al., MLSys 2024).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetplan.sim.step_cost import StepCost

if TYPE_CHECKING:
    from hetplan.sim.ttft_estimate import TtftEstimator

STEP_END, KV_DONE, RESTORED, ARRIVE, PREFIX_RESTORED = 1, 2, 3, 4, 5
"""Event kinds: an iteration ends; a prefill→decode KV transfer ends; a KV restore from a host tier ends; a
closed-loop client sends its next request; a prompt's prefix blocks are restored from the host tier
(:mod:`hetplan.sim.prefix`)."""


class Pool:
    """The instances of one role in one routing group and the requests waiting for any of them (one shared queue,
    as a router that sends a request only when an instance can admit it: :mod:`hetplan.sim.dispatch`).

    Attributes:
        members: the instances that serve ``queue`` (same GPU type, TP and role).
        queue: ``(key, request)`` sorted by the scheduler's key, waiting for any member (each member's
            ``waiting`` is this list).
        qtok / qn: prompt tokens and prompts queued in the pool or prefilling on its members.
    """

    __slots__ = ("members", "queue", "qtok", "qn")

    def __init__(self, members: list[Instance]) -> None:
        self.members = members
        self.queue: list[tuple[float, int]] = []
        self.qtok = 0.0
        self.qn = 0


class Instance:
    """State of one instance.

    Attributes:
        idx / role / group: position in the deployment, ``prefill``, ``decode`` or ``aggregated``, group index.
        cost: step times; cap: KV capacity, tokens; seqs_cap / tok_cap: ``max_num_seqs`` and
            ``max_num_batched_tokens``.
        waiting: ``(key, request)`` sorted by the scheduler's key: the pool's queue (one list shared by the pool's
            members); prefilling: prompts partly prefilled;
            running: decoding sequences (insertion-ordered); ready: sequences whose KV restore ended during an
            iteration, joining decoding at the next one. pool: the shared queue this instance pulls from.
        ctx_sum / kv_used: context tokens of the running sequences, KV tokens held.
        step_idx / finish_at: decode iterations done (every iteration but a prefill step of its own while
            sequences are running, :mod:`hetplan.sim.batching`); iteration index → sequences that finish then.
        step_est_s: the instance's measured time per output token: a running average of its decode iterations'
            durations (the engine updates it, weight ``STEP_EWMA``), starting from the model's step at half the
            batch cap with 1k-token contexts; CASCADE's decode budgets use it.
        host_gib: KV offloaded to host DRAM. t2_credit: CASCADE's Tier-2 token credit.
        est: the instance's per-request TTFT estimator (:mod:`hetplan.sim.ttft_estimate`, built on first use).
    """

    __slots__ = (
        "idx", "role", "cost", "cap", "seqs_cap", "tok_cap", "group", "waiting", "prefilling", "running",
        "ctx_sum", "kv_used", "step_idx", "finish_at", "busy", "busy_s", "pieces", "n_dec", "new", "joiners",
        "nic_free", "step_est_s", "outstanding", "last_end", "host_gib", "step_start", "t2_credit",
        "pool", "ready", "est",
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
        half = max(1, seqs // 2)
        self.step_est_s = cost.decode_s(half, half * 1024.0)
        self.outstanding = 0
        self.last_end = 0.0
        self.host_gib = 0.0
        self.step_start = 0.0
        self.t2_credit = 0.0
        self.pool: Pool = Pool([self])
        self.waiting = self.pool.queue
        self.ready: list[int] = []
        self.est: TtftEstimator | None = None


__all__ = ["ARRIVE", "KV_DONE", "PREFIX_RESTORED", "RESTORED", "STEP_END", "Instance", "Pool"]
