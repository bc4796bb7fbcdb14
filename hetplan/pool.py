"""GPU pool files (``POOL.yaml``): the devices a Hetis plan places, grouped by node and link domain.

A pool is a list of nodes; each node holds one or more *domains* (GPUs joined by one NVLink or PCIe fabric, where
tensor parallelism may run); each domain lists GPU types from the catalog with counts, optionally with measured
compute or bandwidth that replace the catalog figures (a degraded or power-capped card is a "straggler"). Links:

- inside a domain: the GPU's own interconnect from the catalog (``interconnect_gb_per_s``);
- between domains of one node: ``links.intra_node`` (PCIe by default);
- between nodes: ``links.inter_node``, or a ``links.overrides`` entry naming the two nodes.

Example::

    schema_version: 1
    kind: pool
    name: a100-3090-p100
    nodes:
      - name: a100-node
        domains:
          - gpus: [{type: A100-40GB-PCIe, count: 4}]
            interconnect_gb_per_s: 64
      - name: p100-node
        domains:
          - gpus: [{type: P100-PCIe, count: 4}]
    links:
      intra_node: {bandwidth_gb_per_s: 16, latency_us: 10}
      inter_node: {bandwidth_gb_per_s: 12.5, latency_us: 25}
      overrides:
        - {between: [a100-node, p100-node], bandwidth_gb_per_s: 6, latency_us: 50}

An optional ``usd_per_gpu_hour`` mapping (GPU type -> amortised $/GPU-hour of the owned GPUs, 0 allowed) prices
the pool for ``hetplan plan --strategy hetis`` (else ``--prices``, else the catalog's price).

Unknown keys are refused; every error names the field and the fix; a link override repeated for the same pair of
nodes (in either order) is refused, and a file of another ``kind`` (a scenario, a hetis-deployment spec) is named
as such. Numbers in scientific notation without a dot (``1e-9``, which YAML reads as a string) are accepted.
Bandwidths are bytes (GB/s, 1e9 bytes/s, one direction), latencies microseconds.

Source: hetplan's own reconstruction (Hetis, SC '25, plans over such pools but publishes no file format).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import read_yaml_file, read_yaml_mapping
from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import CatalogError, InputError
from hetplan.units import GB

POOL_DOC = "see examples/hetis/pool.yaml and hetplan/pool.py"


_SCI = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+\s*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _scientific(cls, data: Any) -> Any:
        """YAML 1.1 reads ``1e-9`` (no dot) as a string: accept such scientific-notation strings for number fields."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for key, value in data.items():
            field = cls.model_fields.get(key)
            if field is not None and isinstance(value, str) and _SCI.match(value) and "float" in str(field.annotation):
                out[key] = float(value)
        return out


class GpuEntry(_Strict):
    """``count`` GPUs of catalog ``type``; ``measured_tflops`` / ``measured_hbm_gb_per_s`` replace the catalog's
    dense 16-bit TFLOPS and memory bandwidth (e.g. from ``hetplan profile`` or a power-capped card)."""

    type: str = Field(min_length=1)
    count: int = Field(ge=1, le=64)
    measured_tflops: float | None = Field(default=None, gt=0, le=1e5)
    measured_hbm_gb_per_s: float | None = Field(default=None, gt=0, le=1e6)


class DomainEntry(_Strict):
    """GPUs sharing one NVLink or PCIe fabric (tensor parallelism stays inside one domain).
    ``interconnect_gb_per_s`` (bidirectional aggregate, the catalog's convention) replaces the GPUs' catalog link
    figure, e.g. 64 for PCIe Gen4 x16 when the cards have no NVLink between all of them."""

    gpus: list[GpuEntry] = Field(min_length=1)
    interconnect_gb_per_s: float | None = Field(default=None, gt=0, le=1e5)


class NodeEntry(_Strict):
    """One server: a name (unique in the pool) and its link domains."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    domains: list[DomainEntry] = Field(min_length=1)


class LinkEntry(_Strict):
    """A link: one-direction bandwidth in GB/s (1e9 bytes/s) and one-way latency in microseconds."""

    bandwidth_gb_per_s: float = Field(gt=0, le=1e4)
    latency_us: float = Field(ge=0, le=1e6)


class LinkOverride(LinkEntry):
    """The link between two named nodes."""

    between: list[str] = Field(min_length=2, max_length=2)


class LinksEntry(_Strict):
    """Links between domains of one node and between nodes (defaults: PCIe Gen4 x16 / 100 Gbit/s Ethernet)."""

    intra_node: LinkEntry = LinkEntry(bandwidth_gb_per_s=16.0, latency_us=10.0)
    inter_node: LinkEntry = LinkEntry(bandwidth_gb_per_s=12.5, latency_us=25.0)
    overrides: list[LinkOverride] = Field(default_factory=list)


class PoolFile(_Strict):
    """A ``POOL.yaml`` document (see the module docstring)."""

    schema_version: Literal[1] = 1
    kind: Literal["pool"] = "pool"
    name: str = "pool"
    description: str | None = None
    nodes: list[NodeEntry] = Field(min_length=1)
    links: LinksEntry = LinksEntry()
    usd_per_gpu_hour: dict[str, Annotated[float, Field(ge=0, le=1e4)]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> PoolFile:
        names = [n.name for n in self.nodes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"node names must be unique; repeated: {', '.join(dup)}")
        for i, o in enumerate(self.links.overrides):
            a, b = o.between
            for end in (a, b):
                if end not in names:
                    raise ValueError(f"links.overrides.{i}.between names unknown node {end!r}; nodes: {names}")
            if a == b:
                raise ValueError(f"links.overrides.{i}.between names {a!r} twice; use links.intra_node for that")
        pairs = [tuple(sorted(o.between)) for o in self.links.overrides]
        for i, pair in enumerate(pairs):
            first = pairs.index(pair)
            if first != i:
                raise ValueError(
                    f"links.overrides.{i} repeats the link between {pair[0]!r} and {pair[1]!r} (already "
                    f"links.overrides.{first}; the order of the two names does not matter): keep one entry"
                )
        return self


@dataclass(frozen=True)
class Device:
    """One GPU of the pool.

    Attributes:
        name: ``<node>/gpu<i>`` (i counts GPUs inside the node).
        gpu: catalog spec with any measured figures already applied (so the perf model uses them).
        node: node name. domain: index of the link domain in the pool (global, 0-based).
        measured: True when the pool gave measured figures for this device.
    """

    name: str
    gpu: GpuSpec
    node: str
    domain: int
    measured: bool = False


@dataclass(frozen=True)
class Link:
    """Achievable one-direction bandwidth (bytes/s) and one-way latency (s) between two devices."""

    bytes_per_s: float
    latency_s: float


@dataclass(frozen=True)
class Pool:
    """A resolved pool: devices in file order and the link table.

    Attributes:
        name: pool name. devices: every GPU. intra_node, inter_node: default links.
        overrides: ``((node_a, node_b), link)`` with the names sorted.
    """

    name: str
    devices: tuple[Device, ...]
    intra_node: Link
    inter_node: Link
    overrides: tuple[tuple[tuple[str, str], Link], ...] = ()
    link_efficiency: float = 1.0
    usd_per_gpu_hour: tuple[tuple[str, float], ...] = ()  # owned GPUs' amortised $/GPU-hour, by catalog name

    def link(self, a: Device, b: Device) -> Link:
        """Link between devices ``a`` and ``b``: the GPU interconnect inside a domain (half the datasheet's
        bidirectional figure), ``intra_node`` between domains of a node, else ``inter_node`` or an override."""
        if a.domain == b.domain:
            gb = min(a.gpu.interconnect_gb_per_s, b.gpu.interconnect_gb_per_s) / 2.0
            return Link(gb * GB, self.intra_node.latency_s)
        if a.node == b.node:
            return self.intra_node
        key = tuple(sorted((a.node, b.node)))
        for pair, link in self.overrides:
            if pair == key:
                return link
        return self.inter_node

    def domains(self) -> list[list[Device]]:
        """Devices grouped by link domain, in pool order."""
        out: dict[int, list[Device]] = {}
        for d in self.devices:
            out.setdefault(d.domain, []).append(d)
        return [out[k] for k in sorted(out)]

    def counts(self) -> dict[str, int]:
        """GPUs per catalog type, sorted by name."""
        out: dict[str, int] = {}
        for d in self.devices:
            out[d.gpu.name] = out.get(d.gpu.name, 0) + 1
        return dict(sorted(out.items()))


def _apply_measured(spec: GpuSpec, entry: GpuEntry, domain: DomainEntry) -> GpuSpec:
    update: dict[str, float] = {}
    if domain.interconnect_gb_per_s is not None:
        update["interconnect_gb_per_s"] = domain.interconnect_gb_per_s
    if entry.measured_tflops is not None:
        update["bf16_dense_tflops"] = entry.measured_tflops
        update["fp16_dense_tflops"] = entry.measured_tflops
    if entry.measured_hbm_gb_per_s is not None:
        update["hbm_gb_per_s"] = entry.measured_hbm_gb_per_s
    return spec.model_copy(update=update) if update else spec


def resolve_pool(doc: PoolFile, catalog: Catalog | None = None) -> Pool:
    """Turn a validated pool file into devices and links (GPU names resolved through ``catalog``; None: the
    shipped catalogs).

    Raises:
        InputError: a GPU type is not in the catalog (with suggestions; the field path is named).
    """
    cat = Catalog.shipped() if catalog is None else catalog
    devices: list[Device] = []
    domain = 0
    for n, node in enumerate(doc.nodes):
        i = 0
        for d, dom in enumerate(node.domains):
            for g, entry in enumerate(dom.gpus):
                try:
                    spec = cat.find_gpu(entry.type)
                except InputError as exc:
                    raise InputError(
                        f"pool: nodes.{n}.domains.{d}.gpus.{g}.type: {exc.what}", exc.why, exc.fix
                    ) from None
                spec = _apply_measured(spec, entry, dom)
                measured = entry.measured_tflops is not None or entry.measured_hbm_gb_per_s is not None
                for _ in range(entry.count):
                    devices.append(Device(f"{node.name}/gpu{i}", spec, node.name, domain, measured))
                    i += 1
            domain += 1

    def link(e: LinkEntry) -> Link:
        return Link(e.bandwidth_gb_per_s * GB, e.latency_us * 1e-6)

    overrides = tuple(sorted(((tuple(sorted(o.between)), link(o)) for o in doc.links.overrides), key=lambda x: x[0]))
    prices: dict[str, float] = {}
    present = {d.gpu.name for d in devices}
    for name, value in doc.usd_per_gpu_hour.items():
        try:
            canonical = cat.find_gpu(name).name
        except InputError as exc:
            raise InputError(f"pool: usd_per_gpu_hour.{name}: {exc.what}", exc.why, exc.fix) from None
        if canonical not in present:
            raise InputError(
                f"pool: usd_per_gpu_hour prices {canonical}, which the pool does not hold",
                f"the pool holds {', '.join(sorted(present))}",
                "price only the pool's GPU types",
            )
        if canonical in prices:
            raise InputError(f"pool: usd_per_gpu_hour prices {canonical} twice", fix="keep one entry per GPU type")
        prices[canonical] = float(value)
    return Pool(doc.name, tuple(devices), link(doc.links.intra_node), link(doc.links.inter_node), overrides,  # type: ignore[arg-type]
                usd_per_gpu_hour=tuple(sorted(prices.items())))  # fmt: skip


def load_pool(path: str | Path, catalog: Catalog | None = None) -> Pool:
    """Read, validate and resolve a ``POOL.yaml`` file (GPU names looked up in ``catalog``; None: the shipped
    catalogs).

    Raises:
        InputError / CatalogError: unreadable file, unknown keys, bad values or unknown GPU types (the message
            names the field path and the fix).
    """
    path = Path(path)
    try:
        return resolve_pool(read_yaml_file(path, PoolFile, "pool file", POOL_DOC), catalog)
    except CatalogError:
        kind = _kind_of(path)
        if kind not in (None, "pool"):
            what = {
                "hetis-deployment": "a hetis-deployment file (a Hetis plan's output)",
                "scenario": "a scenario file",
            }
            raise InputError(
                f"{path} is {what.get(kind, f'a {kind!r} file')}, not a pool (its kind is {kind!r})",
                "--pool takes a POOL.yaml with kind: pool",
                f"pass the pool file ({POOL_DOC})"
                + ("; a scenario goes first, as the positional argument" if kind == "scenario" else ""),
            ) from None
        raise


def _kind_of(path: Path) -> str | None:
    """The ``kind`` field of a YAML/JSON mapping, or None when the file has none or does not parse."""
    try:
        data = read_yaml_mapping(path, "file")
    except InputError:
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def pool_from_counts(
    name: str, groups: list[tuple[str, int]], links: LinksEntry | None = None, catalog: Catalog | None = None
) -> Pool:
    """A pool with one node (and one domain) per ``(gpu type, count)`` group: the quick way tests and callers
    describe "4 x A100 + 4 x RTX-3090" without a file (GPU names looked up in ``catalog``; None: the shipped
    catalogs)."""
    cat = Catalog.shipped() if catalog is None else catalog
    nodes = [
        NodeEntry(
            name=f"{cat.find_gpu(g).name.lower()}-node{k}", domains=[DomainEntry(gpus=[GpuEntry(type=g, count=c)])]
        )
        for k, (g, c) in enumerate(groups)
    ]
    return resolve_pool(PoolFile(name=name, nodes=nodes, links=links or LinksEntry()), cat)
