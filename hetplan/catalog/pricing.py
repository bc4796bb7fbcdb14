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

from hetplan.catalog.loader import find_gpu, load_prices, price_rows
from hetplan.catalog.schemas import GpuSpec, UserPriceFile
from hetplan.errors import InputError


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
    cloud: str | None = None,
    spot: bool = False,
    user: UserPriceFile | None = None,
    gpus: tuple[GpuSpec, ...] | None = None,
    region: str | None = None,
) -> GpuPrice | None:
    """The price of ``gpu`` under the rules above, or None when no source prices it (``gpus``: the GPU table the
    price file's names are looked up in, default the catalog; see :func:`hetplan.catalog.loader.find_gpu`;
    ``region``: only catalog rows of that region, compared without case)."""
    if user is not None:
        for name, value in user.usd_per_gpu_hour.items():
            if find_gpu(name, gpus).name == gpu.name:
                label = f"price file: {user.source}, as of {user.as_of}"
                return GpuPrice(gpu.name, float(value), label, user.illustrative)
    rows = price_rows(gpu)
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


def known_clouds() -> list[str]:
    """Clouds present in the price catalog, sorted."""
    return sorted({p.cloud for p in load_prices().prices})


def known_regions(cloud: str | None = None) -> list[str]:
    """Regions of the price catalog's rows (of ``cloud`` when given), sorted."""
    return sorted({p.region for p in load_prices().prices if p.region and (cloud is None or p.cloud == cloud)})


def check_region(region: str | None, cloud: str | None = None, extra: Sequence[str] = ()) -> None:
    """Raise :class:`InputError` for a ``region`` that neither the catalog (for ``cloud`` when given) nor ``extra``
    (the regions of a price file's offers) lists; regions compare without case."""
    if region is None:
        return
    known = sorted({*known_regions(cloud), *(r for r in extra if r)})
    if region.lower() not in {r.lower() for r in known}:
        where = f" for {cloud}" if cloud else ""
        raise InputError(
            f"unknown region {region!r}{where}",
            f"the price catalog lists {', '.join(known)}",
            "pick one of them (hetplan catalog prices shows each offer's region), or drop --region",
        )


def check_cloud(cloud: str | None) -> None:
    """Raise :class:`InputError` for a cloud the catalog does not list."""
    if cloud is not None and cloud not in known_clouds():
        raise InputError(
            f"unknown cloud {cloud!r}",
            f"the price catalog lists {', '.join(known_clouds())}",
            "pick one of them, or pass --prices FILE with your own prices",
        )
