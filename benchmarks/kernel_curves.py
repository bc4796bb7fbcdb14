"""Fit the kernel-level efficiency curves per GPU x engine on measured per-operation latencies.

    python benchmarks/kernel_curves.py      # print every GPU x engine fit and its residuals
    python benchmarks/kernel_curves.py --tables DIR --system SYSTEM --gpu H100-SXM [--any-size] [--out fit.json]
                                            # fit a profiled GPU's tables (hetplan-profile --kernel-tables DIR)

Data: ``../shared/data/measured/kernels/`` (kernel measurements from NVIDIA AIConfigurator (Apache-2.0); README
there): ``<system>/<op family>/<engine>/<version>/<table>.parquet``. Used by ``benchmarks/calibrate_perf.py``,
which ships the result in ``catalogs/perf/<engine>.yaml`` (``gpu_curves``); the package never reads ``../shared``.

Each field below is fitted against the very operator formula of :func:`hetplan.perf.closed_loop.step_s`, with the
hetplan catalog's datasheet peaks (:func:`hetplan.catalog.loader.find_gpu`), so the fitted share means the same
thing in the planner as in the fit:

- ``gemm_max``, ``gemm_half_tokens``, ``mbu`` (``gemm_perf``, bf16 and fp8, n and k from 1,024 to 16,384, the
  fastest kernel of each shape): ``t = max(2 m n k / (peak x gemm_max x m / (m + gemm_half_tokens)), n k bytes /
  (bandwidth x mbu)) + c`` with ``c`` a per-call launch constant (reported, not shipped: the per-layer overhead of
  the end-to-end fit carries it);
- ``kv_mbu`` (``generation_attention_perf``, 16-bit KV, head_dim 128, no window): ``t = c + c_seq x batch + KV
  bytes / (bandwidth x kv_mbu)``;
- ``attention_efficiency`` (``context_attention_perf``, same filter, ISL >= 512): ``t = c + 4 b heads head_dim
  ISL (ISL / 2) / (16-bit peak x attention_efficiency)`` (causal prefill);
- ``allreduce_latency_s``, ``link_efficiency`` (the engine's ``custom_allreduce_perf``, its CUDA-graph variant
  where measured, else NCCL's ``all_reduce`` from ``nccl_perf``; 2 to 8 GPUs, 4 KiB to 256 MiB): ``t = latency +
  2 (n - 1) / n x bytes / (link_efficiency x link)`` with ``link`` half the catalog's bidirectional figure and
  ``bytes`` = ``message_size`` (elements in these tables) x the dtype's element size (:data:`ELEMENT_BYTES`);
- ``moe_efficiency`` (``moe_perf``, balanced routing, MoE-TP 1, EP 1, bf16 and fp8): the median ratio of the
  routed-expert roofline with the GEMM curve above (``touched`` experts, ``tokens x k / touched`` rows each) to
  the measured latency.

``--tables DIR`` fits one system of another tables root the same way: the tables ``hetplan-profile
--kernel-tables DIR`` writes (``DIR/<system>/<family>/hetplan-profile/<version>/<table>.csv``; CSV or parquet), against
the catalog GPU named by ``--gpu``. ``--any-size`` drops the size filters and row minimums (:data:`ANY_SIZE`), for
tables measured at small sizes (a CPU profile tests the path; its figures mean nothing for a GPU).

A family the engine has no table for on a GPU takes the same GPU's table of another engine (vLLM, SGLang,
TensorRT-LLM in that order; recorded in the provenance as ``from``). The fit minimises a soft-L1 loss on log
errors (:func:`calibrate_perf.robust_residual`) by :func:`calibrate_perf.levenberg_marquardt`; deterministic.
Source: hetplan's own reconstruction; measurements: NVIDIA AIConfigurator 0.12.0 (Apache-2.0).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from silicon import SHARED  # noqa: E402

KERNELS = SHARED / "measured" / "kernels"
ATTRIBUTION = "kernel measurements from NVIDIA AIConfigurator (Apache-2.0)"
SYSTEM_GPU = {
    "a100_sxm": "A100-80GB-SXM",
    "h100_sxm": "H100-SXM",
    "h200_sxm": "H200-SXM",
    "b200_sxm": "B200",
    "b300_sxm": "B300",
    "gb200": "GB200",
    "gb300": "GB300",
    "l40s": "L40S",
}
"""Kernel-table systems -> hetplan catalog GPUs (``rtx_pro_6000_server`` has no catalog entry and is left out)."""
ENGINES = ("vllm", "sglang", "trtllm")
PROFILER = "hetplan-profile"
"""The engine folder ``hetplan-profile --kernel-tables`` writes."""
KERNEL_FIELDS = (
    "gemm_max",
    "gemm_half_tokens",
    "mbu",
    "kv_mbu",
    "attention_efficiency",
    "allreduce_latency_s",
    "link_efficiency",
    "moe_efficiency",
)
"""Curve fields the kernel tables fix; the end-to-end fit keeps the others (overheads, queueing)."""
DTYPE_PEAK = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0), "fp8_block": ("fp8", 1.0)}
STRING_COLUMNS = ("framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "attn_dtype",
                  "kv_cache_dtype", "allreduce_dtype", "backend")  # fmt: skip
"""Read as strings from CSV (a version such as ``1.0`` must not become a float)."""


@dataclass(frozen=True)
class Limits:
    """Which rows a fit takes and how many it needs: GEMM n and k range, decode KV bytes, prefill ISL, rows."""

    gemm_nk: tuple[int, int] = (1024, 16384)
    gemm_rows: int = 50
    decode_kv_bytes: float = 1e6
    attention_rows: int = 20
    prefill_isl: int = 512
    allreduce_bytes: tuple[int, int] = (4096, 256 * 2**20)
    allreduce_rows: int = 10


STRICT = Limits()
"""The collected tables' filters (module docstring)."""
ANY_SIZE = Limits((1, 2**40), 1, 0.0, 1, 1, (1, 2**50), 1)
"""Every row, one row enough (``--any-size``): proves the path on small tables, fits nothing a catalog should ship."""
GEMM_BOUNDS = {"gemm_max": (0.2, 1.0), "gemm_half_tokens": (1.0, 4096.0), "mbu": (0.2, 1.0), "c": (1e-7, 1e-4)}


def read_table(path: Path) -> pd.DataFrame:
    """One kernel table, parquet or CSV (string columns as strings, as the parquet tables have them)."""
    if path.suffix == ".csv":
        head = pd.read_csv(path, nrows=0).columns
        return pd.read_csv(path, dtype={c: "str" for c in STRING_COLUMNS if c in head})
    return pd.read_parquet(path)


def table(system: str, family: str, engine: str, name: str, root: Path = KERNELS) -> tuple[pd.DataFrame, str] | None:
    """(the newest ``<name>.parquet`` or ``<name>.csv`` of ``root/system/family/engine``, its version) or None."""
    folder = root / system / family / engine
    if not folder.is_dir():
        return None
    found = sorted([*folder.glob(f"*/{name}.parquet"), *folder.glob(f"*/{name}.csv")],
                   key=lambda p: (p.parent.name, p.suffix == ".parquet"))  # fmt: skip
    if not found:
        return None
    return read_table(found[-1]), found[-1].parent.name


def table_for(system: str, family: str, engine: str, name: str, root: Path = KERNELS
              ) -> tuple[pd.DataFrame, str, str] | None:  # fmt: skip
    """The engine's own table, else another engine's on the same system: (frame, version, engine it came from)."""
    for eng in (engine, *[e for e in ENGINES if e != engine]):
        got = table(system, family, eng, name, root)
        if got is not None:
            return got[0], got[1], eng
    return None


def _fit(model: Callable[[dict[str, float]], np.ndarray], measured: np.ndarray, bounds: dict[str, tuple[float, float]],
         start: dict[str, float]) -> tuple[dict[str, float], np.ndarray]:  # fmt: skip
    """Parameters (inside ``bounds``, log-sigmoid coordinates) minimising the robust log error of ``model``."""
    from calibrate_perf import levenberg_marquardt, robust_residual

    names = list(bounds)
    lo = np.log([bounds[n][0] for n in names])
    hi = np.log([bounds[n][1] for n in names])

    def params(z: np.ndarray) -> dict[str, float]:
        with np.errstate(over="ignore"):  # exp(-z) -> inf far below the bound: the share is 0, as it should be
            share = 1.0 / (1.0 + np.exp(-z))
        return {n: float(v) for n, v in zip(names, np.exp(lo + (hi - lo) * share), strict=True)}

    frac = (np.log([start[n] for n in names]) - lo) / (hi - lo)
    z0 = np.log(frac / (1.0 - frac))

    def res(z: np.ndarray) -> np.ndarray:
        out = robust_residual(np.log(model(params(z)) / measured))
        return np.where(np.isfinite(out), out, 1e3)

    best = params(levenberg_marquardt(res, z0, iterations=80))
    return best, np.log(model(best) / measured)


def residuals(e: np.ndarray) -> dict[str, float]:
    """Median and p90 |relative error| of log ratios, and the rows."""
    rel = np.abs(np.expm1(e))
    return {"median_abs": round(float(np.median(rel)), 4), "p90_abs": round(float(np.percentile(rel, 90)), 4),
            "rows": int(e.size)}  # fmt: skip


def fit_gemm(system: str, engine: str, gpu: Any, root: Path = KERNELS, lim: Limits = STRICT
             ) -> dict[str, Any] | None:  # fmt: skip
    """``gemm_max``, ``gemm_half_tokens``, ``mbu`` (module docstring)."""
    got = table_for(system, "gemm", engine, "gemm_perf", root)
    if got is None:
        return None
    df, version, source = got
    df = df[df["gemm_dtype"].isin(["bfloat16", "fp8"]) & df["n"].between(*lim.gemm_nk) & df["k"].between(*lim.gemm_nk)]
    df = df[np.array([_has_peak(gpu, DTYPE_PEAK[d][0]) for d in df["gemm_dtype"]], dtype=bool)]
    df = df.groupby(["gemm_dtype", "m", "n", "k"], as_index=False)["latency"].min()
    if len(df) < lim.gemm_rows:
        return None
    peak = np.array([gpu.dense_tflops(DTYPE_PEAK[d][0])[0] * 1e12 for d in df["gemm_dtype"]])
    wbytes = np.array([DTYPE_PEAK[d][1] for d in df["gemm_dtype"]])
    m, n, k = (df[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    bw = gpu.hbm_gb_per_s * 1e9
    meas = df["latency"].to_numpy() / 1e3

    def model(p: dict[str, float]) -> np.ndarray:
        eff = p["gemm_max"] * m / (m + p["gemm_half_tokens"])
        out: np.ndarray = np.maximum(2 * m * n * k / (peak * eff), n * k * wbytes / (bw * p["mbu"])) + p["c"]
        return out

    best, e = _fit(model, meas, GEMM_BOUNDS, {"gemm_max": 0.7, "gemm_half_tokens": 64.0, "mbu": 0.7, "c": 5e-6})
    small = m <= 16
    return {
        "values": {k_: best[k_] for k_ in ("gemm_max", "gemm_half_tokens", "mbu")},
        "launch_s": best["c"],
        "table": f"{system}/gemm/{source}/{version}/gemm_perf",
        "residuals": residuals(e),
        "residuals_m_le_16": residuals(e[small]),
    }


def _has_peak(gpu: Any, dtype: str) -> bool:
    try:
        gpu.dense_tflops(dtype)
    except KeyError:
        return False
    return True


def _attention_rows(df: pd.DataFrame) -> pd.DataFrame:
    window = df["window_size"].fillna(0) if "window_size" in df.columns else pd.Series(0, index=df.index)
    kv16 = df["kv_cache_dtype"].isin(["bfloat16", "float16"])
    keep = (df["head_dim"] == 128) & kv16 & (window == 0)
    return (
        df[keep]
        .groupby(["batch_size", "isl", "num_heads", "num_key_value_heads", "step"], as_index=False)["latency"]
        .min()
    )


def fit_decode_attention(system: str, engine: str, gpu: Any, root: Path = KERNELS, lim: Limits = STRICT
             ) -> dict[str, Any] | None:  # fmt: skip
    """``kv_mbu`` (module docstring)."""
    got = table_for(system, "attention", engine, "generation_attention_perf", root)
    if got is None:
        return None
    df, version, source = got
    df = _attention_rows(df)
    b = df["batch_size"].to_numpy(dtype=float)
    kv = b * df["step"].to_numpy(dtype=float) * 2 * df["num_key_value_heads"].to_numpy(dtype=float) * 128 * 2.0
    sel = kv >= lim.decode_kv_bytes
    if sel.sum() < lim.attention_rows:
        return None
    b, kv, meas = b[sel], kv[sel], df["latency"].to_numpy()[sel] / 1e3
    bw = gpu.hbm_gb_per_s * 1e9

    def model(p: dict[str, float]) -> np.ndarray:
        out: np.ndarray = p["c"] + p["c_seq"] * b + kv / (bw * p["kv_mbu"])
        return out

    bounds = {"kv_mbu": (0.1, 1.0), "c": (1e-7, 1e-4), "c_seq": (1e-10, 1e-5)}
    best, e = _fit(model, meas, bounds, {"kv_mbu": 0.7, "c": 5e-6, "c_seq": 1e-8})
    return {
        "values": {"kv_mbu": best["kv_mbu"]},
        "launch_s": best["c"],
        "per_sequence_s": best["c_seq"],
        "table": f"{system}/attention/{source}/{version}/generation_attention_perf",
        "residuals": residuals(e),
    }


def fit_prefill_attention(system: str, engine: str, gpu: Any, root: Path = KERNELS, lim: Limits = STRICT
             ) -> dict[str, Any] | None:  # fmt: skip
    """``attention_efficiency`` (module docstring)."""
    got = table_for(system, "attention", engine, "context_attention_perf", root)
    if got is None:
        return None
    df, version, source = got
    df = _attention_rows(df)
    df = df[df["isl"] >= lim.prefill_isl]
    if len(df) < lim.attention_rows:
        return None
    isl = df["isl"].to_numpy(dtype=float)
    flops = 4.0 * df["batch_size"].to_numpy(dtype=float) * df["num_heads"].to_numpy(dtype=float) * 128 * isl * isl / 2
    meas = df["latency"].to_numpy() / 1e3
    half = gpu.dense_tflops("bf16")[0] * 1e12 if _has_peak(gpu, "bf16") else gpu.dense_tflops("fp16")[0] * 1e12

    def model(p: dict[str, float]) -> np.ndarray:
        out: np.ndarray = p["c"] + flops / (half * p["attention_efficiency"])
        return out

    bounds = {"attention_efficiency": (0.02, 1.0), "c": (1e-7, 1e-3)}
    best, e = _fit(model, meas, bounds, {"attention_efficiency": 0.4, "c": 1e-5})
    return {
        "values": {"attention_efficiency": best["attention_efficiency"]},
        "launch_s": best["c"],
        "table": f"{system}/attention/{source}/{version}/context_attention_perf",
        "residuals": residuals(e),
    }


ELEMENT_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0, "int8": 1.0, "fp8": 1.0}
"""Bytes per element of the communication tables' dtypes: their ``message_size`` counts elements, not bytes (the
NCCL table's ``int8`` rows of one ``message_size`` run 1.5x faster than its ``half`` rows, and 8-GPU H200 ``half``
all-reduce reaches a bus bandwidth of about 460 GB/s read as elements, an implausible 230 GB/s read as bytes).
Read as bytes, the fitted ``link_efficiency`` came out half the true one and a TP8 prefill step's all-reduces
twice too slow."""


def message_element_bytes(dtypes: pd.Series, engine: str) -> np.ndarray:
    """Bytes per counted unit of ``message_size`` for each row: the element size of its dtype
    (:data:`ELEMENT_BYTES`; 2 for an unknown dtype), except 1 for ``hetplan-profile`` tables, which count bytes."""
    if engine == PROFILER:
        return np.ones(len(dtypes))
    return np.array([ELEMENT_BYTES.get(str(d).lower(), 2.0) for d in dtypes], dtype=float)


def fit_allreduce(system: str, engine: str, gpu: Any, root: Path = KERNELS, lim: Limits = STRICT
                  ) -> dict[str, Any] | None:  # fmt: skip
    """``allreduce_latency_s``, ``link_efficiency`` (module docstring)."""
    got = table(system, "comm", engine, "custom_allreduce_perf", root)
    label = None
    if got is not None:
        df, version = got
        if "backend" in df.columns and df["backend"].astype(str).str.endswith("graph").any():
            df = df[df["backend"].astype(str).str.endswith("graph")]
        label = f"{system}/comm/{engine}/{version}/custom_allreduce_perf"
    else:
        got = table(system, "comm", "nccl", "nccl_perf", root)
        if got is None:
            return None
        df, version = got
        df = df[(df["op_name"] == "all_reduce") & (df["nccl_dtype"] == "half")]
        label = f"{system}/comm/nccl/{version}/nccl_perf (all_reduce)"
    dtype_col = "allreduce_dtype" if "allreduce_dtype" in df.columns else "nccl_dtype"
    df = df.assign(bytes=df["message_size"].to_numpy(dtype=float) * message_element_bytes(df[dtype_col], engine))
    df = df[df["bytes"].between(*lim.allreduce_bytes) & df["num_gpus"].between(2, 8)]
    if len(df) < lim.allreduce_rows:
        return None
    n = df["num_gpus"].to_numpy(dtype=float)
    size = df["bytes"].to_numpy(dtype=float)
    meas = df["latency"].to_numpy() / 1e3
    link = gpu.interconnect_gb_per_s / 2.0 * 1e9

    def model(p: dict[str, float]) -> np.ndarray:
        out: np.ndarray = p["allreduce_latency_s"] + 2 * (n - 1) / n * size / (p["link_efficiency"] * link)
        return out

    bounds = {"allreduce_latency_s": (1e-6, 5e-4), "link_efficiency": (0.05, 1.5)}
    best, e = _fit(model, meas, bounds, {"allreduce_latency_s": 1e-5, "link_efficiency": 0.6})
    return {"values": best, "table": label, "residuals": residuals(e)}


def fit_moe(system: str, engine: str, gpu: Any, gemm: dict[str, float], root: Path = KERNELS
            ) -> dict[str, Any] | None:  # fmt: skip
    """``moe_efficiency`` against the GEMM curve ``gemm`` (module docstring)."""
    got = table_for(system, "moe", engine, "moe_perf", root)
    if got is None:
        return None
    df, version, source = got
    keep = (df["distribution"] == "balanced") & (df["moe_tp_size"] == 1) & (df["moe_ep_size"] == 1)
    df = df[keep & df["moe_dtype"].isin(list(DTYPE_PEAK))]
    df = df[np.array([_has_peak(gpu, DTYPE_PEAK[d][0]) for d in df["moe_dtype"]], dtype=bool)]
    df = df.groupby(["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts"], as_index=False)[
        "latency"
    ].min()
    if len(df) < 20:
        return None
    t = df["num_tokens"].to_numpy(dtype=float)
    k = df["topk"].to_numpy(dtype=float)
    e = df["num_experts"].to_numpy(dtype=float)
    params = 3.0 * df["hidden_size"].to_numpy(dtype=float) * df["inter_size"].to_numpy(dtype=float)
    peak = np.array([gpu.dense_tflops(DTYPE_PEAK[d][0])[0] * 1e12 for d in df["moe_dtype"]])
    wbytes = np.array([DTYPE_PEAK[d][1] for d in df["moe_dtype"]])
    touched = e * (1.0 - (1.0 - k / e) ** t)
    m_exp = t * k / touched
    eff = gemm["gemm_max"] * m_exp / (m_exp + gemm["gemm_half_tokens"])
    roof = np.maximum(
        2 * params * k * t / (peak * eff), params * touched * wbytes / (gpu.hbm_gb_per_s * 1e9 * gemm["mbu"])
    )
    log_ratio = np.log(roof / (df["latency"].to_numpy() / 1e3))
    value = float(np.exp(np.median(log_ratio)))
    return {
        "values": {"moe_efficiency": min(max(value, 0.05), 2.0)},
        "table": f"{system}/moe/{source}/{version}/moe_perf",
        "residuals": residuals(log_ratio - np.log(value)),
    }


def fit_system(system: str, engine: str, gpu: Any, root: Path = KERNELS, lim: Limits = STRICT
               ) -> dict[str, Any] | None:  # fmt: skip
    """``{"values": {field: value}, "provenance": {...}}`` of one system x engine under ``root``, or None when no
    family has enough rows (``lim``)."""
    values: dict[str, float] = {}
    prov: dict[str, Any] = {}
    gemm = fit_gemm(system, engine, gpu, root, lim)
    parts: list[tuple[str, dict[str, Any] | None]] = [
        ("gemm", gemm),
        ("decode_attention", fit_decode_attention(system, engine, gpu, root, lim)),
        ("prefill_attention", fit_prefill_attention(system, engine, gpu, root, lim)),
        ("allreduce", fit_allreduce(system, engine, gpu, root, lim)),
    ]
    if gemm is not None:
        parts.append(("moe", fit_moe(system, engine, gpu, gemm["values"], root)))
    for name, part in parts:
        if part is None:
            continue
        values.update(part["values"])
        prov[name] = {k_: (round(v, 9) if isinstance(v, float) else v) for k_, v in part.items()
                      if k_ != "values"}  # fmt: skip
    return {"values": values, "provenance": prov} if values else None


@lru_cache(maxsize=1)
def fit_all() -> dict[str, dict[str, dict[str, Any]]]:
    """``{engine: {gpu: {"values": {field: value}, "provenance": {...}}}}`` for every system with a catalog GPU."""
    from hetplan.catalog.loader import find_gpu

    out: dict[str, dict[str, dict[str, Any]]] = {e: {} for e in ENGINES}
    for system, gpu_name in SYSTEM_GPU.items():
        if not (KERNELS / system).is_dir():
            continue
        gpu = find_gpu(gpu_name)
        for engine in ENGINES:
            fit = fit_system(system, engine, gpu)
            if fit is not None:
                out[engine][gpu_name] = fit
    return out


def fit_tables(root: Path, system: str, gpu_name: str, engine: str = PROFILER, lim: Limits = STRICT
               ) -> dict[str, Any]:  # fmt: skip
    """Fit the tables of ``root/system`` (``hetplan-profile --kernel-tables``) against catalog GPU ``gpu_name``:
    ``{"system", "gpu", "engine", "values", "provenance"}``.

    Raises:
        SystemExit: (a one-line ``Error``) no such folder, an unknown GPU, or no family with enough rows.
    """
    from hetplan.catalog.loader import find_gpu

    if not (root / system).is_dir():
        have = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise SystemExit(f"Error: --tables {root}: no system folder {system!r} (--system; there: {have or 'none'})")
    try:
        gpu = find_gpu(gpu_name)
    except Exception as exc:  # noqa: BLE001 - the catalog's message names the GPU and the choices
        raise SystemExit(f"Error: --gpu {gpu_name}: {str(exc).splitlines()[0]}") from None
    fit = fit_system(system, engine, gpu, root, lim)
    if fit is None:
        raise SystemExit(f"Error: --tables {root}/{system}: no table has enough rows to fit (pass --any-size for "
                         "small tables)")  # fmt: skip
    return {"system": system, "gpu": gpu.name, "engine": engine, **fit}


def _print(engine: str, gpu: str, f: dict[str, Any]) -> None:
    vals = "  ".join(f"{k}={v:.4g}" for k, v in f["values"].items())
    res = "  ".join(f"{k}:{p['residuals']['median_abs']:.1%}" for k, p in f["provenance"].items())
    print(f"{engine:7s} {gpu:14s} {vals}\n{'':23s}median |residual| {res}")


def main(argv: list[str] | None = None) -> int:
    """Print every fit, or (``--tables``) the fit of one profiled system, written as JSON with ``--out``."""
    import argparse
    import json

    ap = argparse.ArgumentParser(description="Fit kernel-level efficiency curves on kernel tables.")
    ap.add_argument("--tables", type=Path, help="another tables root (hetplan-profile --kernel-tables DIR)")
    ap.add_argument("--system", help="the system folder under --tables (default: the only one there)")
    ap.add_argument("--gpu", help="catalog GPU whose datasheet peaks the fit uses (needed with --tables)")
    ap.add_argument("--engine", default=PROFILER, help=f"engine folder under --tables (default {PROFILER})")
    ap.add_argument("--any-size", action="store_true", help="no size filters or row minimums (small tables)")
    ap.add_argument("--out", type=Path, help="with --tables: write the fit here as JSON")
    args = ap.parse_args(argv)
    if args.tables is None:
        if args.system or args.gpu or args.any_size or args.out:
            raise SystemExit("Error: --system, --gpu, --any-size and --out go with --tables DIR")
        for engine, by_gpu in fit_all().items():
            for gpu, f in by_gpu.items():
                _print(engine, gpu, f)
        print(ATTRIBUTION)
        return 0
    if not args.gpu:
        raise SystemExit("Error: --tables needs --gpu NAME (the catalog GPU whose peaks the fit divides by)")
    system = args.system
    if system is None:
        found = sorted(p.name for p in args.tables.iterdir() if p.is_dir()) if args.tables.is_dir() else []
        if len(found) != 1:
            raise SystemExit(f"Error: --tables {args.tables}: pass --system (folders there: {found or 'none'})")
        system = found[0]
    fit = fit_tables(args.tables, system, args.gpu, args.engine, ANY_SIZE if args.any_size else STRICT)
    _print(args.engine, fit["gpu"], fit)
    if args.out is not None:
        args.out.write_text(json.dumps(fit, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
