"""``hetplan estimate``: one instance's latency, memory and throughput; closed-loop steady states
(``--concurrency``, ``--isl``, ``--osl``) and tables of operating points (``--points FILE.csv``)."""

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hetplan import api
from hetplan.cli.app import run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    JsonFlag,
    TimeoutOpt,
    engine_option,
    kv_dtype_option,
    model_option,
    profile_option,
    tp_option,
    weight_dtype_option,
)
from hetplan.cli.render.format import print_warnings
from hetplan.errors import InputError
from hetplan.io import to_json


def _closed_loop_row(
    engine: str,
    model: str,
    gpu: str,
    tp: int,
    pp: int,
    ep: int,
    dp_attention: int,
    weight_dtype: str,
    kv_dtype: str | None,
    concurrency: int,
    isl: int | None,
    osl: int | None,
    knobs: dict[str, Any],
) -> dict[str, Any]:
    if isl is None or osl is None:
        raise InputError("--concurrency needs --isl and --osl", fix="pass e.g. --concurrency 32 --isl 1024 --osl 1024")
    from hetplan.perf.points import estimate_points

    row = {"engine": engine, "model": model, "gpu": gpu, "tp": tp, "pp": pp, "ep": ep, "dp_attention": dp_attention,
           "weight_dtype": weight_dtype, "kv_dtype": kv_dtype or "", "concurrency": concurrency, "isl": isl,
           "osl": osl, **{k: v for k, v in knobs.items() if v is not None}}  # fmt: skip
    out = estimate_points([row])[0]
    if "error" in out:
        fix = "check --model, --gpu, --tp/--ep/--dp-attention and the dtypes"
        if "max_model_len" in out["error"] or "KV cache" in out["error"]:
            fix = "change the engine knob or the lengths the message names"
        raise InputError(out["error"], fix=fix)
    return out


def _print_points(doc: list[dict[str, Any]]) -> None:
    table = Table(title="closed-loop estimates")
    for col in ("row", "engine", "model", "gpu", "tp", "C", "ISL", "OSL", "TTFT ms", "TPOT ms", "out tok/s", "note"):
        table.add_column(col)
    for r in doc:
        if "error" in r:
            table.add_row(str(r.get("row", "")), *[str(r.get(k, "")) for k in ("engine", "model", "gpu", "tp",
                          "concurrency", "isl", "osl")], "", "", "", "error: " + r["error"])  # fmt: skip
            continue
        table.add_row(
            str(r["row"]), r["engine"], r["model"], r["gpu"], str(r["tp"]), str(r["concurrency"]), str(r["isl"]),
            str(r["osl"]), f"{r['ttft_s'] * 1e3:,.1f}", f"{r['tpot_s'] * 1e3:,.2f}",
            f"{r['output_tokens_per_s']:,.0f}", "; ".join(r["notes"]),
        )  # fmt: skip
    Console().print(table)


def estimate(
    model: Annotated[str | None, model_option("Catalog model name or path to a config.json.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", "-g", help="GPU name (see 'hetplan catalog gpus').")] = None,
    tp: Annotated[int, tp_option("Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.")] = 1,
    engine: Annotated[str, engine_option()] = "vllm",
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel degree (MoE; divides TP x DP).")] = 1,
    dp_attention: Annotated[
        int, typer.Option("--dp-attention", help="Attention data-parallel ranks (GPUs = TP x DP).")
    ] = 1,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", help="C closed-loop clients: prints the steady state (needs --isl, --osl)."),
    ] = None,
    isl: Annotated[int | None, typer.Option("--isl", help="Input tokens per request (closed loop).")] = None,
    osl: Annotated[int | None, typer.Option("--osl", help="Output tokens per request (closed loop).")] = None,
    points: Annotated[
        Path | None, typer.Option("--points", help="CSV of operating points (columns named like these flags).")
    ] = None,
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
    kv_dtype: Annotated[str | None, kv_dtype_option()] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            "--gpu-memory-utilization",
            help="The engine's memory fraction in (0, 1] (vLLM --gpu-memory-utilization, SGLang "
            "--mem-fraction-static, TensorRT-LLM free_gpu_memory_fraction; default: the engine's).",
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            help="Tokens in one engine step (prefill chunk); sizes the activation reserve (default: the engine's).",
        ),
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            "--max-num-seqs", help="Sequences in one engine step; sizes the sampler reserve (default: the engine's)."
        ),
    ] = None,
    max_model_len: Annotated[
        int | None,
        typer.Option(
            "--max-model-len",
            help="Longest request (prompt + output) the engine accepts, tokens (default: the model's window); "
            "like vLLM, refused when the KV cache cannot hold one such request.",
        ),
    ] = None,
    json_out: JsonFlag = False,
    profile_files: Annotated[
        list[Path] | None,
        profile_option("Profile file from 'hetplan profile': measured figures replace datasheet."),
    ] = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Predict prefill and decode latency, KV capacity and throughput of one instance; with --concurrency the
    closed-loop steady state (mean TTFT, TPOT, throughput); with --points one estimate per CSV row."""
    if points is not None:
        from hetplan.perf.points import estimate_points, read_points

        doc = run_guarded(lambda: run_with_timeout(timeout, lambda: estimate_points(read_points(points)), "estimate"))
        if json_out:
            typer.echo(to_json(doc), nl=False)
        else:
            _print_points(doc)
        return
    if model is None or gpu is None:
        run_guarded(lambda: _missing("--model" if model is None else "--gpu"))
    assert model is not None and gpu is not None
    knobs: dict[str, Any] = {
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len,
    }
    from hetplan.perf.settings import engine_settings

    settings = run_guarded(lambda: engine_settings(engine, **knobs))
    if concurrency is not None:
        out = run_guarded(lambda: run_with_timeout(timeout, lambda: _closed_loop_row(
            engine, model, gpu, tp, pp, ep, dp_attention, weight_dtype, kv_dtype, concurrency, isl, osl, knobs
        ), "estimate"))  # fmt: skip
        if json_out:
            typer.echo(to_json(out), nl=False)
        else:
            _print_points([out])
        return
    est = run_guarded(
        lambda: run_with_timeout(
            timeout,
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
                kv_dtype or _default_kv(engine, weight_dtype),
                settings=settings,
                profiles=list(profile_files or []),
                engine=engine,
            ),
            "estimate",
        )
    )
    doc1 = asdict(est)
    if json_out:
        typer.echo(to_json(doc1), nl=False)
        return
    table = Table(
        title=f"{est.model} on {est.gpu} TP{est.tp} PP{est.pp} ({est.weight_dtype}, KV {est.kv_dtype}, {est.engine})"
    )
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows2 = [
        ("prefill latency (B prompts of S)", f"{est.prefill_latency_s * 1e3:.1f} ms"),
        ("decode step latency (B seqs, C ctx)", f"{est.decode_step_latency_s * 1e3:.1f} ms"),
        ("KV capacity", f"{est.kv_capacity_tokens:,} tokens"),
        ("max batch at C", f"{est.max_batch_size:,}"),
        ("weights per GPU", f"{est.weights_gib_per_gpu:.2f} GiB"),
        ("KV per token (whole model)", f"{est.kv_bytes_per_token / 1024:.0f} KiB"),
    ]
    if est.max_output_tokens_per_s is not None:
        rows2.append(
            (
                "max output tokens/s (steady state incl. prefill, largest batch that fits)",
                f"{est.max_output_tokens_per_s:,.0f}",
            )
        )
    for row in rows2:
        table.add_row(*row)
    console = Console()
    console.print(table)
    if est.compute_tflops_is_estimate:
        console.print(
            f"[yellow]warning:[/] {est.gpu}'s TFLOPS is an unverified estimate: measure it before trusting this."
        )
    # measured figures (--profile, or a catalog folder from 'hetplan profile merge'), curve fallbacks
    print_warnings(console, est.warnings)


def _default_kv(engine: str, weight_dtype: str) -> str:
    from hetplan.perf.engines import default_kv_dtype

    return default_kv_dtype(engine, weight_dtype) if engine in ("vllm", "sglang", "trtllm") else "bf16"


def _missing(flag: str) -> None:
    raise InputError(f"estimate needs {flag}", fix=f"pass {flag} (or --points FILE.csv for a table of points)")
