"""Deployment IR: the small, engine-neutral description of a plan that every emitter reads.

A typed plan (:class:`hetplan.plan.types.Plan`, e.g. read from ``hetplan plan --out``) becomes a :class:`DeploymentIR`
(:func:`hetplan.emit.ir_build.build_ir`): one :class:`ServingUnit` per routing unit and, inside it, one
:class:`InstanceGroup` per role. A routing unit is one combo of a Cauchy or homogeneous plan (prefill + decode groups;
all copies of the combo share one router, so a request is always prefilled and decoded inside one combo type, as the
plan's capacity model assumes) or one aggregated instance type of a Mélange plan. Each emitter (``vllm``,
``kubernetes``, ``llmd``, ``dynamo``) is a pure function of the IR.

Units are in the names: ``_tokens``, ``_gib``, ``_req_per_s``, ``_s``. Names of Kubernetes objects are DNS-1123
labels built from the scenario name, the unit index and the role.

Source: hetplan's own reconstruction (IR between plan and emitters after aiconfigurator's ``generator/ir.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from hetplan.catalog.schemas import GpuSpec, ModelSpec
from hetplan.deploy_rules import DEFAULT_ENGINE_VERSION, DEFAULT_SCALE_UP_GPUS
from hetplan.emit.settings import (
    MEMORY_FLOOR_FRACTION,
    EmitSettings,
    Role,
)
from hetplan.mathutil import apportion as apportion  # the emitters import it from here
from hetplan.perf.settings import PerfSettings
from hetplan.routing import RoutingTable


@dataclass(frozen=True)
class EngineFlags:
    """vLLM engine settings of one instance group, in vLLM's own spellings (``dtype``, ``kv_cache_dtype``)."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    max_model_len_tokens: int
    block_size_tokens: int
    dtype: str
    quantization: str | None
    kv_cache_dtype: str
    kv_connector: str | None
    kv_role: str | None
    distributed_executor_backend: str | None


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
"""How messages name each serving engine."""

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""The well-known Kubernetes node label that names a cloud node's instance type."""
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
"""A Kubernetes label value; names that are not one (GCP's accelerator rows, price-file offers) fall back to the
GPU label."""


@dataclass(frozen=True)
class InstanceGroup:
    """Identical instances of one role on one GPU type inside one routing unit.

    ``replicas`` is the planned instance count (all copies of the combo), the autoscaling minimum;
    ``max_replicas`` the autoscaling maximum. An instance uses ``tp * pp`` GPUs spread over
    ``nodes_per_instance`` pods of ``gpus_per_pod`` GPUs each. ``scale_metric`` / ``scale_target_requests`` name the
    per-pod vLLM metric and value autoscalers hold (see :func:`build_ir`).
    """

    name: str
    role: Role
    unit_index: int
    gpu: str
    gpu_vendor: str
    gpu_label_key: str
    gpu_label_value: str | None
    tp: int
    pp: int
    gpus_per_instance: int
    nodes_per_instance: int
    gpus_per_pod: int
    gpus_per_node: int
    instances_per_copy: int
    replicas: int
    max_replicas: int
    port: int
    engine: EngineFlags
    scale_metric: str
    scale_target_requests: int
    gpu_spec: GpuSpec  # the GPU entry the plan resolved (memory-fit rule)
    instance_type: str = ""  # the purchased instance type the plan places this group on ('' = not named)
    owned: bool = False  # placed on the user's own nodes (selected by the GPU label, not an instance type)
    gpu_label_values: tuple[str, ...] = ()  # every accepted value (AKS: several VM sizes); () = gpu_label_value
    gpu_memory_key: str | None = None  # the provisioner's per-GPU memory label (MiB), when it has one

    @property
    def pinned_to_instance_type(self) -> bool:
        """True when pods select the purchased cloud instance type rather than the GPU label."""
        return bool(self.instance_type and not self.owned and _LABEL_VALUE.fullmatch(self.instance_type))

    def node_selector(self) -> dict[str, str]:
        """Where the group's pods run: the purchased cloud instance type (``node.kubernetes.io/instance-type``), or
        the GPU label for owned nodes and plans that name no instance type (its first value when there are
        several: :meth:`placement` writes them all)."""
        if self.pinned_to_instance_type:
            return {INSTANCE_TYPE_LABEL: self.instance_type}
        return {self.gpu_label_key: self.gpu_label_value or ""}

    def min_gpu_memory_mib(self) -> int:
        """The GPU-memory floor a memory requirement asks for, MiB: ``MEMORY_FLOOR_FRACTION`` of the catalog
        GPU's nominal memory."""
        return int(MEMORY_FLOOR_FRACTION * float(self.gpu_spec.hbm_gib) * 1024)

    def placement(self) -> dict[str, Any]:
        """Pod-spec fields that place the group's pods: ``nodeSelector`` (one label value), plus a required node
        affinity when the provisioner lists several values (``In``) or has a GPU-memory label (``Gt`` the floor
        of :meth:`min_gpu_memory_mib` less one, as node affinity has no ``>=``)."""
        values = self.gpu_label_values or ((self.gpu_label_value or "",))
        if self.pinned_to_instance_type or len(values) == 1:
            out: dict[str, Any] = {"nodeSelector": self.node_selector()}
            exprs: list[dict[str, Any]] = []
        else:
            out = {}
            exprs = [{"key": self.gpu_label_key, "operator": "In", "values": list(values)}]
        if self.gpu_memory_key and not self.pinned_to_instance_type:
            exprs.append({"key": self.gpu_memory_key, "operator": "Gt", "values": [str(self.min_gpu_memory_mib() - 1)]})
        if exprs:
            term = {"nodeSelectorTerms": [{"matchExpressions": exprs}]}
            out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}
        return out

    @property
    def multi_node(self) -> bool:
        """True when one instance spans more than one node (LeaderWorkerSet / Ray)."""
        return self.nodes_per_instance > 1


@dataclass(frozen=True)
class ServingUnit:
    """One routing unit: a combo type (``count`` identical copies) or one aggregated instance type.

    ``goodput_share`` is the unit's share of the plan's goodput (0..1]; traffic is split across units in this
    proportion (the plan's goodput-weighted round robin).
    """

    index: int
    name: str
    kind: Literal["disaggregated", "aggregated"]
    count: int
    goodput_req_per_s: float
    goodput_share: float
    groups: tuple[InstanceGroup, ...]

    def group(self, role: Role) -> InstanceGroup | None:
        """The unit's group of ``role``, if any."""
        return next((g for g in self.groups if g.role == role), None)

    def pair(self) -> tuple[InstanceGroup, InstanceGroup]:
        """(prefill, decode) groups of a disaggregated unit.

        Raises:
            ValueError: the unit lacks one of the two roles (an IR not built by :func:`build_ir`).
        """
        p, d = self.group("prefill"), self.group("decode")
        if p is None or d is None:
            raise ValueError(f"unit {self.index} has no prefill/decode pair")
        return p, d


@dataclass(frozen=True)
class ModelIR:
    """The served model: catalog name, what engines load, the name clients use, and the facts rules need."""

    name: str
    source: str
    served_name: str
    attention_heads: int
    max_position_embeddings: int
    weight_dtype: str
    kv_dtype: str
    spec: ModelSpec  # the architecture the plan resolved (memory-fit rule)


@dataclass(frozen=True)
class DeploymentIR:
    """A whole plan ready to emit (see module docstring).

    ``plan_gpus_used`` echoes the plan's GPU counts so rules can check them against instances x TP x PP;
    ``activation_reserve_gib`` is the plan's per-GPU reserve used by the memory-fit rule.
    """

    name: str
    namespace: str
    strategy: str
    model: ModelIR
    units: tuple[ServingUnit, ...]
    settings: EmitSettings
    plan_gpus_used: tuple[tuple[str, int], ...]
    activation_reserve_gib: float
    ttft_slo_s: float
    notes: tuple[str, ...]
    perf_settings: PerfSettings  # the plan's engine and performance settings, all fields
    from_schedule: bool = False  # combos carry min_count from ``hetplan autoscale``: replicas = min, max = count
    cascade: str | None = None  # the plan's CASCADE settings as canonical JSON (``hetplan calibrate``), or None
    engine_version: str = DEFAULT_ENGINE_VERSION  # the version the plan was made for (vLLM: its deployment rules')
    engine: str = "vllm"  # the serving engine the plan was made for: vllm, sglang or trtllm
    scale_up_gpus: int = DEFAULT_SCALE_UP_GPUS
    # the plan's prompt-length rule table (hetplan.routing), units named as here: the simulator routes by it too
    routing: RoutingTable | None = None
    # the plan was sized with prefix reuse (its ``prefix_cache`` block, hetplan.planning.prefix): targets that can
    # route for cache locality say how (llm-d: the endpoint picker's prefix-cache scorer)
    prefix_cache: bool = False

    def routing_json(self) -> str | None:
        """The rule table as ``routing.json`` (sorted JSON, with the engine and version the plan was made for), or
        None when it has no prompt ranges (a Cauchy or homogeneous plan: the goodput split of the READMEs is the
        whole rule)."""
        if self.routing is None or not self.routing.ranges:
            return None
        doc = self.routing.to_doc()
        doc["engine"] = {"name": self.engine, "version": self.engine_version}  # what the plan was made for
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @property
    def groups(self) -> tuple[InstanceGroup, ...]:
        """Every instance group, unit by unit."""
        return tuple(g for u in self.units for g in u.groups)


# -- plan -> IR ---------------------------------------------------------------------------------------------------
