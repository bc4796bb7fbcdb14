"""What a plan does not decide and ``hetplan emit`` takes as settings: images, model source, cluster conventions,
connector and API versions (:class:`EmitSettings`), the GPU node-label table, and their checks.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hetplan.emit.names import is_dns_label, is_dns_subdomain, is_label_key, is_label_value
from hetplan.errors import InputError

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


@dataclass(frozen=True)
class Provisioner:
    """How one node provisioner (or labeller) names GPU types on Kubernetes nodes.

    Attributes:
        name: ``gfd``, ``gke``, ``karpenter``, ``eks`` or ``aks`` (``--provisioner``).
        label_key: node label whose value names the GPU type (``nodeSelector``).
        values: catalog GPU name -> label value(s); several values (AKS VM sizes) become a node-affinity ``In``
            list, one value a ``nodeSelector`` entry. A GPU without a value is refused (rule ``gpu-label``).
        memory_key: node label holding each GPU's memory in MiB, or None when the label family has none; when set,
            pods also require more than :data:`MEMORY_FLOOR_FRACTION` of the catalog GPU's memory (so an A100-80GB
            pool cannot land on 40 GB machines that share the GPU name).
        source: where the keys and values are documented.
    """

    name: str
    label_key: str
    values: dict[str, tuple[str, ...]]
    memory_key: str | None
    source: str


MEMORY_FLOOR_FRACTION = 0.9
"""A GPU-memory requirement asks for more than this share of the catalog GPU's nominal memory (MiB): cloud APIs
report slightly less than the datasheet (an L4's 24 GB as 22,888 MiB) and far less for the smaller sibling."""


def _one(table: dict[str, str]) -> dict[str, tuple[str, ...]]:
    return {gpu: (value,) for gpu, value in table.items()}


# Karpenter on AWS (and EKS Auto Mode, which runs Karpenter) name the GPU in lower case, one name per chip: the
# A100 40 GB (p4d) and 80 GB (p4de) are both "a100", which is why these provisioners add a memory requirement.
# Sources: EKS User Guide "Create a Node Pool for EKS Auto Mode" (docs.aws.amazon.com/eks/latest/userguide/
# create-node-pool.html), table "EKS Auto Mode Supported Labels": eks.amazonaws.com/instance-gpu-name (example t4,
# "Name of the GPU on the instance"), eks.amazonaws.com/instance-gpu-memory (example 16384, "Number of mebibytes of
# memory on the GPU"); "Control deployment of workloads into Capacity Reservations with EKS Auto Mode"
# (.../userguide/auto-odcr.html): nodeSelector eks.amazonaws.com/instance-gpu-name l4, a100, h200 or b200; Karpenter
# "Instance Types" reference (karpenter.sh/docs/reference/instance-types): the same names and MiB under
# karpenter.k8s.aws/instance-gpu-name and instance-gpu-memory (EC2 DescribeInstanceTypes GPU names, lower-cased).
_AWS_GPU_NAMES: dict[str, str] = {
    "H100-SXM": "h100",
    "H200-SXM": "h200",
    "B200": "b200",
    "A100-80GB-SXM": "a100",
    "A100-40GB-SXM": "a100",
    "L40S": "l40s",
    "L4": "l4",
    "A10G": "a10g",
    "T4": "t4",
}

PROVISIONERS: dict[str, Provisioner] = {
    "gfd": Provisioner(
        "gfd",
        "nvidia.com/gpu.product",
        _one(DEFAULT_GPU_LABELS),
        None,  # GFD's nvidia.com/gpu.memory exists, but the product name already fixes the memory size
        "NVIDIA GPU feature discovery README, 'Generated Labels' (github.com/NVIDIA/k8s-device-plugin, "
        "docs/gpu-feature-discovery)",
    ),
    "gke": Provisioner(
        "gke",
        "cloud.google.com/gke-accelerator",
        _one(
            {
                "H100-SXM": "nvidia-h100-80gb",
                "H200-SXM": "nvidia-h200-141gb",
                "B200": "nvidia-b200",
                "GB200": "nvidia-gb200",
                "A100-80GB-SXM": "nvidia-a100-80gb",
                "A100-40GB-SXM": "nvidia-tesla-a100",
                "L4": "nvidia-l4",
                "T4": "nvidia-tesla-t4",
            }
        ),
        None,  # each GKE accelerator value names one memory size already
        "GKE 'Run GPUs in Standard node pools' / 'Deploy GPU workloads in Autopilot' (cloud.google.com/"
        "kubernetes-engine/docs/how-to/autopilot-gpus) and Compute Engine 'GPU machine types' for the values",
    ),
    "karpenter": Provisioner(
        "karpenter",
        "karpenter.k8s.aws/instance-gpu-name",
        _one(_AWS_GPU_NAMES),
        "karpenter.k8s.aws/instance-gpu-memory",
        "Karpenter 'Instance Types' reference (karpenter.sh/docs/reference/instance-types: karpenter.k8s.aws/"
        "instance-gpu-name, instance-gpu-memory in MiB); EKS Best Practices 'AI/ML compute' (docs.aws.amazon.com/"
        "eks/latest/best-practices/aiml-compute.html: nodeSelector karpenter.k8s.aws/instance-gpu-name: l40s)",
    ),
    "eks": Provisioner(
        "eks",
        "eks.amazonaws.com/instance-gpu-name",
        _one(_AWS_GPU_NAMES),
        "eks.amazonaws.com/instance-gpu-memory",
        "EKS User Guide 'Create a Node Pool for EKS Auto Mode', table 'EKS Auto Mode Supported Labels' "
        "(docs.aws.amazon.com/eks/latest/userguide/create-node-pool.html: instance-gpu-name e.g. t4, "
        "instance-gpu-memory in MiB); values l4, a100, h200, b200 in 'Control deployment of workloads into Capacity "
        "Reservations with EKS Auto Mode' (.../userguide/auto-odcr.html); 'Target AI/ML workloads to specific nodes "
        "with labels' (.../userguide/ml-workload-placement.html) compares the Karpenter and Auto Mode keys",
    ),
    "aks": Provisioner(
        "aks",
        # AKS labels a GPU node's vendor only (kubernetes.azure.com/accelerator=nvidia, in the reserved labels of
        # "Use labels in an AKS cluster", learn.microsoft.com/azure/aks/use-labels, and the label table of Azure
        # Architecture Center "Manage Kubernetes nodes and node pools", .../azure/architecture/aws-professional/
        # eks-to-aks/node-pools); the GPU model is in the VM size, the well-known node.kubernetes.io/instance-type
        # (kubernetes.io/docs/reference/labels-annotations-taints). VM sizes with whole GPUs, from "Sizes for virtual
        # machines in Azure", GPU-accelerated families (learn.microsoft.com/azure/virtual-machines/sizes/overview):
        # ND H100 v5, ND H200 v5, NCads H100 v5, NDm A100 v4 (80 GB), ND A100 v4 (40 GB), NC A100 v4 (80 GB PCIe),
        # NVadsA10 v5 (NV36ads/NV36adms: one A10; NV72ads: two; the smaller sizes hold a GPU fraction), NCasT4_v3.
        "node.kubernetes.io/instance-type",
        {
            "H100-SXM": ("Standard_ND96isr_H100_v5",),
            "H200-SXM": ("Standard_ND96isr_H200_v5",),
            "H100-NVL": ("Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5"),
            "A100-80GB-SXM": ("Standard_ND96amsr_A100_v4",),
            "A100-40GB-SXM": ("Standard_ND96asr_v4",),
            "A100-80GB-PCIe": ("Standard_NC24ads_A100_v4", "Standard_NC48ads_A100_v4", "Standard_NC96ads_A100_v4"),
            "A10": ("Standard_NV36ads_A10_v5", "Standard_NV36adms_A10_v5", "Standard_NV72ads_A10_v5"),
            "T4": ("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3", "Standard_NC16as_T4_v3", "Standard_NC64as_T4_v3"),
        },
        None,
        "AKS 'Use labels in an AKS cluster' (learn.microsoft.com/azure/aks/use-labels, reserved labels: "
        "kubernetes.azure.com/accelerator=nvidia names the vendor only) and 'Use GPUs on AKS' "
        "(.../aks/use-nvidia-gpu), so pods select the GPU VM sizes ('Sizes for virtual machines in Azure', "
        "GPU-accelerated families)",
    ),
}
"""Node-label conventions per provisioner (``--provisioner``); ``--gpu-label GPU=VALUE`` overrides one GPU."""


def provisioner_for(name: str, label_key: str = "") -> Provisioner:
    """The provisioner ``name`` names, or (``name`` ``gfd`` and ``label_key`` given) the one whose label key
    ``label_key`` is; a key no provisioner writes gives a ``custom`` provisioner without values (see
    :func:`check_custom_labels`).

    Raises:
        InputError: an unknown provisioner, or a key another provisioner owns than the one named.
    """
    key = name.strip().lower()
    if key not in PROVISIONERS:
        raise InputError(
            f"unknown provisioner {name!r}",
            f"known: {', '.join(PROVISIONERS)}",
            "pass --provisioner gfd, gke, karpenter, eks or aks",
        )
    if not label_key:
        return PROVISIONERS[key]
    owner = next((p for p in PROVISIONERS.values() if p.label_key == label_key), None)
    if owner is None:  # the user's own label: every value must come from --gpu-label (check_custom_labels)
        return Provisioner("custom", label_key, {}, None, "the user's --gpu-label values")
    if key != "gfd" and owner.name != key:
        raise InputError(
            f"--gpu-label-key {label_key!r} is {owner.name}'s, not {key}'s",
            f"--provisioner {key} selects GPUs with {PROVISIONERS[key].label_key}",
            f"drop --gpu-label-key, or pass --provisioner {owner.name}",
        )
    return owner


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
        provisioner: whose node labels select a GPU type (:data:`PROVISIONERS`): ``gfd`` (NVIDIA GPU feature
            discovery, default), ``gke``, ``karpenter``, ``eks`` (Auto Mode) or ``aks``.
        gpu_label_key: node label that selects a GPU type; empty = the provisioner's. A key given must be one a
            provisioner writes (it then picks that provisioner's values); any other key is refused.
        gpu_labels: ``(catalog GPU name, label value)`` pairs overriding or extending the provisioner's values.
        gpus_per_node: GPUs one node offers; an instance needing more spans nodes (LeaderWorkerSet, Ray).
        kv_connector: ``NixlConnector`` (default) or ``MooncakeConnector``.
        dynamo_api_versions: DynamoGraphDeployment versions to emit: ``v1beta1`` (storage) and/or ``v1alpha1``.
        max_model_len_tokens: ``--max-model-len`` (default: the plan's ``scenario.deployment.max_model_len_tokens``,
            the longest request it was sized for, else the model's ``max_position_embeddings``, vLLM's own
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
    provisioner: str = "gfd"
    gpu_label_key: str = ""
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

    @property
    def node_provisioner(self) -> Provisioner:
        """The provisioner whose labels the manifests use (see :func:`provisioner_for`).

        Raises:
            InputError: as :func:`provisioner_for`.
        """
        return provisioner_for(self.provisioner, self.gpu_label_key)

    @property
    def label_key(self) -> str:
        """The node label key that selects a GPU type (the provisioner's)."""
        return self.node_provisioner.label_key

    def labels_for(self, gpu: str) -> tuple[str, ...]:
        """Node label value(s) for catalog GPU ``gpu``: the user's override, else the provisioner's table, else
        none."""
        for name, value in self.gpu_labels:
            if name == gpu:
                return (value,)
        return self.node_provisioner.values.get(gpu, ())

    def label_for(self, gpu: str) -> str | None:
        """The first node label value for ``gpu`` (:meth:`labels_for`), or None."""
        values = self.labels_for(gpu)
        return values[0] if values else None


# -- settings checks ----------------------------------------------------------------------------------------------


def check_custom_labels(s: EmitSettings, gpus: list[str]) -> None:
    """With a ``--gpu-label-key`` no provisioner writes, every GPU in ``gpus`` needs its value from
    ``--gpu-label`` (hetplan knows no values under that key and never guesses them).

    Raises:
        InputError: the key is unknown and some GPU has no ``--gpu-label`` value; names the key and the GPUs.
    """
    p = s.node_provisioner
    missing = sorted({gpu for gpu in gpus if p.name == "custom" and s.label_for(gpu) is None})
    if missing:
        known = ", ".join(f"{q.label_key} ({q.name})" for q in PROVISIONERS.values())
        raise InputError(
            f"--gpu-label-key {p.label_key!r} is not a GPU label any provisioner hetplan knows writes, and "
            f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no --gpu-label value under it",
            f"known keys: {known}; hetplan does not guess the values your nodes carry under another key",
            "pass --provisioner gfd|gke|karpenter|eks|aks instead, or --gpu-label GPU=VALUE for every GPU of the plan",
        )


def check_label_value(value: str, field: str) -> None:
    """Raise :class:`InputError` unless ``value`` is a valid Kubernetes label value (<= 63 characters)."""
    if not is_label_value(value):
        raise InputError(
            f"{field} {value!r} is not a valid Kubernetes label value",
            "label values are at most 63 characters of letters, digits, '-', '_' and '.', starting and ending "
            "with a letter or digit",
            f"pass a valid value for {field}",
        )


def check_settings(s: EmitSettings) -> None:
    """Check settings a user can get wrong; every message names the setting and its fix.

    Raises:
        InputError: a bad namespace, provisioner, label key or value, image, connector, API version, autoscaler or
            number.
    """
    if not is_dns_label(s.namespace):
        raise InputError(
            f"namespace {s.namespace!r} is not a DNS-1123 label",
            "Kubernetes namespaces are at most 63 lower-case letters, digits and '-'",
            "pass --namespace with a name like 'llm-serving'",
        )
    if s.gpu_label_key and not is_label_key(s.gpu_label_key):
        raise InputError(
            f"GPU label key {s.gpu_label_key!r} is not a valid Kubernetes label key",
            "a label key is an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'",
            "pass --gpu-label-key like 'nvidia.com/gpu.product'",
        )
    provisioner_for(s.provisioner, s.gpu_label_key)  # an unknown provisioner or label key
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
    if s.hf_token_secret is not None and not is_dns_subdomain(s.hf_token_secret):
        raise InputError(f"hf_token_secret {s.hf_token_secret!r} is not a Secret name", fix="pass a DNS-1123 name")
