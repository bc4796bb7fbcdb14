"""``hetplan estimate``: one instance's latency, memory and throughput."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan import api
from hetplan.cli.main import app, run_guarded
from hetplan.io import to_json


@app.command()
def estimate(
    model: str = typer.Option(..., "--model", "-m", help="Catalog model name or path to a config.json."),
    gpu: str = typer.Option(..., "--gpu", "-g", help="GPU name (see 'hetplan catalog gpus')."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel degree."),
    batch: int = typer.Option(1, "--batch", "-b", help="B: prompts per prefill / sequences per decode step."),
    prompt_tokens: int = typer.Option(1024, "--prompt-tokens", help="S: tokens per prompt."),
    context_tokens: int = typer.Option(None, "--context-tokens", help="C: context per decoding sequence (default S)."),
    output_tokens: int = typer.Option(None, "--output-tokens", help="O: also report steady-state output tokens/s."),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype", help="bf16, fp16, fp8, int8 or int4."),
    kv_dtype: str = typer.Option(
        "bf16", "--kv-dtype", help="bf16, fp16 or fp8 (vLLM keeps a 16-bit KV cache in the weight dtype)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    profile_files: list[Path] = typer.Option(
        None, "--profile", help="Profile file from 'hetplan profile': measured figures replace datasheet."
    ),
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
    for note in est.warnings:  # measured figures (--profile, or a catalog folder from 'hetplan profile merge')
        console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)
