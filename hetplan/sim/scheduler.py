"""The scheduler interface of the simulator and the static-key policies (FCFS, SJF, EDF).

The engine (:mod:`hetplan.sim.engine`) runs the mechanism: iterations, KV accounting, transfers, restores. What a
policy decides goes through a :class:`Scheduler`, whose hooks the engine calls and whose kind it never tests:

- ``key``: the priority of a request entering an instance's waiting queue (smaller is served first); the queue is
  kept sorted by it.
- ``admit``: which waiting requests join the next iteration, as calls of the engine's ``take`` (it admits one
  waiting request within token and slot limits and says whether it did); the default is one pass in key order
  that stops at the first request that does not fit.
- ``victim``: the running sequence to preempt when the next iteration's KV would not fit.
- ``on_preempt`` / ``restore_s`` / ``restore_ok``: where a victim's KV goes (default: to the run's host KV tier,
  ``SimConfig.host_kv``, when it has one, else dropped and the request recomputed), how long bringing it back
  takes, and whether to bring it back or recompute (default: restore when the transfer is faster than
  recomputing the prefill on an idle instance).
- ``bind``: called once by the simulator before the run (per-request state of a policy).
- ``estimate_s``: the unscaled TTFT estimate T̂₀ of one request recorded for calibration (CASCADE's per-request
  estimator, :mod:`hetplan.sim.ttft_estimate`, for every policy).
- ``settings``: the policy's settings for the metrics document (none for the static policies).

Static-key policies order the waiting queue by a key fixed at arrival and preempt the running sequence with the
largest key (ties: the higher request index):

- ``fcfs``: arrival time (vLLM's default; the victim is the latest arrival, as vLLM preempts the newest).
- ``sjf``: prompt length (shortest prompt first).
- ``oracle-sjf-total``: total work, prompt + output tokens, the output length read from the trace: an **oracle**
  reference no engine can run (``oracle = True``; the old name ``sjf-total`` is read as it). No other policy reads
  a request's true output length; CASCADE uses the predicted one (:mod:`hetplan.sim.predict`).
- ``edf``: deadline = arrival + the request's TTFT SLO.

CASCADE is in :mod:`hetplan.sim.cascade`; the registry by name in :mod:`hetplan.sim.policies`.

Source: FCFS/SJF/EDF are the baselines CASCADE compares against (DESIGN §3.4); the hook split follows Vidur's
replaceable schedulers (Agrawal et al., MLSys 2024); the T̂ estimator is CASCADE's (:mod:`hetplan.sim.ttft_estimate`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from hetplan.sim import hostkv
from hetplan.sim.instance import Instance
from hetplan.sim.ttft_estimate import request_t0_s

if TYPE_CHECKING:
    from hetplan.sim.cascade import CascadeSettings
    from hetplan.sim.engine import Simulator

Take = Callable[[int, float, float], bool]
"""``take(i, token_limit, slot_limit)``: admit ``inst.waiting[i]`` within the limits; False: it did not fit."""


def cascade_estimate_s(t_current_s: float, t_max_s: float, kappa: float) -> float:
    """CASCADE's TTFT estimate ``κ·(T(current load) + T(max load))/2`` (DESIGN §3.4), seconds."""
    return kappa * (t_current_s + t_max_s) / 2.0


class Scheduler(ABC):
    """A scheduling policy, as the engine sees it (module docstring). ``sim`` is the running
    :class:`~hetplan.sim.engine.Simulator`; its per-request lists (``arr``, ``prompt``, ``out``, ``ttft_slo``,
    ``tpot_slo``, ``first``, ``gen``, ``join``, ``key``, ``need``, ``offload``) are indexed by request; ``out`` (the
    true output length) is for policies with ``oracle = True`` only, the others use ``sim.predictor``."""

    name: ClassVar[str]
    description: ClassVar[str]
    oracle: ClassVar[bool] = False
    """True for a reference policy that reads what no engine knows (a request's true output length, ``sim.out``);
    only such a policy may read it, and its name starts with ``oracle-``."""

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

    def bind(self, sim: Simulator) -> None:  # noqa: B027 (a no-op hook)
        """Called once by ``sim`` before the run, after its per-request lists exist. Default: nothing."""

    def on_preempt(self, sim: Simulator, inst: Instance, rid: int, ctx: int) -> None:
        """``rid`` (``ctx`` tokens of KV) was preempted: set ``sim.offload[rid]`` to keep its KV on a host tier
        (1 DRAM, 2 SSD). Default: onto the run's host tier (``SimConfig.host_kv``) when it has one, else the KV is
        dropped and the request recomputed."""
        tier = sim.cfg.host_kv
        if tier is not None:
            hostkv.offload(sim, inst, tier, rid, ctx)

    def host_tier(self, sim: Simulator) -> hostkv.HostKvTier | None:
        """The host tier this policy offloads to, which prefix blocks evicted from HBM spill to too
        (:mod:`hetplan.sim.prefix`). Default: the run's (``SimConfig.host_kv``), None when it has none."""
        return sim.cfg.host_kv

    def restore_s(self, sim: Simulator, rid: int) -> float:
        """Seconds to bring back the KV of ``rid`` from its host tier (only asked when ``on_preempt`` kept it);
        infinite when the run has no host tier."""
        tier = sim.cfg.host_kv
        return math.inf if tier is None else hostkv.restore_s(sim, tier, rid)

    def restore_ok(self, sim: Simulator, inst: Instance, rid: int, restore: float, now: float) -> bool:
        """Whether to restore the offloaded KV of ``rid`` (``restore`` seconds) rather than recompute it. Default:
        when the transfer is faster than prefilling its ``need`` tokens alone on ``inst``."""
        need = float(sim.need[rid])
        return restore < inst.cost.prefill_s(need, need * need, 1)

    def estimate_s(self, sim: Simulator, inst: Instance, rid: int, now: float) -> float:
        """The unscaled TTFT estimate T̂₀ of ``rid`` on ``inst`` at ``now`` (seconds), recorded for calibration
        when a prompt is first scheduled (:func:`hetplan.sim.ttft_estimate.request_t0_s`)."""
        return request_t0_s(sim, inst, rid, now)

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


class SjfTotalScheduler(Scheduler):
    """ORACLE reference: shortest total work (prompt + output tokens) first; the victim is the largest total.
    The output length is read from the trace, which no engine knows: the strongest form of SJF, kept only as a
    bound to compare deployable policies against (``oracle-sjf-total``; ``sjf-total`` is read as it)."""

    name = "oracle-sjf-total"
    description = "ORACLE reference, not deployable: shortest job first on prompt + true output tokens"
    oracle = True

    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        return float(sim.prompt[rid] + sim.out[rid])

    def victim(self, sim: Simulator, inst: Instance) -> int:
        prompt, out = sim.prompt, sim.out
        return max(inst.running, key=lambda r: (float(prompt[r] + out[r]), r))


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
    "SjfTotalScheduler",
    "Take",
    "cascade_estimate_s",
]
