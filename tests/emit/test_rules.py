"""Each deployment rule refuses a plan that breaks it, naming the rule, the numbers and the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetplan.emit import render
from hetplan.emit.rules import check_rules, find_violations
from hetplan.emit.settings import EmitSettings
from hetplan.errors import EmitRuleError, InputError
from tests.emit.helpers import aggregated, combo, files_of, ir_of, plan_doc, two_combo_plan


def _refused(plan, settings=None) -> EmitRuleError:
    with pytest.raises(EmitRuleError) as info:
        render(ir_of(plan, settings), ["all"])
    assert info.value.exit_code == 1
    return info.value


def _rules(err: EmitRuleError) -> set[str]:
    return {v[0] for v in err.violations}


def test_a_valid_plan_breaks_no_rule():
    ir = ir_of(plan_doc([combo("H100-SXM", 1, 2, "L40S", 2, 1)]))
    assert find_violations(ir) == []
    check_rules(ir)


def test_nixl_needs_prefill_tp_at_most_decode_tp():
    err = _refused(plan_doc([combo("H100-SXM", 4, 1, "L40S", 2, 1)]))
    assert err.rule == "nixl-tp" and _rules(err) == {"nixl-tp"}
    text = err.render()
    assert "combo 0 pairs prefill TP 4 (H100-SXM) with decode TP 2 (L40S) under NixlConnector" in text
    assert "[rule nixl-tp]" in text and "here 4 > 2" in text
    assert "To fix: re-plan so that prefill TP <= decode TP" in text


def test_mooncake_needs_equal_tp():
    plan = plan_doc([combo("H100-SXM", 1, 1, "L40S", 2, 1)])
    err = _refused(plan, EmitSettings(kv_connector="MooncakeConnector"))
    assert err.rule == "mooncake-tp"
    assert "MooncakeConnector needs equal TP on both sides; here 1 != 2" in err.why
    assert "--kv-connector nixl" in err.fix
    # equal TP is fine with Mooncake for the vLLM and Kubernetes targets
    ok = files_of(plan_doc([combo("H100-SXM", 2, 1, "L40S", 2, 1)]), EmitSettings(kv_connector="MooncakeConnector"),
                  ("vllm", "kubernetes"))  # fmt: skip
    assert "--kv-connector mooncake" in ok["vllm/syn-u0-router.sh"]
    assert "http://syn-u0-prefill-h100-sxm-0:8000 8998" in ok["vllm/syn-u0-router.sh"]


def test_llmd_and_dynamo_refuse_mooncake():
    plan = plan_doc([combo("H100-SXM", 2, 1, "L40S", 2, 1)])
    for target, rule in (("llmd", "llmd-connector"), ("dynamo", "dynamo-connector")):
        with pytest.raises(EmitRuleError) as info:
            render(ir_of(plan, EmitSettings(kv_connector="MooncakeConnector")), [target])
        assert info.value.rule == rule and "NIXL" in info.value.why


def test_kv_layout_equal_block_size_and_kv_dtype_on_both_sides():
    ir = ir_of(plan_doc([combo("H100-SXM", 1, 1, "L40S", 2, 1)]))
    unit = ir.units[0]
    prefill, decode = unit.groups
    odd = replace(decode, engine=replace(decode.engine, block_size_tokens=32, kv_cache_dtype="fp8"))
    bad = replace(ir, units=(replace(unit, groups=(prefill, odd)),))
    with pytest.raises(EmitRuleError) as info:
        check_rules(bad)
    assert _rules(info.value) == {"kv-layout"} and len(info.value.violations) == 2
    assert "prefill --block-size 16 differs from decode --block-size 32" in info.value.why
    assert "prefill --kv-cache-dtype auto differs from decode --kv-cache-dtype fp8" in info.value.why


def test_kv_layout_block_size_vllm_accepts():
    err = _refused(plan_doc([combo("H100-SXM", 1, 1, "L40S", 2, 1)], perf={"block_size_tokens": 24}))
    assert err.rule == "kv-block-size" and "--block-size 24 is not a vLLM block size" in err.render()


def test_tp_must_divide_attention_heads():
    # Llama-3-8B has 32 attention heads; TP 6 leaves 5.33 heads per rank
    err = _refused(plan_doc([combo("H100-SXM", 6, 1, "H100-SXM", 6, 1)]))
    assert err.rule == "tp-heads"
    assert "TP 6 does not divide the 32 attention heads of Llama-3-8B" in err.render()
    assert "32 heads / TP 6 = 5.33333" in err.why


def test_tp_times_pp_must_split_into_equal_pods():
    # TP1 x PP5 = 5 GPUs on 4-GPU nodes: 2 pods of 3 GPUs would be 6
    plan = plan_doc(instances=[aggregated("H100-SXM", 1, pp=5)])
    err = _refused(plan, EmitSettings(gpus_per_node=4))
    assert err.rule == "gpus-per-instance"
    assert "TP x PP = 5 GPUs does not split into 2 pod(s) of 3 GPUs" in err.what
    assert "--gpus-per-node" in err.fix
    files_of(plan, EmitSettings(gpus_per_node=8))  # fits one 8-GPU node


def test_plan_gpu_counts_must_match_instances():
    plan = plan_doc([combo("H100-SXM", 2, 3, "L40S", 2, 1)])
    plan["gpus_used"]["H100-SXM"] = 4  # 3 instances x TP2 = 6
    err = _refused(plan)
    assert err.rule == "gpus-per-instance"
    assert "H100-SXM: plan 4, instances 6" in err.why


def test_model_and_kv_reserve_must_fit():
    # Llama-3-70B in bf16 (~131 GiB) on one 24 GB L4: no room at all
    err = _refused(plan_doc([combo("L4", 1, 1, "L4", 1, 1)], model="Llama-3-70B"))
    assert err.rule == "fit" and _rules(err) == {"fit"}
    assert "GiB usable" in err.why and "KV room for 0 tokens" in err.why
    assert "--max-model-len" not in err.fix and "raise TP or PP" in err.fix


def test_kv_cache_must_hold_one_max_model_len_sequence():
    # Llama-3.1-8B defaults to a 131072-token context, more KV than one L4 holds next to the weights
    plan = plan_doc([combo("L4", 1, 1, "L4", 1, 1)], model="Llama-3.1-8B")
    err = _refused(plan)
    assert err.rule == "fit" and "one 131072-token sequence do not fit" in err.render()
    room = int(err.fix.split("--max-model-len ")[1].split()[0])
    assert 1000 < room < 131072
    files = files_of(plan, EmitSettings(max_model_len_tokens=room))  # the suggested value passes
    assert f"--max-model-len {room}" in files["vllm/syn-u0-decode-l4.sh"]


def test_max_model_len_within_position_embeddings():
    err = _refused(plan_doc([combo("H100-SXM", 1, 1, "H100-SXM", 1, 1)]), EmitSettings(max_model_len_tokens=10000))
    assert err.rule == "max-model-len"
    assert "--max-model-len 10000 exceeds Llama-3-8B's max_position_embeddings 8192" in err.what


def test_gpu_label_known_or_given():
    plan = plan_doc([combo("V100-SXM2", 1, 1, "V100-SXM2", 1, 1)], model="Llama-2-7B")
    err = _refused(plan)
    assert err.rule == "gpu-label" and "no node label value for GPU V100-SXM2" in err.what
    assert "--gpu-label V100-SXM2=VALUE" in err.fix
    files = files_of(plan, EmitSettings(gpu_labels=(("V100-SXM2", "Tesla-V100-SXM2-32GB"),)), ("kubernetes",))
    assert "nvidia.com/gpu.product: Tesla-V100-SXM2-32GB" in files["kubernetes/syn-u0-prefill-v100-sxm2.yaml"]


def test_non_nvidia_gpus_are_refused():
    err = _refused(plan_doc([combo("MI300X", 1, 1, "MI300X", 1, 1)]))
    assert {"gpu-vendor", "gpu-label"} <= _rules(err)
    assert "the plan breaks" in err.what and "hetplan emits NVIDIA deployments only" in err.why


def test_all_violations_are_reported_together():
    plan = plan_doc([combo("H100-SXM", 4, 1, "L40S", 2, 1), combo("L4", 1, 1, "L4", 1, 1)], model="Llama-3-70B")
    err = _refused(plan)
    assert _rules(err) == {"nixl-tp", "fit"}
    assert err.what == f"the plan breaks {len(err.violations)} deployment rules"


def test_real_plans_pass_and_mooncake_refuses_example_a():
    check_rules(ir_of(two_combo_plan()))
    err = _refused(two_combo_plan(), EmitSettings(kv_connector="MooncakeConnector"))
    assert [v[0] for v in err.violations] == ["mooncake-tp", "mooncake-tp"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (EmitSettings(namespace="Bad_NS"), "namespace 'Bad_NS' is not a DNS-1123 label"),
        (EmitSettings(gpu_label_key="bad key"), "GPU label key 'bad key' is not a valid Kubernetes label key"),
        (EmitSettings(gpu_labels=(("H100-SXM", "has space"),)), "--gpu-label H100-SXM 'has space'"),
        (EmitSettings(image=""), "--image '' is not an image reference"),
        (EmitSettings(kv_connector="P2p"), "unknown KV connector 'P2p'"),
        (EmitSettings(dynamo_api_versions=("v2",)), "unknown Dynamo API version 'v2'"),
        (EmitSettings(gpus_per_node=0), "--gpus-per-node must be an integer >= 1"),
        (EmitSettings(autoscaler="vpa"), "unknown autoscaler 'vpa'"),
    ],
)
def test_bad_settings_are_input_errors(settings, message):
    with pytest.raises(InputError) as info:
        ir_of(plan_doc([combo("H100-SXM", 1, 1, "L40S", 2, 1)]), settings)
    assert info.value.exit_code == 2 and message in info.value.render()


def test_quantized_weights_need_a_checkpoint():
    plan = plan_doc([combo("H100-SXM", 1, 1, "L40S", 2, 1)], weight_dtype="int4")
    with pytest.raises(InputError, match="int4 weights but no quantized checkpoint"):
        ir_of(plan)
    ir = ir_of(plan, EmitSettings(model_source="org/llama3-8b-awq"))
    assert ir.model.source == "org/llama3-8b-awq" and ir.groups[0].engine.dtype == "auto"


def test_fp8_weights_and_kv_map_to_vllm_flags():
    ir = ir_of(plan_doc([combo("H100-SXM", 1, 1, "L40S", 2, 1)], weight_dtype="fp8", kv_dtype="fp8"))
    e = ir.groups[0].engine
    assert (e.dtype, e.quantization, e.kv_cache_dtype) == ("bfloat16", "fp8", "fp8")


# -- pd-pp: PP only where the engine's prefill/decode KV hand-off supports it (issue 33, multi-node) ---------------


def test_vllm_refuses_pipeline_parallel_prefill_decode():
    # vLLM's NixlConnector hands KV off per TP rank: a PP2 prefill (or decode) side cannot pass its KV on
    plan = plan_doc([combo("L40S", 2, 2, "L40S", 4, 1, prefill_pp=2)], model="Llama-3-70B")
    err = _refused(plan)
    assert _rules(err) == {"pd-pp"}
    assert "combo 0 prefill (L40S, TP 2, PP 2) runs PP 2 in a prefill/decode pair" in err.render()
    assert "vllm issue 22430" in err.render().lower()
    assert "--strategy melange" in err.fix
    # the same layout aggregated (no KV moves between engines) emits
    files_of(plan_doc(instances=[aggregated("L40S", 2, pp=2)], model="Llama-3-70B"))


def test_sglang_allows_prefill_pp_and_refuses_decode_pp():
    perf = {"engine": "sglang", "gpu_memory_utilization": 0.9}
    prefill_pp = plan_doc([combo("L40S", 2, 2, "L40S", 4, 1, prefill_pp=2)], model="Llama-3-70B", perf=perf)
    assert not [v for v in find_violations(ir_of(prefill_pp)) if v.rule == "pd-pp"]
    decode_pp = plan_doc([combo("L40S", 4, 1, "L40S", 2, 2, decode_pp=2)], model="Llama-3-70B", perf=perf)
    hits = [v for v in find_violations(ir_of(decode_pp)) if v.rule == "pd-pp"]
    assert [h.what for h in hits] == ["combo 0 decode (L40S, TP 2, PP 2) runs PP 2 in a prefill/decode pair"]
    assert "SGLang supports prefill PP only" in hits[0].why
