"""Offline validation of emitted files: core kinds with kubernetes-validate (strict), custom kinds with jsonschema
against the CRD schemas shipped in ``hetplan/emit/schemas`` (unknown fields rejected), names and labels by
Kubernetes' syntax rules, and shell scripts with ``bash -n``.

No network is used: kubernetes-validate carries its own schemas, and the CRD schemas are package data. What this
cannot check is listed in :data:`NOT_CHECKED` and in every :class:`ValidationReport`.

Source: DESIGN §5 (validation); the strict-schema walk follows ``shared/schemas/README.md``; hetplan's own
reconstruction otherwise.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from hetplan.emit.engines import (
    TRTLLM_DISAGG_KEYS,
    TRTLLM_OPTION_KEYS,
    command_errors,
    commands_in,
    config_errors,
    containers,
    engine_text_errors,
    is_trtllm_disagg,
    version_line,
)
from hetplan.emit.names import is_dns_label, is_label_key, is_label_value
from hetplan.errors import InputError

# (apiVersion, kind) -> schema file under hetplan/emit/schemas
CUSTOM_SCHEMAS: dict[tuple[str, str], str] = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset.x-k8s.io/leaderworkerset_v1.json",
    ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet"): "disaggregatedset.x-k8s.io/disaggregatedset_v1.json",
    ("inference.networking.k8s.io/v1", "InferencePool"): "inference.networking.k8s.io/inferencepool_v1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh/scaledobject_v1alpha1.json",
    ("nvidia.com/v1beta1", "DynamoGraphDeployment"): "nvidia.com/dynamographdeployment_v1beta1.json",
    ("nvidia.com/v1alpha1", "DynamoGraphDeployment"): "nvidia.com/dynamographdeployment_v1alpha1.json",
}
CORE_API_VERSIONS = ("v1", "apps/v1", "autoscaling/v2", "rbac.authorization.k8s.io/v1", "batch/v1")

NOT_CHECKED: tuple[str, ...] = (
    "admission webhooks of the controllers (LeaderWorkerSet, KEDA, Dynamo operator, inference extension) and "
    "server-side defaulting",
    "CEL rules in the CRDs (x-kubernetes-validations), list-map key uniqueness and JSON Schema 'format' keywords",
    "that the CRDs and controllers are installed, at the versions whose schemas hetplan ships",
    "scheduling: whether nodes with these GPU labels, GPU counts per node and RDMA networking exist",
    "image pulls, model downloads (Hugging Face access, the HF_TOKEN Secret) and registry credentials",
    "whether the engine accepts these flags at the image's version (the optional vllm_argparse test tier checks "
    "vllm serve argv against a real vLLM; SGLang and TensorRT-LLM arguments are checked against hetplan's pinned "
    "tables of each version line's documented names, not against the engines themselves)",
    "runtime behaviour: KV transfer between the GPU types, router discovery, Prometheus metrics for autoscaling",
)

_SKIP = ("enum", "default", "example", "x-kubernetes-validations")


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of :func:`validate_files`.

    Attributes:
        kubernetes_version: version whose core schemas were used.
        objects: ``(file, "Kind/name", validator)`` for every manifest checked, in file order.
        scripts: shell scripts syntax-checked with ``bash -n``.
        skipped: files not validated (documentation), with why.
        errors: every failure as ``file: Kind/name: path: message``; empty when all passed.
        not_checked: what offline validation cannot check (see :data:`NOT_CHECKED`).
    """

    kubernetes_version: str
    objects: tuple[tuple[str, str, str], ...]
    scripts: tuple[str, ...]
    skipped: tuple[str, ...]
    errors: tuple[str, ...]
    not_checked: tuple[str, ...] = NOT_CHECKED

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.errors

    def by_kind(self) -> dict[str, int]:
        """Objects checked per kind, sorted by kind."""
        counts: dict[str, int] = {}
        for _, ref, _ in self.objects:
            kind = ref.split("/", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items()))

    def to_doc(self) -> dict[str, Any]:
        """A JSON-ready summary (used by ``--json``)."""
        return {
            "ok": self.ok,
            "kubernetes_version": self.kubernetes_version,
            "objects_checked": len(self.objects),
            "by_kind": self.by_kind(),
            "scripts_checked": list(self.scripts),
            "skipped": list(self.skipped),
            "errors": list(self.errors),
            "not_checked": list(self.not_checked),
        }


def make_strict(node: Any) -> Any:
    """A copy of a CRD schema in which every object schema listing ``properties`` without
    ``additionalProperties`` or ``x-kubernetes-preserve-unknown-fields: true`` rejects unknown fields.

    ``enum``, ``default``, ``example`` and CEL rule values are copied as they are (not schemas).
    """
    if isinstance(node, list):
        return [make_strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SKIP:
            out[key] = value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: make_strict(sub) for name, sub in value.items()}
        else:
            out[key] = make_strict(value)
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def load_schema(relative: str) -> dict[str, Any]:
    """A shipped CRD schema (``hetplan/emit/schemas/<relative>``) as loaded, not made strict."""
    with resources.files("hetplan.emit").joinpath("schemas", relative).open("r", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def _validator(relative: str) -> jsonschema.protocols.Validator:
    schema = make_strict(load_schema(relative))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _path(parts: Any) -> str:
    return ".".join(str(p) for p in parts) or "(root)"


def _labels_errors(node: Any, path: str = "") -> list[str]:
    """Syntax of label keys and values in every ``labels``, ``matchLabels`` and ``nodeSelector`` map."""
    out: list[str] = []
    if isinstance(node, list):
        for i, x in enumerate(node):
            out += _labels_errors(x, f"{path}.{i}")
        return out
    if not isinstance(node, dict):
        return out
    for key, value in node.items():
        where = f"{path}.{key}".lstrip(".")
        if key in ("labels", "matchLabels", "nodeSelector") and isinstance(value, dict):
            for k, v in value.items():
                if not is_label_key(str(k)):
                    out.append(f"{where}: label key {k!r} is not valid")
                if not isinstance(v, str) or not is_label_value(v):
                    out.append(f"{where}: label value {v!r} of {k!r} is not valid (<= 63 characters, [A-Za-z0-9-_.])")
        else:
            out += _labels_errors(value, where)
    return out


def _check_object(obj: Any, version: str) -> tuple[str, str, list[str]]:
    """(``Kind/name``, validator used, errors) for one manifest."""
    if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
        return "?/?", "none", ["not a Kubernetes object (no apiVersion/kind)"]
    api, kind = str(obj["apiVersion"]), str(obj["kind"])
    name = str((obj.get("metadata") or {}).get("name", "?"))
    ref = f"{kind}/{name}"
    errors: list[str] = []
    if not is_dns_label(name):
        errors.append(f"metadata.name {name!r} is not a DNS-1123 label (<= 63 characters)")
    errors += _labels_errors(obj)
    if api in CORE_API_VERSIONS:
        used = f"kubernetes-validate (strict, Kubernetes {version})"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{_path(exc.path)}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(exc.message)
        return ref, used, errors
    schema = CUSTOM_SCHEMAS.get((api, kind))
    if schema is None:
        return ref, "none", errors + [f"no schema for {api} {kind}: hetplan cannot validate it offline"]
    used = f"jsonschema against schemas/{schema} (unknown fields rejected)"
    for err in sorted(_validator(schema).iter_errors(obj), key=lambda e: (_path(e.absolute_path), e.message)):
        errors.append(f"{_path(err.absolute_path)}: {err.message}")
    # ObjectMeta of a custom kind is only 'type: object' in its CRD; check it as a core object's metadata
    stand_in = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj.get("metadata", {})}
    try:
        kubernetes_validate.validate(stand_in, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        errors.append(f"{_path(exc.path)}: {exc.message}")
    return ref, used, errors


def check_kubernetes_version(version: str) -> None:
    """Raise :class:`InputError` unless kubernetes-validate ships schemas for ``version`` (e.g. ``1.33``)."""
    known = kubernetes_validate.utils.all_versions()
    wanted = version.lstrip("v")
    if not any(v.startswith(wanted + ".") or v == wanted for v in known):
        raise InputError(
            f"no Kubernetes {version} schemas in kubernetes-validate",
            f"it ships {known[0]} to {known[-1]}",
            "pass --kubernetes-version with one of those (e.g. 1.33)",
        )


def _engine_errors(doc: Any, engine: tuple[str, str]) -> list[str]:
    """Undocumented engine arguments in a manifest's containers (their command and args, ``bash -c`` strings
    included) and undocumented keys in the TensorRT-LLM YAML they carry in env (:mod:`hetplan.emit.engines`)."""
    name, version = engine
    line = version_line(version)
    errors: list[str] = []
    for c in containers(doc):
        argv = [str(x) for x in [*(c.get("command") or []), *(c.get("args") or [])]]
        if argv[:2] == ["/bin/bash", "-c"]:
            errors += [e for a in argv[2:] for e in engine_text_errors(a, name, version)]
        elif commands_in(shlex.join(argv)):
            errors += command_errors(argv, name, version)
        for env in c.get("env") or []:
            if env.get("name") in ("TRTLLM_OPTIONS", "TRTLLM_DISAGG") and "value" in env:
                cfg = yaml.safe_load(env["value"])
                table, what = (TRTLLM_DISAGG_KEYS, "disaggregated") if is_trtllm_disagg(cfg) else (
                    TRTLLM_OPTION_KEYS, "LLM API options")  # fmt: skip
                errors += [f"env {env['name']}: {e}" for e in config_errors(cfg, table, line, what)]
    return errors


def validate_files(
    files: Mapping[str, str], kubernetes_version: str = "1.33", engine: tuple[str, str] | None = None
) -> ValidationReport:
    """Validate emitted files (path -> text) offline; never raises for invalid content, reports it.

    YAML files (``.yaml``) may hold several documents; ``.sh`` files are checked with ``bash -n`` when bash is
    installed; other files are listed as skipped. With ``engine`` (name, version) the SGLang and TensorRT-LLM
    commands in scripts and containers are checked against the arguments that engine's version line documents,
    and TensorRT-LLM config files (``trtllm/*.yaml``, no ``apiVersion``) against its documented keys
    (:mod:`hetplan.emit.engines`).

    Raises:
        InputError: ``kubernetes_version`` is not one kubernetes-validate ships.
    """
    check_kubernetes_version(kubernetes_version)
    objects: list[tuple[str, str, str]] = []
    scripts: list[str] = []
    skipped: list[str] = []
    errors: list[str] = []
    bash = shutil.which("bash")
    for path, text in files.items():
        if path.endswith((".yaml", ".yml")):
            try:
                docs = [d for d in yaml.safe_load_all(text) if d is not None]
            except yaml.YAMLError as exc:
                errors.append(f"{path}: not valid YAML: {exc}")
                continue
            for doc in docs:
                if engine is not None and path.startswith("trtllm/") and "apiVersion" not in doc:
                    line = version_line(engine[1])
                    table, what = (TRTLLM_DISAGG_KEYS, "disaggregated") if is_trtllm_disagg(doc) else (
                        TRTLLM_OPTION_KEYS, "LLM API options")  # fmt: skip
                    objects.append((path, f"TensorRT-LLM {what} config", f"keys of TensorRT-LLM {line}"))
                    errors += [f"{path}: {e}" for e in config_errors(doc, table, line, what)]
                    continue
                if engine is not None:
                    errors += [f"{path}: {e}" for e in _engine_errors(doc, engine)]
                ref, used, errs = _check_object(doc, kubernetes_version)
                objects.append((path, ref, used))
                errors += [f"{path}: {ref}: {e}" for e in errs]
        elif path.endswith(".sh"):
            if bash is None:
                skipped.append(f"{path} (bash not installed: syntax not checked)")
                continue
            proc = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, check=False)
            scripts.append(path)
            if proc.returncode:
                errors.append(f"{path}: bash -n: {proc.stderr.strip()}")
            if engine is not None:
                errors += [f"{path}: {e}" for e in engine_text_errors(text, *engine)]
        else:
            skipped.append(f"{path} (documentation)")
    return ValidationReport(kubernetes_version, tuple(objects), tuple(scripts), tuple(skipped), tuple(errors))
