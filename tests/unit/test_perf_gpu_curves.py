"""Curves per GPU x engine fitted on measured kernels (issue 30): a GPU with its own curves takes them, one without
falls back to its architecture's and says so; the new curve fields act on the operators they describe."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import find_gpu, find_model
from hetplan.errors import CatalogError
from hetplan.perf.arch import ModelArch
from hetplan.perf.calibration import curves_for, load_perf_catalog
from hetplan.perf.closed_loop import Rows, build_rows, closed_loop, row_constants, step_s
from hetplan.perf.points import estimate_points
from tests.conftest import ROOT


@pytest.fixture
def catalogs(tmp_path: Path):
    folder = tmp_path / "catalogs"
    shutil.copytree(ROOT / "catalogs", folder)
    return folder


def test_a_gpu_with_kernel_curves_takes_its_own() -> None:
    shipped = Catalog.shipped()
    doc = load_perf_catalog("vllm", shipped)
    assert doc is not None and "H100-SXM" in doc["gpu_curves"]
    own, note = curves_for("vllm", "Hopper", gpu="H100-SXM", catalog=shipped)
    arch, _ = curves_for("vllm", "Hopper", catalog=shipped)
    assert note is None
    assert own.gemm_max == doc["gpu_curves"]["H100-SXM"]["gemm_max"] != arch.gemm_max
    assert own.kv_mbu == doc["gpu_curves"]["H100-SXM"]["kv_mbu"]


def test_a100_and_l40s_take_their_own_kernel_curves_and_say_the_overheads_are_borrowed() -> None:
    for gpu in ("A100-80GB-SXM", "L40S"):
        out = estimate_points([{"model": "Llama-3.1-8B", "gpu": gpu, "concurrency": "8", "isl": "512",
                                "osl": "128"}])[0]  # fmt: skip
        assert "error" not in out
        assert any(f"no measured vllm serving data for {gpu}" in n and "own measured vllm kernel tables" in n
                   for n in out["notes"]), out["notes"]  # fmt: skip
    l4 = estimate_points([{"model": "Llama-3.1-8B", "gpu": "L4", "concurrency": "8", "isl": "512", "osl": "128"}])[0]
    assert any("no measured vllm data for L4" in n and "L40S" in n for n in l4["notes"]), l4["notes"]


def test_architecture_curves_without_kv_mbu_use_mbu(catalogs: Path) -> None:
    path = catalogs / "perf" / "vllm.yaml"
    doc = yaml.safe_load(path.read_text())
    assert "kv_mbu" not in doc["curves"]["Hopper"]
    doc["curves"]["Hopper"]["mbu"] = 0.5
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    curves, _ = curves_for("vllm", "Hopper", catalog=Catalog.from_folder(catalogs))  # a new value reads the file
    assert curves.kv_mbu == curves.mbu == 0.5
    assert curves.moe_efficiency == 1.0


def test_unknown_field_in_gpu_curves_is_a_catalog_error(catalogs: Path) -> None:
    path = catalogs / "perf" / "vllm.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["gpu_curves"]["H100-SXM"]["gemm_maxx"] = 0.5
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(CatalogError, match=r"gpu_curves\.H100-SXM has unknown fields \['gemm_maxx'\]"):
        curves_for("vllm", "Hopper", gpu="H100-SXM", catalog=Catalog.from_folder(catalogs))


def _rows(model: str, weight_dtype: str, **curve_fields: float) -> Rows:
    arch = ModelArch(find_model(model), weight_dtype)
    gpu = find_gpu("H200-SXM")
    curves = replace(curves_for("vllm", gpu.arch, gpu=gpu.name, catalog=Catalog.shipped())[0], **curve_fields)
    return build_rows([row_constants(arch, gpu, 8, 1, curves, 8192, True, 256)])


def test_kv_mbu_sets_the_decode_attention_bandwidth() -> None:
    b, ctx, zero = np.array([64.0]), np.array([8192.0]), np.zeros(1)
    fast = step_s(_rows("Llama-3.1-70B", "fp8", kv_mbu=0.9), b, ctx, zero, zero)
    slow = step_s(_rows("Llama-3.1-70B", "fp8", kv_mbu=0.45), b, ctx, zero, zero)
    assert slow[0] > fast[0] * 1.2  # long contexts: the KV read dominates the decode step


def test_moe_efficiency_scales_the_routed_experts_only() -> None:
    b, ctx, zero = np.array([32.0]), np.array([2048.0]), np.zeros(1)
    moe = [step_s(_rows("Qwen3-235B-A22B", "fp8", moe_efficiency=e), b, ctx, zero, zero)[0] for e in (1.0, 0.5)]
    dense = [step_s(_rows("Llama-3.1-70B", "fp8", moe_efficiency=e), b, ctx, zero, zero)[0] for e in (1.0, 0.5)]
    assert moe[1] > moe[0]
    assert dense[1] == dense[0]


def test_sync_half_clients_raises_ttft_at_high_concurrency() -> None:
    c, isl, osl = np.array([256.0]), np.array([4096.0]), np.array([256.0])
    never = closed_loop(_rows("Llama-3.1-70B", "fp8", sync_share=0.01, sync_half_clients=1e9), c, isl, osl)
    soon = closed_loop(_rows("Llama-3.1-70B", "fp8", sync_share=0.01, sync_half_clients=32.0), c, isl, osl)
    assert soon.ttft_s[0] > never.ttft_s[0]


def test_a_plan_says_which_gpus_borrow_curves() -> None:
    from hetplan.planning.request import build_request
    from hetplan.scenario import Scenario
    from tests.conftest import EXAMPLES

    scenario = Scenario(
        model="Llama-3.1-8B", workload={"path": str(EXAMPLES / "data" / "azure_conv_15min.csv")},
        gpus=["H100", "L4", "L40S"], cloud="aws", goodput_req_per_s=3.0,
    )  # fmt: skip
    per_gpu = build_request(scenario)[3]
    borrowed = {name for name, text in per_gpu if "no measured vllm data" in text}
    overheads_only = {name for name, text in per_gpu if "no measured vllm serving data" in text}
    assert (borrowed, overheads_only) == ({"L4"}, {"L40S"}), per_gpu


def test_prefill_steps_of_their_own_stop_decoding_but_not_the_prompt() -> None:
    """``prefill_mix`` 0 (SGLang's default scheduler: prefill batches as steps of their own, ahead of decoding):
    the decodes stop while prompts prefill, so TPOT is higher, and a prompt's step carries no decodes, so TTFT is
    lower, than with prefill mixed into the decode steps (vLLM, TensorRT-LLM)."""
    c, isl, osl = np.array([64.0]), np.array([4000.0]), np.array([100.0])
    mixed = closed_loop(_rows("Llama-3.1-70B", "fp8", prefill_mix=1.0), c, isl, osl)
    apart = closed_loop(_rows("Llama-3.1-70B", "fp8", prefill_mix=0.0), c, isl, osl)
    assert apart.tpot_s[0] > mixed.tpot_s[0] * 1.05
    assert apart.ttft_s[0] < mixed.ttft_s[0]


def test_shipped_prefill_mix_follows_each_engines_scheduler() -> None:
    gpu = find_gpu("H200-SXM")
    mix = {
        e: curves_for(e, gpu.arch, gpu.vendor, gpu.name, catalog=Catalog.shipped())[0].prefill_mix
        for e in ("vllm", "sglang", "trtllm")
    }
    assert mix == {"vllm": 1.0, "sglang": 0.0, "trtllm": 1.0}
