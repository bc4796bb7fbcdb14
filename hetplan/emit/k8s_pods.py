"""The pods of an engine instance in Kubernetes manifests: the engine container (its command line, probes, ports and
environment), the Ray leader and worker commands of an instance that spans nodes, and the pod spec around them.
Shared by the ``kubernetes`` target (:mod:`hetplan.emit.kubernetes`) and ``llmd`` (:mod:`hetplan.emit.llmd`).

Source: DESIGN §5 (target 2); hetplan's own reconstruction of the engines' documented launch commands.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from hetplan.emit.common import (
    RAY_PORT,
    engine_env,
    gpu_resources,
    group_labels,
    ray_wait,
    shm_volume,
)
from hetplan.emit.engines import (
    SGLANG_BOOTSTRAP_PORT,
    TRTLLM_OPTIONS_ENV,
    TRTLLM_OPTIONS_PATH,
    engine_image,
    sglang_argv,
    trtllm_argv,
    trtllm_options,
)
from hetplan.emit.ir import DeploymentIR, InstanceGroup
from hetplan.emit.vllm import serve_argv
from hetplan.io import to_yaml


def _probes(port: int) -> dict[str, Any]:
    health = {"httpGet": {"path": "/health", "port": port}}
    return {
        "startupProbe": {**health, "periodSeconds": 10, "failureThreshold": 180},  # up to 30 min to load weights
        "readinessProbe": {**health, "periodSeconds": 10},
    }


def ray_leader_command(ir: DeploymentIR, g: InstanceGroup, port: int | None = None) -> str:
    """Shell command of a multi-node leader: start the Ray head, wait for the group's workers, run vLLM."""
    n = g.nodes_per_instance
    wait = ray_wait(n)
    return f"ray start --head --port={RAY_PORT} && {wait} && exec {shlex.join(serve_argv(ir, g, port))}"


def ray_worker_command() -> str:
    """Shell command of a multi-node worker: join the leader's Ray cluster (retrying until it is up)."""
    return f'until ray start --address="${{LWS_LEADER_ADDRESS}}:{RAY_PORT}" --block; do sleep 5; done'


_VAR = re.compile(r"'(\$[A-Z_]+[^'\s]*)'")


def shell_join(argv: list[str]) -> str:
    """``shlex.join``, with arguments that start with a shell variable double-quoted so the shell expands them."""
    return _VAR.sub(r'"\1"', shlex.join(argv))


def _trtllm_options_env(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    return {"name": TRTLLM_OPTIONS_ENV, "value": to_yaml(trtllm_options(ir, g))}


def engine_command(ir: DeploymentIR, g: InstanceGroup, port: int) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """(command, args, extra env) of the engine container of a single-node instance or multi-node leader, for the
    plan's engine: ``vllm serve`` (Ray head first when spanning nodes), ``sglang.launch_server`` (node rank 0 of
    ``--nnodes``, the LeaderWorkerSet leader's address as ``--dist-init-addr``), or ``trtllm-serve`` reading the
    options YAML that env ``TRTLLM_OPTIONS`` carries."""
    if ir.engine == "sglang":
        if not g.multi_node:
            argv = sglang_argv(ir, g, port)
            return argv[:3], argv[3:], []
        argv = sglang_argv(ir, g, port, node_rank="0", leader="$LWS_LEADER_ADDRESS")
        return ["/bin/bash", "-c"], [f"exec {shell_join(argv)}"], []
    if ir.engine == "trtllm":
        argv = trtllm_argv(ir, g, TRTLLM_OPTIONS_PATH, port)
        write = f'printf "%s" "${TRTLLM_OPTIONS_ENV}" > {TRTLLM_OPTIONS_PATH}'
        return ["/bin/bash", "-c"], [f"{write} && exec {shlex.join(argv)}"], [_trtllm_options_env(ir, g)]
    if g.multi_node:
        return ["/bin/bash", "-c"], [ray_leader_command(ir, g, port)], []
    argv = serve_argv(ir, g, port)
    return argv[:2], argv[2:], []


def engine_container(ir: DeploymentIR, g: InstanceGroup, port: int | None = None) -> dict[str, Any]:
    """The engine container of a single-node instance (or of a multi-node leader), serving on ``port``."""
    port = port or g.port
    shm = shm_volume()[1]
    c: dict[str, Any] = {"name": ir.engine, "image": engine_image(ir)}
    command, args, env = engine_command(ir, g, port)
    c.update(command=command, args=args)
    c.update(
        env=engine_env(ir, g) + env,
        ports=[{"name": "http", "containerPort": port, "protocol": "TCP"}],
        resources=gpu_resources(g),
        **_probes(port),
        volumeMounts=[shm],
    )
    return c


def worker_container(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    """The container of the non-leader pods of a multi-node instance: a Ray worker (vLLM), or SGLang at node rank
    ``LWS_WORKER_INDEX``."""
    if ir.engine == "sglang":
        argv = sglang_argv(ir, g, node_rank="$LWS_WORKER_INDEX", leader="$LWS_LEADER_ADDRESS")
        name, args = "sglang-worker", [f"exec {shell_join(argv)}"]
    else:
        name, args = "ray-worker", [ray_worker_command()]
    return {
        "name": name,
        "image": engine_image(ir),
        "command": ["/bin/bash", "-c"],
        "args": args,
        "env": engine_env(ir, g),
        "resources": gpu_resources(g),
        "volumeMounts": [shm_volume()[1]],
    }


def pod_spec(g: InstanceGroup, containers: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Pod spec pinned to the group's GPU type by node selector (and node affinity where the provisioner needs
    it: :meth:`InstanceGroup.placement`), with a memory-backed ``/dev/shm``."""
    spec: dict[str, Any] = g.placement()
    spec.update(extra)
    spec["containers"] = containers
    spec["volumes"] = [shm_volume()[0]]
    return spec


SGLANG_BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"
"""Pod annotation from which SGLang's router (Kubernetes discovery) reads a prefill pod's bootstrap port."""


def serving_metadata(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    """Pod-template metadata of serving pods: labels, and on SGLang prefill pods the bootstrap-port annotation."""
    out: dict[str, Any] = {"labels": group_labels(ir, g, serving=True)}
    if ir.engine == "sglang" and g.role == "prefill":
        out["annotations"] = {SGLANG_BOOTSTRAP_ANNOTATION: str(SGLANG_BOOTSTRAP_PORT)}
    return out
