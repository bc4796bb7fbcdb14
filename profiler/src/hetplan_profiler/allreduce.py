"""NCCL all-reduce bus bandwidth and latency across the GPUs of one node (torch.distributed, spawned processes).

One process per GPU joins a NCCL process group over a local TCP rendezvous; for each message size every rank
all-reduces a bf16 buffer after warm-up, timed with CUDA events between barriers; rank 0 writes the medians to a
JSON file the parent reads. Bandwidth follows nccl-tests: algorithm bandwidth = bytes / t, bus bandwidth =
algbw x 2(n-1)/n, the figure the ring model's link term needs (hetplan's ``hetplan.perf.latency``); latency is the
smallest message's time.

Source: nccl-tests' bandwidth definitions (PERFORMANCE.md); hetplan's own reconstruction otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from hetplan_profiler.bench import require_torch


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bus_bandwidth_gb_per_s(nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algorithm, bus) bandwidth in GB/s of an all-reduce of ``nbytes`` over ``world`` ranks taking ``seconds``
    (nccl-tests: algbw = bytes / t, busbw = algbw x 2(n-1)/n)."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * 2 * (world - 1) / world


def _worker(rank: int, world: int, port: int, sizes: list[int], warmup: int, repeats: int, out: str) -> None:
    torch = require_torch()
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    # device_id binds the group to this rank's GPU (barrier() would otherwise guess the device and warn); the
    # timeout turns a stuck rendezvous or collective into an error the parent records instead of a hang
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=300),
        device_id=torch.device(f"cuda:{rank}"),
    )
    rows = []
    try:
        for size in sizes:
            n = max(size // 2, 1)
            buf = torch.ones(n, dtype=torch.bfloat16, device=f"cuda:{rank}")
            for _ in range(warmup):
                dist.all_reduce(buf)
            torch.cuda.synchronize()
            samples = []
            for _ in range(repeats):
                dist.barrier()
                begin = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                begin.record()
                dist.all_reduce(buf)
                end.record()
                end.synchronize()
                samples.append(begin.elapsed_time(end) / 1e3)
            samples.sort()
            median = samples[len(samples) // 2]
            nbytes = n * 2
            algbw, busbw = bus_bandwidth_gb_per_s(nbytes, median, world)
            rows.append(
                {
                    "bytes": nbytes,
                    "median_s": float(f"{median:.4g}"),
                    "p10_s": float(f"{samples[len(samples) // 10]:.4g}"),
                    "p90_s": float(f"{samples[min(len(samples) - 1, (9 * len(samples)) // 10)]:.4g}"),
                    "algbw_gb_per_s": round(algbw, 3),
                    "busbw_gb_per_s": round(busbw, 3),
                }
            )
        if rank == 0:
            Path(out).write_text(json.dumps(rows), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def measure_allreduce(world: int, sizes: list[int], warmup: int, repeats: int) -> list[dict[str, Any]]:
    """All-reduce rows (bytes, median_s, p10_s, p90_s, algbw/busbw GB/s) over ``world`` local GPUs.

    Raises:
        RuntimeError: NCCL or the spawned processes failed (the caller records it and goes on).
    """
    torch = require_torch()
    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        raise RuntimeError("this torch build has no NCCL backend")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "allreduce.json")
        mp.spawn(_worker, args=(world, _free_port(), sizes, warmup, repeats, out), nprocs=world, join=True)
        rows: list[dict[str, Any]] = json.loads(Path(out).read_text(encoding="utf-8"))
    return rows
