"""``hetplan estimate``: one instance's latency, memory and throughput; closed-loop steady states
(``--concurrency``, ``--isl``, ``--osl``), tables of operating points (``--points FILE.csv``) and the search of a GPU
budget (``--gpus N --isl --osl``: every aggregated and disaggregated layout, its Pareto front and the best layout
under the SLO, :mod:`hetplan.perf.search`)."""

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hetplan import api
from hetplan.cli.app import catalog_from_env, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    JsonFlag,
    PerfCalibrationOpt,
    TimeoutOpt,
    engine_option,
    gpus_option,
    kv_dtype_option,
    model_option,
    profile_option,
    tp_option,
    tpot_option,
    ttft_option,
    weight_dtype_option,
)
from hetplan.cli.render.format import fit_numbers, print_warnings
from hetplan.errors import InputError
from hetplan.io import to_json
from hetplan.units import parse_duration_s

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.perf.search import BudgetPoint, BudgetSearch


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
    calibration: Path | None = None,
) -> dict[str, Any]:
    if isl is None or osl is None:
        raise InputError("--concurrency needs --isl and --osl", fix="pass e.g. --concurrency 32 --isl 1024 --osl 1024")
    from hetplan.perf.points import estimate_points

    row = {"engine": engine, "model": model, "gpu": gpu, "tp": tp, "pp": pp, "ep": ep, "dp_attention": dp_attention,
           "weight_dtype": weight_dtype, "kv_dtype": kv_dtype or "", "concurrency": concurrency, "isl": isl,
           "osl": osl, **{k: v for k, v in knobs.items() if v is not None}}  # fmt: skip
    from hetplan.cli.render.points import point_error

    catalog = catalog_from_env()
    out = _calibrated(estimate_points([row], catalog), calibration, catalog)[0]
    error = point_error(out)
    if error is not None:
        fix = "check --model, --gpu, --tp/--ep/--dp-attention and the dtypes"
        if "max_model_len" in error or "KV cache" in error:
            fix = "change the engine knob or the lengths the message names"
        raise InputError(error, fix=fix)
    return out


def _calibrated(rows: list[dict[str, Any]], calibration: Path | None, catalog: "Catalog") -> list[dict[str, Any]]:
    """Closed-loop rows with ``--perf-calibration``'s corrections applied (unchanged without one; names looked up
    in ``catalog``)."""
    if calibration is None:
        return rows
    from hetplan.perf.user_calibration import corrected, load_calibration

    return corrected(rows, load_calibration(calibration)[0], catalog)


def _print_points(doc: list[dict[str, Any]]) -> None:
    from hetplan.cli.render.points import print_points

    print_points(doc)


def _point_row(p: "BudgetPoint") -> list[str]:
    return [p.layout, str(p.gpus), f"{p.concurrency:,.0f}", f"{p.tokens_per_s_per_user:,.1f}",
            f"{p.tokens_per_s_per_gpu:,.0f}", f"{p.ttft_s * 1e3:,.0f}", f"{p.tpot_s * 1e3:,.1f}"]  # fmt: skip


_POINT_COLS = ("layout", "GPUs", "users", "tok/s/user", "tok/s/GPU", "TTFT ms", "TPOT ms")


def _print_search(res: "BudgetSearch") -> None:
    console = Console()
    table = Table(
        title=f"{res.model} on {res.gpus}x {res.gpu} ({res.engine}, {res.weight_dtype}, KV {res.kv_dtype}), "
        f"ISL {res.isl:,} / OSL {res.osl:,}: Pareto front"
    )
    for n, col in enumerate(_POINT_COLS):
        table.add_column(col, justify="left" if n == 0 else "right")
    for p in res.pareto:
        table.add_row(*_point_row(p))
    console.print(fit_numbers(table))
    console.print(
        "users: clients in flight (closed loop); tok/s: output tokens; TTFT, TPOT: means. 2xTP4: two replicas "
        "of TP4; P1xTP2+D1xTP4: one TP2 prefill and one TP4 decode instance.",
        highlight=False,
    )
    best = Table(title=f"best layout at mean TTFT <= {res.ttft_slo_s * 1e3:,.0f} ms, TPOT <= "
                 f"{res.tpot_slo_s * 1e3:,.0f} ms")  # fmt: skip
    best.add_column("mode", no_wrap=True)
    for n, col in enumerate(_POINT_COLS):
        best.add_column(col, justify="left" if n == 0 else "right")
    for mode, name in (("overall", "best"), ("agg", "agg"), ("disagg", "disagg")):
        pt = res.best.get(mode)
        best.add_row(name, *(_point_row(pt) if pt else ["none meets the SLO", "-", "-", "-", "-", "-", "-"]))
    console.print(fit_numbers(best))
    console.print(f"{res.points_estimated:,} operating points estimated; {len(res.pareto)} on the front.",
                  highlight=False)  # fmt: skip
    if res.skipped:
        print_warnings(console, res.skipped[:3], "skipped")
        if len(res.skipped) > 3:
            console.print(f"(and {len(res.skipped) - 3} more layouts that do not fit; --json lists them)")


def _search(
    model: str, gpu: str, gpus: int, isl: int | None, osl: int | None, engine: str, weight_dtype: str,
    kv_dtype: str | None, ttft: str | None, tpot: str | None, disagg: bool,
) -> "BudgetSearch":  # fmt: skip
    from hetplan.perf.search import search_budget

    if isl is None or osl is None:
        raise InputError("--gpus needs --isl and --osl", fix="pass e.g. --gpus 8 --isl 2048 --osl 512")
    ttft_s = parse_duration_s(ttft, "ttft") if ttft else 2.0
    tpot_s = parse_duration_s(tpot, "tpot") if tpot else 0.1
    return search_budget(model, gpu, gpus, isl, osl, engine, weight_dtype, kv_dtype, ttft_s, tpot_s, disagg,
                         catalog_from_env())  # fmt: skip


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
    gpus: Annotated[
        int | None,
        gpus_option(
            "GPU budget: search every TP/PP/EP/DP and prefill/decode split of N GPUs "
            "(needs --isl, --osl); prints the Pareto front and the best layout under --ttft/--tpot.",
        ),
    ] = None,
    ttft: Annotated[str | None, ttft_option("With --gpus: mean TTFT SLO, e.g. 2s (default).")] = None,
    tpot: Annotated[str | None, tpot_option("With --gpus: mean TPOT SLO, e.g. 100ms (default).")] = None,
    disagg: Annotated[
        bool, typer.Option("--disagg/--no-disagg", help="With --gpus: also search prefill/decode splits.")
    ] = True,
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
    perf_calibration: PerfCalibrationOpt = None,
    profile_files: Annotated[
        list[Path] | None,
        profile_option("Profile file from 'hetplan profile': measured figures replace datasheet."),
    ] = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Predict prefill and decode latency, KV capacity and throughput of one instance; with --concurrency the
    closed-loop steady state (mean TTFT, TPOT, throughput); with --points one estimate per CSV row; with --gpus N the
    search of every layout of N GPUs (Pareto front of tokens/s/GPU against tokens/s/user, best layout per SLO)."""
    if points is not None:
        from hetplan.perf.points import estimate_points
        from hetplan.perf.points_table import read_points

        catalog = catalog_from_env()
        doc = run_guarded(lambda: run_with_timeout(
            timeout, lambda: _calibrated(estimate_points(read_points(points), catalog), perf_calibration, catalog),
            "estimate",
        ))  # fmt: skip
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
    if gpus is not None:
        if concurrency is not None:
            run_guarded(lambda: _conflict())
        res = run_guarded(lambda: run_with_timeout(timeout, lambda: _search(
            model, gpu, gpus, isl, osl, engine, weight_dtype, kv_dtype, ttft, tpot, disagg), "estimate"))  # fmt: skip
        if json_out:
            typer.echo(to_json(res.to_doc()), nl=False)
        else:
            _print_search(res)
        return
    if concurrency is not None:
        out = run_guarded(lambda: run_with_timeout(timeout, lambda: _closed_loop_row(
            engine, model, gpu, tp, pp, ep, dp_attention, weight_dtype, kv_dtype, concurrency, isl, osl, knobs,
            perf_calibration,
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
                profiles=list(profile_files or []),
                settings=_settings(settings, perf_calibration),
                engine=engine,
                catalog=catalog_from_env(),
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
    console.print(fit_numbers(table))
    if est.compute_tflops_is_estimate:
        console.print(
            f"[yellow]warning:[/] {est.gpu}'s TFLOPS is an unverified estimate: measure it before trusting this."
        )
    # measured figures (--profile, or a catalog folder from 'hetplan profile merge'), curve fallbacks
    print_warnings(console, est.warnings)


def _settings(settings: Any, calibration: Path | None) -> Any:
    """The engine's ``settings`` (its knobs set) with ``--perf-calibration``'s corrections."""
    if calibration is None:
        return settings
    from hetplan.perf.user_calibration import with_calibration

    return with_calibration(settings, calibration)


def _default_kv(engine: str, weight_dtype: str) -> str:
    from hetplan.perf.engines import default_kv_dtype

    return default_kv_dtype(engine, weight_dtype) if engine in ("vllm", "sglang", "trtllm") else "bf16"


def _missing(flag: str) -> None:
    raise InputError(f"estimate needs {flag}", fix=f"pass {flag} (or --points FILE.csv for a table of points)")


def _conflict() -> None:
    raise InputError("--gpus and --concurrency cannot be combined",
                     fix="drop --concurrency (the search tries many) or drop --gpus for one layout")  # fmt: skip
