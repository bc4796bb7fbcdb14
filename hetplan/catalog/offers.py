"""Purchasable offers: what a deployment buys (cloud instances) or already owns (on-premises nodes).

An :class:`Offer` is one instance type of one provider in one region: ``gpus_per_instance`` GPUs of one type at a
$/instance-hour. Plans buy whole instances of offers (:mod:`hetplan.solvers.packing`). Offers come from

- the price catalog (``catalogs/prices.yaml``): every listed size, priced on demand or spot; GCP rows, which price
  the GPU attachment without the host VM, only with ``--cloud gcp``; rows flagged ``unreliable`` only when no other
  listing of that GPU exists (the rule :mod:`hetplan.catalog.pricing` has always applied);
- a user price file: ``usd_per_gpu_hour`` (a 1-GPU offer of provider ``price-file`` that replaces the catalog's
  offers of that GPU; for a GPU in the inventory, the owned GPUs' amortised price) and ``offers:`` rows (rented
  instance types, or ``provider: owned`` nodes with a ``count``);
- the inventory (``--inventory H100=16``): GPUs the user owns, as nodes of up to
  :data:`DEFAULT_OWNED_NODE_GPUS` GPUs, at the price file's ``usd_per_gpu_hour`` for that GPU or, without one,
  $0/GPU-hour (a sunk cost; the plan warns).

A site is where a deployment's instances run: ``owned`` or one ``provider/region``. One combo never spans sites
unless ``--allow-cross-provider`` is given; then a combo may put its prefill instances at one site and its decode
instances at another, its KV cache crossing a :class:`WanLink`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hetplan.catalog.schemas import MAX_USD_PER_HOUR, GpuSpec, UserOffer, UserPriceFile
from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

OWNED = "owned"
#: Most GPUs (or nodes) one offer row may give: above any fleet; bigger is a typo that would size the MILP.
MAX_GPUS = 100_000
PRICE_FILE = "price-file"
DEFAULT_OWNED_NODE_GPUS = 8
"""GPUs per owned node when the inventory gives only a count per GPU type (set ``offers:`` with
``provider: owned`` and ``gpus_per_instance`` in a price file to describe other node shapes)."""


DEFAULT_WAN_GB_PER_S = 1.25
"""Bandwidth, GB/s, one cross-site combo copy's prefill->decode KV traffic gets over the WAN: 10 Gbit/s, a common
dedicated-interconnect / site-to-site VPN size (hetplan's assumption, not a measurement; set ``wan_gb_per_s`` to
what ``iperf3`` measures between the two sites)."""
DEFAULT_WAN_LATENCY_S = 0.03
"""One-way latency, seconds, added to every cross-site KV transfer (30 ms: a US coast-to-coast order of
magnitude; hetplan's assumption; set ``wan_latency_s`` to half the ``ping`` RTT between the two sites)."""
DEFAULT_EGRESS_USD_PER_GB = 0.09
"""Egress, $/GB, paid on the KV bytes that leave the prefill site: AWS's published internet data-transfer-out
price for the first 10 TB/month (us-east-1); an illustrative default: set ``egress_usd_per_gb`` to your contract
(0 for a private interconnect with no per-GB charge)."""


@dataclass(frozen=True)
class WanLink:
    """The link a cross-site combo's KV cache crosses (``--allow-cross-provider``).

    Attributes:
        gb_per_s: bandwidth per combo copy, GB/s (1e9 bytes/s); caps the per-request transfer and the copy's KV
            transfer capacity.
        latency_s: one-way latency added to each KV transfer, seconds (adds to TTFT).
        egress_usd_per_gb: $ per GB of KV bytes sent from the prefill site to the decode site.

    Source: hetplan's own reconstruction; the defaults are assumptions named in this module's constants.
    """

    gb_per_s: float = DEFAULT_WAN_GB_PER_S
    latency_s: float = DEFAULT_WAN_LATENCY_S
    egress_usd_per_gb: float = DEFAULT_EGRESS_USD_PER_GB

    @property
    def bytes_per_s(self) -> float:
        """Bandwidth in bytes/s."""
        return self.gb_per_s * 1e9

    def egress_usd_per_hour(self, kv_bytes_per_request: float, req_per_s: float) -> float:
        """Egress $/hour of ``req_per_s`` requests each sending ``kv_bytes_per_request`` bytes across the link."""
        return self.egress_usd_per_gb * kv_bytes_per_request / 1e9 * req_per_s * 3600.0


@dataclass(frozen=True)
class Offer:
    """One purchasable (or owned) instance type.

    Attributes:
        provider: cloud name (``aws``, ...), ``price-file`` or ``owned``.
        instance_type: the provider's name for the size (owned nodes: ``owned-<GPU>-<k>gpu``).
        region: region or zone group ('' when not known).
        gpu: canonical GPU name.
        gpus_per_instance: GPUs in one instance (>= 1).
        usd_per_instance_hour: price of one instance-hour (owned: amortised, may be 0).
        scale_up_domain_gpus: most GPUs one TP group may span (>= gpus_per_instance only for rack-scale NVLink).
        count: instances available (owned: required; rented: None = unlimited).
        source: where the price comes from.
        illustrative / unreliable: price flags carried to the plan's warnings.
    """

    provider: str
    instance_type: str
    region: str
    gpu: str
    gpus_per_instance: int
    usd_per_instance_hour: float
    scale_up_domain_gpus: int
    count: int | None = None
    source: str = ""
    illustrative: bool = False
    unreliable: bool = False

    @property
    def owned(self) -> bool:
        """True for GPUs the user owns."""
        return self.provider == OWNED

    @property
    def site(self) -> str:
        """``owned`` or ``provider/region``: the place a combo's instances must share (module docstring)."""
        return OWNED if self.owned else f"{self.provider}/{self.region}" if self.region else self.provider

    @property
    def usd_per_gpu_hour(self) -> float:
        """Instance price divided by its GPUs."""
        return self.usd_per_instance_hour / self.gpus_per_instance

    @property
    def key(self) -> tuple[str, str, str]:
        """(provider, instance_type, region): unique within one offer list."""
        return (self.provider, self.instance_type, self.region)

    def hosts_tp(self, tp: int) -> bool:
        """Whether one TP-``tp`` group can be placed on instances of this offer: inside one instance when ``tp``
        divides its GPUs, or across whole instances of a scale-up domain that holds it."""
        k = self.gpus_per_instance
        if tp <= k:
            return k % tp == 0
        return tp <= self.scale_up_domain_gpus and tp % k == 0


def catalog_offers(catalog: Catalog, gpu: GpuSpec, cloud: str | None, spot: bool) -> list[Offer]:
    """``catalog``'s price offers of ``gpu`` (module docstring's rules), sorted by provider, region, size."""
    rows = catalog.price_rows(gpu)
    rows = [p for p in rows if p.cloud == cloud] if cloud else [p for p in rows if p.includes_host]
    rows = [p for p in rows if not p.unreliable] or rows
    kind = "spot" if spot else "on-demand"
    out = []
    for row in rows:
        price = row.usd_per_instance_hour(spot)
        if price is None:
            continue
        flag = " [flagged unreliable in the catalog]" if row.unreliable else ""
        out.append(
            Offer(
                row.cloud,
                row.instance_type,
                row.region,
                gpu.name,
                row.gpus_per_instance,
                float(price),
                row.scale_up_domain_gpus or row.gpus_per_instance,
                None,
                f"{row.cloud} {row.instance_type} {kind} (catalog){flag}",
                unreliable=row.unreliable,
            )
        )
    return sorted(out, key=lambda o: (o.provider, o.region, o.gpus_per_instance, o.instance_type))


def user_offers(user: UserPriceFile, path: str, catalog: Catalog, spot: bool = False) -> list[Offer]:
    """The ``offers:`` rows of a user price file, checked, their GPU names looked up in ``catalog`` (profiled GPUs
    included); with ``spot`` a rented row's
    ``spot_usd_per_instance_hour`` is its price where given (its on-demand price otherwise).

    Raises:
        InputError: a row with a negative price, zero GPUs per instance, an unknown GPU, an owned row without a
            count, a rented row without a price, or the same (provider, instance_type, region) twice; the message
            names the row (``offers[i]``) and the field.
    """
    out: list[Offer] = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, row in enumerate(user.offers):
        out.append(_user_offer(row, i, path, user, catalog, spot))
        key = out[-1].key
        if key in seen:
            raise InputError(
                f"price file {path}: offers[{i}] repeats offers[{seen[key]}] ({' '.join(k for k in key if k)})",
                "each (provider, instance_type, region) may be listed once",
                "delete one of the two rows, or give them different instance_type or region",
            )
        seen[key] = i
    return out


def _user_offer(row: UserOffer, i: int, path: str, user: UserPriceFile, catalog: Catalog, spot: bool = False) -> Offer:
    where = f"price file {path}: offers[{i}]"

    def bad(field: str, why: str, fix: str) -> InputError:
        return InputError(f"{where}.{field} {why}", fix=fix)

    try:
        gpu = catalog.find_gpu(row.gpu)
    except InputError as exc:
        raise InputError(f"{where}.gpu: {exc.what}", exc.why, "fix the GPU name (hetplan catalog gpus)") from None
    if not 1 <= row.gpus_per_instance <= MAX_GPUS:
        raise bad("gpus_per_instance", f"must be in [1, {MAX_GPUS:,}], got {row.gpus_per_instance}",
                  "give the GPUs per instance")  # fmt: skip
    for field in ("usd_per_instance_hour", "usd_per_gpu_hour", "spot_usd_per_instance_hour"):
        value = getattr(row, field)
        if value is not None and not 0 <= value <= MAX_USD_PER_HOUR:
            raise bad(field, f"must be in [0, {MAX_USD_PER_HOUR:g}] $/hour, got {value:g}",
                      "prices are $/hour, never negative")  # fmt: skip
    owned = row.provider.strip().lower() == OWNED
    if row.count is not None and not 1 <= row.count <= MAX_GPUS:
        raise bad("count", f"must be in [1, {MAX_GPUS:,}], got {row.count}", "give the number of nodes (instances)")
    if row.scale_up_domain_gpus is not None and not 1 <= row.scale_up_domain_gpus <= MAX_GPUS:
        raise bad("scale_up_domain_gpus", f"must be in [1, {MAX_GPUS:,}], got {row.scale_up_domain_gpus}", "fix it")
    if owned and row.count is None:
        raise bad("count", "is missing: an owned offer needs a count", "add count: N (the nodes you own)")
    kind = ""
    if spot and row.spot_usd_per_instance_hour is not None and not owned:
        price, kind = float(row.spot_usd_per_instance_hour), " spot"
    elif row.usd_per_instance_hour is not None:
        price = float(row.usd_per_instance_hour)
    elif row.usd_per_gpu_hour is not None:
        price = float(row.usd_per_gpu_hour) * row.gpus_per_instance
    elif owned:
        price = 0.0
    else:
        raise bad("usd_per_instance_hour", "is missing", "give usd_per_instance_hour (or usd_per_gpu_hour)")
    if not owned and not price > 0:
        raise bad("usd_per_instance_hour", f"must be > 0 for a rented offer, got {price:g}", "give the price")
    domain = row.scale_up_domain_gpus if row.scale_up_domain_gpus is not None else row.gpus_per_instance
    if domain < row.gpus_per_instance:
        raise bad("scale_up_domain_gpus", f"must be >= gpus_per_instance ({row.gpus_per_instance})", "fix it")
    provider = OWNED if owned else row.provider.strip()
    name = row.instance_type or (f"owned-{gpu.name}-{row.gpus_per_instance}gpu" if owned else "")
    if not provider or not name:
        raise bad("instance_type", "is missing", "name the instance type the provider sells")
    return Offer(
        provider, name, row.region, gpu.name, row.gpus_per_instance, price, domain, row.count,
        f"price file{kind}: {user.source}, as of {user.as_of}", user.illustrative,
    )  # fmt: skip


def owned_nodes(gpu: str, gpus: int, usd_per_gpu_hour: float, source: str, illustrative: bool = False) -> list[Offer]:
    """``gpus`` owned GPUs of type ``gpu`` as nodes of up to :data:`DEFAULT_OWNED_NODE_GPUS` (the last node
    holds the remainder)."""
    full, rest = divmod(int(gpus), DEFAULT_OWNED_NODE_GPUS)
    out = []
    for k, n in ((DEFAULT_OWNED_NODE_GPUS, full), (rest, 1 if rest else 0)):
        if n:
            out.append(
                Offer(OWNED, f"owned-{gpu}-{k}gpu", "", gpu, k, usd_per_gpu_hour * k, k, n, source, illustrative)
            )
    return out


def owned_gpus(offers: Sequence[Offer]) -> dict[str, int]:
    """Owned GPUs per type."""
    out: dict[str, int] = {}
    for o in offers:
        if o.owned:
            out[o.gpu] = out.get(o.gpu, 0) + o.gpus_per_instance * (o.count or 0)
    return dict(sorted(out.items()))


def scale_offers(offers: Sequence[Offer], factors: Mapping[str, float]) -> tuple[Offer, ...]:
    """Offers with the price of each GPU type in ``factors`` multiplied by its factor (price sensitivity)."""
    return tuple(
        replace(o, usd_per_instance_hour=o.usd_per_instance_hour * factors[o.gpu]) if o.gpu in factors else o
        for o in offers
    )


__all__ = [
    "DEFAULT_EGRESS_USD_PER_GB",
    "DEFAULT_OWNED_NODE_GPUS",
    "DEFAULT_WAN_GB_PER_S",
    "DEFAULT_WAN_LATENCY_S",
    "OWNED",
    "PRICE_FILE",
    "Offer",
    "WanLink",
    "catalog_offers",
    "owned_gpus",
    "owned_nodes",
    "scale_offers",
    "user_offers",
]
