"""The profile's measurements as kernel tables (``hetplan-profile --kernel-tables DIR``).

The kernel tables are the per-operation latency tables hetplan's kernel-curve fit reads
(``benchmarks/kernel_curves.py``; NVIDIA AIConfigurator's schema): one row per timed call, latency in
milliseconds. This module writes the rows the profile already measured in that schema, so a profiled GPU is fitted
by the same code as the collected systems:

- ``gemm/hetplan-profile/<version>/gemm_perf.csv``: the prefill and decode GEMM rows (``m``, ``n``, ``k``,
  ``gemm_dtype`` spelled as the tables spell it: ``bfloat16``, ``float16``, ``fp8``, ``float32``, ``tf32``);
- ``attention/.../context_attention_perf.csv``: causal prefill, ``batch_size`` 1, ``isl`` = prompt tokens,
  ``step`` 0;
- ``attention/.../generation_attention_perf.csv``: one-token decode, ``isl`` 1, ``step`` = KV tokens, over the
  decode batches;
- ``comm/.../custom_allreduce_perf.csv``: the NCCL all-reduce (``backend`` ``nccl``, ``message_size`` in bytes),
  only where two or more GPUs were measured (one GPU has no all-reduce: no file, and a note says so).

Everything sits under ``DIR/<system>/<family>/hetplan-profile/<profiler version>/``; ``<system>`` is ``--system``
or the device name in lower case with ``_`` for anything but letters and digits. The files are CSV only (the
profiler needs neither pandas nor pyarrow; the fit reads CSV as well as parquet), written with a fixed column
order and number format, so the same profile gives byte-identical files. ``pandas.read_csv`` reads them back with
the parquet tables' dtypes (strings, ``int64``, ``float64``).

Source: hetplan's own reconstruction; column meanings from the kernel tables' README (AIConfigurator 0.12.0,
Apache-2.0). Issue 30 item 5.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from hetplan_profiler import __version__
from hetplan_profiler.errors import ProfilerError

FRAMEWORK = "hetplan-profile"
HEAD = ("framework", "version", "device", "op_name", "kernel_source")
ATTENTION = (*HEAD, "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "beam_width", "attn_dtype",
             "kv_cache_dtype", "step", "window_size", "latency")  # fmt: skip
COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm_perf": (*HEAD, "gemm_dtype", "m", "n", "k", "latency"),
    "context_attention_perf": ATTENTION,
    "generation_attention_perf": ATTENTION,
    "custom_allreduce_perf": (*HEAD, "allreduce_dtype", "num_gpus", "message_size", "latency", "backend"),
}
"""Columns of each table, in the collected tables' order (``latency`` in ms; ``message_size`` in bytes)."""
FAMILY = {
    "gemm_perf": "gemm",
    "context_attention_perf": "attention",
    "generation_attention_perf": "attention",
    "custom_allreduce_perf": "comm",
}
STRING_COLUMNS = frozenset(HEAD) | {"gemm_dtype", "attn_dtype", "kv_cache_dtype", "allreduce_dtype", "backend"}
FLOAT_COLUMNS = frozenset({"latency"})
DTYPE_NAME = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8", "fp32": "float32", "tf32": "tf32"}
SDPA = "torch.nn.functional.scaled_dot_product_attention"


def system_name(device_name: str) -> str:
    """The kernel-table system folder for a device name: lower case, runs of other characters as ``_``."""
    return re.sub(r"[^a-z0-9]+", "_", device_name.lower()).strip("_") or "device"


def kernel_rows(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The profile document's tables as kernel-table rows: ``{table name: [row]}``, a table with no rows left out.

    Rows follow :data:`COLUMNS`; latency is the median seconds x 1e3 (ms)."""
    device = str(doc["device"]["device_name"])
    tables = doc.get("tables", {})

    def head(op: str, source: str) -> dict[str, Any]:
        return {"framework": FRAMEWORK, "version": __version__, "device": device, "op_name": op,
                "kernel_source": source}  # fmt: skip

    out: dict[str, list[dict[str, Any]]] = {}
    gemm = [
        {**head("gemm", "torch._scaled_mm" if r["dtype"] == "fp8" else "torch.matmul"),
         "gemm_dtype": DTYPE_NAME[r["dtype"]], "m": r["m"], "n": r["n"], "k": r["k"], "latency": r["median_s"] * 1e3}
        for name in ("gemm", "decode_gemm") for r in tables.get(name, [])
    ]  # fmt: skip
    attn = {"beam_width": 1, "attn_dtype": "bfloat16", "kv_cache_dtype": "bfloat16"}
    context = [
        {**head("context_attention", SDPA), "batch_size": 1, "isl": r["prompt_tokens"], "num_heads": r["heads"],
         "num_key_value_heads": r["kv_heads"], "head_dim": r["head_dim"], **attn, "step": 0, "window_size": 0,
         "latency": r["median_s"] * 1e3}
        for r in tables.get("attention_prefill", [])
    ]  # fmt: skip
    generation = [
        {**head("generation_attention", SDPA), "batch_size": r["batch"], "isl": 1, "num_heads": r["heads"],
         "num_key_value_heads": r["kv_heads"], "head_dim": r["head_dim"], **attn, "step": r["kv_tokens"],
         "window_size": 0, "latency": r["median_s"] * 1e3}
        for r in tables.get("attention_decode", [])
    ]  # fmt: skip
    allreduce = [
        {**head("all_reduce", "torch.distributed.all_reduce"), "allreduce_dtype": "bfloat16", "num_gpus": r["gpus"],
         "message_size": r["bytes"], "latency": r["median_s"] * 1e3, "backend": "nccl"}
        for r in tables.get("allreduce", [])
    ]  # fmt: skip
    for name, rows in (("gemm_perf", gemm), ("context_attention_perf", context),
                       ("generation_attention_perf", generation), ("custom_allreduce_perf", allreduce)):  # fmt: skip
        if rows:
            out[name] = rows
    return out


def table_paths(root: Path, system: str) -> dict[str, Path]:
    """Where each table goes: ``root/<system>/<family>/hetplan-profile/<version>/<table>.csv``."""
    return {name: root / system / FAMILY[name] / FRAMEWORK / __version__ / f"{name}.csv" for name in COLUMNS}


def csv_text(name: str, rows: list[dict[str, Any]]) -> str:
    """One table as CSV text: header in :data:`COLUMNS` order, latency with 6 significant digits."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS[name])
    for row in rows:
        writer.writerow([f"{float(row[c]):.6g}" if c in FLOAT_COLUMNS else row[c] for c in COLUMNS[name]])
    return buf.getvalue()


def check_kernel_tables(root: Path, system: str, force: bool) -> None:
    """Refuse before measuring: ``root`` is a file, or the tables exist and ``force`` is not set.

    Raises:
        ProfilerError: the problem and the fix.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", system):
        raise ProfilerError(f"--system {system!r} is not a folder name", fix="use letters, digits, '_', '.', '-'")
    if root.exists() and not root.is_dir():
        raise ProfilerError(f"--kernel-tables {root} is a file", fix="give a folder")
    taken = [p for p in table_paths(root, system).values() if p.exists()]
    if taken and not force:
        raise ProfilerError(
            f"--kernel-tables: {taken[0]} already exists", "nothing is overwritten unless asked", "pass --force"
        )


def write_kernel_tables(doc: dict[str, Any], root: Path, system: str | None = None, force: bool = False) -> list[Path]:
    """Write the profile's kernel tables (:func:`kernel_rows`) under ``root`` as CSV; return the paths written.

    Each file is written to a temporary name and renamed; all texts are built before the first is written.

    Raises:
        ProfilerError: see :func:`check_kernel_tables`.
    """
    system = system or system_name(str(doc["device"]["device_name"]))
    check_kernel_tables(root, system, force)
    paths = table_paths(root, system)
    texts = {paths[name]: csv_text(name, rows) for name, rows in kernel_rows(doc).items()}
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return list(texts)
