"""Run the microbenchmarks on one device and build the profile document (``hetplan-profile``, ``hetplan profile``).

The steps are listed up front (so a progress bar knows the total), run in order, and each adds rows to a table;
the summary figures (``measured``) are taken from the tables: per dtype, the best median TFLOP/s over the
prefill-like GEMM shapes; memory, the copy and read bandwidths; the host link, host -> device; the all-reduce, the
largest message's bus bandwidth and the smallest message's time. The document (schema version 2,
``profile.schema.json``) holds those figures, the tables, the device it ran on (``device``), the model shapes it
was given (``model_shapes``) and the catalog GPU name it was asked to file the figures under (``file_under``,
``--gpu``). Matching the device to a catalog GPU and efficiency against the datasheet are hetplan's, when it reads
the file (``hetplan/catalog/profile.py``, ``profile_match.py``): this package knows no catalog.

Source: hetplan's own reconstruction (issue 3).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from hetplan_profiler import SCHEMA_VERSION, __version__
from hetplan_profiler.bench import DTYPE_BYTES, SIZES, Bench, Sizes, require_torch
from hetplan_profiler.errors import ProfilerError
from hetplan_profiler.schema import check_profile
from hetplan_profiler.shapes import BUILTIN, DEFAULT_MODEL, ModelShape, weight_shapes

Progress = Callable[[str, int, int], None]
T = TypeVar("T")


@dataclass(frozen=True)
class ProfileRequest:
    """What to profile: ``device`` (``cuda``, ``cuda:N`` or ``cpu``), ``quick`` sizes, the model shapes the GEMMs
    and attention use, and an optional catalog GPU name to file the figures under (``gpu``, recorded as
    ``file_under``; hetplan checks it against its catalog when it reads the file). ``command`` and ``tool`` are
    recorded (``provenance.command``, ``measured.profile_source``)."""

    device: str = "cuda:0"
    quick: bool = False
    model: ModelShape = BUILTIN[DEFAULT_MODEL]
    gpu: str | None = None
    command: str = ""
    tool: str = "hetplan-profile"


def resolve_device(device: str) -> tuple[str, str]:
    """(torch device string, kind) for ``--device``; ``cuda`` means ``cuda:0``.

    Raises:
        ProfilerError: an unknown device, or CUDA asked for where torch sees no GPU.
    """
    text = device.strip().lower()
    if text == "cpu":
        return "cpu", "cpu"
    if not re.fullmatch(r"cuda(:\d+)?", text):
        raise ProfilerError(f"--device {device!r} is not a device", fix="pass --device cuda:0 (or cuda:N, or cpu)")
    torch = require_torch()
    if not torch.cuda.is_available():
        raise ProfilerError(
            f"--device {device}: torch sees no CUDA GPU",
            f"torch {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})",
            "run on a GPU node with a CUDA build of torch, or pass --device cpu to test the tool",
        )
    index = int(text.split(":")[1]) if ":" in text else 0
    if index >= torch.cuda.device_count():
        raise ProfilerError(
            f"--device {device}: no such GPU", f"torch sees {torch.cuda.device_count()}", "pick an index below that"
        )
    return f"cuda:{index}", "cuda"


NVIDIA_SMI_FIELDS = (
    ("driver_version", "driver"),
    ("clocks.max.sm", "max_sm_clock_mhz"),
    ("clocks.max.memory", "max_memory_clock_mhz"),
    ("clocks.sm", "sm_clock_mhz_at_start"),
    ("power.limit", "power_limit_w"),
)


def nvidia_smi_target(index: int, uuid: str | None) -> str:
    """The ``nvidia-smi -i`` argument for torch's device ``index``: its UUID when torch knows it (``nvidia-smi``
    numbers GPUs in PCI order and ignores ``CUDA_VISIBLE_DEVICES``, so torch's index can name another GPU), else the
    index."""
    text = (uuid or "").strip()
    if not text:
        return str(index)
    return text if text.upper().startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def parse_nvidia_smi(out: str) -> dict[str, Any]:
    """Fields of ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` output for one GPU: numbers where the
    value is one, ``None`` for ``[N/A]``/``[Not Supported]``; ``{}`` when the output is not one row of the fields."""
    rows = [line for line in out.strip().splitlines() if line.strip()]
    if len(rows) != 1:
        return {}
    values = [v.strip() for v in rows[0].split(",")]
    if len(values) != len(NVIDIA_SMI_FIELDS):
        return {}
    parsed: dict[str, Any] = {}
    for (field, name), value in zip(NVIDIA_SMI_FIELDS, values, strict=True):
        if not value or value.startswith("[") or value.upper() == "N/A":
            parsed[name] = None
        elif field == "driver_version":
            parsed[name] = value
        else:
            try:
                number = float(value)
            except ValueError:
                parsed[name] = None
                continue
            parsed[name] = int(number) if number.is_integer() else number
    return parsed


def _nvidia_smi(index: int, uuid: str | None = None) -> dict[str, Any]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    query = ",".join(field for field, _ in NVIDIA_SMI_FIELDS)
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", nvidia_smi_target(index, uuid)],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return {}
    return parse_nvidia_smi(out)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_info(bench: Bench, torch_device: str) -> dict[str, Any]:
    """Device name, memory, and the versions and clocks the figures depend on."""
    t = bench.torch
    info: dict[str, Any] = {"torch_version": str(t.__version__), "python_version": platform.python_version()}
    if bench.cuda:
        index = bench.device.index or 0
        props = t.cuda.get_device_properties(index)
        info.update(
            {
                "device_kind": "cuda",
                "device_name": props.name,
                "memory_gib": round(props.total_memory / 2**30, 2),
                "compute_capability": f"{props.major}.{props.minor}",
                "multiprocessors": props.multi_processor_count,
                "l2_cache_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 1) or None,
                "gpus_visible": t.cuda.device_count(),
                "cuda_version": t.version.cuda,
                "cudnn_version": t.backends.cudnn.version(),
            }
        )
        uuid = getattr(props, "uuid", None)
        info.update(_nvidia_smi(index, str(uuid) if uuid is not None else None))
    else:
        pages = os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
        info.update(
            {
                "device_kind": "cpu",
                "device_name": _cpu_name(),
                "memory_gib": round(pages * os.sysconf("SC_PAGE_SIZE") / 2**30, 2) if pages else 1.0,
                "cpu_cores": os.cpu_count(),
                "torch_threads": t.get_num_threads(),
                "cuda_version": None,
            }
        )
    return info


def _rate(value: float) -> float:
    return float(f"{value:.4g}")


def plan_steps(req: ProfileRequest, kind: str, sizes: Sizes, gpus_visible: int) -> list[str]:
    """Names of the steps the run will take (for the progress bar's total)."""
    steps = [f"GEMM {d}" for d in sizes.dtypes] + ["decode GEMM", "memory", "attention"]
    if kind == "cuda":
        steps.append("host <-> device")
        if gpus_visible >= 2 and sizes.allreduce_bytes:
            steps.append("all-reduce")
    return steps


def run_profile(req: ProfileRequest, progress: Progress | None = None) -> dict[str, Any]:
    """Measure ``req.device`` and return the profile document (see the module docstring), checked against
    ``profile.schema.json``.

    Raises:
        ProfilerError: torch missing, bad device, a device torch cannot use, no GEMM or no memory figure.
    """
    torch_device, kind = resolve_device(req.device)
    sizes = SIZES[f"{kind}-quick" if req.quick else kind]
    spec = req.model
    try:
        bench = Bench(torch_device, sizes)
        info = device_info(bench, torch_device)
    except RuntimeError as exc:  # a busy, exclusive-mode or failing GPU: a message, not a traceback
        raise ProfilerError(
            f"--device {req.device}: torch could not use the device",
            f"{type(exc).__name__}: {_first_line(exc)}",
            "check nvidia-smi (driver, other processes holding the GPU, compute mode) and run again",
        ) from None
    steps = plan_steps(req, kind, sizes, int(info.get("gpus_visible", 1)))
    done = 0
    tell = progress or (lambda *_: None)
    notes: list[str] = []
    tables: dict[str, list[dict[str, Any]]] = {"gemm": [], "decode_gemm": [], "memory": []}
    best: dict[str, float] = {}

    def step(name: str) -> None:
        # each step starts with the previous step's cached blocks handed back, so one step's buffers do not crowd
        # the next (and the all-reduce processes find the memory free)
        bench.release()
        tell(name, done, len(steps))

    shapes = weight_shapes(spec, sizes.shape_divisor)
    for dtype in sizes.dtypes:
        step(f"GEMM {dtype}")
        why_not = bench.supports_fp8() if dtype == "fp8" else None
        if kind == "cpu" and dtype == "tf32":
            why_not = "tf32 is a CUDA tensor-core mode"
        if why_not:
            notes.append(f"GEMM {dtype} skipped: {why_not}")
        else:
            square = [("square", sizes.square, sizes.square, sizes.square)]
            todo = square + [(name, m, n, k) for m in sizes.prefill_m for name, n, k in shapes]
            for name, m, n, k in todo:
                try:
                    timing = bench.gemm(dtype, m, n, k)
                except (RuntimeError, TypeError, ValueError) as exc:
                    notes.append(f"GEMM {dtype} {m}x{n}x{k} failed: {type(exc).__name__}: {_first_line(exc)}")
                    continue
                tflops = 2 * m * n * k / timing.median_s / 1e12
                best[dtype] = max(best.get(dtype, 0.0), tflops)
                tables["gemm"].append(
                    {"dtype": dtype, "shape": name, "m": m, "n": n, "k": k, "tflops": _rate(tflops), **timing.row()}
                )
        done += 1
    step("decode GEMM")
    decode_dtype = "bf16"
    for m in sizes.decode_m:
        for name, n, k in shapes:
            timed = _attempt(notes, f"decode GEMM {m}x{n}x{k}", bench.gemm, decode_dtype, m, n, k)
            if timed is None:
                continue
            nbytes = (m * k + k * n + m * n) * DTYPE_BYTES[decode_dtype]
            tables["decode_gemm"].append(
                {
                    "dtype": decode_dtype,
                    "shape": name,
                    "m": m,
                    "n": n,
                    "k": k,
                    "tflops": _rate(2 * m * n * k / timed.median_s / 1e12),
                    "gb_per_s": _rate(nbytes / timed.median_s / 1e9),
                    **timed.row(),
                }
            )
    done += 1
    step("memory")
    mem = _attempt(notes, "memory", bench.memory)
    if mem is None:  # the profile cannot stand without its memory figures
        raise ProfilerError(
            "the memory benchmark failed on this device",
            notes[-1],
            "free device memory (other processes?) and run again",
        )
    copy_gb = 2 * sizes.memory_bytes / mem["copy"].median_s / 1e9
    read_gb = sizes.memory_bytes / mem["read"].median_s / 1e9
    for name, value in (("copy", copy_gb), ("read", read_gb)):
        tables["memory"].append(
            {"kernel": name, "buffer_mib": sizes.memory_bytes >> 20, "gb_per_s": _rate(value), **mem[name].row()}
        )
    done += 1
    step("attention")
    heads, kv_heads, head_dim = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim
    if kind == "cpu":
        heads, kv_heads = max(heads // 8, 1), max(kv_heads // 8, 1)
    tables["attention_prefill"] = []
    for s in sizes.attention_prefill_tokens:
        timed = _attempt(notes, f"attention prefill {s}", bench.attention, 1, s, s, heads, kv_heads, head_dim)
        if timed is None:
            continue
        flops = 4 * s * s * heads * head_dim / 2
        tables["attention_prefill"].append(
            {"prompt_tokens": s, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
             "tflops": _rate(flops / timed.median_s / 1e12), **timed.row()}
        )  # fmt: skip
    tables["attention_decode"] = []
    # a batch x KV-length grid (batch 1, a quarter of the decode batch, the decode batch): the kernel-curve fit
    # separates the per-sequence cost from the KV read with it (kernel_tables.py, benchmarks/kernel_curves.py)
    largest = sizes.attention_decode_batch
    for b, kv_len in [(b, kv) for b in sorted({1, max(largest // 4, 1), largest})
                      for kv in sizes.attention_decode_kv_tokens]:  # fmt: skip
        timed = _attempt(
            notes, f"attention decode {b}x{kv_len}", bench.attention, b, 1, kv_len, heads, kv_heads, head_dim
        )
        if timed is None:
            continue
        kv_bytes = 2 * b * kv_heads * kv_len * head_dim * 2
        tables["attention_decode"].append(
            {"batch": b, "kv_tokens": kv_len, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
             "kv_gb_per_s": _rate(kv_bytes / timed.median_s / 1e9), **timed.row()}
        )  # fmt: skip
    done += 1
    measured: dict[str, Any] = {
        "device_kind": kind,
        "device_name": info["device_name"],
        "gemm_tflops": {d: _rate(v) for d, v in best.items()},
        "memory_read_gb_per_s": _rate(read_gb),
        "memory_copy_gb_per_s": _rate(copy_gb),
    }
    if kind == "cuda":
        step("host <-> device")
        host = _attempt(notes, "host <-> device copies", bench.host_copies) or {}
        tables["host_link"] = [
            {"direction": name, "mib": sizes.host_bytes >> 20,
             "gb_per_s": _rate(sizes.host_bytes / timing.median_s / 1e9), **timing.row()}
            for name, timing in host.items()
        ]  # fmt: skip
        if host:
            measured["host_to_device_gb_per_s"] = tables["host_link"][0]["gb_per_s"]
        done += 1
        visible = int(info.get("gpus_visible", 1))
        if "all-reduce" in steps:
            step("all-reduce")
            from hetplan_profiler.allreduce import measure_allreduce

            try:
                rows = measure_allreduce(visible, list(sizes.allreduce_bytes), sizes.warmup, sizes.repeats)
                tables["allreduce"] = [{"gpus": visible, **r} for r in rows]
                measured["allreduce_bus_gb_per_s"] = rows[-1]["busbw_gb_per_s"]
                measured["allreduce_latency_s"] = rows[0]["median_s"]
                measured["allreduce_gpus"] = visible
            except Exception as exc:  # noqa: BLE001 - NCCL failures are recorded, the rest of the profile stands
                notes.append(f"all-reduce skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            done += 1
        else:
            notes.append(f"all-reduce skipped: {visible} GPU visible (needs 2 or more)")
    else:
        notes.append("host <-> device and all-reduce skipped: no GPU (CPU profile)")
    if not best:
        raise ProfilerError("no GEMM ran on this device", "; ".join(notes), "check the torch install and --device")
    tell("done", len(steps), len(steps))
    now = _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
    measured["profiled_at"] = now
    measured["profile_source"] = f"{req.tool} {'--quick ' if req.quick else ''}on {info['device_name']}"
    for dtype, other in (("bf16", "fp16"), ("fp16", "bf16")):
        if dtype not in measured["gemm_tflops"] and other in measured["gemm_tflops"]:
            notes.append(f"GEMM {dtype} not measured: plans in {dtype} use the measured {other} figure")
    if kind == "cpu":
        notes.insert(0, "CPU profile: figures measured on a CPU at small sizes, to test the tool, not a GPU")
    provenance = {
        "profiler_version": __version__,
        "command": req.command or f"{req.tool} --device {req.device}",
        "quick": req.quick,
        "profiled_at": now,
        "timing": "CUDA events" if kind == "cuda" else "time.perf_counter",
        "warmup": sizes.warmup,
        "repeats": sizes.repeats,
    }
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": "gpu-profile",
        "file_under": req.gpu or None,
        "device": {k: v for k, v in info.items() if v is not None},
        "measured": measured,
        "model_shapes": spec.as_dict(),
        "tables": tables,
        "provenance": provenance,
        "notes": notes,
    }
    try:  # plain JSON types only (torch's version is a str subclass YAML cannot write), no NaN or infinity
        doc = json.loads(json.dumps(doc, allow_nan=False))
    except ValueError as exc:
        raise ProfilerError("a measured figure is not a finite number", str(exc), "run the profile again") from None
    check_profile(doc)
    return doc


def _attempt(notes: list[str], what: str, fn: Callable[..., T], *args: Any) -> T | None:
    """``fn(*args)``, or ``None`` with a note when torch raises (a kernel this device or build lacks, out of memory):
    one failed benchmark leaves the rest of the profile standing."""
    try:
        return fn(*args)
    except (RuntimeError, TypeError, ValueError) as exc:
        notes.append(f"{what} failed: {type(exc).__name__}: {_first_line(exc)}")
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else ""
