"""CASCADE's budget scheduling (DESIGN §3.4) as a :class:`~hetplan.sim.scheduler.Scheduler`.

The mechanism, each part tied to DESIGN §3.4's text (the paper's own text is not stored in this project's
reference library, so the section cited is hetplan's summary of it):

- **T̂ per request** ("TTFT estimate T̂ = κ · (T(current load) + T(max load)) / 2"): this request's own remaining
  prefill work, chunked as the engine chunks it, at its instance's current and maximal load, plus the KV transfer
  on a disaggregated prefill instance (:mod:`hetplan.sim.ttft_estimate`). Two waiting requests of different lengths
  have different T̂, so least-budget-first is not EDF: a long prompt's budget runs out sooner, and it is served
  earlier in Tier 1 or demoted to Tier 2 earlier.
- **κ per class** ("κ = safety coefficient, calibrated so that P(actual TTFT ≤ T̂) ≥ q on a trace"): ``kappa``
  for every request, overridden per class by ``kappa_by_class`` (``hetplan calibrate`` fits one per class).
- **q₂ per class**: ``q2`` for every request, overridden per class by ``q2_by_class`` (``hetplan calibrate``
  chooses one per class, :func:`choose_q2_by_class`). The reserved share belongs to an iteration, not a request:
  hetplan's reconstruction takes the q₂ of the request first in line in Tier 2 (the one the reserve serves
  first), so a class with a larger q₂ gets a larger reserve while one of its requests heads Tier 2.
- **budget, re-computed every iteration** ("Budget = SLO − elapsed wait − T̂ ... re-tier as budgets change"): at
  every scheduling iteration of an instance the budget of each waiting request is ``arrival + TTFT SLO − now −
  T̂`` with T̂ at the instance's load now, so requests move between tiers as they wait and as the load changes.
- **decode admission by a TPOT budget**: a sequence that already has its first token (its KV transferred to a
  decode instance, or preempted) is budgeted against its TPOT SLO, not the prefill T̂: ``first token + TPOT
  SLO·(n̂−1) − r̂ · step time − now`` (minus T̂ of its recompute when its KV is gone), with r̂ the *predicted*
  remaining output (:mod:`hetplan.sim.predict`: the sizing data's outputs for its prompt length, beyond what it
  has generated), n̂ = generated + r̂, and the instance's *measured* step time (a running average of its
  iterations, ``Instance.step_est_s``). The true output length is never read.
- **tiers** ("Budget > 0 → Tier 1, else Tier 2; Tier 2 keeps a reserved share q₂ of each batch; within a tier,
  least remaining budget first"): each iteration reserves a share q₂ of its prefill tokens (a credit of ⌈q₂ ×
  the token budget⌉ per iteration, carried over, so the long-run share is at least q₂; and of its free sequence
  slots) for Tier 2, Tier 1 fills the rest in least-budget order, and Tier 2 takes whatever Tier 1 leaves (work
  conserving).
- **preemption and restore** ("KV restore from DRAM/NVMe only if transfer time fits the budget, else recompute;
  under memory pressure preempt the request with the largest budget"): the victim is the running sequence with
  the largest TPOT budget; its KV goes to the host tier (the run's ``SimConfig.host_kv``, shared with every
  policy, else this scheduler's own), and on re-admission it is restored when ``tokens · KV bytes / tier
  bandwidth + latency`` fits its budget, else recomputed.

Choices the text leaves open, and which hetplan took (``docs/cascade.md`` shows the alternatives' numbers):

- order inside Tier 2: ``tier2_order="least-budget"`` (the text's "within a tier, least remaining budget first":
  the most overdue first) by default; ``"largest-budget"`` serves the least overdue first (the ones closest to
  being saved);
- the load definitions of T(current) and T(max), the output predictor and the running average of step times
  in decode budgets are hetplan's own reconstruction; T̂ prices the prompt's whole prefill (its prefix-cache
  hit is not subtracted: conservative where prefixes are reused).
- prefix blocks evicted from HBM spill to the same host tier as preempted sequences (:mod:`hetplan.sim.prefix`),
  DRAM then SSD, and a later hit there is restored rather than recomputed.

Source: DESIGN §3.4 (CASCADE, Microsoft/UBC/NVIDIA); the per-request estimator, the credit form of the reserved
share, the decode budgets and the host tier model are hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from hetplan.errors import InputError
from hetplan.sim import hostkv
from hetplan.sim.instance import Instance
from hetplan.sim.scheduler import Scheduler, Take
from hetplan.sim.ttft_estimate import estimator

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator

_INF = float("inf")
TIER2_ORDERS = ("least-budget", "largest-budget")


@dataclass(frozen=True)
class CascadeSettings:
    """CASCADE's settings.

    Attributes:
        kappa: safety coefficient κ of the TTFT estimate (calibrate with ``hetplan calibrate``).
        q2: share of each batch reserved for Tier 2 (0..1).
        kappa_by_class: ``((class, κ), ...)``: κ of the requests of a class (others use ``kappa``).
        q2_by_class: ``((class, q₂), ...)``: q₂ of the requests of a class (others use ``q2``); an iteration's
            reserved share is the q₂ of the Tier-2 request first in line (module docstring).
        tier2_order: ``least-budget`` (default) or ``largest-budget`` first inside Tier 2.
        dram_gib: host DRAM for offloaded KV per instance, GiB (used when the run has no shared host tier).
        dram_gb_per_s / ssd_gb_per_s: restore bandwidth of each tier, bytes/s ÷ 1e9.
        restore_latency_s: fixed latency per restore.

    Raises:
        InputError: κ ≤ 0, q₂ outside [0, 1], an unknown Tier-2 order or bad tier settings.
    """

    kappa: float = 1.0
    q2: float = 0.1
    kappa_by_class: tuple[tuple[str, float], ...] = ()
    q2_by_class: tuple[tuple[str, float], ...] = ()
    tier2_order: str = "least-budget"
    dram_gib: float = 256.0
    dram_gb_per_s: float = 25.0
    ssd_gb_per_s: float = 5.0
    restore_latency_s: float = 0.001

    def __post_init__(self) -> None:
        if not (self.kappa > 0) or not math.isfinite(self.kappa):
            raise InputError(f"CASCADE kappa must be > 0, got {self.kappa}", fix="pass e.g. --kappa 1.2")
        for name, k in self.kappa_by_class:
            if not (k > 0) or not math.isfinite(k):
                raise InputError(f"CASCADE kappa of class {name!r} must be > 0, got {k}", fix="re-run calibrate")
        if not (0.0 <= self.q2 <= 1.0):
            raise InputError(f"CASCADE q2 must be in [0, 1], got {self.q2}", fix="pass e.g. --q2 0.1")
        for name, q in self.q2_by_class:
            if not (0.0 <= q <= 1.0):
                raise InputError(f"CASCADE q2 of class {name!r} must be in [0, 1], got {q}", fix="re-run calibrate")
        if self.tier2_order not in TIER2_ORDERS:
            raise InputError(
                f"CASCADE tier2_order must be one of {', '.join(TIER2_ORDERS)}, got {self.tier2_order!r}",
                fix="use least-budget (default) or largest-budget",
            )
        if self.dram_gb_per_s <= 0 or self.ssd_gb_per_s <= 0 or self.dram_gib < 0:
            raise InputError("CASCADE tier bandwidths must be > 0 and DRAM size >= 0", fix="fix the tier settings")

    @property
    def tier(self) -> hostkv.HostKvTier:
        """This scheduler's own host tier (used when the run has no shared one)."""
        return hostkv.HostKvTier(self.dram_gib, self.dram_gb_per_s, self.ssd_gb_per_s, self.restore_latency_s)


class CascadeScheduler(Scheduler):
    """CASCADE (module docstring)."""

    name = "cascade"
    description = "CASCADE: per-request SLO budgets, Tier 1/Tier 2 with reserved share q2, largest-budget preemption"

    def __init__(self, settings: CascadeSettings | None = None) -> None:
        self.cfg = settings or CascadeSettings()
        self.kappa = self.cfg.kappa
        self.q2 = self.cfg.q2
        self.largest_first_t2 = self.cfg.tier2_order == "largest-budget"
        self.kappa_req = np.zeros(0)
        self.q2_req = np.zeros(0)  # per request: its class's q₂
        self.deadline = np.zeros(0)  # per request: the static part of its budget (seconds from 0)
        self.remaining = np.zeros(0)  # per request: prompt tokens to prefill when it entered the queue
        self.t_static = np.zeros(0)  # per request: κ·(T(max load) + 2·transfer)/2, fixed while it waits

    @classmethod
    def create(cls, cascade: CascadeSettings | None = None) -> Scheduler:
        return cls(cascade)

    def bind(self, sim: Simulator) -> None:
        """Per-request κ (by class), deadline and remaining-prefill arrays for ``sim``'s requests."""
        n = len(sim.arr)
        names = sim.stream.class_names
        by = dict(self.cfg.kappa_by_class)
        per_class = np.array([by.get(name, self.kappa) for name in names] or [self.kappa], dtype=float)
        cid = np.asarray(sim.stream.class_id, dtype=np.int64)
        self.kappa_req = per_class[cid] if n else np.zeros(0)
        q2_by = dict(self.cfg.q2_by_class)
        q2_class = np.array([q2_by.get(name, self.q2) for name in names] or [self.q2], dtype=float)
        self.q2_req = q2_class[cid] if n else np.zeros(0)
        self.deadline = np.zeros(n)
        self.remaining = np.zeros(n)
        self.t_static = np.zeros(n)

    def t_hat_s(
        self,
        sim: Simulator,
        inst: Instance,
        rids: np.ndarray,
        left: np.ndarray | None = None,
        now: float | None = None,
        others: np.ndarray | None = None,
    ) -> np.ndarray:
        """T̂ of requests ``rids`` (shape (k,)) on ``inst`` at ``now`` with their class's κ, seconds; ``left``:
        their prompt tokens to prefill (default: as they entered the queue); ``others``: started prompts' tokens
        ahead of each (default: all of ``inst``'s)."""
        r = self.remaining[rids] if left is None else left
        t0 = estimator(sim, inst).t0_s(inst, r, now=now, others=others)
        return np.asarray(self.kappa_req[rids] * t0, dtype=float)

    def budgets_s(self, sim: Simulator, inst: Instance, rids: np.ndarray, now: float) -> np.ndarray:
        """Remaining budgets of waiting requests ``rids`` at ``now`` (seconds; ≤ 0: Tier 2): ``deadline − now −
        T̂`` with T̂ at ``inst``'s load now (its max-load half kept per request since it entered the queue)."""
        cur = estimator(sim, inst).current_s(inst, self.remaining[rids], now)
        t_hat = self.t_static[rids] + 0.5 * self.kappa_req[rids] * cur
        return np.asarray(self.deadline[rids] - now - t_hat, dtype=float)

    @staticmethod
    def decode_key(sim: Simulator, inst: Instance, rid: int, generated: int) -> float:
        """Latest useful start of a sequence that has its first token: its E2E deadline ``first + TPOT SLO·(n̂−1)``
        minus the predicted remaining tokens r̂ at the instance's measured step time (its TPOT budget is this minus
        now); n̂ = ``generated`` + r̂, r̂ from the run's output predictor (:mod:`hetplan.sim.predict`): the true
        output length is not known to a scheduler."""
        left = sim.predictor.remaining(sim.prompt[rid], generated)
        return sim.first[rid] + sim.tpot_slo[rid] * (generated + left - 1) - left * inst.step_est_s

    def key(self, sim: Simulator, inst: Instance, rid: int) -> float:
        if sim.first[rid] < _INF:
            k = self.decode_key(sim, inst, rid, sim.gen[rid])
        else:
            k = sim.arr[rid] + sim.ttft_slo[rid]
        self.deadline[rid] = k
        need = sim.need[rid]
        self.remaining[rid] = need
        if need > 0:
            rest = estimator(sim, inst).max_s(np.array([float(need)]))
            self.t_static[rid] = 0.5 * self.kappa_req[rid] * float(rest[0])
        else:
            self.t_static[rid] = 0.0
        return k

    def victim(self, sim: Simulator, inst: Instance) -> int:
        step, gen, join, dk = inst.step_idx, sim.gen, sim.join, self.decode_key
        return max(inst.running, key=lambda r: (dk(sim, inst, r, gen[r] + step - join[r]), r))

    def _tier(self, sim: Simulator) -> hostkv.HostKvTier:
        return sim.cfg.host_kv or self.cfg.tier

    def host_tier(self, sim: Simulator) -> hostkv.HostKvTier | None:
        """The run's host tier, else this scheduler's own: its preempted sequences and the prefix blocks evicted
        from HBM use the same one."""
        return self._tier(sim)

    def on_preempt(self, sim: Simulator, inst: Instance, rid: int, ctx: int) -> None:
        hostkv.offload(sim, inst, self._tier(sim), rid, ctx)

    def restore_s(self, sim: Simulator, rid: int) -> float:
        return hostkv.restore_s(sim, self._tier(sim), rid)

    def restore_ok(self, sim: Simulator, inst: Instance, rid: int, restore: float, now: float) -> bool:
        """Restore only when the transfer fits the request's TPOT budget (DESIGN §3.4), else recompute."""
        return restore <= sim.key[rid] - now

    def settings(self) -> dict[str, float]:
        out: dict[str, float] = {"kappa": self.kappa, "q2": self.q2}
        return out

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
        """Tier 2's reserved share first, then Tier 1, then Tier 2 with what Tier 1 left (module docstring); every
        waiting request's budget is computed afresh at ``now``."""
        waiting = inst.waiting
        m = len(waiting)
        rids = np.array([x[1] for x in waiting], dtype=np.int64)
        b = self.budgets_s(sim, inst, rids, now)
        in_t2 = b <= 0.0
        pos = np.arange(m)
        t1 = pos[~in_t2]
        t1 = t1[np.argsort(b[t1], kind="stable")].tolist()
        t2a = pos[in_t2]
        t2a = t2a[np.argsort(-b[t2a] if self.largest_first_t2 else b[t2a], kind="stable")]
        t2 = t2a.tolist()
        # Tier-2 prompts already started (their chunks continue first): budgets with what is left of them
        t2_cont = 0.0
        if before:
            started = np.array([rid for rid, _ in pieces[:before]], dtype=np.int64)
            left = np.array([sim.need[r] - sim.done_pref[r] for r in started.tolist()], dtype=float)
            ahead = np.maximum(estimator(sim, inst).started_tokens(inst) - left, 0.0)  # not itself
            bs = self.deadline[started] - now - self.t_hat_s(sim, inst, started, left, now, ahead)
            t2_cont = float(sum(g for (_, g), late in zip(pieces[:before], (bs <= 0).tolist(), strict=True) if late))
        nxt = 0  # next Tier-2 entry
        t2_tokens = 0.0
        has_t2 = bool(t2) or t2_cont > 0
        # Tier 2's reserved share: a credit of ceil(q2 x the iteration's token budget) per iteration, spent by
        # Tier-2 work (including chunks of prompts already started), so the long-run share is at least q2; q2 is
        # the class q2 of the Tier-2 request first in line (the run's q2 when only started chunks are in Tier 2)
        q2 = float(self.q2_req[rids[t2[0]]]) if t2 else self.q2
        if q2 > 0 and has_t2:
            credit = min(inst.t2_credit + math.ceil(q2 * total_budget), float(inst.tok_cap)) - t2_cont
            s_lim = max(1, int(q2 * state[1] + 0.5))
            used_s = 0
            while nxt < len(t2) and used_s < s_lim and credit >= 1:
                t0 = state[0]
                if not take(t2[nxt], min(credit, state[0]), state[1]):
                    break
                nxt += 1
                used_s += 1
                credit -= t0 - state[0]
                t2_tokens += t0 - state[0]
            inst.t2_credit = credit
        tier1_left = False
        for i in t1:
            if not take(i, state[0], state[1]):
                tier1_left = True
                break
        for i in t2[nxt:]:  # work conserving: Tier 2 takes what Tier 1 left
            t0 = state[0]
            if not take(i, state[0], state[1]):
                break
            t2_tokens += t0 - state[0]
        if tier1_left and has_t2:
            sim.counters["saturated_tokens"] += total_budget
            sim.counters["tier2_tokens"] += t2_tokens + t2_cont


def choose_q2_by_class(
    settings: CascadeSettings,
    class_names: Sequence[str],
    candidates: Sequence[float],
    objective: Callable[[CascadeSettings], float],
    base_objective: float,
) -> tuple[tuple[str, float], ...]:
    """q₂ per class, chosen from ``settings`` (its ``q2`` already the best single value, ``base_objective`` its
    objective): one coordinate pass, each class's q₂ over ``candidates`` with the other classes at ``q2`` (the
    largest objective; ties: the smaller q₂), then the combination is run once and kept only when its objective is
    at least ``base_objective`` (else ``()``: every class uses ``q2``). One class: ``()`` without a run.

    Args:
        objective: the calibration objective of a run with given settings (goodput × Jain in ``hetplan
            calibrate``); runs ``len(class_names) · (len(candidates) − 1) + 1`` times at most.
    """
    if len(class_names) < 2:
        return ()
    chosen: list[tuple[str, float]] = []
    for name in class_names:
        best, best_q = base_objective, settings.q2
        for q in candidates:
            if q == settings.q2:
                continue
            val = objective(replace(settings, q2_by_class=((name, q),)))
            if val > best or (val == best and q < best_q):
                best, best_q = val, q
        chosen.append((name, best_q))
    per = tuple(sorted((n, q) for n, q in chosen if q != settings.q2))
    if not per:
        return ()
    return per if objective(replace(settings, q2_by_class=per)) >= base_objective else ()


__all__ = ["TIER2_ORDERS", "CascadeScheduler", "CascadeSettings", "choose_q2_by_class"]
