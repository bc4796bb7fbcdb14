"""A plan for a model and a GPU that no catalog knows goes through every command downstream of ``plan``.

The model is a ``config.json`` in a folder named like a catalog model (``Llama-3-8B``) but holding a 14B-class
architecture, the GPU a profiled CUDA device the catalog lacks, priced by a user file. After planning, those three
files are deleted: ``emit``, ``simulate``, ``calibrate``, ``report`` (and its gate) and ``plan --verify``
each run in a fresh process and must use what the plan recorded, never a catalog entry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 5120,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "intermediate_size": 13824,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
}
GPU = "NVIDIA-Future-X100"
PROFILE = """schema_version: 2
kind: gpu-profile
file_under: null
device: {device_kind: cuda, device_name: NVIDIA Future-X100, memory_gib: 96.0, torch_version: test}
measured:
  device_kind: cuda
  device_name: NVIDIA Future-X100
  gemm_tflops: {bf16: 600.0, fp16: 600.0}
  memory_read_gb_per_s: 3600.0
  memory_copy_gb_per_s: 3400.0
  profiled_at: '2026-11-30T00:00:00+00:00'
  profile_source: hand-made test profile
model_shapes: {name: test, hidden_size: 4096, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 128,
  ffn_size: 14336, gated_mlp: true}
tables: {}
provenance: {profiler_version: test, command: hand-made, profiled_at: '2026-11-30T00:00:00+00:00', timing: CUDA events}
notes: []
"""
PRICES = f"""schema_version: 1
kind: prices
source: test contract
as_of: '2026-11-01'
illustrative: false
usd_per_gpu_hour: {{{GPU}: 3.0}}
"""
TRACE = FIXTURES / "azure_conv_200.csv"


def hetplan(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``hetplan ARGS`` in a fresh Python process."""
    cmd = [sys.executable, "-c", "from hetplan.cli.main import main; main()", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("downstream")
    inputs = work / "inputs"
    (inputs / "Llama-3-8B").mkdir(parents=True)
    (inputs / "Llama-3-8B" / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    (inputs / "prof.yaml").write_text(PROFILE, encoding="utf-8")
    (inputs / "prices.yaml").write_text(PRICES, encoding="utf-8")
    ok(
        hetplan(
            work, "plan", "--model", inputs / "Llama-3-8B" / "config.json", "--workload", TRACE,
            "--profile", inputs / "prof.yaml", "--prices", inputs / "prices.yaml", "--no-analysis", "--verify",
            "--strategy", "cauchy", "--out", "plan.json",  # a combo plan (--strategy all picks Melange here)
        )
    )  # fmt: skip
    shutil.rmtree(inputs)  # nothing downstream may read them again
    return work


def test_the_plan_records_the_model_and_gpu_it_was_made_for(planned):
    doc = json.loads((planned / "plan.json").read_text())
    model = doc["resolved"]["model"]
    assert model["source"] == "config.json" and model["spec"]["hidden_size"] == 5120
    assert model["spec"]["num_hidden_layers"] == 48  # not the catalog's 32-layer Llama-3-8B
    gpus = {g["spec"]["name"]: g for g in doc["resolved"]["gpus"]}
    assert gpus[GPU]["source"] == "profile" and gpus[GPU]["spec"]["vendor"] == "NVIDIA"
    assert set(doc["gpus_used"]) == {GPU}
    # plan --verify replayed it with the same entries: in sample the part it was sized on, out of sample the rest
    v = doc["verification"]
    assert v["requests"] == doc["scenario"]["workload"]["requests"]
    assert v["requests"] + sum(r["requests"] for r in v["out_of_sample"]["runs"][:1]) == 200


def test_emit_uses_the_recorded_model_and_gpu(planned):
    ok(
        hetplan(
            planned, "emit", "plan.json", "--out", "emitted", "--model-source", "/models/my-14b",
            "--gpu-label", f"{GPU}={GPU}", "--validate",
        )
    )  # fmt: skip
    scripts = "".join(p.read_text() for p in sorted((planned / "emitted" / "vllm").glob("*.sh")))
    assert "vllm serve /models/my-14b" in scripts and "Meta-Llama-3-8B" not in scripts
    manifests = "".join(p.read_text() for p in sorted((planned / "emitted" / "kubernetes").glob("*.yaml")))
    assert GPU in manifests


def test_simulate_and_calibrate_rebuild_the_recorded_instances(planned):
    sim = json.loads(ok(hetplan(planned, "simulate", "plan.json", "--trace", TRACE, "--json")))
    assert sim["requests"] == 200 and sim["plan_strategy"] == "cauchy"
    ok(hetplan(planned, "calibrate", "plan.json", "--trace", TRACE, "--out", "calibrated.json"))
    cal = json.loads(ok(hetplan(planned, "simulate", "calibrated.json", "--trace", TRACE, "--policy", "cascade",
                                "--json")))  # fmt: skip
    assert cal["requests"] == 200


def test_report_and_its_gate_read_the_plan(planned):
    rep = json.loads(ok(hetplan(planned, "report", "plan.json", "--format", "json")))
    assert rep["plans"][0]["model"] == "Llama-3-8B" and rep["plans"][0]["gpus_used"] == {GPU: 2}
    gated = hetplan(planned, "report", "plan.json", "--baseline", "plan.json", "--format", "json")
    assert gated.returncode == 0, gated.stderr
