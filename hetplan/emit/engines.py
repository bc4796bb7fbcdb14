"""Launch commands and configs of SGLang and TensorRT-LLM instances, and the argument names each engine version
documents (what ``--validate`` checks emitted commands against, offline).

A plan made with ``--engine sglang`` or ``--engine trtllm`` is sized with that engine's memory rule
(:mod:`hetplan.perf.engines`); its instances are emitted with the settings the planner assumed:

| plan setting | SGLang (``python3 -m sglang.launch_server``) | TensorRT-LLM (``trtllm-serve``, options YAML) |
|---|---|---|
| memory fraction | ``--mem-fraction-static`` | ``kv_cache_config.free_gpu_memory_fraction`` |
| ``max_num_seqs`` (decode: the plan's batch) | ``--max-running-requests`` | ``max_batch_size`` |
| ``max_num_batched_tokens`` | ``--chunked-prefill-size`` | ``max_num_tokens`` |
| KV block size | ``--page-size`` | TensorRT-LLM's default 32 tokens per block (not a flag) |
| ``--max-model-len`` | ``--context-length`` | ``max_seq_len`` |
| TP / PP | ``--tp-size`` / ``--pp-size`` | ``tensor_parallel_size`` / ``pipeline_parallel_size`` |
| KV dtype | ``--kv-cache-dtype auto`` or ``fp8_e4m3`` | ``kv_cache_config.dtype`` ``auto`` or ``fp8`` |
| prefill / decode | ``--disaggregation-mode`` + transfer backend | ``cache_transceiver_config`` |

SGLang's fraction holds weights and the KV pool; TensorRT-LLM's is a share of what is free after weights and
buffers. SGLang prefill and decode servers exchange the KV cache over ``nixl`` or ``mooncake``; TensorRT-LLM's
context (prefill) and generation (decode) servers, the context server without the overlap scheduler, are joined by
``trtllm-serve disaggregated -c``.

Routers: SGLang's ``sglang_router.launch_router`` (``--pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode
URL``, or ``--worker-urls``); TensorRT-LLM's own disaggregated server for prefill/decode units, and vllm-router's
``--worker-urls`` balancing (an engine-neutral OpenAI-API balancer) for aggregated TensorRT-LLM units.

The argument tables (:data:`SGLANG_SERVER_ARGS`, :data:`SGLANG_ROUTER_ARGS`, :data:`TRTLLM_SERVE_ARGS`,
:data:`TRTLLM_OPTION_KEYS`, :data:`TRTLLM_DISAGG_KEYS`) are pinned per engine version line (``major.minor``): a
plan for a line hetplan has no table for is refused with the lines it knows.

Sources: SGLang "Server Arguments" and "PD Disaggregation" docs and ``python/sglang/srt/server_args.py``
(sgl-project/sglang), the SGLang router's README; TensorRT-LLM ``trtllm-serve`` command reference and
``tensorrt_llm/commands/serve.py`` (click options ``--tp_size``, ``--kv_cache_free_gpu_memory_fraction``,
``--extra_llm_api_options``), the LLM API ``LlmArgs`` / ``KvCacheConfig`` / ``CacheTransceiverConfig`` fields and
the "Disaggregated Serving" guide (``context_servers`` / ``generation_servers``). Names were read there, and
written here by hand; the tables are hetplan's own reconstruction.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from hetplan.emit.ir import DeploymentIR, InstanceGroup, ServingUnit
from hetplan.errors import InputError

ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
SGLANG_BOOTSTRAP_PORT = 8998
SGLANG_DIST_PORT = 20000
TRTLLM_OPTIONS_PATH = "/tmp/trtllm-options.yaml"
TRTLLM_OPTIONS_ENV = "TRTLLM_OPTIONS"
TRTLLM_BLOCK_SIZE_TOKENS = 32

# Engine images per version line: a default to override with --image (the tag you run).
ENGINE_IMAGES: dict[str, dict[str, str]] = {
    "sglang": {"0.5": "lmsysorg/sglang:v0.5.2"},
    "trtllm": {"1.1": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0"},
}
DYNAMO_RUNTIME = {"vllm": "vllm-runtime", "sglang": "sglang-runtime", "trtllm": "tensorrtllm-runtime"}

SGLANG_SERVER_ARGS: dict[str, frozenset[str]] = {
    "0.5": frozenset(
        {
            "--model-path", "--tokenizer-path", "--host", "--port", "--served-model-name", "--tp-size", "--pp-size",
            "--dp-size", "--ep-size", "--dtype", "--quantization", "--kv-cache-dtype", "--context-length",
            "--mem-fraction-static", "--max-running-requests", "--max-total-tokens", "--chunked-prefill-size",
            "--max-prefill-tokens", "--page-size", "--trust-remote-code", "--nnodes", "--node-rank",
            "--dist-init-addr", "--disaggregation-mode", "--disaggregation-transfer-backend",
            "--disaggregation-bootstrap-port", "--disaggregation-ib-device", "--enable-metrics", "--log-level",
            "--schedule-policy", "--attention-backend", "--cuda-graph-max-bs", "--enable-dp-attention",
        }
    )
}  # fmt: skip
"""``sglang.launch_server`` arguments per SGLang version line (server_args.py; "Server Arguments" docs)."""

SGLANG_CHOICES: dict[str, frozenset[str]] = {
    "--kv-cache-dtype": frozenset({"auto", "fp8_e5m2", "fp8_e4m3"}),
    "--dtype": frozenset({"auto", "half", "float16", "bfloat16", "float", "float32"}),
    "--disaggregation-mode": frozenset({"null", "prefill", "decode"}),
    "--disaggregation-transfer-backend": frozenset({"mooncake", "nixl"}),
    "--policy": frozenset({"random", "round_robin", "cache_aware", "power_of_two"}),
}
"""Documented values of the SGLang arguments hetplan writes that take a fixed set (checked by ``--validate``)."""

SGLANG_ROUTER_ARGS: dict[str, frozenset[str]] = {
    "0.5": frozenset(
        {
            "--host", "--port", "--worker-urls", "--policy", "--pd-disaggregation", "--prefill", "--decode",
            "--prefill-policy", "--decode-policy", "--service-discovery", "--selector", "--service-discovery-port",
            "--service-discovery-namespace", "--prefill-selector", "--decode-selector",
            "--bootstrap-port-annotation",
        }
    )
}  # fmt: skip
"""``sglang_router.launch_router`` arguments per SGLang version line (the router's README)."""

TRTLLM_SERVE_ARGS: dict[str, frozenset[str]] = {
    "1.1": frozenset(
        {
            "--host", "--port", "--backend", "--tp_size", "--pp_size", "--ep_size", "--max_batch_size",
            "--max_num_tokens", "--max_seq_len", "--kv_cache_free_gpu_memory_fraction", "--extra_llm_api_options",
            "--trust_remote_code", "--log_level", "--num_postprocess_workers", "--tokenizer", "--gpus_per_node",
            "--reasoning_parser", "--metadata_server_config_file", "--server_role",
            # trtllm-serve disaggregated
            "-c", "--config_file", "--server_start_timeout", "--request_timeout",
        }
    )
}  # fmt: skip
"""``trtllm-serve`` (and ``trtllm-serve disaggregated``) options per TensorRT-LLM version line."""

TRTLLM_OPTION_KEYS: dict[str, dict[str, frozenset[str] | None]] = {
    "1.1": {
        "tensor_parallel_size": None,
        "pipeline_parallel_size": None,
        "moe_expert_parallel_size": None,
        "max_batch_size": None,
        "max_num_tokens": None,
        "max_seq_len": None,
        "dtype": None,
        "enable_chunked_prefill": None,
        "disable_overlap_scheduler": None,
        "trust_remote_code": None,
        "print_iter_log": None,
        "kv_cache_config": frozenset({"free_gpu_memory_fraction", "dtype", "enable_block_reuse", "max_tokens"}),
        "cache_transceiver_config": frozenset({"backend", "max_tokens_in_buffer"}),
    }
}
"""Keys of the ``--extra_llm_api_options`` YAML (LLM API ``LlmArgs``) per version line; nested key sets for the
config objects hetplan writes."""

TRTLLM_DISAGG_KEYS: dict[str, dict[str, frozenset[str] | None]] = {
    "1.1": {
        "hostname": None,
        "port": None,
        "backend": None,
        "context_servers": frozenset({"num_instances", "urls"}),
        "generation_servers": frozenset({"num_instances", "urls"}),
    }
}
"""Keys of the ``trtllm-serve disaggregated -c`` config per version line."""


def version_line(version: str) -> str:
    """``major.minor`` of an engine version (``0.5.2`` -> ``0.5``; ``1.1`` stays)."""
    parts = version.lstrip("v").split(".")
    return ".".join(parts[:2])


def check_engine_version(engine: str, version: str) -> None:
    """Raise unless hetplan has argument tables for ``engine`` at ``version``'s line.

    Raises:
        InputError: no table for that line (names the lines hetplan knows).
    """
    tables = {"sglang": SGLANG_SERVER_ARGS, "trtllm": TRTLLM_SERVE_ARGS}.get(engine)
    if tables is None or version_line(version) in tables:
        return
    raise InputError(
        f"the plan was made for {ENGINE_LABELS[engine]} {version}, and hetplan has no argument table for that version",
        f"emit writes {ENGINE_LABELS[engine]} {', '.join(tables)} arguments and checks them against the documented "
        "names of that line",
        f"re-plan with --engine-version {next(iter(tables))}, or deploy the plan's GPU counts and TP by hand",
    )


def engine_image(ir: DeploymentIR) -> str:
    """The engine image: ``--image`` when given, else the engine's default image for the plan's version line."""
    from hetplan.emit.settings import EmitSettings

    if ir.engine == "vllm" or ir.settings.image != EmitSettings.image:
        return ir.settings.image
    table = ENGINE_IMAGES[ir.engine]
    return table.get(version_line(ir.engine_version), next(iter(table.values())))


def dynamo_image(ir: DeploymentIR) -> str:
    """Dynamo's runtime image for the plan's engine (the default's ``vllm-runtime`` becomes the engine's)."""
    from hetplan.emit.settings import EmitSettings

    image = ir.settings.dynamo_image
    if image == EmitSettings.dynamo_image:
        return image.replace(DYNAMO_RUNTIME["vllm"], DYNAMO_RUNTIME[ir.engine])
    return image


def _fmt(x: float) -> str:
    return format(x, "g")


def transfer_backend(g: InstanceGroup) -> str:
    """SGLang's ``--disaggregation-transfer-backend`` for the group's KV connector."""
    return "mooncake" if g.engine.kv_connector == "MooncakeConnector" else "nixl"


def sglang_args(ir: DeploymentIR, g: InstanceGroup) -> list[str]:
    """SGLang server arguments of group ``g`` (model, parallelism, memory, batching, disaggregation; no host,
    port or multi-node flags), in a fixed order."""
    e = g.engine
    args = ["--model-path", ir.model.source, "--served-model-name", ir.model.served_name]
    args += ["--tp-size", str(e.tensor_parallel_size)]
    if e.pipeline_parallel_size > 1:
        args += ["--pp-size", str(e.pipeline_parallel_size)]
    args += ["--dtype", e.dtype]
    if e.quantization:
        args += ["--quantization", e.quantization]
    args += [
        "--context-length", str(e.max_model_len_tokens),
        "--mem-fraction-static", _fmt(e.gpu_memory_utilization),
        "--max-running-requests", str(e.max_num_seqs),
        "--chunked-prefill-size", str(e.max_num_batched_tokens),
        "--page-size", str(e.block_size_tokens),
        "--kv-cache-dtype", e.kv_cache_dtype,
        "--enable-metrics",  # the Prometheus gauges the autoscalers read
    ]  # fmt: skip
    if g.role in ("prefill", "decode"):
        args += ["--disaggregation-mode", g.role, "--disaggregation-transfer-backend", transfer_backend(g)]
        if g.role == "prefill":
            args += ["--disaggregation-bootstrap-port", str(SGLANG_BOOTSTRAP_PORT)]
    return args


def sglang_argv(
    ir: DeploymentIR, g: InstanceGroup, port: int | None = None, node_rank: str = "0", leader: str = ""
) -> list[str]:
    """The full ``python3 -m sglang.launch_server`` argv of one instance (one node of it when it spans
    ``nodes_per_instance`` nodes: ``node_rank`` and the ``leader`` host joined by ``--dist-init-addr``)."""
    argv = ["python3", "-m", "sglang.launch_server", *sglang_args(ir, g)]
    if g.multi_node:
        argv += ["--nnodes", str(g.nodes_per_instance), "--node-rank", node_rank]
        argv += ["--dist-init-addr", f"{leader}:{SGLANG_DIST_PORT}"]
    return argv + ["--host", "0.0.0.0", "--port", str(port or g.port)]


def sglang_router_argv(ir: DeploymentIR, unit: ServingUnit, hosts: dict[str, list[str]]) -> list[str]:
    """``sglang_router.launch_router`` argv for one unit with static worker URLs (``hosts`` per role)."""
    from hetplan.emit.common import policy

    s = ir.settings
    argv = ["python3", "-m", "sglang_router.launch_router"]
    tail = ["--host", "0.0.0.0", "--port", str(s.router_port)]
    agg = unit.group("aggregated")
    if agg is not None:
        urls = [f"http://{h}:{agg.port}" for h in hosts["aggregated"]]
        return [*argv, "--worker-urls", *urls, "--policy", policy(agg.replicas), *tail]
    p, d = unit.pair()
    argv.append("--pd-disaggregation")
    for h in hosts["prefill"]:
        argv += ["--prefill", f"http://{h}:{p.port}", str(SGLANG_BOOTSTRAP_PORT)]
    for h in hosts["decode"]:
        argv += ["--decode", f"http://{h}:{d.port}"]
    return [*argv, "--prefill-policy", policy(p.replicas), "--decode-policy", policy(d.replicas), *tail]


def trtllm_options(ir: DeploymentIR, g: InstanceGroup) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` document of group ``g``: parallel sizes, batch and token budgets,
    ``max_seq_len`` and the KV cache config the plan assumed; prefill (context) and decode (generation) servers add
    the cache transceiver, and the context server runs without the overlap scheduler (TensorRT-LLM's
    disaggregated-serving guide)."""
    e = g.engine
    doc: dict[str, Any] = {
        "tensor_parallel_size": e.tensor_parallel_size,
        "pipeline_parallel_size": e.pipeline_parallel_size,
        "max_batch_size": e.max_num_seqs,
        "max_num_tokens": e.max_num_batched_tokens,
        "max_seq_len": e.max_model_len_tokens,
        "dtype": e.dtype,
        "kv_cache_config": {"free_gpu_memory_fraction": e.gpu_memory_utilization, "dtype": e.kv_cache_dtype},
    }
    if g.role in ("prefill", "decode"):
        backend = "NIXL" if e.kv_connector == "NixlConnector" else "UCX"
        doc["cache_transceiver_config"] = {"backend": backend}
    if g.role == "prefill":
        doc["disable_overlap_scheduler"] = True
    return doc


def trtllm_argv(ir: DeploymentIR, g: InstanceGroup, options_path: str, port: int | None = None) -> list[str]:
    """``trtllm-serve`` argv of one instance of ``g``, its settings in the options YAML at ``options_path``."""
    return [
        "trtllm-serve", ir.model.source, "--backend", "pytorch", "--extra_llm_api_options", options_path,
        "--host", "0.0.0.0", "--port", str(port or g.port),
    ]  # fmt: skip


def trtllm_disagg_config(ir: DeploymentIR, unit: ServingUnit, urls: dict[str, list[str]]) -> dict[str, Any]:
    """``trtllm-serve disaggregated -c`` config of a prefill/decode unit: its context (prefill) and generation
    (decode) servers as ``host:port`` (``urls`` per role), served on the router port."""
    p, d = unit.pair()
    return {
        "hostname": "0.0.0.0",
        "port": ir.settings.router_port,
        "backend": "pytorch",
        "context_servers": {"num_instances": len(urls["prefill"]), "urls": urls["prefill"]},
        "generation_servers": {"num_instances": len(urls["decode"]), "urls": urls["decode"]},
    }


def trtllm_disagg_argv(config_path: str) -> list[str]:
    """``trtllm-serve disaggregated`` argv reading its config from ``config_path``."""
    return ["trtllm-serve", "disaggregated", "-c", config_path]


# -- offline checks (--validate) ----------------------------------------------------------------------------------

LAUNCHERS = ("sglang.launch_server", "sglang_router.launch_router", "trtllm-serve", "dynamo.sglang", "dynamo.trtllm")


def commands_in(text: str) -> list[list[str]]:
    """Engine argvs in a shell text: every command (split at ``&&``, ``;``, ``|`` and newlines, continuation
    lines joined, ``exec`` dropped) whose program is one of :data:`LAUNCHERS`; unparsable text gives none."""
    try:
        tokens = shlex.split(text.replace("\\\n", " ").replace("\n", " ; "), comments=False, posix=True)
    except ValueError:
        return []
    out: list[list[str]] = []
    current: list[str] = []
    for tok in [*tokens, ";"]:
        if tok in ("&&", ";", "||", "|"):
            if current:
                out.append(current)
            current = []
        elif not (tok == "exec" and not current):
            current.append(tok)
    return [c for c in out if any(launcher in c[:3] for launcher in LAUNCHERS)]


def _flag_errors(argv: list[str], known: frozenset[str], what: str) -> list[str]:
    errors = []
    for k, tok in enumerate(argv):
        if not tok.startswith("-") or tok[1:2].isdigit():
            continue
        name = tok.split("=", 1)[0]
        if name not in known:
            errors.append(f"{name} is not a documented {what} argument")
            continue
        choices = SGLANG_CHOICES.get(name)
        if choices is not None and "sglang" in what.lower() and k + 1 < len(argv) and argv[k + 1] not in choices:
            errors.append(f"{name} {argv[k + 1]!r} is not one of {', '.join(sorted(choices))}")
    return errors


def command_errors(argv: list[str], engine: str, version: str) -> list[str]:
    """Arguments of an engine argv that the engine's version line does not document (empty when all are)."""
    line = version_line(version)
    if "sglang_router.launch_router" in argv[:3]:
        return _flag_errors(argv[3:], SGLANG_ROUTER_ARGS.get(line, frozenset()), f"SGLang {line} router")
    if "sglang.launch_server" in argv[:3] or "dynamo.sglang" in argv[:3]:
        return _flag_errors(argv[3:], SGLANG_SERVER_ARGS.get(line, frozenset()), f"SGLang {line} server")
    if argv[0] == "trtllm-serve":
        return _flag_errors(argv[1:], TRTLLM_SERVE_ARGS.get(line, frozenset()), f"TensorRT-LLM {line} trtllm-serve")
    if "dynamo.trtllm" in argv[:3]:  # Dynamo's own worker flags; its engine settings are in the options YAML
        return []
    return []


def config_errors(doc: Any, table: dict[str, dict[str, frozenset[str] | None]], line: str, what: str) -> list[str]:
    """Keys of a TensorRT-LLM YAML document the version line's table (:data:`TRTLLM_OPTION_KEYS` or
    :data:`TRTLLM_DISAGG_KEYS`) does not document."""
    keys = table.get(line)
    if keys is None:
        return [f"no {what} key table for TensorRT-LLM {line}"]
    if not isinstance(doc, dict):
        return [f"{what} is not a mapping"]
    errors = []
    for key, value in doc.items():
        if key not in keys:
            errors.append(f"{key!r} is not a documented TensorRT-LLM {line} {what} key")
            continue
        sub = keys[key]
        if sub is not None:
            extra = sorted(set(value) - sub) if isinstance(value, dict) else ["(not a mapping)"]
            errors += [f"{key}.{k!s} is not a documented TensorRT-LLM {line} {what} key" for k in extra]
    return errors


def is_trtllm_disagg(doc: Any) -> bool:
    """True for a ``trtllm-serve disaggregated`` config (it names context or generation servers)."""
    return isinstance(doc, dict) and ("context_servers" in doc or "generation_servers" in doc)


def engine_text_errors(text: str, engine: str, version: str) -> list[str]:
    """Every undocumented argument of the engine commands in a shell text."""
    return [e for argv in commands_in(text) for e in command_errors(argv, engine, version)]


def containers(node: Any) -> Iterable[dict[str, Any]]:
    """Every container-like mapping (one with ``command`` or ``args``) in a manifest, depth first."""
    if isinstance(node, list):
        for x in node:
            yield from containers(x)
    elif isinstance(node, dict):
        if "image" in node and ("command" in node or "args" in node):
            yield node
        for v in node.values():
            yield from containers(v)
