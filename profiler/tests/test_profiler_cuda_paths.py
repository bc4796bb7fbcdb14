"""The CUDA code paths of the profiler (hetplan_profiler), run on the CPU: the pure formulas and parsers, and
``run_profile`` with a fake CUDA runtime (CPU tensors, events timed with ``perf_counter``) so the CUDA-only
branches run without a GPU."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

pytest.importorskip("hetplan_profiler")
torch = pytest.importorskip("torch")

from hetplan_profiler.allreduce import bus_bandwidth_gb_per_s  # noqa: E402
from hetplan_profiler.errors import ProfilerError  # noqa: E402
from hetplan_profiler.run import nvidia_smi_target, parse_nvidia_smi  # noqa: E402


def test_bus_bandwidth_follows_nccl_tests():
    algbw, busbw = bus_bandwidth_gb_per_s(1_000_000_000, 1e-3, 8)
    assert algbw == pytest.approx(1000.0) and busbw == pytest.approx(1750.0)
    assert bus_bandwidth_gb_per_s(2_000_000, 1e-3, 2) == pytest.approx((2.0, 2.0))


def test_nvidia_smi_output_is_parsed_into_numbers():
    assert parse_nvidia_smi("550.54.15, 1980, 2619, 1755, 700.00\n") == {
        "driver": "550.54.15",
        "max_sm_clock_mhz": 1980,
        "max_memory_clock_mhz": 2619,
        "sm_clock_mhz_at_start": 1755,
        "power_limit_w": 700,
    }
    odd = parse_nvidia_smi("550.54.15, [N/A], 2619, [Not Supported], 312.5")
    assert odd["max_sm_clock_mhz"] is None and odd["sm_clock_mhz_at_start"] is None
    assert odd["power_limit_w"] == 312.5 and odd["driver"] == "550.54.15"
    # two GPUs' rows, a message instead of values, nothing: no figures rather than wrong ones
    assert parse_nvidia_smi("550, 1980, 2619, 1755, 700\n550, 1980, 2619, 1755, 700\n") == {}
    assert parse_nvidia_smi("No devices were found") == {}
    assert parse_nvidia_smi("") == {}


def test_nvidia_smi_is_asked_about_the_gpu_torch_uses():
    assert nvidia_smi_target(0, "58bfb0f8-8b5a-b1e1-2f3c-4f6d0a1b2c3d") == "GPU-58bfb0f8-8b5a-b1e1-2f3c-4f6d0a1b2c3d"
    assert nvidia_smi_target(1, "GPU-abc") == "GPU-abc"
    assert nvidia_smi_target(2, None) == "2" and nvidia_smi_target(2, " ") == "2"


def test_missing_or_failing_nvidia_smi_records_nothing(monkeypatch):
    import subprocess

    from hetplan_profiler import run

    monkeypatch.setattr(run.shutil, "which", lambda _: None)
    assert run._nvidia_smi(0, "abc") == {}
    monkeypatch.setattr(run.shutil, "which", lambda _: "/usr/bin/nvidia-smi")

    def fails(*args, **kwargs):
        raise subprocess.CalledProcessError(6, args[0])

    monkeypatch.setattr(run.subprocess, "run", fails)
    assert run._nvidia_smi(0, "abc") == {}


def test_tf32_switch_is_set_and_restored():
    from hetplan_profiler.bench import fp32_matmul_precision

    before = torch.get_float32_matmul_precision()
    with fp32_matmul_precision(torch, "high"):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cuda.matmul.fp32_precision == "tf32"
    assert torch.get_float32_matmul_precision() == before
    with fp32_matmul_precision(torch, "highest"):
        assert not torch.backends.cuda.matmul.allow_tf32
    # the new per-backend switch set elsewhere in the process: the legacy getter would raise; this does not
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    try:
        with fp32_matmul_precision(torch, "high"):
            assert torch.backends.cuda.matmul.allow_tf32
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)


class FakeEvent:
    """``torch.cuda.Event`` stand-in: records ``perf_counter``; ``elapsed_time`` in milliseconds as CUDA's."""

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.at = 0.0

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch):
    """A CUDA runtime over CPU tensors: an 'H200' with compute capability 9.0 and one GPU."""
    calls: dict[str, list] = {"set_device": [], "empty_cache": []}
    props = SimpleNamespace(
        name="NVIDIA H200",
        total_memory=141 * 2**30,
        major=9,
        minor=0,
        multi_processor_count=132,
        L2_cache_size=60 * 2**20,
        uuid="58bfb0f8-8b5a-b1e1-2f3c-4f6d0a1b2c3d",
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls["set_device"].append(str(d)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls["empty_cache"].append(1))
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: calls.setdefault("sleep", []).append(cycles))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None: props)
    empty = torch.empty

    def empty_unpinned(*args, pin_memory=False, **kwargs):  # no pinned allocator on a CPU-only build
        return empty(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", empty_unpinned)
    return calls


def test_cuda_bench_selects_its_device_and_times_in_seconds(fake_cuda):
    from hetplan_profiler.bench import SIZES, Bench

    bench = Bench("cuda:1", SIZES["cpu-quick"])
    assert bench.cuda and fake_cuda["set_device"] == ["cuda:1"]
    timing = bench.time(lambda: time.sleep(2e-3))
    # events count milliseconds: a 2 ms call is 2e-3 s per call, whatever the calls per sample
    assert 1.5e-3 < timing.median_s < 0.05 and timing.calls == 1
    # the stream is held ahead of each sample, for about the time the sample's launches take (capped at 20 ms)
    assert len(fake_cuda["sleep"]) == timing.repeats and all(0 < c <= 0.02 * 2e9 for c in fake_cuda["sleep"])


def fake_cuda_run(monkeypatch):
    from hetplan_profiler import bench as bench_mod
    from hetplan_profiler import run

    tiny = bench_mod.Sizes(
        (32,), (1,), 64, 64, 1 << 20, (32,), (64,), 1, 1 << 20, (), 1, 2, 1e-4, ("bf16", "fp8", "tf32")
    )
    monkeypatch.setitem(run.SIZES, "cuda-quick", tiny)

    class CpuTensorsBench(bench_mod.Bench):
        def __init__(self, device, sizes):
            super().__init__(device, sizes)
            self.device = self.torch.device("cpu")  # tensors on the CPU, the CUDA branches otherwise

    monkeypatch.setattr(run, "Bench", CpuTensorsBench)
    monkeypatch.setattr(run.shutil, "which", lambda _: None)
    return run


def test_cuda_profile_branches_run_end_to_end(fake_cuda, monkeypatch):
    run = fake_cuda_run(monkeypatch)
    doc = run.run_profile(run.ProfileRequest("cuda:0", quick=True))
    m = doc["measured"]
    # the device as torch names it (hetplan matches "NVIDIA H200" to H200-SXM when it reads the file)
    assert m["device_name"] == "NVIDIA H200" and m["device_kind"] == "cuda" and doc["file_under"] is None
    assert doc["device"]["compute_capability"] == "9.0" and doc["device"]["memory_gib"] == 141.0
    # fp8 went through torch._scaled_mm (column-major mat2, float32 scales) and tf32 through the precision switch
    assert {"bf16", "fp8", "tf32"} <= set(m["gemm_tflops"]), doc["notes"]
    assert {r["dtype"] for r in doc["tables"]["gemm"]} == {"bf16", "fp8", "tf32"}
    assert [r["direction"] for r in doc["tables"]["host_link"]] == ["host_to_device", "device_to_host"]
    assert m["host_to_device_gb_per_s"] == doc["tables"]["host_link"][0]["gb_per_s"]
    assert doc["provenance"]["timing"] == "CUDA events" and doc["device"]["l2_cache_mib"] == 60.0
    assert any("all-reduce skipped: 1 GPU visible" in n for n in doc["notes"])
    # copy counts read + write bytes, the reduction the bytes read
    copy, read = (next(r for r in doc["tables"]["memory"] if r["kernel"] == k) for k in ("copy", "read"))
    assert copy["gb_per_s"] == pytest.approx(2 * (1 << 20) / copy["median_s"] / 1e9, rel=1e-2)
    assert read["gb_per_s"] == pytest.approx((1 << 20) / read["median_s"] / 1e9, rel=1e-2)
    # cached memory is handed back before every step
    assert len(fake_cuda["empty_cache"]) >= 6
    assert not any("failed" in n for n in doc["notes"]), doc["notes"]


def test_a_device_torch_cannot_use_is_a_profiler_error(fake_cuda, monkeypatch):
    run = fake_cuda_run(monkeypatch)

    def busy(*args):
        raise RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable")

    monkeypatch.setattr(torch.cuda, "set_device", busy)
    with pytest.raises(ProfilerError, match="torch could not use the device") as info:
        run.run_profile(run.ProfileRequest("cuda:0", quick=True))
    assert "busy or unavailable" in info.value.render()


def test_failed_memory_benchmark_and_empty_messages(fake_cuda, monkeypatch):
    run = fake_cuda_run(monkeypatch)
    original = run.Bench.gemm

    def no_fp8(self, dtype, *args):
        if dtype == "fp8":
            raise RuntimeError()  # no message: still a note, not an IndexError
        return original(self, dtype, *args)

    monkeypatch.setattr(run.Bench, "gemm", no_fp8)
    doc = run.run_profile(run.ProfileRequest("cuda:0", quick=True))
    assert "fp8" not in doc["measured"]["gemm_tflops"]
    assert any(n.startswith("GEMM fp8 64x64x64 failed: RuntimeError") for n in doc["notes"])

    def oom(self):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(run.Bench, "memory", oom)
    with pytest.raises(ProfilerError, match="memory benchmark failed"):
        run.run_profile(run.ProfileRequest("cuda:0", quick=True))
