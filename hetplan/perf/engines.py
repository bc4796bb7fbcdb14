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

The vLLM terms follow its profiling run (``gpu_model_runner.profile_run``): the activation peak is the larger of one
layer's forward pass over ``max_num_batched_tokens`` tokens and the sampler's dummy run over ``max_num_seqs``
full-vocabulary rows (:func:`activation_gib`); non-torch memory is a TP1 base plus the TP group's NCCL buffers
(:data:`NON_TORCH_GIB`, :func:`comm_buffer_gib`); CUDA graphs are captured after the KV cache is sized in vLLM 0.12
(``cudagraph_reserve_gib`` = 0) and the KV cache is whole blocks. Checked against vLLM's own logs within 5 % on an
RTX 3090, an A100-80GB and an H100 (tests/unit/test_kv_capacity_logs.py cites each). Calibrate: from a start-up
log with ``VLLM_LOGGING_LEVEL=DEBUG`` read ``non_torch`` into ``PerfSettings.activation_reserve_gib``, the torch
peak increase at small ``max_num_batched_tokens`` divided by ``min(max_num_seqs, tokens) x vocabulary`` into
``sampler_bytes_per_logit``, and vLLM 0.21+'s "Estimated CUDA graph memory" into ``cudagraph_reserve_gib``.

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
NON_TORCH_GIB = 0.35
"""Non-torch memory of one vLLM worker at TP1 (CUDA context, cuBLAS workspaces), GiB: ``non_torch_memory=0.35GiB``
in vLLM's RTX 3090 log (vllm-project/vllm issue 10517). Calibrate from the ``non_torch`` figure of your own log
(``PerfSettings.activation_reserve_gib``); TP > 1 adds :func:`comm_buffer_gib`."""
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
        runtime_reserve_gib=NON_TORCH_GIB,
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


SAMPLER_BYTES_PER_LOGIT = 41.2
"""Bytes the sampler's profiling pass holds per vocabulary entry and sequence (the lm-head output, its fp32 copy,
temperature-scaled logits, sorted values with int64 indices, probabilities, the exponential draw), calibrated on
vLLM's log of Meta-Llama-3-8B on an H100 (vllm-project/vllm pull 10511: a 1.26 GiB activation peak at TP1 *and*
TP2 for 256 sequences x 128,256 entries, i.e. the sampler, not the forward pass, sets it). Override per run with
``PerfSettings.sampler_bytes_per_logit``."""

COMM_BUFFER_GIB = {1: 0.0, 2: 342 / 1024, 4: 392 / 1024}
"""NCCL buffers per GPU by TP degree, GiB (TP 8 and beyond: the TP 4 figure): ``misc.nccl_mem`` of the measured
system files of NVIDIA's AIConfigurator (``shared/data/measured/kernels/systems/*.yaml``, Apache-2.0), which call
them an unofficial correction to tune."""


def comm_buffer_gib(tp: int) -> float:
    """NCCL / all-reduce buffers per GPU for a TP group of ``tp`` GPUs, GiB (:data:`COMM_BUFFER_GIB`)."""
    if tp <= 1:
        return 0.0
    return COMM_BUFFER_GIB[2] if tp == 2 else COMM_BUFFER_GIB[4]


def forward_peak_bytes_per_token(arch: ModelArch, tp: int) -> float:
    """Peak bytes per batched token of one layer's forward pass on one GPU (16-bit activations).

    Dense MLP: while the down projection runs, the layer input, the residual and the output (``3 x hidden``) and
    the gate/up output with its activated half (``3 x d_ff / tp``) are alive; MoE: the top-k routed copies'
    fused-MoE workspaces, ``top-k x (3 x d_expert / tp + hidden)``, in place of the MLP. Reproduces the
    ``peak_torch_memory`` of vLLM's RTX 3090 log for Llama-3.1-8B at 20,000 and 29,000 batched tokens within 1 %
    (vllm-project/vllm issue 10517): about 108 KiB per token. Source: hetplan's own reconstruction of vLLM's
    ``LlamaMLP.forward``.
    """
    s = arch.spec
    width = 3 * s.intermediate_size / tp
    if s.is_moe:
        assert s.experts_per_token is not None
        routed = s.experts_per_token * (3 * (s.moe_intermediate_size or s.intermediate_size) / tp + s.hidden_size)
        width = max(routed, width if s.first_k_dense_replace else 0.0)
    return (3 * s.hidden_size + width) * 2.0


def activation_gib(
    arch: ModelArch,
    tp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    sampler_bytes_per_logit: float = SAMPLER_BYTES_PER_LOGIT,
) -> float:
    """Peak activation memory per GPU of vLLM's profiling run, GiB: the larger of the forward pass over
    ``max_num_batched_tokens`` tokens (:func:`forward_peak_bytes_per_token`) and the sampler's dummy run over
    ``min(max_num_seqs, max_num_batched_tokens)`` sequences of full-vocabulary logits
    (``sampler_bytes_per_logit`` each; sampling runs on the whole vocabulary on every rank). The two do not
    overlap in time, so the peak is their maximum, not their sum. Source: vLLM ``gpu_model_runner.profile_run``
    (``_dummy_run`` then ``_dummy_sampler_run``); the constants are hetplan's calibration on the logs cited at
    :func:`forward_peak_bytes_per_token` and :data:`SAMPLER_BYTES_PER_LOGIT`.
    """
    forward = max_num_batched_tokens * forward_peak_bytes_per_token(arch, tp)
    seqs = min(max_num_seqs, max_num_batched_tokens)
    sampler = seqs * arch.spec.vocab_size * sampler_bytes_per_logit
    return max(forward, sampler) / 2**30


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
    runtime_reserve_gib: float | None = None,
    cudagraph_reserve_gib: float = 0.0,
    sampler_bytes_per_logit: float = SAMPLER_BYTES_PER_LOGIT,
) -> MemoryBudget:
    """KV capacity (tokens, whole blocks, all DP ranks together) of ``arch`` on ``tp x pp x dp`` GPUs of ``gpu``
    under ``rules`` (module docstring); ``None`` arguments take the engine's defaults. 0 tokens when nothing fits.

    The runtime term is ``runtime_reserve_gib`` (default the engine's non-torch memory) + the TP group's
    communication buffers (:func:`comm_buffer_gib`) + ``cudagraph_reserve_gib`` (0 for vLLM 0.12, which captures
    CUDA graphs after sizing the KV cache, in the ``1 - gpu_memory_utilization`` headroom; vLLM 0.21 and later
    subtract their "Estimated CUDA graph memory" first: pass that figure)."""
    frac = rules.memory_fraction if fraction is None else fraction
    budget = rules.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    seqs = rules.max_num_seqs if max_num_seqs is None else max_num_seqs
    block = rules.block_size_tokens if block_size_tokens is None else block_size_tokens
    visible = visible_memory_gib(gpu)
    weights = weights_gib_per_gpu(arch, tp, pp, dp)
    static = rules.memory_rule == "static_fraction"
    act = 0.0 if static else activation_gib(arch, tp, budget, seqs, sampler_bytes_per_logit)
    reserve = rules.runtime_reserve_gib if runtime_reserve_gib is None else runtime_reserve_gib
    runtime = reserve + comm_buffer_gib(tp) + cudagraph_reserve_gib
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
    "comm_buffer_gib",
    "forward_peak_bytes_per_token",
    "NON_TORCH_GIB",
    "SAMPLER_BYTES_PER_LOGIT",
    "default_kv_dtype",
    "engine_rules",
    "kv_free_gib",
    "visible_memory_gib",
]
