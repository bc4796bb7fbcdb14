"""Look catalog entries up by name, with "did you mean" suggestions, in the catalog in use.

The catalogs ship inside the wheel as ``hetplan/_catalogs`` (built from the repository's ``catalogs/``); in a
source checkout or an editable install the repository folder is used. Another folder (your own measured or
negotiated figures) is a :class:`~hetplan.catalog.context.Catalog` value the caller builds and passes to
:mod:`hetplan.api`; the functions here read :func:`~hetplan.catalog.context.in_use`, which is that value during an
API call (the CLI builds it from ``HETPLAN_CATALOG_DIR``).

The readers of YAML and JSON files live in :mod:`hetplan.catalog.files`, the Hugging Face config reader in
:mod:`hetplan.catalog.hf_config`; both are re-exported here for their many importers.

Source: hetplan's own reconstruction (after SkyPilot's catalog loader: one function per catalog, schema
versioned, errors that end with how to fix them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hetplan.catalog.context import CATALOG_FILES, Catalog, in_use, lookup_gpu
from hetplan.catalog.files import format_validation, read_yaml_file, read_yaml_mapping
from hetplan.catalog.hf_config import model_from_hf_config
from hetplan.catalog.schemas import (
    GpuCatalog,
    GpuSpec,
    ModelCatalog,
    ModelSpec,
    PriceCatalog,
    PriceEntry,
    UserPriceFile,
)


def catalog_dir() -> Path:
    """The folder of the catalog in use (``gpus.yaml``, ``prices.yaml``, ``models.yaml``).

    Raises:
        CatalogError: no catalog folder can be found (a broken install).
    """
    return in_use().folder


def perf_files(folder: Path | None = None) -> dict[str, Path]:
    """The fitted engine curves of the catalog folder ``folder`` (default: the one in use), ``engine -> path``,
    sorted by engine (see :meth:`hetplan.catalog.context.Catalog.perf_files`).

    Raises:
        CatalogError: no catalog folder (see :func:`catalog_dir`).
    """
    from hetplan.catalog.context import perf_files as _perf_files

    return _perf_files(catalog_dir() if folder is None else folder)


def catalog_sha256(overlay: Sequence[GpuSpec] = ()) -> str:
    """The hash the plan's provenance records: :attr:`hetplan.catalog.context.Catalog.sha256` of the catalog in
    use with ``overlay`` (the GPU entries of ``--profile`` files).

    Raises:
        CatalogError: no catalog folder (see :func:`catalog_dir`).
    """
    return in_use().with_overlay(overlay).sha256


def load_gpus() -> GpuCatalog:
    """The GPU catalog in use (loaded once per catalog)."""
    return in_use().gpu_catalog


def load_prices() -> PriceCatalog:
    """The price catalog in use (loaded once per catalog)."""
    return in_use().prices


def load_models() -> ModelCatalog:
    """The model catalog in use (loaded once per catalog)."""
    return in_use().models


def overlaid_gpus(overlay: Sequence[GpuSpec] = ()) -> tuple[GpuSpec, ...]:
    """The GPU table of the catalog in use with ``overlay`` applied (:attr:`Catalog.gpus`): each of its entries (a
    ``--profile`` file's measured GPU) replaces the catalog entry of the same name, and new names follow the
    catalog's. The caller passes the table to :func:`find_gpu` and to what resolves GPU names for a plan
    (:func:`hetplan.planning.request.build_request`)."""
    return in_use().with_overlay(overlay).gpus


def find_gpu(name: str, gpus: Sequence[GpuSpec] | None = None) -> GpuSpec:
    """Look a GPU up by name or alias, ignoring case and punctuation (``h100`` finds ``H100-SXM``), in ``gpus``
    (default: the GPU catalog in use; :func:`overlaid_gpus` gives it with profiled GPUs).

    Raises:
        InputError: unknown name, with suggestions.
    """
    return lookup_gpu(name, in_use().gpus if gpus is None else gpus)


def find_model(name: str) -> ModelSpec:
    """Look a model up by catalog name or Hugging Face repo in the catalog in use, or read a ``config.json`` path
    (:meth:`Catalog.find_model`).

    Raises:
        InputError: unknown name (with suggestions) or an unreadable config file.
    """
    return in_use().find_model(name)


def price_rows(gpu: GpuSpec) -> list[PriceEntry]:
    """All price rows of the catalog in use for ``gpu`` (matched by canonical name)."""
    return in_use().price_rows(gpu)


def load_user_prices(path: Path) -> UserPriceFile:
    """Read a user price file (see :class:`UserPriceFile`)."""
    return read_yaml_file(path, UserPriceFile, "price file", "see docs/reference/price-file.md")


__all__ = [
    "CATALOG_FILES",
    "Catalog",
    "catalog_dir",
    "catalog_sha256",
    "find_gpu",
    "find_model",
    "format_validation",
    "load_gpus",
    "load_models",
    "load_prices",
    "load_user_prices",
    "model_from_hf_config",
    "overlaid_gpus",
    "perf_files",
    "price_rows",
    "read_yaml_file",
    "read_yaml_mapping",
]
