"""The simulator's step model: the time of one engine iteration (decode, prefill, mixed) per instance type, derived
from hetplan's performance model (:class:`StepCost`).

Step times are *derived from* the performance model, never re-implemented:

- decode step ``decode_s(b, ctx_sum)``: ``InstanceModel.decode_step_latency_s(b, ctx_sum / b)`` tabulated once per
  instance type over b = 1..max_num_seqs and 129 context points, linearly interpolated in context. For fixed b
  the roofline is the max of two affine functions of context, so the table is exact except inside the one grid
  cell holding the kink.
- prefill step over n prompt pieces with T tokens and attention work Q (Σ of ``(k+c)² − k²`` for a chunk of c
  tokens after k already prefilled): the FLOPs of ``arch.prefill_flops`` are ``a·s + c·s² + lm`` per prompt (a
  quadratic read off the model by evaluating it at s = 0, 1, 2); the batch is priced as the model's
  ``prefill_latency_s(s_eq, n)`` with ``s_eq`` the equal prompt length of the same FLOPs. Memoised.
- a mixed step (prefill pieces plus decoding sequences, as vLLM runs them) costs ``prefill + decode − overhead``:
  one framework overhead per iteration. This mixing rule is hetplan's own reconstruction; the perf model prices
  pure prefill and pure decode iterations only. An engine that prefills in steps of its own
  (``separate_prefill``, from :attr:`InstanceModel.prefill_separate`: SGLang) never runs a mixed step: the batching
  (:mod:`hetplan.sim.batching`) gives it a prefill-only step while its decodes wait, as the closed loop's
  ``prefill_mix`` 0 does.
- prefill→decode KV transfer: ``kv_transfer_s`` of the perf model over ``min(prefill NIC, decode NIC)``, the link
  the planner used; transfers from one prefill instance queue on its NIC (priced per routing group by
  :meth:`hetplan.sim.deployment.Deployment.kv_transfer_coeffs`).

Every step time includes the model's ``overhead_s`` and a memory-bandwidth floor, so it is never zero;
construction raises if a settings file made it zero.

Source: the step pricing is hetplan's own; the split into entities (instances), events and schedulers follows
Vidur (Agrawal et al., MLSys 2024). The instances these costs price are rebuilt from a plan by
:mod:`hetplan.sim.deployment`.
"""

from __future__ import annotations

import math

import numpy as np

from hetplan.errors import InputError
from hetplan.perf.latency import InstanceModel

CTX_POINTS = 128
#: Step costs kept across deployments (:func:`shared_step_cost`): a verification builds a deployment per plan,
#: per replayed workload and per step slowdown, mostly of the same instances; the oldest half goes past this.
SHARED_STEP_COSTS = 64
_step_costs: dict[tuple[InstanceModel, int, int, float, float], StepCost] = {}


class StepCost:
    """Step times of one instance type, from its :class:`InstanceModel` (see the module docstring).

    Args:
        model: the instance's performance model.
        max_seqs: largest decode batch to tabulate (the engine's ``max_num_seqs``).
        max_context_tokens: context length up to which the decode table is built (beyond it, linear
            extrapolation of the last cell).

    Raises:
        InputError: a step time is not positive (settings with zero overhead and zero bandwidth floor).
    """

    def __init__(
        self,
        model: InstanceModel,
        max_seqs: int,
        max_context_tokens: int,
        prefill_scale: float = 1.0,
        decode_scale: float = 1.0,
    ) -> None:
        self.model = model
        self.prefill_scale, self.decode_scale = float(prefill_scale), float(decode_scale)
        self.overhead_s = float(model.overhead_s)
        self.separate_prefill = bool(model.prefill_separate)
        arch = model.arch
        f0, f1, f2 = (float(arch.prefill_flops(float(s), 1.0)) for s in (0, 1, 2))
        self._quad = (f2 - 2 * f1 + f0) / 2.0
        self._lin = f1 - f0 - self._quad
        self._prefill_memo: dict[tuple[int, int], float] = {}
        self.max_seqs = max(1, int(max_seqs))
        self.ctx_step = max(1.0, float(max_context_tokens) / CTX_POINTS)
        b = np.arange(1, self.max_seqs + 1, dtype=float)[:, None]
        c = np.arange(CTX_POINTS + 1, dtype=float)[None, :] * self.ctx_step
        table = np.asarray(model.decode_step_latency_s(b, c), dtype=float) * self.decode_scale
        if not np.all(table > 0) or self.prefill_s(1, 1, 1) <= 0:
            raise InputError(
                f"step time of {model.gpu.name} TP{model.tp} is not positive",
                "the performance settings give zero overhead and no bandwidth floor",
                "set step_overhead_s > 0 in the plan's perf_settings",
            )
        self._table: list[list[float]] = [[]] + table.tolist()
        self.kv_capacity_tokens = int(model.kv_capacity_tokens)

    def decode_s(self, batch: int, ctx_sum: float) -> float:
        """Seconds of one decode iteration of ``batch`` sequences holding ``ctx_sum`` tokens in total."""
        if batch > self.max_seqs:
            return float(self.model.decode_step_latency_s(batch, ctx_sum / batch)) * self.decode_scale
        row = self._table[batch]
        x = ctx_sum / batch / self.ctx_step
        i = int(x)
        if i >= CTX_POINTS:
            i = CTX_POINTS - 1
        lo = row[i]
        return lo + (row[i + 1] - lo) * (x - i)

    def prefill_s(self, tokens: float, attn_sq: float, pieces: int) -> float:
        """Seconds of one prefill iteration over ``pieces`` prompts (or chunks) with ``tokens`` tokens in total
        and attention work ``attn_sq`` (Σ s² for whole prompts; see the module docstring for chunks)."""
        n = max(1, pieces)
        work = (self._lin * tokens + self._quad * attn_sq) / n
        if self._quad > 0:
            s_eq = (-self._lin + math.sqrt(self._lin * self._lin + 4 * self._quad * work)) / (2 * self._quad)
        else:
            s_eq = work / self._lin
        key = (int(s_eq + 0.5), n)
        t = self._prefill_memo.get(key)
        if t is None:
            t = float(self.model.prefill_latency_s(max(key[0], 1), n)) * self.prefill_scale
            self._prefill_memo[key] = t
        return t

    def mixed_s(self, tokens: float, attn_sq: float, pieces: int, batch: int, ctx_sum: float) -> float:
        """One iteration with prefill pieces and ``batch`` decoding sequences (one overhead per iteration)."""
        if pieces == 0:
            return self.decode_s(batch, ctx_sum)
        if batch == 0:
            return self.prefill_s(tokens, attn_sq, pieces)
        overlap = self.overhead_s * min(self.prefill_scale, self.decode_scale)  # one overhead per iteration
        return self.prefill_s(tokens, attn_sq, pieces) + self.decode_s(batch, ctx_sum) - overlap


def shared_step_cost(
    model: InstanceModel, max_seqs: int, max_context_tokens: int, prefill_scale: float, decode_scale: float
) -> StepCost:
    """The :class:`StepCost` of these arguments, built once per process while it is among the last
    :data:`SHARED_STEP_COSTS` (a step cost is a pure function of them: its table and prefill memo are the same
    whichever deployment asks; building one takes tens of milliseconds).

    Raises:
        InputError: as :class:`StepCost`.
    """
    key = (model, max_seqs, max_context_tokens, prefill_scale, decode_scale)
    cost = _step_costs.get(key)
    if cost is None:
        if len(_step_costs) >= SHARED_STEP_COSTS:
            for old in list(_step_costs)[: SHARED_STEP_COSTS // 2]:
                del _step_costs[old]
        cost = _step_costs[key] = StepCost(model, max_seqs, max_context_tokens, prefill_scale, decode_scale)
    return cost
