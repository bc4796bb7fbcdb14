"""Plan -> deployment IR (:func:`build_ir`): every routing unit of a typed plan becomes a
:class:`~hetplan.emit.ir.ServingUnit` with one :class:`~hetplan.emit.ir.InstanceGroup` per role, the engine flags,
replicas, node spread and labels the emitters write, checked against the emit settings.

Source: hetplan's own reconstruction (IR between plan and emitters after aiconfigurator's ``generator/ir.py``).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

from hetplan.deploy_rules import DEFAULT_ENGINE_VERSION, DEFAULT_SCALE_UP_GPUS
from hetplan.emit.ir import (
    ENGINE_NAMES,
    DeploymentIR,
    EngineFlags,
    InstanceGroup,
    ModelIR,
    ServingUnit,
)
from hetplan.emit.names import dns_name
from hetplan.emit.settings import (
    MAX_BASE_NAME,
    EmitSettings,
    Role,
    check_custom_labels,
    check_settings,
)
from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.routing import table_from_plan


def _dtypes(weight_dtype: str, kv_dtype: str) -> tuple[str, str | None, str]:
    """vLLM ``--dtype``, ``--quantization`` and ``--kv-cache-dtype`` for the plan's dtypes."""
    activation = {"bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}.get(weight_dtype, "auto")
    quantization = "fp8" if weight_dtype == "fp8" else None
    if kv_dtype == "fp8":
        return activation, quantization, "fp8"
    if kv_dtype not in ("bf16", "fp16"):
        raise InputError(
            f"plan kv_dtype {kv_dtype!r} has no vLLM --kv-cache-dtype", fix="plan with --kv-dtype bf16, fp16 or fp8"
        )
    wanted = {"bf16": "bfloat16", "fp16": "float16"}[kv_dtype]
    if activation not in ("auto", wanted):
        raise InputError(
            f"KV cache dtype {kv_dtype} with {weight_dtype} weights cannot be expressed in vLLM",
            f"a 16-bit KV cache follows the model dtype ('auto' = {activation})",
            f"plan with --kv-dtype {'bf16' if activation == 'bfloat16' else 'fp16'} or fp8",
        )
    return activation, quantization, "auto"


def _spread(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs per pod) for an instance of ``gpus`` GPUs on nodes of ``gpus_per_node``."""
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    return nodes, math.ceil(gpus / nodes)


def _max_replicas(planned: int, gpus_per_instance: int, gpu: str, plan: Plan, s: EmitSettings) -> int:
    if gpu in plan.inventory:
        spare = max(0, int(plan.inventory[gpu]) - int(plan.gpus_used.get(gpu, 0)))
        return planned + spare // gpus_per_instance
    return max(planned, math.ceil(planned * s.max_replicas_factor))


def build_ir(plan: Plan, settings: EmitSettings | None = None) -> DeploymentIR:
    """Turn a typed plan into a :class:`DeploymentIR` (no rules are checked here; see ``rules.check_rules``).

    The model architecture, GPU entries and engine settings are the plan's own (``plan.model``, ``plan.gpus``,
    ``plan.settings``): nothing is looked up in the catalog, so a plan for a profiled GPU or a ``config.json``
    model emits as it was planned.

    Autoscaling targets (per pod, hetplan's own reconstruction): prefill holds ``vllm:num_requests_waiting`` at
    ``floor(prefill capacity [req/s] x TTFT SLO [s])`` (the queue an instance clears within the SLO), decode holds
    ``vllm:num_requests_running`` at the plan's decode batch, aggregated holds ``vllm:num_requests_waiting`` at 2.
    Autoscaling max: planned + spare inventory of that GPU type / GPUs per instance, or ceil(planned x
    ``max_replicas_factor``) without an inventory.

    Raises:
        InputError: the plan lacks a model source (a model with no Hugging Face repo and no --model-source), uses
            quantized weights without a checkpoint, a setting is bad, a unit names a GPU the plan has no entry for, or
            a SGLang or TensorRT-LLM plan names an engine version hetplan has no argument table for.
    """
    engine_name = str(getattr(plan.settings, "engine", "vllm") or "vllm")
    s = settings or EmitSettings()
    check_settings(s)
    spec = plan.model.spec
    source = s.model_source or spec.hf_repo
    if not source:
        where = f" (read from {plan.model.path})" if plan.model.path else " in the catalog"
        raise InputError(
            f"model {spec.name} has no Hugging Face repo{where}",
            "engines need a repo id or a path to load",
            "pass --model-source REPO_OR_PATH",
        )
    weight_dtype, kv_dtype = plan.weight_dtype, plan.kv_dtype
    if weight_dtype in ("int4", "int8") and not s.model_source:
        raise InputError(
            f"plan uses {weight_dtype} weights but no quantized checkpoint was given",
            f"the model repo {spec.hf_repo} holds 16-bit weights",
            "pass --model-source with an AWQ/GPTQ checkpoint of the model",
        )
    dtype, quantization, kv_cache_dtype = _dtypes(weight_dtype, kv_dtype)
    perf = plan.settings
    planned = _planned_deployment(plan)
    engine_version = str(planned.get("engine_version", DEFAULT_ENGINE_VERSION))
    if engine_name != "vllm":
        from hetplan.emit.engines import check_engine_version
        from hetplan.perf.engines import engine_rules

        # the plan's perf_settings name the engine and its version (empty: the fitted rules' version); the
        # scenario.deployment block records the vLLM deployment rules the planner checked, not the engine
        engine_version = perf.engine_version or engine_rules(engine_name).version
        check_engine_version(engine_name, engine_version)
        kv_cache_dtype = {"sglang": {"fp8": "fp8_e4m3"}, "trtllm": {"fp8": "fp8"}}[engine_name].get(kv_dtype, "auto")
        if engine_name == "trtllm" and quantization and not s.model_source:
            raise InputError(
                f"plan uses {weight_dtype} weights on TensorRT-LLM, which loads a pre-quantized checkpoint",
                f"the model repo {spec.hf_repo} holds 16-bit weights",
                "pass --model-source with an FP8 (ModelOpt) checkpoint of the model",
            )
        quantization = None if engine_name == "trtllm" else quantization
    # --max-model-len: the user's, else the plan's (the longest request it keeps), else the model's context window
    max_len = int(s.max_model_len_tokens or planned.get("max_model_len_tokens") or spec.max_position_embeddings)
    ttft_slo_s = plan.slo.ttft_s
    base = dns_name(s.name or plan.name, MAX_BASE_NAME)
    if not base[0].isalpha():  # Service names are DNS-1035 labels: they start with a letter
        base = dns_name("hp-" + base, MAX_BASE_NAME)
    total_goodput = plan.goodput_req_per_s or 1.0

    def group(
        unit: int,
        role: Role,
        gpu_name: str,
        tp: int,
        pp: int,
        per_copy: int,
        count: int,
        target: int,
        bounds: tuple[int, int] | None = None,
        placed: tuple[str, bool] = ("", False),
    ) -> InstanceGroup:
        """One role of one unit; ``bounds`` (min, max copies, from an autoscaling schedule) override the
        planned count as the autoscaler's minimum and the spare-inventory maximum; ``placed`` is the purchased
        (instance type, owned) the plan puts it on, whose GPUs per instance are the node size."""
        gpu = plan.gpu(gpu_name)
        per_node = s.gpus_per_node
        bought = next((p for p in plan.purchase if (p.instance_type, p.gpu) == (placed[0], gpu.name)), None)
        if bought is not None:
            per_node = bought.gpus_per_instance
        nodes, per_pod = _spread(tp * pp, per_node)
        backend = "ray" if nodes > 1 else None
        kv_role = {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role)
        engine = EngineFlags(
            tp, pp, min(perf.max_num_seqs, target) if role == "decode" else perf.max_num_seqs,
            perf.max_num_batched_tokens, perf.gpu_memory_utilization, max_len, perf.block_size_tokens,
            dtype, quantization, kv_cache_dtype,
            s.kv_connector if kv_role else None, kv_role, backend,
        )  # fmt: skip
        planned = per_copy * (bounds[0] if bounds else count)
        metric = "vllm:num_requests_running" if role == "decode" else "vllm:num_requests_waiting"
        if engine_name == "sglang":  # SGLang's Prometheus gauges (--enable-metrics)
            metric = "sglang:num_running_reqs" if role == "decode" else "sglang:num_queue_reqs"
        return InstanceGroup(
            name=f"{base}-u{unit}-{role}-{dns_name(gpu.name, 20)}",
            role=role,
            unit_index=unit,
            gpu=gpu.name,
            gpu_vendor=gpu.vendor,
            gpu_label_key=s.label_key,
            gpu_label_value=s.label_for(gpu.name),
            gpu_label_values=s.labels_for(gpu.name),
            gpu_memory_key=s.node_provisioner.memory_key,
            tp=tp,
            pp=pp,
            gpus_per_instance=tp * pp,
            nodes_per_instance=nodes,
            gpus_per_pod=per_pod,
            gpus_per_node=per_node,
            instances_per_copy=per_copy,
            replicas=planned,
            max_replicas=per_copy * bounds[1] if bounds else _max_replicas(planned, tp * pp, gpu.name, plan, s),
            port=s.engine_port,
            engine=engine,
            scale_metric=metric,
            scale_target_requests=max(1, target),
            gpu_spec=gpu,
            instance_type=placed[0],
            owned=placed[1],
        )

    units: list[ServingUnit] = []
    for i, combo in enumerate(plan.combos):
        where = f"plan combos[{i}]"
        count = combo.count
        prefill_target = int(combo.prefill_capacity_req_per_s * ttft_slo_s)
        bounds = None
        if combo.min_count is not None:  # a schedule from hetplan autoscale: the autoscaler moves between these
            if not 0 <= combo.min_count <= count:
                raise InputError(f"{where}.min_count must be an integer in 0..count, got {combo.min_count!r}",
                                 fix="fix it")  # fmt: skip
            bounds = (combo.min_count, count)
        groups = (
            group(i, "prefill", combo.prefill_gpu, combo.prefill_tp, combo.prefill_pp, combo.n_prefill, count,
                  prefill_target, bounds, (combo.prefill_instance_type, combo.prefill_owned)),
            group(i, "decode", combo.decode_gpu, combo.decode_tp, combo.decode_pp, combo.n_decode, count,
                  max(1, combo.decode_batch), bounds, (combo.decode_instance_type, combo.decode_owned)),
        )  # fmt: skip
        goodput = combo.goodput_req_per_s
        # a mixed plan's combo takes the traffic share of the size buckets it serves; otherwise its goodput share
        share = combo.traffic_share if combo.traffic_share is not None else goodput * count / total_goodput
        units.append(ServingUnit(i, f"{base}-u{i}", "disaggregated", count, goodput, share, groups))
    offset = len(units)
    instances = plan.instances
    shares = [inst.traffic_share for inst in instances]
    for j, inst in enumerate(instances):
        where, i = f"plan instances[{j}]", offset + j
        if inst.role != "aggregated":
            raise InputError(f"{where}.role must be 'aggregated', got {inst.role!r}", fix="fix that field")
        share = shares[j] if sum(shares) > 0 else 1.0 / len(instances)
        g = group(i, "aggregated", inst.gpu, inst.tp, inst.pp, inst.count, 1, 2, None, (inst.instance_type, inst.owned))
        units.append(ServingUnit(i, f"{base}-u{i}", "aggregated", 1, total_goodput * share, share, (g,)))
    notes = []
    if not s.max_model_len_tokens and planned.get("max_model_len_tokens") and max_len < spec.max_position_embeddings:
        notes.append(
            f"--max-model-len {max_len:,} tokens: the longest request (prompt + output) of the workload the plan was "
            f"made for, below the model's {spec.max_position_embeddings:,}-token window; {ENGINE_NAMES[engine_name]} "
            "refuses longer requests: pass --max-model-len N to allow them (the fit check says whether N fits every "
            "instance)"
        )
    check_custom_labels(s, [g.gpu for u in units for g in u.groups])
    routing = replace(table_from_plan(plan), units=tuple(u.name for u in units))
    if routing.ranges:
        notes.append(
            f"the plan routes by prompt length ({len(routing.ranges)} prompt ranges, weights per unit in routing.json, "
            "the rule the verification simulated): the front router counts each prompt's tokens and splits each "
            "range across its units by smooth weighted round-robin; a request's output length is never used"
        )
    if engine_name == "trtllm" and plan.combos:
        notes.append(
            "llm-d is not written for TensorRT-LLM prefill/decode units (its routing sidecar has connectors for vLLM "
            "and SGLang only): --target all leaves it out; the dynamo and trtllm targets deploy them"
        )
    uses_vllm_router = engine_name == "vllm" or (engine_name == "trtllm" and bool(plan.instances))
    if s.router_image == EmitSettings.router_image and uses_vllm_router:
        notes.append(
            f"router image {s.router_image!r} is a placeholder: build vllm-router (github.com/vllm-project/router) "
            "into an image and pass --router-image"
        )
    return DeploymentIR(
        name=base,
        namespace=s.namespace,
        strategy=plan.strategy,
        model=ModelIR(
            spec.name,
            source,
            s.served_model_name or source,
            spec.num_attention_heads,
            spec.max_position_embeddings,
            weight_dtype,
            kv_dtype,
            spec,
        ),  # fmt: skip
        units=tuple(units),
        settings=s,
        plan_gpus_used=tuple(sorted((str(k), int(v)) for k, v in plan.gpus_used.items())),
        activation_reserve_gib=float(perf.activation_reserve_gib),
        ttft_slo_s=ttft_slo_s,
        notes=tuple(notes),
        from_schedule=any(c.min_count is not None for c in plan.combos),
        perf_settings=perf,
        cascade=_cascade_json(plan),
        prefix_cache=plan.prefix_cache is not None,
        engine=engine_name,
        engine_version=engine_version,
        scale_up_gpus=int(planned.get("scale_up_gpus", DEFAULT_SCALE_UP_GPUS)),
        routing=routing,
    )


CASCADE_ROUTER_KEYS = (
    "kappa", "kappa_by_class", "q2", "q2_by_class", "tier2_order", "quantile", "coverage", "classes",
)  # fmt: skip
"""The fields of a plan's ``cascade`` block a router needs (the sweep and the calibration run are left out);
``q2_by_class`` only where ``hetplan calibrate`` chose one per class (:func:`hetplan.sim.cascade.choose_q2_by_class`:
the q₂ of an iteration is then that of the Tier-2 request first in line, ``q2`` for the other classes)."""


def _cascade_json(plan: Plan) -> str | None:
    """The router's view of the plan's ``cascade`` block (:data:`CASCADE_ROUTER_KEYS`), as sorted JSON."""
    if plan.cascade is None:
        return None
    block = plan.cascade.to_doc()  # the router's config is the block's own fields, as written
    doc = {"kind": "hetplan-cascade-router-config", "schema_version": 1, "policy": "cascade"}
    doc |= {k: block[k] for k in CASCADE_ROUTER_KEYS if k in block}
    doc["budget"] = (
        "T_hat(request) = kappa[class] * (T(current load) + T(max load)) / 2 over its remaining prefill chunks; "
        "budget = TTFT SLO - wait - T_hat, re-computed every iteration; Tier 2 (budget <= 0) keeps a share q2 "
        "(q2_by_class[class] of the Tier-2 request first in line, where given)"
    )
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _planned_deployment(plan: Plan) -> dict[str, int | str]:
    """The plan's ``scenario.deployment`` block (what the planner's deployment rules assumed), checked; empty for
    plans made before it existed.

    Raises:
        InputError: a hand-edited block with a non-positive or non-integer ``max_model_len_tokens`` or
            ``scale_up_gpus``.
    """
    raw = plan.deployment.to_doc() if plan.deployment is not None else {}  # a mapping: checked when the plan was read
    out: dict[str, int | str] = {}
    for key in ("max_model_len_tokens", "scale_up_gpus"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(
                    f"plan scenario.deployment.{key} must be an integer >= 1, got {value!r}",
                    fix="write the plan again with 'hetplan plan ... --out plan.yaml'",
                )
            out[key] = value
    if "engine_version" in raw:
        out["engine_version"] = str(raw["engine_version"])
    return out
