"""vLLM target: per-role ``vllm serve`` launch scripts and one ``vllm-router`` script per routing unit.

Files (under ``vllm/``): ``<group>.sh`` for single-node instances (run once per instance host),
``<group>-leader.sh`` / ``<group>-worker.sh`` for instances spanning nodes (Ray), ``<unit>-router.sh`` pairing the
unit's prefill and decode instances (``vllm-router --vllm-pd-disaggregation --prefill URL --decode URL``) or
balancing its aggregated instances, and ``README.md`` with the host list and the traffic split across units.

Instance hosts are named ``<group>-<k>`` in the router scripts: map them in DNS or ``/etc/hosts`` (or edit the
URLs). Flag spellings follow vLLM's ``vllm serve`` and vllm-project/router's CLI.

Source: DESIGN §5 (target 1); file layout and host naming are hetplan's own reconstruction.
"""

from __future__ import annotations

import json
import shlex

from hetplan.emit.common import (
    MOONCAKE_BOOTSTRAP_PORT,
    NIXL_SIDE_CHANNEL_PORT,
    RAY_PORT,
    fmt,
    header,
    md_header,
    policy,
    ray_wait,
    routing_files,
    routing_readme,
)
from hetplan.emit.ir import DeploymentIR, EngineFlags, InstanceGroup, ServingUnit, apportion


def kv_transfer_config(e: EngineFlags, role: str | None = None) -> str:
    """``--kv-transfer-config`` JSON (compact, fixed key order); ``role`` overrides ``e.kv_role``."""
    return json.dumps(
        {"kv_connector": e.kv_connector, "kv_role": role or e.kv_role, "kv_buffer_device": "cuda"},
        separators=(",", ":"),
    )


def engine_args(ir: DeploymentIR, g: InstanceGroup, kv_role: str | None = None) -> list[str]:
    """vLLM engine flags of group ``g`` (no model, host or port), in a fixed order.

    ``kv_role`` replaces the group's KV role in ``--kv-transfer-config`` (Dynamo uses ``kv_both``).
    """
    e = g.engine
    args = ["--served-model-name", ir.model.served_name, "--tensor-parallel-size", str(e.tensor_parallel_size)]
    if e.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(e.pipeline_parallel_size)]
    if e.distributed_executor_backend:
        args += ["--distributed-executor-backend", e.distributed_executor_backend]
    args += ["--dtype", e.dtype]
    if e.quantization:
        args += ["--quantization", e.quantization]
    args += [
        "--max-model-len", str(e.max_model_len_tokens),
        "--max-num-seqs", str(e.max_num_seqs),
        "--max-num-batched-tokens", str(e.max_num_batched_tokens),
        "--gpu-memory-utilization", fmt(e.gpu_memory_utilization),
        "--block-size", str(e.block_size_tokens),
        "--kv-cache-dtype", e.kv_cache_dtype,
    ]  # fmt: skip
    if e.kv_connector:
        args += ["--kv-transfer-config", kv_transfer_config(e, kv_role)]
    return args


def serve_argv(ir: DeploymentIR, g: InstanceGroup, port: int | None = None) -> list[str]:
    """The full ``vllm serve`` argv of one instance of ``g``, listening on all addresses at ``port``."""
    return ["vllm", "serve", ir.model.source, *engine_args(ir, g), "--host", "0.0.0.0", "--port", str(port or g.port)]


def instance_hosts(g: InstanceGroup) -> list[str]:
    """Host names of the group's instances (the leader host for multi-node instances)."""
    return [f"{g.name}-{k}" for k in range(g.replicas)]


def router_argv(ir: DeploymentIR, unit: ServingUnit) -> list[str]:
    """``vllm-router`` argv for one unit with static worker URLs (``http://<host>:<port>``)."""
    s = ir.settings
    tail = ["--host", "0.0.0.0", "--port", str(s.router_port)]
    agg = unit.group("aggregated")
    if agg is not None:
        urls = [f"http://{h}:{agg.port}" for h in instance_hosts(agg)]
        return ["vllm-router", "--worker-urls", *urls, "--policy", policy(agg.replicas), *tail]
    p, d = unit.pair()
    argv = ["vllm-router", "--vllm-pd-disaggregation"]
    mooncake = p.engine.kv_connector == "MooncakeConnector"
    if mooncake:
        argv += ["--kv-connector", "mooncake"]
    for h in instance_hosts(p):
        argv += ["--prefill", f"http://{h}:{p.port}"] + ([str(MOONCAKE_BOOTSTRAP_PORT)] if mooncake else [])
    for h in instance_hosts(d):
        argv += ["--decode", f"http://{h}:{d.port}"]
    argv += ["--prefill-policy", policy(p.replicas), "--decode-policy", policy(d.replicas)]
    return argv + tail


def _script(ir: DeploymentIR, about: list[str], body: list[str]) -> str:
    lines = ["#!/usr/bin/env bash", *header(ir).splitlines(), *(f"# {line}" for line in about), "set -euo pipefail"]
    return "\n".join(lines + body) + "\n"


def _command(argv: list[str]) -> str:
    """``exec`` line of an argv, one flag (with its values) per continuation line."""
    parts: list[str] = []
    for arg in argv:
        if arg.startswith("--") or not parts:
            parts.append(shlex.quote(arg))
        else:
            parts[-1] += " " + shlex.quote(arg)
    return "exec " + " \\\n  ".join(parts)


def _env_lines(g: InstanceGroup) -> list[str]:
    out = []
    if g.engine.kv_connector == "NixlConnector":
        out += [
            "# NIXL's side channel must be reachable from the other role's hosts: this host's first address.",
            "export VLLM_NIXL_SIDE_CHANNEL_HOST=\"${VLLM_NIXL_SIDE_CHANNEL_HOST:-$(hostname -I | awk '{print $1}')}\"",
            f'export VLLM_NIXL_SIDE_CHANNEL_PORT="${{VLLM_NIXL_SIDE_CHANNEL_PORT:-{NIXL_SIDE_CHANNEL_PORT}}}"',
        ]
    if g.engine.kv_connector == "MooncakeConnector" and g.role == "prefill":
        port = MOONCAKE_BOOTSTRAP_PORT
        out.append(f'export VLLM_MOONCAKE_BOOTSTRAP_PORT="${{VLLM_MOONCAKE_BOOTSTRAP_PORT:-{port}}}"')
    return out


def _group_scripts(ir: DeploymentIR, g: InstanceGroup) -> dict[str, str]:
    unit = f"instance type {g.unit_index}" if g.role == "aggregated" else f"combo {g.unit_index} {g.role}"
    hosts = f"host {g.name}-0" if g.replicas == 1 else f"hosts {g.name}-0 .. {g.name}-{g.replicas - 1}"
    what = f"{unit} on {g.gpu}: TP {g.tp}, PP {g.pp}, {g.replicas} instance(s) ({hosts})."
    if g.instance_type:
        what += f" Placed on {'owned nodes ' if g.owned else ''}{g.instance_type}."
    serve = _command(serve_argv(ir, g))
    if not g.multi_node:
        about = [what, f"Run once per instance, on a host with {g.gpus_per_instance} free {g.gpu} GPU(s)."]
        return {f"vllm/{g.name}.sh": _script(ir, about, _env_lines(g) + [serve])}
    n = g.nodes_per_instance
    wait = ray_wait(n)
    leader = [
        f"ray start --head --port={RAY_PORT}",
        f"# wait until the {n - 1} worker node(s) of this instance have joined",
        wait,
    ]
    about_leader = [
        what,
        f"Each instance spans {n} nodes of {g.gpus_per_pod} {g.gpu} GPUs: run this on its leader node,",
        f"and {g.name}-worker.sh with LEADER=<leader host> on the other {n - 1}.",
    ]
    worker = [
        'LEADER="${LEADER:?set LEADER to the host running the leader script of this instance}"',
        "# retry until the leader's Ray head is up; --block keeps this node in the cluster",
        f'until ray start --address="${{LEADER}}:{RAY_PORT}" --block; do sleep 5; done',
    ]
    about_worker = [what, f"Worker node of a {n}-node instance ({g.gpus_per_pod} {g.gpu} GPUs on this node)."]
    return {
        f"vllm/{g.name}-leader.sh": _script(ir, about_leader, _env_lines(g) + leader + [serve]),
        f"vllm/{g.name}-worker.sh": _script(ir, about_worker, worker),
    }


def _readme(ir: DeploymentIR) -> str:
    rows = []
    for g in ir.groups:
        script = f"{g.name}-leader.sh + {g.name}-worker.sh" if g.multi_node else f"{g.name}.sh"
        rows.append(
            f"| u{g.unit_index} | {g.role} | {g.gpu} | {g.tp} | {g.pp} | {g.replicas} | "
            f"{g.nodes_per_instance} x {g.gpus_per_pod} | {script} |"
        )
    weights = "\n".join(
        f"| u{u.index} | {u.name}-router.sh | {fmt(round(u.goodput_share, 4))} | {fmt(round(u.goodput_req_per_s, 4))} "
        f"x {u.count} |"
        for u in ir.units
    )
    slots = apportion([u.goodput_share for u in ir.units], 100)
    upstream = "\n".join(
        f"    server {u.name}-router:{ir.settings.router_port} weight={w};"
        for u, w in zip(ir.units, slots, strict=True)
    )
    return (
        f"# vLLM launch scripts for {ir.name}\n\n{md_header(ir)}\n"
        f"Model `{ir.model.source}` served as `{ir.model.served_name}`, image line `{ir.settings.image}`.\n\n"
        "| unit | role | GPU | TP | PP | instances | nodes x GPUs per instance | script |\n"
        "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Unit uN is combo N of the plan (instance type N of an aggregated plan). "
        "Start every instance (each on its own GPUs), then each unit's router. Router scripts name instance hosts "
        "`<group>-<k>`: map them in DNS or `/etc/hosts`, or edit the URLs.\n\n"
        "## Traffic split across units\n\n"
        "Each unit's router pairs prefill and decode only inside that unit (the plan's capacity model assumes it, "
        "and the KV-connector TP rules hold per pair). Split client traffic across the unit routers by goodput "
        "share:\n\n| unit | router | share | goodput req/s x copies |\n|---|---|---|---|\n" + weights + "\n\n"
        f"For example with nginx (weights out of 100):\n\n```nginx\nupstream {ir.name} {{\n{upstream}\n}}\n```\n"
    )


def emit_vllm(ir: DeploymentIR) -> dict[str, str]:
    """Files of the vLLM target, keyed by path relative to the output folder (deterministic, fixed order)."""
    files: dict[str, str] = {}
    for g in ir.groups:
        files.update(_group_scripts(ir, g))
    for u in ir.units:
        what = f"combo {u.index}" if u.kind == "disaggregated" else f"instance type {u.index}"
        about = [f"Router of {what} ({u.kind}); share of traffic {fmt(round(u.goodput_share, 4))}."]
        files[f"vllm/{u.name}-router.sh"] = _script(ir, about, [_command(router_argv(ir, u))])
    if ir.cascade is not None:  # a calibrated plan: CASCADE's settings for the router (hetplan calibrate)
        files["vllm/cascade-router.json"] = ir.cascade
    files.update(routing_files(ir, "vllm"))
    files["vllm/README.md"] = _readme(ir) + routing_readme(ir)
    return files
