"""CASCADE's per-request TTFT estimate T̂: this request's own remaining prefill work, as the engine chunks it, at
the current and at the maximal load of its instance.

For a request with ``r`` prompt tokens left to prefill (its prompt, or prompt + generated tokens after a
recompute, minus a prefix-cache hit ``h``) on an instance with token cap ``C``:

- **T(load)** with ``n`` decoding sequences holding ``ctx`` tokens: the engine gives the prompt chunks of
  ``c = C − n`` tokens (chunked prefill: the decode tokens come first, :mod:`hetplan.sim.batching`), so it takes
  ``k = ⌈r/c⌉`` iterations; T = Σ over those chunks of the performance model's prefill time of the chunk (with
  its attention over the tokens before it, as :meth:`~hetplan.sim.deployment.StepCost.prefill_s` prices it) +
  ``k`` times the decode part of a mixed iteration ``decode_s(n, ctx) − overhead``; plus, on a prefill instance
  of a disaggregated deployment, the KV transfer of the ``r`` tokens to decode. Without chunked prefill the prompt
  is one piece (k = 1).
- **current load**: the instance's running decode batch now (``len(running)``, ``ctx_sum``) and, on a prefill
  instance, the KV transfers still queued on its NIC (the request's own transfer starts after them).
- **maximal load**: the instance's decode batch full (``max_num_seqs`` sequences; none on a prefill instance)
  holding its whole KV cache (``kv_capacity_tokens``).
- ``T̂ = κ · (T(current load) + T(max load)) / 2`` (DESIGN §3.4), κ per request class.

The prompt work is tabulated once per chunk size on a grid of :data:`GRID_TOKENS` tokens (exact at grid points,
linear between them) so the budgets of a whole waiting queue are one ``numpy.interp`` per iteration.

What hetplan still reconstructs: the paper's exact load definition is not published (the split of T(current) and
T(max) above is hetplan's); the simulator models no prefix cache, so the hit ``h`` is 0 (the estimate takes it,
``cached_tokens``, for an engine that has one); the queue ahead of the request is not in T̂, since the budget
subtracts the time waited separately and is re-computed every iteration; nor are the other prompts' chunks that
share the request's iterations (each iteration is priced with the request's own chunk and the decode batch), which
is why short prompts need κ ≈ 2–2.5 (per-class κ absorbs it: ``hetplan calibrate``).

Source: CASCADE's estimator (DESIGN §3.4: ``T̂ = κ·(T(current load) + T(max load))/2``, κ calibrated so that
``P(TTFT ≤ T̂) ≥ q``); the per-request, per-chunk form follows the issue-18 reading of it; hetplan's own
implementation.
"""

from __future__ import annotations

import math
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
    """T(load) of :mod:`hetplan.sim.estimate` for one instance (tables shared by instances of one type).

    Args:
        inst: the instance (its ``cost``, ``tok_cap``, ``seqs_cap``, ``cap``, ``role``).
        max_tokens: largest prompt to tabulate (longer ones are priced exactly, one by one).
        chunked: whether the engine chunks prompts.
        xfer: ``(seconds, seconds per token)`` of the KV transfer to decode (``(0, 0)`` when aggregated).
    """

    def __init__(self, inst: Instance, max_tokens: int, chunked: bool, xfer: tuple[float, float]) -> None:
        self.cost = inst.cost
        self.tok_cap = int(inst.tok_cap)
        self.chunked = chunked
        self.xfer = xfer if inst.role == "prefill" else (0.0, 0.0)
        self.n_max = 0 if inst.role == "prefill" else int(inst.seqs_cap)
        self.ctx_max = float(inst.cap)
        self.max_tokens = max(int(max_tokens), GRID_TOKENS)
        self.grid = np.arange(0, self.max_tokens + 2 * GRID_TOKENS, GRID_TOKENS, dtype=float)
        self._tables: dict[int, np.ndarray] = {}
        self._decode_max = self._decode_part(self.n_max, self.ctx_max)

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

    def _at(self, r: np.ndarray, n_dec: int, decode_part: float) -> np.ndarray:
        chunk = self.chunk(n_dec)
        work = np.interp(r, self.grid, self._table(chunk))
        iters = np.ceil(r / chunk) if chunk > 0 else (r > 0).astype(float)
        return np.asarray(work + iters * decode_part, dtype=float)

    def backlog_s(self, inst: Instance, now: float | None) -> float:
        """Seconds of KV transfers still queued on a prefill instance's NIC at ``now`` (part of its current load:
        a finished prompt's transfer starts after them); 0 elsewhere or when ``now`` is None."""
        if now is None or inst.role != "prefill":
            return 0.0
        return max(0.0, inst.nic_free - now)

    def parts_s(self, inst: Instance, remaining: np.ndarray, now: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(T(current load), T(max load) + 2 x KV transfer)`` of requests with ``remaining`` prompt tokens
        (shape (k,)), seconds, at ``now`` (the NIC backlog of a prefill instance counts in the current load):
        ``t0_s`` is their sum over 2 (0 where nothing is left). The second part does not change while a request
        waits, so a scheduler may keep it per request."""
        r = np.asarray(remaining, dtype=float)
        n_cur = len(inst.running)
        dec = self._decode_part(n_cur, inst.ctx_sum)
        cur = self._at(r, n_cur, dec) + self.backlog_s(inst, now)
        mx = self._at(r, self.n_max, self._decode_max)
        long = r > self.max_tokens
        if long.any():  # beyond the table: exact, one by one
            for i in np.flatnonzero(long):
                cur[i] = self._exact(float(r[i]), n_cur, dec) + self.backlog_s(inst, now)
                mx[i] = self._exact(float(r[i]), self.n_max, self._decode_max)
        base, per = self.xfer
        live = r > 0
        return np.where(live, cur, 0.0), np.where(live, mx + 2.0 * (base + per * r), 0.0)

    def current_s(self, inst: Instance, remaining: np.ndarray, now: float | None = None) -> np.ndarray:
        """T(current load) of requests with ``remaining`` prompt tokens (shape (k,)) at ``now``, seconds."""
        r = np.asarray(remaining, dtype=float)
        n_cur = len(inst.running)
        dec = self._decode_part(n_cur, inst.ctx_sum)
        cur = self._at(r, n_cur, dec)
        long = r > self.max_tokens
        if long.any():
            for i in np.flatnonzero(long):
                cur[i] = self._exact(float(r[i]), n_cur, dec)
        return np.where(r > 0, cur + self.backlog_s(inst, now), 0.0)

    def t0_s(
        self,
        inst: Instance,
        remaining: np.ndarray,
        cached_tokens: np.ndarray | None = None,
        now: float | None = None,
    ) -> np.ndarray:
        """The unscaled estimate ``(T(current load) + T(max load))/2`` (+ KV transfer) of requests with
        ``remaining`` prompt tokens to prefill (shape (k,), tokens) on ``inst`` at ``now`` (None: without the NIC
        backlog); ``cached_tokens`` is each one's prefix-cache hit (default 0). Seconds, shape (k,); 0 where nothing
        is left to prefill."""
        r = np.asarray(remaining, dtype=float)
        if cached_tokens is not None:
            r = np.maximum(r - np.asarray(cached_tokens, dtype=float), 0.0)
        cur, rest = self.parts_s(inst, r, now)
        return np.asarray((cur + rest) / 2.0, dtype=float)

    def _exact(self, r: float, n_dec: int, decode_part: float) -> float:
        chunk = self.chunk(n_dec)
        iters = math.ceil(r / chunk) if chunk > 0 else 1
        return self.prompt_s(r, chunk) + iters * decode_part


def estimator(sim: Simulator, inst: Instance) -> TtftEstimator:
    """The (cached) :class:`TtftEstimator` of ``inst`` in ``sim`` (one per instance type and role)."""
    est = inst.est
    if est is None:
        key = (id(inst.cost), inst.role, inst.tok_cap, inst.seqs_cap)
        cache = sim.estimators
        est = cache.get(key)
        if est is None:
            xfer = sim.kv_coeff[inst.group] if inst.role == "prefill" else (0.0, 0.0)
            est = cache[key] = TtftEstimator(inst, sim.max_prompt_tokens, sim.cfg.chunked_prefill, xfer)
        inst.est = est
    return est


def request_t0_s(sim: Simulator, inst: Instance, rid: int, now: float | None = None) -> float:
    """The unscaled estimate of request ``rid`` on ``inst`` at ``now`` (its ``need − done_pref`` tokens left),
    seconds."""
    left = sim.need[rid] - sim.done_pref[rid]
    return float(estimator(sim, inst).t0_s(inst, np.array([float(left)]), now=now)[0])


__all__ = ["DECODE_BUCKET", "GRID_TOKENS", "TtftEstimator", "estimator", "request_t0_s"]
