"""``hetplan emit``: deployable files (vLLM, Kubernetes, llm-d, NVIDIA Dynamo) for a plan file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import typer

from hetplan import api
from hetplan.catalog.loader import active_gpus, find_gpu
from hetplan.catalog.schemas import GpuSpec
from hetplan.cli.main import app, run_guarded
from hetplan.emit.ir import EmitSettings
from hetplan.emit.writer import MANIFEST, EmitResult
from hetplan.errors import InputError
from hetplan.io import to_json

CONNECTORS = {"nixl": "NixlConnector", "mooncake": "MooncakeConnector"}
DYNAMO_APIS = {"v1beta1": ("v1beta1",), "v1alpha1": ("v1alpha1",), "both": ("v1beta1", "v1alpha1")}
T = TypeVar("T")


def _choice(value: str, table: Mapping[str, T], flag: str) -> T:
    key = value.strip().lower()
    if key not in table:
        known = ", ".join(table)
        raise InputError(f"{flag} {value!r} is not known", f"known: {known}", f"pass {flag} {next(iter(table))}")
    return table[key]


def _gpu_labels(items: list[str], plan_gpus: tuple[GpuSpec, ...] = ()) -> tuple[tuple[str, str], ...]:
    """``--gpu-label GPU=VALUE`` pairs, GPU names resolved against the plan's own GPU entries first (a profiled
    GPU the catalog lacks), then the catalog."""
    labels: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(
                f"--gpu-label: cannot read {item!r}", "expected GPU=VALUE", "write e.g. --gpu-label H20=NVIDIA-H20"
            )
        gpu = find_gpu(name.strip(), plan_gpus + tuple(g for g in active_gpus() if g not in plan_gpus)).name
        if gpu in labels:
            raise InputError(f"--gpu-label names {gpu} twice", fix="give each GPU type once")
        labels[gpu] = value.strip()
    return tuple(sorted(labels.items()))


def _count(n: int, noun: str) -> str:
    """``no objects``, ``1 object``, ``2 objects``."""
    return f"no {noun}s" if n == 0 else f"{n} {noun}" + ("" if n == 1 else "s")


def render_result(result: EmitResult) -> str:
    """Plain-text summary of an emit run (what the command prints without --json)."""
    counts: dict[str, int] = {}
    for entry in result.files:
        counts[entry.target] = counts.get(entry.target, 0) + 1
    per_target = ", ".join(f"{t} {counts.get(t, 0)}" for t in result.targets)
    lines = [f"wrote {_count(len(result.files), 'file')} to {result.out_dir} ({per_target}) and {MANIFEST}"]
    report = result.validation
    if report is not None:
        kinds = ", ".join(f"{k} {n}" for k, n in report.by_kind().items())
        objects = f"{_count(len(report.objects), 'object')} ({kinds})" if report.objects else "no objects"
        lines.append(
            f"validated offline: {objects} and {_count(len(report.scripts), 'shell script')}: "
            + ("all passed" if report.ok else _count(len(report.errors), "error"))
        )
        lines.append(
            f"  core kinds: kubernetes-validate --strict against Kubernetes {report.kubernetes_version}; custom "
            "kinds: jsonschema against the CRD schemas shipped with hetplan, unknown fields rejected; shell "
            "scripts: bash -n"
        )
        lines.append("not checked offline:")
        lines += [f"  - {item}" for item in report.not_checked]
    else:
        lines.append("not validated (pass --validate to check every manifest offline)")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


@app.command()
def emit(
    plan: Path = typer.Argument(..., help="Plan file written by 'hetplan plan --out'."),
    target: list[str] = typer.Option(
        ["all"], "--target", "-t", help="vllm, kubernetes, llmd, dynamo or all (repeat or comma-separate)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (created; files go to <out>/<target>/)."),
    validate: bool = typer.Option(False, "--validate", help="Check every manifest offline before writing."),
    force: bool = typer.Option(False, "--force", help="Overwrite files that exist."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    image: str = typer.Option(EmitSettings.image, "--image", help="vLLM image of the engines."),
    router_image: str = typer.Option(EmitSettings.router_image, "--router-image", help="Image with vllm-router."),
    dynamo_image: str = typer.Option(EmitSettings.dynamo_image, "--dynamo-image", help="Dynamo vLLM runtime image."),
    model_source: str = typer.Option(None, "--model-source", help="Repo or path engines load (default: catalog)."),
    name: str = typer.Option(None, "--name", help="Base of object names (default: the scenario name)."),
    namespace: str = typer.Option(EmitSettings.namespace, "--namespace", "-n", help="Kubernetes namespace."),
    gpu_label_key: str = typer.Option(EmitSettings.gpu_label_key, "--gpu-label-key", help="Node label of GPU type."),
    gpu_label: list[str] = typer.Option([], "--gpu-label", help="GPU=VALUE node label value (repeatable)."),
    gpus_per_node: int = typer.Option(EmitSettings.gpus_per_node, "--gpus-per-node", help="GPUs per node."),
    kv_connector: str = typer.Option("nixl", "--kv-connector", help="nixl (NixlConnector) or mooncake."),
    dynamo_api: str = typer.Option("v1beta1", "--dynamo-api", help="v1beta1, v1alpha1 or both."),
    max_model_len: int = typer.Option(None, "--max-model-len", help="vLLM --max-model-len (default: the model's)."),
    autoscaler: str = typer.Option(EmitSettings.autoscaler, "--autoscaler", help="keda, hpa or none."),
    prometheus_url: str = typer.Option(EmitSettings.prometheus_url, "--prometheus-url", help="Prometheus for KEDA."),
    kubernetes_version: str = typer.Option(
        EmitSettings.kubernetes_version, "--kubernetes-version", help="Kubernetes version --validate checks against."
    ),
) -> None:
    """Write vLLM launch scripts and Kubernetes, llm-d and NVIDIA Dynamo manifests for a plan."""

    def run() -> EmitResult:
        typed = api.as_plan(plan)
        settings = EmitSettings(
            image=image,
            router_image=router_image,
            dynamo_image=dynamo_image,
            model_source=model_source,
            name=name,
            namespace=namespace,
            gpu_label_key=gpu_label_key,
            gpu_labels=_gpu_labels(gpu_label, tuple(g.spec for g in typed.gpus.values())),
            gpus_per_node=gpus_per_node,
            kv_connector=_choice(kv_connector, CONNECTORS, "--kv-connector"),
            dynamo_api_versions=_choice(dynamo_api, DYNAMO_APIS, "--dynamo-api"),
            max_model_len_tokens=max_model_len,
            autoscaler=autoscaler.strip().lower(),
            prometheus_url=prometheus_url,
            kubernetes_version=kubernetes_version,
        )
        return api.emit(typed, out, target, settings, validate=validate, force=force)

    result = run_guarded(run)
    if json_out:
        typer.echo(to_json(result.to_doc()), nl=False)
        return
    typer.echo(render_result(result))
