"""Profile files: what ``hetplan profile`` writes and ``--profile`` / ``hetplan profile merge`` read.

A profile file is a YAML document::

    schema_version: 1
    kind: gpu-profile
    gpu: {...}                  # a catalog GPU entry (GpuSpec) carrying a ``measured`` block
    match: {catalog_gpu: H200-SXM, how: "device name 'NVIDIA H200' -> node label NVIDIA-H200"}
    efficiency_vs_datasheet: {bf16: 0.79, memory_read: 0.9, ...}
    tables: {gemm: [...], decode_gemm: [...], memory: [...], attention_prefill: [...], ...}
    provenance: {hetplan_version, torch_version, cuda_version, driver, clocks, command, ...}

``gpu`` is in the catalog's GPU schema, so ``hetplan profile merge`` copies it into a catalog folder's
``gpus.yaml`` as it is; its datasheet figures are kept (when the device matched a catalog GPU) and the ``measured``
block is what the performance model uses instead of the peaks and priors (:mod:`hetplan.perf.measured`). A device
that matches no catalog GPU becomes a new device type whose "datasheet" figures are its measured ones.

What a profile applies to (``hetplan plan --profile``): the catalog GPU named in ``gpu.name``. A CPU profile
(``device_kind: cpu``) applies to a GPU only when it was taken with ``--gpu NAME`` (useful to test the pipeline,
and every plan says the figures are a CPU's); otherwise it registers a new device type ``CPU-<model>`` that plans
use only when it is among the candidate GPUs and has a price, and the plan says that it matched nothing.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hetplan.catalog.loader import catalog_dir, load_gpus, read_yaml_file
from hetplan.catalog.schemas import GpuCatalog, GpuSpec
from hetplan.errors import InputError
from hetplan.io import to_json, to_yaml, write_atomic

PROFILE_DOC = "see docs/profile.md"
MERGE_MANIFEST = "hetplan-merge.json"
"""What ``merge`` writes into its folder: the files it wrote, so that a later ``merge --force`` removes the stale
ones (and only those)."""
Cell = str | float | int | bool | None


class ProfileMatch(BaseModel):
    """Which catalog GPU the device was matched to (``None``: a new device type) and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalog_gpu: str | None
    how: str


class ProfileFile(BaseModel):
    """A profile file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: Literal[1]
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
    """Read and validate a profile file.

    Raises:
        InputError / CatalogError: unreadable file, or fields that do not match the schema (named).
    """
    prof = read_yaml_file(Path(path), ProfileFile, "profile", PROFILE_DOC)
    if prof.gpu.measured is None:
        raise InputError(f"profile {path} has no gpu.measured block", fix="write it with 'hetplan profile'")
    return prof


def dump_profile(prof: ProfileFile) -> str:
    """The profile as YAML (field order as in the schema, ``None`` fields of the GPU entry left out)."""
    doc = prof.model_dump(mode="json")
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
    first, 100 Gbit/s for the second; ``notes`` says so. Only measured dtypes get a compute figure (an unmeasured
    bf16 or fp16 is left empty, and :meth:`GpuSpec.dense_tflops` uses the other 16-bit figure for it).
    """
    from hetplan.catalog.schemas import GpuMeasured

    m = GpuMeasured.model_validate(measured)
    link = (m.allreduce_bus_gb_per_s or 0.0) * 2 or m.host_to_device_gb_per_s or m.memory_copy_gb_per_s
    return GpuSpec(
        name=name,
        vendor="measured",
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
