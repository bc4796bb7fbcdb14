"""``hetplan catalog gpus|models|prices``."""

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from hetplan.cli.app import run_guarded
from hetplan.cli.options import JsonFlag, cloud_option
from hetplan.cli.render.format import fit_numbers, num
from hetplan.io import to_json


def gpus(json_out: JsonFlag = False) -> None:
    """List GPUs: dense TFLOPS, memory, bandwidth, links."""
    from hetplan.catalog.loader import load_gpus

    cat = run_guarded(load_gpus)
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
    from hetplan.catalog.loader import load_models

    cat = run_guarded(load_models)
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
    json_out: JsonFlag = False,
) -> None:
    """List $/GPU-hour per cloud, on-demand and spot."""
    from hetplan.catalog.loader import find_gpu, load_prices
    from hetplan.catalog.pricing import check_cloud

    cat = run_guarded(load_prices)
    rows = list(cat.prices)
    if gpu:
        name = run_guarded(lambda: find_gpu(gpu)).name
        rows = [p for p in rows if p.gpu == name]
    if cloud:
        run_guarded(lambda: check_cloud(cloud.lower()))
        rows = [p for p in rows if p.cloud == cloud.lower()]
    if json_out:
        typer.echo(to_json([p.model_dump() for p in rows]), nl=False)
        return
    t = Table(title=f"Prices, $/GPU-hour (as of {cat.as_of}; {cat.source.split(';')[0]})")
    for col in ("gpu", "cloud", "instance", "GPUs", "on-demand", "spot", "host incl."):
        t.add_column(col, justify="right" if col in ("GPUs", "on-demand", "spot") else "left", no_wrap=col == "gpu")
    for p in rows:
        t.add_row(
            p.gpu,
            p.cloud,
            p.instance_type[:40],
            str(p.gpus_per_instance),
            num(p.on_demand_usd_per_gpu_hour),
            num(p.spot_usd_per_gpu_hour),
            "yes" if p.includes_host else "no",
        )
    Console().print(fit_numbers(t))
