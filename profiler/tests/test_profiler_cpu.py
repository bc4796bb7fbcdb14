"""hetplan-profile on the CPU at tiny sizes (needs torch; no hetplan), model shapes, and CUDA-only checks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("hetplan_profiler")
torch = pytest.importorskip("torch")

from hetplan_profiler.cli import main  # noqa: E402
from hetplan_profiler.errors import ProfilerError  # noqa: E402
from hetplan_profiler.schema import schema_errors  # noqa: E402
from hetplan_profiler.shapes import BUILTIN, resolve_shape, weight_shapes  # noqa: E402

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("prof") / "p.yaml"
    assert main(["--device", "cpu", "--quick", "--out", str(path)]) == 0
    import yaml

    return path, yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_cpu_profile_end_to_end(cpu_profile):
    _, doc = cpu_profile
    assert schema_errors(doc) == []
    assert doc["schema_version"] == 2 and doc["kind"] == "gpu-profile" and doc["file_under"] is None
    m = doc["measured"]
    assert m["device_kind"] == "cpu" and doc["device"]["device_kind"] == "cpu"
    assert set(m["gemm_tflops"]) == {"bf16", "fp32"} and all(v > 0 for v in m["gemm_tflops"].values())
    assert "GEMM fp16 not measured: plans in fp16 use the measured bf16 figure" in doc["notes"]
    assert m["memory_read_gb_per_s"] > 0 and m["memory_copy_gb_per_s"] > 0
    tables = doc["tables"]
    assert {"gemm", "decode_gemm", "memory", "attention_prefill", "attention_decode"} <= set(tables)
    assert {r["m"] for r in tables["decode_gemm"]} == {1, 16}
    for row in tables["gemm"]:
        assert row["tflops"] > 0 and row["median_s"] > 0 and row["repeats"] == 3
    # the best prefill shape is the summary figure
    assert max(r["tflops"] for r in tables["gemm"] if r["dtype"] == "bf16") == m["gemm_tflops"]["bf16"]
    assert doc["notes"][0].startswith("CPU profile")
    prov = doc["provenance"]
    assert prov["timing"] == "time.perf_counter" and doc["device"]["torch_version"] == torch.__version__
    assert prov["command"].startswith("hetplan-profile --device cpu --quick") and prov["quick"] is True
    assert doc["model_shapes"] == BUILTIN["Llama-3-8B"].as_dict()
    assert m["profile_source"].startswith("hetplan-profile --quick on ")


@pytest.mark.slow
def test_console_script_runs_without_hetplan(tmp_path):
    """The console script's module imports nothing of hetplan (it is a package of its own)."""
    args = ["--device", "cpu", "--quick", "--json", "--gpu", "H100", "--out", str(tmp_path / "p.json")]
    code = (
        "import sys; sys.modules['hetplan'] = None\n"
        "from hetplan_profiler.cli import main\n"
        f"raise SystemExit(main({args!r}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["file_under"] == "H100" and "--gpu H100" in doc["provenance"]["command"]
    assert json.loads((tmp_path / "p.json").read_text(encoding="utf-8")) == doc


def test_refuses_to_overwrite_and_bad_input(cpu_profile, capsys):
    path, _ = cpu_profile
    assert main(["--device", "cpu", "--quick", "--out", str(path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["--device", "tpu"]) == 2
    assert "--device cuda:0" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["--device", "cuda:0", "--quick"]) == 2
        assert "torch sees no CUDA GPU" in capsys.readouterr().err
    assert main(["--device", "cpu", "--model", "My-Model", "--hidden-size", "64"]) == 2
    err = capsys.readouterr().err
    assert "not a built-in shape set" in err and "--heads N" in err and "--ffn-size N" in err


def test_weight_shapes_follow_the_model():
    shapes = {n: (a, b) for n, a, b in weight_shapes(BUILTIN["Llama-3-8B"])}
    assert shapes == {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
    assert resolve_shape("llama-3-70b") is BUILTIN["Llama-3-70B"]
    custom = resolve_shape("Mine", hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                           ffn_size=128, gated_mlp=False)  # fmt: skip
    assert dict((n, (a, b)) for n, a, b in weight_shapes(custom))["gate_up"] == (128, 64)
    assert resolve_shape("Llama-3-8B", hidden_size=2048).hidden_size == 2048
    with pytest.raises(ProfilerError, match="not a multiple"):
        resolve_shape("Llama-3-8B", num_key_value_heads=5)


@pytest.mark.slow
def test_a_failing_benchmark_leaves_the_rest_of_the_profile(monkeypatch):
    from hetplan_profiler.bench import Bench
    from hetplan_profiler.run import ProfileRequest, run_profile

    def broken(self, *args):
        raise RuntimeError("no kernel for this shape")

    monkeypatch.setattr(Bench, "attention", broken)
    doc = run_profile(ProfileRequest("cpu", quick=True))
    assert doc["tables"]["attention_prefill"] == [] and doc["tables"]["attention_decode"] == []
    assert any(n.startswith("attention prefill 128 failed: RuntimeError") for n in doc["notes"])
    assert doc["measured"]["gemm_tflops"]["bf16"] > 0


@pytest.mark.gpu
@cuda
def test_cuda_quick_profile_end_to_end(tmp_path):
    path = tmp_path / "gpu.json"
    assert main(["--device", "cuda:0", "--quick", "--out", str(path)]) == 0
    doc = json.loads(path.read_text(encoding="utf-8"))
    m = doc["measured"]
    assert m["device_kind"] == "cuda" and "bf16" in m["gemm_tflops"] and m["host_to_device_gb_per_s"]
    assert doc["provenance"]["timing"] == "CUDA events"
    if torch.cuda.get_device_capability(0) >= (8, 9):
        assert "fp8" in m["gemm_tflops"]
    if torch.cuda.device_count() >= 2:
        assert m["allreduce_gpus"] == torch.cuda.device_count() and m["allreduce_bus_gb_per_s"]


@pytest.mark.gpu
@cuda
def test_cuda_timing_uses_events():
    from hetplan_profiler.bench import SIZES, Bench

    bench = Bench("cuda:0", SIZES["cuda-quick"])
    t = bench.gemm("bf16", 1024, 1024, 1024)
    assert t.median_s > 0 and t.p10_s <= t.median_s <= t.p90_s
