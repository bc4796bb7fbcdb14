"""Catalogs of GPUs, prices and models: schemas, loaders and name lookup."""

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
    use_catalog_dir,
)
from hetplan.catalog.schemas import GpuSpec, ModelSpec, PriceEntry

__all__ = [
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
    "use_catalog_dir",
]
