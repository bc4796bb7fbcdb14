"""Deployable outputs: plan -> deployment IR -> files for vLLM, Kubernetes, llm-d and NVIDIA Dynamo.

``build_ir`` turns a plan document into the IR, ``check_rules`` refuses plans that cannot be deployed, and each
target is a pure function IR -> ``{path: text}``. :func:`render` runs the chosen targets; ``hetplan.api.emit``
writes the files atomically with a ``manifest.json``.

Source: DESIGN §5; hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hetplan.emit.dynamo import emit_dynamo
from hetplan.emit.ir import DeploymentIR, build_ir
from hetplan.emit.kubernetes import emit_kubernetes
from hetplan.emit.llmd import emit_llmd
from hetplan.emit.rules import check_rules
from hetplan.emit.settings import EmitSettings
from hetplan.emit.vllm import emit_vllm
from hetplan.errors import InputError

TARGETS: dict[str, Callable[[DeploymentIR], dict[str, str]]] = {
    "vllm": emit_vllm,
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
            elif name in ("llm-d", "k8s"):
                wanted.add({"llm-d": "llmd", "k8s": "kubernetes"}[name])
            elif name in TARGETS:
                wanted.add(name)
            else:
                raise InputError(
                    f"unknown target {name!r}", f"known: {', '.join(TARGETS)}, all", "pass --target with one of them"
                )
    if not wanted:
        raise InputError("no target given", f"known: {', '.join(TARGETS)}, all", "pass --target all")
    return tuple(t for t in TARGETS if t in wanted)


def render(ir: DeploymentIR, targets: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Run ``targets`` on ``ir`` after the rules: ``{path: (target, text)}`` in target order, then file order.

    Raises:
        EmitRuleError: the IR breaks a deployment rule, or a target cannot express it.
        InputError: an unknown target.
    """
    check_rules(ir)
    out: dict[str, tuple[str, str]] = {}
    for target in parse_targets(targets):
        for path, text in TARGETS[target](ir).items():
            out[path] = (target, text)
    return out


__all__ = ["TARGETS", "DeploymentIR", "EmitSettings", "build_ir", "check_rules", "parse_targets", "render"]
