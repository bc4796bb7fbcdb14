"""A host KV tier (DRAM, then SSD) that a preempted sequence's KV can be offloaded to and restored from.

When a run has a host tier (``SimConfig.host_kv``), every policy's preemption offloads the victim's KV to it (to
DRAM while the instance's DRAM share has room, else to SSD) instead of dropping it, and on re-admission the
policy decides between restoring it (``tokens · KV bytes / tier bandwidth + latency``) and recomputing it
(:meth:`~hetplan.sim.scheduler.Scheduler.restore_ok`): the static policies restore when the transfer is faster
than recomputing the prefill, CASCADE only when the transfer fits the request's budget. Without a host tier
(the default) a victim's KV is dropped and recomputed, as vLLM V1 does, except under CASCADE, which then uses the
tier of its own settings (``CascadeSettings``; its behaviour before the tier was shared).

The same tier holds prefix blocks evicted from an instance's HBM prefix cache (:mod:`hetplan.sim.prefix`): they
spill to DRAM (the room the instance's offloaded sequences leave), DRAM's least recent spill to SSD (``ssd_gib``),
and a later lookup that finds them there restores them instead of recomputing them.

Source: offload to host memory as vLLM V0's swap preemption and LMCache/Mooncake's KV stores do; the tier model
(fixed bandwidth and latency, DRAM before SSD) is hetplan's own reconstruction. Calibrate the bandwidths with a
host↔device copy benchmark (e.g. ``nvbandwidth``) and the SSD's sequential read figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetplan.errors import InputError
from hetplan.units import GB, GIB

if TYPE_CHECKING:
    from hetplan.sim.engine import Simulator
    from hetplan.sim.instance import Instance


@dataclass(frozen=True)
class HostKvTier:
    """Host memory for offloaded KV.

    Attributes:
        dram_gib: host DRAM for offloaded KV per instance, GiB (0: SSD only).
        dram_gb_per_s / ssd_gb_per_s: restore bandwidth of each tier, bytes/s ÷ 1e9.
        restore_latency_s: fixed latency per restore, seconds.
        ssd_gib: SSD room for spilled prefix blocks per instance, GiB (default unbounded; preempted sequences
            offloaded to SSD are not limited by it).

    Raises:
        InputError: a bandwidth ≤ 0, a negative DRAM or SSD size or latency.
    """

    dram_gib: float = 256.0
    dram_gb_per_s: float = 25.0
    ssd_gb_per_s: float = 5.0
    restore_latency_s: float = 0.001
    ssd_gib: float = math.inf

    def __post_init__(self) -> None:
        bad_size = self.dram_gib < 0 or not self.ssd_gib >= 0
        if self.dram_gb_per_s <= 0 or self.ssd_gb_per_s <= 0 or bad_size or self.restore_latency_s < 0:
            raise InputError(
                "host KV tier bandwidths must be > 0 and its DRAM and SSD sizes and latency >= 0",
                fix="fix the host tier settings (dram_gib, ssd_gib, dram_gb_per_s, ssd_gb_per_s, restore_latency_s)",
            )


def offload(sim: Simulator, inst: Instance, tier: HostKvTier, rid: int, ctx: int) -> None:
    """Keep the KV of ``rid`` (``ctx`` tokens) on ``tier``: DRAM while ``inst``'s share has room, else SSD."""
    gib = ctx * sim.kv_bytes_per_token / GIB
    sim.offload[rid] = 1 if inst.host_gib + gib <= tier.dram_gib else 2
    if sim.offload[rid] == 1:
        inst.host_gib += gib


def restore_s(sim: Simulator, tier: HostKvTier, rid: int) -> float:
    """Seconds to bring back the KV of ``rid`` (its ``need`` tokens) from the tier it sits on."""
    bw = (tier.dram_gb_per_s if sim.offload[rid] == 1 else tier.ssd_gb_per_s) * GB
    return sim.need[rid] * sim.kv_bytes_per_token / bw + tier.restore_latency_s


__all__ = ["HostKvTier", "offload", "restore_s"]
