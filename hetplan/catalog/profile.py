"""Profile files: what ``hetplan-profile`` / ``hetplan profile`` write and ``--profile`` / ``hetplan profile merge``
read, and hetplan's side of measuring (:func:`measure`, which calls the separately installed profiler package).

Version 2 (what the profiler package, ``profiler/`` in this repository, writes) holds raw measurements only; its
JSON Schema is ``profile.schema.json`` next to this module, a copy of the profiler's own that a test keeps equal::

    schema_version: 2
    kind: gpu-profile
    file_under: H100            # --gpu NAME, or null: match the device name
    device: {device_kind: cuda, device_name: NVIDIA H200, memory_gib: 139.8, torch_version, driver, clocks, ...}
    measured: {device_kind, device_name, gemm_tflops: {bf16: ...}, memory_read_gb_per_s, ...}   # GpuMeasured
    model_shapes: {name: Llama-3-8B, hidden_size: 4096, ...}
    tables: {gemm: [...], decode_gemm: [...], memory: [...], attention_prefill: [...], ...}
    provenance: {profiler_version, command, quick, profiled_at, timing, warmup, repeats}
    notes: [...]

Reading it, hetplan matches the device to its catalog (:func:`match_device`: ``file_under`` wins, else the CUDA
device name through the node label table, then the catalog names) and builds what version 1 files held on disk:
the matched catalog GPU entry carrying the ``measured`` block (or a new device type whose "datasheet" figures are
the measured ones) and the efficiency against the datasheet. Version 1 files (written by hetplan 0.1's own
``hetplan profile``) are that resolved form and are still read::

    schema_version: 1
    kind: gpu-profile
    gpu: {...}                  # a catalog GPU entry (GpuSpec) carrying a ``measured`` block
    match: {catalog_gpu: H200-SXM, how: "device name 'NVIDIA H200' -> node label NVIDIA-H200"}
    efficiency_vs_datasheet: {bf16: 0.79, memory_read: 0.9, ...}
    tables: {...}
    provenance: {hetplan_version, torch_version, cuda_version, driver, clocks, command, ...}

Either way a profile is read as a :class:`ProfileFile` in that resolved form. ``gpu`` is in the catalog's GPU
schema, so ``hetplan profile merge`` copies it into a catalog folder's ``gpus.yaml``; its datasheet figures are
kept (when the device matched a catalog GPU) and the ``measured`` block is what the performance model uses instead
of the peaks and priors (:mod:`hetplan.perf.measured`).

What a profile applies to (``hetplan plan --profile``): the catalog GPU named in ``gpu.name``. A CPU profile
(``device_kind: cpu``) applies to a GPU only when it was taken with ``--gpu NAME`` (useful to test the pipeline,
and every plan says the figures are a CPU's); otherwise it registers a new device type ``CPU-<model>`` that plans
use only when it is among the candidate GPUs and has a price, and the plan says that it matched nothing.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetplan.catalog.loader import (
    catalog_dir,
    find_gpu,
    find_model,
    format_validation,
    load_gpus,
    read_yaml_file,
    read_yaml_mapping,
)
from hetplan.catalog.schemas import GpuCatalog, GpuMeasured, GpuSpec, ModelSpec
from hetplan.errors import CatalogError, HetplanError, InputError
from hetplan.io import to_json, to_yaml, write_atomic

PROFILE_DOC = "see docs/profile.md"
PROFILE_SCHEMA = Path(__file__).with_name("profile.schema.json")
"""The version-2 JSON Schema: a copy of ``profiler/src/hetplan_profiler/profile.schema.json``."""
SCHEMA_VERSIONS = (1, 2)
"""Profile file versions hetplan reads."""
MERGE_MANIFEST = "hetplan-merge.json"
"""What ``merge`` writes into its folder: the files it wrote, so that a later ``merge --force`` removes the stale
ones (and only those)."""
PROFILER_INSTALL = (
    "from a hetplan clone: pip install ./profiler (it needs torch >= 2.3 and pulls it in when missing; an "
    "unpinned torch on Linux is a multi-GB CUDA build, so to try it on a CPU install a CPU build of torch first: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)
Cell = str | float | int | bool | None


class ProfileMatch(BaseModel):
    """Which catalog GPU the device was matched to (``None``: a new device type) and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalog_gpu: str | None
    how: str


class ProfileFile(BaseModel):
    """A profile in its resolved form (see the module docstring): a version-1 file as it is, or a version-2 file
    matched to the catalog (``schema_version`` says which the file was)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: Literal[1, 2]
    kind: Literal["gpu-profile"]
    gpu: GpuSpec
    match: ProfileMatch
    efficiency_vs_datasheet: dict[str, float] = Field(default_factory=dict)
    tables: dict[str, list[dict[str, Cell]]] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @property
    def is_cpu(self) -> bool:
        """True when the figures were measured on a CPU."""
        return self.gpu.measured is not None and self.gpu.measured.device_kind == "cpu"


def load_profile(path: str | Path) -> ProfileFile:
    """Read and validate a profile file (version 1 or 2; see the module docstring).

    Raises:
        InputError / CatalogError: unreadable file, an unknown version, fields that do not match the schema
            (named), or a ``file_under`` GPU the catalog lacks.
    """
    doc = read_yaml_mapping(Path(path), "profile", PROFILE_DOC)
    prof = profile_from_doc(doc, f"profile {path}")
    if prof.gpu.measured is None:
        raise InputError(f"profile {path} has no gpu.measured block", fix="write it with 'hetplan profile'")
    return prof


def profile_from_doc(doc: dict[str, Any], what: str = "profile") -> ProfileFile:
    """A profile document (a parsed file, or what the profiler just returned) in its resolved form.

    Raises:
        CatalogError: an unknown ``schema_version`` or fields that do not match the schema. InputError: a
            ``file_under`` GPU the catalog lacks.
    """
    version = doc.get("schema_version")
    if version == 1 and not isinstance(version, bool):
        try:
            return ProfileFile.model_validate(doc)
        except ValidationError as exc:
            raise CatalogError(
                f"{what} does not match its schema", format_validation(exc), f"fix the named fields ({PROFILE_DOC})"
            ) from None
    if version != 2 or isinstance(version, bool):
        raise CatalogError(
            f"{what} has schema_version {version!r}, which this hetplan does not read",
            f"hetplan reads profile files of versions {', '.join(map(str, SCHEMA_VERSIONS))}",
            "measure it again with the profiler that comes with this hetplan (pip install ./profiler), or update "
            "hetplan",
        )
    errors = profile_schema_errors(doc)
    if errors:
        raise CatalogError(
            f"{what} does not match its schema (version 2)",
            "; ".join(errors[:8]),
            f"fix the named fields ({PROFILE_DOC}; schema: hetplan/catalog/profile.schema.json)",
        )
    return _resolve(doc, what)


@cache
def _schema_validator() -> Any:
    import json

    import jsonschema

    schema = json.loads(PROFILE_SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def profile_schema_errors(doc: Any) -> list[str]:
    """Where ``doc`` breaks the version-2 schema, as ``field.path: message`` lines (jsonschema)."""
    errors = sorted(_schema_validator().iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}" for e in errors]


def _resolve(doc: dict[str, Any], what: str) -> ProfileFile:
    """A version-2 document (schema-checked) matched to the catalog: the catalog entry, the match, efficiency."""
    try:
        measured = GpuMeasured.model_validate(doc["measured"])
    except ValidationError as exc:
        lines = format_validation(exc).split("; ")
        raise CatalogError(
            f"{what} does not match its schema", "; ".join(f"measured.{x}" for x in lines), PROFILE_DOC
        ) from None
    device = doc["device"]
    gpu = doc.get("file_under")
    try:
        matched, how = match_device(measured.device_kind, measured.device_name, gpu)
    except InputError as exc:
        raise InputError(
            f"{what} is filed under {gpu!r} (file_under, from --gpu), which is no catalog GPU",
            exc.why or exc.what,
            "measure again with --gpu set to a catalog GPU (hetplan catalog gpus), or use a catalog folder that "
            "has it (HETPLAN_CATALOG_DIR)",
        ) from None
    if matched is not None:
        spec = GpuSpec.model_validate({**matched.model_dump(), "measured": measured})
    else:
        spec = new_device_spec(
            device_type_name(measured.device_kind, measured.device_name),
            measured.model_dump(),
            float(device["memory_gib"]),
            "new device type from hetplan profile: datasheet figures are the measured ones; interconnect and "
            "network figures are stand-ins, not measurements",
        )
    provenance = {**doc["provenance"], "model_shapes": doc["model_shapes"]["name"], **device}
    return ProfileFile(
        schema_version=2,
        kind="gpu-profile",
        gpu=spec,
        match=ProfileMatch(catalog_gpu=matched.name if matched else None, how=how),
        efficiency_vs_datasheet=efficiency(spec, matched),
        tables=doc["tables"],
        provenance=provenance,
        notes=list(doc["notes"]),
    )


def match_device(kind: str, name: str, gpu: str | None) -> tuple[GpuSpec | None, str]:
    """The catalog GPU a device's figures belong to, and how it was found.

    ``--gpu NAME`` (``file_under``) wins. A CUDA device name becomes the NVIDIA GPU feature discovery label
    (``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``) looked up in hetplan's label table, then the name
    without ``NVIDIA`` in the catalog. A CPU matches nothing.

    Raises:
        InputError: ``gpu`` names no catalog GPU.
    """
    if gpu:
        return find_gpu(gpu), f"--gpu {gpu}"
    if kind == "cpu":
        return None, "a CPU matches no catalog GPU (pass --gpu NAME to file its figures under one)"
    from hetplan.emit.settings import DEFAULT_GPU_LABELS

    label = re.sub(r"\s+", "-", name.strip())
    for catalog_name, value in sorted(DEFAULT_GPU_LABELS.items()):
        if value.lower() == label.lower():
            return find_gpu(catalog_name), f"device name {name!r} -> node label {value}"
    stripped = re.sub(r"^(nvidia|tesla)\s+", "", name.strip(), flags=re.I)
    for candidate in (stripped, stripped.split()[0] if stripped else ""):
        if not candidate:
            continue
        try:
            return find_gpu(candidate), f"device name {name!r} -> catalog name {candidate!r}"
        except InputError:
            continue
    return None, f"device name {name!r} matches no catalog GPU (pass --gpu NAME to name it)"


def device_type_name(kind: str, device_name: str) -> str:
    """Name of the new device type a device that matches no catalog GPU becomes (``CPU-<model>`` for a CPU)."""
    short = re.sub(r"\(R\)|\(TM\)|CPU|@.*$", "", device_name)
    name = ("CPU-" if kind == "cpu" else "") + re.sub(r"[^A-Za-z0-9.]+", "-", short).strip("-")
    return name[:48]


def _sig(value: float) -> float:
    return float(f"{value:.4g}")


def efficiency(gpu: GpuSpec, matched: GpuSpec | None) -> dict[str, float]:
    """Measured / datasheet per dtype and for memory (``memory_read``, ``memory_copy``), when a catalog GPU matched;
    4 significant digits (a CPU against a GPU datasheet is ~1e-4, which 4 decimals would round to 0)."""
    m = gpu.measured
    if matched is None or m is None:
        return {}
    out: dict[str, float] = {}
    for dtype, value in sorted(m.gemm_tflops.items()):
        key = {"tf32": "bf16", "fp32": None}.get(dtype, dtype)
        if key is None:
            continue
        try:
            peak, estimated = matched.dense_tflops(key)
        except KeyError:
            continue
        # tf32 tensor cores run at half the 16-bit dense rate on Ampere and Hopper
        peak = peak / 2 if dtype == "tf32" else peak
        if not estimated:
            out[dtype] = _sig(value / peak)
    out["memory_read"] = _sig(m.memory_read_gb_per_s / matched.hbm_gb_per_s)
    out["memory_copy"] = _sig(m.memory_copy_gb_per_s / matched.hbm_gb_per_s)
    return out


def model_shape_fields(spec: ModelSpec) -> dict[str, Any]:
    """What the profiler's ``ModelShape`` (the ``model_shapes`` block) takes of a catalog model: one layer's
    dimensions, with an expert's MLP width for a mixture of experts."""
    ff = spec.moe_intermediate_size if spec.is_moe and spec.moe_intermediate_size else spec.intermediate_size
    return {
        "name": spec.name,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "ffn_size": ff,
        "gated_mlp": spec.gated_mlp,
    }


def measure(
    device: str,
    quick: bool,
    model: str,
    gpu: str | None,
    command: str,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[dict[str, Any], ProfileFile]:
    """``hetplan profile``: measure ``device`` with the installed profiler package (``hetplan_profiler``, imported
    here only) using catalog model ``model``'s shapes; returns the profile document as the profiler writes it and
    its resolved form (matched to the catalog, for the summary).

    Raises:
        HetplanError (exit 1): the profiler package is not installed (the message says how to install it).
        InputError: unknown ``model`` or ``gpu`` (before anything is measured), torch missing, a bad device or one
            torch cannot use.
    """
    try:
        from hetplan_profiler.errors import ProfilerError
        from hetplan_profiler.run import ProfileRequest, run_profile
        from hetplan_profiler.shapes import ModelShape
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "hetplan_profiler":
            raise
        raise HetplanError(
            "hetplan profile needs the hetplan profiler package (hetplan-profiler), which is not installed",
            "measuring lives in a package of its own (profiler/ in the hetplan repository) so that hetplan does not "
            "need torch; every other command, 'hetplan profile merge' and 'hetplan profile fit' included, works "
            "without it",
            PROFILER_INSTALL,
        ) from None
    spec = find_model(model)
    if gpu:
        find_gpu(gpu)  # an unknown --gpu is refused before minutes of measuring
    try:
        shape = ModelShape(**model_shape_fields(spec))
        doc = run_profile(ProfileRequest(device, quick, shape, gpu, command, tool="hetplan profile"), progress)
    except ProfilerError as exc:
        raise InputError(exc.what, exc.why, exc.fix) from None
    return doc, profile_from_doc(doc, "the profile just measured")


def dump_profile(prof: ProfileFile) -> str:
    """The resolved profile as a version-1 file (field order as in the schema, ``None`` fields of the GPU entry left
    out): the layout hetplan 0.1 wrote; hetplan still reads it, and tests use it to check that."""
    doc = prof.model_dump(mode="json")
    doc["schema_version"] = 1
    doc["gpu"] = prof.gpu.model_dump(mode="json", exclude_none=True)
    return to_yaml(doc)


@dataclass(frozen=True)
class LoadedProfiles:
    """Profiles read for a plan: the GPU entries to overlay on the catalog and (file name, profile) pairs."""

    specs: tuple[GpuSpec, ...]
    files: tuple[tuple[str, ProfileFile], ...]


def load_profiles(paths: Sequence[Path]) -> LoadedProfiles:
    """Read ``--profile`` files; two files for the same GPU are refused.

    Raises:
        InputError: unreadable or invalid file, or two profiles of one GPU type.
    """
    seen: dict[str, str] = {}
    specs: list[GpuSpec] = []
    files: list[tuple[str, ProfileFile]] = []
    for path in paths:
        prof = load_profile(path)
        name = prof.gpu.name
        if name in seen:
            raise InputError(
                f"two profiles for {name}: {seen[name]} and {Path(path).name}",
                "each GPU type takes its figures from one profile",
                "pass one profile per GPU type (keep the one from the node you trust)",
            )
        seen[name] = Path(path).name
        specs.append(prof.gpu)
        files.append((Path(path).name, prof))
    return LoadedProfiles(tuple(specs), tuple(files))


def profile_notes(loaded: LoadedProfiles, candidates: list[str]) -> list[str]:
    """Plan warnings that say what each profile did: which GPU it replaced, that a CPU measured it, or that it
    matched nothing among ``candidates`` (the plan's candidate GPU names)."""
    notes = []
    for file, prof in loaded.files:
        g = prof.gpu
        m = g.measured
        assert m is not None
        figures = ", ".join(f"{k} {v:,.4g} TFLOP/s" for k, v in sorted(m.gemm_tflops.items()))
        where = f"profile {file} ({m.device_kind}: {m.device_name}"
        where += f", {m.profiled_at})" if m.profiled_at else ")"
        if g.name not in candidates:
            if prof.match.catalog_gpu is None:
                notes.append(
                    f"{where} matched no catalog GPU and is registered as a new device type {g.name!r}; it is not "
                    f"used here (name it with --gpu/--gpus, and price it with --prices to plan with it)"
                )
            else:
                notes.append(f"{where} is for {g.name}, which is not a candidate GPU here: it changes nothing")
            continue
        text = (
            f"{g.name}: measured figures from {where} replace the datasheet and efficiency priors: {figures}, "
            f"read {m.memory_read_gb_per_s:,.4g} GB/s"
        )
        # a CPU's figures under a GPU's name: hetplan.perf.measured.measured_notes warns (every consumer)
        if prof.is_cpu and prof.match.catalog_gpu is None:
            text += " - a CPU registered as a new device type from its profile"
        notes.append(text)
    return notes


def merge_profiles(paths: list[Path], out_dir: Path, force: bool = False) -> list[Path]:
    """Write a catalog folder: the shipped ``gpus.yaml`` with each profiled GPU's entry replaced (or added, for
    new device types), the shipped ``prices.yaml`` and ``models.yaml``, and the profiles under ``profiles/``.
    Point ``HETPLAN_CATALOG_DIR`` at it and every command uses the measured figures.

    Returns the files written (sorted). Raises:
        InputError: bad profiles, two profiles of one GPU, or existing files without ``force``.
    """
    loaded = load_profiles(paths)
    if not loaded.specs:
        raise InputError("no profiles to merge", fix="pass one or more profile files")
    base = load_gpus()
    overlay = {g.name: g for g in loaded.specs}
    known = {g.name for g in base.gpus}
    gpus = [overlay.get(g.name, g) for g in base.gpus] + [g for g in loaded.specs if g.name not in known]
    sources = ", ".join(f"{name} ({p.gpu.name})" for name, p in loaded.files)
    catalog = GpuCatalog(
        schema_version=1,
        kind="gpus",
        source=f"{base.source} Measured figures (gpu.measured) from hetplan profile: {sources}.",
        as_of=max((p.gpu.measured.profiled_at[:10] for _, p in loaded.files if p.gpu.measured), default=base.as_of)
        or base.as_of,
        gpus=tuple(gpus),
    )
    doc = catalog.model_dump(mode="json")
    doc["gpus"] = [g.model_dump(mode="json", exclude_none=True) for g in catalog.gpus]
    texts = {"gpus.yaml": to_yaml(doc)}
    src = catalog_dir()
    for name in ("prices.yaml", "models.yaml"):
        texts[name] = (src / name).read_text(encoding="utf-8")
    for (name, _), path in zip(loaded.files, paths, strict=True):
        texts[f"profiles/{name}"] = Path(path).read_text(encoding="utf-8")
    texts[MERGE_MANIFEST] = to_json({"kind": "hetplan-profile-merge", "files": sorted(texts)})
    existing = [n for n in texts if (out_dir / n).exists()]
    if existing and not force:
        raise InputError(
            f"{out_dir} already holds {', '.join(sorted(existing))}",
            "hetplan does not overwrite files unless asked",
            "pass --force, or choose another --out folder",
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} is not a folder", fix="give a folder path")
    stale = _previous_merge_files(out_dir) - set(texts)
    written = []
    for name, text in sorted(texts.items()):
        written.append(write_atomic(out_dir / name, text, force=force))
    for name in sorted(stale):  # what the previous merge wrote and this one does not (never other files)
        (out_dir / name).unlink(missing_ok=True)
    # check the folder loads with the catalog loader before saying it is done
    read_yaml_file(out_dir / "gpus.yaml", GpuCatalog, "merged GPU catalog")
    return written


def _previous_merge_files(out_dir: Path) -> set[str]:
    """Files (relative names) a previous ``merge`` wrote into ``out_dir``: those its manifest lists, or, for a
    folder merged before hetplan wrote manifests, the profile files under ``profiles/`` (files whose ``kind`` is
    ``gpu-profile``). Only plain files inside ``out_dir`` count; anything else there is the user's and kept."""
    import json

    import yaml

    manifest = out_dir / MERGE_MANIFEST
    names: set[str] = set()
    if manifest.is_file():
        try:
            listed = json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
        except (ValueError, AttributeError, UnicodeDecodeError):
            listed = []
        names = {n for n in listed if isinstance(n, str)}
    elif (out_dir / "profiles").is_dir():
        for path in (out_dir / "profiles").iterdir():
            try:
                doc = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
            except (yaml.YAMLError, UnicodeDecodeError, OSError):
                continue
            if isinstance(doc, dict) and doc.get("kind") == "gpu-profile":
                names.add(f"profiles/{path.name}")
    root = out_dir.resolve()
    keep = set()
    for name in names:
        path = out_dir / name
        if path.is_file() and not path.is_symlink() and root in path.resolve().parents:
            keep.add(name)
    return keep


def new_device_spec(name: str, measured: dict[str, Any], memory_gib: float, notes: str) -> GpuSpec:
    """A catalog entry for a device no catalog GPU matches: its measured figures stand in for the datasheet.

    ``interconnect_gb_per_s`` and ``network_gbit_per_s`` are required by the schema but not measured for a single
    device: the all-reduce bus bandwidth (x2, bidirectional) or, failing that, the host link stands in for the
    first, 100 Gbit/s for the second; ``notes`` says so. The vendor is NVIDIA (or AMD) when a CUDA device's name
    says so, else ``measured``. Only measured dtypes get a compute figure (an unmeasured
    bf16 or fp16 is left empty, and :meth:`GpuSpec.dense_tflops` uses the other 16-bit figure for it).
    """
    from hetplan.catalog.schemas import GpuMeasured

    m = GpuMeasured.model_validate(measured)
    link = (m.allreduce_bus_gb_per_s or 0.0) * 2 or m.host_to_device_gb_per_s or m.memory_copy_gb_per_s
    # the vendor as the device names itself (torch reports ROCm devices as "cuda" too): emit deploys NVIDIA only
    device = m.device_name.strip().lower()
    vendor = "measured"
    if m.device_kind == "cuda":
        vendor = "NVIDIA" if device.startswith(("nvidia", "tesla")) else "AMD" if device.startswith("amd") else vendor
    return GpuSpec(
        name=name,
        vendor=vendor,
        arch="CPU" if m.device_kind == "cpu" else "",
        # only what was measured: an unmeasured 16-bit dtype stays empty and GpuSpec.dense_tflops falls back to
        # the other one (the --quick CPU profile measures bf16 only; the full one shows fp16 ~3x apart)
        bf16_dense_tflops=m.gemm_tflops.get("bf16"),
        fp16_dense_tflops=m.gemm_tflops.get("fp16"),
        fp8_dense_tflops=m.gemm_tflops.get("fp8"),
        hbm_gib=memory_gib,
        hbm_gb_per_s=m.memory_read_gb_per_s,
        interconnect_gb_per_s=link,
        network_gbit_per_s=100.0,
        notes=notes,
        measured=m,
    )
