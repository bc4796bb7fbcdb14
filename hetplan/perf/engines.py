"""Serving engines as a dimension of the performance model: vLLM, SGLang and TensorRT-LLM.

An :class:`EngineRules` holds what differs between engines before any kernel runs: how the engine sizes its KV
cache from device memory, its KV block (page) size, its default batch caps and token budget, its default KV
dtype for a given weight dtype, and whether it mixes prefill chunks into decode steps. Kernel speed (GEMM,
attention and bandwidth efficiencies, per-step overheads, all-reduce) is fitted per engine and GPU architecture
and lives in ``catalogs/perf/<engine>.yaml`` (:mod:`hetplan.perf.calibration`).

Memory rules (per GPU; ``visible`` is the memory the CUDA runtime reports, :func:`visible_memory_gib`):

- **vLLM** (``total_fraction``): the engine may use ``gpu_memory_utilization x visible`` (of *total* memory, not of
  what is free); KV = that - weights - the peak of a profiling forward pass over ``max_num_batched_tokens`` tokens
  (activations, :func:`activation_gib`) - non-torch memory (CUDA context, NCCL and custom all-reduce buffers,
  CUDA graphs: ``runtime_reserve_gib``). vLLM's own memory profiler reports these terms in its start-up log
  (``vllm.utils.mem_utils.MemoryProfilingResult``: weights, torch peak increase, non-torch increase).
- **SGLang** (``static_fraction``): ``mem_fraction_static x visible`` holds weights *and* the KV pool; activations
  and CUDA graphs live in the rest, so KV = fraction x visible - weights.
- **TensorRT-LLM** (``free_after_weights``): after weights and runtime buffers are allocated, the KV cache takes
  ``free_gpu_memory_fraction`` of the *free* memory: KV = fraction x (visible - weights - activations - runtime).

The activation term is hetplan's own reconstruction: the profiling pass holds the widest intermediate tensors of one
layer for every batched token (``(4 d + 2 d_ff_per_gpu) x 2 bytes`` for a dense layer, the routed experts' top-k
copies for MoE) plus the sampler's fp32 logits for ``max_num_seqs`` sequences (``3`` copies: logits, probabilities,
sorted); its constants were chosen so that the vLLM rule reproduces the capacities vLLM logs (tests/unit/
test_engines.py: Qwen3-235B-A22B-FP8 TP4 on H100, 178,880 tokens). Calibrate ``runtime_reserve_gib`` for your own
stack from the ``non-torch`` figure of vLLM's start-up log.

Sources: vLLM engine arguments (``--gpu-memory-utilization``, ``--max-num-seqs``, ``--max-num-batched-tokens``,
``--block-size``); SGLang server arguments (``--mem-fraction-static``, ``--page-size``, ``--chunked-prefill-size``,
``--max-running-requests``); TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction``, ``tokens_per_block``,
``max_batch_size``, ``max_num_tokens``. The numbers are the documented defaults of the versions named in
``version``; hetplan's own reconstruction for how they combine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.catalog.schemas import GpuSpec
    from hetplan.perf.arch import ModelArch

ENGINE_NAMES = ("vllm", "sglang", "trtllm")
DRIVER_RESERVED_GIB = 0.42
"""Memory the driver keeps out of what the CUDA runtime reports as total, GiB, for GPUs without a measured
``usable_memory_gib``: an RTX 3090 (24 GiB) reports 23.58 GiB to vLLM (hetplan's own calibration on that one log)."""


@dataclass(frozen=True)
class EngineRules:
    """What one serving engine does with memory and scheduling (see module docstring).

    Attributes:
        name: ``vllm``, ``sglang`` or ``trtllm``.
        version: engine version these defaults follow.
        memory_rule: ``total_fraction`` (vLLM), ``static_fraction`` (SGLang) or ``free_after_weights`` (TRT-LLM).
        memory_fraction: the engine's default fraction for that rule.
        block_size_tokens: KV block (page) size, tokens.
        max_num_seqs: default cap on sequences in one step.
        max_num_batched_tokens: default token budget of one step (prefill chunk size).
        runtime_reserve_gib: non-torch memory per GPU (CUDA context, communication buffers, CUDA graphs), GiB.
        chunked_prefill: True when the engine mixes prefill chunks with decodes in one step.
        fp8_kv_with_quantized_weights: True when the engine's recipes use an fp8 KV cache for fp8/fp4 checkpoints.
        flag_fraction: the command-line flag that sets ``memory_fraction``.
    """

    name: str
    version: str
    memory_rule: str
    memory_fraction: float
    block_size_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    runtime_reserve_gib: float
    chunked_prefill: bool
    fp8_kv_with_quantized_weights: bool
    flag_fraction: str


ENGINES: dict[str, EngineRules] = {
    "vllm": EngineRules(
        name="vllm",
        version="0.12",
        memory_rule="total_fraction",
        memory_fraction=0.9,
        block_size_tokens=16,
        max_num_seqs=256,
        max_num_batched_tokens=8192,
        runtime_reserve_gib=2.0,
        chunked_prefill=True,
        fp8_kv_with_quantized_weights=False,
        flag_fraction="--gpu-memory-utilization",
    ),
    "sglang": EngineRules(
        name="sglang",
        version="0.5",
        memory_rule="static_fraction",
        memory_fraction=0.85,
        block_size_tokens=1,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        runtime_reserve_gib=1.5,
        chunked_prefill=True,
        fp8_kv_with_quantized_weights=False,
        flag_fraction="--mem-fraction-static",
    ),
    "trtllm": EngineRules(
        name="trtllm",
        version="1.1",
        memory_rule="free_after_weights",
        memory_fraction=0.9,
        block_size_tokens=32,
        max_num_seqs=2048,
        max_num_batched_tokens=8192,
        runtime_reserve_gib=1.0,
        chunked_prefill=False,
        fp8_kv_with_quantized_weights=True,
        flag_fraction="free_gpu_memory_fraction",
    ),
}


def engine_rules(name: str) -> EngineRules:
    """The rules of engine ``name`` (case-insensitive).

    Raises:
        InputError: an unknown engine, listing the known ones.
    """
    rules = ENGINES.get(name.strip().lower())
    if rules is None:
        raise InputError(
            f"unknown engine {name!r}", f"supported: {', '.join(ENGINE_NAMES)}", "pass --engine vllm, sglang or trtllm"
        )
    return rules


def default_kv_dtype(engine: str, weight_dtype: str) -> str:
    """KV dtype an engine uses by default for ``weight_dtype`` weights: an fp8 cache for fp8/fp4 checkpoints on
    TensorRT-LLM (its FP8 recipes), else 16 bits (vLLM's and SGLang's ``auto`` follows the model dtype)."""
    rules = engine_rules(engine)
    if rules.fp8_kv_with_quantized_weights and weight_dtype in ("fp8", "fp4"):
        return "fp8"
    return "bf16"


def visible_memory_gib(gpu: GpuSpec) -> float:
    """Device memory the CUDA runtime reports as total, GiB: ``usable_memory_gib`` when the catalog has it (e.g. a
    vLLM log), else the nominal memory less :data:`DRIVER_RESERVED_GIB`."""
    if gpu.usable_memory_gib is not None:
        return float(gpu.usable_memory_gib)
    return max(float(gpu.hbm_gib) - DRIVER_RESERVED_GIB, 0.0)


ACTIVATION_COPIES_LOGITS = 5.0
"""fp32 vocabulary-wide buffers the sampler's profiling pass holds per sequence (logits, probabilities, sorted
values and their int64 indices): hetplan's own reconstruction."""


def activation_gib(arch: ModelArch, tp: int, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    """Peak activation memory per GPU of a profiling forward pass over ``max_num_batched_tokens`` tokens, GiB.

    Per token, in 16 bits: the residual stream and attention buffers (``4 x hidden``) and the widest MLP
    intermediate on this GPU (gate and up, ``2 x d_ff / tp``; MoE: the fused-MoE workspaces of the top-k routed
    copies, ``top-k x (3 x d_expert / tp + hidden)``); plus the sampler's fp32 vocabulary-wide buffers for
    ``max_num_seqs`` sequences (:data:`ACTIVATION_COPIES_LOGITS` of them; sampling runs on the full vocabulary on
    every rank). Source: hetplan's own reconstruction (module docstring).
    """
    s = arch.spec
    width = 2 * s.intermediate_size / tp
    if s.is_moe:
        assert s.experts_per_token is not None
        routed = s.experts_per_token * (3 * (s.moe_intermediate_size or s.intermediate_size) / tp + s.hidden_size)
        width = max(routed, width if s.first_k_dense_replace else 0.0)
    per_token = (4 * s.hidden_size + width) * 2.0
    logits = max_num_seqs * s.vocab_size * 4.0 * ACTIVATION_COPIES_LOGITS
    return (max_num_batched_tokens * per_token + logits) / 2**30


def kv_free_gib(
    rules: EngineRules,
    fraction: float,
    visible_gib: float,
    weights_gib: float,
    activation: float,
    runtime_gib: float,
) -> float:
    """GiB per GPU the engine gives the KV cache under its memory rule (negative when the weights do not fit).

    Args:
        rules: the engine.
        fraction: the engine's memory fraction (``gpu_memory_utilization``, ``mem_fraction_static`` or
            ``free_gpu_memory_fraction``).
        visible_gib: device memory the runtime reports, GiB.
        weights_gib: weights per GPU, GiB.
        activation: peak activations per GPU (:func:`activation_gib`), GiB.
        runtime_gib: non-torch memory per GPU, GiB.
    """
    if rules.memory_rule == "total_fraction":
        return fraction * visible_gib - weights_gib - activation - runtime_gib
    if rules.memory_rule == "static_fraction":
        return fraction * visible_gib - weights_gib
    free = visible_gib - weights_gib - activation - runtime_gib
    return fraction * free if free > 0 else free


def weights_gib_per_gpu(arch: ModelArch, tp: int, pp: int = 1, dp: int = 1) -> float:
    """Weights per GPU, GiB: attention and dense layers split by TP (replicated over attention-DP ranks), routed
    experts spread over all ``tp x dp`` GPUs (EP or MoE-TP), everything split by PP."""
    s = arch.spec
    experts = 0.0
    if s.is_moe:
        assert s.num_experts is not None
        experts = (s.num_hidden_layers - s.first_k_dense_replace) * s.num_experts * arch.expert_bytes
    rest = arch.weight_bytes - experts
    return (rest / tp + experts / (tp * dp)) / pp / 2**30


@dataclass(frozen=True)
class MemoryBudget:
    """KV room of one instance under an engine's memory rule (all per GPU, GiB, except ``kv_capacity_tokens``)."""

    visible_gib: float
    weights_gib: float
    activation_gib: float
    runtime_gib: float
    kv_gib: float
    kv_capacity_tokens: int


def memory_budget(
    arch: ModelArch,
    gpu: GpuSpec,
    rules: EngineRules,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    fraction: float | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    block_size_tokens: int | None = None,
) -> MemoryBudget:
    """KV capacity (tokens, whole blocks, all DP ranks together) of ``arch`` on ``tp x pp x dp`` GPUs of ``gpu``
    under ``rules`` (module docstring); ``None`` arguments take the engine's defaults. 0 tokens when nothing fits."""
    frac = rules.memory_fraction if fraction is None else fraction
    budget = rules.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    seqs = rules.max_num_seqs if max_num_seqs is None else max_num_seqs
    block = rules.block_size_tokens if block_size_tokens is None else block_size_tokens
    visible = visible_memory_gib(gpu)
    weights = weights_gib_per_gpu(arch, tp, pp, dp)
    act = activation_gib(arch, tp, budget, seqs) if rules.memory_rule != "static_fraction" else 0.0
    runtime = rules.runtime_reserve_gib
    if rules.memory_rule == "static_fraction":
        visible_start = visible - runtime
        kv = frac * visible_start - weights
    else:
        kv = kv_free_gib(rules, frac, visible, weights, act, runtime)
    per_token = arch.kv_bytes_per_token / (arch.kv_shards(tp) * pp)
    tokens = int(kv * 2**30 // per_token) if kv > 0 else 0
    tokens = tokens // block * block * dp
    return MemoryBudget(visible, weights, act, runtime, kv, tokens)


__all__ = [
    "MemoryBudget",
    "memory_budget",
    "weights_gib_per_gpu",
    "DRIVER_RESERVED_GIB",
    "ENGINES",
    "ENGINE_NAMES",
    "EngineRules",
    "activation_gib",
    "default_kv_dtype",
    "engine_rules",
    "kv_free_gib",
    "visible_memory_gib",
]
