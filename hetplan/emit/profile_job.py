"""Kubernetes Jobs that profile every GPU type of a cluster (``hetplan profile --emit-job``).

One ``batch/v1`` Job per GPU node label value: a node selector on the label (``nvidia.com/gpu.product`` by default,
the key NVIDIA GPU feature discovery sets), a ``nvidia.com/gpu`` request of ``gpus`` GPUs (2 or more also measures
the NCCL all-reduce), and a container that installs the profiler package when asked (``install``; it needs only
torch, which the image has, and PyYAML, not hetplan), runs ``hetplan-profile --device cuda:0 --model NAME <the
model's shapes> [--quick] [--gpu NAME] --out /profiles/<gpu>.yaml`` and prints the file between two marker lines,
so it can be collected from the logs::

    kubectl logs job/hetplan-profile-nvidia-h100-80gb-hbm3 \\
      | sed -n '/^# hetplan-profile-begin/,/^# hetplan-profile-end/p' | sed '1d;$d' > h100.yaml

With ``pvc`` the file is also kept on that PersistentVolumeClaim, mounted at ``/profiles``; otherwise
``/profiles`` is an ``emptyDir``. The model's shapes come from hetplan's catalog and are passed as flags
(``--hidden-size``, ``--heads``, ...), so the pod needs no catalog. The catalog GPU name passed with ``--gpu`` comes
from hetplan's label table
(:data:`hetplan.emit.ir.DEFAULT_GPU_LABELS`) when the label value is in it; otherwise the pod matches the device
name itself. Jobs are validated offline before anything is written, by :func:`hetplan.emit.validate.validate_files`
(kubernetes-validate, strict, plus Kubernetes' name and label syntax).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetplan.emit.names import MAX_LABEL, dns_name, is_dns_label, is_dns_subdomain
from hetplan.emit.settings import DEFAULT_GPU_LABELS, check_label_value
from hetplan.emit.validate import check_kubernetes_version, validate_files
from hetplan.errors import InputError
from hetplan.io import to_yaml

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

DEFAULT_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
DEFAULT_INSTALL = "hetplan-profiler"
"""The profiler's distribution name (``profiler/`` in the hetplan repository); pass a wheel or a VCS URL with
``#subdirectory=profiler`` where no package index serves it."""
BEGIN = "# hetplan-profile-begin"
END = "# hetplan-profile-end"


@dataclass(frozen=True)
class JobSettings:
    """What the Jobs need besides the labels.

    Attributes:
        label_key: node label that selects a GPU type.
        image: container image with a CUDA build of torch (the default is PyTorch's runtime image).
        install: pip requirement installed before profiling (``""``: the image already has the profiler).
        namespace: namespace of the Jobs.
        gpus: GPUs requested per Job (2+ also measures the all-reduce).
        quick: profile with ``--quick``.
        model: model whose weight shapes the GEMMs use.
        pvc: PersistentVolumeClaim to keep the files on (mounted at ``/profiles``), or ``None``.
        kubernetes_version: schema version for validation.
    """

    label_key: str = "nvidia.com/gpu.product"
    image: str = DEFAULT_IMAGE
    install: str = DEFAULT_INSTALL
    namespace: str = "default"
    gpus: int = 1
    quick: bool = True
    model: str = "Llama-3-8B"
    pvc: str | None = None
    kubernetes_version: str = "1.33"


def catalog_name_for(label_value: str) -> str | None:
    """Catalog GPU whose default node label value is ``label_value`` (case-insensitive), else ``None``."""
    for name, value in sorted(DEFAULT_GPU_LABELS.items()):
        if value.lower() == label_value.lower():
            return name
    return None


def build_job(label_value: str, s: JobSettings, catalog: Catalog | None = None) -> tuple[str, dict[str, Any]]:
    """(file name, Job object) for one GPU label value (the model's shapes from ``catalog``; None: the shipped
    catalogs)."""
    gpu = catalog_name_for(label_value)
    stem = dns_name(gpu or label_value, 40, fallback="gpu")
    name = dns_name(f"hetplan-profile-{label_value}", MAX_LABEL)
    out = f"/profiles/{stem}.yaml"
    cmd = ["hetplan-profile", "--device", "cuda:0", "--model", s.model, *shape_args(s.model, catalog)]
    cmd += ["--out", out, "--force"]
    if s.quick:
        cmd.append("--quick")
    if gpu:
        cmd += ["--gpu", gpu]
    steps = ["set -e"]
    if s.install:
        steps.append(f"pip install --quiet {shlex.quote(s.install)}")
    steps += [
        " ".join(shlex.quote(c) for c in cmd),
        f"echo {shlex.quote(BEGIN)}",
        f"cat {out}",
        f"echo {shlex.quote(END)}",
    ]
    script = "; ".join(steps)
    labels = {"app.kubernetes.io/name": "hetplan-profile", "app.kubernetes.io/managed-by": "hetplan"}
    volume: dict[str, Any] = (
        {"name": "profiles", "persistentVolumeClaim": {"claimName": s.pvc}}
        if s.pvc
        else {"name": "profiles", "emptyDir": {}}
    )
    volumes: list[dict[str, Any]] = [volume]
    mounts: list[dict[str, Any]] = [{"name": "profiles", "mountPath": "/profiles"}]
    if s.gpus >= 2:
        # NCCL and torch.multiprocessing keep their buffers in /dev/shm, which a container gets at 64 MiB: the
        # all-reduce across the Job's GPUs fails there ("unhandled system error", bus errors) without a larger one
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": s.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 1,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {s.label_key: label_value},
                    "containers": [
                        {
                            "name": "profile",
                            "image": s.image,
                            "command": ["/bin/sh", "-c"],
                            "args": [script],
                            "resources": {"limits": {"nvidia.com/gpu": str(s.gpus)}},
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }
    return f"{name}.yaml", job


def shape_args(model: str, catalog: Catalog | None = None) -> list[str]:
    """``hetplan-profile`` flags giving ``catalog``'s model ``model``'s shapes (the pod has no catalog; None: the
    shipped catalogs)."""
    from hetplan.catalog.context import Catalog
    from hetplan.catalog.profile_measure import model_shape_fields

    f = model_shape_fields((catalog or Catalog.shipped()).find_model(model))
    args = ["--hidden-size", f["hidden_size"], "--heads", f["num_attention_heads"], "--kv-heads"]
    args += [f["num_key_value_heads"], "--head-dim", f["head_dim"], "--ffn-size", f["ffn_size"]]
    args.append("--gated-mlp" if f["gated_mlp"] else "--no-gated-mlp")
    return [str(a) for a in args]


def job_model(model: str | None, catalog: Catalog | None = None) -> str:
    """The name in ``catalog`` (None: the shipped catalogs) of ``--model`` for a Job's command (default
    Llama-3-8B).

    Raises:
        InputError: unknown model, or a local config.json (the pod cannot read this machine's files).
    """
    import os

    from hetplan.catalog.context import Catalog

    if model is None:
        return JobSettings.model
    if model.endswith(".json") or os.path.exists(model):  # False for names too long to be paths
        raise InputError(
            f"--model {model} is a local file",
            "a Job runs on a cluster node and cannot read this machine's files",
            "pass a catalog model name (hetplan catalog models)",
        )
    return (catalog or Catalog.shipped()).find_model(model).name


def build_jobs(label_values: list[str], s: JobSettings, catalog: Catalog | None = None) -> dict[str, str]:
    """File name -> YAML text of one Job per label value, validated offline (``catalog``: as :func:`build_job`).

    Raises:
        InputError: no label, an empty or bad label value, namespace, claim name (``pvc``) or GPU count,
            duplicate labels, or a Job that fails validation (a bug; the message names the field).
    """
    if not label_values:
        raise InputError("--emit-job needs GPU node labels", fix="pass --gpu-label VALUE for each GPU type")
    if s.gpus < 1:
        raise InputError(f"--gpus-per-job must be >= 1, got {s.gpus}", fix="pass 1, or 2+ to measure all-reduce")
    if not is_dns_label(s.namespace):
        raise InputError(f"namespace {s.namespace!r} is not a DNS-1123 label", fix="pass e.g. --namespace default")
    if s.pvc is not None and not is_dns_subdomain(s.pvc):
        raise InputError(
            f"--pvc {s.pvc!r} is not a valid PersistentVolumeClaim name",
            "claim names are RFC 1123 subdomains: lower-case letters, digits, '-' and '.', at most 253 characters, "
            "starting and ending with a letter or digit",
            "pass the claim's name as 'kubectl get pvc' shows it, e.g. --pvc hetplan-profiles",
        )
    check_kubernetes_version(s.kubernetes_version)
    files: dict[str, str] = {}
    for value in label_values:
        if not value.strip():  # a valid label value, but no GPU node carries it: the Job would never schedule
            raise InputError(
                "--gpu-label '' is empty",
                "a Job selects its node by the label's value; an empty value matches no GPU node, so it would wait "
                "unscheduled",
                "pass the value your GPU nodes carry, e.g. --gpu-label NVIDIA-H100-80GB-HBM3 (kubectl get nodes -L "
                "nvidia.com/gpu.product)",
            )
        check_label_value(value, "--gpu-label")
        fname, job = build_job(value, s, catalog)
        if fname in files:
            raise InputError(f"--gpu-label {value} given twice", fix="give each GPU label once")
        files[fname] = to_yaml(job)
    report = validate_files(files, s.kubernetes_version)
    if not report.ok:
        raise InputError("an emitted Job is not valid", "; ".join(report.errors), "report this bug")
    return dict(sorted(files.items()))
