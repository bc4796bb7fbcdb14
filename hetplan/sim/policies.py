"""Scheduling policies of the simulator, behind a registry (``POLICIES``, :func:`get_policy`).

Every policy orders an instance's waiting queue by a static key (smaller first) and picks the preemption victim
among running sequences (largest key first):

- ``fcfs``: arrival time (vLLM's default; the victim is the latest arrival, as vLLM preempts the newest).
- ``sjf``: prompt length (shortest prompt first).
- ``edf``: deadline = arrival + the request's TTFT SLO.
- ``cascade``: CASCADE's budget scheduling (DESIGN §3.4). The TTFT estimate of an instance is
  ``T̂ = κ·(T(current load) + T(max load))/2``, where T(current load) is the performance model's latency of the
  batch the instance's queued prompt tokens would form (capped at ``max_num_batched_tokens``) and T(max load)
  that of a full batch; a request's budget is ``SLO − wait − T̂ = (arrival + TTFT SLO) − now − T̂``.
  Budget > 0 → Tier 1, else Tier 2.
  Each batch reserves a share q₂ of its prefill tokens (and of its free sequence slots) for Tier 2, Tier 1 fills
  the rest, and Tier 2 takes whatever Tier 1 leaves (work conserving); within a tier, least budget first. Since
  T̂ is common to one instance's queue, "least budget" is the earliest deadline and the tier split is one
  bisection of the queue. A sequence that already has its first token is keyed by its latest useful start,
  ``first token + TPOT SLO·(n−1) − remaining tokens·TPOT SLO``. Under memory pressure the victim is the running
  sequence with the largest budget; its KV goes to a host tier (DRAM while it has room, else SSD) and on
  re-admission it is restored by transfer if ``tokens·kv bytes / tier bandwidth + latency`` fits its budget,
  else recomputed. κ and q₂ come from ``hetplan calibrate`` (defaults 1.0 and 0.1).

Source: FCFS/SJF/EDF are the baselines CASCADE compares against; CASCADE's estimator, tiers, reserved share,
victim rule and budget-aware restore follow DESIGN §3.4. The bisection form, the decode-phase key and the host
tier model are hetplan's own reconstruction (the paper's exact load definition is not published).
"""

from __future__ import annotations

from dataclasses import dataclass

from hetplan.errors import InputError


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


@dataclass(frozen=True)
class Policy:
    """A scheduling policy: ``kind`` selects the queue key; ``cascade`` is set for the tiered policy."""

    name: str
    kind: str
    cascade: CascadeSettings | None = None

    def key(self, arrival_s: float, prompt_tokens: int, ttft_slo_s: float) -> float:
        """Static priority key of a request that still needs its first token (smaller is served first)."""
        if self.kind == "fcfs":
            return arrival_s
        if self.kind == "sjf":
            return float(prompt_tokens)
        return arrival_s + ttft_slo_s


POLICIES: dict[str, str] = {
    "fcfs": "first come, first served (arrival time)",
    "sjf": "shortest job first (prompt tokens)",
    "edf": "earliest deadline first (arrival + TTFT SLO)",
    "cascade": "CASCADE: SLO budgets, Tier 1/Tier 2 with reserved share q2, largest-budget preemption",
}


def get_policy(name: str, cascade: CascadeSettings | None = None) -> Policy:
    """The policy called ``name`` (case-insensitive).

    Raises:
        InputError: unknown name (the message lists the known ones).
    """
    kind = name.lower().strip()
    if kind not in POLICIES:
        raise InputError(
            f"unknown policy {name!r}", f"known: {', '.join(POLICIES)}", "pass --policy fcfs|sjf|edf|cascade"
        )
    return Policy(kind, kind, (cascade or CascadeSettings()) if kind == "cascade" else None)


def cascade_estimate_s(t_current_s: float, t_max_s: float, kappa: float) -> float:
    """CASCADE's TTFT estimate ``κ·(T(current load) + T(max load))/2`` (DESIGN §3.4), seconds."""
    return kappa * (t_current_s + t_max_s) / 2.0


__all__ = ["POLICIES", "CascadeSettings", "Policy", "cascade_estimate_s", "get_policy"]
