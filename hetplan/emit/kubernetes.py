"""Kubernetes target: engines, Services, autoscalers and per-unit routers as plain manifests.

Files (under ``kubernetes/``):

- ``<group>.yaml`` per role and GPU type of each unit: a ``Deployment`` (``apps/v1``), or a ``LeaderWorkerSet``
  (``leaderworkerset.x-k8s.io/v1``, Ray across the pods) when an instance spans nodes; a ``Service`` over its
  serving pods; a KEDA ``ScaledObject`` (``keda.sh/v1alpha1``) or an ``HorizontalPodAutoscaler``
  (``autoscaling/v2``) with min = planned replicas and max from the inventory. GPUs are requested as
  ``resources.limits["nvidia.com/gpu"]`` (a string) and pinned by ``nodeSelector`` on the purchased instance type
  (``node.kubernetes.io/instance-type``) when the plan names one, else (owned nodes) on the GPU label.
- ``<unit>-router.yaml``: a ``vllm-router`` Deployment that discovers the unit's prefill and decode pods by label
  (so pairing never crosses units) and its Service.
- ``00-router-rbac.yaml``: ServiceAccount, Role and RoleBinding letting routers watch pods.
- ``01-entry-service.yaml``: one Service over every router pod; router pods are shared out across units in
  proportion to goodput, so connections spread over them follow the plan's goodput-weighted split.
- ``README.md``: prerequisites and the objects.

The engine containers and pod specs inside these objects are built by :mod:`hetplan.emit.k8s_pods`.

Source: DESIGN §5 (target 2); object layout and autoscaling targets are hetplan's own reconstruction.
"""

from __future__ import annotations

import shlex
from typing import Any

from hetplan.emit.common import (
    LABEL,
    base_labels,
    group_labels,
    md_header,
    meta,
    policy,
    routing_files,
    routing_readme,
    serving_selector,
    unit_labels,
    yaml_docs,
)
from hetplan.emit.engines import (
    engine_image,
    trtllm_disagg_argv,
    trtllm_disagg_config,
)
from hetplan.emit.ir import DeploymentIR, InstanceGroup, ServingUnit, apportion
from hetplan.emit.k8s_pods import engine_container, pod_spec, serving_metadata, worker_container
from hetplan.io import to_yaml

LWS_API = "leaderworkerset.x-k8s.io/v1"


def _workload(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    labels = group_labels(ir, g, serving=False)
    if not g.multi_node:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(ir, g.name, labels),
            "spec": {
                "replicas": g.replicas,
                "selector": {"matchLabels": {f"{LABEL}/group": g.name}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                "template": {
                    "metadata": serving_metadata(ir, g),
                    "spec": pod_spec(g, [engine_container(ir, g)]),
                },
            },
        }
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": meta(ir, g.name, labels),
        "spec": {
            "replicas": g.replicas,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": g.nodes_per_instance,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": serving_metadata(ir, g),
                    "spec": pod_spec(g, [engine_container(ir, g)]),
                },
                "workerTemplate": {
                    "metadata": {"labels": labels},
                    "spec": pod_spec(g, [worker_container(ir, g)]),
                },
            },
        },
    }


def _service(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(ir, g.name, group_labels(ir, g, serving=False)),
        "spec": {
            "selector": {f"{LABEL}/group": g.name, f"{LABEL}/serving": "true"},
            "ports": [{"name": "http", "port": g.port, "targetPort": g.port, "protocol": "TCP"}],
        },
    }


def _target_ref(g: InstanceGroup) -> dict[str, str]:
    if g.multi_node:
        return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": g.name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": g.name}


def _autoscaler(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any] | None:
    s = ir.settings
    labels = group_labels(ir, g, serving=False)
    annotations = {f"{LABEL}/scale-rule": f"hold {g.scale_metric} at {g.scale_target_requests} per pod"}
    window = {"scaleDown": {"stabilizationWindowSeconds": 300}}  # hysteresis: no flapping of whole instances
    if s.autoscaler == "keda":
        query = f'sum({g.scale_metric}{{namespace="{ir.namespace}",pod=~"{g.name}-.*"}})'
        return {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": meta(ir, g.name, labels, annotations),
            "spec": {
                "scaleTargetRef": _target_ref(g),
                "minReplicaCount": g.replicas,
                "maxReplicaCount": g.max_replicas,
                "pollingInterval": 15,
                "cooldownPeriod": 300,
                "advanced": {"horizontalPodAutoscalerConfig": {"behavior": window}},
                "triggers": [
                    {
                        "type": "prometheus",
                        "metadata": {
                            "serverAddress": s.prometheus_url,
                            "query": query,
                            "threshold": str(g.scale_target_requests),
                        },
                    }
                ],
            },
        }
    if s.autoscaler == "hpa":
        return {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": meta(ir, g.name, labels, annotations),
            "spec": {
                "scaleTargetRef": _target_ref(g),
                "minReplicas": g.replicas,
                "maxReplicas": g.max_replicas,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": g.scale_metric.replace(":", "_")},
                            "target": {"type": "AverageValue", "averageValue": str(g.scale_target_requests)},
                        },
                    }
                ],
                "behavior": window,
            },
        }
    return None


def router_command(ir: DeploymentIR, unit: ServingUnit) -> tuple[str, list[str], list[str], list[dict[str, Any]]]:
    """(image, command, args, env) of one unit's router: ``vllm-router`` (vLLM plans, and aggregated TensorRT-LLM
    units), ``sglang_router.launch_router`` with the same Kubernetes discovery (SGLang plans), or TensorRT-LLM's
    ``trtllm-serve disaggregated`` over the unit's prefill and decode Services (its config in env
    ``TRTLLM_DISAGG``)."""
    if ir.engine == "sglang":
        args = router_args(ir, unit)
        args = ["--pd-disaggregation" if a == "--vllm-pd-disaggregation" else a for a in args]
        return engine_image(ir), ["python3", "-m", "sglang_router.launch_router"], args, []
    if ir.engine == "trtllm" and unit.group("aggregated") is None:
        p, d = unit.pair()
        urls = {"prefill": [f"{p.name}:{p.port}"], "decode": [f"{d.name}:{d.port}"]}
        config = to_yaml(trtllm_disagg_config(ir, unit, urls))
        path = "/tmp/trtllm-disagg.yaml"
        write = f'printf "%s" "$TRTLLM_DISAGG" > {path}'
        cmd = f"{write} && exec {shlex.join(trtllm_disagg_argv(path))}"
        return engine_image(ir), ["/bin/bash", "-c"], [cmd], [{"name": "TRTLLM_DISAGG", "value": config}]
    return ir.settings.router_image, ["vllm-router"], router_args(ir, unit), []


def router_args(ir: DeploymentIR, unit: ServingUnit) -> list[str]:
    """``vllm-router`` arguments for one unit using Kubernetes discovery (pods of that unit only)."""
    s = ir.settings

    def selector(role: str) -> list[str]:
        return [f"{k}={v}" for k, v in serving_selector(ir, unit.index, role).items()]

    common = ["--service-discovery", "--service-discovery-namespace", ir.namespace]
    common += ["--service-discovery-port", str(s.engine_port)]
    tail = ["--host", "0.0.0.0", "--port", str(s.router_port)]
    agg = unit.group("aggregated")
    if agg is not None:
        return [*common, "--selector", *selector("aggregated"), "--policy", policy(agg.replicas), *tail]
    p, d = unit.pair()
    args = ["--vllm-pd-disaggregation", *common]
    if p.engine.kv_connector == "MooncakeConnector":
        args += ["--kv-connector", "mooncake"]
    args += ["--prefill-selector", *selector("prefill"), "--decode-selector", *selector("decode")]
    return args + ["--prefill-policy", policy(p.replicas), "--decode-policy", policy(d.replicas), *tail]


def _router_container(ir: DeploymentIR, unit: ServingUnit, port: int) -> dict[str, Any]:
    image, command, args, env = router_command(ir, unit)
    c: dict[str, Any] = {"name": "router", "image": image, "command": command, "args": args}
    if env:
        c["env"] = env
    c["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    return c


def _router(ir: DeploymentIR, unit: ServingUnit, replicas: int) -> list[dict[str, Any]]:
    name = f"{unit.name}-router"
    labels = {**unit_labels(ir, unit), "app.kubernetes.io/name": "vllm-router", f"{LABEL}/component": "router"}
    port = ir.settings.router_port
    annotations = {f"{LABEL}/goodput-share": str(round(unit.goodput_share, 4))}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(ir, name, labels, annotations),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {f"{LABEL}/deployment": ir.name, f"{LABEL}/router": name}},
            "template": {
                "metadata": {"labels": {**labels, f"{LABEL}/router": name}},
                "spec": {
                    "serviceAccountName": f"{ir.name}-router",
                    "containers": [_router_container(ir, unit, port)],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(ir, name, labels),
        "spec": {
            "selector": {f"{LABEL}/router": name},
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
    return [deployment, service]


def _rbac(ir: DeploymentIR) -> list[dict[str, Any]]:
    name = f"{ir.name}-router"
    labels = base_labels(ir)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(ir, name, labels)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(ir, name, labels),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(ir, name, labels),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ir.namespace}],
        },
    ]


def _entry(ir: DeploymentIR) -> dict[str, Any]:
    port = ir.settings.router_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(ir, ir.name, base_labels(ir)),
        "spec": {
            "selector": {f"{LABEL}/deployment": ir.name, f"{LABEL}/component": "router"},
            "ports": [{"name": "http", "port": 80, "targetPort": port, "protocol": "TCP"}],
        },
    }


def router_replicas(ir: DeploymentIR) -> list[int]:
    """Router pods per unit: 1 for a single unit, else ``router_pods`` shared out by goodput share."""
    if len(ir.units) == 1:
        return [1]
    return apportion([u.goodput_share for u in ir.units], ir.settings.router_pods)


def _node_labels_need(ir: DeploymentIR) -> str:
    """What labels GPU nodes must carry, in words, for the README (per provisioner)."""
    p = ir.settings.node_provisioner
    if p.name == "gfd":
        return f"NVIDIA GPU operator (GPU feature discovery labels `{p.label_key}`)"
    memory = f" and `{p.memory_key}` (a GPU-memory floor in node affinity)" if p.memory_key else ""
    return f"GPU nodes labelled by {p.name} with `{p.label_key}`{memory} (source: {p.source})"


def _readme(ir: DeploymentIR, replicas: list[int]) -> str:
    label = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}[ir.engine]
    metrics = " and ".join(
        f"`{m}`"
        for m in dict.fromkeys(g.scale_metric for g in sorted(ir.groups, key=lambda g: g.scale_metric, reverse=True))
    )
    rows = "\n".join(
        f"| {g.name} | {'LeaderWorkerSet' if g.multi_node else 'Deployment'} | {g.role} | {g.gpu} "
        f"(`{g.gpu_label_key}={g.gpu_label_value}`) | {g.gpus_per_pod} x {g.nodes_per_instance} | {g.replicas} | "
        f"{g.max_replicas} | {g.scale_metric} = {g.scale_target_requests} |"
        for g in ir.groups
    )
    routers = "\n".join(
        f"| {u.name}-router | {r} | {round(u.goodput_share, 4)} |" for u, r in zip(ir.units, replicas, strict=True)
    )
    scaler = {"keda": "KEDA 2.x (ScaledObject)", "hpa": "a custom-metrics adapter", "none": "nothing"}[
        ir.settings.autoscaler
    ]
    return (
        f"# Kubernetes manifests for {ir.name}\n\n"
        + md_header(ir)
        + f"\nApply with `kubectl apply -n {ir.namespace} -f kubernetes/`. Needs: {_node_labels_need(ir)}, "
        "the LeaderWorkerSet controller if any group below is one, "
        f"{scaler} for autoscaling, Prometheus scraping the {label} pods (metrics {metrics}), and a Secret "
        f"`{ir.settings.hf_token_secret}` with key `HF_TOKEN` for gated "
        "models.\n\n| object | kind | role | GPU (node label) | GPUs per pod x pods | min | max | autoscaling |\n"
        "|---|---|---|---|---|---|---|---|\n" + rows + "\n\n"
        "Each unit has its own router, which discovers only that unit's pods: prefill and decode are paired "
        f"inside a unit. Service `{ir.name}` (port 80) spreads connections over all router pods; router pods are "
        "shared out by goodput share, which gives the plan's weighted split.\n\n"
        "| router | pods | goodput share |\n|---|---|---|\n" + routers + "\n"
    )


def emit_kubernetes(ir: DeploymentIR) -> dict[str, str]:
    """Files of the Kubernetes target, keyed by path relative to the output folder (fixed order)."""
    files = {"kubernetes/00-router-rbac.yaml": yaml_docs(ir, _rbac(ir))}
    files["kubernetes/01-entry-service.yaml"] = yaml_docs(ir, [_entry(ir)])
    for g in ir.groups:
        docs = [_workload(ir, g), _service(ir, g)]
        scaler = _autoscaler(ir, g)
        if scaler is not None:
            docs.append(scaler)
        files[f"kubernetes/{g.name}.yaml"] = yaml_docs(ir, docs)
    replicas = router_replicas(ir)
    for u, r in zip(ir.units, replicas, strict=True):
        files[f"kubernetes/{u.name}-router.yaml"] = yaml_docs(ir, _router(ir, u, r))
    files.update(routing_files(ir, "kubernetes"))
    files["kubernetes/README.md"] = _readme(ir, replicas) + routing_readme(ir)
    return files
