"""Profile files: round trip, how measured figures enter the perf model, plan/estimate --profile, merge."""

from __future__ import annotations

import json
import os
import sys

import pytest
from typer.testing import CliRunner

from hetplan.catalog.loader import find_gpu, find_model, gpu_overlay, read_yaml_file
from hetplan.catalog.profile import dump_profile, load_profile, load_profiles
from hetplan.catalog.schemas import GpuCatalog
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel
from hetplan.perf.settings import PerfSettings
from tests.conftest import EXAMPLES
from tests.profiler.helpers import make_profile, write_profile

runner = CliRunner()
SETTINGS = PerfSettings()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args, env=None):
    return runner.invoke(app_(), list(map(str, args)), env={**ENV, **(env or {})})


def app_():
    from hetplan.cli.main import app

    return app


def test_profile_round_trips(tmp_path):
    prof = make_profile(allreduce=(350.0, 2.5e-5, 8))
    path = tmp_path / "p.yaml"
    path.write_text(dump_profile(prof), encoding="utf-8")
    again = load_profile(path)
    assert again == prof
    assert dump_profile(again) == path.read_text(encoding="utf-8")


def test_profile_schema_errors_name_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    text = dump_profile(make_profile()).replace("memory_read_gb_per_s: 3000.0", "memory_read_gb_per_s: -1")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_profile(path)
    assert "gpu.measured.memory_read_gb_per_s" in exc.value.why


def _inst(gpu):
    return InstanceModel(ModelArch(find_model("Llama-3-8B")), gpu, 1)


def test_reference_efficiencies_leave_the_model_unchanged():
    h100 = find_gpu("H100")
    peak = h100.dense_tflops("bf16")[0]
    same = make_profile(
        bf16_tflops=peak * SETTINGS.reference_gemm_efficiency,
        read_gb_per_s=h100.hbm_gb_per_s * SETTINGS.reference_memory_efficiency,
    ).gpu
    a, b = _inst(h100), _inst(same)
    assert float(b.prefill_latency_s(4096)) == pytest.approx(float(a.prefill_latency_s(4096)), rel=1e-9)
    assert float(b.decode_step_latency_s(64, 2048)) == pytest.approx(float(a.decode_step_latency_s(64, 2048)), rel=1e-9)


def test_measured_figures_scale_compute_and_bandwidth_terms():
    h100 = find_gpu("H100")
    peak = h100.dense_tflops("bf16")[0]
    half = make_profile(
        bf16_tflops=peak * SETTINGS.reference_gemm_efficiency / 2,
        read_gb_per_s=h100.hbm_gb_per_s * SETTINGS.reference_memory_efficiency / 2,
    ).gpu
    a, b = _inst(h100), _inst(half)
    # effective compute = measured x prior / reference: half the measured TFLOPS, half the effective
    assert b.eff.prefill_mfu == pytest.approx(a.eff.prefill_mfu / 2)
    assert b.eff.decode_mbu == pytest.approx(a.eff.decode_mbu / 2)
    # a long prompt is compute-bound: its compute term doubles
    over = a.overhead_s
    assert float(b.prefill_latency_s(8192)) - over == pytest.approx(2 * (float(a.prefill_latency_s(8192)) - over))


def test_measured_allreduce_replaces_link_prior():
    h100 = find_gpu("H100")
    prof = make_profile(allreduce=(360.0, 3.0e-5, 8)).gpu
    inst = InstanceModel(ModelArch(find_model("Llama-3-70B")), prof, 8)
    assert inst.link_bytes_per_s == pytest.approx(360e9)  # bus bandwidth is the ring model's B_link
    assert inst.eff.allreduce_latency_s == pytest.approx(3.0e-5 / 14)
    assert h100.measured is None


def test_two_profiles_of_one_gpu_are_refused(tmp_path):
    a = write_profile(tmp_path / "a.yaml")
    b = write_profile(tmp_path / "b.yaml", bf16_tflops=600.0)
    with pytest.raises(InputError) as exc:
        load_profiles([a, b])
    assert "two profiles for H100-SXM" in exc.value.what


def test_plan_with_a_profile_uses_it_and_says_so(tmp_path):
    slow = write_profile(tmp_path / "h100.yaml", bf16_tflops=200.0, read_gb_per_s=900.0)
    base = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis")
    res = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis", "--profile", slow)
    assert base.exit_code == 0 and res.exit_code == 0, res.output
    a, b = json.loads(base.stdout), json.loads(res.stdout)
    assert "H100-SXM" in a["gpus_used"] and "H100-SXM" not in b["gpus_used"]  # a slow H100 is not worth its price
    assert b["total_usd_per_hour"] > a["total_usd_per_hour"]
    assert b["scenario"]["profiles"][0]["file"] == "h100.yaml"
    assert any("measured figures from profile h100.yaml" in w for w in b["warnings"])


def test_estimate_with_a_profile(tmp_path):
    path = write_profile(tmp_path / "h100.yaml", bf16_tflops=400.0)
    args = ("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--prompt-tokens", "8192", "--json")
    a = json.loads(invoke(*args).stdout)
    b = json.loads(invoke(*args, "--profile", path).stdout)
    assert b["prefill_latency_s"] > 1.5 * a["prefill_latency_s"]


def test_unmatched_device_is_registered_but_unused(tmp_path):
    from hetplan.catalog.profile import new_device_spec

    spec = new_device_spec(
        "CPU-Test",
        {
            "device_kind": "cpu",
            "device_name": "Test CPU",
            "gemm_tflops": {"bf16": 1.0},
            "memory_read_gb_per_s": 50.0,
            "memory_copy_gb_per_s": 40.0,
        },
        64.0,
        "test",
    )
    doc = make_profile().model_dump(mode="json")
    doc["gpu"] = spec.model_dump(mode="json", exclude_none=True)
    doc["match"] = {"catalog_gpu": None, "how": "a CPU matches no catalog GPU"}
    path = tmp_path / "cpu.yaml"
    import yaml

    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    res = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis", "--profile", path)
    assert res.exit_code == 0, res.output
    assert any(
        "matched no catalog GPU and is registered as a new device type 'CPU-Test'" in w
        for w in json.loads(res.stdout)["warnings"]
    )
    with gpu_overlay((spec,)):
        assert find_gpu("cpu-test").name == "CPU-Test"
    with pytest.raises(InputError):
        find_gpu("cpu-test")


def test_merge_writes_a_catalog_folder_the_loader_uses(tmp_path):
    a = write_profile(tmp_path / "h100.yaml", bf16_tflops=650.0)
    b = write_profile(tmp_path / "l4.yaml", gpu="L4", bf16_tflops=90.0, read_gb_per_s=250.0)
    out = tmp_path / "catalog"
    res = invoke("profile", "merge", a, b, "--out", out)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "gpus.yaml",
        "hetplan-merge.json",
        "models.yaml",
        "prices.yaml",
        "profiles",
    ]
    cat = read_yaml_file(out / "gpus.yaml", GpuCatalog, "gpus")
    by_name = {g.name: g for g in cat.gpus}
    assert by_name["H100-SXM"].measured.gemm_tflops["bf16"] == 650.0
    assert by_name["L4"].measured.memory_read_gb_per_s == 250.0
    assert by_name["A100-80GB-SXM"].measured is None
    again = invoke("profile", "merge", a, b, "--out", out)
    assert again.exit_code == 2 and "--force" in again.output
    # the existing catalog loader reads the folder (a fresh process: the loader caches)
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", "from hetplan.cli.main import main; main()", "estimate", "--model", "Llama-3-8B"]
        + ["--gpu", "H100", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HETPLAN_CATALOG_DIR": str(out)},
        check=False,
    )
    direct = json.loads(invoke("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--json", "--profile", a).stdout)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["prefill_latency_s"] == pytest.approx(direct["prefill_latency_s"])


def test_profile_without_torch_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    res = invoke("profile", "--device", "cpu", "--quick")
    assert res.exit_code == 2
    assert 'pip install ".[profile]"' in res.output
