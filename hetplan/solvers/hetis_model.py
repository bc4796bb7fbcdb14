"""Per-device time helpers shared by the Hetis planner and its two baselines, built on :class:`InstanceModel`.

No roofline is repeated here: a pipeline stage that runs a fraction f of the layers on a TP group is the
``InstanceModel`` of the whole model on that group, scaled by f. Decode attention of one KV head is costed with the
same efficiency priors (``decode_mbu``/``decode_mfu``) as the roofline.

Pipeline model (every layout, Hetis or HexGen-style; hetplan's own reconstruction):
- stage s of a replica holds ``f_s`` of the layers on a TP group; with ``p`` stages ``p`` micro-batches of ``B``
  sequences are in flight, so one token of every sequence takes ``TPOT = p·max_s(stage_s) + overhead + hand-offs``
  and the replica emits ``p·B / TPOT`` tokens/s;
- ``stage_s = f_s·(dense step of the group at batch B) + attention_s`` where the dense step is
  ``InstanceModel.decode_step_latency_s(B, 0)`` minus its fixed overhead;
- a request costs the bottleneck stage ``E[prefill_s]`` plus ``E[O]·TPOT/(p·B)`` of decode time, so a replica
  serves ``1 / (E[prefill_bottleneck] + E[O]·TPOT/(p·B))`` req/s (prefill and decode share the GPUs);
- predicted TTFT: the q-quantile of the idle prefill latency through all stages plus one decode step (no queueing).

Source: hetplan's own reconstruction on top of DESIGN §2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.perf.arch import KV_BYTES, ModelArch
from hetplan.perf.capacity_inputs import LengthStats
from hetplan.perf.latency import InstanceModel, compute_dtype
from hetplan.perf.settings import PerfSettings
from hetplan.pool import Device
from hetplan.units import GIB, TERA

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

ACT_BYTES = 2.0  # queries and attention outputs travel as 16-bit activations


@dataclass(frozen=True)
class HetisSettings:
    """Constants of the Hetis planner that the paper does not pin down (defaults are hetplan's guesses).

    Attributes:
        theta: re-dispatch when the slowest device's step time over the mean exceeds this ratio.
        memory_watermark: re-dispatch when any device's KV use passes this share of its KV memory.
        attention_kernel_s_per_layer: fixed time per layer a device pays to run its attention kernel in a step.
        length_class_edges_tokens: decode-context edges of the length classes (short / medium / long).
        max_batch_per_replica: cap on running sequences per replica (vLLM ``--max-num-seqs``), every strategy.
        milp_max_devices: head splits with more devices use the greedy water-filling instead of the MILP.
        full_eval_top_n: layouts (best greedy-split throughput first; every layout gets that evaluation) that are
            re-evaluated with the exact MILP head split before the winner is picked.
        max_pp: largest pipeline depth tried for the primary workers.

    Calibration: measure one decode step's attention time on each GPU type for a few (heads, context) points
    and fit ``attention_kernel_s_per_layer`` (intercept) with the GPU's ``decode_mbu`` (slope); θ and the
    watermark are policy knobs: replay a trace through the re-dispatch rule and pick the pair that keeps TPOT
    attainment highest for the fewest moved heads.
    """

    theta: float = 1.2
    memory_watermark: float = 0.9
    attention_kernel_s_per_layer: float = 5e-6
    length_class_edges_tokens: tuple[int, ...] = (512, 2048)
    max_batch_per_replica: int = 256
    milp_max_devices: int = 16
    full_eval_top_n: int = 4
    max_pp: int = 4
    perf: PerfSettings = field(default_factory=PerfSettings)
    catalog: Catalog | None = field(default=None, compare=False)
    """The catalog whose fitted engine curves price the instances (None: the shipped catalogs); not written into
    the plan's ``settings``."""


# The length statistics Hetis needs (prompt/output samples, SLO quantile, mean output, decode context) are the
# planner's own: one class serves both.
Workload = LengthStats


def compute_tflops(gpu: GpuSpec, arch: ModelArch) -> float:
    """Dense TFLOPS the GPU runs the model's GEMMs at (0 when it has no such tensor cores, e.g. bf16 on Pascal)."""
    try:
        return gpu.dense_tflops(compute_dtype(arch.weight_dtype))[0]
    except KeyError:
        return 0.0


def attention_tflops(gpu: GpuSpec) -> float:
    """16-bit TFLOPS for decode attention (fp16 where bf16 is missing)."""
    try:
        return gpu.dense_tflops("fp16")[0]
    except KeyError:
        return 1.0


@lru_cache(maxsize=4096)
def instance(
    arch: ModelArch, gpu: GpuSpec, tp: int, perf: PerfSettings, catalog: Catalog | None = None
) -> InstanceModel:
    """The (cached) InstanceModel of the whole model on ``tp`` GPUs of ``gpu``, with ``catalog``'s fitted curves
    (None: the shipped catalogs)."""
    return InstanceModel(arch, gpu, tp, 1, perf, catalog)


def dense_stage_s(
    arch: ModelArch, gpu: GpuSpec, tp: int, fraction: float, batch: float, perf: PerfSettings,
    catalog: Catalog | None = None,
) -> float:  # fmt: skip
    """Decode dense time (no attention, no fixed overhead) of a stage holding ``fraction`` of the layers, s
    (``catalog``: as :func:`instance`)."""
    m = instance(arch, gpu, tp, perf, catalog)
    return fraction * float(m.decode_step_latency_s(batch, 0.0) - m.overhead_s)


def prefill_stage_s(
    arch: ModelArch, gpu: GpuSpec, tp: int, fraction: float, prompt: np.ndarray, perf: PerfSettings,
    catalog: Catalog | None = None,
) -> np.ndarray:  # fmt: skip
    """Prefill time per prompt of a stage holding ``fraction`` of the layers (no fixed overhead), s; shape of
    ``prompt`` (``catalog``: as :func:`instance`)."""
    m = instance(arch, gpu, tp, perf, catalog)
    return fraction * (np.asarray(m.prefill_latency_s(prompt), dtype=float) - m.overhead_s)


def overhead_s(arch: ModelArch, gpu: GpuSpec, tp: int, perf: PerfSettings, catalog: Catalog | None = None) -> float:
    """Fixed framework time per iteration of a TP group, s (``catalog``: as :func:`instance`)."""
    return instance(arch, gpu, tp, perf, catalog).overhead_s


def handoff_s(arch: ModelArch, stages: int, tokens: float, link_bytes_per_s: float, perf: PerfSettings) -> float:
    """Pipeline hand-offs of ``tokens`` activations across ``stages - 1`` boundaries, s."""
    if stages <= 1:
        return 0.0
    return (stages - 1) * (perf.pp_link_latency_s + tokens * arch.d_model * ACT_BYTES / link_bytes_per_s)


def head_bytes_per_token(arch: ModelArch, layers: float) -> float:
    """KV bytes of one KV head for one token over ``layers`` layers (K and V)."""
    return 2.0 * layers * arch.spec.head_dim * KV_BYTES[arch.kv_dtype]


def s_per_head_token(arch: ModelArch, gpu: GpuSpec, layers: float, perf: PerfSettings) -> float:
    """a_j: decode attention time for one KV head (its GQA group of query heads) per cached token, s."""
    eff = perf.for_gpu(gpu.name)
    group = arch.attention_heads / arch.kv_heads
    memory = head_bytes_per_token(arch, layers) / (eff.decode_mbu * gpu.hbm_gb_per_s * 1e9)
    compute = 4.0 * group * arch.spec.head_dim * layers / (eff.decode_mfu * attention_tflops(gpu) * TERA)
    return max(memory, compute)


def query_bytes_per_head(arch: ModelArch) -> float:
    """Bytes one request ships per KV head per layer to an attention worker and back (queries in, outputs out)."""
    group = arch.attention_heads / arch.kv_heads
    return 2.0 * group * arch.spec.head_dim * ACT_BYTES


def free_kv_gib(gpu: GpuSpec, weights_gib: float, perf: PerfSettings) -> float:
    """GiB left for KV on one GPU after ``weights_gib`` and the activation reserve (may be negative)."""
    return gpu.hbm_gib * perf.gpu_memory_utilization - weights_gib - perf.activation_reserve_gib


def weights_gib(arch: ModelArch, tp: int, fraction: float) -> float:
    """Weight GiB per GPU of a stage holding ``fraction`` of the model on ``tp`` GPUs."""
    return arch.weight_bytes * fraction / tp / GIB


def split_layers(layers: int, speeds: list[float]) -> list[int]:
    """Integer layers per stage in proportion to ``speeds`` (largest remainder, each stage at least one)."""
    total = sum(speeds)
    raw = [layers * s / total for s in speeds]
    out = [max(1, math.floor(r)) for r in raw]
    order = sorted(range(len(speeds)), key=lambda i: (-(raw[i] - math.floor(raw[i])), i))
    i = 0
    while sum(out) < layers:
        out[order[i % len(order)]] += 1
        i += 1
    while sum(out) > layers:
        j = max((k for k in range(len(out)) if out[k] > 1), key=lambda k: (out[k] - raw[k], -k))
        out[j] -= 1
    return out


PRE_AMPERE = ("Pascal", "Volta", "Turing")


def eight_bit_refusal(gpu: GpuSpec, arch: ModelArch) -> str:
    """Why ``gpu`` cannot run the dense modules of 8-bit weights (``""`` when it can).

    An 8-bit dtype needs either the catalog's figure for it (``fp8_dense_tflops`` / ``int8_dense_tops``: native
    tensor cores) or an Ampere-or-newer part, where serving engines upcast 8-bit weights in the GEMM kernel (vLLM's
    Marlin kernels need compute capability 8.0). Pascal, Volta and Turing parts without the figure are refused,
    as the catalog's ``dense_tflops`` refuses bf16 on them. Source: hetplan's own rule.
    """
    dtype = compute_dtype(arch.weight_dtype)
    native = {"fp8": gpu.fp8_dense_tflops, "int8": gpu.int8_dense_tops}
    if dtype not in native or native[dtype] is not None:
        return ""
    if any(gpu.arch.startswith(a) for a in PRE_AMPERE):
        return f"no {dtype} support ({gpu.arch}: no {dtype} tensor cores and no weight-upcast kernels before Ampere)"
    return ""


def device_speed(arch: ModelArch, d: Device) -> float:
    """Tiering key: the device's dense compute for the model's dtype, TFLOPS (0: cannot run the GEMMs, e.g. bf16
    on Pascal, or 8-bit weights on a pre-Ampere part without 8-bit tensor cores, see :func:`eight_bit_refusal`)."""
    if eight_bit_refusal(d.gpu, arch):
        return 0.0
    return compute_tflops(d.gpu, arch)


def group_gpu(gpus: list[GpuSpec] | tuple[GpuSpec, ...]) -> GpuSpec:
    """The spec a TP group of (possibly mixed) GPUs runs at: its slowest member's (lowest 16-bit dense TFLOPS,
    then lowest memory bandwidth), with every throughput and memory figure lowered to the group's
    minimum (a TP group moves in lock step and shards weights evenly, so the smallest memory bounds each shard).
    The name stays the slowest member's so per-GPU efficiency priors still apply. Source: hetplan's own rule."""
    first = gpus[0]
    if all(g == first for g in gpus):
        return first
    slow = min(
        gpus,
        key=lambda g: (
            g.fp16_dense_tflops or g.bf16_dense_tflops or g.fp16_dense_tflops_estimate or 0.0,
            g.hbm_gb_per_s,
            g.name,
        ),
    )
    update: dict[str, object] = {
        "hbm_gib": min(g.hbm_gib for g in gpus),
        "hbm_gb_per_s": min(g.hbm_gb_per_s for g in gpus),
        "interconnect_gb_per_s": min(g.interconnect_gb_per_s for g in gpus),
    }
    for f in ("bf16_dense_tflops", "fp16_dense_tflops", "fp8_dense_tflops", "int8_dense_tops"):
        values = [getattr(g, f) for g in gpus]
        update[f] = None if any(v is None for v in values) else min(values)
    return slow.model_copy(update=update)


def group_label(gpus: list[GpuSpec] | tuple[GpuSpec, ...]) -> str:
    """A TP group's GPU types in words: ``A100-40GB-PCIe`` or ``A100-40GB-PCIe+RTX-3090`` when mixed."""
    return "+".join(sorted({g.name for g in gpus}))
