"""A Hetis deployment spec (``hetplan plan --strategy hetis --pool POOL.yaml``, :mod:`hetplan.planning.hetis`)
read as typed blocks, for the terminal tables: the pool's devices and their roles, the primary layout, the KV-head
split per length class, the prediction and the baselines on the same pool. Rates in req/s, latencies in seconds.

A Hetis spec is its own document kind (no serving engine runs it, so it is not a :class:`~hetplan.plan.types.Plan`);
these blocks read the fields the tables show and keep the rest as written.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pydantic import Field

from hetplan.plan.blocks.base import Block, Num


class HetisSlo(Block):
    """The SLOs: TTFT and TPOT in seconds at ``percentile``."""

    ttft_s: Num = 0.0
    tpot_s: Num = 0.0
    percentile: Num = 90.0


class HetisWorkload(Block):
    """The workload the spec was planned for (its summary; the name is what the tables show)."""

    name: str = ""


class HetisScenario(Block):
    """The scenario echo: name, model, weight dtype, SLOs and workload."""

    name: str = ""
    model: str = ""
    weight_dtype: str = ""
    slo: HetisSlo = Field(default_factory=HetisSlo)
    workload: HetisWorkload = Field(default_factory=HetisWorkload)


class PoolDevice(Block):
    """One device of the pool and its role (``primary``: a stage/rank of a replica with its layers)."""

    name: str = ""
    gpu: str = ""
    role: str = ""
    replica: int | None = None
    stage: int | None = None
    tp_rank: int | None = None
    layers: int | None = None
    reason: str = ""


class HetisPool(Block):
    """The GPU pool: GPUs per type and every device."""

    name: str = ""
    gpus: dict[str, int] = Field(default_factory=dict)
    devices: list[PoolDevice] = Field(default_factory=list)


class HetisLayout(Block):
    """The primary layout chosen and how many were considered."""

    label: str = ""
    layouts_considered: int = 0


class LengthClass(Block):
    """One request-length class of a replica's head split: its requests and KV heads per device."""

    name: str = ""
    requests: int = 0
    representative: bool = False
    context_tokens: Num = 0.0
    kv_heads: dict[str, int] = Field(default_factory=dict)


class SplitDevice(Block):
    """One device (or TP group) of a replica's head split and its step time (seconds)."""

    name: str = ""
    step_s: Num = 0.0


class HeadSplit(Block):
    """One replica's KV-head split by length class, or why it serves nothing."""

    replica: int = 0
    method: str = ""
    makespan_s: Num = 0.0
    reason: str | None = None
    devices: list[SplitDevice] = Field(default_factory=list)
    classes: list[LengthClass] = Field(default_factory=list)


class HetisPrediction(Block):
    """What the spec predicts: capacity, output tokens/s, latencies, KV capacity and decode batch."""

    req_per_s: Num = 0.0
    output_tokens_per_s: Num = 0.0
    tpot_s: Num = 0.0
    ttft_s: Num = 0.0
    ttft_within_slo: bool = True
    kv_capacity_tokens: Num = 0.0
    decode_batch: int = 0


class HetisBaseline(Block):
    """Another strategy on the same pool (Splitwise-style, HexGen-style), or why it is infeasible."""

    status: str = ""
    reason: str | None = None
    layout: str = ""
    req_per_s: Num = 0.0
    tpot_s: Num = 0.0
    ttft_s: Num = 0.0
    kv_capacity_tokens: Num = 0.0


class HetisPrice(Block):
    """The $/GPU-hour a GPU type was priced at and where it came from."""

    usd_per_gpu_hour: Num = 0.0
    source: str = ""


class HetisSpec(Block):
    """A Hetis deployment spec (see the module docstring)."""

    engine_note: str = ""
    scenario: HetisScenario = Field(default_factory=HetisScenario)
    pool: HetisPool = Field(default_factory=HetisPool)
    layout: HetisLayout = Field(default_factory=HetisLayout)
    head_split: list[HeadSplit] = Field(default_factory=list)
    predicted: HetisPrediction = Field(default_factory=HetisPrediction)
    baselines: dict[str, HetisBaseline] = Field(default_factory=dict)
    throughput_ratio_over: dict[str, Num | None] = Field(default_factory=dict)
    kv_capacity_ratio_over_splitwise: Num | None = None
    prices: dict[str, HetisPrice] = Field(default_factory=dict)
    total_usd_per_hour: Num | None = None
    tokens_per_usd: Num | None = None
    warnings: list[str] = Field(default_factory=list)


__all__ = [
    "HeadSplit",
    "HetisBaseline",
    "HetisLayout",
    "HetisPool",
    "HetisPrediction",
    "HetisPrice",
    "HetisScenario",
    "HetisSlo",
    "HetisSpec",
    "HetisWorkload",
    "LengthClass",
    "PoolDevice",
    "SplitDevice",
]
