"""Efficiency priors and engine settings of the performance model.

Every constant that no paper pins down lives here with a default and a way to calibrate it:

- ``prefill_mfu`` / ``decode_mbu`` / ``decode_mfu``: achieved fraction of the datasheet's dense TFLOPS and memory
  bandwidth. Defaults were fitted on the measured DGX-A100 Llama-2-70B latencies in Splitwise's data
  (``benchmarks/accuracy.py --fit`` reproduces the fit). Calibrate them for your stack by fitting measured
  latencies the same way and setting ``gpu_overrides``.
- ``step_overhead_s``: fixed framework time per engine iteration (scheduling, sampling, kernel launches); the
  measured A100 data decode at about 45 ms per step at batch 1 on TP4 and TP8 although the bandwidth roofline is
  5-11 ms, so this is never zero.
- ``tp_sync_overhead_s``: extra time per iteration per doubling of TP (inter-process broadcast and
  synchronisation that grows with the number of workers), fitted on the same data.
- ``allreduce_latency_s`` / ``link_efficiency``: α and the achieved fraction of the unidirectional datasheet
  link bandwidth in the ring all-reduce model ``2(t-1)·α + 2(t-1)/t · M / (η · B_link)``.

- ``reference_gemm_efficiency`` / ``reference_memory_efficiency``: the kernel efficiencies (fraction of the
  datasheet) assumed on the system the priors were fitted on; a profiled GPU's measured figures replace the
  datasheet with these divided out of the priors (see ``measured.py``, which says how to calibrate them).

Per-GPU overrides go in ``gpu_overrides`` (``(("H100-SXM", GpuEfficiency(...)),)``, sorted by name).

Source: DESIGN §2 for the model shape; the defaults are hetplan's own calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class GpuEfficiency:
    """Achieved fractions of datasheet peaks and fixed overheads for one GPU type."""

    prefill_mfu: float = 0.668
    decode_mfu: float = 0.45
    decode_mbu: float = 0.675
    step_overhead_s: float = 0.005
    tp_sync_overhead_s: float = 0.0016
    allreduce_latency_s: float = 1.05e-5
    link_efficiency: float = 0.277


@dataclass(frozen=True)
class PerfSettings:
    """Settings of the performance model and of the engine it imitates (vLLM defaults).

    Attributes:
        engine: serving engine the model imitates (``vllm``, ``sglang``, ``trtllm``; :mod:`hetplan.perf.engines`):
            it decides the KV memory rule and which fitted curves apply; ``emit`` deploys that engine.
        engine_version: the engine version the plan targets (informational; empty = the rules' version).
        default: efficiency prior for GPUs without an override.
        gpu_overrides: per GPU name (canonical catalog name) efficiency, e.g. fitted on your own measurements.
        gpu_memory_utilization: the engine's memory fraction: vLLM ``--gpu-memory-utilization`` (of total memory,
            default 0.9), SGLang ``--mem-fraction-static``, TensorRT-LLM ``free_gpu_memory_fraction`` (of what is
            free after weights); :func:`hetplan.perf.engines.kv_free_gib` applies it.
        activation_reserve_gib: per-GPU non-torch memory outside the engine's profiled activations at TP1 (CUDA
            context, cuBLAS workspaces), GiB; the engine's default (:mod:`hetplan.perf.engines`); TP > 1 adds the
            NCCL buffers (:func:`hetplan.perf.engines.comm_buffer_gib`). Calibrate from vLLM's ``non_torch`` log.
        cudagraph_reserve_gib: CUDA-graph memory taken out of the KV budget, GiB: 0 for vLLM 0.12 (graphs are
            captured after the KV cache is sized); vLLM 0.21+ logs "Estimated CUDA graph memory": put it here.
        sampler_bytes_per_logit: bytes per vocabulary entry and sequence of the sampler's profiling pass
            (:data:`hetplan.perf.engines.SAMPLER_BYTES_PER_LOGIT`).
        max_model_len_tokens: the engine's ``--max-model-len`` (prompt + output of one request), tokens; ``None`` =
            the model's context window.
        block_size_tokens: KV block size (vLLM default 16).
        max_num_seqs: cap on the decode batch (vLLM ``--max-num-seqs``).
        max_num_batched_tokens: cap on tokens in one prefill iteration (vLLM ``--max-num-batched-tokens``).
        network_efficiency: achieved share of the NIC bandwidth for prefill->decode KV transfer.
        kv_transfer_base_latency_s: fixed latency per KV transfer (connection setup, NIXL handshake).
        pp_link_latency_s: latency per pipeline-stage hand-off.
        reference_gemm_efficiency: bf16 GEMM TFLOP/s / datasheet assumed on the priors' reference system.
        reference_memory_efficiency: streaming-read GB/s / datasheet assumed on the priors' reference system.
        corrections: a user calibration's corrections (``--perf-calibration``, :class:`PerfCorrection`); empty:
            the shipped curves alone.
        calibration_sha256: SHA-256 of the calibration file the corrections came from (empty without one).
    """

    engine: str = "vllm"
    engine_version: str = ""
    default: GpuEfficiency = field(default_factory=GpuEfficiency)
    gpu_overrides: tuple[tuple[str, GpuEfficiency], ...] = ()
    gpu_memory_utilization: float = 0.9
    activation_reserve_gib: float = 0.35
    cudagraph_reserve_gib: float = 0.0
    sampler_bytes_per_logit: float = 41.2
    max_model_len_tokens: int | None = None
    block_size_tokens: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    network_efficiency: float = 0.7
    kv_transfer_base_latency_s: float = 0.002
    pp_link_latency_s: float = 5e-5
    reference_gemm_efficiency: float = 0.80
    reference_memory_efficiency: float = 0.90
    corrections: tuple[PerfCorrection, ...] = ()
    calibration_sha256: str = ""

    @classmethod
    def for_engine(cls, engine: str, version: str = "") -> PerfSettings:
        """Settings with ``engine``'s defaults for the KV block size, ``max_num_seqs``, the token budget and the
        memory fraction (vLLM keeps the fields' defaults; :mod:`hetplan.perf.engines`).

        Raises:
            InputError: unknown engine.
        """
        from hetplan.perf.engines import engine_rules

        rules = engine_rules(engine)
        if rules.name == "vllm":
            return cls(engine="vllm", engine_version=version)
        return cls(
            engine=rules.name,
            engine_version=version,
            gpu_memory_utilization=rules.memory_fraction,
            block_size_tokens=rules.block_size_tokens,
            max_num_seqs=rules.max_num_seqs,
            max_num_batched_tokens=rules.max_num_batched_tokens,
            activation_reserve_gib=rules.runtime_reserve_gib,
        )

    def correction(self, gpu_name: str, model: str, tp: int, weight_dtype: str) -> PerfCorrection | None:
        """This engine's calibration correction for ``gpu_name``, ``model``, TP ``tp`` and ``weight_dtype``
        (:func:`find_correction`)."""
        if not self.corrections:
            return None
        return find_correction(self.corrections, self.engine, gpu_name, model, tp, weight_dtype)

    def for_gpu(self, gpu_name: str) -> GpuEfficiency:
        """Efficiency for ``gpu_name``: its override if any, else the default prior."""
        for name, eff in self.gpu_overrides:
            if name == gpu_name:
                return eff
        return self.default


@dataclass(frozen=True)
class PerfCorrection:
    """A user calibration's correction of one engine x GPU x model, at one layout or over all layouts
    (``hetplan calibrate-perf``; :mod:`hetplan.perf.user_calibration`).

    Attributes:
        engine, gpu, model: what it applies to (canonical catalog names).
        tp, weight_dtype: the layout it was fitted on; ``tp`` 0 and ``weight_dtype`` ``"*"``: fitted on the model's
            points of every layout (:func:`find_correction` says how each is applied).
        ttft_factor: measured / predicted mean TTFT (shrunk toward 1); multiplies prefill step times (plan,
            simulate) or the closed loop's TTFT (estimate).
        tpot_factor: the same for mean TPOT and decode step times.
        band: ``(confidence, ttft, tpot)`` step slowdowns left after the correction (leave-one-out residuals on the
            user's points), which replace the shipped error band for this engine x GPU; empty when too few points.
    """

    engine: str
    gpu: str
    model: str
    ttft_factor: float
    tpot_factor: float
    band: tuple[tuple[str, float, float], ...] = ()
    tp: int = 0
    weight_dtype: str = "*"

    @property
    def any_layout(self) -> bool:
        """True for an entry fitted over every layout of the model (``tp`` 0, ``weight_dtype`` ``"*"``)."""
        return self.tp == 0 and self.weight_dtype == "*"


def find_correction(
    corrections: tuple[PerfCorrection, ...], engine: str, gpu: str, model: str, tp: int, weight_dtype: str
) -> PerfCorrection | None:
    """The correction for ``engine`` on ``gpu`` serving ``model`` at TP ``tp`` in ``weight_dtype``: the entry of
    that layout, both factors and its band; else the model's all-layouts entry with its TPOT factor only (TTFT
    factor 1, no band); else None (the shipped curves alone).

    Why: with one user point per group applied to the group's other points (``benchmarks/user_calibration.py`` on
    engine_silicon_calibration.csv), a correction of the same layout and dtype moves median |error| TTFT 26.5 % ->
    23.8 %, TPOT 14.5 % -> 10.6 %; one of the same model at other layouts TTFT 26.7 % -> 29.0 % (worse), TPOT
    13.7 % -> 12.0 %."""
    fallback = None
    for c in corrections:
        if c.engine != engine or c.gpu != gpu or c.model != model:
            continue
        if c.tp == tp and c.weight_dtype == weight_dtype:
            return c
        if c.any_layout:
            fallback = PerfCorrection(c.engine, c.gpu, c.model, 1.0, c.tpot_factor)
    return fallback


def engine_settings(
    engine: str,
    version: str = "",
    gpu_memory_utilization: float | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    max_model_len: int | None = None,
) -> PerfSettings:
    """:meth:`PerfSettings.for_engine` with the engine knobs a user sets (``None`` keeps the engine's default).

    Raises:
        InputError: an unknown engine, or a knob out of range, naming the field and its range.
    """
    import math

    from hetplan.errors import InputError

    base = PerfSettings.for_engine(engine, version)
    if gpu_memory_utilization is not None and not (
        math.isfinite(gpu_memory_utilization) and 0 < gpu_memory_utilization <= 1
    ):
        raise InputError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}",
            fix="pass a fraction such as 0.9 (--gpu-memory-utilization / scenario gpu_memory_utilization)",
        )
    for name, value in (
        ("max_num_batched_tokens", max_num_batched_tokens),
        ("max_num_seqs", max_num_seqs),
        ("max_model_len", max_model_len),
    ):
        if value is not None and not 1 <= value <= 1 << 24:
            raise InputError(
                f"{name} must be a whole number in [1, {1 << 24:,}], got {value}",
                fix=f"pass --{name.replace('_', '-')} 1 or more",
            )
    changes: dict[str, object] = {}
    if gpu_memory_utilization is not None:
        changes["gpu_memory_utilization"] = float(gpu_memory_utilization)
    if max_num_batched_tokens is not None:
        changes["max_num_batched_tokens"] = int(max_num_batched_tokens)
    if max_num_seqs is not None:
        changes["max_num_seqs"] = int(max_num_seqs)
    if max_model_len is not None:
        changes["max_model_len_tokens"] = int(max_model_len)
    return replace(base, **changes)  # type: ignore[arg-type]
