"""``hetplan emit``: deployable files (vLLM, SGLang or TensorRT-LLM; Kubernetes, llm-d, NVIDIA Dynamo) for a plan
file."""

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from hetplan import api
from hetplan.cli.app import catalog_from_env, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    TimeoutOpt,
    force_option,
    json_option,
    out_option,
    router_image_option,
    validate_option,
)
from hetplan.cli.render.emit import render_result
from hetplan.errors import InputError
from hetplan.io import to_json

if TYPE_CHECKING:
    from hetplan.catalog.schemas import GpuSpec
    from hetplan.emit.writer import EmitResult

CONNECTORS = {"nixl": "NixlConnector", "mooncake": "MooncakeConnector"}
DYNAMO_APIS = {"v1beta1": ("v1beta1",), "v1alpha1": ("v1alpha1",), "both": ("v1beta1", "v1alpha1")}
# The option defaults are hetplan.emit.ir.EmitSettings's. They are spelled out here, not read from it, because
# importing hetplan.emit loads numpy and the emitters before any command runs; tests/cli/test_structure.py checks
# that each equals the EmitSettings field of the same name.
IMAGE = "vllm/vllm-openai:v0.11.0"
ROUTER_IMAGE = "vllm-router:latest"
DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1"
NAMESPACE = "default"
GPU_LABEL_KEY = ""
PROVISIONER = "gfd"
GPUS_PER_NODE = 8
AUTOSCALER = "keda"
PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
KUBERNETES_VERSION = "1.33"
T = TypeVar("T")


def _choice(value: str, table: Mapping[str, T], flag: str) -> T:
    key = value.strip().lower()
    if key not in table:
        known = ", ".join(table)
        raise InputError(f"{flag} {value!r} is not known", f"known: {known}", f"pass {flag} {next(iter(table))}")
    return table[key]


def _gpu_labels(items: list[str], plan_gpus: "tuple[GpuSpec, ...]" = ()) -> tuple[tuple[str, str], ...]:
    """``--gpu-label GPU=VALUE`` pairs, GPU names resolved against the plan's own GPU entries first (a profiled
    GPU the catalog lacks), then the catalog (``HETPLAN_CATALOG_DIR``'s)."""
    from hetplan.catalog.context import lookup_gpu

    labels: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(
                f"--gpu-label: cannot read {item!r}", "expected GPU=VALUE", "write e.g. --gpu-label H20=NVIDIA-H20"
            )
        known = catalog_from_env().gpu_catalog.gpus
        gpu = lookup_gpu(name.strip(), plan_gpus + tuple(g for g in known if g not in plan_gpus)).name
        if gpu in labels:
            raise InputError(f"--gpu-label names {gpu} twice", fix="give each GPU type once")
        labels[gpu] = value.strip()
    return tuple(sorted(labels.items()))


def emit(
    plan: Annotated[Path, typer.Argument(help="Plan file written by 'hetplan plan --out'.")],
    *,  # keyword-only from here, so the required --out can keep its place in --help after --target
    target: Annotated[
        list[str],
        typer.Option(
            "--target",
            "-t",
            help="vllm, sglang, trtllm (the plan's engine only), kubernetes, llmd, dynamo or all (repeat or "
            "comma-separate).",
        ),
    ] = ["all"],  # noqa: B006 - typer copies list defaults
    out: Annotated[Path, out_option("Output folder (created; files go to <out>/<target>/).")],
    validate: Annotated[bool, validate_option("Check every manifest offline before writing.")] = False,
    force: Annotated[bool, force_option("Overwrite files that exist.")] = False,
    json_out: Annotated[bool, json_option("Print the result as JSON.")] = False,
    image: Annotated[str, typer.Option("--image", help="vLLM image of the engines.")] = IMAGE,
    router_image: Annotated[str, router_image_option("Image with vllm-router.")] = ROUTER_IMAGE,
    dynamo_image: Annotated[str, typer.Option("--dynamo-image", help="Dynamo vLLM runtime image.")] = DYNAMO_IMAGE,
    model_source: Annotated[
        str | None, typer.Option("--model-source", help="Repo or path engines load (default: catalog).")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Base of object names (default: the scenario name).")
    ] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Kubernetes namespace.")] = NAMESPACE,
    provisioner: Annotated[
        str,
        typer.Option(
            "--provisioner",
            help="Whose node labels select GPUs: gfd (NVIDIA GPU feature discovery), gke, karpenter, eks (Auto "
            "Mode) or aks.",
        ),
    ] = PROVISIONER,
    gpu_label_key: Annotated[
        str,
        typer.Option(
            "--gpu-label-key", help="Node label of GPU type (default: the provisioner's; another is refused)."
        ),
    ] = GPU_LABEL_KEY,
    gpu_label: Annotated[list[str], typer.Option("--gpu-label", help="GPU=VALUE node label value (repeatable).")] = [],  # noqa: B006 - typer copies list defaults
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node.")] = GPUS_PER_NODE,
    kv_connector: Annotated[str, typer.Option("--kv-connector", help="nixl (NixlConnector) or mooncake.")] = "nixl",
    dynamo_api: Annotated[str, typer.Option("--dynamo-api", help="v1beta1, v1alpha1 or both.")] = "v1beta1",
    max_model_len: Annotated[
        int | None,
        typer.Option(
            "--max-model-len",
            help="vLLM --max-model-len (default: the plan's, the longest request it was sized for; else the "
            "model's window).",
        ),
    ] = None,
    autoscaler: Annotated[str, typer.Option("--autoscaler", help="keda, hpa or none.")] = AUTOSCALER,
    prometheus_url: Annotated[str, typer.Option("--prometheus-url", help="Prometheus for KEDA.")] = PROMETHEUS_URL,
    kubernetes_version: Annotated[
        str, typer.Option("--kubernetes-version", help="Kubernetes version --validate checks against.")
    ] = KUBERNETES_VERSION,
    timeout: TimeoutOpt = None,
) -> None:
    """Write launch scripts for the plan's engine (vLLM, SGLang or TensorRT-LLM) and Kubernetes, llm-d and NVIDIA
    Dynamo manifests for a plan."""

    def run() -> "EmitResult":
        typed = api.as_plan(plan, catalog=catalog_from_env())
        from hetplan.emit.settings import EmitSettings

        settings = EmitSettings(
            image=image,
            router_image=router_image,
            dynamo_image=dynamo_image,
            model_source=model_source,
            name=name,
            namespace=namespace,
            provisioner=provisioner,
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

    result = run_guarded(lambda: run_with_timeout(timeout, run, "emit"))
    if json_out:
        typer.echo(to_json(result.to_doc()), nl=False)
        return
    # through rich, as plan --emit and autoscale --emit print it: long notes wrap between words at the terminal's
    # width, where the terminal itself would cut a number ("7,9" / "79") at column 80
    from rich.console import Console

    Console().print(render_result(result), markup=False, highlight=False)
