"""``hetplan estimate``: one instance's latency, memory and throughput."""

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from hetplan import api
from hetplan.cli.app import run_guarded
from hetplan.cli.options import JsonFlag, kv_dtype_option, model_option, profile_option, tp_option, weight_dtype_option
from hetplan.cli.render.format import print_warnings
from hetplan.io import to_json


def estimate(
    model: Annotated[str, model_option("Catalog model name or path to a config.json.")],
    gpu: Annotated[str, typer.Option("--gpu", "-g", help="GPU name (see 'hetplan catalog gpus').")],
    tp: Annotated[int, tp_option("Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.")] = 1,
    batch: Annotated[
        int, typer.Option("--batch", "-b", help="B: prompts per prefill / sequences per decode step.")
    ] = 1,
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", help="S: tokens per prompt.")] = 1024,
    context_tokens: Annotated[
        int | None, typer.Option("--context-tokens", help="C: context per decoding sequence (default S).")
    ] = None,
    output_tokens: Annotated[
        int | None, typer.Option("--output-tokens", help="O: also report steady-state output tokens/s.")
    ] = None,
    weight_dtype: Annotated[str, weight_dtype_option()] = "bf16",
    kv_dtype: Annotated[str, kv_dtype_option()] = "bf16",
    json_out: JsonFlag = False,
    profile_files: Annotated[
        list[Path] | None,
        profile_option("Profile file from 'hetplan profile': measured figures replace datasheet."),
    ] = None,
) -> None:
    """Predict prefill and decode latency, KV capacity and throughput of one instance."""
    est = run_guarded(
        lambda: api.estimate(
            model,
            gpu,
            tp,
            pp,
            batch,
            prompt_tokens,
            context_tokens,
            output_tokens,
            weight_dtype,
            kv_dtype,
            profiles=list(profile_files or []),
        )
    )
    doc = asdict(est)
    if json_out:
        typer.echo(to_json(doc), nl=False)
        return
    table = Table(title=f"{est.model} on {est.gpu} TP{est.tp} PP{est.pp} ({est.weight_dtype}, KV {est.kv_dtype})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("prefill latency (B prompts of S)", f"{est.prefill_latency_s * 1e3:.1f} ms"),
        ("decode step latency (B seqs, C ctx)", f"{est.decode_step_latency_s * 1e3:.1f} ms"),
        ("KV capacity", f"{est.kv_capacity_tokens:,} tokens"),
        ("max batch at C", f"{est.max_batch_size:,}"),
        ("weights per GPU", f"{est.weights_gib_per_gpu:.2f} GiB"),
        ("KV per token (whole model)", f"{est.kv_bytes_per_token / 1024:.0f} KiB"),
    ]
    if est.max_output_tokens_per_s is not None:
        rows.append(
            (
                "max output tokens/s (steady state incl. prefill, largest batch that fits)",
                f"{est.max_output_tokens_per_s:,.0f}",
            )
        )
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    if est.compute_tflops_is_estimate:
        console.print(
            f"[yellow]warning:[/] {est.gpu}'s TFLOPS is an unverified estimate: measure it before trusting this."
        )
    # measured figures (--profile, or a catalog folder from 'hetplan profile merge')
    print_warnings(console, est.warnings)
