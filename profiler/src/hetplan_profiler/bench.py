"""Microbenchmarks behind ``hetplan-profile`` / ``hetplan profile`` (PyTorch, imported inside the functions).

Each benchmark builds its tensors once, warms up, picks how many back-to-back calls make one sample (so one sample
lasts at least ``min_sample_s`` and launch gaps do not dominate small kernels), then takes ``repeats`` samples.
On CUDA a sample is timed with CUDA events around the calls; on the CPU with ``time.perf_counter``. Every result
carries the median, the p10/p90 spread and the number of samples; throughputs are computed from the median.

- GEMM (``torch.matmul``; fp8 through ``torch._scaled_mm`` on compute capability >= 8.9): TFLOP/s = 2·M·N·K / t
  over prefill-like shapes (M = thousands of tokens against the model's weight shapes, plus one square shape) and
  decode-like shapes (M = 1...256), whose achieved GB/s (A, B and C bytes / t) is recorded too.
- Memory: a device copy (GB/s = 2 x bytes / t, read + write) and a read-heavy reduction (``torch.sum``, bytes / t)
  on buffers well past the last-level cache.
- Attention (``scaled_dot_product_attention``, GQA as the model has it): causal prefill over several prompt
  lengths (TFLOP/s with the causal half counted) and one-token decode against growing KV lengths at batch 1, a
  quarter of the decode batch and the decode batch (KV GB/s).
- Host <-> device: pinned-memory copies, GB/s (CUDA only).

Sizes: :data:`SIZES` (``cuda``/``cuda-quick`` for GPUs, ``cpu``/``cpu-quick`` so the same code runs in seconds on a
CPU, whose results are labelled as CPU figures).

Source: hetplan's own reconstruction; DESIGN §2 (what the roofline needs) and issue 3.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hetplan_profiler.errors import ProfilerError

TORCH_FIX = (
    "pip install torch (>= 2.3; a CPU build is enough to try the tool: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def require_torch() -> Any:
    """Import torch, or raise :class:`ProfilerError` saying how to install it.

    torch warns on import when numpy is missing; the profiler uses no numpy (nor torch's numpy bridge), so the
    warning is silenced rather than numpy added as a dependency."""
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    try:
        import torch
    except ImportError:
        raise ProfilerError(
            "the hetplan profiler needs PyTorch", "torch is not installed in this environment", TORCH_FIX
        ) from None
    return torch


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` with linear interpolation between closest ranks (numpy's default
    method, so figures are as before this package dropped numpy)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = q / 100 * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Sizes:
    """Problem sizes of one profiling mode (see :data:`SIZES`)."""

    prefill_m: tuple[int, ...]
    decode_m: tuple[int, ...]
    shape_divisor: int
    square: int
    memory_bytes: int
    attention_prefill_tokens: tuple[int, ...]
    attention_decode_kv_tokens: tuple[int, ...]
    attention_decode_batch: int
    host_bytes: int
    allreduce_bytes: tuple[int, ...]
    warmup: int
    repeats: int
    min_sample_s: float
    dtypes: tuple[str, ...]


MIB = 1 << 20
SIZES: dict[str, Sizes] = {
    "cuda": Sizes(
        (2048, 4096, 8192),
        (1, 8, 32, 64, 128, 256),
        1,
        8192,
        4096 * MIB,
        (1024, 4096, 16384),
        (1024, 4096, 16384, 65536),
        16,
        1024 * MIB,
        tuple(8 << (2 * i) for i in range(13)),
        5,
        20,
        2e-3,
        ("bf16", "fp16", "fp8", "tf32", "fp32"),
    ),
    "cuda-quick": Sizes(
        (4096, 8192),
        (1, 16, 64, 256),
        1,
        8192,
        2048 * MIB,
        (2048, 8192),
        (2048, 16384),
        16,
        512 * MIB,
        (8, 64 * 1024, MIB, 16 * MIB, 128 * MIB),
        3,
        10,
        1e-3,
        ("bf16", "fp16", "fp8", "tf32"),
    ),
    "cpu": Sizes(
        (256, 512),
        (1, 8, 32),
        8,
        512,
        128 * MIB,
        (256, 512),
        (512, 2048),
        2,
        0,
        (),
        2,
        5,
        2e-3,
        ("bf16", "fp16", "fp32"),
    ),
    "cpu-quick": Sizes((128,), (1, 16), 16, 256, 32 * MIB, (128,), (256,), 1, 0, (), 1, 3, 1e-3, ("bf16", "fp32")),
}

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "tf32": 4, "fp32": 4}


@contextmanager
def fp32_matmul_precision(torch: Any, precision: str) -> Iterator[None]:
    """Run a block with ``torch.set_float32_matmul_precision(precision)`` (``"high"``: TF32 tensor cores,
    ``"highest"``: IEEE fp32), then restore the previous setting.

    torch 2.9+ keeps a legacy switch (``torch.backends.cuda.matmul.allow_tf32``) and a new one
    (``torch.backends.cuda.matmul.fp32_precision``); reading the legacy one raises once anything in the process has
    set the new one (torch's cuBLAS TF32 check raises the same error when they disagree).
    ``set_float32_matmul_precision`` sets both consistently.
    """
    try:
        previous: str | None = torch.get_float32_matmul_precision()
    except RuntimeError:  # the two switches disagree already: leave them consistent on the way out
        previous = None
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous or "highest")


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median and spread over ``repeats`` samples of ``calls`` back-to-back calls each."""

    median_s: float
    p10_s: float
    p90_s: float
    repeats: int
    calls: int

    @property
    def spread(self) -> float:
        """(p90 - p10) / median."""
        return (self.p90_s - self.p10_s) / self.median_s if self.median_s > 0 else 0.0

    def row(self) -> dict[str, Any]:
        """Table cells of the timing."""
        return {
            "median_s": float(f"{self.median_s:.4g}"),
            "spread": round(self.spread, 4),
            "repeats": self.repeats,
            "calls_per_sample": self.calls,
        }


class Bench:
    """Timing and tensor helpers on one device (``cuda:N`` or ``cpu``)."""

    def __init__(self, device: str, sizes: Sizes) -> None:
        self.torch = require_torch()
        self.device = self.torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.sizes = sizes
        if self.cuda:
            # torch.cuda.Event.record() and synchronize() act on the *current* device's stream: without this,
            # --device cuda:1 would time events on cuda:0 while the kernels run on cuda:1.
            self.torch.cuda.set_device(self.device)

    def sync(self) -> None:
        """Wait for queued device work."""
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time(self, fn: Callable[[], Any]) -> Timing:
        """Warm up ``fn``, size a sample to ``min_sample_s``, then time ``repeats`` samples (see module doc)."""
        s = self.sizes
        for _ in range(max(s.warmup, 1)):
            fn()
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        one = max(time.perf_counter() - start, 1e-7)
        calls = int(min(max(math.ceil(s.min_sample_s / one), 1), 1000))
        samples = []
        for _ in range(s.repeats):
            if self.cuda:
                begin = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                self._hold_stream(calls * one)
                begin.record()
                for _ in range(calls):
                    fn()
                end.record()
                end.synchronize()
                samples.append(begin.elapsed_time(end) / 1e3 / calls)
            else:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples.append((time.perf_counter() - t0) / calls)
        return Timing(percentile(samples, 50), percentile(samples, 10), percentile(samples, 90), len(samples), calls)

    def _hold_stream(self, seconds: float) -> None:
        """Queue a GPU spin of about ``seconds`` (at most 20 ms) ahead of a sample, so the sample's calls are all
        queued by the time it ends and the events time the kernels back to back rather than the Python launch
        rate (a one-token decode GEMM takes ~10 us on an H200, about what launching it takes). The begin event is
        recorded after the spin, so the spin itself is not timed."""
        sleep = getattr(self.torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(int(min(seconds, 0.02) * 2e9))  # cycles; 2 GHz is about the top SM clock of current GPUs

    def dtype(self, name: str) -> Any:
        """torch dtype of a GEMM dtype name (tf32 computes on fp32 tensors)."""
        t = self.torch
        return {"bf16": t.bfloat16, "fp16": t.float16, "tf32": t.float32, "fp32": t.float32}[name]

    def supports_fp8(self) -> str | None:
        """``None`` when fp8 GEMMs can run here, else why not."""
        t = self.torch
        if not self.cuda:
            return "fp8 GEMMs need a CUDA GPU of compute capability 8.9 or newer"
        major, minor = t.cuda.get_device_capability(self.device)
        if (major, minor) < (8, 9):
            return f"compute capability {major}.{minor} has no fp8 tensor cores (needs 8.9+)"
        if not hasattr(t, "_scaled_mm") or not hasattr(t, "float8_e4m3fn"):
            return f"torch {t.__version__} has no torch._scaled_mm"
        return None

    # -- GEMM ---------------------------------------------------------------------------------------------
    def gemm(self, dtype: str, m: int, n: int, k: int) -> Timing:
        """Time one ``(m x k) @ (k x n)`` GEMM in ``dtype`` (``fp8``: e4m3 inputs, bf16 output, unit
        per-tensor scales, fast accumulation as fp8 serving kernels use it)."""
        t = self.torch
        gen = t.Generator(device=self.device).manual_seed(0)
        if dtype == "fp8":
            a = t.randn(m, k, device=self.device, generator=gen).to(t.float8_e4m3fn)
            b = t.randn(n, k, device=self.device, generator=gen).to(t.float8_e4m3fn).t()  # column-major (k x n)
            # per-tensor scales: float32 scalars (any other dtype is refused by _scaled_mm)
            one = t.ones((), device=self.device, dtype=t.float32)

            def run() -> Any:
                return t._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=t.bfloat16, use_fast_accum=True)

            return self.time(run)
        dt = self.dtype(dtype)
        a = t.randn(m, k, device=self.device, generator=gen).to(dt)
        b = t.randn(k, n, device=self.device, generator=gen).to(dt)
        c = t.empty(m, n, device=self.device, dtype=dt)
        with fp32_matmul_precision(t, "high" if dtype == "tf32" else "highest"):
            return self.time(lambda: t.matmul(a, b, out=c))

    # -- memory -------------------------------------------------------------------------------------------
    def release(self) -> None:
        """Hand cached device memory back (between benchmarks, and before the all-reduce processes start)."""
        if self.cuda:
            self.sync()
            self.torch.cuda.empty_cache()

    def memory(self) -> dict[str, Timing]:
        """Device copy and read-only reduction over ``memory_bytes`` float32 buffers."""
        t = self.torch
        n = self.sizes.memory_bytes // 4
        src = t.ones(n, device=self.device, dtype=t.float32)
        dst = t.empty_like(src)
        return {"copy": self.time(lambda: dst.copy_(src)), "read": self.time(lambda: t.sum(src))}

    # -- attention ----------------------------------------------------------------------------------------
    def attention(self, batch: int, q_tokens: int, kv_tokens: int, heads: int, kv_heads: int, head_dim: int) -> Timing:
        """Time ``scaled_dot_product_attention`` in bf16: causal when ``q_tokens == kv_tokens`` (prefill), else
        ``q_tokens`` queries against ``kv_tokens`` keys (decode). GQA runs natively where torch supports it
        (``enable_gqa``), else K/V are expanded to the query heads before timing."""
        t = self.torch
        f = t.nn.functional
        gen = t.Generator(device=self.device).manual_seed(0)
        q = t.randn(batch, heads, q_tokens, head_dim, device=self.device, generator=gen, dtype=t.bfloat16)
        k = t.randn(batch, kv_heads, kv_tokens, head_dim, device=self.device, generator=gen, dtype=t.bfloat16)
        v = t.randn(batch, kv_heads, kv_tokens, head_dim, device=self.device, generator=gen, dtype=t.bfloat16)
        causal = q_tokens == kv_tokens
        try:
            f.scaled_dot_product_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], enable_gqa=True)
            return self.time(lambda: f.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True))
        except TypeError:  # torch < 2.5: no enable_gqa
            rep = heads // kv_heads
            k2, v2 = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            return self.time(lambda: f.scaled_dot_product_attention(q, k2, v2, is_causal=causal))

    # -- host <-> device ----------------------------------------------------------------------------------
    def host_copies(self) -> dict[str, Timing]:
        """Pinned host -> device and device -> host copies of ``host_bytes`` (CUDA only)."""
        t = self.torch
        n = self.sizes.host_bytes
        host = t.empty(n, dtype=t.uint8, pin_memory=True)
        dev = t.empty(n, dtype=t.uint8, device=self.device)
        return {
            "host_to_device": self.time(lambda: dev.copy_(host, non_blocking=True)),
            "device_to_host": self.time(lambda: host.copy_(dev, non_blocking=True)),
        }
