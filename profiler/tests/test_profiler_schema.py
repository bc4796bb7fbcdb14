"""The profile schema and the profiler's own small checker (no torch needed)."""

from __future__ import annotations

import copy
import json

import pytest

pytest.importorskip("hetplan_profiler")

from hetplan_profiler.bench import percentile  # noqa: E402
from hetplan_profiler.schema import load_schema, schema_errors  # noqa: E402


def good_doc():
    return {
        "schema_version": 2,
        "kind": "gpu-profile",
        "file_under": None,
        "device": {"device_kind": "cuda", "device_name": "NVIDIA H200", "memory_gib": 139.8, "torch_version": "2.5"},
        "measured": {
            "device_kind": "cuda",
            "device_name": "NVIDIA H200",
            "gemm_tflops": {"bf16": 790.0},
            "memory_read_gb_per_s": 4300.0,
            "memory_copy_gb_per_s": 4100.0,
        },
        "model_shapes": {
            "name": "Llama-3-8B",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "ffn_size": 14336,
            "gated_mlp": True,
        },
        "tables": {"gemm": [{"dtype": "bf16", "m": 4096, "tflops": 790.0}]},
        "provenance": {"profiler_version": "0.2.0", "command": "x", "profiled_at": "t", "timing": "CUDA events"},
        "notes": [],
    }


def broken_docs():
    def edit(fn):
        doc = good_doc()
        fn(doc)
        return doc

    return {
        "version": edit(lambda d: d.update(schema_version=1)),
        "unknown top field": edit(lambda d: d.update(gpu={})),
        "missing measured": edit(lambda d: d.pop("measured")),
        "negative read": edit(lambda d: d["measured"].update(memory_read_gb_per_s=-1)),
        "zero tflops": edit(lambda d: d["measured"]["gemm_tflops"].update(bf16=0)),
        "no dtype": edit(lambda d: d["measured"].update(gemm_tflops={})),
        "bad kind": edit(lambda d: d["measured"].update(device_kind="tpu")),
        "bool shape": edit(lambda d: d["model_shapes"].update(hidden_size=True)),
        "nested cell": edit(lambda d: d["tables"]["gemm"][0].update(m=[1])),
        "empty file_under": edit(lambda d: d.update(file_under="")),
        "unknown measured field": edit(lambda d: d["measured"].update(tflops=1.0)),
        "one all-reduce GPU": edit(lambda d: d["measured"].update(allreduce_gpus=1)),
    }


def test_good_document_passes_and_broken_ones_name_the_field():
    assert schema_errors(good_doc()) == []
    errors = {name: schema_errors(doc) for name, doc in broken_docs().items()}
    assert all(errors.values()), errors
    assert errors["negative read"][0].startswith("measured.memory_read_gb_per_s:")
    assert errors["unknown top field"] == ["(document): unknown field 'gpu'"]


def test_checker_agrees_with_jsonschema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    validator.check_schema(schema)
    assert validator.is_valid(good_doc())
    for name, doc in broken_docs().items():
        assert not validator.is_valid(doc), name
        assert schema_errors(doc), name


def test_checker_refuses_keywords_it_does_not_implement():
    schema = copy.deepcopy(load_schema())
    schema["properties"]["notes"]["pattern"] = "x"
    with pytest.raises(ValueError, match="'pattern' is not supported"):
        schema_errors(good_doc(), schema)


def test_schema_is_valid_json_with_a_version():
    schema = load_schema()
    assert schema["properties"]["schema_version"] == {"const": 2}
    json.dumps(schema)


def test_percentile_is_numpys_linear_method():
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0]
    assert percentile(values, 50) == 3.5
    assert percentile(values, 10) == pytest.approx(1.5)
    assert percentile(values, 90) == pytest.approx(7.5)
    assert percentile([2.0], 90) == 2.0
    np = pytest.importorskip("numpy")
    for q in (0, 10, 37, 50, 90, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
