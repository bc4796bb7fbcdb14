"""Deployment IR: the small, engine-neutral description of a plan that every emitter reads.

A typed plan (:class:`hetplan.plan.types.Plan`, e.g. read from ``hetplan plan --out``) becomes a
:class:`DeploymentIR`: one :class:`ServingUnit` per routing unit and, inside it, one :class:`InstanceGroup` per
role. A routing unit is one combo of a Cauchy or homogeneous
plan (prefill + decode groups; all copies of the combo share one router, so a request is always prefilled and
decoded inside one combo type, as the plan's capacity model assumes) or one aggregated instance type of a Mélange
plan. Each emitter (``vllm``, ``kubernetes``, ``llmd``, ``dynamo``) is a pure function of the IR.

Units are in the names: ``_tokens``, ``_gib``, ``_req_per_s``, ``_s``. Names of Kubernetes objects are DNS-1123
labels built from the scenario name, the unit index and the role.

Source: hetplan's own reconstruction (IR between plan and emitters after aiconfigurator's ``generator/ir.py``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from hetplan.catalog.schemas import GpuSpec, ModelSpec
from hetplan.deploy_rules import DEFAULT_ENGINE_VERSION, DEFAULT_SCALE_UP_GPUS
from hetplan.emit.names import dns_name
from hetplan.emit.settings import (
    MAX_BASE_NAME,
    MEMORY_FLOOR_FRACTION,
    EmitSettings,
    Role,
    check_custom_labels,
    check_settings,
)
from hetplan.errors import InputError
from hetplan.mathutil import apportion as apportion  # the emitters import it from here
from hetplan.perf.settings import PerfSettings
from hetplan.plan.types import Plan
from hetplan.routing import RoutingTable, table_from_plan


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


def _dtypes(weight_dtype: str, kv_dtype: str) -> tuple[str, str | None, str]:
    """vLLM ``--dtype``, ``--quantization`` and ``--kv-cache-dtype`` for the plan's dtypes."""
    activation = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}.get(weight_dtype, "auto")
    quantization = "fp8" if weight_dtype == "fp8" else None
    if kv_dtype == "fp8":
        return activation, quantization, "fp8"
    if kv_dtype not in ("bf16", "fp16"):
        raise InputError(
            f"plan kv_dtype {kv_dtype!r} has no vLLM --kv-cache-dtype", fix="plan with --kv-dtype bf16, fp16 or fp8"
        )
    wanted = {"bf16": "bfloat16", "fp16": "float16"}[kv_dtype]
    if activation not in ("auto", wanted):
        raise InputError(
            f"KV cache dtype {kv_dtype} with {weight_dtype} weights cannot be expressed in vLLM",
            f"a 16-bit KV cache follows the model dtype ('auto' = {activation})",
            f"plan with --kv-dtype {'bf16' if activation == 'bfloat16' else 'fp16'} or fp8",
        )
    return activation, quantization, "auto"


def _spread(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs per pod) for an instance of ``gpus`` GPUs on nodes of ``gpus_per_node``."""
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    return nodes, math.ceil(gpus / nodes)


def _max_replicas(planned: int, gpus_per_instance: int, gpu: str, plan: Plan, s: EmitSettings) -> int:
    if gpu in plan.inventory:
        spare = max(0, int(plan.inventory[gpu]) - int(plan.gpus_used.get(gpu, 0)))
        return planned + spare // gpus_per_instance
    return max(planned, math.ceil(planned * s.max_replicas_factor))


def build_ir(plan: Plan, settings: EmitSettings | None = None) -> DeploymentIR:
    """Turn a typed plan into a :class:`DeploymentIR` (no rules are checked here; see ``rules.check_rules``).

    The model architecture, GPU entries and engine settings are the plan's own (``plan.model``, ``plan.gpus``,
    ``plan.settings``): nothing is looked up in the catalog, so a plan for a profiled GPU or a ``config.json``
    model emits as it was planned.

    Autoscaling targets (per pod, hetplan's own reconstruction): prefill holds ``vllm:num_requests_waiting`` at
    ``floor(prefill capacity [req/s] x TTFT SLO [s])`` (the queue an instance clears within the SLO), decode holds
    ``vllm:num_requests_running`` at the plan's decode batch, aggregated holds ``vllm:num_requests_waiting`` at 2.
    Autoscaling max: planned + spare inventory of that GPU type / GPUs per instance, or ceil(planned x
    ``max_replicas_factor``) without an inventory.

    Raises:
        InputError: the plan lacks a model source (a model with no Hugging Face repo and no --model-source), uses
            quantized weights without a checkpoint, a setting is bad, a unit names a GPU the plan has no entry for, or
            a SGLang or TensorRT-LLM plan names an engine version hetplan has no argument table for.
    """
    engine_name = str(getattr(plan.settings, "engine", "vllm") or "vllm")
    s = settings or EmitSettings()
    check_settings(s)
    spec = plan.model.spec
    source = s.model_source or spec.hf_repo
    if not source:
        where = f" (read from {plan.model.path})" if plan.model.path else " in the catalog"
        raise InputError(
            f"model {spec.name} has no Hugging Face repo{where}",
            "engines need a repo id or a path to load",
            "pass --model-source REPO_OR_PATH",
        )
    weight_dtype, kv_dtype = plan.weight_dtype, plan.kv_dtype
    if weight_dtype in ("int4", "int8") and not s.model_source:
        raise InputError(
            f"plan uses {weight_dtype} weights but no quantized checkpoint was given",
            f"the model repo {spec.hf_repo} holds 16-bit weights",
            "pass --model-source with an AWQ/GPTQ checkpoint of the model",
        )
    dtype, quantization, kv_cache_dtype = _dtypes(weight_dtype, kv_dtype)
    perf = plan.settings
    planned = _planned_deployment(plan)
    engine_version = str(planned.get("engine_version", DEFAULT_ENGINE_VERSION))
    if engine_name != "vllm":
        from hetplan.emit.engines import check_engine_version
        from hetplan.perf.engines import engine_rules

        # the plan's perf_settings name the engine and its version (empty: the fitted rules' version); the
        # scenario.deployment block records the vLLM deployment rules the planner checked, not the engine
        engine_version = perf.engine_version or engine_rules(engine_name).version
        check_engine_version(engine_name, engine_version)
        kv_cache_dtype = {"sglang": {"fp8": "fp8_e4m3"}, "trtllm": {"fp8": "fp8"}}[engine_name].get(kv_dtype, "auto")
        if engine_name == "trtllm" and quantization and not s.model_source:
            raise InputError(
                f"plan uses {weight_dtype} weights on TensorRT-LLM, which loads a pre-quantized checkpoint",
                f"the model repo {spec.hf_repo} holds 16-bit weights",
                "pass --model-source with an FP8 (ModelOpt) checkpoint of the model",
            )
        quantization = None if engine_name == "trtllm" else quantization
    # --max-model-len: the user's, else the plan's (the longest request it keeps), else the model's context window
    max_len = int(s.max_model_len_tokens or planned.get("max_model_len_tokens") or spec.max_position_embeddings)
    ttft_slo_s = plan.slo.ttft_s
    base = dns_name(s.name or plan.name, MAX_BASE_NAME)
    if not base[0].isalpha():  # Service names are DNS-1035 labels: they start with a letter
        base = dns_name("hp-" + base, MAX_BASE_NAME)
    total_goodput = plan.goodput_req_per_s or 1.0

    def group(
        unit: int,
        role: Role,
        gpu_name: str,
        tp: int,
        pp: int,
        per_copy: int,
        count: int,
        target: int,
        bounds: tuple[int, int] | None = None,
        placed: tuple[str, bool] = ("", False),
    ) -> InstanceGroup:
        """One role of one unit; ``bounds`` (min, max copies, from an autoscaling schedule) override the
        planned count as the autoscaler's minimum and the spare-inventory maximum; ``placed`` is the purchased
        (instance type, owned) the plan puts it on, whose GPUs per instance are the node size."""
        gpu = plan.gpu(gpu_name)
        per_node = s.gpus_per_node
        bought = next((p for p in plan.purchase if (p.instance_type, p.gpu) == (placed[0], gpu.name)), None)
        if bought is not None:
            per_node = bought.gpus_per_instance
        nodes, per_pod = _spread(tp * pp, per_node)
        backend = "ray" if nodes > 1 else None
        kv_role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role)
        engine = EngineFlags(
            tp, pp, min(perf.max_num_seqs, target) if role == "decode" else perf.max_num_seqs,
            perf.max_num_batched_tokens, perf.gpu_memory_utilization, max_len, perf.block_size_tokens,
            dtype, quantization, kv_cache_dtype,
            s.kv_connector if kv_role else None, kv_role, backend,
        )  # fmt: skip
        planned = per_copy * (bounds[0] if bounds else count)
        metric = "vllm:num_requests_running" if role == "decode" else "vllm:num_requests_waiting"
        if engine_name == "sglang":  # SGLang's Prometheus gauges (--enable-metrics)
            metric = "sglang:num_running_reqs" if role == "decode" else "sglang:num_queue_reqs"
        return InstanceGroup(
            name=f"{base}-u{unit}-{role}-{dns_name(gpu.name, 20)}",
            role=role,
            unit_index=unit,
            gpu=gpu.name,
            gpu_vendor=gpu.vendor,
            gpu_label_key=s.label_key,
            gpu_label_value=s.label_for(gpu.name),
            gpu_label_values=s.labels_for(gpu.name),
            gpu_memory_key=s.node_provisioner.memory_key,
            tp=tp,
            pp=pp,
            gpus_per_instance=tp * pp,
            nodes_per_instance=nodes,
            gpus_per_pod=per_pod,
            gpus_per_node=per_node,
            instances_per_copy=per_copy,
            replicas=planned,
            max_replicas=per_copy * bounds[1] if bounds else _max_replicas(planned, tp * pp, gpu.name, plan, s),
            port=s.engine_port,
            engine=engine,
            scale_metric=metric,
            scale_target_requests=max(1, target),
            gpu_spec=gpu,
            instance_type=placed[0],
            owned=placed[1],
        )

    units: list[ServingUnit] = []
    for i, combo in enumerate(plan.combos):
        where = f"plan combos[{i}]"
        count = combo.count
        prefill_target = int(combo.prefill_capacity_req_per_s * ttft_slo_s)
        bounds = None
        if combo.min_count is not None:  # a schedule from hetplan autoscale: the autoscaler moves between these
            if not 0 <= combo.min_count <= count:
                raise InputError(f"{where}.min_count must be an integer in 0..count, got {combo.min_count!r}",
                                 fix="fix it")  # fmt: skip
            bounds = (combo.min_count, count)
        groups = (
            group(i, "prefill", combo.prefill_gpu, combo.prefill_tp, combo.prefill_pp, combo.n_prefill, count,
                  prefill_target, bounds, (combo.prefill_instance_type, combo.prefill_owned)),
            group(i, "decode", combo.decode_gpu, combo.decode_tp, combo.decode_pp, combo.n_decode, count,
                  max(1, combo.decode_batch), bounds, (combo.decode_instance_type, combo.decode_owned)),
        )  # fmt: skip
        goodput = combo.goodput_req_per_s
        # a mixed plan's combo takes the traffic share of the size buckets it serves; otherwise its goodput share
        share = combo.traffic_share if combo.traffic_share is not None else goodput * count / total_goodput
        units.append(ServingUnit(i, f"{base}-u{i}", "disaggregated", count, goodput, share, groups))
    offset = len(units)
    instances = plan.instances
    shares = [inst.traffic_share for inst in instances]
    for j, inst in enumerate(instances):
        where, i = f"plan instances[{j}]", offset + j
        if inst.role != "aggregated":
            raise InputError(f"{where}.role must be 'aggregated', got {inst.role!r}", fix="fix that field")
        share = shares[j] if sum(shares) > 0 else 1.0 / len(instances)
        g = group(i, "aggregated", inst.gpu, inst.tp, inst.pp, inst.count, 1, 2, None, (inst.instance_type, inst.owned))
        units.append(ServingUnit(i, f"{base}-u{i}", "aggregated", 1, total_goodput * share, share, (g,)))
    notes = []
    if not s.max_model_len_tokens and planned.get("max_model_len_tokens") and max_len < spec.max_position_embeddings:
        notes.append(
            f"--max-model-len {max_len:,} tokens: the longest request (prompt + output) of the workload the plan was "
            f"made for, below the model's {spec.max_position_embeddings:,}-token window; {ENGINE_NAMES[engine_name]} "
            "refuses longer requests: pass --max-model-len N to allow them (the fit check says whether N fits every "
            "instance)"
        )
    check_custom_labels(s, [g.gpu for u in units for g in u.groups])
    routing = replace(table_from_plan(plan), units=tuple(u.name for u in units))
    if routing.ranges:
        notes.append(
            f"the plan routes by prompt length ({len(routing.ranges)} prompt ranges, weights per unit in routing.json, "
            "the rule the verification simulated): the front router counts each prompt's tokens and splits each "
            "range across its units by smooth weighted round-robin; a request's output length is never used"
        )
    if engine_name == "trtllm" and plan.combos:
        notes.append(
            "llm-d is not written for TensorRT-LLM prefill/decode units (its routing sidecar has connectors for vLLM "
            "and SGLang only): --target all leaves it out; the dynamo and trtllm targets deploy them"
        )
    uses_vllm_router = engine_name == "vllm" or (engine_name == "trtllm" and bool(plan.instances))
    if s.router_image == EmitSettings.router_image and uses_vllm_router:
        notes.append(
            f"router image {s.router_image!r} is a placeholder: build vllm-router (github.com/vllm-project/router) "
            "into an image and pass --router-image"
        )
    return DeploymentIR(
        name=base,
        namespace=s.namespace,
        strategy=plan.strategy,
        model=ModelIR(
            spec.name,
            source,
            s.served_model_name or source,
            spec.num_attention_heads,
            spec.max_position_embeddings,
            weight_dtype,
            kv_dtype,
            spec,
        ),  # fmt: skip
        units=tuple(units),
        settings=s,
        plan_gpus_used=tuple(sorted((str(k), int(v)) for k, v in plan.gpus_used.items())),
        activation_reserve_gib=float(perf.activation_reserve_gib),
        ttft_slo_s=ttft_slo_s,
        notes=tuple(notes),
        from_schedule=any(c.min_count is not None for c in plan.combos),
        perf_settings=perf,
        cascade=_cascade_json(plan),
        prefix_cache=isinstance(plan.extra.get("prefix_cache"), dict),
        engine=engine_name,
        engine_version=engine_version,
        scale_up_gpus=int(planned.get("scale_up_gpus", DEFAULT_SCALE_UP_GPUS)),
        routing=routing,
    )


CASCADE_ROUTER_KEYS = ("kappa", "kappa_by_class", "q2", "tier2_order", "quantile", "coverage", "classes")
"""The fields of a plan's ``cascade`` block a router needs (the sweep and the calibration run are left out)."""


def _cascade_json(plan: Plan) -> str | None:
    """The router's view of the plan's ``cascade`` block (:data:`CASCADE_ROUTER_KEYS`), as sorted JSON."""
    block = plan.extra.get("cascade")
    if not isinstance(block, dict):
        return None
    doc = {"kind": "hetplan-cascade-router-config", "schema_version": 1, "policy": "cascade"}
    doc |= {k: block[k] for k in CASCADE_ROUTER_KEYS if k in block}
    doc["budget"] = (
        "T_hat(request) = kappa[class] * (T(current load) + T(max load)) / 2 over its remaining prefill chunks; "
        "budget = TTFT SLO - wait - T_hat, re-computed every iteration; Tier 2 (budget <= 0) keeps a share q2"
    )
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _planned_deployment(plan: Plan) -> dict[str, int | str]:
    """The plan's ``scenario.deployment`` block (what the planner's deployment rules assumed), checked; empty for
    plans made before it existed.

    Raises:
        InputError: a hand-edited block with a non-positive or non-integer ``max_model_len_tokens`` or
            ``scale_up_gpus``.
    """
    raw = plan.scenario_extra.get("deployment") or {}
    if not isinstance(raw, dict):
        raise InputError("plan scenario.deployment must be a mapping", fix="write the plan again with hetplan plan")
    out: dict[str, int | str] = {}
    for key in ("max_model_len_tokens", "scale_up_gpus"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(
                    f"plan scenario.deployment.{key} must be an integer >= 1, got {value!r}",
                    fix="write the plan again with 'hetplan plan ... --out plan.yaml'",
                )
            out[key] = value
    if "engine_version" in raw:
        out["engine_version"] = str(raw["engine_version"])
    return out
