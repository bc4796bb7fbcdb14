"""What a plan may buy and at what price: the scenario's price file, the offers (catalog, price file, owned nodes)
each candidate GPU can be rented or used from, the $/GPU-hour candidates are ranked by, and the candidate GPUs
themselves. The part of :func:`hetplan.planning.request.build_request` that resolves prices and offers.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hetplan.catalog.loader import load_user_prices
from hetplan.catalog.offers import OWNED, PRICE_FILE, Offer, catalog_offers, owned_nodes, user_offers
from hetplan.catalog.pricing import GpuPrice
from hetplan.catalog.schemas import GpuSpec, UserPriceFile
from hetplan.errors import InputError
from hetplan.scenario import Scenario

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


def user_prices(scenario: Scenario, catalog: Catalog) -> UserPriceFile | None:
    """The scenario's price file (``--prices``), its GPU names checked against ``catalog`` (profiled GPUs
    included); None without one.

    Raises:
        InputError: unreadable file, an unknown GPU name, or one GPU priced twice.
    """
    if not scenario.prices:
        return None
    path = scenario.resolve(scenario.prices) or ""
    user = load_user_prices(Path(path))
    seen: dict[str, str] = {}
    for name in user.usd_per_gpu_hour:
        try:
            canonical = catalog.find_gpu(name).name
        except InputError as exc:
            raise InputError(
                f"price file {path}: {exc.what}", exc.why, "fix the GPU name in usd_per_gpu_hour"
            ) from None
        if canonical in seen:
            raise InputError(
                f"price file {path} prices {canonical} twice ({seen[canonical]!r} and {name!r})",
                fix="keep one entry per GPU",
            )
        seen[canonical] = name
    return user


PRICE_FILE_SIZES = (1, 2, 4, 8)
"""Instance sizes (GPUs) offered for a GPU a price file prices per GPU-hour (``usd_per_gpu_hour``)."""


def build_offers(
    scenario: Scenario,
    gpus: list[GpuSpec],
    inventory: dict[str, int],
    user: UserPriceFile | None,
    warnings: list[str],
    catalog: Catalog,
) -> tuple[Offer, ...]:
    """The offers a deployment may buy or use (:mod:`hetplan.catalog.offers`): owned nodes from the inventory and
    the price file's owned rows, then (unless ``rent`` is off) the rented offers of every candidate GPU. ``catalog``:
    its price rows, and the GPU table (profiled GPUs included) names are looked up in.

    Raises:
        InputError: a bad ``offers:`` row in the price file (named with its field).
    """
    names = {g.name for g in gpus}
    path = scenario.resolve(scenario.prices) or "" if scenario.prices else ""
    from_file = user_offers(user, path, catalog, scenario.spot) if user is not None else []
    per_gpu = {catalog.find_gpu(n).name: float(v) for n, v in (user.usd_per_gpu_hour if user else {}).items()}
    label = f"price file: {user.source}, as of {user.as_of}" if user is not None else ""
    illustrative = bool(user and user.illustrative)
    owned: list[Offer] = [o for o in from_file if o.owned and o.gpu in names]
    owned_by_file = {o.gpu for o in owned}
    for name, count in sorted(inventory.items()):
        if name not in names or name in owned_by_file or count <= 0:
            continue
        if name in per_gpu:
            owned += owned_nodes(name, count, per_gpu[name], label, illustrative)
        else:
            owned += owned_nodes(name, count, 0.0, "owned (no amortised price given: $0/GPU-hour)")
            warnings.append(
                f"owned {name} priced at $0/GPU-hour (a sunk cost): give its amortised price in a price file "
                "(usd_per_gpu_hour) to weigh it against renting"
            )
    if not scenario.rent:
        return tuple(owned)
    rented: list[Offer] = []
    for gpu in gpus:
        mine = [o for o in from_file if not o.owned and o.gpu == gpu.name]
        if gpu.name in per_gpu and gpu.name not in inventory:
            # a $/GPU-hour names no instance size: offer 1, 2, 4 and 8 GPUs at that price per GPU, so a TP group
            # is bought whole and nothing more is charged than its GPUs (the per-GPU pricing such files meant)
            mine += [
                Offer(
                    PRICE_FILE, f"{gpu.name}-x{k}", "", gpu.name, k, k * per_gpu[gpu.name], k, None, label, illustrative
                )  # fmt: skip
                for k in PRICE_FILE_SIZES
            ]
        if not mine and (gpu.name not in per_gpu or gpu.name in inventory):
            # a price file's $/GPU-hour for an inventory GPU is the owned GPUs' amortised price: the cloud's
            # offers of that GPU may still be rented beside them
            mine = catalog_offers(catalog, gpu, scenario.cloud, scenario.spot)
        if scenario.cloud:
            mine = [o for o in mine if o.provider in (scenario.cloud, PRICE_FILE)]
        if scenario.region:  # a pinned region: rent there only (a price file's $/GPU-hour names no region)
            mine = [o for o in mine if o.provider == PRICE_FILE or o.region.lower() == scenario.region.lower()]
        rented += mine
    return tuple(owned) + tuple(rented)


def ranking_price(gpu: GpuSpec, offers: tuple[Offer, ...], fallback: GpuPrice | None) -> GpuPrice | None:
    """The $/GPU-hour candidates are ranked by: the cheapest rented offer, else the owned price (floored at
    $0.01 so tokens/USD stays finite), else the catalog's per-GPU price."""
    mine = [o for o in offers if o.gpu == gpu.name]
    rented = [o for o in mine if o.provider != OWNED]
    pool = rented or mine
    if not pool:
        return fallback
    best = min(pool, key=lambda o: (o.usd_per_gpu_hour, o.key))
    return GpuPrice(gpu.name, max(best.usd_per_gpu_hour, 0.01), best.source, best.illustrative, best.unreliable)


def candidate_gpus(
    scenario: Scenario,
    inventory: dict[str, int],
    warnings: list[str],
    user: UserPriceFile | None,
    catalog: Catalog,
) -> list[GpuSpec]:
    """--gpus, else the inventory's types, else the GPUs a user price file prices, else every GPU of ``catalog``
    (profiled GPUs included)."""
    if scenario.gpus:
        gpus = list(dict.fromkeys(catalog.find_gpu(g) for g in scenario.gpus))
        left_out = sorted(set(inventory) - {g.name for g in gpus})
        if left_out:
            warnings.append(f"inventory of {', '.join(left_out)} is ignored: not among the candidate --gpus")
        return gpus
    if inventory:
        return [catalog.find_gpu(g) for g in inventory]
    if user is not None:
        return list(dict.fromkeys(catalog.find_gpu(g) for g in user.usd_per_gpu_hour))
    return list(catalog.gpus)


__all__ = ["PRICE_FILE_SIZES", "build_offers", "candidate_gpus", "ranking_price", "user_prices"]
