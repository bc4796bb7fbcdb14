"""Typed blocks of a plan's ``scenario`` echo beyond the fields the planner decides on: the workload summary, the
deployment rules, request classes, the WAN link of ``--allow-cross-provider``, the profile records and the
pruning fit.

Source: hetplan's own reconstruction (what :func:`hetplan.planning.document.build_plan` fills in).
"""

from __future__ import annotations

from hetplan.plan.blocks.base import Block, Num


class OverContext(Block):
    """Requests over the context window: ``refused`` (left out of sizing) or ``truncated``, of ``requests_total``."""

    requests_total: int = 0
    refused: int = 0
    truncated: int = 0
    window_tokens: int | None = None
    arrival_rate_per_s: Num | None = None


class WorkloadSummary(Block):
    """The workload the plan was sized on (:meth:`hetplan.workload.model.Workload.summary`); tokens per request."""

    name: str = ""
    source: str = ""
    attribution: str | None = None
    requests: int = 0
    duration_s: Num | None = None
    arrival_rate_per_s: Num | None = None
    prompt_tokens_mean: Num = 0.0
    prompt_tokens_p50: Num | None = None
    prompt_tokens_p90: Num | None = None
    output_tokens_mean: Num = 0.0
    output_tokens_p50: Num | None = None
    output_tokens_p90: Num | None = None
    over_context: OverContext | None = None


class DeploymentRules(Block):
    """What the deployment rules checked every candidate against (:class:`hetplan.deploy_rules.Deployment`)."""

    engine: str = "vllm"
    engine_version: str = ""
    kv_connector: str = ""
    block_size_tokens: int = 16
    max_model_len_tokens: int = 1
    scale_up_gpus: int = 8


class ClassSlo(Block):
    """One request class: its SLOs (seconds), its rule (``share`` or ``value``/``path``) and requests."""

    name: str = ""
    ttft_s: Num = 0.0
    tpot_s: Num = 0.0
    share: Num | None = None
    value: str | None = None
    path: str | None = None
    requests: int = 0


class WanLink(Block):
    """The WAN link cross-site combos were priced with (``--allow-cross-provider``)."""

    wan_gb_per_s: Num = 0.0
    wan_latency_s: Num = 0.0
    egress_usd_per_gb: Num = 0.0


class ProfileRecord(Block):
    """One ``--profile`` file the plan used, with the profiled GPU entry (``gpu_spec``) the simulator rebuilds from."""

    file: str = ""
    gpu: str = ""
    device_kind: str | None = None
    device_name: str | None = None
    profiled_at: str | None = None
    gpu_spec: dict[str, object] | None = None


class PruneWith(Block):
    """The A1/A2 fit file the candidates were pruned with and how many pairs it kept."""

    file: str = ""
    top_k: int = 0


__all__ = [
    "ClassSlo",
    "DeploymentRules",
    "OverContext",
    "ProfileRecord",
    "PruneWith",
    "WanLink",
    "WorkloadSummary",
]
