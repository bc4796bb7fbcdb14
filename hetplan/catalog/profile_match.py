"""Matching a measured device to the catalog and building its GPU entry: which catalog GPU a profile's figures
belong to (:func:`match_device`), the entry for a device that matches none (:func:`new_device_spec`, named by
:func:`device_type_name`) and the measured / datasheet efficiency (:func:`efficiency`). The profile reader
(:mod:`hetplan.catalog.profile`) calls these on a version-2 file.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


def match_device(kind: str, name: str, gpu: str | None, catalog: Catalog) -> tuple[GpuSpec | None, str]:
    """The GPU of ``catalog`` a device's figures belong to, and how it was found.

    ``--gpu NAME`` (``file_under``) wins. A CUDA device name becomes the NVIDIA GPU feature discovery label
    (``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``) looked up in hetplan's label table, then the name
    without ``NVIDIA`` in the catalog. A CPU matches nothing.

    Raises:
        InputError: ``gpu`` names no catalog GPU.
    """
    if gpu:
        return catalog.find_gpu(gpu), f"--gpu {gpu}"
    if kind == "cpu":
        return None, "a CPU matches no catalog GPU (pass --gpu NAME to file its figures under one)"
    from hetplan.emit.settings import DEFAULT_GPU_LABELS

    label = re.sub(r"\s+", "-", name.strip())
    for catalog_name, value in sorted(DEFAULT_GPU_LABELS.items()):
        if value.lower() == label.lower():
            return catalog.find_gpu(catalog_name), f"device name {name!r} -> node label {value}"
    stripped = re.sub(r"^(nvidia|tesla)\s+", "", name.strip(), flags=re.I)
    for candidate in (stripped, stripped.split()[0] if stripped else ""):
        if not candidate:
            continue
        try:
            return catalog.find_gpu(candidate), f"device name {name!r} -> catalog name {candidate!r}"
        except InputError:
            continue
    return None, f"device name {name!r} matches no catalog GPU (pass --gpu NAME to name it)"


def device_type_name(kind: str, device_name: str) -> str:
    """Name of the new device type a device that matches no catalog GPU becomes (``CPU-<model>`` for a CPU)."""
    short = re.sub(r"\(R\)|\(TM\)|CPU|@.*$", "", device_name)
    name = ("CPU-" if kind == "cpu" else "") + re.sub(r"[^A-Za-z0-9.]+", "-", short).strip("-")
    return name[:48]


def _sig(value: float) -> float:
    return float(f"{value:.4g}")


def efficiency(gpu: GpuSpec, matched: GpuSpec | None) -> dict[str, float]:
    """Measured / datasheet per dtype and for memory (``memory_read``, ``memory_copy``), when a catalog GPU matched;
    4 significant digits (a CPU against a GPU datasheet is ~1e-4, which 4 decimals would round to 0)."""
    m = gpu.measured
    if matched is None or m is None:
        return {}
    out: dict[str, float] = {}
    for dtype, value in sorted(m.gemm_tflops.items()):
        key = {"tf32": "bf16", "fp32": None}.get(dtype, dtype)
        if key is None:
            continue
        try:
            peak, estimated = matched.dense_tflops(key)
        except KeyError:
            continue
        # tf32 tensor cores run at half the 16-bit dense rate on Ampere and Hopper
        peak = peak / 2 if dtype == "tf32" else peak
        if not estimated:
            out[dtype] = _sig(value / peak)
    out["memory_read"] = _sig(m.memory_read_gb_per_s / matched.hbm_gb_per_s)
    out["memory_copy"] = _sig(m.memory_copy_gb_per_s / matched.hbm_gb_per_s)
    return out


def new_device_spec(name: str, measured: dict[str, Any], memory_gib: float, notes: str) -> GpuSpec:
    """A catalog entry for a device no catalog GPU matches: its measured figures stand in for the datasheet.

    ``interconnect_gb_per_s`` and ``network_gbit_per_s`` are required by the schema but not measured for a single
    device: the all-reduce bus bandwidth (x2, bidirectional) or, failing that, the host link stands in for the
    first, 100 Gbit/s for the second; ``notes`` says so. The vendor is NVIDIA (or AMD) when a CUDA device's name
    says so, else ``measured``. Only measured dtypes get a compute figure (an unmeasured
    bf16 or fp16 is left empty, and :meth:`GpuSpec.dense_tflops` uses the other 16-bit figure for it).
    """
    from hetplan.catalog.schemas import GpuMeasured

    m = GpuMeasured.model_validate(measured)
    link = (m.allreduce_bus_gb_per_s or 0.0) * 2 or m.host_to_device_gb_per_s or m.memory_copy_gb_per_s
    # the vendor as the device names itself (torch reports ROCm devices as "cuda" too): emit deploys NVIDIA only
    device = m.device_name.strip().lower()
    vendor = "measured"
    if m.device_kind == "cuda":
        vendor = "NVIDIA" if device.startswith(("nvidia", "tesla")) else "AMD" if device.startswith("amd") else vendor
    return GpuSpec(
        name=name,
        vendor=vendor,
        arch="CPU" if m.device_kind == "cpu" else "",
        # only what was measured: an unmeasured 16-bit dtype stays empty and GpuSpec.dense_tflops falls back to
        # the other one (the --quick CPU profile measures bf16 only; the full one shows fp16 ~3x apart)
        bf16_dense_tflops=m.gemm_tflops.get("bf16"),
        fp16_dense_tflops=m.gemm_tflops.get("fp16"),
        fp8_dense_tflops=m.gemm_tflops.get("fp8"),
        hbm_gib=memory_gib,
        hbm_gb_per_s=m.memory_read_gb_per_s,
        interconnect_gb_per_s=link,
        network_gbit_per_s=100.0,
        notes=notes,
        measured=m,
    )
