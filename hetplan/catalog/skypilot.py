"""Read a SkyPilot catalog folder into a user price file (``hetplan catalog import-prices FOLDER``).

SkyPilot (skypilot-org/skypilot-catalog, Apache-2.0) publishes one ``vms.csv`` per cloud, e.g.
``catalogs/v7/aws/vms.csv``, with one row per instance type, region and (for AWS and GCP) availability zone. The
columns read are ``InstanceType``, ``AcceleratorName``, ``AcceleratorCount``, ``Price`` (on-demand $/instance-hour),
``SpotPrice`` and ``Region`` (``AvailabilityZone``, ``vCPUs``, ``MemoryGiB``, ``GpuInfo`` and the rest are
ignored). A folder is either one cloud's folder (``FOLDER/vms.csv``; the cloud is the folder's name unless
``cloud`` is given) or a catalog version folder holding one sub-folder per cloud (``FOLDER/aws/vms.csv``, ...).

Rows without an accelerator, with a count below 1 or without an on-demand price are skipped (a spot-only row has
nothing to rent on demand); a count or price that is not a positive number of at most
:data:`hetplan.input_checks.MAX_NUMBER` counts as missing (the price file written would be refused when read).

The zones of one (cloud, instance type, region) merge into one offer: on-demand is
the lowest zone's listed price (the same in every zone in SkyPilot's data), spot the lowest zone's spot price.
Accelerator names go through :data:`SKYPILOT_NAMES` (SkyPilot's ``A100`` is the 40 GB part), then the GPU catalog's
names and aliases; ``mapping`` overrides both (Azure's ``A100-80GB`` sizes are PCIe cards, for instance). Names
still unknown are skipped and counted.

Source: the SkyPilot catalog's published column names; hetplan's own merge rules.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError
from hetplan.input_checks import MAX_NUMBER, check_document

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

#: SkyPilot accelerator names whose plain reading through the GPU catalog's aliases would be wrong or missing.
SKYPILOT_NAMES = {"A100": "A100-40GB-SXM", "A100-80GB": "A100-80GB-SXM", "V100-32GB": "V100-SXM2",
                  "H100-MEGA": "H100-SXM"}  # fmt: skip
REQUIRED_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "SpotPrice", "Region")
#: Largest vms.csv read (SkyPilot's AWS file is about 2.5 MB).
MAX_FILE_BYTES = 256 * 1024 * 1024


@dataclass
class SkyOffer:
    """One imported offer: an instance type in a region, its lowest on-demand (and spot) $/instance-hour over the
    zone rows read (``zones`` of them), and the accelerator names it was listed under."""

    provider: str
    gpu: str
    instance_type: str
    region: str
    gpus_per_instance: int
    usd_per_instance_hour: float
    spot_usd_per_instance_hour: float | None
    zones: int
    listed: set[str]

    def to_doc(self) -> dict[str, Any]:
        """The price file's ``offers:`` row (no spot price: the key is left out)."""
        doc: dict[str, Any] = {"provider": self.provider, "gpu": self.gpu, "instance_type": self.instance_type,
                               "region": self.region, "gpus_per_instance": self.gpus_per_instance,
                               "usd_per_instance_hour": self.usd_per_instance_hour}  # fmt: skip
        if self.spot_usd_per_instance_hour is not None:
            doc["spot_usd_per_instance_hour"] = self.spot_usd_per_instance_hour
        doc["notes"] = f"listed as {' / '.join(sorted(self.listed))}; " + (
            f"lowest of {self.zones} zone rows" if self.zones > 1 else "one catalog row"
        )
        return doc


@dataclass
class ImportResult:
    """What :func:`import_folder` found: the price file document, its offers, the files read, rows skipped by
    reason and accelerator names that no catalog GPU matched (with their row counts)."""

    doc: dict[str, Any]
    files: list[str]
    skipped: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    offers: list[SkyOffer] = field(default_factory=list)

    def skip(self, why: str) -> None:
        """Count one row skipped for ``why``."""
        self.skipped[why] = self.skipped.get(why, 0) + 1


def vms_files(folder: Path, cloud: str | None = None) -> list[tuple[str, Path]]:
    """(cloud, path) of every ``vms.csv`` in ``folder`` (module docstring), sorted by cloud.

    Raises:
        InputError: ``folder`` is not a folder, or holds no ``vms.csv`` at either level.
    """
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder", fix="pass a SkyPilot catalog folder (e.g. catalogs/v7/aws)")
    if (folder / "vms.csv").is_file():
        return [((cloud or folder.resolve().name).lower(), folder / "vms.csv")]
    found = sorted((p.parent.name.lower(), p) for p in folder.glob("*/vms.csv") if p.is_file())
    if cloud:
        found = [(c, p) for c, p in found if c == cloud.lower()]
    if not found:
        raise InputError(
            f"no vms.csv in {folder}" + (f" for cloud {cloud!r}" if cloud else ""),
            "a SkyPilot catalog folder holds vms.csv, or one sub-folder per cloud with a vms.csv each",
            "pass the folder of one cloud (catalogs/v7/aws) or of a catalog version (catalogs/v7)",
        )
    return found


def _number(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    # beyond hetplan.input_checks.MAX_NUMBER the price file written would be refused when read (no real price comes
    # near it)
    return value if math.isfinite(value) and 0 < value <= MAX_NUMBER else None


def _gpu_name(listed: str, mapping: Mapping[str, str], unknown: dict[str, int], catalog: Catalog) -> str | None:
    name = mapping.get(listed) or SKYPILOT_NAMES.get(listed) or listed
    try:
        return catalog.find_gpu(name).name
    except InputError:
        unknown[listed] = unknown.get(listed, 0) + 1
        return None


def read_vms(
    path: Path, cloud: str, mapping: Mapping[str, str], result: ImportResult, catalog: Catalog
) -> list[SkyOffer]:
    """The GPU offers of one ``vms.csv`` (module docstring), one per (instance type, region), sorted by GPU,
    instance type and region; skips and unknown names are added to ``result``.

    Raises:
        InputError: unreadable, not UTF-8 (a byte-order mark is allowed), empty, larger than
            :data:`MAX_FILE_BYTES`, or a required column missing.
    """
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{path} is {size:,} bytes", fix=f"a vms.csv is at most {MAX_FILE_BYTES:,} bytes")
        text = path.read_bytes().decode("utf-8-sig")  # a BOM (Excel's "CSV UTF-8") is not part of the header
    except OSError as exc:
        raise InputError(f"cannot read {path}", str(exc), "check the path and its permissions") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path} is not UTF-8 text (byte {exc.start:,})", fix="pass a vms.csv as SkyPilot publishes it"
        ) from None
    if not text.strip():
        raise InputError(f"{path} is empty", fix="pass a vms.csv from skypilot-org/skypilot-catalog")
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(
            f"{path}: column {missing[0]} is missing",
            f"a SkyPilot vms.csv has {', '.join(REQUIRED_COLUMNS)}",
            "pass a vms.csv from skypilot-org/skypilot-catalog (catalogs/v7/<cloud>/vms.csv)",
        )
    merged: dict[tuple[str, str], SkyOffer] = {}
    for row in reader:
        instance, listed, count_text, price_text, spot_text, region = (
            (row.get(column) or "").strip() for column in REQUIRED_COLUMNS
        )
        count = _number(count_text)
        if not listed or count is None:
            continue  # not a GPU instance
        if count != int(count) or count < 1:
            result.skip("fractional GPU count")
            continue
        gpu = _gpu_name(listed, mapping, result.unknown, catalog)
        if gpu is None:
            continue
        price, spot = _number(price_text), _number(spot_text)
        if price is None:
            result.skip("no on-demand price")
            continue
        if not instance:
            result.skip("no instance type")
            continue
        old = merged.get((instance, region))
        if old is None:
            merged[(instance, region)] = SkyOffer(cloud, gpu, instance, region, int(count), price, spot, 1, {listed})
            continue
        old.usd_per_instance_hour = min(old.usd_per_instance_hour, price)
        if spot is not None:
            old.spot_usd_per_instance_hour = min(old.spot_usd_per_instance_hour or spot, spot)
        old.zones += 1
        old.listed.add(listed)
    return [o for _, o in sorted(merged.items(), key=lambda kv: (kv[1].gpu, kv[0]))]


def import_folder(
    folder: Path,
    catalog: Catalog,
    cloud: str | None = None,
    regions: Sequence[str] = (),
    mapping: Mapping[str, str] | None = None,
    as_of: str | None = None,
) -> ImportResult:
    """Read every ``vms.csv`` of ``folder`` (module docstring) into a user price file document (``offers:``), only
    the ``regions`` given (all when empty, compared without case), GPU names looked up in ``catalog``. ``as_of``:
    the snapshot date written, YYYY-MM-DD (default: the newest file's modification date, UTC, so the same files give
    the same document).

    Raises:
        InputError: as :func:`vms_files` and :func:`read_vms`, no GPU offer at all in what was read, an
            ``as_of`` that is not a date, or a field the price-file loader would refuse (:func:`check_document`).
    """
    from datetime import UTC, date, datetime

    files = vms_files(folder, cloud)
    result = ImportResult({}, [str(p) for _, p in files])
    offers: list[SkyOffer] = []
    for name, path in files:
        offers += read_vms(path, name, mapping or {}, result, catalog)
    if regions:
        wanted = {r.lower() for r in regions}
        offers = [o for o in offers if o.region.lower() in wanted]
    if not offers:
        raise InputError(
            f"no GPU offer read from {folder}" + (f" in {', '.join(regions)}" if regions else ""),
            "rows need an accelerator the GPU catalog knows and an on-demand price"
            + (f"; unknown accelerators: {', '.join(sorted(result.unknown))}" if result.unknown else ""),
            "check the folder and --region, or name unknown accelerators with --map NAME=GPU",
        )
    if as_of is not None:
        try:
            date.fromisoformat(as_of.strip())
        except ValueError:
            raise InputError(f"--as-of {as_of!r} is not a date", fix="pass the snapshot date as YYYY-MM-DD") from None
        as_of = as_of.strip()
    else:
        newest = max(p.stat().st_mtime for _, p in files)
        as_of = datetime.fromtimestamp(newest, UTC).strftime("%Y-%m-%d")
    result.doc = {
        "schema_version": 1,
        "kind": "prices",
        "source": f"SkyPilot catalog (skypilot-org/skypilot-catalog, Apache-2.0): {', '.join(n for n, _ in files)} "
        "vms.csv, imported by 'hetplan catalog import-prices'",
        "as_of": as_of,
        "illustrative": False,
        "offers": [o.to_doc() for o in offers],
    }
    result.offers = offers
    # the rule every price file is read under (a region or instance type of "1e+300" is text a schema would read
    # as a number): refused here, with the offer's field named, rather than written and refused when read
    check_document(result.doc, f"the price file read from {folder}")
    return result


__all__ = ["REQUIRED_COLUMNS", "SKYPILOT_NAMES", "ImportResult", "SkyOffer", "import_folder", "read_vms", "vms_files"]
