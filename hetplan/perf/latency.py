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

Since the per-engine calibration (``docs/perf-model.md``): unless the settings pin efficiency priors for a GPU, the
prefill and decode latencies come from the fitted step model of :mod:`hetplan.perf.closed_loop` with the curves of
``catalogs/perf/<engine>.yaml`` for the GPU's architecture (a roofline per operator, one all-reduce latency per
collective), and the KV room follows the engine's memory rule (:mod:`hetplan.perf.engines`: vLLM's share of
*total* memory less weights, profiled activations and runtime reserve; SGLang's static fraction; TensorRT-LLM's
share of what is free after weights). The formulas above remain the legacy roofline for pinned priors.

Source: DESIGN §2; overhead terms and their defaults are hetplan's own calibration (see ``settings.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError, OutOfMemoryError
from hetplan.perf.arch import ModelArch
from hetplan.perf.calibration import EfficiencyCurves, curves_for
from hetplan.perf.closed_loop import Rows, build_rows, row_constants, step_s
from hetplan.perf.engines import (
    EngineRules,
    activation_gib,
    comm_buffer_gib,
    engine_rules,
    kv_free_gib,
    visible_memory_gib,
)
from hetplan.perf.links import INTER_NODE_LATENCY_S, node_layout
from hetplan.perf.measured import measured_efficiency
from hetplan.perf.settings import GpuEfficiency, PerfSettings
from hetplan.units import GB, GIB, TERA

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

ArrayLike = float | np.ndarray


def compute_dtype(weight_dtype: str) -> str:
    """Tensor-core dtype the GEMMs run in: fp8/int8 weights use 8-bit math, fp4 (NVFP4/MXFP4) 4-bit math where the
    GPU has it (else its fp8 rate, :meth:`GpuSpec.dense_tflops`), fp16 fp16, bf16 and int4 (W4A16) bf16."""
    return {"fp8": "fp8", "int8": "int8", "fp16": "fp16", "fp4": "fp4"}.get(weight_dtype, "bf16")


@dataclass(frozen=True)
class InstanceModel:
    """Latency and memory of one model instance on ``tp * pp`` GPUs of one type, with the fitted engine curves of
    ``catalog`` (None: the shipped catalogs; a plan's instances take the request's, ``PlanRequest.catalog``).

    Raises (on construction):
        InputError: TP or PP is not a positive integer, or TP does not divide the attention heads.
    """

    arch: ModelArch
    gpu: GpuSpec
    tp: int = 1
    pp: int = 1
    settings: PerfSettings = PerfSettings()
    catalog: Catalog | None = None

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
        kv = self.arch.kv_heads
        if not self.arch.spec.kv_lora_rank and kv % self.tp and self.tp % kv:
            raise InputError(
                f"TP {self.tp} neither divides the {kv} KV heads of {self.arch.spec.name} nor is a multiple of them",
                fix="choose a TP degree that divides the KV heads or is a multiple of them",
            )

    # -- engine and fitted curves -------------------------------------------------------------------------
    @cached_property
    def rules(self) -> EngineRules:
        """The engine's memory and scheduling rules (``settings.engine``)."""
        return engine_rules(self.settings.engine)

    @cached_property
    def calibrated(self) -> bool:
        """True when the fitted per-engine curves drive the latencies: always, unless the settings pin efficiency
        priors for this GPU (``gpu_overrides`` or a changed ``default``), which keeps the legacy roofline."""
        pinned = any(name == self.gpu.name for name, _ in self.settings.gpu_overrides)
        return not pinned and self.settings.default == GpuEfficiency()

    @cached_property
    def _curves(self) -> tuple[EfficiencyCurves, str | None]:
        from hetplan.catalog.context import Catalog

        catalog = self.catalog or Catalog.shipped()
        return curves_for(self.settings.engine, self.gpu.arch, self.gpu.vendor, self.gpu.name, catalog=catalog)

    @cached_property
    def prefill_separate(self) -> bool:
        """True when the engine runs prompts in prefill steps of their own, ahead of decoding (the fitted curves'
        ``prefill_mix`` below one half: SGLang's default, ``--enable-mixed-chunk`` off); False when it puts prompt
        chunks into the steps that decode (vLLM V1, TensorRT-LLM in-flight batching) and under pinned efficiency
        priors (the legacy roofline)."""
        return self.calibrated and self._curves[0].prefill_mix < 0.5

    @cached_property
    def correction(self) -> tuple[float, float]:
        """(prefill, decode) step-time factors of the user's calibration for this engine, GPU, model, TP and weight
        dtype (``settings.corrections``; :func:`hetplan.perf.settings.find_correction`); (1, 1) without one."""
        c = self.settings.correction(self.gpu.name, self.arch.spec.name, self.tp, self.arch.weight_dtype)
        return (c.ttft_factor, c.tpot_factor) if c is not None else (1.0, 1.0)

    @property
    def curve_notes(self) -> list[str]:
        """Sentences about the curves in force (a GPU without fitted data falls back to the nearest architecture)."""
        note = self._curves[1]
        notes = [f"{self.gpu.name}: {note}"] if (note and self.calibrated) else []
        if self.correction != (1.0, 1.0):
            notes.append(f"{self.gpu.name}: corrected by your calibration file: prefill steps x "
                         f"{self.correction[0]:.3f}, decode steps x {self.correction[1]:.3f}")  # fmt: skip
        return notes

    @cached_property
    def _rows(self) -> Rows:
        """Step-model constants of this instance (:mod:`hetplan.perf.closed_loop`), shape (1,)."""
        gpu = self.gpu
        m = gpu.measured
        if m is not None:
            # a profile's measured peaks replace the datasheet (divided by the reference kernel efficiencies, so a
            # GPU whose kernels reach exactly them changes nothing; see measured.py)
            upd: dict[str, float] = {"hbm_gb_per_s": m.memory_read_gb_per_s / self.settings.reference_memory_efficiency}
            dtype = compute_dtype(self.arch.weight_dtype)
            measured_tflops = m.tflops(dtype)
            if measured_tflops is not None:
                key = {"int8": "int8_dense_tops"}.get(dtype, f"{dtype}_dense_tflops")
                upd[key] = measured_tflops / self.settings.reference_gemm_efficiency
            half = m.tflops("bf16") or m.tflops("fp16")
            if half is not None:
                upd["bf16_dense_tflops"] = half / self.settings.reference_gemm_efficiency
                upd["fp16_dense_tflops"] = half / self.settings.reference_gemm_efficiency
            gpu = gpu.model_copy(update=upd)
        s = self.settings
        const = row_constants(
            self.arch, gpu, self.tp, 1, self._curves[0], s.max_num_batched_tokens, self.rules.chunked_prefill,
            s.max_num_seqs,
        )  # fmt: skip
        return build_rows([const])

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
    def nodes(self) -> tuple[int, int, int]:
        """(nodes the instance spans, nodes its TP group spans, PP hand-offs that cross nodes) on nodes of the GPU's
        NVLink domain (``scale_up_gpus``; :func:`hetplan.perf.links.node_layout`)."""
        return node_layout(self.tp, 1, self.pp, self.gpu.scale_up_gpus)

    @cached_property
    def network_bytes_per_s(self) -> float:
        """Achieved one-direction scale-out bandwidth per GPU between nodes, bytes/s: the catalog's
        ``network_gbit_per_s`` x ``settings.network_efficiency``."""
        return self.gpu.network_gbit_per_s * 1e9 / 8.0 * self.settings.network_efficiency

    @cached_property
    def overhead_s(self) -> float:
        """Fixed framework time per iteration, seconds (never zero): the fitted ``step_overhead_s +
        layer_overhead_s x layers + moe_layer_overhead_s x MoE layers`` of the engine on this architecture, or
        (legacy roofline) ``step_overhead_s + tp_sync_overhead_s x log2(TP)``."""
        if self.calibrated:
            c = self._curves[0]
            per_layer = c.layer_overhead_s * self.arch.layers + c.moe_layer_overhead_s * self.arch.moe_layers
            return float(c.step_overhead_s + per_layer)
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
    def activation_gib_per_gpu(self) -> float:
        """Peak activations of the engine's profiling pass per GPU, GiB (0 for SGLang, whose static fraction
        leaves activations outside; :func:`hetplan.perf.engines.activation_gib`)."""
        if self.rules.memory_rule == "static_fraction":
            return 0.0
        s = self.settings
        return activation_gib(self.arch, self.tp, s.max_num_batched_tokens, s.max_num_seqs, s.sampler_bytes_per_logit)

    @cached_property
    def runtime_gib_per_gpu(self) -> float:
        """Non-torch memory per GPU, GiB: the settings' reserve + the TP group's NCCL buffers + CUDA graphs taken
        out of the KV budget (:func:`hetplan.perf.engines.memory_budget`)."""
        s = self.settings
        return s.activation_reserve_gib + comm_buffer_gib(self.tp) + s.cudagraph_reserve_gib

    @cached_property
    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes one token occupies on each GPU."""
        return self.arch.kv_bytes_per_token / (self.arch.kv_shards(self.tp) * self.pp)

    @cached_property
    def kv_free_gib_per_gpu(self) -> float:
        """GiB left for KV cache per GPU under the engine's memory rule (negative when the weights do not fit):
        vLLM ``utilization x visible - weights - activations - reserve``; SGLang ``fraction x (visible - reserve)
        - weights``; TensorRT-LLM ``fraction x (visible - weights - activations - reserve)`` (``engines.py``)."""
        s = self.settings
        visible = visible_memory_gib(self.gpu)
        if self.rules.memory_rule == "static_fraction":
            return s.gpu_memory_utilization * (visible - self.runtime_gib_per_gpu) - self.weights_gib_per_gpu
        return kv_free_gib(
            self.rules, s.gpu_memory_utilization, visible, self.weights_gib_per_gpu, self.activation_gib_per_gpu,
            self.runtime_gib_per_gpu,
        )  # fmt: skip

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
            need = self.weights_gib_per_gpu + self.runtime_gib_per_gpu + self.activation_gib_per_gpu
            visible = visible_memory_gib(self.gpu)
            have = visible * self.settings.gpu_memory_utilization
            raise OutOfMemoryError(
                f"{self.arch.spec.name} ({self.arch.weight_dtype}) does not fit {self.gpu.name} at TP {self.tp}, "
                f"PP {self.pp}",
                f"needs {need:.1f} GiB per GPU for weights, activations and runtime plus KV for {min_tokens} tokens; "
                f"{have:.1f} GiB usable ({visible:g} GiB x {self.settings.gpu_memory_utilization}, "
                f"{self.settings.engine}), KV room {self.kv_capacity_tokens} tokens",
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
        """All-reduce time of one iteration over ``tokens`` tokens: 2 per layer, ring algorithm; a TP group over
        several nodes runs at the slower of the GPU link and the scale-out network (:attr:`network_bytes_per_s`)
        with :data:`~hetplan.perf.links.INTER_NODE_LATENCY_S` per node hop."""
        t = self.tp
        if t == 1:
            return np.zeros_like(np.asarray(tokens, dtype=float))
        message = np.asarray(tokens, dtype=float) * self.arch.d_model * 2.0
        tp_nodes = self.nodes[1]
        if tp_nodes > 1:
            link = min(self.link_bytes_per_s, self.network_bytes_per_s)
            alpha = 2 * (t - 1) * self.eff.allreduce_latency_s + 2 * (tp_nodes - 1) * INTER_NODE_LATENCY_S
            return 2 * self.arch.layers * (alpha + 2 * (t - 1) / t * message / link)
        one = 2 * (t - 1) * self.eff.allreduce_latency_s + 2 * (t - 1) / t * message / self.link_bytes_per_s
        return 2 * self.arch.layers * one

    def pp_handoff_s(self, tokens: ArrayLike) -> np.ndarray:
        """Pipeline hand-offs: p-1 activation transfers of ``tokens * hidden * 2`` bytes, those between stages on
        different nodes (:attr:`nodes`) over the scale-out network (:attr:`network_bytes_per_s`, plus
        :data:`~hetplan.perf.links.INTER_NODE_LATENCY_S`)."""
        if self.pp == 1:
            return np.zeros_like(np.asarray(tokens, dtype=float))
        message = np.asarray(tokens, dtype=float) * self.arch.d_model * 2.0
        crossing = self.nodes[2]
        inside = (self.pp - 1 - crossing) * (self.settings.pp_link_latency_s + message / self.link_bytes_per_s)
        if crossing == 0:
            return inside
        hop = self.settings.pp_link_latency_s + INTER_NODE_LATENCY_S
        across = crossing * (hop + message / self.network_bytes_per_s)
        out: np.ndarray = inside + across
        return out

    def prefill_latency_s(self, prompt_tokens: ArrayLike, batch: ArrayLike = 1) -> np.ndarray:
        """Seconds for one prefill iteration over ``batch`` prompts of ``prompt_tokens`` tokens each (times the
        calibration's TTFT factor, :attr:`correction`)."""
        out: np.ndarray = self._prefill_latency_s(prompt_tokens, batch)
        return out * self.correction[0] if self.correction[0] != 1.0 else out

    def decode_step_latency_s(self, batch: ArrayLike, context_tokens: ArrayLike) -> np.ndarray:
        """Seconds for one decode iteration of ``batch`` sequences holding ``context_tokens`` tokens each (times the
        calibration's TPOT factor, :attr:`correction`)."""
        out: np.ndarray = self._decode_step_latency_s(batch, context_tokens)
        return out * self.correction[1] if self.correction[1] != 1.0 else out

    def _prefill_latency_s(self, prompt_tokens: ArrayLike, batch: ArrayLike = 1) -> np.ndarray:
        s = np.asarray(prompt_tokens, dtype=float)
        b = np.asarray(batch, dtype=float)
        if self.calibrated:
            tokens = b * s
            zero = np.zeros_like(tokens)
            fitted: np.ndarray = step_s(self._rows, zero, zero, tokens, s / 2.0) + self.pp_handoff_s(tokens)
            return fitted.reshape(np.broadcast(s, b).shape)
        flops = self.arch.prefill_flops(s, b)
        compute = flops / (self.tp * self.eff.prefill_mfu * self.peak_flops)
        memory = self.arch.weight_bytes / (self.tp * self.eff.decode_mbu * self.mem_bytes_per_s)
        tokens = b * s
        out: np.ndarray = np.maximum(compute, memory) + self.allreduce_s(tokens) + self.pp_handoff_s(tokens)
        return out + self.overhead_s

    def _decode_step_latency_s(self, batch: ArrayLike, context_tokens: ArrayLike) -> np.ndarray:
        b = np.maximum(np.asarray(batch, dtype=float), 1.0)
        c = np.asarray(context_tokens, dtype=float)
        if self.calibrated:
            zero = np.zeros(np.broadcast(b, c).shape)
            fitted: np.ndarray = step_s(self._rows, b + zero, c + zero, zero, zero) + self.pp_handoff_s(b)
            return fitted.reshape(zero.shape)
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
