"""Rules a deployment must satisfy before any file is written.

Each rule is a function of the :class:`~hetplan.emit.ir.DeploymentIR` that returns its violations; a violation
names the rule, the numbers and the fix. :func:`check_rules` runs them all and raises one
:class:`~hetplan.errors.EmitRuleError` listing every violation (exit code 1).

The engine rules (TP and heads, TP within a scale-up domain, KV block size, memory fit with ``--max-model-len``,
the KV connectors' TP rules, equal KV layout on both sides) are the shared table :data:`hetplan.deploy_rules.RULES`,
which the planner applies while enumerating candidates: :func:`rule_engine_table` runs it on every instance group
and combo, so a rule added there is checked here too. The rules below are emit's own (files and Kubernetes):

| rule | what it checks |
|---|---|
| ``gpu-vendor`` | every GPU is an NVIDIA part (the emitters request ``nvidia.com/gpu`` and use CUDA images) |
| ``gpu-label`` | every GPU type has a node-label value (the ``--provisioner``'s table or ``--gpu-label``) |
| ``gpus-per-instance`` | TP x PP = GPUs per instance = pods x GPUs per pod, pods fit a node, and the plan's GPU counts
  equal instances x TP x PP |
| ``max-model-len`` | ``--max-model-len`` <= the model's ``max_position_embeddings`` |
| ``trtllm-multi-node`` | a TensorRT-LLM instance fits one node (hetplan writes no MPI launchers) |
| ``pd-pp`` | prefill/decode instances use PP only where the engine's KV transfer handles it: none for vLLM (NIXL or
  Mooncake), prefill only for SGLang |

Source: the engine rules' sources are in :mod:`hetplan.deploy_rules`; the rest is hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from hetplan.deploy_rules import Deployment, InstanceShape, instance_findings, pair_findings
from hetplan.emit.ir import DeploymentIR, InstanceGroup
from hetplan.errors import EmitRuleError, InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel


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
    p = ir.settings.node_provisioner
    for gpu in sorted({g.gpu for g in ir.groups if g.gpu_label_value is None}):
        out.append(
            Violation(
                "gpu-label",
                f"no node label value for GPU {gpu}",
                f"pods are pinned to a GPU type with the node selector {p.label_key}=VALUE; hetplan knows "
                f"{p.name} values for {len(p.values)} catalog GPUs, not for {gpu}",
                f"pass --gpu-label {gpu}=VALUE with the value your nodes carry "
                f"(kubectl get nodes -L {p.label_key}), or another --provisioner",
            )
        )
    return out


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


def _shape(ir: DeploymentIR, g: InstanceGroup, arch: ModelArch) -> InstanceShape:
    """How the shared rule table sees one instance group: its memory model uses the plan's settings with the memory
    flags this group's engine is emitted with."""
    e = g.engine
    settings = replace(
        ir.perf_settings,
        gpu_memory_utilization=e.gpu_memory_utilization,
        activation_reserve_gib=ir.activation_reserve_gib,
        block_size_tokens=e.block_size_tokens,
    )
    try:  # memory only: the rules read no fitted curve, so no catalog is needed (the plan records the GPU entries)
        inst: InstanceModel | None = InstanceModel(arch, g.gpu_spec, g.tp, g.pp, settings)
    except InputError:
        inst = None  # TP not dividing the heads or PP beyond the layers: reported by the rules
    unit = f"instance type {g.unit_index}" if g.role == "aggregated" else f"combo {g.unit_index}"
    return InstanceShape(_where(g), unit, arch, g.gpu, g.tp, g.pp, e.kv_cache_dtype, e.block_size_tokens, inst)


def rule_engine_table(ir: DeploymentIR) -> list[Violation]:
    """The shared deployment rules (:data:`hetplan.deploy_rules.RULES`) on every instance group (instance rules)
    and every combo's prefill and decode groups (pair rules). A ``fit`` violation's fix names the largest
    ``--max-model-len`` every short instance holds, when there is one."""
    spec = ir.model.spec
    arch = ModelArch(spec, ir.model.weight_dtype, ir.model.kv_dtype)
    shapes = {id(g): _shape(ir, g, arch) for g in ir.groups}
    out: list[Violation] = []
    room: list[int] = []
    for g in ir.groups:
        dep = _deployment(ir, g)
        for f in instance_findings(shapes[id(g)], dep):
            out.append(Violation(f.rule, f.what, f.why, f.fix))
            inst = shapes[id(g)].instance
            if f.rule == "fit" and inst is not None:
                room.append(inst.kv_capacity_tokens)
    for u in ir.units:
        if u.kind != "disaggregated":
            continue
        p, d = u.pair()
        for f in pair_findings(shapes[id(p)], shapes[id(d)], _deployment(ir, p)):
            out.append(Violation(f.rule, f.what, f.why, f.fix))
    if room and min(room) > 0:
        fix = f"pass --max-model-len {min(room)} or less, or raise TP or PP, quantize, or pick a GPU with more memory"
        out = [replace(v, fix=fix) if v.rule == "fit" else v for v in out]
    return out


def _deployment(ir: DeploymentIR, g: InstanceGroup) -> Deployment:
    e = g.engine
    return Deployment(
        engine_version=ir.engine_version,
        kv_connector=e.kv_connector or ir.settings.kv_connector,
        block_size_tokens=e.block_size_tokens,
        max_model_len_tokens=e.max_model_len_tokens,
        scale_up_gpus=ir.scale_up_gpus,
    )


def rule_trtllm_multi_node(ir: DeploymentIR) -> list[Violation]:
    """A TensorRT-LLM instance stays on one node: multi-node TensorRT-LLM runs under MPI launchers (``mpirun`` or
    ``srun`` with ``trtllm-llmapi-launch``) that hetplan does not write."""
    if ir.engine != "trtllm":
        return []
    return [
        Violation(
            "trtllm-multi-node",
            f"{_where(g)} spans {g.nodes_per_instance} nodes of {g.gpus_per_node} GPUs",
            "multi-node TensorRT-LLM runs under MPI (mpirun / srun with trtllm-llmapi-launch), which hetplan does "
            "not emit",
            "raise --gpus-per-node if your nodes hold the instance, or re-plan with TP x PP within one node",
        )
        for g in ir.groups
        if g.multi_node
    ]


PD_PP_ROLES = {"vllm": frozenset(), "sglang": frozenset({"prefill"})}
"""Roles of a prefill/decode pair that may run PP > 1, per engine (TensorRT-LLM: not listed, not checked here).

vLLM 0.11: its NixlConnector registers and hands off KV per TP rank only, and fails with PP > 1 on either side
(vllm-project/vllm issue 22430 "PP+PD NixlConnector failed", open; PP support is still an open pull request,
43366); MooncakeConnector is built the same way. SGLang 0.5: prefill PP works with PD disaggregation since
sgl-project/sglang pull request 8846 ("Support PD disaggregation with Prefill PP"); decode PP does not (issue 8424,
the PP roadmap issue 11857 leaves it open)."""


def rule_pd_pp(ir: DeploymentIR) -> list[Violation]:
    """Prefill/decode instances with PP > 1 only where the engine's KV hand-off supports it
    (:data:`PD_PP_ROLES`); aggregated instances may use PP freely (no KV moves between engines)."""
    allowed = PD_PP_ROLES.get(ir.engine)
    if allowed is None:
        return []
    label = {"vllm": "vLLM", "sglang": "SGLang"}[ir.engine]
    out = []
    for g in ir.groups:
        if g.role == "aggregated" or g.pp <= 1 or g.role in allowed:
            continue
        why = f"{label} {ir.engine_version} moves no KV between prefill and decode when the {g.role} side is " + (
            "pipeline-parallel (its NixlConnector hands KV off per TP rank only; vLLM issue 22430)"
            if ir.engine == "vllm"
            else "pipeline-parallel (SGLang supports prefill PP only; sglang issue 8424)"
        )
        fix = "re-plan that role with PP 1 (TP inside one node), or plan it aggregated (--strategy melange)"
        out.append(Violation("pd-pp", f"{_where(g)} runs PP {g.pp} in a prefill/decode pair", why, fix))
    return out


RULES: tuple[Callable[[DeploymentIR], list[Violation]], ...] = (
    rule_gpu_vendor,
    rule_trtllm_multi_node,
    rule_pd_pp,
    rule_gpu_label,
    rule_gpus_per_instance,
    rule_engine_table,
    rule_max_model_len,
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
