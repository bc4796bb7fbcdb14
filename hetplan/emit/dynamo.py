"""NVIDIA Dynamo target: one ``DynamoGraphDeployment`` per routing unit, prefill and decode on their GPU types.

Files (under ``dynamo/``): ``<unit>.v1beta1.yaml`` (``nvidia.com/v1beta1``, the storage version:
``spec.components`` with ``type`` frontend / prefill / decode / worker) and, on request, ``<unit>.v1alpha1.yaml``
(``nvidia.com/v1alpha1``, deprecated but served: ``spec.services`` with ``componentType`` and
``subComponentType``), plus ``README.md``. Each graph has its own frontend, so prefill/decode pairing stays inside
one combo; split traffic across the frontends by goodput share (README). Workers run ``python3 -m dynamo.vllm``
with the same engine flags as the vLLM target and ``--disaggregation-mode prefill|decode``; GPU types are pinned
with the node selector.

Source: DESIGN §5 (target 4); field names from the shipped DynamoGraphDeployment CRD schemas; the layout is
hetplan's own reconstruction.
"""

from __future__ import annotations

import shlex
from typing import Any

from hetplan.emit.common import (
    engine_env,
    gpu_resources,
    md_header,
    meta,
    routing_files,
    routing_readme,
    unit_labels,
    yaml_docs,
)
from hetplan.emit.engines import (
    TRTLLM_OPTIONS_ENV,
    TRTLLM_OPTIONS_PATH,
    dynamo_image,
    sglang_args,
    trtllm_options,
)
from hetplan.emit.ir import DeploymentIR, InstanceGroup, ServingUnit, apportion
from hetplan.emit.names import dns_name
from hetplan.emit.vllm import engine_args
from hetplan.errors import EmitRuleError
from hetplan.io import to_yaml

COMPONENT_TYPE = {"prefill": "prefill", "decode": "decode", "aggregated": "worker"}


def worker_argv(ir: DeploymentIR, g: InstanceGroup) -> list[str]:
    """``python3 -m dynamo.<engine>`` argv of a worker of group ``g`` (Dynamo wires multi-node itself): vLLM's or
    SGLang's engine flags, or for TensorRT-LLM the options YAML at :data:`TRTLLM_OPTIONS_PATH` (see
    :func:`_worker_container`)."""
    mode = ["--disaggregation-mode", g.role] if g.role in ("prefill", "decode") else []
    if ir.engine == "sglang":
        return ["python3", "-m", "dynamo.sglang", *sglang_args(ir, g)]
    if ir.engine == "trtllm":
        head = ["python3", "-m", "dynamo.trtllm", "--model-path", ir.model.source]
        return [*head, "--served-model-name", ir.model.served_name, "--extra-engine-args", TRTLLM_OPTIONS_PATH, *mode]
    args = engine_args(ir, g, kv_role="kv_both")
    if "--distributed-executor-backend" in args:
        k = args.index("--distributed-executor-backend")
        del args[k : k + 2]
    return ["python3", "-m", "dynamo.vllm", "--model", ir.model.source, *args, *mode]


def _frontend_argv(ir: DeploymentIR) -> list[str]:
    return ["python3", "-m", "dynamo.frontend", "--http-port", str(ir.settings.engine_port)]


def _component_name(g: InstanceGroup) -> str:
    return dns_name(f"{g.role}-{g.gpu}", 63)


def _worker_container(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    argv = worker_argv(ir, g)
    env = [e for e in engine_env(ir, g) if e["name"] == "HF_TOKEN"]  # Dynamo sets the NIXL side channel itself
    c: dict[str, Any] = {"name": "main", "image": dynamo_image(ir), "command": argv[:3], "args": argv[3:]}
    if ir.engine == "trtllm":
        write = f'printf "%s" "${TRTLLM_OPTIONS_ENV}" > {TRTLLM_OPTIONS_PATH}'
        c.update(command=["/bin/bash", "-c"], args=[f"{write} && exec {shlex.join(argv)}"])
        env.append({"name": TRTLLM_OPTIONS_ENV, "value": to_yaml(trtllm_options(ir, g))})
    if env:
        c["env"] = env
    return c


def _v1beta1(ir: DeploymentIR, unit: ServingUnit) -> dict[str, Any]:
    frontend = _frontend_argv(ir)
    components: list[dict[str, Any]] = [
        {
            "name": "frontend",
            "type": "frontend",
            "replicas": 1,
            "podTemplate": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": dynamo_image(ir),
                            "command": frontend[:3],
                            "args": frontend[3:],
                        }
                    ]
                }
            },
        }
    ]
    for g in unit.groups:
        container = _worker_container(ir, g)
        container["resources"] = gpu_resources(g)
        comp: dict[str, Any] = {"name": _component_name(g), "type": COMPONENT_TYPE[g.role], "replicas": g.replicas}
        if g.multi_node:
            comp["multinode"] = {"nodeCount": g.nodes_per_instance}
        comp["podTemplate"] = {"spec": {**g.placement(), "containers": [container]}}
        components.append(comp)
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta(ir, unit.name, unit_labels(ir, unit)),
        "spec": {"backendFramework": ir.engine, "components": components},
    }


def _v1alpha1(ir: DeploymentIR, unit: ServingUnit) -> dict[str, Any]:
    frontend = _frontend_argv(ir)
    services: dict[str, Any] = {
        "Frontend": {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {
                "mainContainer": {
                    "name": "main",
                    "image": dynamo_image(ir),
                    "command": frontend[:3],
                    "args": frontend[3:],
                }
            },
        }
    }
    for g in unit.groups:
        svc: dict[str, Any] = {"componentType": "worker", "replicas": g.replicas}
        if g.role in ("prefill", "decode"):
            svc["subComponentType"] = g.role
        svc["resources"] = {"limits": {"gpu": str(g.gpus_per_pod)}}
        if g.multi_node:
            svc["multinode"] = {"nodeCount": g.nodes_per_instance}
        svc["extraPodSpec"] = {
            **g.placement(),
            "mainContainer": _worker_container(ir, g),
        }
        services[_component_name(g)] = svc
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": meta(ir, unit.name, unit_labels(ir, unit)),
        "spec": {"backendFramework": ir.engine, "services": services},
    }


def _readme(ir: DeploymentIR) -> str:
    weights = apportion([u.goodput_share for u in ir.units], 100)
    rows = "\n".join(
        f"| {u.name} | "
        + ", ".join(f"{g.role} {g.replicas} x {g.gpu} TP{g.tp}" + (f" PP{g.pp}" if g.pp > 1 else "") for g in u.groups)
        + f" | {u.name}-frontend | {w} |"
        for u, w in zip(ir.units, weights, strict=True)
    )
    return (
        f"# NVIDIA Dynamo manifests for {ir.name}\n\n"
        + md_header(ir)
        + "\nNeeds the Dynamo Kubernetes platform (operator, etcd/NATS) in the namespace, and the image "
        f"`{dynamo_image(ir)}` (override with --dynamo-image; Dynamo's runtime image carries its own "
        f"{ir.engine} build, which should be the {ir.engine_version} line the plan was made for). "
        "API versions emitted: "
        f"{', '.join(ir.settings.dynamo_api_versions)}; apply one version per graph, not both.\n\n"
        "| graph | workers | frontend Service | traffic weight (of 100) |\n|---|---|---|---|\n" + rows + "\n\n"
        "Each graph has its own frontend and pairs prefill with decode only inside it; split client traffic "
        "across the frontends by the weights above.\n"
    )


def emit_dynamo(ir: DeploymentIR) -> dict[str, str]:
    """Files of the Dynamo target, keyed by path relative to the output folder (fixed order).

    Raises:
        EmitRuleError: the plan uses MooncakeConnector (hetplan emits Dynamo workers with NIXL only).
    """
    if ir.settings.kv_connector != "NixlConnector":
        raise EmitRuleError(
            f"the Dynamo target does not support {ir.settings.kv_connector}",
            "[rule dynamo-connector] hetplan emits Dynamo vLLM workers with the NIXL connector only",
            "use --kv-connector nixl for Dynamo, or emit other targets with --target",
            rule="dynamo-connector",
        )
    files = {}
    for u in ir.units:
        if "v1beta1" in ir.settings.dynamo_api_versions:
            files[f"dynamo/{u.name}.v1beta1.yaml"] = yaml_docs(ir, [_v1beta1(ir, u)])
        if "v1alpha1" in ir.settings.dynamo_api_versions:
            files[f"dynamo/{u.name}.v1alpha1.yaml"] = yaml_docs(ir, [_v1alpha1(ir, u)])
    files.update(routing_files(ir, "dynamo"))
    files["dynamo/README.md"] = _readme(ir) + routing_readme(ir)
    return files
