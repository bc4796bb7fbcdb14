"""Rules a deployment must satisfy before any file is written.

Each rule is a function of the :class:`~hetplan.emit.ir.DeploymentIR` that returns its violations; a violation
names the rule, the numbers and the fix. :func:`check_rules` runs them all and raises one
:class:`~hetplan.errors.EmitRuleError` listing every violation (exit code 1).

| rule | what it checks |
|---|---|
| ``gpu-vendor`` | every GPU is an NVIDIA part (the emitters request ``nvidia.com/gpu`` and use CUDA images) |
| ``gpu-label`` | every GPU type has a node-label value (built-in table or ``--gpu-label``) |
| ``tp-heads`` | TP divides the attention heads |
| ``gpus-per-instance`` | TP x PP = GPUs per instance = pods x GPUs per pod, pods fit a node, and the plan's GPU counts
  equal instances x TP x PP |
| ``nixl-tp`` | with NixlConnector, prefill TP <= decode TP inside each combo |
| ``mooncake-tp`` | with MooncakeConnector, prefill TP = decode TP inside each combo |
| ``kv-layout`` | equal ``--block-size`` and ``--kv-cache-dtype`` on both sides, a block size vLLM accepts |
| ``max-model-len`` | ``--max-model-len`` <= the model's ``max_position_embeddings`` |
| ``fit`` | weights plus the activation reserve fit, and the KV cache holds one ``--max-model-len`` sequence |

Source: the connector, block-size and head rules are DESIGN §5's reading of vLLM's disaggregated-prefill
constraints (vLLM 0.11 line); the memory rule uses hetplan's roofline memory model (``perf/latency.py``); the rest
is hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from hetplan.emit.ir import DeploymentIR, InstanceGroup, ServingUnit
from hetplan.emit.settings import DEFAULT_GPU_LABELS
from hetplan.errors import EmitRuleError, InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel

VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class Violation:
    """One broken rule: its name, what failed, the numbers, and how to fix it."""

    rule: str
    what: str
    why: str
    fix: str


def _where(g: InstanceGroup) -> str:
    """How the plan's table names a group: combo N (combos[N]) or, for aggregated plans, instance type N."""
    unit = f"instance type {g.unit_index}" if g.role == "aggregated" else f"combo {g.unit_index} {g.role}"
    return f"{unit} ({g.gpu}, TP {g.tp}, PP {g.pp})"


def rule_gpu_vendor(ir: DeploymentIR) -> list[Violation]:
    """Every GPU is an NVIDIA part: manifests request ``nvidia.com/gpu`` and run CUDA builds of vLLM/Dynamo."""
    out = []
    for g in ir.groups:
        if not g.gpu_vendor.upper().startswith("NVIDIA"):  # "NVIDIA (AWS custom)" for A10G
            out.append(
                Violation(
                    "gpu-vendor",
                    f"{_where(g)} runs on a {g.gpu_vendor or 'non-NVIDIA'} GPU",
                    f"hetplan emits NVIDIA deployments only (nvidia.com/gpu, CUDA images); {g.gpu} is not one",
                    "plan with NVIDIA GPUs only (--gpus), or write the manifests for this GPU by hand",
                )
            )
    return out


def rule_gpu_label(ir: DeploymentIR) -> list[Violation]:
    """Every GPU type has a value for the node label that selects it."""
    out = []
    for gpu in sorted({g.gpu for g in ir.groups if g.gpu_label_value is None}):
        out.append(
            Violation(
                "gpu-label",
                f"no node label value for GPU {gpu}",
                f"pods are pinned to a GPU type with the node selector {ir.settings.gpu_label_key}=VALUE; hetplan "
                f"knows values for {len(DEFAULT_GPU_LABELS)} catalog GPUs, not for {gpu}",
                f"pass --gpu-label {gpu}=VALUE with the value your nodes carry "
                f"(kubectl get nodes -L {ir.settings.gpu_label_key})",
            )
        )
    return out


def rule_tp_heads(ir: DeploymentIR) -> list[Violation]:
    """TP divides the model's attention heads (vLLM shards heads evenly across TP ranks)."""
    heads = ir.model.attention_heads
    return [
        Violation(
            "tp-heads",
            f"{_where(g)}: TP {g.tp} does not divide the {heads} attention heads of {ir.model.name}",
            f"{heads} heads / TP {g.tp} = {heads / g.tp:g}, not a whole number",
            "re-plan with TP degrees that divide the head count (--tp 1,2,4,8 for most models)",
        )
        for g in ir.groups
        if heads % g.tp
    ]


def rule_gpus_per_instance(ir: DeploymentIR) -> list[Violation]:
    """TP x PP = GPUs per instance = pods x GPUs per pod; pods fit a node; plan GPU counts match the instances."""
    out = []
    for g in ir.groups:
        if g.tp * g.pp != g.gpus_per_instance or g.nodes_per_instance * g.gpus_per_pod != g.gpus_per_instance:
            out.append(
                Violation(
                    "gpus-per-instance",
                    f"{_where(g)}: TP x PP = {g.tp * g.pp} GPUs does not split into {g.nodes_per_instance} pod(s) "
                    f"of {g.gpus_per_pod} GPUs (GPUs per instance {g.gpus_per_instance})",
                    f"each pod of a multi-node instance takes the same number of GPUs, at most {g.gpus_per_node} "
                    "per node",
                    "re-plan with TP x PP a multiple of --gpus-per-node (or at most one node), or change "
                    "--gpus-per-node",
                )
            )
        elif g.gpus_per_pod > g.gpus_per_node:
            out.append(
                Violation(
                    "gpus-per-instance",
                    f"{_where(g)}: pods of {g.gpus_per_pod} GPUs do not fit nodes of {g.gpus_per_node} GPUs",
                    f"TP x PP = {g.gpus_per_instance} GPUs over {g.nodes_per_instance} pod(s)",
                    "raise --gpus-per-node to your nodes' GPU count",
                )
            )
    used: dict[str, int] = {}
    for g in ir.groups:
        copies = g.max_replicas if ir.from_schedule else g.replicas  # a schedule's plan counts its peak
        used[g.gpu] = used.get(g.gpu, 0) + copies * g.gpus_per_instance
    plan = dict(ir.plan_gpus_used)
    if plan and used != plan:
        diff = ", ".join(
            f"{gpu}: plan {plan.get(gpu, 0)}, instances {used.get(gpu, 0)}"
            for gpu in sorted(set(plan) | set(used))
            if plan.get(gpu, 0) != used.get(gpu, 0)
        )
        out.append(
            Violation(
                "gpus-per-instance",
                "the plan's gpus_used disagrees with its instances x TP x PP",
                diff,
                "write the plan again with 'hetplan plan ... --out plan.yaml' instead of editing it by hand",
            )
        )
    return out


def _pairs(ir: DeploymentIR) -> list[tuple[ServingUnit, InstanceGroup, InstanceGroup]]:
    return [(u, *u.pair()) for u in ir.units if u.kind == "disaggregated"]


def rule_connector_tp(ir: DeploymentIR) -> list[Violation]:
    """NixlConnector: prefill TP <= decode TP; MooncakeConnector: equal TP (inside each combo)."""
    out = []
    for u, p, d in _pairs(ir):
        c = p.engine.kv_connector or d.engine.kv_connector
        if c == "NixlConnector" and p.tp > d.tp:
            out.append(
                Violation(
                    "nixl-tp",
                    f"combo {u.index} pairs prefill TP {p.tp} ({p.gpu}) with decode TP {d.tp} ({d.gpu}) under "
                    "NixlConnector",
                    f"NixlConnector moves KV from prefill to decode only when prefill TP <= decode TP; "
                    f"here {p.tp} > {d.tp}",
                    "re-plan so that prefill TP <= decode TP in every combo (e.g. restrict --tp), or raise the "
                    "decode TP",
                )
            )
        if c == "MooncakeConnector" and p.tp != d.tp:
            out.append(
                Violation(
                    "mooncake-tp",
                    f"combo {u.index} pairs prefill TP {p.tp} ({p.gpu}) with decode TP {d.tp} ({d.gpu}) under "
                    "MooncakeConnector",
                    f"MooncakeConnector needs equal TP on both sides; here {p.tp} != {d.tp}",
                    "use --kv-connector nixl, or re-plan with a single TP degree (--tp N)",
                )
            )
    return out


def rule_kv_layout(ir: DeploymentIR) -> list[Violation]:
    """Equal KV block size and KV cache dtype on both sides of each combo; block sizes vLLM accepts."""
    out = []
    for g in ir.groups:
        if g.engine.block_size_tokens not in VLLM_BLOCK_SIZES:
            out.append(
                Violation(
                    "kv-layout",
                    f"{_where(g)}: --block-size {g.engine.block_size_tokens} is not a vLLM block size",
                    f"vLLM accepts {', '.join(map(str, VLLM_BLOCK_SIZES))} tokens",
                    "plan with perf setting block_size_tokens 16 (vLLM's default)",
                )
            )
    for u, p, d in _pairs(ir):
        if p.engine.block_size_tokens != d.engine.block_size_tokens:
            out.append(
                Violation(
                    "kv-layout",
                    f"combo {u.index}: prefill --block-size {p.engine.block_size_tokens} differs from decode "
                    f"--block-size {d.engine.block_size_tokens}",
                    "KV blocks are copied block for block from prefill to decode, so both sides need one size",
                    "use one block size for both roles",
                )
            )
        if p.engine.kv_cache_dtype != d.engine.kv_cache_dtype:
            out.append(
                Violation(
                    "kv-layout",
                    f"combo {u.index}: prefill --kv-cache-dtype {p.engine.kv_cache_dtype} differs from decode "
                    f"--kv-cache-dtype {d.engine.kv_cache_dtype}",
                    "the decode side reads the KV bytes exactly as the prefill side wrote them",
                    "use one KV cache dtype for both roles",
                )
            )
    return out


def rule_max_model_len(ir: DeploymentIR) -> list[Violation]:
    """``--max-model-len`` does not exceed the model's ``max_position_embeddings`` (vLLM refuses it)."""
    limit = ir.model.max_position_embeddings
    lens = sorted({g.engine.max_model_len_tokens for g in ir.groups if g.engine.max_model_len_tokens > limit})
    return [
        Violation(
            "max-model-len",
            f"--max-model-len {n} exceeds {ir.model.name}'s max_position_embeddings {limit}",
            "vLLM refuses a context longer than the model's position embeddings",
            f"pass --max-model-len {limit} or less",
        )
        for n in lens
    ]


def rule_fit(ir: DeploymentIR) -> list[Violation]:
    """Weights plus the activation reserve fit, and the KV cache holds one ``--max-model-len`` sequence.

    vLLM refuses to start when its KV cache cannot hold one sequence of ``--max-model-len`` tokens; hetplan
    predicts the KV capacity with its memory model (``InstanceModel.kv_capacity_tokens``, GiB).
    """
    spec = ir.model.spec
    arch = ModelArch(spec, ir.model.weight_dtype, ir.model.kv_dtype)
    base = ir.perf_settings
    short: list[tuple[InstanceGroup, InstanceModel, int]] = []
    for g in ir.groups:
        e = g.engine
        # the plan's settings, with the memory flags this group's engine is emitted with
        settings = replace(
            base,
            gpu_memory_utilization=e.gpu_memory_utilization,
            activation_reserve_gib=ir.activation_reserve_gib,
            block_size_tokens=e.block_size_tokens,
        )
        try:
            inst = InstanceModel(arch, g.gpu_spec, g.tp, g.pp, settings)
            capacity = inst.kv_capacity_tokens
        except InputError:
            continue  # TP not dividing the heads or PP beyond the layers: reported by the other rules
        if capacity < e.max_model_len_tokens:
            short.append((g, inst, capacity))
    room = min((c for _, _, c in short), default=0)
    fix = "raise TP or PP, quantize, or pick a GPU with more memory"
    if room > 0:
        fix = f"pass --max-model-len {room} or less, or " + fix
    out = []
    for g, inst, capacity in short:
        e = g.engine
        need = inst.weights_gib_per_gpu + ir.activation_reserve_gib
        have = inst.gpu.hbm_gib * e.gpu_memory_utilization
        out.append(
            Violation(
                "fit",
                f"{_where(g)}: {ir.model.name} and one {e.max_model_len_tokens}-token sequence do not fit",
                f"weights + activation reserve {need:.1f} GiB per GPU of {have:.1f} GiB usable "
                f"({inst.gpu.hbm_gib:g} GiB x {e.gpu_memory_utilization:g}) leave KV room for {capacity} tokens, "
                f"fewer than --max-model-len {e.max_model_len_tokens}",
                fix,
            )
        )
    return out


RULES: tuple[Callable[[DeploymentIR], list[Violation]], ...] = (
    rule_gpu_vendor,
    rule_gpu_label,
    rule_tp_heads,
    rule_gpus_per_instance,
    rule_connector_tp,
    rule_kv_layout,
    rule_max_model_len,
    rule_fit,
)


def find_violations(ir: DeploymentIR) -> list[Violation]:
    """Every violation of every rule, in rule order."""
    return [v for rule in RULES for v in rule(ir)]


def check_rules(ir: DeploymentIR) -> None:
    """Raise :class:`EmitRuleError` when ``ir`` breaks any rule (all violations in one message).

    Raises:
        EmitRuleError: ``rule`` is the first broken rule's name, ``violations`` lists all of them.
    """
    found = find_violations(ir)
    if not found:
        return
    violations = tuple((v.rule, v.what, v.why, v.fix) for v in found)
    if len(found) == 1:
        v = found[0]
        raise EmitRuleError(v.what, f"[rule {v.rule}] {v.why}", v.fix, rule=v.rule, violations=violations)
    why = "; ".join(f"[rule {v.rule}] {v.what}: {v.why}" for v in found)
    fixes = "; ".join(dict.fromkeys(v.fix for v in found))
    raise EmitRuleError(
        f"the plan breaks {len(found)} deployment rules", why, fixes, rule=found[0].rule, violations=violations
    )
