"""Weight dtypes in the candidate space (issue 15): ``auto-quantized`` plans the model's dtype and fp8 on GPUs with
fp8 tensor cores and keeps the cheaper; a quantized plan is labelled with its accuracy note. ``auto`` (the default)
keeps the model's own dtype (issue 31: a buyer must not deploy a quantized model by default)."""

from __future__ import annotations

import pytest

from hetplan import api
from hetplan.catalog.loader import find_gpu, find_model
from hetplan.emit.settings import EmitSettings
from hetplan.emit.validate import validate_files
from hetplan.planning.dtypes import quality_note, weight_candidates
from hetplan.scenario import Scenario
from tests.conftest import EXAMPLES
from tests.emit.helpers import files_of

CONV = str(EXAMPLES / "data" / "azure_conv_15min.csv")


def _doc(**kw) -> dict:
    base = {"model": "Llama-3-70B", "workload": {"path": CONV}, "gpus": ["H100", "A100-80GB", "L40S"], "cloud": "aws"}
    base.update(kw)
    return api.to_doc(api.plan(Scenario(**base), analysis=False))


@pytest.fixture(scope="module")
def auto() -> dict:
    """The quantized search, opted into (the tests below were written when ``auto`` meant it)."""
    return _doc(weight_dtype="auto-quantized", goodput_req_per_s=5)


def test_auto_keeps_the_models_own_dtype_even_where_fp8_is_cheaper(auto):
    own = _doc(weight_dtype="auto", goodput_req_per_s=5)
    assert [(d["weight_dtype"], d["chosen"]) for d in own["dtype_search"]] == [("bf16", True)]
    assert own["scenario"]["weight_dtype"] == "bf16" and "quality_note" not in own
    bf16 = next(d for d in auto["dtype_search"] if d["weight_dtype"] == "bf16")
    assert own["total_usd_per_hour"] == bf16["total_usd_per_hour"]
    # the default is auto: a scenario that says nothing plans the model's dtype too
    base = {"model": "Llama-3-70B", "workload": {"path": CONV}, "gpus": ["H100", "A100-80GB", "L40S"], "cloud": "aws"}
    assert Scenario(**base).weight_dtype == "auto"


def test_auto_quantized_searches_model_dtype_and_fp8_and_keeps_the_cheaper(auto):
    search = {d["weight_dtype"]: d for d in auto["dtype_search"]}
    assert set(search) == {"bf16", "fp8"}
    feasible = {k: d["total_usd_per_hour"] for k, d in search.items() if d["status"] == "optimal"}
    chosen = [k for k, d in search.items() if d["chosen"]]
    assert chosen == [min(feasible, key=lambda k: (feasible[k], k != "bf16"))]
    assert auto["scenario"]["weight_dtype"] == chosen[0]
    assert auto["total_usd_per_hour"] == min(feasible.values())
    # fp8 weights only where the GPU has fp8 tensor cores (A100 has none)
    assert "A100-80GB-SXM" not in search["fp8"]["gpus"]
    assert all(find_gpu(g).fp8_dense_tflops for g in search["fp8"]["gpus"])


def test_a_quantized_plan_is_labelled_and_deploys(auto):
    if auto["scenario"]["weight_dtype"] == "fp8":
        assert "fp8 weights instead of the model's bf16" in auto["quality_note"]
        assert "check accuracy" in auto["quality_note"]
    else:
        assert "quality_note" not in auto
    report = validate_files(files_of(auto, EmitSettings(router_image="registry.example/vllm-router:0.1")))
    assert report.ok, report.errors


def test_pinned_dtype_plans_only_that_dtype():
    doc = _doc(weight_dtype="bf16", goodput_req_per_s=5, gpus=["H100"])
    assert "dtype_search" not in doc and "quality_note" not in doc
    fp8 = _doc(weight_dtype="fp8", goodput_req_per_s=5, gpus=["H100"])
    assert "dtype_search" not in fp8 and "fp8 weights" in fp8["quality_note"]


def test_weight_candidates_and_notes():
    spec = find_model("Llama-3-8B")
    assert weight_candidates(spec, "auto") == ["bf16"]
    assert weight_candidates(spec, "auto-quantized") == ["bf16", "fp8"]
    assert weight_candidates(spec, "int4") == ["int4"]
    assert quality_note(spec, "bf16", "bf16") is None
    assert "an fp8 KV cache" in (quality_note(spec, "bf16", "fp8") or "")
