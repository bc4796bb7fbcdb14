"""Deployable outputs: plan -> deployment IR -> files for vLLM, SGLang, TensorRT-LLM, Kubernetes, llm-d and NVIDIA
Dynamo.

The engine targets (``vllm``, ``sglang``, ``trtllm``) write launch scripts for the engine the plan was made for;
``all`` picks that one, and naming another is refused (its flags would not reproduce the plan's capacities). The
Kubernetes, llm-d and Dynamo manifests run the plan's engine; ``all`` leaves llm-d out for a TensorRT-LLM plan
with prefill/decode units, which llm-d's routing sidecar cannot pair (:func:`deployable_targets`).

``build_ir`` turns a plan document into the IR, ``check_rules`` refuses plans that cannot be deployed, and each
target is a pure function IR -> ``{path: text}``. :func:`render` runs the chosen targets; ``hetplan.api.emit``
writes the files atomically with a ``manifest.json``.

Source: DESIGN §5; hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hetplan.emit.dynamo import emit_dynamo
from hetplan.emit.engine_scripts import emit_sglang, emit_trtllm
from hetplan.emit.ir import DeploymentIR
from hetplan.emit.ir_build import build_ir
from hetplan.emit.kubernetes import emit_kubernetes
from hetplan.emit.llmd import emit_llmd, llmd_refusal
from hetplan.emit.rules import check_rules
from hetplan.emit.settings import EmitSettings
from hetplan.emit.vllm import emit_vllm
from hetplan.errors import InputError

TARGETS: dict[str, Callable[[DeploymentIR], dict[str, str]]] = {
    "vllm": emit_vllm,
    "sglang": emit_sglang,
    "trtllm": emit_trtllm,
    "kubernetes": emit_kubernetes,
    "llmd": emit_llmd,
    "dynamo": emit_dynamo,
}


def parse_targets(values: Iterable[str]) -> tuple[str, ...]:
    """Target names from ``--target`` values (repeatable, comma-separated, ``all``), in the fixed order of
    :data:`TARGETS`.

    Raises:
        InputError: an unknown target or none at all.
    """
    wanted: set[str] = set()
    for value in values:
        for name in (v.strip().lower() for v in str(value).split(",")):
            if not name:
                continue
            if name == "all":
                wanted.update(TARGETS)
            elif name in ("llm-d", "k8s", "tensorrt-llm"):
                wanted.add({"llm-d": "llmd", "k8s": "kubernetes", "tensorrt-llm": "trtllm"}[name])
            elif name in TARGETS:
                wanted.add(name)
            else:
                raise InputError(
                    f"unknown target {name!r}", f"known: {', '.join(TARGETS)}, all", "pass --target with one of them"
                )
    if not wanted:
        raise InputError("no target given", f"known: {', '.join(TARGETS)}, all", "pass --target all")
    return tuple(t for t in TARGETS if t in wanted)


ENGINE_TARGETS = ("vllm", "sglang", "trtllm")


def targets_for(engine: str, values: Iterable[str]) -> tuple[str, ...]:
    """:func:`parse_targets` for a plan made for ``engine``: ``all`` keeps only that engine's launch-script target.

    Raises:
        InputError: an unknown target, none at all, or another engine's target named explicitly.
    """
    values = tuple(values)
    chosen = parse_targets(values)
    named = {
        t
        for v in values
        for t in (x.strip().lower() for x in str(v).split(","))
        if t in ENGINE_TARGETS or t == "tensorrt-llm"
    }
    for t in sorted(named):
        t = "trtllm" if t == "tensorrt-llm" else t
        if t != engine:
            raise InputError(
                f"--target {t} writes {t} launch scripts, but this plan was made for {engine}",
                f"its capacities follow {engine}'s memory rule and fitted speeds, which {t} flags would not reproduce",
                f"pass --target {engine} (or all), or re-plan with --engine {t}",
            )
    return tuple(t for t in chosen if t not in ENGINE_TARGETS or t == engine)


def deployable_targets(ir: DeploymentIR, values: Iterable[str]) -> tuple[str, ...]:
    """:func:`targets_for` ``ir``'s engine, less ``llmd`` when ``all`` brought it in and it cannot deploy the plan
    (a TensorRT-LLM plan with prefill/decode units: :func:`hetplan.emit.llmd.llmd_refusal`; a note says so).
    Naming ``llmd`` keeps it, and the llm-d target then refuses.

    Raises:
        InputError: as :func:`targets_for`.
    """
    values = tuple(values)
    named = {x.strip().lower() for v in values for x in str(v).split(",")}
    chosen = targets_for(ir.engine, values)
    if "llmd" in named or llmd_refusal(ir) is None:
        return chosen
    return tuple(t for t in chosen if t != "llmd")


def render(ir: DeploymentIR, targets: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Run ``targets`` on ``ir`` after the rules: ``{path: (target, text)}`` in target order, then file order
    (``all`` and the engine targets as :func:`targets_for`).

    Raises:
        EmitRuleError: the IR breaks a deployment rule, or a target cannot express it.
        InputError: an unknown target, or another engine's launch-script target.
    """
    check_rules(ir)
    out: dict[str, tuple[str, str]] = {}
    for target in deployable_targets(ir, targets):
        for path, text in TARGETS[target](ir).items():
            out[path] = (target, text)
    return out


__all__ = [
    "ENGINE_TARGETS",
    "TARGETS",
    "DeploymentIR",
    "EmitSettings",
    "build_ir",
    "deployable_targets",
    "check_rules",
    "parse_targets",
    "render",
    "targets_for",
]
