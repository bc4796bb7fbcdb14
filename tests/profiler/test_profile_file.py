"""Profile files: versions 1 and 2, the shared schema, matching to the catalog, how measured figures enter the
perf model, plan/estimate --profile, merge, and hetplan profile without the profiler package."""

from __future__ import annotations

import json
import os
import sys

import pytest
from typer.testing import CliRunner

from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import find_gpu, find_model, overlaid_gpus, read_yaml_file
from hetplan.catalog.profile import PROFILE_SCHEMA, dump_profile, load_profile, load_profiles
from hetplan.catalog.profile_match import match_device
from hetplan.catalog.schemas import GpuCatalog
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel
from hetplan.perf.settings import PerfSettings
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import cli
from tests.profiler.helpers import make_profile, make_profile_doc, write_profile

SHIPPED = Catalog.shipped()

runner = CliRunner()
SETTINGS = PerfSettings()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args, env=None):
    return runner.invoke(app_(), cli(args), env={**ENV, **(env or {})})


def app_():
    from hetplan.cli.main import app

    return app


def test_version_1_profile_round_trips(tmp_path):
    prof = make_profile(allreduce=(350.0, 2.5e-5, 8))
    path = tmp_path / "p.yaml"
    path.write_text(dump_profile(prof), encoding="utf-8")
    again = load_profile(path)
    assert again == prof
    assert dump_profile(again) == path.read_text(encoding="utf-8")


def test_version_1_schema_errors_name_the_field(tmp_path):
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
    # example (a) plans on A100s alone: a profile that measures them slow changes the plan and raises its cost
    # (since whole-instance purchases and the calibrated model it buys more A100s rather than moving off them; 150
    # TFLOP/s and 900 GB/s still fit in the two p4de nodes the plan rents anyway, so the profile is slower than that)
    slow = write_profile(tmp_path / "a100.yaml", gpu="A100-80GB", bf16_tflops=100.0, read_gb_per_s=600.0)
    base = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis")
    res = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis", "--profile", slow)
    assert base.exit_code == 0 and res.exit_code == 0, res.output
    a, b = json.loads(base.stdout), json.loads(res.stdout)
    assert a["gpus_used"] != b["gpus_used"]  # slow A100s: another fleet
    assert b["total_usd_per_hour"] > a["total_usd_per_hour"]
    assert b["scenario"]["profiles"][0]["file"] == "a100.yaml"
    assert any("measured figures from profile a100.yaml" in w for w in b["warnings"])


def test_estimate_with_a_profile(tmp_path):
    path = write_profile(tmp_path / "h100.yaml", bf16_tflops=400.0)
    args = ("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--prompt-tokens", "8192", "--json")
    a = json.loads(invoke(*args).stdout)
    b = json.loads(invoke(*args, "--profile", path).stdout)
    assert b["prefill_latency_s"] > 1.5 * a["prefill_latency_s"]


def test_unmatched_device_is_registered_but_unused(tmp_path):
    from hetplan.catalog.profile_match import new_device_spec

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
    assert find_gpu("cpu-test", overlaid_gpus((spec,))).name == "CPU-Test"
    with pytest.raises(InputError):
        find_gpu("cpu-test")


@pytest.mark.slow
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


def _write(path, doc):
    import yaml

    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_version_2_is_matched_to_the_catalog_on_reading(tmp_path):
    # filed under a GPU with --gpu: the catalog entry, its datasheet kept, efficiency computed here
    prof = load_profile(_write(tmp_path / "a.yaml", make_profile_doc(gpu="H100", bf16_tflops=700.0)))
    h100 = find_gpu("H100")
    assert prof.schema_version == 2 and prof.gpu.name == "H100-SXM" and prof.match.how == "--gpu H100"
    assert prof.gpu.hbm_gb_per_s == h100.hbm_gb_per_s and prof.gpu.measured.gemm_tflops["bf16"] == 700.0
    assert prof.efficiency_vs_datasheet["bf16"] == float(f"{700.0 / h100.dense_tflops('bf16')[0]:.4g}")
    assert prof.provenance["model_shapes"] == "Llama-3-8B" and prof.provenance["memory_gib"] == 80.0
    # matched by the CUDA device name, as hetplan profile did before the split
    doc = make_profile_doc(gpu=None, device_name="NVIDIA H200")
    prof = load_profile(_write(tmp_path / "b.yaml", doc))
    assert prof.match.catalog_gpu == "H200-SXM" and "node label NVIDIA-H200" in prof.match.how
    # a device no catalog GPU matches becomes a new device type, its measured figures as "datasheet"
    doc = make_profile_doc(gpu=None, device_name="Some Future GPU", bf16_tflops=1234.0)
    prof = load_profile(_write(tmp_path / "c.yaml", doc))
    assert prof.match.catalog_gpu is None and prof.gpu.name == "Some-Future-GPU"
    assert prof.gpu.bf16_dense_tflops == 1234.0 and prof.gpu.hbm_gib == 80.0 and prof.efficiency_vs_datasheet == {}
    cpu = load_profile(
        _write(tmp_path / "d.yaml", make_profile_doc(gpu=None, kind="cpu", device_name="Intel(R) Xeon(R) CPU @ 2GHz"))
    )
    assert cpu.gpu.name == "CPU-Intel-Xeon" and cpu.is_cpu


def test_cpu_figures_under_a_gpu_keep_a_nonzero_efficiency(tmp_path):
    doc = make_profile_doc(gpu="H100", kind="cpu", bf16_tflops=0.7, read_gb_per_s=4.0)
    eff = load_profile(_write(tmp_path / "p.yaml", doc)).efficiency_vs_datasheet
    assert 0 < eff["bf16"] < 0.01 and 0 < eff["memory_read"] < 0.01  # 4 significant digits, not 4 decimals


def test_version_2_errors_name_the_field(tmp_path):
    doc = make_profile_doc()
    doc["measured"]["memory_read_gb_per_s"] = -1
    with pytest.raises(InputError) as exc:
        load_profile(_write(tmp_path / "bad.yaml", doc))
    assert "(version 2)" in exc.value.what and "measured.memory_read_gb_per_s" in exc.value.why
    doc = make_profile_doc()
    doc["gpu"] = {}  # a version-1 field in a version-2 file
    with pytest.raises(InputError, match="does not match its schema") as exc:
        load_profile(_write(tmp_path / "bad.yaml", doc))
    assert "'gpu' was unexpected" in exc.value.why
    doc = make_profile_doc()
    doc["schema_version"] = 3
    with pytest.raises(InputError, match="schema_version 3, which this hetplan does not read"):
        load_profile(_write(tmp_path / "bad.yaml", doc))
    with pytest.raises(InputError) as exc:
        load_profile(_write(tmp_path / "bad.yaml", make_profile_doc(gpu="NoSuchGPU", device_name="x")))
    assert "filed under 'NoSuchGPU'" in exc.value.what


def test_device_names_match_catalog_gpus():
    assert match_device("cuda", "NVIDIA H100 80GB HBM3", None, SHIPPED)[0].name == "H100-SXM"
    assert match_device("cuda", "NVIDIA H200", None, SHIPPED)[0].name == "H200-SXM"
    assert match_device("cuda", "NVIDIA A100-SXM4-80GB", None, SHIPPED)[0].name == "A100-80GB-SXM"
    assert match_device("cuda", "NVIDIA L4", None, SHIPPED)[0].name == "L4"
    assert match_device("cuda", "Some Future GPU", None, SHIPPED)[0] is None
    assert match_device("cpu", "Xeon", "H20", SHIPPED)[0].name == "H20"


def test_schema_is_shared_with_the_profiler_package():
    """hetplan ships a copy of the profiler's schema (it must read profiles without the profiler installed)."""
    source = ROOT / "profiler" / "src" / "hetplan_profiler" / "profile.schema.json"
    assert source.is_file(), "profiler/ is part of this repository (and of the sdist)"
    assert PROFILE_SCHEMA.read_bytes() == source.read_bytes(), "copy profiler's profile.schema.json to hetplan/catalog/"


def test_hetplan_and_the_profiler_check_documents_alike():
    schema_mod = pytest.importorskip("hetplan_profiler.schema")
    from hetplan.catalog.profile import profile_schema_errors

    good = make_profile_doc()
    assert profile_schema_errors(good) == [] and schema_mod.schema_errors(good) == []
    bad = make_profile_doc()
    bad["model_shapes"]["ffn_size"] = 0
    assert profile_schema_errors(bad) and schema_mod.schema_errors(bad)


def _without_profiler(monkeypatch):
    for name in [m for m in sys.modules if m == "hetplan_profiler" or m.startswith("hetplan_profiler.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "hetplan_profiler", None)


def test_profile_without_the_profiler_package_says_how_to_install(monkeypatch, tmp_path):
    _without_profiler(monkeypatch)
    res = invoke("profile", "--device", "cpu", "--quick")
    assert res.exit_code == 1, res.output
    assert "needs the hetplan profiler package" in res.output and "pip install ./profiler" in res.output
    assert "torch" in res.output
    # reading profiles needs no profiler: merge, plan --profile
    a = write_profile(tmp_path / "h100.yaml", bf16_tflops=650.0)
    assert invoke("profile", "merge", a, "--out", tmp_path / "cat").exit_code == 0
    plan = invoke("plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--json", "--no-analysis", "--profile", a)
    assert plan.exit_code == 0, plan.output


def test_profile_without_torch_says_how_to_install(monkeypatch):
    pytest.importorskip("hetplan_profiler")
    monkeypatch.setitem(sys.modules, "torch", None)
    res = invoke("profile", "--device", "cpu", "--quick")
    assert res.exit_code == 2
    assert "needs PyTorch" in res.output and "pip install torch" in res.output


def test_profiler_builtin_shapes_match_the_catalog():
    """hetplan-profile --model NAME uses a small built-in shape table; it must agree with hetplan's catalog."""
    shapes = pytest.importorskip("hetplan_profiler.shapes")
    from hetplan.catalog.profile_measure import model_shape_fields

    for name, shape in shapes.BUILTIN.items():
        assert shape.as_dict() == model_shape_fields(find_model(name)), name
