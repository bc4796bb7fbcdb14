"""Profile files: what ``hetplan-profile`` / ``hetplan profile`` write and ``--profile`` / ``hetplan profile merge``
read. This module reads and validates them (versions 1 and 2) and says what they did to a plan; matching a device
to the catalog is :mod:`hetplan.catalog.profile_match`, ``hetplan profile merge`` is
:mod:`hetplan.catalog.profile_merge`, and hetplan's side of measuring (:func:`hetplan.catalog.profile_measure.measure`,
which calls the separately installed profiler package) is :mod:`hetplan.catalog.profile_measure`.

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

Reading it, hetplan matches the device to its catalog (:func:`~hetplan.catalog.profile_match.match_device`:
``file_under`` wins, else the CUDA device name through the node label table, then the catalog names) and builds
what version 1 files held on disk: the matched catalog GPU entry carrying the ``measured`` block (or a new device
type whose "datasheet" figures are the measured ones) and the efficiency against the datasheet. Version 1 files
(written by hetplan 0.1's own ``hetplan profile``) are that resolved form and are still read::

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

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetplan.catalog.loader import format_validation, read_yaml_mapping
from hetplan.catalog.profile_match import device_type_name, efficiency, match_device, new_device_spec
from hetplan.catalog.schemas import GpuMeasured, GpuSpec
from hetplan.errors import CatalogError, InputError
from hetplan.io import to_yaml

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

PROFILE_DOC = "see docs/profile.md"
PROFILE_SCHEMA = Path(__file__).with_name("profile.schema.json")
"""The version-2 JSON Schema: a copy of ``profiler/src/hetplan_profiler/profile.schema.json``."""
SCHEMA_VERSIONS = (1, 2)
"""Profile file versions hetplan reads."""
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


def load_profile(path: str | Path, catalog: Catalog | None = None) -> ProfileFile:
    """Read and validate a profile file (version 1 or 2; see the module docstring), its device matched to
    ``catalog``'s GPUs (None: the shipped catalogs).

    Raises:
        InputError / CatalogError: unreadable file, an unknown version, fields that do not match the schema
            (named), or a ``file_under`` GPU the catalog lacks.
    """
    doc = read_yaml_mapping(Path(path), "profile", PROFILE_DOC)
    prof = profile_from_doc(doc, f"profile {path}", catalog)
    if prof.gpu.measured is None:
        raise InputError(f"profile {path} has no gpu.measured block", fix="write it with 'hetplan profile'")
    return prof


def profile_from_doc(doc: dict[str, Any], what: str = "profile", catalog: Catalog | None = None) -> ProfileFile:
    """A profile document (a parsed file, or what the profiler just returned) in its resolved form, matched to
    ``catalog``'s GPUs (None: the shipped catalogs).

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
    if catalog is None:
        from hetplan.catalog.context import Catalog

        catalog = Catalog.shipped()
    return _resolve(doc, what, catalog)


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


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, protected_namespaces=())


class _Device(_Part):
    memory_gib: Any


class _Shapes(_Part):
    name: Any


class _Version2(_Part):
    """The parts of a version-2 document (checked against the JSON schema first) that :func:`_resolve` reads;
    ``device`` and ``provenance`` stay mappings (their keys are copied into the profile's provenance in order)."""

    measured: Any
    device: dict[str, Any]
    file_under: Any = None
    provenance: dict[str, Any]
    model_shapes: _Shapes
    tables: Any
    notes: list[Any]


def _resolve(doc: dict[str, Any], what: str, catalog: Catalog) -> ProfileFile:
    """A version-2 document (schema-checked) matched to the catalog: the catalog entry, the match, efficiency."""
    v2 = _Version2.model_validate(doc)
    try:
        measured = GpuMeasured.model_validate(v2.measured)
    except ValidationError as exc:
        lines = format_validation(exc).split("; ")
        raise CatalogError(
            f"{what} does not match its schema", "; ".join(f"measured.{x}" for x in lines), PROFILE_DOC
        ) from None
    gpu = v2.file_under
    try:
        matched, how = match_device(measured.device_kind, measured.device_name, gpu, catalog)
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
            float(_Device.model_validate(v2.device).memory_gib),
            "new device type from hetplan profile: datasheet figures are the measured ones; interconnect and "
            "network figures are stand-ins, not measurements",
        )
    provenance = {**v2.provenance, "model_shapes": v2.model_shapes.name, **v2.device}
    return ProfileFile(
        schema_version=2,
        kind="gpu-profile",
        gpu=spec,
        match=ProfileMatch(catalog_gpu=matched.name if matched else None, how=how),
        efficiency_vs_datasheet=efficiency(spec, matched),
        tables=v2.tables,
        provenance=provenance,
        notes=list(v2.notes),
    )


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


def load_profiles(paths: Sequence[Path], catalog: Catalog | None = None) -> LoadedProfiles:
    """Read ``--profile`` files, matched to ``catalog``'s GPUs (None: the shipped catalogs); two files for the same
    GPU are refused.

    Raises:
        InputError: unreadable or invalid file, or two profiles of one GPU type.
    """
    seen: dict[str, str] = {}
    specs: list[GpuSpec] = []
    files: list[tuple[str, ProfileFile]] = []
    for path in paths:
        prof = load_profile(path, catalog)
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
