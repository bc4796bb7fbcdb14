"""SGLang and TensorRT-LLM plans emit (issue 33 item 1): launch flags carry the plan's memory and batching settings,
``all`` picks the plan's engine, another engine's target is refused, and ``--validate`` checks the engines'
arguments against the pinned tables of the plan's version line."""

from __future__ import annotations

import json
from functools import cache

import pytest
import yaml

from hetplan import api
from hetplan.emit import render
from hetplan.emit.engines import TRTLLM_OPTION_KEYS, command_errors, commands_in, config_errors
from hetplan.emit.settings import EmitSettings
from hetplan.emit.validate import validate_files
from hetplan.errors import EmitRuleError, InputError
from hetplan.scenario import load_scenario
from tests.conftest import EXAMPLES
from tests.emit.helpers import aggregated, all_docs, combo, files_of, ir_of, plan_doc

ENGINE_PERF = {
    "sglang": {"engine": "sglang", "gpu_memory_utilization": 0.8, "block_size_tokens": 1, "max_num_seqs": 512},
    "trtllm": {"engine": "trtllm", "gpu_memory_utilization": 0.85, "block_size_tokens": 32, "max_num_seqs": 512},
}
VERSION = {"sglang": "SGLang 0.5", "trtllm": "TensorRT-LLM 1.1"}
ENGINE_VERSION = {"sglang": "0.5", "trtllm": "1.1"}


def _plan(engine: str, **perf):
    """One H100 TP2 -> H100 TP4 combo of Llama-3-8B (decode batch 40), made for ``engine``."""
    return plan_doc([combo("H100-SXM", 2, 1, "H100-SXM", 4, 1)], perf={**ENGINE_PERF[engine], **perf})


def _script_argv(files: dict[str, str], path: str) -> list[str]:
    (argv,) = commands_in(files[path])
    return argv


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_sglang_flags_carry_the_plans_memory_and_batching():
    files = files_of(_plan("sglang"), targets=("sglang",))
    prefill = _script_argv(files, "sglang/syn-u0-prefill-h100-sxm.sh")
    decode = _script_argv(files, "sglang/syn-u0-decode-h100-sxm.sh")
    assert prefill[:3] == ["python3", "-m", "sglang.launch_server"]
    assert _value(prefill, "--mem-fraction-static") == "0.8"  # the planner's static fraction
    assert _value(prefill, "--tp-size") == "2" and _value(decode, "--tp-size") == "4"
    assert _value(prefill, "--max-running-requests") == "512"
    assert _value(decode, "--max-running-requests") == "40"  # the plan's decode batch
    assert _value(prefill, "--chunked-prefill-size") == "8192" and _value(prefill, "--page-size") == "1"
    assert _value(prefill, "--kv-cache-dtype") == "auto"
    assert _value(prefill, "--disaggregation-mode") == "prefill" and _value(decode, "--disaggregation-mode") == "decode"
    router = _script_argv(files, "sglang/syn-u0-router.sh")
    assert router[:3] == ["python3", "-m", "sglang_router.launch_router"] and "--pd-disaggregation" in router
    assert "8998" in router  # the prefill bootstrap port follows each prefill URL


def test_sglang_fp8_kv_cache_is_fp8_e4m3():
    files = files_of(plan_doc([combo("H100-SXM", 2, 1, "H100-SXM", 4, 1)], kv_dtype="fp8", perf=ENGINE_PERF["sglang"]))
    assert _value(_script_argv(files, "sglang/syn-u0-decode-h100-sxm.sh"), "--kv-cache-dtype") == "fp8_e4m3"


def test_trtllm_options_carry_the_plans_memory_and_batching():
    files = files_of(_plan("trtllm"), targets=("trtllm",))
    prefill = yaml.safe_load(files["trtllm/syn-u0-prefill-h100-sxm.options.yaml"])
    decode = yaml.safe_load(files["trtllm/syn-u0-decode-h100-sxm.options.yaml"])
    assert prefill["kv_cache_config"] == {"free_gpu_memory_fraction": 0.85, "dtype": "auto"}
    assert prefill["tensor_parallel_size"] == 2 and decode["tensor_parallel_size"] == 4
    assert prefill["max_batch_size"] == 512 and decode["max_batch_size"] == 40
    assert prefill["max_num_tokens"] == 8192
    assert prefill["disable_overlap_scheduler"] is True and "disable_overlap_scheduler" not in decode
    assert prefill["cache_transceiver_config"] == decode["cache_transceiver_config"] == {"backend": "NIXL"}
    disagg = yaml.safe_load(files["trtllm/syn-u0-disagg.yaml"])
    assert disagg["context_servers"]["urls"] == ["syn-u0-prefill-h100-sxm-0:8000"]
    assert disagg["generation_servers"]["urls"] == ["syn-u0-decode-h100-sxm-0:8000"]
    argv = _script_argv(files, "trtllm/syn-u0-prefill-h100-sxm.sh")
    assert argv[0] == "trtllm-serve" and argv[argv.index("--extra_llm_api_options") + 1].endswith(
        "syn-u0-prefill-h100-sxm.options.yaml"
    )


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_manifests_run_the_plans_engine_and_validate(engine):
    files = files_of(_plan(engine))
    llmd = {"llmd"} if engine == "sglang" else set()  # no llm-d sidecar connector for TensorRT-LLM P/D
    assert {p.split("/")[0] for p in files} == {engine, "kubernetes", "dynamo"} | llmd
    text = "".join(t for p, t in files.items() if p.startswith(("kubernetes/", "llmd/", "dynamo/")))
    assert {"sglang": "sglang.launch_server", "trtllm": "trtllm-serve"}[engine] in text
    assert "vllm serve" not in text and "dynamo.vllm" not in text
    assert f"backendFramework: {engine}" in text
    report = validate_files(files, engine=(engine, ENGINE_VERSION[engine]))
    assert report.ok, report.errors
    assert all(VERSION[engine] in t for t in files.values()), "every file names the engine version"


def test_another_engines_target_is_refused():
    with pytest.raises(InputError, match="--target vllm writes vllm launch scripts, but this plan was made for sglang"):
        render(ir_of(_plan("sglang")), ["vllm"])
    with pytest.raises(InputError, match="made for vllm"):
        render(ir_of(plan_doc([combo("H100-SXM", 2, 1, "H100-SXM", 4, 1)])), ["trtllm"])


def test_an_engine_version_without_a_table_is_refused():
    with pytest.raises(InputError, match="SGLang 0.3.6, and hetplan has no argument table"):
        ir_of(_plan("sglang", engine_version="0.3.6"))


def test_trtllm_fp8_weights_need_a_checkpoint():
    doc = plan_doc([combo("H100-SXM", 2, 1, "H100-SXM", 4, 1)], weight_dtype="fp8", perf=ENGINE_PERF["trtllm"])
    with pytest.raises(InputError, match="pre-quantized checkpoint"):
        ir_of(doc)
    options = files_of(doc, EmitSettings(model_source="nvidia/Llama-3-8B-FP8"), ("trtllm",))
    assert "quantization" not in options["trtllm/syn-u0-prefill-h100-sxm.options.yaml"]


def test_trtllm_instance_over_two_nodes_is_refused():
    doc = _plan("trtllm")
    with pytest.raises(EmitRuleError, match="spans 2 nodes of 2 GPUs") as exc:
        files_of(doc, EmitSettings(gpus_per_node=2))
    assert exc.value.rule == "trtllm-multi-node"


def test_validation_names_undocumented_arguments_and_keys():
    script = "#!/bin/bash\nexec python3 -m sglang.launch_server \\\n  --tp-size 2 \\\n  --gpu-memory-utilization 0.9\n"
    report = validate_files({"sglang/x.sh": script}, engine=("sglang", "0.5"))
    assert report.errors == ("sglang/x.sh: --gpu-memory-utilization is not a documented SGLang 0.5 server argument",)
    bad_choice = command_errors(["python3", "-m", "sglang.launch_server", "--kv-cache-dtype", "fp8"], "sglang", "0.5")
    assert bad_choice == ["--kv-cache-dtype 'fp8' is not one of auto, fp8_e4m3, fp8_e5m2"]
    assert command_errors(["trtllm-serve", "m", "--tp-size", "2"], "trtllm", "1.1") == [
        "--tp-size is not a documented TensorRT-LLM 1.1 trtllm-serve argument"
    ]
    errs = config_errors({"kv_cache_config": {"gpu_memory_utilization": 0.9}}, TRTLLM_OPTION_KEYS, "1.1", "options")
    assert errs == ["kv_cache_config.gpu_memory_utilization is not a documented TensorRT-LLM 1.1 options key"]


# -- the bundled examples, planned for each engine (acceptance of issue 33) ------------------------------------------


@cache
def _example_plan(example: str, engine: str, strategy: str) -> str:
    scenario = load_scenario(EXAMPLES / f"{example}.yaml").model_copy(update={"engine": engine})
    return json.dumps(api.to_doc(api.plan(scenario, strategy=strategy, analysis=False)))


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
@pytest.mark.parametrize(
    ("example", "strategy"),
    [("cauchy-h800-a800-h20", "cauchy"), ("llama3-70b-azure-conv", "melange"), ("llama31-8b-mooncake", "cauchy")],
)
def test_bundled_examples_emit_all_targets_for_each_engine(example, strategy, engine, tmp_path):
    doc = json.loads(_example_plan(example, engine, strategy))
    assert doc["engine"] == engine
    result = api.emit(doc, tmp_path, ["all"], validate=True)
    assert result.validation is not None and result.validation.ok
    # TensorRT-LLM prefill/decode plans: llm-d's routing sidecar has no TensorRT-LLM connector, `all` leaves it out
    pd_trtllm = engine == "trtllm" and strategy != "melange"
    assert result.targets == (engine, "kubernetes", *(() if pd_trtllm else ("llmd",)), "dynamo")
    for entry in result.files:
        text = (tmp_path / entry.file).read_text()
        if entry.file.endswith(".json"):  # routing.json names it as data
            assert json.loads(text)["engine"] == {"name": engine, "version": ENGINE_VERSION[engine]}, entry.file
        else:
            assert VERSION[engine] in text, entry.file


# -- llm-d for other engines' prefill/decode (issue 33 item 2) ---------------------------------------------------


def test_llmd_sidecar_speaks_sglangs_bootstrap_protocol():
    files = files_of(_plan("sglang"), targets=("llmd",))
    pods = [d for d in all_docs(files, "llmd/") if d["kind"] == "DisaggregatedSet"]
    roles = {r["name"]: r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"] for r in pods[0]["spec"]["roles"]}
    sidecar = roles["decode"]["initContainers"][0]
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0"  # the first release with it
    assert "--connector=sglang" in sidecar["args"] and "--vllm-port=8200" in sidecar["args"]
    decode_argv = roles["decode"]["containers"][0]["command"] + roles["decode"]["containers"][0].get("args", [])
    assert "8200" in " ".join(decode_argv)  # the decode server listens where the sidecar forwards
    prefill_argv = " ".join(roles["prefill"]["containers"][0]["command"] + roles["prefill"]["containers"][0]["args"])
    assert "--disaggregation-bootstrap-port 8998" in prefill_argv  # the port the sidecar's connector sends
    # vLLM plans keep the nixlv2 connector and the image they had
    vllm_plan = plan_doc([combo("H100-SXM", 2, 1, "H100-SXM", 4, 1)])
    vllm = all_docs(files_of(vllm_plan, targets=("llmd",)), "llmd/")
    spec = vllm[0]["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert spec["initContainers"][0]["image"] == "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0"
    assert "--connector=nixlv2" in spec["initContainers"][0]["args"]


def test_llmd_refuses_tensorrt_llm_prefill_decode_and_all_leaves_it_out():
    with pytest.raises(EmitRuleError) as info:
        files_of(_plan("trtllm"), targets=("llmd",))
    assert info.value.rule == "llmd-engine"
    assert "connectors for vLLM (nixlv2) and SGLang (sglang) only" in info.value.why
    assert "--target dynamo" in info.value.fix
    ir = ir_of(_plan("trtllm"))
    assert any("llm-d is not written for TensorRT-LLM prefill/decode units" in n for n in ir.notes)
    files = files_of(_plan("trtllm"))
    assert not any(p.startswith("llmd/") for p in files)
    assert any(p.startswith("dynamo/") for p in files)
    # aggregated TensorRT-LLM units need no prefill/decode hand-off: llm-d is written
    agg = plan_doc(instances=[aggregated("H100-SXM", 2)], model="Llama-3-8B", perf=ENGINE_PERF["trtllm"])
    assert any(p.startswith("llmd/") for p in files_of(agg))
