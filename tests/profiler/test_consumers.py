"""Measured figures in every consumer (plan, estimate, fit, catalog folders), fits from other scenarios, and the
option rules of 'hetplan profile' (review findings 6-9, 12, 13)."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from hetplan.catalog.loader import find_gpu
from hetplan.catalog.profile_match import new_device_spec
from hetplan.catalog.schemas import GpuMeasured
from hetplan.cli.main import app
from hetplan.perf.measured import measured_notes
from hetplan.solvers.ce_fit import FitFile, fit_mismatch, keep_pairs, low_r2_note
from tests.conftest import EXAMPLES
from tests.helpers import cli
from tests.profiler.helpers import write_profile

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
CPU_NOTE = "a CPU's figures, not a H100-SXM's"


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


def _json(*args):
    res = invoke(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture
def cpu_h100(tmp_path):
    """A CPU's figures filed under the H100 (a CPU profile taken with --gpu H100)."""
    return write_profile(tmp_path / "ph100.yaml", gpu="H100", bf16_tflops=0.72, read_gb_per_s=4.1, kind="cpu")


def test_catalog_folder_with_cpu_figures_warns_in_plan(tmp_path, cpu_h100, monkeypatch):
    out = tmp_path / "cat"
    assert invoke("profile", "merge", cpu_h100, "--out", out).exit_code == 0
    monkeypatch.setenv("HETPLAN_CATALOG_DIR", str(out))  # read by the CLI at the command, passed down from there
    doc = _json("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--gpus", "H100,A100-80GB", "--no-analysis")
    assert "H100-SXM" not in doc["gpus_used"]  # it behaves like the CPU it is
    assert any(CPU_NOTE in w for w in doc["warnings"])


def test_estimate_warns_and_records_profiles(tmp_path, cpu_h100):
    doc = _json("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--profile", cpu_h100)
    assert any(CPU_NOTE in w for w in doc["warnings"])
    assert doc["profiles"] == [
        {
            "file": "ph100.yaml",
            "gpu": "H100-SXM",
            "device_kind": "cpu",
            "device_name": "test H100-SXM",
            "profiled_at": "2026-11-29T00:00:00+00:00",
        }
    ]
    text = invoke("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--profile", cpu_h100)
    assert text.exit_code == 0 and "warning:" in text.stdout and "CPU's figures" in text.stdout
    # a profile of another GPU changes nothing and says so (finding 7)
    l4 = write_profile(tmp_path / "l4.yaml", gpu="L4", bf16_tflops=90.0, read_gb_per_s=250.0)
    other = _json("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--profile", l4)
    plain = _json("estimate", "--model", "Llama-3-8B", "--gpu", "H100")
    assert other["prefill_latency_s"] == plain["prefill_latency_s"]
    assert any("is for L4, which is not a candidate GPU here: it changes nothing" in w for w in other["warnings"])
    assert plain["warnings"] == [] and plain["profiles"] == []


def test_fit_warns_records_what_it_was_fitted_on_and_low_r2(tmp_path, cpu_h100):
    l40s = write_profile(tmp_path / "l40s.yaml", gpu="L40S", bf16_tflops=300.0, read_gb_per_s=800.0)
    args = ("profile", "fit", "--model", "Llama-3-8B", "--synthetic", "balanced", "--gpus", "H100,L4,A100-80GB")
    doc = _json(*args, "--profile", cpu_h100, "--profile", l40s)
    assert any(CPU_NOTE in w for w in doc["warnings"])
    assert any("is for L40S" in w and "changes nothing" in w for w in doc["warnings"])
    assert [p["file"] for p in doc["profiles"]] == ["ph100.yaml", "l40s.yaml"]
    assert (doc["model"], doc["weight_dtype"], doc["kv_dtype"]) == ("Llama-3-8B", "bf16", "bf16")
    assert sorted(doc["gpus"]) == ["A100-80GB-SXM", "H100-SXM", "L4"] and doc["workload"]["name"]
    assert low_r2_note(0.9) == [] and "R² 0.300 < 0.5" in low_r2_note(0.3)[0]


def test_prune_with_a_fit_from_another_scenario_warns_and_keeps_unseen_gpus(tmp_path):
    scenario = EXAMPLES / "llama3-70b-azure-conv.yaml"
    fit = tmp_path / "fit.yaml"  # what example (b)'s fit records: other GPUs and workload, A2 = 0, poor R²
    fit.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "kind": "ce-fit",
                "model": "Llama-3-70B",
                "weight_dtype": "bf16",
                "kv_dtype": "bf16",
                "workload": {"name": "azure_code_15min", "prompt_tokens_mean": 2008.1, "output_tokens_mean": 28.9},
                "gpus": {"H800": {}, "A800-80GB": {}, "H20": {}},
                "a1": 5431.26,
                "a2": 0.0,
                "r2": 0.3,
            }
        ),
        encoding="utf-8",
    )
    exact = _json("plan", scenario, "--no-analysis")
    pruned = _json("plan", scenario, "--no-analysis", "--prune-with", fit)
    assert pruned["total_usd_per_hour"] == exact["total_usd_per_hour"]  # unseen GPUs were not pruned away
    text = " | ".join(pruned["warnings"])
    assert "fitted on another scenario (workload azure_code_15min (plan: azure_conv_15min)" in text
    assert "the A1/A2 fit never saw" in text and "R² 0.300 < 0.5" in text
    res = invoke("plan", scenario, "--prune-top-k", "3")
    assert res.exit_code == 2 and "--prune-top-k is for --prune-with" in res.output


def test_keep_pairs_keeps_every_pair_of_a_gpu_the_fit_never_saw():
    from tests.helpers import request

    gpus = [find_gpu(g) for g in ("H100", "A100-80GB", "L40S")]
    req = request(gpus, {g.name: 2.0 for g in gpus})
    fit = FitFile.model_validate(
        {"schema_version": 1, "kind": "ce-fit", "a1": 0.0, "a2": 1.0, "gpus": {"H100-SXM": {}, "L40S": {}}}
    )
    notes, unseen = fit_mismatch(fit, req, {})
    assert unseen == {"A100-80GB-SXM"} and "never saw A100-80GB-SXM" in notes[0]
    kept = keep_pairs(fit.a1, fit.a2, req, top_k=1, always=unseen)
    a100 = "A100-80GB-SXM"
    assert {(p, d) for p in (g.name for g in gpus) for d in (a100,)} <= kept
    assert {(a100, d) for d in (g.name for g in gpus)} <= kept
    # an old fit file (no record of what it was fitted on) is not compared
    old = FitFile.model_validate({"schema_version": 1, "kind": "ce-fit", "a1": 1.0, "a2": 1.0})
    assert fit_mismatch(old, req, {"name": "x"}) == ([], frozenset())


def test_emit_job_passes_model_and_quick_and_refuses_device_and_gpu():
    docs = _json("profile", "--emit-job", "--gpu-label", "NVIDIA-L4", "--model", "llama-3-70b", "--quick")
    script = next(iter(docs.values()))["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert (
        "--model Llama-3-70B --hidden-size 8192 --heads 64" in script and "--quick" in script and "--gpu L4" in script
    )
    default = _json("profile", "--emit-job", "--gpu-label", "NVIDIA-L4")
    script = next(iter(default.values()))["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--model Llama-3-8B" in script and "--quick" not in script
    for extra, msg in (
        (("--model", "NoSuch"), "unknown model 'NoSuch'"),
        (("--device", "cpu"), "--device does not apply to --emit-job"),
        (("--gpu", "H100"), "--gpu does not apply to --emit-job"),
        (("--pvc", "UPPER"), "not a valid PersistentVolumeClaim name"),
        (("--pvc", "-x"), "not a valid PersistentVolumeClaim name"),
    ):
        res = invoke("profile", "--emit-job", "--gpu-label", "NVIDIA-L4", *extra)
        assert res.exit_code == 2 and msg in res.output, (extra, res.output)
    assert _json("profile", "--emit-job", "--gpu-label", "NVIDIA-L4", "--pvc", "team.profiles-1")


@pytest.mark.parametrize(
    "extra", [("--image", "x"), ("--pvc", "p"), ("--gpus-per-job", "2"), ("--namespace", "n"), ("--install", "")]
)
def test_job_options_without_emit_job_are_refused(extra):
    res = invoke("profile", "--device", "cpu", *extra)
    assert res.exit_code == 2 and f"{extra[0]} is for --emit-job" in res.output


def test_merge_force_removes_only_the_previous_merges_files(tmp_path, cpu_h100):
    a = write_profile(tmp_path / "a.yaml", gpu="L4", bf16_tflops=90.0, read_gb_per_s=250.0)
    out = tmp_path / "cat"
    assert invoke("profile", "merge", a, cpu_h100, "--out", out).exit_code == 0
    (out / "profiles" / "mine.txt").write_text("user file", encoding="utf-8")
    assert invoke("profile", "merge", cpu_h100, "--out", out, "--force").exit_code == 0
    assert sorted(p.name for p in (out / "profiles").iterdir()) == ["mine.txt", "ph100.yaml"]
    # a folder merged before manifests existed: only profile files under profiles/ count as the merge's
    (out / "hetplan-merge.json").unlink()
    (out / "profiles" / "a.yaml").write_text(a.read_text(encoding="utf-8"), encoding="utf-8")
    assert invoke("profile", "merge", a, "--out", out, "--force").exit_code == 0
    assert sorted(p.name for p in (out / "profiles").iterdir()) == ["a.yaml", "mine.txt"]


def test_measured_figures_are_bounded_and_unmeasured_dtypes_say_what_the_model_uses():
    base = {"device_kind": "cuda", "device_name": "x", "memory_read_gb_per_s": 3000.0, "memory_copy_gb_per_s": 2900.0}
    with pytest.raises(ValidationError, match="<= 100000"):
        GpuMeasured.model_validate({**base, "gemm_tflops": {"bf16": 1e30}})
    with pytest.raises(ValidationError, match="memory_read_gb_per_s"):
        GpuMeasured.model_validate({**base, "gemm_tflops": {"bf16": 700.0}, "memory_read_gb_per_s": 1e9})
    # a new device measured in bf16 only: fp16 is left unmeasured and the 16-bit fallback is the bf16 figure
    spec = new_device_spec("CPU-T", {**base, "device_kind": "cpu", "gemm_tflops": {"bf16": 0.5}}, 16.0, "t")
    assert spec.fp16_dense_tflops is None and spec.dense_tflops("fp16") == (0.5, False)
    h100 = find_gpu("H100")
    fp32_only = h100.model_copy(update={"measured": GpuMeasured.model_validate({**base, "gemm_tflops": {"fp32": 50}})})
    (note,) = measured_notes([fp32_only], "bf16")
    assert "no bf16 GEMM (measured: fp32)" in note and "datasheet peak x efficiency prior" in note
    assert "measured 3,000 GB/s" in note
    bf16_only = h100.model_copy(update={"measured": GpuMeasured.model_validate({**base, "gemm_tflops": {"bf16": 7e2}})})
    (note,) = measured_notes([bf16_only], "fp16")
    assert "uses its measured bf16 figure (700 TFLOP/s) for fp16" in note
    assert measured_notes([bf16_only], "bf16") == [] and measured_notes([h100], "bf16") == []


def test_verify_and_simulate_use_the_profiled_figures_the_plan_was_made_with(tmp_path):
    """A plan made with --profile records the measured GPU entry; the simulator rebuilds its instances from it
    (it used to check a slow, measured H100 plan against datasheet speed)."""
    import json

    from typer.testing import CliRunner

    from hetplan.cli.main import app
    from tests.conftest import EXAMPLES
    from tests.profiler.helpers import write_profile

    slow = write_profile(tmp_path / "slow.yaml", gpu="H100", bf16_tflops=300.0, read_gb_per_s=1500.0)
    runner = CliRunner()
    common = ["plan", str(EXAMPLES / "llama3-70b-azure-conv.yaml"), "--gpus", "H100-SXM", "--strategy",
              "homogeneous", "--no-analysis", "--no-verify", "--json"]  # fmt: skip
    fast = json.loads(runner.invoke(app, common).stdout)
    r = runner.invoke(app, [*common, "--profile", str(slow)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["scenario"]["profiles"][0]["gpu_spec"]["measured"]["memory_read_gb_per_s"] == 1500.0
    from hetplan.plan.doc import from_doc
    from hetplan.sim.deployment import deployment_from_plan

    d_slow, d_fast = deployment_from_plan(from_doc(doc)), deployment_from_plan(from_doc(fast))
    name = doc["combos"][0]["decode_gpu"]
    tp = doc["combos"][0]["decode_tp"]
    step_slow = float(d_slow.model(name, tp).decode_step_latency_s(8, 1000.0))
    step_fast = float(d_fast.model(name, tp).decode_step_latency_s(8, 1000.0))
    assert d_slow.gpu(name).measured is not None and d_fast.gpu(name).measured is None
    assert step_slow > step_fast  # the measured 1,500 GB/s is slower than the datasheet's
