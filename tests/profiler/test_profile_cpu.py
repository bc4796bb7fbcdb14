"""``hetplan profile`` calling the profiler package on the CPU at tiny sizes (needs torch and hetplan_profiler),
and CUDA-only checks (skipped without a GPU)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hetplan.catalog.profile import load_profile
from hetplan.cli.main import app
from tests.conftest import EXAMPLES
from tests.helpers import cli

pytest.importorskip("hetplan_profiler")
torch = pytest.importorskip("torch")

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("prof") / "p.yaml"
    res = invoke("profile", "--device", "cpu", "--quick", "--out", path)
    assert res.exit_code == 0, res.output
    return path, res


@pytest.mark.slow
def test_cpu_profile_end_to_end(cpu_profile):
    path, res = cpu_profile
    prof = load_profile(path)
    assert prof.schema_version == 2  # what the profiler package writes
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
    assert prof.provenance["command"] == "hetplan profile --device cpu --quick --model Llama-3-8B"
    assert prof.provenance["model_shapes"] == "Llama-3-8B"
    assert m.profile_source.startswith("hetplan profile --quick on ")
    assert "(CPU)" in res.stdout


def test_cpu_profile_loads_in_plan(cpu_profile):
    path, _ = cpu_profile
    res = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--profile", path, "--json", "--no-analysis")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert any("matched no catalog GPU" in w for w in doc["warnings"])
    assert doc["scenario"]["profiles"][0]["device_kind"] == "cpu"


@pytest.mark.slow
def test_cpu_profile_filed_under_a_gpu_says_it_is_a_cpu(tmp_path):
    path = tmp_path / "h100.json"
    res = invoke("profile", "--device", "cpu", "--quick", "--gpu", "H100", "--json", "--model", "Llama-3-70B")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # the file as the profiler writes it: raw figures, filed under --gpu
    assert doc["schema_version"] == 2 and doc["file_under"] == "H100"
    assert doc["model_shapes"]["hidden_size"] == 8192  # the catalog model's shapes were handed to the profiler
    path.write_text(json.dumps(doc), encoding="utf-8")
    prof = load_profile(path)  # hetplan matches it to the catalog on reading
    assert prof.gpu.name == "H100-SXM" and prof.match.how == "--gpu H100"
    assert 0 < prof.efficiency_vs_datasheet["bf16"] < 0.01  # a CPU against an H100 datasheet
    plan = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--profile", path, "--json", "--no-analysis")
    assert plan.exit_code == 0, plan.output
    out = json.loads(plan.stdout)
    assert "H100-SXM" not in out["gpus_used"]
    assert any("a CPU's figures, not a H100-SXM's" in w for w in out["warnings"])


@pytest.mark.slow
def test_summary_shows_datasheet_and_efficiency_for_a_matched_gpu():
    res = invoke("profile", "--device", "cpu", "--quick", "--gpu", "H100")
    assert res.exit_code == 0, res.output
    assert "-> H100-SXM (--gpu H100)" in res.stdout and "%" in res.stdout
    assert "not saved: pass --out FILE" in res.output


def test_profile_refuses_to_overwrite_and_bad_devices(cpu_profile):
    path, _ = cpu_profile
    res = invoke("profile", "--device", "cpu", "--quick", "--out", path)
    assert res.exit_code == 2 and "--force" in res.output
    res = invoke("profile", "--device", "tpu")
    assert res.exit_code == 2 and "--device cuda:0" in res.output
    res = invoke("profile", "--device", "cpu", "--gpu", "NoSuchGPU")
    assert res.exit_code == 2 and "unknown GPU 'NoSuchGPU'" in res.output
    if not torch.cuda.is_available():
        res = invoke("profile", "--device", "cuda:0", "--quick")
        assert res.exit_code == 2 and "torch sees no CUDA GPU" in res.output


def test_profile_writes_kernel_tables_and_refuses_them_with_emit_job(tmp_path):
    """``--kernel-tables DIR`` passes through to the profiler's kernel tables; a second run refuses before --out."""
    root, out = tmp_path / "tables", tmp_path / "p.yaml"
    res = invoke("profile", "--device", "cpu", "--quick", "--out", out, "--kernel-tables", root)
    assert res.exit_code == 0, res.output
    names = sorted(p.relative_to(root).parts[1:] for p in root.rglob("*.csv"))
    from hetplan_profiler import __version__

    assert names == [("attention", "hetplan-profile", __version__, "context_attention_perf.csv"),
                     ("attention", "hetplan-profile", __version__, "generation_attention_perf.csv"),
                     ("gemm", "hetplan-profile", __version__, "gemm_perf.csv")]  # fmt: skip
    header = next(root.rglob("gemm_perf.csv")).read_text(encoding="utf-8").splitlines()[0]
    assert header == "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency"
    out.unlink()
    res = invoke("profile", "--device", "cpu", "--quick", "--out", out, "--kernel-tables", root)
    assert res.exit_code == 2 and "already exists" in res.output and not out.exists()
    res = invoke("profile", "--emit-job", "--gpu-label", "NVIDIA-L4", "--out", tmp_path / "jobs",
                 "--kernel-tables", root)  # fmt: skip
    assert res.exit_code == 2 and "--kernel-tables does not apply to --emit-job" in res.output


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
    if prof.match.catalog_gpu is not None:
        assert 0 < prof.efficiency_vs_datasheet["bf16"] < 1.5
    if torch.cuda.get_device_capability(0) >= (8, 9):
        assert "fp8" in m.gemm_tflops
    if torch.cuda.device_count() >= 2:
        assert m.allreduce_gpus == torch.cuda.device_count() and m.allreduce_bus_gb_per_s
