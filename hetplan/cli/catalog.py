"""``hetplan catalog gpus|models|prices|import-prices``."""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hetplan.cli.app import catalog_from_env, run_guarded
from hetplan.cli.options import JsonFlag, cloud_option, force_option, out_option, prices_option, region_option
from hetplan.cli.render.format import fit_numbers, num
from hetplan.io import to_json


def gpus(json_out: JsonFlag = False) -> None:
    """List GPUs: dense TFLOPS, memory, bandwidth, links."""
    cat = run_guarded(lambda: catalog_from_env().gpu_catalog)
    if json_out:
        typer.echo(to_json([g.model_dump() for g in cat.gpus]), nl=False)
        return
    t = Table(
        title=f"GPUs (as of {cat.as_of}; dense TFLOPS, never sparse)",
        caption="(fp16): no bf16 on this GPU, the fp16 figure is shown; plan it with --weight-dtype fp16. "
        "~N?: an estimate, not a datasheet figure.",
    )
    for col in ("name", "aliases", "bf16 TFLOPS", "fp8 TFLOPS", "HBM GiB", "HBM GB/s", "link GB/s", "net Gbit/s"):
        t.add_column(col, justify="left" if col in ("name", "aliases") else "right", no_wrap=col == "name")
    for g in cat.gpus:
        if g.bf16_dense_tflops:
            bf16 = num(g.bf16_dense_tflops)
        elif g.fp16_dense_tflops:
            bf16 = f"{num(g.fp16_dense_tflops)} (fp16)"
        else:
            bf16 = f"~{num(g.fp16_dense_tflops_estimate)}?"
        t.add_row(
            g.name,
            ", ".join(g.aliases),
            bf16,
            num(g.fp8_dense_tflops),
            num(g.hbm_gib),
            num(g.hbm_gb_per_s),
            num(g.interconnect_gb_per_s),
            num(g.network_gbit_per_s),
        )
    Console().print(fit_numbers(t))


def models(json_out: JsonFlag = False) -> None:
    """List models: layers, heads, KV heads, parameters."""
    cat = run_guarded(lambda: catalog_from_env().models)
    if json_out:
        typer.echo(to_json([m.model_dump() for m in cat.models]), nl=False)
        return
    t = Table(title=f"Models (as of {cat.as_of})")
    for col in ("name", "layers", "hidden", "heads", "kv heads", "experts", "params B", "active B"):
        t.add_column(col, justify="left" if col == "name" else "right", no_wrap=col == "name")
    for m in cat.models:
        t.add_row(
            m.name,
            str(m.num_hidden_layers),
            str(m.hidden_size),
            str(m.num_attention_heads),
            str(m.num_key_value_heads),
            f"{m.experts_per_token}/{m.num_experts}" if m.is_moe else "-",
            num(m.params_total_b),
            num(m.params_active_b),
        )
    Console().print(fit_numbers(t))


def prices(
    gpu: Annotated[str | None, typer.Option("--gpu", help="Only this GPU.")] = None,
    cloud: Annotated[str | None, cloud_option("Only this cloud.")] = None,
    region: Annotated[str | None, region_option("Only this region (e.g. us-east-2).")] = None,
    price_file: Annotated[
        Path | None, prices_option("Show this price file's offers (e.g. from import-prices).")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """List $/GPU-hour per cloud and region, on-demand and spot, with each snapshot's date and source."""
    rows, snapshots, title = run_guarded(lambda: _price_rows(gpu, cloud, region, price_file))
    if json_out:
        typer.echo(to_json([p.doc for p in rows]), nl=False)
        return
    t = Table(title=title)
    for col in ("gpu", "cloud", "instance", "region", "GPUs", "on-demand", "spot"):
        t.add_column(col, justify="right" if col in ("GPUs", "on-demand", "spot") else "left", no_wrap=col == "gpu")
    for p in rows:
        t.add_row(
            p.gpu + ("" if p.includes_host else " (no host)"),
            p.cloud,
            p.instance_type[:40],
            p.region or "-",
            str(p.gpus_per_instance),
            num(p.on_demand_usd_per_gpu_hour),
            num(p.spot_usd_per_gpu_hour),
        )
    console = Console()
    console.print(fit_numbers(t, console))
    console.print("$/GPU-hour = the instance's $/hour / its GPUs. Snapshots (date, source):", highlight=False)
    for line in snapshots:
        console.print(f"  {line}", highlight=False, markup=False)


@dataclass(frozen=True)
class _PriceRow:
    """A row of ``catalog prices``: what the table shows, filters and sorts by, and ``doc``, its ``--json`` entry
    (a catalog row's fields, or a price file offer's)."""

    gpu: str
    cloud: str
    instance_type: str
    region: str
    gpus_per_instance: int
    on_demand_usd_per_gpu_hour: float | None
    spot_usd_per_gpu_hour: float | None
    as_of: str | None
    source: str
    includes_host: bool
    doc: dict[str, Any]


def _file_row(gpu: str, cloud: str, instance_type: str, region: str, gpus_per_instance: int,
              on_demand: float | None, spot: float | None, as_of: str | None, source: str) -> _PriceRow:  # fmt: skip
    doc = {"gpu": gpu, "cloud": cloud, "instance_type": instance_type, "region": region,
           "gpus_per_instance": gpus_per_instance, "on_demand_usd_per_gpu_hour": on_demand,
           "spot_usd_per_gpu_hour": spot, "as_of": as_of, "source": source}  # fmt: skip
    return _PriceRow(gpu, cloud, instance_type, region, gpus_per_instance, on_demand, spot, as_of, source, True, doc)


def _price_rows(
    gpu: str | None, cloud: str | None, region: str | None, price_file: Path | None
) -> tuple[list[_PriceRow], list[str], str]:
    """The rows ``catalog prices`` shows (catalog rows, or a price file's offers), the snapshot lines (cloud: date,
    source) and the table title."""
    from hetplan.catalog.loader import load_user_prices
    from hetplan.catalog.pricing import check_cloud, check_region

    catalog = catalog_from_env()
    if price_file is not None:
        user = load_user_prices(price_file)
        rows: list[_PriceRow] = []
        for o in user.offers:
            price = o.usd_per_instance_hour

            def per(x: float | None, k: int = o.gpus_per_instance) -> float | None:
                return None if x is None else float(x) / k

            rows.append(_file_row(catalog.find_gpu(o.gpu).name, o.provider, o.instance_type, o.region,
                                  o.gpus_per_instance, per(price) if price is not None else o.usd_per_gpu_hour,
                                  per(o.spot_usd_per_instance_hour), user.as_of, user.source))  # fmt: skip
        for name, value in user.usd_per_gpu_hour.items():
            rows.append(_file_row(catalog.find_gpu(name).name, "price-file", "", "", 1, float(value), None, user.as_of,
                                  user.source))  # fmt: skip
        title = f"Prices in {price_file}, $/GPU-hour (as of {user.as_of})"
    else:
        cat = catalog.prices
        rows = [
            _PriceRow(
                p.gpu,
                p.cloud,
                p.instance_type,
                p.region,
                p.gpus_per_instance,
                p.on_demand_usd_per_gpu_hour,
                p.spot_usd_per_gpu_hour,
                p.as_of or cat.as_of,
                p.source,
                p.includes_host,
                {**p.model_dump(), "as_of": p.as_of or cat.as_of},
            )  # fmt: skip
            for p in cat.prices
        ]
        title = f"Prices, $/GPU-hour (catalog as of {cat.as_of})"
        if cloud:
            check_cloud(catalog, cloud.lower())
        if region:
            check_region(catalog, region, cloud.lower() if cloud else None)
    if gpu:
        name = catalog.find_gpu(gpu).name
        rows = [p for p in rows if p.gpu == name]
    if cloud:
        rows = [p for p in rows if p.cloud == cloud.lower()]
    if region:
        rows = [p for p in rows if p.region.lower() == region.lower()]
    first: dict[str, int] = {name: n for n, name in reversed(list(enumerate(p.gpu for p in rows)))}
    rows.sort(key=lambda p: (first[p.gpu], p.cloud, p.gpus_per_instance, p.instance_type, p.region))
    snapshots = sorted({f"{p.cloud}: {p.as_of}, {p.source}" for p in rows})
    return rows, snapshots, title


def import_prices(
    folder: Annotated[Path, typer.Argument(help="SkyPilot catalog folder: FOLDER/vms.csv or FOLDER/<cloud>/vms.csv.")],
    out: Annotated[Path | None, out_option("Write the price file here (default: print it).")] = None,
    cloud: Annotated[str | None, cloud_option("Cloud of FOLDER/vms.csv (default: the folder's name).")] = None,
    region: Annotated[str | None, region_option("Only these regions, comma-separated (default: all).")] = None,
    mapping: Annotated[
        str | None,
        typer.Option("--map", help="Accelerator names to catalog GPUs, e.g. A100-80GB=A100-80GB-PCIe,MI300X=MI300X."),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="Snapshot date to record, YYYY-MM-DD (default: the newest vms.csv's date)."),
    ] = None,
    force: Annotated[bool, force_option()] = False,
) -> None:
    """Read a SkyPilot catalog folder (their v7 vms.csv) into a price file with one offer per instance type and
    region, on-demand and spot; use it with 'hetplan plan --prices FILE'."""
    import yaml

    from hetplan.catalog.skypilot import import_folder
    from hetplan.cli.scenario_flags import split_list
    from hetplan.errors import InputError
    from hetplan.io import check_output, write_atomic

    def work() -> tuple[str, Any]:
        if out is not None:
            check_output(out, force)
        pairs = {}
        for item in split_list(mapping, "--map", "A100-80GB=A100-80GB-PCIe") if mapping else []:
            name, sep, gpu = item.partition("=")
            if not sep or not name.strip() or not gpu.strip():
                raise InputError(f"--map {item!r} is not NAME=GPU", fix="pass e.g. --map A100-80GB=A100-80GB-PCIe")
            pairs[name.strip()] = gpu.strip()
        regions = split_list(region, "--region", "us-east-1,us-west-2") if region else []
        res = import_folder(folder, catalog_from_env(), cloud, regions, pairs, as_of)
        text = yaml.safe_dump(res.doc, sort_keys=False, width=120, allow_unicode=True)
        if out is not None:
            write_atomic(out, text, force)
        return text, res

    text, res = run_guarded(work)
    offers = res.offers
    known = _catalog_sizes()
    new = sorted({f"{o.provider} {o.instance_type} ({o.gpus_per_instance}x {o.gpu})" for o in offers
                  if (o.provider, o.instance_type) not in known})  # fmt: skip
    err = Console(stderr=True)
    if out is None:
        typer.echo(text, nl=False)
    regions_read = sorted({o.region for o in offers})
    err.print(f"{len(offers)} offers of {len({o.gpu for o in offers})} GPU types in {len(regions_read)} regions "
              f"from {', '.join(res.files)}" + (f"; written to {out}" if out else ""), highlight=False)  # fmt: skip
    if new:
        err.print(f"{len(new)} instance sizes the shipped catalog lacks: {', '.join(new[:8])}"
                  + (" ..." if len(new) > 8 else ""), highlight=False, markup=False)  # fmt: skip
    for why, n in sorted(res.skipped.items()):
        err.print(f"skipped {n} rows: {why}", highlight=False)
    if res.unknown:
        names = ", ".join(f"{k} ({v})" for k, v in sorted(res.unknown.items()))
        err.print(f"skipped accelerators no catalog GPU matches (rows): {names}; name them with --map NAME=GPU",
                  highlight=False, markup=False)  # fmt: skip


def _catalog_sizes() -> set[tuple[str, str]]:
    return {(p.cloud, p.instance_type) for p in catalog_from_env().prices.prices}
