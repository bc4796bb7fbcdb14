"""``hetplan estimate``: one instance's latencies, memory and steady-state throughput.

Source: DESIGN §2; the steady-state throughput cycle is hetplan's own reconstruction of what MLPerf Offline and
TensorRT-LLM throughput tables measure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError, OutOfMemoryError
from hetplan.perf.latency import InstanceModel, compute_dtype

if TYPE_CHECKING:
    from hetplan.catalog.schemas import GpuSpec


def max_output_tokens_per_s(inst: InstanceModel, prompt_tokens: float, output_tokens: float) -> float:
    """Steady-state output tokens/s of one instance serving prompts of ``prompt_tokens`` and
    ``output_tokens`` each, at the largest batch that fits (KV for ``S + O`` tokens per sequence, capped by
    ``max_num_seqs``).

    Continuous batching cycle: B sequences decode ``O`` steps at the mean context ``S + O/2``; while they do,
    B new prompts are prefilled in iterations of at most ``max_num_batched_tokens`` tokens. Throughput =
    ``B * O / (T_prefill(B prompts) + O * T_decode(B, S + O/2))``. Returns 0 when not even one sequence fits.
    """
    batch = min(inst.settings.max_num_seqs, int(inst.max_batch_size(prompt_tokens + output_tokens)))
    if batch < 1:
        return 0.0
    iterations = max(1, math.ceil(batch * prompt_tokens / inst.settings.max_num_batched_tokens))
    prefill = float(inst.prefill_latency_s(prompt_tokens, batch)) + (iterations - 1) * inst.overhead_s
    decode = output_tokens * float(inst.decode_step_latency_s(batch, prompt_tokens + output_tokens / 2))
    return batch * output_tokens / (prefill + decode)


@dataclass(frozen=True)
class Estimate:
    """Result of :func:`estimate`; field names are the ``--json`` keys."""

    model: str
    gpu: str
    engine: str
    tp: int
    pp: int
    weight_dtype: str
    kv_dtype: str
    batch: int
    prompt_tokens: int
    context_tokens: int
    prefill_latency_s: float
    decode_step_latency_s: float
    kv_capacity_tokens: int
    max_batch_size: int
    weights_gib_per_gpu: float
    kv_bytes_per_token: float
    output_tokens: int | None
    max_output_tokens_per_s: float | None
    compute_tflops_is_estimate: bool
    # measured figures (hetplan profile): what each --profile did and warnings about the figures used
    warnings: list[str] = field(default_factory=list)
    profiles: list[dict[str, Any]] = field(default_factory=list)


def check_gpu_runs(gpu: GpuSpec, weight_dtype: str) -> None:
    """Refuse a GPU without tensor cores for ``weight_dtype``'s GEMMs (bf16 on Volta or Pascal): the one check
    ``hetplan estimate`` and every ``--points`` row go through.

    Raises:
        InputError: naming the GPU, the dtype and the fix.
    """
    try:
        gpu.dense_tflops(compute_dtype(weight_dtype))
    except KeyError as exc:  # e.g. bf16 on Volta or Pascal
        raise InputError(
            f"{gpu.name} cannot run {weight_dtype} weights",
            exc.args[0] if exc.args else "no compute figure for this dtype",
            "pass --weight-dtype fp16 (and --kv-dtype fp16), or another --gpu",
        ) from None


def estimate(
    inst: InstanceModel, batch: int, prompt_tokens: int, context_tokens: int, output_tokens: int | None = None
) -> Estimate:
    """Evaluate ``inst`` at one operating point.

    Args:
        batch: B, prompts in the prefill iteration and sequences in the decode iteration.
        prompt_tokens: S, tokens per prompt.
        context_tokens: C, tokens of context held by each decoding sequence.
        output_tokens: O; when given, also the steady-state output throughput.

    Raises:
        OutOfMemoryError: the weights, or ``batch`` sequences of the given context, do not fit, or
            ``settings.max_model_len_tokens`` exceeds the KV capacity (the engine would not start).
        InputError: one request (context + output) longer than ``max_model_len`` or than the whole KV cache.
        InputError: the request is longer than the model's context window, or the GPU has no tensor cores for
            the weight dtype (bf16 on Volta).
    """
    inst.require_fit()
    check_gpu_runs(inst.gpu, inst.arch.weight_dtype)
    window = inst.arch.spec.max_position_embeddings
    longest = max(prompt_tokens, context_tokens) + (output_tokens or 0)
    if longest > window:
        raise InputError(
            f"{longest:,} tokens of context exceed {inst.arch.spec.name}'s window of {window:,}",
            f"prompt {prompt_tokens:,}, context {context_tokens:,}, output {output_tokens or 0:,} tokens",
            "lower --prompt-tokens, --context-tokens or --output-tokens",
        )
    max_len = inst.settings.max_model_len_tokens
    if max_len is not None and max_len > window:
        raise InputError(
            f"max_model_len {max_len:,} exceeds {inst.arch.spec.name}'s window of {window:,}",
            "vLLM refuses a max_model_len beyond the model's max_position_embeddings",
            f"pass --max-model-len {window:,} or less",
        )
    if max_len is not None and max_len > inst.kv_capacity_tokens:
        raise OutOfMemoryError(
            f"max_model_len {max_len:,} exceeds the {inst.kv_capacity_tokens:,} tokens of KV cache of "
            f"{inst.gpu.name} TP{inst.tp} PP{inst.pp}",
            "the engine refuses to start when one request of max_model_len tokens cannot fit its KV cache",
            "lower --max-model-len, raise --gpu-memory-utilization, lower --max-num-batched-tokens or "
            "--max-num-seqs, raise --tp, or use --kv-dtype fp8",
        )
    from hetplan.perf.points import check_request_fits

    check_request_fits(
        max(prompt_tokens, context_tokens), output_tokens or 0, inst.kv_capacity_tokens, max_len,
        f"{inst.gpu.name} TP{inst.tp} PP{inst.pp}",
    )  # fmt: skip
    max_batch = int(inst.max_batch_size(max(prompt_tokens, context_tokens)))
    if batch > max_batch:
        raise OutOfMemoryError(
            f"batch {batch} does not fit the KV cache of {inst.gpu.name} TP{inst.tp} PP{inst.pp}",
            f"{batch} sequences of {max(prompt_tokens, context_tokens):,} tokens need more than the "
            f"{inst.kv_capacity_tokens:,} tokens of KV room; at most {max_batch} fit",
            "lower --batch, raise --tp, or use --kv-dtype fp8",
        )
    tput = max_output_tokens_per_s(inst, prompt_tokens, output_tokens) if output_tokens else None
    return Estimate(
        model=inst.arch.spec.name,
        gpu=inst.gpu.name,
        engine=inst.settings.engine,
        tp=inst.tp,
        pp=inst.pp,
        weight_dtype=inst.arch.weight_dtype,
        kv_dtype=inst.arch.kv_dtype,
        batch=batch,
        prompt_tokens=prompt_tokens,
        context_tokens=context_tokens,
        prefill_latency_s=float(inst.prefill_latency_s(prompt_tokens, batch)),
        decode_step_latency_s=float(inst.decode_step_latency_s(batch, context_tokens)),
        kv_capacity_tokens=inst.kv_capacity_tokens,
        max_batch_size=int(inst.max_batch_size(context_tokens)),
        weights_gib_per_gpu=inst.weights_gib_per_gpu,
        kv_bytes_per_token=inst.arch.kv_bytes_per_token,
        output_tokens=output_tokens,
        max_output_tokens_per_s=tput,
        compute_tflops_is_estimate=inst.compute_is_estimate,
    )
