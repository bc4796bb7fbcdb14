"""Resolve one $/GPU-hour per GPU type from the price catalog, a cloud choice, spot, and a user price file.

Rules: a user price file wins; otherwise the catalog row of the chosen cloud (cheapest listing of that GPU
there), or, with no cloud given, the cheapest listing over all clouds whose price includes the host VM (GCP
rows are GPU-attachment prices only and are used only when ``--cloud gcp`` asks for them). Rows the catalog flags
``unreliable`` are skipped while another listing exists; a plan that still uses one says so. The catalog lists an
offer once per region it was read in; with a ``region`` pinned only that region's rows count, else the cheapest
region wins.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetplan.catalog.schemas import GpuSpec, UserPriceFile
from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


@dataclass(frozen=True)
class GpuPrice:
    """The price used for one GPU type: ``usd_per_gpu_hour`` and where it came from."""

    gpu: str
    usd_per_gpu_hour: float
    source: str
    illustrative: bool = False
    unreliable: bool = False


def resolve_price(
    gpu: GpuSpec,
    catalog: Catalog,
    cloud: str | None = None,
    spot: bool = False,
    user: UserPriceFile | None = None,
    region: str | None = None,
) -> GpuPrice | None:
    """The price of ``gpu`` under the rules above, or None when no source prices it (``catalog``: its price rows,
    and the GPU table, profiled GPUs included, the price file's names are looked up in; ``region``: only catalog
    rows of that region, compared without case)."""
    if user is not None:
        for name, value in user.usd_per_gpu_hour.items():
            if catalog.find_gpu(name).name == gpu.name:
                label = f"price file: {user.source}, as of {user.as_of}"
                return GpuPrice(gpu.name, float(value), label, user.illustrative)
    rows = catalog.price_rows(gpu)
    if cloud:
        rows = [p for p in rows if p.cloud == cloud]
    else:
        rows = [p for p in rows if p.includes_host]
    if region:
        rows = [p for p in rows if p.region.lower() == region.lower()]
    rows = [p for p in rows if not p.unreliable] or rows
    best: tuple[float, str, str, str] | None = None
    for row in rows:
        listed = row.spot_usd_per_gpu_hour if spot else row.on_demand_usd_per_gpu_hour
        if listed is None:
            continue
        key = (listed, row.cloud, row.instance_type, row.region)
        if best is None or key < best:
            best = key
    if best is None:
        return None
    kind = "spot" if spot else "on-demand"
    row = next(p for p in rows if (p.cloud, p.instance_type, p.region) == best[1:])
    flag = " [flagged unreliable in the catalog]" if row.unreliable else ""
    where = f" {row.region}" if row.region else ""
    return GpuPrice(
        gpu.name, float(best[0]), f"{best[1]} {best[2]}{where} {kind} (catalog){flag}", unreliable=row.unreliable
    )


def known_clouds(catalog: Catalog) -> list[str]:
    """Clouds present in ``catalog``'s prices, sorted."""
    return sorted({p.cloud for p in catalog.prices.prices})


def known_regions(catalog: Catalog, cloud: str | None = None) -> list[str]:
    """Regions of ``catalog``'s price rows (of ``cloud`` when given), sorted."""
    return sorted({p.region for p in catalog.prices.prices if p.region and (cloud is None or p.cloud == cloud)})


def check_region(catalog: Catalog, region: str | None, cloud: str | None = None, extra: Sequence[str] = ()) -> None:
    """Raise :class:`InputError` for a ``region`` that neither ``catalog``'s prices (for ``cloud`` when given) nor
    ``extra`` (the regions of a price file's offers) lists; regions compare without case."""
    if region is None:
        return
    known = sorted({*known_regions(catalog, cloud), *(r for r in extra if r)})
    if region.lower() not in {r.lower() for r in known}:
        where = f" for {cloud}" if cloud else ""
        raise InputError(
            f"unknown region {region!r}{where}",
            f"the price catalog lists {', '.join(known)}",
            "pick one of them (hetplan catalog prices shows each offer's region), or drop --region",
        )


def check_cloud(catalog: Catalog, cloud: str | None) -> None:
    """Raise :class:`InputError` for a cloud ``catalog``'s prices do not list."""
    if cloud is not None and cloud not in known_clouds(catalog):
        raise InputError(
            f"unknown cloud {cloud!r}",
            f"the price catalog lists {', '.join(known_clouds(catalog))}",
            "pick one of them, or pass --prices FILE with your own prices",
        )
