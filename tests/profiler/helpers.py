"""Profiles built without torch, for tests of everything downstream of the benchmarks."""

from __future__ import annotations

from pathlib import Path

from hetplan.catalog.loader import find_gpu
from hetplan.catalog.profile import ProfileFile, ProfileMatch, dump_profile


def make_profile(
    gpu: str = "H100",
    bf16_tflops: float = 700.0,
    read_gb_per_s: float = 3000.0,
    kind: str = "cuda",
    allreduce: tuple[float, float, int] | None = None,
) -> ProfileFile:
    spec = find_gpu(gpu)
    measured = {
        "device_kind": kind,
        "device_name": f"test {spec.name}",
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


def write_profile(path: Path, **kwargs) -> Path:
    path.write_text(dump_profile(make_profile(**kwargs)), encoding="utf-8")
    return path
