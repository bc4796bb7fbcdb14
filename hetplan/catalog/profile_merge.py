"""``hetplan profile merge``: profiles merged into a catalog folder (the shipped catalog with each profiled GPU's
entry replaced or added, and the profiles themselves), which ``HETPLAN_CATALOG_DIR`` then points at.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hetplan.catalog.loader import read_yaml_file, read_yaml_mapping
from hetplan.catalog.profile import load_profiles
from hetplan.catalog.schemas import GpuCatalog
from hetplan.errors import InputError
from hetplan.input_checks import load_json, read_text_input
from hetplan.io import to_json, to_yaml, write_files_atomic

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

MERGE_MANIFEST = "hetplan-merge.json"
"""What ``merge`` writes into its folder: the files it wrote, so that a later ``merge --force`` removes the stale
ones (and only those)."""


def merge_profiles(paths: list[Path], out_dir: Path, catalog: Catalog, force: bool = False) -> list[Path]:
    """Write a catalog folder: ``catalog``'s ``gpus.yaml`` with each profiled GPU's entry replaced (or added, for
    new device types), its ``prices.yaml`` and ``models.yaml``, and the profiles under ``profiles/``.
    Point ``HETPLAN_CATALOG_DIR`` at it and every command uses the measured figures.

    Returns the files written (sorted). Raises:
        InputError: bad profiles, two profiles of one GPU, or existing files without ``force``.
    """
    loaded = load_profiles(paths, catalog)
    if not loaded.specs:
        raise InputError("no profiles to merge", fix="pass one or more profile files")
    base = catalog.gpu_catalog
    overlay = {g.name: g for g in loaded.specs}
    known = {g.name for g in base.gpus}
    gpus = [overlay.get(g.name, g) for g in base.gpus] + [g for g in loaded.specs if g.name not in known]
    sources = ", ".join(f"{name} ({p.gpu.name})" for name, p in loaded.files)
    merged = GpuCatalog(
        schema_version=1,
        kind="gpus",
        source=f"{base.source} Measured figures (gpu.measured) from hetplan profile: {sources}.",
        as_of=max((p.gpu.measured.profiled_at[:10] for _, p in loaded.files if p.gpu.measured), default=base.as_of)
        or base.as_of,
        gpus=tuple(gpus),
    )
    doc = merged.model_dump(mode="json")
    doc["gpus"] = [g.model_dump(mode="json", exclude_none=True) for g in merged.gpus]
    texts = {"gpus.yaml": to_yaml(doc)}
    src = catalog.folder
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
    written = write_files_atomic({out_dir / name: text for name, text in sorted(texts.items())}, force=force)
    for name in sorted(stale):  # what the previous merge wrote and this one does not (never other files)
        (out_dir / name).unlink(missing_ok=True)
    # check the folder loads with the catalog loader before saying it is done
    read_yaml_file(out_dir / "gpus.yaml", GpuCatalog, "merged GPU catalog")
    return written


def _previous_merge_files(out_dir: Path) -> set[str]:
    """Files (relative names) a previous ``merge`` wrote into ``out_dir``: those its manifest lists, or, for a
    folder merged before hetplan wrote manifests, the profile files under ``profiles/`` (files whose ``kind`` is
    ``gpu-profile``). Only plain files inside ``out_dir`` count; anything else there is the user's and kept."""
    manifest = out_dir / MERGE_MANIFEST
    names: set[str] = set()
    if manifest.is_file():
        try:
            listed = load_json(read_text_input(manifest, "merge manifest"), "merge manifest").get("files", [])
        except (InputError, AttributeError):
            listed = []
        names = {n for n in listed if isinstance(n, str)}
    elif (out_dir / "profiles").is_dir():
        for path in (out_dir / "profiles").iterdir():
            try:
                doc = read_yaml_mapping(path, "profile") if path.is_file() else None
            except InputError:
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
