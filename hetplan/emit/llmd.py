"""llm-d target: one LWS ``DisaggregatedSet`` per combo and one ``InferencePool`` per routing unit.

Files (under ``llmd/``):

- ``<unit>.yaml`` for a combo: a ``DisaggregatedSet`` (``disaggregatedset.x-k8s.io/v1``) whose ``slices`` is the
  combo's copy count and whose roles ``prefill`` and ``decode`` run the plan's instances per copy on their GPU
  types; decode pods carry llm-d's routing sidecar (port 8000 in front of the engine on 8200), as llm-d's P/D mode
  expects, with the engine's connector (:data:`SIDECAR_CONNECTORS`: vLLM and SGLang; TensorRT-LLM prefill/decode
  units are refused, :func:`llmd_refusal`). For an aggregated unit: a ``LeaderWorkerSet``.
- ``<unit>`` ``InferencePool`` (``inference.networking.k8s.io/v1``) in the same file, selecting that unit's serving
  pods and naming its endpoint picker ``<unit>-epp``; one pool per unit keeps prefill/decode pairing inside a combo.
- ``README.md``: how to install the endpoint pickers and split traffic across pools by goodput share.
- ``epp-prefix-scoring.yaml`` (a plan sized with prefix reuse only, :mod:`hetplan.planning.prefix`): a
  ConfigMap holding an ``EndpointPickerConfig`` whose default profile scores endpoints by the Gateway API
  Inference Extension's ``prefix-cache-scorer`` and ``queue-scorer`` at equal weights, the rule the simulator's
  ``prefix`` router models (:mod:`hetplan.sim.router`), so that the reuse the plan counts on is routed for.

Source: DESIGN §5 (target 3); llm-d labels (``llm-d.ai/inference-serving``, ``llm-d.ai/role``) and sidecar ports
follow the llm-d-modelservice chart's values; the layout is hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from hetplan.emit.common import (
    LABEL,
    group_labels,
    md_header,
    meta,
    routing_files,
    routing_readme,
    unit_labels,
    yaml_docs,
)
from hetplan.emit.ir import DeploymentIR, InstanceGroup, ServingUnit, apportion
from hetplan.emit.k8s_pods import engine_container, pod_spec, worker_container
from hetplan.errors import EmitRuleError
from hetplan.io import to_yaml

SIDECAR_VLLM_PORT = 8200
EPP_PORT = 9002
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def _labels(ir: DeploymentIR, g: InstanceGroup, serving: bool) -> dict[str, str]:
    labels = group_labels(ir, g, serving)
    if serving:
        labels["llm-d.ai/inference-serving"] = "true"
        labels["llm-d.ai/role"] = {"aggregated": "both"}.get(g.role, g.role)
    return labels


SIDECAR_CONNECTORS = {"vllm": "nixlv2", "sglang": "sglang"}
"""The routing sidecar's ``--connector`` per engine: ``nixlv2`` (vLLM's NixlConnector hand-off) and ``sglang``
(SGLang's bootstrap hand-off: the sidecar adds ``bootstrap_host`` = the prefill pod, ``bootstrap_port`` 8998 and a
``bootstrap_room`` to both requests). Its connectors are ``nixlv2``, ``shared-storage`` and ``sglang`` (llm-d
inference scheduler ``cmd/pd-sidecar/main.go`` and ``pkg/sidecar/proxy/connector_sglang.go``, v0.4.0): none for
TensorRT-LLM."""

SIDECAR_SGLANG_IMAGE = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0"
"""The first sidecar release with the ``sglang`` connector (llm-d inference scheduler v0.4.0, December 2025; the
connector came from llm-d-routing-sidecar pull request 64); the default image for SGLang plans."""


def sidecar_image(ir: DeploymentIR) -> str:
    """The routing sidecar image: ``routing_sidecar_image`` when set, else the default for the plan's engine."""
    from hetplan.emit.settings import EmitSettings

    image = ir.settings.routing_sidecar_image
    if ir.engine == "sglang" and image == EmitSettings.routing_sidecar_image:
        return SIDECAR_SGLANG_IMAGE
    return image


def _sidecar(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    connector = SIDECAR_CONNECTORS[ir.engine]
    return {
        "name": "routing-proxy",
        "image": sidecar_image(ir),
        "restartPolicy": "Always",  # a native sidecar: starts first, lives as long as the pod
        "args": [
            f"--port={g.port}",
            f"--vllm-port={SIDECAR_VLLM_PORT}",
            f"--connector={connector}",
            "--secure-proxy=false",
        ],  # fmt: skip
        "ports": [{"name": "http", "containerPort": g.port, "protocol": "TCP"}],
    }


def _serving_pod(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    if g.role == "decode":
        container = engine_container(ir, g, SIDECAR_VLLM_PORT)
        container["ports"][0]["name"] = "vllm"
        return pod_spec(g, [container], initContainers=[_sidecar(ir, g)])
    return pod_spec(g, [engine_container(ir, g)])


def _lws_template(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    serving = {"metadata": {"labels": _labels(ir, g, True)}, "spec": _serving_pod(ir, g)}
    if not g.multi_node:
        return {"size": 1, "workerTemplate": serving}
    return {
        "size": g.nodes_per_instance,
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": serving,
        "workerTemplate": {
            "metadata": {"labels": _labels(ir, g, False)},
            "spec": pod_spec(g, [worker_container(ir, g)]),
        },
    }


def _workload(ir: DeploymentIR, unit: ServingUnit) -> dict[str, Any]:
    labels = unit_labels(ir, unit)
    agg = unit.group("aggregated")
    if agg is not None:
        return {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": meta(ir, unit.name, labels),
            "spec": {"replicas": agg.replicas, "leaderWorkerTemplate": _lws_template(ir, agg)},
        }
    roles = []
    for g in unit.groups:
        roles.append(
            {
                "name": g.role,
                "spec": {"replicas": g.instances_per_copy, "leaderWorkerTemplate": _lws_template(ir, g)},
            }
        )
    return {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": meta(ir, unit.name, labels),
        "spec": {"slices": unit.count, "roles": roles},
    }


def _pool(ir: DeploymentIR, unit: ServingUnit) -> dict[str, Any]:
    selector = {
        "llm-d.ai/inference-serving": "true",
        f"{LABEL}/deployment": ir.name,
        f"{LABEL}/unit": f"u{unit.index}",
        WORKER_INDEX: "0",
    }
    annotations = {f"{LABEL}/goodput-share": str(round(unit.goodput_share, 4))}
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": meta(ir, unit.name, unit_labels(ir, unit), annotations),
        "spec": {
            "selector": {"matchLabels": selector},
            "targetPorts": [{"number": ir.settings.engine_port}],
            "endpointPickerRef": {
                "kind": "Service",
                "name": f"{unit.name}-epp",
                "port": {"number": EPP_PORT},
                "failureMode": "FailClose",
            },
        },
    }


def _readme(ir: DeploymentIR) -> str:
    weights = apportion([u.goodput_share for u in ir.units], 100)
    refs = "\n".join(
        f"    - group: inference.networking.k8s.io\n      kind: InferencePool\n      name: {u.name}\n      weight: {w}"
        for u, w in zip(ir.units, weights, strict=True)
    )
    rows = "\n".join(
        f"| {u.name} | {'DisaggregatedSet' if u.kind == 'disaggregated' else 'LeaderWorkerSet'} | {u.count} | "
        + ", ".join(f"{g.role} {g.instances_per_copy} x {g.gpu} TP{g.tp}" for g in u.groups)
        + f" | {round(u.goodput_share, 4)} |"
        for u in ir.units
    )
    return (
        f"# llm-d manifests for {ir.name}\n\n"
        + md_header(ir)
        + "\nNeeds the LeaderWorkerSet controller with DisaggregatedSet, the Gateway API Inference Extension CRDs "
        "(InferencePool v1) and, for each pool, an endpoint picker (EPP) Service named `<pool>-epp` on port "
        f"{EPP_PORT} configured for prefill/decode scheduling (llm-d's inference scheduler with its P/D profile).\n\n"
        "| unit | kind | slices | per slice | goodput share |\n|---|---|---|---|---|\n" + rows + "\n\n"
        "One pool per unit keeps prefill/decode pairing inside a combo. Route across the pools by goodput share, "
        "e.g. an HTTPRoute on your inference gateway with weighted backends:\n\n"
        "```yaml\n    backendRefs:\n" + refs + "\n```\n" + _engine_note(ir)
    )


def _engine_note(ir: DeploymentIR) -> str:
    """For SGLang plans with prefill/decode units: the sidecar's SGLang connector and the release it needs."""
    if ir.engine != "sglang" or all(u.kind == "aggregated" for u in ir.units):
        return ""
    return (
        f"\nThe pods run SGLang {ir.engine_version}, as planned. llm-d's routing sidecar on decode pods runs its "
        "`sglang` connector: it sends each request to the prefill pod the endpoint picker chose and to the local "
        "decode server at once, both carrying that prefill pod as `bootstrap_host`, bootstrap port 8998 and a "
        "`bootstrap_room`. The connector is in the sidecar from llm-d inference scheduler v0.4.0 "
        f"(`{SIDECAR_SGLANG_IMAGE}`, the default here).\n"
    )


def llmd_refusal(ir: DeploymentIR) -> EmitRuleError | None:
    """Why the llm-d target cannot deploy ``ir``, or None: a TensorRT-LLM plan with prefill/decode units (the
    routing sidecar has no TensorRT-LLM connector, see :data:`SIDECAR_CONNECTORS`)."""
    if ir.engine != "trtllm" or all(u.kind == "aggregated" for u in ir.units):
        return None
    return EmitRuleError(
        f"the llm-d target cannot pair TensorRT-LLM {ir.engine_version} prefill and decode servers",
        "[rule llmd-engine] llm-d's routing sidecar hands a request from prefill to decode by the engine's protocol "
        "and has connectors for vLLM (nixlv2) and SGLang (sglang) only (llm-d inference scheduler pd-sidecar)",
        "use --target dynamo (Dynamo's TensorRT-LLM workers pair prefill and decode) or --target trtllm "
        "(trtllm-serve disaggregated); --target all leaves llm-d out for such plans",
        rule="llmd-engine",
    )


def emit_llmd(ir: DeploymentIR) -> dict[str, str]:
    """Files of the llm-d target, keyed by path relative to the output folder (fixed order).

    Raises:
        EmitRuleError: the plan uses MooncakeConnector (hetplan emits llm-d's sidecar with NIXL only), or is a
            TensorRT-LLM plan with prefill/decode units (:func:`llmd_refusal`).
    """
    refusal = llmd_refusal(ir)
    if refusal is not None:
        raise refusal
    if ir.settings.kv_connector != "NixlConnector":
        raise EmitRuleError(
            f"the llm-d target does not support {ir.settings.kv_connector}",
            "[rule llmd-connector] hetplan emits llm-d's routing sidecar with the NIXL connector (nixlv2) only",
            "use --kv-connector nixl for llm-d, or emit other targets with --target",
            rule="llmd-connector",
        )
    files = {}
    for u in ir.units:
        files[f"llmd/{u.name}.yaml"] = yaml_docs(ir, [_workload(ir, u), _pool(ir, u)])
    files.update(routing_files(ir, "llmd"))
    files["llmd/README.md"] = _readme(ir) + routing_readme(ir) + (_prefix_note() if ir.prefix_cache else "")
    if ir.prefix_cache:
        files["llmd/epp-prefix-scoring.yaml"] = _prefix_scoring(ir)
    return files


def _prefix_scoring(ir: DeploymentIR) -> str:
    """The endpoint picker's scoring for cache locality (module docstring): a ConfigMap whose
    ``epp-config.yaml`` is the ``EndpointPickerConfig`` (the config file the endpoint picker reads, as the
    inference extension's chart mounts it)."""
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "single-profile-handler"},
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "max-score-picker"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "prefix-cache-scorer", "weight": 1},
                    {"pluginRef": "queue-scorer", "weight": 1},
                    {"pluginRef": "max-score-picker"},
                ],
            }
        ],
    }
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(ir, f"{ir.name}-epp-prefix-scoring", {f"{LABEL}/deployment": ir.name}),
        "data": {"epp-config.yaml": to_yaml(config)},
    }
    return yaml_docs(ir, [cm])


def _prefix_note() -> str:
    return (
        "\n## Prefix caching\n\nThis plan was sized with prefix reuse (the plan's `prefix_cache`: the hit rates it "
        "assumes and what it would cost without). Keep vLLM's automatic prefix caching on (its default) and route "
        "for cache locality: the ConfigMap in `epp-prefix-scoring.yaml` holds an endpoint picker configuration "
        "that scores endpoints by the `prefix-cache-scorer` and the "
        "`queue-scorer` at equal weights. Merge its plugins into each pool's endpoint picker configuration (for "
        "prefill/decode pools, into the profile that picks the prefill endpoint).\n"
    )
