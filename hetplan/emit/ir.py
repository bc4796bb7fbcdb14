"""Deployment IR: the small, engine-neutral description of a plan that every emitter reads.

A plan document (``hetplan plan --out``) becomes a :class:`DeploymentIR`: one :class:`ServingUnit` per routing
unit and, inside it, one :class:`InstanceGroup` per role. A routing unit is one combo of a Cauchy or homogeneous
plan (prefill + decode groups; all copies of the combo share one router, so a request is always prefilled and
decoded inside one combo type, as the plan's capacity model assumes) or one aggregated instance type of a Mélange
plan. Each emitter (``vllm``, ``kubernetes``, ``llmd``, ``dynamo``) is a pure function of the IR.

Units are in the names: ``_tokens``, ``_gib``, ``_req_per_s``, ``_s``. Names of Kubernetes objects are DNS-1123
labels built from the scenario name, the unit index and the role.

Source: hetplan's own reconstruction (IR between plan and emitters after aiconfigurator's ``generator/ir.py``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from hetplan.catalog.loader import find_gpu, find_model
from hetplan.errors import InputError
from hetplan.mathutil import apportion as apportion  # the emitters import it from here
from hetplan.planfile import check_plan

Role = Literal["prefill", "decode", "aggregated"]
ROLES: tuple[Role, ...] = ("prefill", "decode", "aggregated")
KV_CONNECTORS = ("NixlConnector", "MooncakeConnector")
DYNAMO_API_VERSIONS = ("v1beta1", "v1alpha1")
AUTOSCALERS = ("keda", "hpa", "none")

# Node label values of NVIDIA GPU feature discovery (``nvidia.com/gpu.product``) for catalog GPUs. Users override
# or extend this with EmitSettings.gpu_labels (``--gpu-label GPU=VALUE``); a GPU without a value is refused.
DEFAULT_GPU_LABELS: dict[str, str] = {
    "H100-SXM": "NVIDIA-H100-80GB-HBM3",
    "H100-PCIe": "NVIDIA-H100-PCIe",
    "H100-NVL": "NVIDIA-H100-NVL",
    "H200-SXM": "NVIDIA-H200",
    "H200-NVL": "NVIDIA-H200-NVL",
    "GH200": "NVIDIA-GH200-480GB",
    "H800-SXM": "NVIDIA-H800",
    "H20": "NVIDIA-H20",
    "B200": "NVIDIA-B200",
    "GB200": "NVIDIA-GB200",
    "A100-80GB-SXM": "NVIDIA-A100-SXM4-80GB",
    "A100-80GB-PCIe": "NVIDIA-A100-80GB-PCIe",
    "A100-40GB-SXM": "NVIDIA-A100-SXM4-40GB",
    "A100-40GB-PCIe": "NVIDIA-A100-PCIE-40GB",
    "A800-80GB-SXM": "NVIDIA-A800-SXM4-80GB",
    "L40S": "NVIDIA-L40S",
    "L40": "NVIDIA-L40",
    "L4": "NVIDIA-L4",
    "A10": "NVIDIA-A10",
    "A10G": "NVIDIA-A10G",
    "T4": "Tesla-T4",
    "RTX-4090": "NVIDIA-GeForce-RTX-4090",
    "RTX-3090": "NVIDIA-GeForce-RTX-3090",
}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_BASE_NAME = 24


@dataclass(frozen=True)
class EmitSettings:
    """What the plan does not decide: images, model source, cluster conventions, connector and API versions.

    Attributes:
        image: vLLM OpenAI-server image for engines (``vllm/vllm-openai:v0.11.0`` is a default to override with the
            tag you run; flags are emitted for that line of vLLM).
        router_image: image holding the ``vllm-router`` binary (github.com/vllm-project/router). No official image
            is published; the default is a placeholder name to replace with your build.
        dynamo_image: NVIDIA Dynamo vLLM runtime image (a default to override).
        routing_sidecar_image: llm-d routing sidecar placed on decode pods (a default to override).
        model_source: what engines load: a Hugging Face repo or a path (default: the catalog's ``hf_repo``).
        served_model_name: model name clients send (default: the model source).
        name: base of object names (default: the plan's scenario name, made DNS-safe and cut to 24 characters).
        namespace: Kubernetes namespace of every object.
        gpu_label_key: node label that selects a GPU type.
        gpu_labels: ``(catalog GPU name, label value)`` pairs overriding or extending ``DEFAULT_GPU_LABELS``.
        gpus_per_node: GPUs one node offers; an instance needing more spans nodes (LeaderWorkerSet, Ray).
        kv_connector: ``NixlConnector`` (default) or ``MooncakeConnector``.
        dynamo_api_versions: DynamoGraphDeployment versions to emit: ``v1beta1`` (storage) and/or ``v1alpha1``.
        max_model_len_tokens: ``--max-model-len`` (default: the model's ``max_position_embeddings``, vLLM's own
            default); every instance's KV cache must hold one sequence this long.
        autoscaler: ``keda`` (ScaledObject), ``hpa`` (autoscaling/v2) or ``none``.
        prometheus_url: Prometheus that KEDA queries for vLLM metrics (a default to override).
        max_replicas_factor: without an inventory for a GPU type, autoscaling max = ceil(planned x this).
        router_pods: router pods shared out across routing units in proportion to their goodput (Kubernetes).
        hf_token_secret: Secret (key ``HF_TOKEN``) mounted optionally into engine pods; ``None`` to leave it out.
        kubernetes_version: Kubernetes version whose schemas ``--validate`` uses for core kinds.
        engine_port / router_port: container ports of the engines and routers.
    """

    image: str = "vllm/vllm-openai:v0.11.0"
    router_image: str = "vllm-router:latest"
    dynamo_image: str = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1"
    routing_sidecar_image: str = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0"
    model_source: str | None = None
    served_model_name: str | None = None
    name: str | None = None
    namespace: str = "default"
    gpu_label_key: str = "nvidia.com/gpu.product"
    gpu_labels: tuple[tuple[str, str], ...] = ()
    gpus_per_node: int = 8
    kv_connector: str = "NixlConnector"
    dynamo_api_versions: tuple[str, ...] = ("v1beta1",)
    max_model_len_tokens: int | None = None
    autoscaler: str = "keda"
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    max_replicas_factor: float = 2.0
    router_pods: int = 10
    hf_token_secret: str | None = "hf-token-secret"
    kubernetes_version: str = "1.33"
    engine_port: int = 8000
    router_port: int = 8080

    def label_for(self, gpu: str) -> str | None:
        """Node label value for catalog GPU ``gpu``: the user's override, else the default table, else None."""
        for name, value in self.gpu_labels:
            if name == gpu:
                return value
        return DEFAULT_GPU_LABELS.get(gpu)


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
    from_schedule: bool = False  # combos carry min_count from ``hetplan autoscale``: replicas = min, max = count

    @property
    def groups(self) -> tuple[InstanceGroup, ...]:
        """Every instance group, unit by unit."""
        return tuple(g for u in self.units for g in u.groups)


# -- settings checks ----------------------------------------------------------------------------------------------


def check_label_value(value: str, field: str) -> None:
    """Raise :class:`InputError` unless ``value`` is a valid Kubernetes label value (<= 63 characters)."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise InputError(
            f"{field} {value!r} is not a valid Kubernetes label value",
            "label values are at most 63 characters of letters, digits, '-', '_' and '.', starting and ending "
            "with a letter or digit",
            f"pass a valid value for {field}",
        )


def check_settings(s: EmitSettings) -> None:
    """Check settings a user can get wrong; every message names the setting and its fix.

    Raises:
        InputError: a bad namespace, label key or value, image, connector, API version, autoscaler or number.
    """
    if not _DNS_LABEL.match(s.namespace) or len(s.namespace) > 63:
        raise InputError(
            f"namespace {s.namespace!r} is not a DNS-1123 label",
            "Kubernetes namespaces are at most 63 lower-case letters, digits and '-'",
            "pass --namespace with a name like 'llm-serving'",
        )
    prefix, _, name = s.gpu_label_key.rpartition("/")
    if not _LABEL_NAME.match(name) or len(name) > 63 or (prefix and not _DNS_SUBDOMAIN.match(prefix)):
        raise InputError(
            f"GPU label key {s.gpu_label_key!r} is not a valid Kubernetes label key",
            "a label key is an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'",
            "pass --gpu-label-key like 'nvidia.com/gpu.product'",
        )
    for gpu, value in s.gpu_labels:
        check_label_value(value, f"--gpu-label {gpu}")
    for flag, image in (
        ("--image", s.image),
        ("--router-image", s.router_image),
        ("--dynamo-image", s.dynamo_image),
        ("routing_sidecar_image", s.routing_sidecar_image),
    ):
        if not image or any(ch.isspace() for ch in image):
            raise InputError(f"{flag} {image!r} is not an image reference", fix=f"pass {flag} REPOSITORY:TAG")
    if s.kv_connector not in KV_CONNECTORS:
        raise InputError(
            f"unknown KV connector {s.kv_connector!r}", f"known: {', '.join(KV_CONNECTORS)}", "pick one of them"
        )
    bad = [v for v in s.dynamo_api_versions if v not in DYNAMO_API_VERSIONS] or (not s.dynamo_api_versions and ["()"])
    if bad:
        raise InputError(
            f"unknown Dynamo API version {bad[0]!r}",
            f"known: {', '.join(DYNAMO_API_VERSIONS)}",
            "pass --dynamo-api v1beta1, v1alpha1 or both",
        )
    if s.autoscaler not in AUTOSCALERS:
        raise InputError(f"unknown autoscaler {s.autoscaler!r}", f"known: {', '.join(AUTOSCALERS)}", "pick one")
    for field, number, low in (
        ("--gpus-per-node", s.gpus_per_node, 1),
        ("router_pods", s.router_pods, 1),
        ("--max-model-len", s.max_model_len_tokens if s.max_model_len_tokens is not None else 1, 1),
        ("engine_port", s.engine_port, 1),
        ("router_port", s.router_port, 1),
    ):
        if isinstance(number, bool) or not isinstance(number, int) or number < low:
            raise InputError(f"{field} must be an integer >= {low}, got {number!r}", fix=f"pass {field} {low} or more")
    for field, port in (("engine_port", s.engine_port), ("router_port", s.router_port)):
        if port > 65535:
            raise InputError(f"{field} must be <= 65535, got {port}", fix="pick a port in 1..65535")
    if not s.max_replicas_factor >= 1:
        raise InputError(f"max_replicas_factor must be >= 1, got {s.max_replicas_factor}", fix="pass 1 or more")
    if s.hf_token_secret is not None and not _DNS_SUBDOMAIN.match(s.hf_token_secret):
        raise InputError(f"hf_token_secret {s.hf_token_secret!r} is not a Secret name", fix="pass a DNS-1123 name")


def dns_name(text: str, limit: int = MAX_BASE_NAME) -> str:
    """``text`` made a DNS-1123 label: lower case, other characters as '-', at most ``limit`` characters."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return name or "hetplan"


# -- plan -> IR ---------------------------------------------------------------------------------------------------


def _int(doc: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(
            f"{where}.{key} must be an integer >= 1, got {value!r}",
            fix="write the plan with 'hetplan plan ... --out plan.yaml' or fix that field",
        )
    return value


def _number(doc: dict[str, Any], key: str, where: str, low: float, high: float) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low < value <= high:
        raise InputError(
            f"{where}.{key} must be a number in ({low:g}, {high:g}], got {value!r}",
            fix="write the plan with 'hetplan plan ... --out plan.yaml' or fix that field",
        )
    return float(value)


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


def _max_replicas(planned: int, gpus_per_instance: int, gpu: str, plan: dict[str, Any], s: EmitSettings) -> int:
    inventory = plan["scenario"].get("inventory") or {}
    if gpu in inventory:
        spare = max(0, int(inventory[gpu]) - int(plan["gpus_used"].get(gpu, 0)))
        return planned + spare // gpus_per_instance
    return max(planned, math.ceil(planned * s.max_replicas_factor))


def build_ir(plan: dict[str, Any], settings: EmitSettings | None = None) -> DeploymentIR:
    """Turn a plan document into a :class:`DeploymentIR` (no rules are checked here; see ``rules.check_rules``).

    Autoscaling targets (per pod, hetplan's own reconstruction): prefill holds ``vllm:num_requests_waiting`` at
    ``floor(prefill capacity [req/s] x TTFT SLO [s])`` (the queue an instance clears within the SLO), decode holds
    ``vllm:num_requests_running`` at the plan's decode batch, aggregated holds ``vllm:num_requests_waiting`` at 2.
    Autoscaling max: planned + spare inventory of that GPU type / GPUs per instance, or ceil(planned x
    ``max_replicas_factor``) without an inventory.

    Raises:
        InputError: the plan is malformed, names an unknown model or GPU, lacks a model source, or a setting is bad.
    """
    s = settings or EmitSettings()
    check_settings(s)
    check_plan(plan)
    scen = plan["scenario"]
    spec = find_model(str(scen["model"]))
    source = s.model_source or spec.hf_repo
    if not source:
        raise InputError(
            f"model {spec.name} has no Hugging Face repo in the catalog",
            "engines need a repo id or a path to load",
            "pass --model-source REPO_OR_PATH",
        )
    weight_dtype, kv_dtype = str(scen["weight_dtype"]), str(scen["kv_dtype"])
    if weight_dtype in ("int4", "int8") and not s.model_source:
        raise InputError(
            f"plan uses {weight_dtype} weights but no quantized checkpoint was given",
            f"the catalog repo {spec.hf_repo} holds 16-bit weights",
            "pass --model-source with an AWQ/GPTQ checkpoint of the model",
        )
    dtype, quantization, kv_cache_dtype = _dtypes(weight_dtype, kv_dtype)
    perf = scen["perf_settings"]
    where = "plan scenario.perf_settings"
    utilization = _number(perf, "gpu_memory_utilization", where, 0.0, 1.0)
    block = _int(perf, "block_size_tokens", where)
    max_seqs = _int(perf, "max_num_seqs", where)
    max_batched = _int(perf, "max_num_batched_tokens", where)
    reserve = perf.get("activation_reserve_gib", 0.0)
    if isinstance(reserve, bool) or not isinstance(reserve, int | float) or reserve < 0:
        raise InputError(f"{where}.activation_reserve_gib must be a number >= 0, got {reserve!r}", fix="fix that field")
    max_len = s.max_model_len_tokens or spec.max_position_embeddings
    ttft_slo_s = float(scen.get("slo", {}).get("ttft_s", 0.0) or 0.0)
    base = dns_name(s.name or str(scen["name"]))
    if not base[0].isalpha():  # Service names are DNS-1035 labels: they start with a letter
        base = dns_name("hp-" + base)
    total_goodput = float(plan["goodput_req_per_s"]) or 1.0

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
    ) -> Any:
        """One role of one unit; ``bounds`` (min, max copies, from an autoscaling schedule) override the
        planned count as the autoscaler's minimum and the spare-inventory maximum."""
        gpu = find_gpu(gpu_name)
        per_node = s.gpus_per_node
        nodes, per_pod = _spread(tp * pp, per_node)
        backend = "ray" if nodes > 1 else None
        kv_role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role)
        engine = EngineFlags(
            tp, pp, min(max_seqs, target) if role == "decode" else max_seqs, max_batched, utilization, max_len, block,
            dtype, quantization, kv_cache_dtype,
            s.kv_connector if kv_role else None, kv_role, backend,
        )  # fmt: skip
        planned = per_copy * (bounds[0] if bounds else count)
        metric = "vllm:num_requests_running" if role == "decode" else "vllm:num_requests_waiting"
        return InstanceGroup(
            name=f"{base}-u{unit}-{role}-{dns_name(gpu.name, 20)}",
            role=role,
            unit_index=unit,
            gpu=gpu.name,
            gpu_vendor=gpu.vendor,
            gpu_label_key=s.gpu_label_key,
            gpu_label_value=s.label_for(gpu.name),
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
        )

    units: list[ServingUnit] = []
    for i, combo in enumerate(plan.get("combos") or []):
        where = f"plan combos[{i}]"
        count = _int(combo, "count", where)
        prefill_target = int(float(combo.get("prefill_capacity_req_per_s", 0.0) or 0.0) * ttft_slo_s)
        bounds = None
        if "min_count" in combo:  # a schedule from hetplan autoscale: the autoscaler moves between these
            low = combo["min_count"]
            if isinstance(low, bool) or not isinstance(low, int) or not 0 <= low <= count:
                raise InputError(f"{where}.min_count must be an integer in 0..count, got {low!r}", fix="fix it")
            bounds = (low, count)
        groups = (
            group(i, "prefill", combo["prefill_gpu"], _int(combo, "prefill_tp", where),
                  _int(combo, "prefill_pp", where, 1), _int(combo, "n_prefill", where), count, prefill_target, bounds),
            group(i, "decode", combo["decode_gpu"], _int(combo, "decode_tp", where),
                  _int(combo, "decode_pp", where, 1), _int(combo, "n_decode", where), count,
                  int(combo.get("decode_batch", 1)), bounds),
        )  # fmt: skip
        goodput = float(combo["goodput_req_per_s"])
        units.append(
            ServingUnit(i, f"{base}-u{i}", "disaggregated", count, goodput, goodput * count / total_goodput, groups)
        )
    offset = len(units)
    instances = plan.get("instances") or []
    shares = [float(inst.get("traffic_share", 0.0) or 0.0) for inst in instances]
    for j, inst in enumerate(instances):
        where, i = f"plan instances[{j}]", offset + j
        if inst.get("role", "aggregated") != "aggregated":
            raise InputError(f"{where}.role must be 'aggregated', got {inst.get('role')!r}", fix="fix that field")
        count = _int(inst, "count", where)
        share = shares[j] if sum(shares) > 0 else 1.0 / len(instances)
        g = group(i, "aggregated", inst["gpu"], _int(inst, "tp", where), _int(inst, "pp", where, 1), count, 1, 2)
        units.append(ServingUnit(i, f"{base}-u{i}", "aggregated", 1, total_goodput * share, share, (g,)))
    notes = []
    if instances:
        notes.append(
            "Mélange assigns request-size buckets to GPU types; the emitted routers split traffic by each type's "
            "traffic share only (no size-aware routing): route by prompt/output length in front of them if needed"
        )
    if s.router_image == EmitSettings.router_image:
        notes.append(
            f"router image {s.router_image!r} is a placeholder: build vllm-router (github.com/vllm-project/router) "
            "into an image and pass --router-image"
        )
    return DeploymentIR(
        name=base,
        namespace=s.namespace,
        strategy=str(plan.get("strategy", "")),
        model=ModelIR(
            spec.name,
            source,
            s.served_model_name or source,
            spec.num_attention_heads,
            spec.max_position_embeddings,
            weight_dtype,
            kv_dtype,
        ),  # fmt: skip
        units=tuple(units),
        settings=s,
        plan_gpus_used=tuple(sorted((str(k), int(v)) for k, v in plan["gpus_used"].items())),
        activation_reserve_gib=float(reserve),
        ttft_slo_s=ttft_slo_s,
        notes=tuple(notes),
        from_schedule=any("min_count" in c for c in plan.get("combos") or []),
    )
