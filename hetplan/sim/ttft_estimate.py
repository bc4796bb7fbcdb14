"""CASCADE's per-request TTFT estimate T̂: this request's own remaining prefill work, as the engine chunks it, at
the current and at the maximal load of its instance.

For a request with ``r`` prompt tokens left to prefill (its prompt, or prompt + generated tokens after a
recompute, minus a prefix-cache hit ``h``) on an instance with token cap ``C``:

- **T(current load)**: the instance now, with ``n`` decoding sequences holding ``ctx`` tokens and ``o`` prompt
  tokens of prompts it has already started (they continue first and share the request's iterations). The engine
  gives prompts chunks of ``c = C − n`` tokens (chunked prefill: the decode tokens come first,
  :mod:`hetplan.sim.batching`), so the request's first token comes after the ``o + r`` tokens are prefilled:
  ``T = P_c(o + r) + ⌈(o + r)/c⌉ · (decode_s(n, ctx) − overhead)``, where ``P_c(s)`` is the performance model's
  time of prefilling ``s`` tokens in chunks of ``c`` (each chunk with its attention over the tokens before it, as
  :meth:`~hetplan.sim.step_cost.StepCost.prefill_s` prices it), plus, on a prefill instance of a disaggregated
  deployment, the KV transfers still queued on its NIC.
- **T(max load)**: every iteration full: the decode batch at ``max_num_seqs`` holding the whole KV cache (none on
  a prefill instance) and the prefill budget filled, so each of the request's ``⌈r/c⌉`` chunks costs a full
  iteration, ``F + decode_s(max_num_seqs, KV capacity) − overhead`` with ``F`` the prefill of ``c`` tokens.
- on a prefill instance, the request's own KV transfer to decode is added to both.
- ``T̂ = κ · (T(current load) + T(max load)) / 2`` (DESIGN §3.4), κ per request class. With equal loads (an
  instance already full: ``o + r = c``) and κ = 1, T̂ is the profile's latency of one full iteration (+ transfer).

Without chunked prefill a prompt is one piece (one iteration). The prompt work is tabulated once per chunk size on
a grid of :data:`GRID_TOKENS` tokens (exact at grid points, linear between them) so the budgets of a whole waiting
queue are one ``numpy.interp`` per iteration.

What hetplan still reconstructs: the paper's exact load definition is not published (the two load points above
are hetplan's); the simulator models no prefix cache, so the hit ``h`` is 0 (the estimate takes it,
``cached_tokens``, for an engine that has one); the queue ahead of the request is not in T̂, since the budget
subtracts the time waited separately and is re-computed every iteration; prompts admitted in the same iteration
after the estimate are not in ``o``.

Source: CASCADE's estimator (DESIGN §3.4: ``T̂ = κ·(T(current load) + T(max load))/2``, κ calibrated so that
``P(TTFT ≤ T̂) ≥ q``); the per-request, per-chunk form follows the issue-18 reading of it; hetplan's own
implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator
    from hetplan.sim.instance import Instance

GRID_TOKENS = 128
"""Spacing of the tabulated prompt-work grid, tokens."""
DECODE_BUCKET = 32
"""Decode counts are rounded up to a multiple of this for the chunk size of the tables (sequences)."""


class TtftEstimator:
    """T(load) of :mod:`hetplan.sim.ttft_estimate` for one instance type of one run.

    Args:
        sim: the run (its per-request ``need`` and ``done_pref`` give the tokens of started prompts).
        inst: the instance (its ``cost``, ``tok_cap``, ``seqs_cap``, ``cap``, ``role``).
        max_tokens: largest prompt to tabulate (work beyond the table is extended linearly at the cost per token
            of its last chunk).
        chunked: whether the engine chunks prompts.
        xfer: ``(seconds, seconds per token)`` of the KV transfer to decode (``(0, 0)`` when aggregated).
    """

    def __init__(
        self, sim: Simulator, inst: Instance, max_tokens: int, chunked: bool, xfer: tuple[float, float]
    ) -> None:
        self.sim = sim
        self.cost = inst.cost
        self.tok_cap = int(inst.tok_cap)
        self.chunked = chunked
        self.xfer = xfer if inst.role == "prefill" else (0.0, 0.0)
        self.n_max = 0 if inst.role == "prefill" else int(inst.seqs_cap)
        self.ctx_max = float(inst.cap)
        self.max_tokens = max(int(max_tokens) + 2 * self.tok_cap, GRID_TOKENS)
        self.grid = np.arange(0, self.max_tokens + 2 * GRID_TOKENS, GRID_TOKENS, dtype=float)
        self._tables: dict[int, np.ndarray] = {}
        self._decode_max = self._decode_part(self.n_max, self.ctx_max)
        c = self.chunk(self.n_max)
        self._full_max = self.prompt_s(c if c > 0 else self.tok_cap, c) + self._decode_max

    def _decode_part(self, n: int, ctx: float) -> float:
        """Seconds a mixed iteration adds for ``n`` decoding sequences (0 for none)."""
        if n <= 0:
            return 0.0
        return max(0.0, self.cost.decode_s(n, ctx) - self.cost.overhead_s)

    def chunk(self, n_dec: int) -> int:
        """Prompt tokens per iteration with ``n_dec`` decoding sequences (0: the whole prompt, unchunked); the
        decode count is rounded up to a multiple of :data:`DECODE_BUCKET` so that a handful of tables serve a run."""
        if not self.chunked:
            return 0
        n = -(-n_dec // DECODE_BUCKET) * DECODE_BUCKET if n_dec > 0 else 0
        return max(1, self.tok_cap - n)

    def prompt_s(self, r: float, chunk: int, done: float = 0.0) -> float:
        """Seconds of prefill iterations for ``r`` tokens after ``done`` already prefilled, in chunks of
        ``chunk`` tokens (0: one piece), prompt work only (exact)."""
        left = float(r)
        k = float(done)
        t = 0.0
        while left > 0:
            c = left if chunk <= 0 else min(left, float(chunk))
            t += self.cost.prefill_s(c, (k + c) * (k + c) - k * k, 1)
            k += c
            left -= c
        return t

    def _table(self, chunk: int) -> np.ndarray:
        table = self._tables.get(chunk)
        if table is None:
            table = np.array([self.prompt_s(g, chunk) if g > 0 else 0.0 for g in self.grid])
            self._tables[chunk] = table
        return table

    def started_tokens(self, inst: Instance) -> float:
        """Prompt tokens still to prefill of the prompts ``inst`` has started (``o``), tokens."""
        need, done = self.sim.need, self.sim.done_pref
        return float(sum(need[r] - done[r] for r in inst.prefilling))

    def backlog_s(self, inst: Instance, now: float | None) -> float:
        """Seconds of KV transfers still queued on a prefill instance's NIC at ``now`` (part of its current load:
        a finished prompt's transfer starts after them); 0 elsewhere or when ``now`` is None."""
        if now is None or inst.role != "prefill":
            return 0.0
        return max(0.0, inst.nic_free - now)

    def current_s(
        self, inst: Instance, remaining: np.ndarray, now: float | None = None, others: np.ndarray | None = None
    ) -> np.ndarray:
        """T(current load) of requests with ``remaining`` prompt tokens (shape (k,)) at ``now``, seconds (0 where
        nothing is left); ``others``: the started prompts' tokens ahead of each (default: all of ``inst``'s)."""
        r = np.asarray(remaining, dtype=float)
        o = self.started_tokens(inst) if others is None else np.asarray(others, dtype=float)
        tot = r + o
        n_cur = len(inst.running)
        dec = self._decode_part(n_cur, inst.ctx_sum)
        chunk = self.chunk(n_cur)
        table = self._table(chunk)
        work = np.interp(tot, self.grid, table)
        top = self.grid[-1]
        beyond = tot > top
        if beyond.any():  # beyond the table: extended at the cost per token of its last chunk (linear)
            span = float(chunk if chunk > 0 else self.tok_cap)
            k = max(1, int(round(span / GRID_TOKENS)))
            slope = (table[-1] - table[-1 - k]) / (self.grid[-1] - self.grid[-1 - k])
            work = np.where(beyond, table[-1] + (tot - top) * slope, work)
        iters = np.ceil(tot / chunk) if chunk > 0 else np.ones_like(tot)
        cur = work + iters * dec + self.backlog_s(inst, now)
        return np.asarray(np.where(r > 0, cur, 0.0), dtype=float)

    def max_s(self, remaining: np.ndarray) -> np.ndarray:
        """T(max load) + 2 × the request's KV transfer, shape (k,), seconds: constant while a request waits, so a
        scheduler may keep it per request (0 where nothing is left)."""
        r = np.asarray(remaining, dtype=float)
        chunk = self.chunk(self.n_max)
        if chunk > 0:
            mx = np.ceil(r / chunk) * self._full_max
        else:  # unchunked: one iteration, at least a full one
            mx = np.array([max(self.prompt_s(float(x), 0), self._full_max - self._decode_max) for x in r])
            mx = mx + self._decode_max
        base, per = self.xfer
        return np.asarray(np.where(r > 0, mx + 2.0 * (base + per * r), 0.0), dtype=float)

    def parts_s(
        self, inst: Instance, remaining: np.ndarray, now: float | None = None, others: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(T(current load), T(max load) + 2 × KV transfer)`` (see :meth:`current_s`, :meth:`max_s`)."""
        return self.current_s(inst, remaining, now, others), self.max_s(remaining)

    def t0_s(
        self,
        inst: Instance,
        remaining: np.ndarray,
        cached_tokens: np.ndarray | None = None,
        now: float | None = None,
        others: np.ndarray | None = None,
    ) -> np.ndarray:
        """The unscaled estimate ``(T(current load) + T(max load))/2`` (+ KV transfer) of requests with
        ``remaining`` prompt tokens to prefill (shape (k,), tokens) on ``inst`` at ``now`` (None: without the NIC
        backlog); ``cached_tokens`` is each one's prefix-cache hit (default 0); ``others``: see
        :meth:`current_s`. Seconds, shape (k,); 0 where nothing is left to prefill."""
        r = np.asarray(remaining, dtype=float)
        if cached_tokens is not None:
            r = np.maximum(r - np.asarray(cached_tokens, dtype=float), 0.0)
        cur, rest = self.parts_s(inst, r, now, others)
        return np.asarray((cur + rest) / 2.0, dtype=float)


def estimator(sim: Simulator, inst: Instance) -> TtftEstimator:
    """The (cached) :class:`TtftEstimator` of ``inst`` in ``sim`` (one per instance type and role)."""
    est = inst.est
    if est is None:
        key = (id(inst.cost), inst.role, inst.tok_cap, inst.seqs_cap)
        cache = sim.estimators
        est = cache.get(key)
        if est is None:
            xfer = sim.kv_coeff[inst.group] if inst.role == "prefill" else (0.0, 0.0)
            est = cache[key] = TtftEstimator(sim, inst, sim.max_prompt_tokens, sim.cfg.chunked_prefill, xfer)
        inst.est = est
    return est


def request_t0_s(sim: Simulator, inst: Instance, rid: int, now: float | None = None) -> float:
    """The unscaled estimate of request ``rid`` on ``inst`` at ``now`` (its ``need − done_pref`` tokens left),
    seconds."""
    left = sim.need[rid] - sim.done_pref[rid]
    return float(estimator(sim, inst).t0_s(inst, np.array([float(left)]), now=now)[0])


__all__ = ["DECODE_BUCKET", "GRID_TOKENS", "TtftEstimator", "estimator", "request_t0_s"]
