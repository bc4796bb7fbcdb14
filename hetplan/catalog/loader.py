"""Catalog shortcuts over the *shipped* catalogs, for tests, benchmarks and scripts; the file readers.

Library code takes the :class:`~hetplan.catalog.context.Catalog` its caller chose as an argument and calls its
methods (``catalog.find_gpu``, ``catalog.find_model``, ``catalog.prices``, ``catalog.sha256``; a GPU table with
profiled entries: :func:`~hetplan.catalog.context.lookup_gpu`); it never calls the shortcuts here, which read
:meth:`Catalog.shipped` (``tests/cli/test_structure.py`` keeps it so). The CLI builds the catalog from
``HETPLAN_CATALOG_DIR``; an API caller passes its own.

The catalogs ship inside the wheel as ``hetplan/_catalogs`` (built from the repository's ``catalogs/``); in a
source checkout or an editable install the repository folder is used. The readers of YAML and JSON files live in
:mod:`hetplan.catalog.files`, the Hugging Face config reader in :mod:`hetplan.catalog.hf_config`; both are
re-exported here for their many importers.

Source: hetplan's own reconstruction (after SkyPilot's catalog loader: one function per catalog, schema
versioned, errors that end with how to fix them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hetplan.catalog.context import CATALOG_FILES, Catalog, lookup_gpu
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

SHORTCUTS = (
    "catalog_dir",
    "catalog_sha256",
    "find_gpu",
    "find_model",
    "load_gpus",
    "load_models",
    "load_prices",
    "overlaid_gpus",
    "price_rows",
)
"""The shipped-catalog shortcuts below: not for library code (which is passed its catalog)."""


def catalog_dir() -> Path:
    """The shipped catalog folder (``gpus.yaml``, ``prices.yaml``, ``models.yaml``).

    Raises:
        CatalogError: no catalog folder can be found (a broken install).
    """
    return Catalog.shipped().folder


def perf_files(folder: Path | None = None) -> dict[str, Path]:
    """The fitted engine curves of the catalog folder ``folder`` (default: the shipped one), ``engine -> path``,
    sorted by engine (see :meth:`hetplan.catalog.context.Catalog.perf_files`).

    Raises:
        CatalogError: no catalog folder (see :func:`catalog_dir`).
    """
    from hetplan.catalog.context import perf_files as _perf_files

    return _perf_files(catalog_dir() if folder is None else folder)


def catalog_sha256(overlay: Sequence[GpuSpec] = ()) -> str:
    """:attr:`hetplan.catalog.context.Catalog.sha256` of the shipped catalogs with ``overlay`` (the GPU entries of
    ``--profile`` files).

    Raises:
        CatalogError: no catalog folder (see :func:`catalog_dir`).
    """
    return Catalog.shipped().with_overlay(overlay).sha256


def load_gpus() -> GpuCatalog:
    """The shipped GPU catalog (loaded once)."""
    return Catalog.shipped().gpu_catalog


def load_prices() -> PriceCatalog:
    """The shipped price catalog (loaded once)."""
    return Catalog.shipped().prices


def load_models() -> ModelCatalog:
    """The shipped model catalog (loaded once)."""
    return Catalog.shipped().models


def overlaid_gpus(overlay: Sequence[GpuSpec] = ()) -> tuple[GpuSpec, ...]:
    """The shipped GPU table with ``overlay`` applied (:attr:`Catalog.gpus`): each of its entries (a ``--profile``
    file's measured GPU) replaces the catalog entry of the same name, and new names follow the catalog's."""
    return Catalog.shipped().with_overlay(overlay).gpus


def find_gpu(name: str, gpus: Sequence[GpuSpec] | None = None) -> GpuSpec:
    """Look a GPU up by name or alias, ignoring case and punctuation (``h100`` finds ``H100-SXM``), in ``gpus``
    (default: the shipped GPU catalog; :func:`overlaid_gpus` gives it with profiled GPUs).

    Raises:
        InputError: unknown name, with suggestions.
    """
    return lookup_gpu(name, Catalog.shipped().gpus if gpus is None else gpus)


def find_model(name: str) -> ModelSpec:
    """Look a model up by catalog name or Hugging Face repo in the shipped catalog, or read a ``config.json`` path
    (:meth:`Catalog.find_model`).

    Raises:
        InputError: unknown name (with suggestions) or an unreadable config file.
    """
    return Catalog.shipped().find_model(name)


def price_rows(gpu: GpuSpec) -> list[PriceEntry]:
    """All shipped price rows for ``gpu`` (matched by canonical name)."""
    return Catalog.shipped().price_rows(gpu)


def load_user_prices(path: Path) -> UserPriceFile:
    """Read a user price file (see :class:`UserPriceFile`)."""
    return read_yaml_file(path, UserPriceFile, "price file", "see docs/reference/price-file.md")


__all__ = [
    "CATALOG_FILES",
    "SHORTCUTS",
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
