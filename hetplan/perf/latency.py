"""Roofline latency and memory model of one serving instance (one GPU type, TP t, PP p).

All latency functions accept numpy arrays and broadcast, so the planner evaluates thousands of requests at once.

Model (DESIGN §2):
- prefill(B, S) = max(FLOPs / (t·MFU_p·F), W_gpu / (MBU·BW)) + all-reduce(B·S tokens) + PP hand-offs + overhead
- decode(B, c) = max(FLOPs / (t·MFU_d·F), (W_touched + B·c·kv) / (t·MBU·BW)) + all-reduce(B tokens) + overhead
- all-reduce: two per layer; ring ``2(t-1)·α + 2(t-1)/t · M / (η·B_link)`` with B_link the unidirectional link
  figure (half the datasheet's bidirectional aggregate) and M = tokens · hidden · 2 bytes.
- overhead(t) = step_overhead_s + tp_sync_overhead_s · log2(t): the framework cost the roofline misses.
- PP p: stages run one after another for latency (the whole model's work plus p-1 hand-offs); the planner's
  throughput accounting keeps p micro-batches in flight.
- Memory per GPU: weights/(t·p) + activation reserve; KV capacity = (HBM · utilization − weights − reserve) /
  (kv bytes per token / (min(t, n_kv) · p)), rounded down to whole blocks.

Source: DESIGN §2; overhead terms and their defaults are hetplan's own calibration (see ``settings.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError, OutOfMemoryError
from hetplan.perf.arch import ModelArch
from hetplan.perf.measured import measured_efficiency
from hetplan.perf.settings import GpuEfficiency, PerfSettings
from hetplan.units import GB, GIB, TERA

ArrayLike = float | np.ndarray


def compute_dtype(weight_dtype: str) -> str:
    """Tensor-core dtype the GEMMs run in: fp8/int8 weights use 8-bit math, fp16 fp16, bf16 and int4 (W4A16) bf16."""
    return {"fp8": "fp8", "int8": "int8", "fp16": "fp16"}.get(weight_dtype, "bf16")


@dataclass(frozen=True)
class InstanceModel:
    """Latency and memory of one model instance on ``tp * pp`` GPUs of one type.

    Raises (on construction):
        InputError: TP or PP is not a positive integer, or TP does not divide the attention heads.
    """

    arch: ModelArch
    gpu: GpuSpec
    tp: int = 1
    pp: int = 1
    settings: PerfSettings = PerfSettings()

    def __post_init__(self) -> None:
        if self.tp < 1 or self.pp < 1:
            raise InputError(f"TP and PP must be >= 1, got TP {self.tp}, PP {self.pp}", fix="pass --tp 1 or more")
        if self.arch.attention_heads % self.tp:
            raise InputError(
                f"TP {self.tp} does not divide the {self.arch.attention_heads} attention heads of "
                f"{self.arch.spec.name}",
                fix="choose a TP degree that divides the head count",
            )
        if self.arch.layers < self.pp:
            raise InputError(f"PP {self.pp} exceeds the {self.arch.layers} layers", fix="lower --pp")

    # -- constants ------------------------------------------------------------------------------------
    @cached_property
    def eff(self) -> GpuEfficiency:
        """Efficiency in force for this GPU: the prior (or the GPU's override), adjusted to the GPU's measured
        figures when it carries a profile (see :mod:`hetplan.perf.measured`)."""
        prior = self.settings.for_gpu(self.gpu.name)
        if self.gpu.measured is None:
            return prior
        return measured_efficiency(self.gpu, prior, compute_dtype(self.arch.weight_dtype), self.settings)

    @cached_property
    def peak_flops(self) -> float:
        """Dense peak FLOP/s of one GPU in the compute dtype."""
        tflops, _ = self.gpu.dense_tflops(compute_dtype(self.arch.weight_dtype))
        return tflops * TERA

    @property
    def compute_is_estimate(self) -> bool:
        """True when the GPU's TFLOPS figure is an unverified estimate (e.g. A10G)."""
        return self.gpu.dense_tflops(compute_dtype(self.arch.weight_dtype))[1]

    @cached_property
    def mem_bytes_per_s(self) -> float:
        """Datasheet memory bandwidth, bytes/s."""
        return self.gpu.hbm_gb_per_s * GB

    @cached_property
    def link_bytes_per_s(self) -> float:
        """Achieved unidirectional GPU-to-GPU bandwidth for all-reduce, bytes/s."""
        return self.gpu.interconnect_gb_per_s / 2.0 * GB * self.eff.link_efficiency

    @cached_property
    def overhead_s(self) -> float:
        """Fixed framework time per iteration, seconds (never zero)."""
        return self.eff.step_overhead_s + self.eff.tp_sync_overhead_s * math.log2(self.tp)

    @property
    def gpus(self) -> int:
        """GPUs in the instance, TP x PP."""
        return self.tp * self.pp

    # -- memory ---------------------------------------------------------------------------------------
    @cached_property
    def weights_gib_per_gpu(self) -> float:
        """Weight memory per GPU, GiB."""
        return self.arch.weight_bytes / (self.tp * self.pp) / GIB

    @cached_property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes one token occupies on each GPU."""
        return self.arch.kv_bytes_per_token / (self.arch.kv_shards(self.tp) * self.pp)

    @cached_property
    def kv_free_gib_per_gpu(self) -> float:
        """GiB left for KV cache per GPU (negative when the weights do not fit)."""
        s = self.settings
        return self.gpu.hbm_gib * s.gpu_memory_utilization - self.weights_gib_per_gpu - s.activation_reserve_gib

    @cached_property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache the instance holds (0 when the weights do not fit), whole blocks only."""
        free = self.kv_free_gib_per_gpu * GIB
        if free <= 0:
            return 0
        tokens = int(free // self.kv_bytes_per_token_per_gpu)
        block = self.settings.block_size_tokens
        return tokens // block * block

    @property
    def fits(self) -> bool:
        """True when the weights fit and leave room for at least one KV block."""
        return self.kv_capacity_tokens > 0

    def require_fit(self, min_tokens: int = 1) -> None:
        """Raise :class:`OutOfMemoryError` unless weights plus ``min_tokens`` of KV fit."""
        if self.kv_capacity_tokens < min_tokens:
            need = self.weights_gib_per_gpu + self.settings.activation_reserve_gib
            have = self.gpu.hbm_gib * self.settings.gpu_memory_utilization
            raise OutOfMemoryError(
                f"{self.arch.spec.name} ({self.arch.weight_dtype}) does not fit {self.gpu.name} at TP {self.tp}, "
                f"PP {self.pp}",
                f"needs {need:.1f} GiB per GPU for weights and activations plus KV for {min_tokens} tokens; "
                f"{have:.1f} GiB usable ({self.gpu.hbm_gib:g} GiB x {self.settings.gpu_memory_utilization}), "
                f"KV room {self.kv_capacity_tokens} tokens",
                "raise TP or PP, quantize weights (--weight-dtype fp8 or int4) or pick a GPU with more memory",
            )

    def max_batch_size(self, context_tokens: ArrayLike) -> np.ndarray:
        """Largest number of sequences of ``context_tokens`` each whose KV fits (no cap by max_num_seqs)."""
        ctx = np.maximum(np.asarray(context_tokens, dtype=float), 1.0)
        block = self.settings.block_size_tokens
        blocks_per_seq = np.ceil(ctx / block)
        out: np.ndarray = np.floor(self.kv_capacity_tokens / block / blocks_per_seq).astype(int)
        return out

    # -- time -----------------------------------------------------------------------------------------
    def allreduce_s(self, tokens: ArrayLike) -> np.ndarray:
        """All-reduce time of one iteration over ``tokens`` tokens: 2 per layer, ring algorithm."""
        t = self.tp
        if t == 1:
            return np.zeros_like(np.asarray(tokens, dtype=float))
        message = np.asarray(tokens, dtype=float) * self.arch.d_model * 2.0
        one = 2 * (t - 1) * self.eff.allreduce_latency_s + 2 * (t - 1) / t * message / self.link_bytes_per_s
        return 2 * self.arch.layers * one

    def pp_handoff_s(self, tokens: ArrayLike) -> np.ndarray:
        """Pipeline hand-offs: p-1 activation transfers of ``tokens * hidden * 2`` bytes."""
        if self.pp == 1:
            return np.zeros_like(np.asarray(tokens, dtype=float))
        message = np.asarray(tokens, dtype=float) * self.arch.d_model * 2.0
        return (self.pp - 1) * (self.settings.pp_link_latency_s + message / self.link_bytes_per_s)

    def prefill_latency_s(self, prompt_tokens: ArrayLike, batch: ArrayLike = 1) -> np.ndarray:
        """Seconds for one prefill iteration over ``batch`` prompts of ``prompt_tokens`` tokens each."""
        s = np.asarray(prompt_tokens, dtype=float)
        b = np.asarray(batch, dtype=float)
        flops = self.arch.prefill_flops(s, b)
        compute = flops / (self.tp * self.eff.prefill_mfu * self.peak_flops)
        memory = self.arch.weight_bytes / (self.tp * self.eff.decode_mbu * self.mem_bytes_per_s)
        tokens = b * s
        out: np.ndarray = np.maximum(compute, memory) + self.allreduce_s(tokens) + self.pp_handoff_s(tokens)
        return out + self.overhead_s

    def decode_step_latency_s(self, batch: ArrayLike, context_tokens: ArrayLike) -> np.ndarray:
        """Seconds for one decode iteration of ``batch`` sequences holding ``context_tokens`` tokens each."""
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        c = np.asarray(context_tokens, dtype=float)
        flops = self.arch.decode_flops(b, b * c)
        compute = flops / (self.tp * self.eff.decode_mfu * self.peak_flops)
        weights = self.arch.decode_weight_bytes(b)
        kv = b * c * self.arch.kv_bytes_per_token / self.arch.kv_shards(self.tp) * self.tp
        memory = (weights + kv) / (self.tp * self.eff.decode_mbu * self.mem_bytes_per_s)
        out: np.ndarray = np.maximum(compute, memory) + self.allreduce_s(b) + self.pp_handoff_s(b)
        return out + self.overhead_s


def kv_transfer_s(
    arch: ModelArch, prompt_tokens: ArrayLike, link_bytes_per_s: float, settings: PerfSettings
) -> np.ndarray:
    """Prefill->decode KV transfer time: ``prompt_tokens * kv_bytes / link + base latency`` (DESIGN §2).

    ``link_bytes_per_s`` is the achieved bandwidth between the two instances (bytes/s)."""
    s = np.asarray(prompt_tokens, dtype=float)
    return s * arch.kv_bytes_per_token / link_bytes_per_s + settings.kv_transfer_base_latency_s


def network_bytes_per_s(gpu: GpuSpec, tp: int, settings: PerfSettings) -> float:
    """Achieved scale-out bandwidth of one instance (``tp`` GPUs, one NIC share each), bytes/s."""
    return gpu.network_gbit_per_s * 1e9 / 8.0 * tp * settings.network_efficiency
