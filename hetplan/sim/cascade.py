"""CASCADE's budget scheduling (DESIGN §3.4) as a :class:`~hetplan.sim.scheduler.Scheduler`.

The TTFT estimate of an instance is ``T̂ = κ·(T(current load) + T(max load))/2``, where T(current load) is the
performance model's latency of the batch the instance's queued prompt tokens would form (capped at
``max_num_batched_tokens``) and T(max load) that of a full batch (:func:`~hetplan.sim.scheduler.ttft_estimate_s`);
a request's budget is ``SLO − wait − T̂ = (arrival + TTFT SLO) − now − T̂``. Budget > 0 → Tier 1, else Tier 2.
Each batch reserves a share q₂ of its prefill tokens (and of its free sequence slots) for Tier 2, Tier 1 fills the
rest, and Tier 2 takes whatever Tier 1 leaves (work conserving); within a tier, least budget first. Since T̂ is
common to one instance's queue, "least budget" is the earliest deadline and the tier split is one bisection of the
queue. A sequence that already has its first token is keyed by its latest useful start, ``first token + TPOT
SLO·(n−1) − remaining tokens·TPOT SLO``. Under memory pressure the victim is the running sequence with the largest
budget; its KV goes to a host tier (DRAM while it has room, else SSD) and on re-admission it is restored by
transfer if ``tokens·kv bytes / tier bandwidth + latency`` fits its budget, else recomputed. κ and q₂ come from
``hetplan calibrate`` (defaults 1.0 and 0.1).

Source: CASCADE's estimator, tiers, reserved share, victim rule and budget-aware restore follow DESIGN §3.4. The
bisection form, the decode-phase key and the host tier model are hetplan's own reconstruction (the paper's exact
load definition is not published).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetplan.errors import InputError
from hetplan.sim.instance import Instance
from hetplan.sim.scheduler import Scheduler, Take, ttft_estimate_s
from hetplan.units import GB, GIB

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator

_INF = float("inf")


@dataclass(frozen=True)
class CascadeSettings:
    """CASCADE's settings.

    Attributes:
        kappa: safety coefficient κ of the TTFT estimate (calibrate with ``hetplan calibrate``).
        q2: share of each batch reserved for Tier 2 (0..1).
        dram_gib: host DRAM for offloaded KV per instance, GiB.
        dram_gb_per_s / ssd_gb_per_s: restore bandwidth of each tier, bytes/s ÷ 1e9.
        restore_latency_s: fixed latency per restore.
    """

    kappa: float = 1.0
    q2: float = 0.1
    dram_gib: float = 256.0
    dram_gb_per_s: float = 25.0
    ssd_gb_per_s: float = 5.0
    restore_latency_s: float = 0.001

    def __post_init__(self) -> None:
        if not (self.kappa > 0):
            raise InputError(f"CASCADE kappa must be > 0, got {self.kappa}", fix="pass e.g. --kappa 1.2")
        if not (0.0 <= self.q2 <= 1.0):
            raise InputError(f"CASCADE q2 must be in [0, 1], got {self.q2}", fix="pass e.g. --q2 0.1")
        if self.dram_gb_per_s <= 0 or self.ssd_gb_per_s <= 0 or self.dram_gib < 0:
            raise InputError("CASCADE tier bandwidths must be > 0 and DRAM size >= 0", fix="fix the tier settings")


class CascadeScheduler(Scheduler):
    """CASCADE (module docstring)."""

    name = "cascade"
    description = "CASCADE: SLO budgets, Tier 1/Tier 2 with reserved share q2, largest-budget preemption"

    def __init__(self, settings: CascadeSettings | None = None) -> None:
        self.cfg = settings or CascadeSettings()
        self.kappa = self.cfg.kappa
        self.q2 = self.cfg.q2

    @classmethod
    def create(cls, cascade: CascadeSettings | None = None) -> Scheduler:
        return cls(cascade)

    def t_hat_s(self, inst: Instance) -> float:
        """T̂ of ``inst`` now, with this scheduler's κ."""
        return ttft_estimate_s(inst, self.kappa)

    @staticmethod
    def decode_key(sim: Simulator, inst: Instance, rid: int, generated: int) -> float:
        """Latest useful start of a sequence that has its first token: its E2E deadline ``first + TPOT SLO·(n−1)``
        minus the remaining tokens at the instance's estimated step time."""
        out = sim.out[rid]
        return sim.first[rid] + sim.tpot_slo[rid] * (out - 1) - (out - generated) * inst.step_est_s

    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        if sim.first[rid] < _INF:
            return self.decode_key(sim, inst, rid, sim.gen[rid])
        return sim.arr[rid] + sim.ttft_slo[rid]

    def victim(self, sim: Simulator, inst: Instance) -> int:
        step, gen, join, dk = inst.step_idx, sim.gen, sim.join, self.decode_key
        return max(inst.running, key=lambda r: (dk(sim, inst, r, gen[r] + step - join[r]), r))

    def on_preempt(self, sim: Simulator, inst: Instance, rid: int, ctx: int) -> None:
        gib = ctx * sim.kv_bytes_per_token / GIB
        sim.offload[rid] = 1 if inst.host_gib + gib <= self.cfg.dram_gib else 2
        if sim.offload[rid] == 1:
            inst.host_gib += gib

    def restore_s(self, sim: Simulator, rid: int) -> float:
        cfg = self.cfg
        bw = (cfg.dram_gb_per_s if sim.offload[rid] == 1 else cfg.ssd_gb_per_s) * GB
        return sim.need[rid] * sim.kv_bytes_per_token / bw + cfg.restore_latency_s

    def settings(self) -> dict[str, float]:
        return {"kappa": self.kappa, "q2": self.q2}

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
        """Tier 2's reserved share first, then Tier 1, then Tier 2 with what Tier 1 left (module docstring)."""
        waiting = inst.waiting
        thr = now + self.t_hat_s(inst)
        split = bisect.bisect_left(waiting, (thr, -1))
        key = sim.key
        t2_cont = sum(g for rid, g in pieces[:before] if key[rid] < thr)  # Tier-2 prompts already started
        t2 = 0  # next Tier-2 entry (waiting[:split], least budget first)
        t2_tokens = 0.0
        has_t2 = split > 0 or t2_cont > 0
        # Tier 2's reserved share: a credit of ceil(q2 x the iteration's token budget) per iteration, spent by
        # Tier-2 work (including chunks of prompts already started), so the long-run share is at least q2
        if self.q2 > 0 and has_t2:
            credit = min(inst.t2_credit + math.ceil(self.q2 * total_budget), float(inst.tok_cap)) - t2_cont
            s_lim = max(1, int(self.q2 * state[1] + 0.5))
            used_s = 0.0
            while t2 < split and used_s < s_lim and credit >= 1:
                t0 = state[0]
                if not take(t2, min(credit, state[0]), state[1]):
                    break
                t2 += 1
                used_s += 1
                credit -= t0 - state[0]
                t2_tokens += t0 - state[0]
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
            t2_tokens += t0 - state[0]
        if tier1_left and has_t2:
            sim.counters["saturated_tokens"] += total_budget
            sim.counters["tier2_tokens"] += t2_tokens + t2_cont


__all__ = ["CascadeScheduler", "CascadeSettings"]
