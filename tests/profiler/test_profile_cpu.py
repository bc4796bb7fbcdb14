"""End-to-end profiling on the CPU at tiny sizes (needs torch), and CUDA-only checks (skipped without a GPU)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hetplan.catalog.profile import load_profile
from hetplan.cli.main import app
from tests.conftest import EXAMPLES

torch = pytest.importorskip("torch")

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def invoke(*args):
    return runner.invoke(app, list(map(str, args)), env=ENV)


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("prof") / "p.yaml"
    res = invoke("profile", "--device", "cpu", "--quick", "--out", path)
    assert res.exit_code == 0, res.output
    return path, res


def test_cpu_profile_end_to_end(cpu_profile):
    path, res = cpu_profile
    prof = load_profile(path)
    m = prof.gpu.measured
    assert m.device_kind == "cpu" and prof.is_cpu
    assert prof.match.catalog_gpu is None and prof.gpu.name.startswith("CPU-")
    assert set(m.gemm_tflops) == {"bf16", "fp32"} and all(v > 0 for v in m.gemm_tflops.values())
    # fp16 is not measured by --quick on a CPU: not copied from bf16, and the profile says what plans use
    assert prof.gpu.fp16_dense_tflops is None and prof.gpu.bf16_dense_tflops == m.gemm_tflops["bf16"]
    assert "GEMM fp16 not measured: plans in fp16 use the measured bf16 figure" in prof.notes
    assert m.memory_read_gb_per_s > 0 and m.memory_copy_gb_per_s > 0
    tables = prof.tables
    assert {"gemm", "decode_gemm", "memory", "attention_prefill", "attention_decode"} <= set(tables)
    assert {r["m"] for r in tables["decode_gemm"]} == {1, 16}
    for row in tables["gemm"]:
        assert row["tflops"] > 0 and row["median_s"] > 0 and row["repeats"] == 3
        # the best prefill shape is the summary figure
    assert max(r["tflops"] for r in tables["gemm"] if r["dtype"] == "bf16") == m.gemm_tflops["bf16"]
    assert any("CPU profile" in n for n in prof.notes)
    assert prof.provenance["timing"] == "time.perf_counter" and prof.provenance["torch_version"] == torch.__version__
    assert "(CPU)" in res.stdout


def test_cpu_profile_loads_in_plan(cpu_profile):
    path, _ = cpu_profile
    res = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--profile", path, "--json", "--no-analysis")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert any("matched no catalog GPU" in w for w in doc["warnings"])
    assert doc["scenario"]["profiles"][0]["device_kind"] == "cpu"


def test_cpu_profile_filed_under_a_gpu_says_it_is_a_cpu(tmp_path):
    path = tmp_path / "h100.yaml"
    res = invoke("profile", "--device", "cpu", "--quick", "--gpu", "H100", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["gpu"]["name"] == "H100-SXM" and doc["match"]["how"] == "--gpu H100"
    assert 0 < doc["efficiency_vs_datasheet"]["bf16"] < 0.01  # a CPU against an H100 datasheet
    path.write_text(json.dumps(doc), encoding="utf-8")
    plan = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--profile", path, "--json", "--no-analysis")
    assert plan.exit_code == 0, plan.output
    out = json.loads(plan.stdout)
    assert "H100-SXM" not in out["gpus_used"]
    assert any("a CPU's figures, not a H100-SXM's" in w for w in out["warnings"])


def test_profile_refuses_to_overwrite_and_bad_devices(cpu_profile):
    path, _ = cpu_profile
    res = invoke("profile", "--device", "cpu", "--quick", "--out", path)
    assert res.exit_code == 2 and "--force" in res.output
    res = invoke("profile", "--device", "tpu")
    assert res.exit_code == 2 and "--device cuda:0" in res.output
    if not torch.cuda.is_available():
        res = invoke("profile", "--device", "cuda:0", "--quick")
        assert res.exit_code == 2 and "torch sees no CUDA GPU" in res.output


def test_weight_shapes_follow_the_model():
    from hetplan.catalog.loader import find_model
    from hetplan.profiler.run import weight_shapes

    shapes = dict((n, (a, b)) for n, a, b in weight_shapes(find_model("Llama-3-8B")))
    assert shapes == {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}


def test_device_names_match_catalog_gpus():
    from hetplan.profiler.run import match_device

    assert match_device("cuda", "NVIDIA H100 80GB HBM3", None)[0].name == "H100-SXM"
    assert match_device("cuda", "NVIDIA H200", None)[0].name == "H200-SXM"
    assert match_device("cuda", "NVIDIA A100-SXM4-80GB", None)[0].name == "A100-80GB-SXM"
    assert match_device("cuda", "NVIDIA L4", None)[0].name == "L4"
    assert match_device("cuda", "Some Future GPU", None)[0] is None
    assert match_device("cpu", "Xeon", "H20")[0].name == "H20"


@pytest.mark.gpu
@cuda
def test_cuda_quick_profile_end_to_end(tmp_path):
    path = tmp_path / "gpu.yaml"
    res = invoke("profile", "--device", "cuda:0", "--quick", "--out", path)
    assert res.exit_code == 0, res.output
    prof = load_profile(path)
    m = prof.gpu.measured
    assert m.device_kind == "cuda" and "bf16" in m.gemm_tflops and m.host_to_device_gb_per_s
    assert prof.provenance["timing"] == "CUDA events"
    if torch.cuda.get_device_capability(0) >= (8, 9):
        assert "fp8" in m.gemm_tflops
    if torch.cuda.device_count() >= 2:
        assert m.allreduce_gpus == torch.cuda.device_count() and m.allreduce_bus_gb_per_s


@pytest.mark.gpu
@cuda
def test_cuda_timing_uses_events():
    from hetplan.profiler.bench import SIZES, Bench

    bench = Bench("cuda:0", SIZES["cuda-quick"])
    t = bench.gemm("bf16", 1024, 1024, 1024)
    assert t.median_s > 0 and t.p10_s <= t.median_s <= t.p90_s


def test_a_failing_benchmark_leaves_the_rest_of_the_profile(monkeypatch):
    from hetplan.profiler.bench import Bench
    from hetplan.profiler.run import ProfileRequest, run_profile

    def broken(self, *args):
        raise RuntimeError("no kernel for this shape")

    monkeypatch.setattr(Bench, "attention", broken)
    prof = run_profile(ProfileRequest("cpu", quick=True))
    assert prof.tables["attention_prefill"] == [] and prof.tables["attention_decode"] == []
    assert any(n.startswith("attention prefill 128 failed: RuntimeError") for n in prof.notes)
    assert prof.gpu.measured.gemm_tflops["bf16"] > 0
