"""Profiles built without torch, for tests of everything downstream of the benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hetplan.catalog.loader import find_gpu
from hetplan.catalog.profile import ProfileFile, ProfileMatch, dump_profile


def _measured(name: str, bf16_tflops: float, read_gb_per_s: float, kind: str, allreduce) -> dict[str, Any]:
    measured: dict[str, Any] = {
        "device_kind": kind,
        "device_name": f"test {name}",
        "gemm_tflops": {"bf16": bf16_tflops, "fp16": bf16_tflops},
        "memory_read_gb_per_s": read_gb_per_s,
        "memory_copy_gb_per_s": read_gb_per_s * 0.95,
        "profiled_at": "2026-11-29T00:00:00+00:00",
    }
    if allreduce is not None:
        measured.update(
            {
                "allreduce_bus_gb_per_s": allreduce[0],
                "allreduce_latency_s": allreduce[1],
                "allreduce_gpus": allreduce[2],
            }
        )
    return measured


def make_profile(
    gpu: str = "H100",
    bf16_tflops: float = 700.0,
    read_gb_per_s: float = 3000.0,
    kind: str = "cuda",
    allreduce: tuple[float, float, int] | None = None,
) -> ProfileFile:
    """A profile in the resolved (version 1) form: the catalog entry of ``gpu`` with a measured block."""
    spec = find_gpu(gpu)
    measured = _measured(spec.name, bf16_tflops, read_gb_per_s, kind, allreduce)
    return ProfileFile.model_validate(
        {
            "schema_version": 1,
            "kind": "gpu-profile",
            "gpu": {**spec.model_dump(exclude_none=True), "measured": measured},
            "match": ProfileMatch(catalog_gpu=spec.name, how="test").model_dump(),
            "efficiency_vs_datasheet": {"bf16": round(bf16_tflops / spec.dense_tflops("bf16")[0], 4)},
            "tables": {"gemm": [{"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "tflops": bf16_tflops}]},
            "provenance": {"hetplan_version": "test"},
        }
    )


def make_profile_doc(
    gpu: str | None = "H100",
    bf16_tflops: float = 700.0,
    read_gb_per_s: float = 3000.0,
    kind: str = "cuda",
    allreduce: tuple[float, float, int] | None = None,
    device_name: str | None = None,
) -> dict[str, Any]:
    """A version-2 document as the profiler writes it, filed under ``gpu`` (``None``: matched by device name)."""
    name = device_name or f"test {find_gpu(gpu).name if gpu else 'device'}"
    measured = _measured("", bf16_tflops, read_gb_per_s, kind, allreduce)
    measured["device_name"] = name
    return {
        "schema_version": 2,
        "kind": "gpu-profile",
        "file_under": gpu,
        "device": {"device_kind": kind, "device_name": name, "memory_gib": 80.0, "torch_version": "test"},
        "measured": measured,
        "model_shapes": {
            "name": "Llama-3-8B",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "ffn_size": 14336,
            "gated_mlp": True,
        },
        "tables": {"gemm": [{"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "tflops": bf16_tflops}]},
        "provenance": {"profiler_version": "test", "command": "test", "profiled_at": "t", "timing": "CUDA events"},
        "notes": [],
    }


def write_profile(path: Path, version: int = 2, **kwargs) -> Path:
    """Write a profile file: version 2 (what the profiler writes) or 1 (hetplan 0.1's resolved layout)."""
    if version == 1:
        text = dump_profile(make_profile(**kwargs))
    else:
        text = yaml.safe_dump(make_profile_doc(**kwargs), sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path
