"""Catalogs of GPUs, prices and models: the :class:`Catalog` value library code is passed, schemas, and the
shipped-catalog shortcuts of :mod:`hetplan.catalog.loader` (for tests, benchmarks and scripts)."""

from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import (
    catalog_dir,
    find_gpu,
    find_model,
    load_gpus,
    load_models,
    load_prices,
    load_user_prices,
    model_from_hf_config,
    overlaid_gpus,
)
from hetplan.catalog.schemas import GpuSpec, ModelSpec, PriceEntry

__all__ = [
    "Catalog",
    "GpuSpec",
    "ModelSpec",
    "PriceEntry",
    "catalog_dir",
    "find_gpu",
    "find_model",
    "load_gpus",
    "load_models",
    "load_prices",
    "load_user_prices",
    "model_from_hf_config",
    "overlaid_gpus",
]
