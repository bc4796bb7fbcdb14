"""SGLang and TensorRT-LLM targets: per-role launch scripts and one router per routing unit, as the vLLM target
writes them for vLLM plans (see :mod:`hetplan.emit.vllm` for the layout and host naming).

Files under ``sglang/``: ``<group>.sh`` (``python3 -m sglang.launch_server``; for an instance over several nodes
``<group>-node.sh`` run on each node with ``NODE_RANK`` and ``LEADER``), ``<unit>-router.sh``
(``sglang_router.launch_router``) and ``README.md``.

Files under ``trtllm/``: ``<group>.sh`` (``trtllm-serve``) with its options ``<group>.options.yaml``; per
prefill/decode unit ``<unit>-disagg.yaml`` and ``<unit>-router.sh`` (``trtllm-serve disaggregated -c``); per
aggregated unit a vllm-router ``--worker-urls`` script; ``README.md``. TensorRT-LLM instances spanning nodes need
MPI launchers hetplan does not write: such plans are refused (rule ``trtllm-multi-node`` in
:mod:`hetplan.emit.rules`).

Source: :mod:`hetplan.emit.engines` (flags and their sources); the file layout is hetplan's own reconstruction.
"""

from __future__ import annotations

import re

from hetplan.emit.common import fmt, md_header, policy, routing_files, routing_readme
from hetplan.emit.engines import (
    ENGINE_LABELS,
    SGLANG_BOOTSTRAP_PORT,
    engine_image,
    sglang_argv,
    sglang_router_argv,
    trtllm_argv,
    trtllm_disagg_argv,
    trtllm_disagg_config,
    trtllm_options,
)
from hetplan.emit.ir import DeploymentIR, InstanceGroup, ServingUnit, apportion
from hetplan.emit.vllm import _command, _script, instance_hosts
from hetplan.io import to_yaml

_VAR = re.compile(r"'(\$[A-Z_]+[^'\s]*)'")


def _shell(argv: list[str]) -> str:
    """:func:`_command`, with arguments that start with a shell variable (``$HERE/x``) double-quoted so the
    shell expands them."""
    return _VAR.sub(r'"\1"', _command(argv))


def _what(g: InstanceGroup) -> str:
    unit = f"instance type {g.unit_index}" if g.role == "aggregated" else f"combo {g.unit_index} {g.role}"
    hosts = f"host {g.name}-0" if g.replicas == 1 else f"hosts {g.name}-0 .. {g.name}-{g.replicas - 1}"
    return f"{unit} on {g.gpu}: TP {g.tp}, PP {g.pp}, {g.replicas} instance(s) ({hosts})."


def _hosts(unit: ServingUnit) -> dict[str, list[str]]:
    return {g.role: instance_hosts(g) for g in unit.groups}


def _readme(ir: DeploymentIR, target: str, scripts: dict[str, str], notes: list[str]) -> str:
    rows = "\n".join(
        f"| u{g.unit_index} | {g.role} | {g.gpu} | {g.tp} | {g.pp} | {g.replicas} | {g.nodes_per_instance} x "
        f"{g.gpus_per_pod} | {scripts[g.name]} |"
        for g in ir.groups
    )
    weights = "\n".join(f"| u{u.index} | {u.name}-router.sh | {fmt(round(u.goodput_share, 4))} |" for u in ir.units)
    slots = apportion([u.goodput_share for u in ir.units], 100)
    upstream = "\n".join(
        f"    server {u.name}-router:{ir.settings.router_port} weight={w};"
        for u, w in zip(ir.units, slots, strict=True)
    )
    label = ENGINE_LABELS[ir.engine]
    return (
        f"# {label} launch scripts for {ir.name}\n\n{md_header(ir)}\n"
        f"Model `{ir.model.source}` served as `{ir.model.served_name}`, {label} {ir.engine_version} (the version the "
        f"plan was made for), image line `{engine_image(ir)}`.\n\n"
        "| unit | role | GPU | TP | PP | instances | nodes x GPUs per instance | script |\n"
        "|---|---|---|---|---|---|---|---|\n"
        + rows
        + "\n\n"
        + "".join(f"{n}\n\n" for n in notes)
        + "Start every instance (each on its own GPUs), then each unit's router. Router scripts name instance hosts "
        "`<group>-<k>`: map them in DNS or `/etc/hosts`, or edit the URLs.\n\n"
        "## Traffic split across units\n\nEach unit's router pairs prefill and decode only inside that unit. Split "
        "client traffic across the unit routers by goodput share:\n\n| unit | router | share |\n|---|---|---|\n"
        + weights
        + f"\n\nFor example with nginx (weights out of 100):\n\n```nginx\nupstream {ir.name} {{\n{upstream}\n}}\n```\n"
    )


def emit_sglang(ir: DeploymentIR) -> dict[str, str]:
    """Files of the SGLang target, keyed by path relative to the output folder (deterministic, fixed order)."""
    files: dict[str, str] = {}
    scripts: dict[str, str] = {}
    for g in ir.groups:
        if not g.multi_node:
            about = [_what(g), f"Run once per instance, on a host with {g.gpus_per_instance} free {g.gpu} GPU(s)."]
            files[f"sglang/{g.name}.sh"] = _script(ir, about, [_command(sglang_argv(ir, g))])
            scripts[g.name] = f"{g.name}.sh"
            continue
        n = g.nodes_per_instance
        about = [
            _what(g),
            f"Each instance spans {n} nodes of {g.gpus_per_pod} {g.gpu} GPUs: run this on each of them with",
            f"NODE_RANK=0..{n - 1} and LEADER=<host of rank 0>; rank 0 serves HTTP.",
        ]
        body = [
            'NODE_RANK="${NODE_RANK:?set NODE_RANK to the rank of this node in the instance, 0 on the leader}"',
            'LEADER="${LEADER:?set LEADER to the host of rank 0}"',
            _shell(sglang_argv(ir, g, node_rank="$NODE_RANK", leader="$LEADER")),
        ]
        files[f"sglang/{g.name}-node.sh"] = _script(ir, about, body)
        scripts[g.name] = f"{g.name}-node.sh (x {n})"
    for u in ir.units:
        about = [f"SGLang router of unit u{u.index} ({u.kind}); share of traffic {fmt(round(u.goodput_share, 4))}."]
        files[f"sglang/{u.name}-router.sh"] = _script(ir, about, [_command(sglang_router_argv(ir, u, _hosts(u)))])
    files.update(routing_files(ir, "sglang"))
    notes = [
        f"Prefill and decode exchange the KV cache over the transfer backend named by "
        f"`--disaggregation-transfer-backend`; prefill instances listen for decode's bootstrap on port "
        f"{SGLANG_BOOTSTRAP_PORT}, which the router passes along with each prefill URL."
    ]
    files["sglang/README.md"] = _readme(ir, "sglang", scripts, notes) + routing_readme(ir)
    return files


def emit_trtllm(ir: DeploymentIR) -> dict[str, str]:
    """Files of the TensorRT-LLM target, keyed by path relative to the output folder (fixed order).

    A TensorRT-LLM instance spanning nodes is refused before this runs (rule ``trtllm-multi-node``).
    """
    files: dict[str, str] = {}
    scripts: dict[str, str] = {}
    for g in ir.groups:
        options = f"trtllm/{g.name}.options.yaml"
        files[options] = ir_header_yaml(ir) + to_yaml(trtllm_options(ir, g))
        about = [_what(g), f"Run once per instance, on a host with {g.gpus_per_instance} free {g.gpu} GPU(s)."]
        body = ['HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"']
        body.append(_shell(trtllm_argv(ir, g, f"$HERE/{g.name}.options.yaml")))
        files[f"trtllm/{g.name}.sh"] = _script(ir, about, body)
        scripts[g.name] = f"{g.name}.sh + {g.name}.options.yaml"
    for u in ir.units:
        share = fmt(round(u.goodput_share, 4))
        agg = u.group("aggregated")
        if agg is not None:
            urls = [f"http://{h}:{agg.port}" for h in instance_hosts(agg)]
            argv = ["vllm-router", "--worker-urls", *urls, "--policy", policy(agg.replicas)]
            argv += ["--host", "0.0.0.0", "--port", str(ir.settings.router_port)]
            about = [f"Balancer of aggregated unit u{u.index} (vllm-router, engine-neutral); share {share}."]
            files[f"trtllm/{u.name}-router.sh"] = _script(ir, about, [_command(argv)])
            continue
        hosts = {role: [f"{h}:{g.port}" for h in instance_hosts(g)] for role, g in zip(
            ("prefill", "decode"), u.pair(), strict=True)}  # fmt: skip
        files[f"trtllm/{u.name}-disagg.yaml"] = ir_header_yaml(ir) + to_yaml(trtllm_disagg_config(ir, u, hosts))
        about = [f"TensorRT-LLM disaggregated server of combo {u.index}; share of traffic {share}."]
        body = ['HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"']
        body.append(_shell(trtllm_disagg_argv(f"$HERE/{u.name}-disagg.yaml")))
        files[f"trtllm/{u.name}-router.sh"] = _script(ir, about, body)
    files.update(routing_files(ir, "trtllm"))
    notes = [
        "Each instance reads its settings from `<group>.options.yaml` (`--extra_llm_api_options`): "
        "`kv_cache_config.free_gpu_memory_fraction` is the plan's memory fraction of what is free after weights, "
        "`max_batch_size` / `max_num_tokens` its batch and token budgets; KV blocks keep TensorRT-LLM's default of "
        "32 tokens, as planned. Prefill (context) and decode (generation) servers exchange the KV cache through "
        "`cache_transceiver_config`; each combo's `trtllm-serve disaggregated` server pairs them."
    ]
    files["trtllm/README.md"] = _readme(ir, "trtllm", scripts, notes) + routing_readme(ir)
    return files


def ir_header_yaml(ir: DeploymentIR) -> str:
    """The generated-file header for a YAML config file."""
    from hetplan.emit.common import header

    return header(ir)
