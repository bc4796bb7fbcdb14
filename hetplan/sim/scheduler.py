"""The scheduler interface of the simulator and the static-key policies (FCFS, SJF, EDF).

The engine (:mod:`hetplan.sim.engine`) runs the mechanism: iterations, KV accounting, transfers, restores. What a
policy decides goes through a :class:`Scheduler`, whose hooks the engine calls and whose kind it never tests:

- ``key``: the priority of a request entering an instance's waiting queue (smaller is served first); the queue is
  kept sorted by it.
- ``admit``: which waiting requests join the next iteration, as calls of the engine's ``take`` (it admits one
  waiting request within token and slot limits and says whether it did); the default is one pass in key order
  that stops at the first request that does not fit.
- ``victim``: the running sequence to preempt when the next iteration's KV would not fit.
- ``on_preempt`` / ``restore_s``: where a victim's KV goes (default: dropped, the request is recomputed) and how
  long bringing it back takes (only asked for requests ``on_preempt`` offloaded).
- ``estimate_s``: the unscaled TTFT estimate T̂₀ recorded for calibration (CASCADE's estimator for every policy).
- ``settings``: the policy's settings for the metrics document (none for the static policies).

Static-key policies order the waiting queue by a key fixed at arrival and preempt the running sequence with the
largest key (ties: the higher request index):

- ``fcfs``: arrival time (vLLM's default; the victim is the latest arrival, as vLLM preempts the newest).
- ``sjf``: prompt length (shortest prompt first).
- ``edf``: deadline = arrival + the request's TTFT SLO.

CASCADE is in :mod:`hetplan.sim.cascade`; the registry by name in :mod:`hetplan.sim.policies`.

Source: FCFS/SJF/EDF are the baselines CASCADE compares against (DESIGN §3.4); the hook split follows Vidur's
replaceable schedulers (Agrawal et al., MLSys 2024); the T̂ estimator is CASCADE's (see ``cascade``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from hetplan.sim.instance import Instance

if TYPE_CHECKING:
    from hetplan.sim.cascade import CascadeSettings
    from hetplan.sim.engine import Simulator

Take = Callable[[int, float, float], bool]
"""``take(i, token_limit, slot_limit)``: admit ``inst.waiting[i]`` within the limits; False: it did not fit."""


def cascade_estimate_s(t_current_s: float, t_max_s: float, kappa: float) -> float:
    """CASCADE's TTFT estimate ``κ·(T(current load) + T(max load))/2`` (DESIGN §3.4), seconds."""
    return kappa * (t_current_s + t_max_s) / 2.0


def ttft_estimate_s(inst: Instance, kappa: float) -> float:
    """CASCADE's T̂ for a prompt joining ``inst``'s next batch now (seconds): T(current load) is the model's
    latency of the batch the queued prompt tokens would form (at most ``max_num_batched_tokens``; the instance's
    share of its pool's queued and prefilling prompt tokens, :mod:`hetplan.sim.dispatch`), T(max load)
    that of a full batch of prompts of the queue's mean length. The wait so far is not in T̂: the budget
    subtracts it separately."""
    c = inst.cost
    full = float(inst.tok_cap)
    pool = inst.pool  # prompt tokens queued in or prefilling on the instance's pool, this instance's share
    qtok, qn = pool.qtok / len(pool.members), pool.qn
    mean = qtok * len(pool.members) / qn if qn > 0 and qtok > 0 else 1024.0
    mean = min(max(mean, 1.0), full)
    cur = min(max(qtok, mean), full)
    t_cur = c.prefill_s(cur, cur * mean, max(1, int(cur / mean + 0.5)))
    t_max = c.prefill_s(full, full * mean, max(1, int(full / mean + 0.5)))
    return cascade_estimate_s(t_cur, t_max, kappa)


class Scheduler(ABC):
    """A scheduling policy, as the engine sees it (module docstring). ``sim`` is the running
    :class:`~hetplan.sim.engine.Simulator`; its per-request lists (``arr``, ``prompt``, ``out``, ``ttft_slo``,
    ``tpot_slo``, ``first``, ``gen``, ``join``, ``key``, ``need``, ``offload``) are indexed by request."""

    name: ClassVar[str]
    description: ClassVar[str]

    @classmethod
    def create(cls, cascade: CascadeSettings | None = None) -> Scheduler:
        """An instance of this policy; ``cascade`` is for CASCADE, other policies have no settings."""
        return cls()

    @abstractmethod
    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        """Queue key of ``rid`` entering ``inst``'s waiting queue (smaller is served first)."""

    @abstractmethod
    def victim(self, sim: Simulator, inst: Instance) -> int:
        """The running sequence of ``inst`` to preempt."""

    def admit(
        self,
        sim: Simulator,
        inst: Instance,
        now: float,
        take: Take,
        state: list[float],
        pieces: list[tuple[int, int]],
        before: int,
        total_budget: float,
    ) -> None:
        """Admit waiting requests into the iteration being built by calling ``take`` on indices of
        ``inst.waiting`` (each at most once). ``state`` holds the tokens and slots left (``take`` updates it);
        ``pieces[:before]`` are the chunks of prompts already started; ``total_budget`` is the iteration's token
        budget. Default: in key order until one does not fit."""
        for i in range(len(inst.waiting)):
            if not take(i, state[0], state[1]):
                break

    def on_preempt(self, sim: Simulator, inst: Instance, rid: int, ctx: int) -> None:  # noqa: B027 (a no-op hook)
        """``rid`` (``ctx`` tokens of KV) was preempted: set ``sim.offload[rid]`` to keep its KV on a host tier
        (1 DRAM, 2 SSD). Default: the KV is dropped and the request recomputed."""

    def restore_s(self, sim: Simulator, rid: int) -> float:
        """Seconds to bring back the KV of ``rid`` from its host tier (only asked when ``on_preempt`` kept it).
        A restore happens when this fits the request's budget (its key minus now); infinite: recompute."""
        return math.inf

    def estimate_s(self, inst: Instance) -> float:
        """The unscaled TTFT estimate T̂₀ recorded for calibration when ``inst`` first schedules a prompt."""
        return ttft_estimate_s(inst, 1.0)

    def settings(self) -> dict[str, float]:
        """The policy's settings, for the metrics document under the policy's name (empty: none)."""
        return {}


class FcfsScheduler(Scheduler):
    """First come, first served; the victim is the latest arrival."""

    name = "fcfs"
    description = "first come, first served (arrival time)"

    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        return sim.arr[rid]

    def victim(self, sim: Simulator, inst: Instance) -> int:
        arr = sim.arr
        return max(inst.running, key=lambda r: (arr[r], r))


class SjfScheduler(Scheduler):
    """Shortest prompt first; the victim is the longest prompt."""

    name = "sjf"
    description = "shortest job first (prompt tokens)"

    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        return float(sim.prompt[rid])

    def victim(self, sim: Simulator, inst: Instance) -> int:
        prompt = sim.prompt
        return max(inst.running, key=lambda r: (float(prompt[r]), r))


class EdfScheduler(Scheduler):
    """Earliest TTFT deadline (arrival + TTFT SLO) first; the victim is the latest deadline."""

    name = "edf"
    description = "earliest deadline first (arrival + TTFT SLO)"

    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        return sim.arr[rid] + sim.ttft_slo[rid]

    def victim(self, sim: Simulator, inst: Instance) -> int:
        arr, slo = sim.arr, sim.ttft_slo
        return max(inst.running, key=lambda r: (arr[r] + slo[r], r))


__all__ = [
    "EdfScheduler",
    "FcfsScheduler",
    "Scheduler",
    "SjfScheduler",
    "Take",
    "cascade_estimate_s",
    "ttft_estimate_s",
]
