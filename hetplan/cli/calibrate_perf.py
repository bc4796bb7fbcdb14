"""``hetplan calibrate-perf``: fit corrections of the shipped performance curves on the user's own serving benchmarks
(:mod:`hetplan.perf.user_calibration`). Named apart from ``hetplan calibrate``, which fits CASCADE's scheduling
coefficients on a trace replay, and from ``benchmarks/calibrate_perf.py``, which refits the shipped curves."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from hetplan.cli.app import catalog_from_env, err_console, run_guarded
from hetplan.cli.options import (
    ForceFlag,
    JsonFlag,
    engine_option,
    kv_dtype_option,
    model_option,
    out_option,
    tp_option,
    weight_dtype_option,
)
from hetplan.io import check_output, to_json, to_yaml, write_atomic
from hetplan.tables import fit_numbers

if TYPE_CHECKING:  # pydantic and numpy load when the command runs (tests/cli/test_structure.py)
    from hetplan.perf.calibration_file import CalibrationFile
    from hetplan.perf.calibration_readers import Context


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def _render(doc: "CalibrationFile", console: Console) -> None:
    table = Table(title="median |error| of mean TTFT / TPOT: shipped curves -> corrected (leave-one-out)")
    for col in ("GPU", "model", "layout", "n", "TTFT x", "TPOT x", "TTFT error %", "TPOT error %"):
        table.add_column(col, justify="left" if col in ("GPU", "model", "layout") else "right")
    for c in doc.corrections:
        b, a = c.residuals.before, c.residuals.leave_one_out
        layout = f"{c.engine} " + (f"TP{c.tp} {c.weight_dtype}" if c.tp != "*" else "other TPs")
        table.add_row(
            c.gpu, c.model, layout, str(c.points),
            f"{c.ttft_factor:.3f}", f"{c.tpot_factor:.3f}",
            f"{b.ttft.median_abs * 100:.1f} -> {a.ttft.median_abs * 100:.1f}",  # the % in the header: a
            f"{b.tpot.median_abs * 100:.1f} -> {a.tpot.median_abs * 100:.1f}",  # narrow cell wraps at the arrow
        )  # fmt: skip
    console.print(fit_numbers(table))  # COLUMNS=80: the GPU and model names wrap, no cell is cut
    o = doc.overall
    b, a = o.before, o.leave_one_out
    console.print(
        f"all {o.points} points, median |error|: TTFT {_pct(b.ttft.median_abs)} -> "
        f"{_pct(a.ttft.median_abs)}, TPOT {_pct(b.tpot.median_abs)} -> {_pct(a.tpot.median_abs)}"
        f" (bias TTFT {b.ttft.bias * 100:+.1f} % -> {a.ttft.bias * 100:+.1f} %, TPOT "
        f"{b.tpot.bias * 100:+.1f} % -> {a.tpot.bias * 100:+.1f} %)"
    )
    console.print(
        "'other TPs': the model's TPOT factor over all its layouts, applied where no point has the plan's TP and "
        "dtype (its TTFT is left alone: across layouts one point made TTFT worse)"
    )


def check_flags(ctx: "Context") -> None:
    """Refuse a flag value no point could take, whether or not a file says that field itself (``--tp 0`` or
    ``--gpu Z9`` were silently ignored next to a vllm bench JSON that names its TP and GPU).

    Raises:
        InputError: naming the flag, the value and what it takes.
    """
    from hetplan.errors import InputError
    from hetplan.perf.engines import engine_rules
    from hetplan.perf.points_table import parse_point

    if ctx.engine is not None:
        engine_rules(ctx.engine)  # InputError: unknown engine, naming the three
    given = ctx.given()
    try:  # the row checks every points table gets: whole numbers in range (the error names the column)
        parse_point({"model": "-", "gpu": "-", "concurrency": 1, "isl": 1, "osl": 1, **given})
    except ValueError as exc:
        name = str(exc).split()[0]
        raise InputError(f"--{name.replace('_', '-')}: {exc}", fix="pass a value the runs used") from None
    from hetplan.catalog.context import Catalog

    catalog = ctx.catalog or Catalog.shipped()
    if ctx.gpu is not None:
        catalog.find_gpu(ctx.gpu)  # InputError: unknown GPU, with suggestions
    if ctx.model is not None:
        catalog.find_model(ctx.model)


def calibrate_perf(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Benchmark results: vllm bench serve --save-result JSON, GuideLLM report JSON, AIPerf/genai-perf "
            "profile export (JSON or CSV), or a points CSV with ttft_ms and tpot_ms columns.",
            show_default=False,
        ),
    ],
    gpu: Annotated[
        str | None, typer.Option("--gpu", "-g", help="GPU the runs used (when the file does not say).")
    ] = None,
    model: Annotated[str | None, model_option("Model served (when the file's name is not a catalog name).")] = None,
    engine: Annotated[
        str | None, engine_option("Serving engine: vllm, sglang or trtllm (default: the file's, else vllm).")
    ] = None,
    tp: Annotated[int | None, tp_option("Tensor-parallel degree of the runs (default 1).")] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="Pipeline-parallel degree (default 1).")] = None,
    ep: Annotated[int | None, typer.Option("--ep", help="Expert-parallel degree (default 1).")] = None,
    dp_attention: Annotated[
        int | None, typer.Option("--dp-attention", help="Attention data-parallel ranks (default 1).")
    ] = None,
    weight_dtype: Annotated[str | None, weight_dtype_option()] = None,
    kv_dtype: Annotated[str | None, kv_dtype_option()] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help="Closed-loop clients (when the file does not say).")
    ] = None,
    isl: Annotated[int | None, typer.Option("--isl", help="Mean prompt tokens (when the file does not say).")] = None,
    osl: Annotated[int | None, typer.Option("--osl", help="Mean output tokens (when the file does not say).")] = None,
    out: Annotated[Path | None, out_option("Write the calibration file (YAML).")] = None,
    force: ForceFlag = False,
    json_out: JsonFlag = False,
) -> None:
    """Fit per engine x GPU x model corrections of TTFT and TPOT on your own benchmark results, print the error
    before and after (leave-one-out on your points), and write the calibration file that plan, estimate and
    simulate take (--perf-calibration; scenario perf.calibration).

    Flags fill in what a file does not say (GuideLLM and AIPerf never name the GPU); --model also replaces a
    model name the catalog does not know (a served-model name). Each correction applies to its engine, GPU,
    model and layout (TP, weight dtype); other TPs of the model get its TPOT factor only.

    Example: hetplan calibrate-perf runs/*.json --gpu H100-SXM --tp 2 --out my-calibration.yaml
    """

    def work() -> "CalibrationFile":
        from hetplan.perf import user_calibration as uc

        if out is not None:
            check_output(out, force)  # refuse before any work is done
        catalog = catalog_from_env()
        ctx = uc.Context(engine, gpu, model, tp, pp, ep, dp_attention, weight_dtype, kv_dtype, concurrency, isl, osl,
                         catalog)  # fmt: skip
        check_flags(ctx)
        points, notes = uc.read_benchmarks(list(files), ctx)
        for note in notes:
            err_console.print(f"[yellow]note:[/] {note}")
        pred = uc.predict(points, catalog)
        doc = uc.calibration_file(pred, uc.fit(pred), [str(f) for f in files])
        if out is not None:
            write_atomic(out, to_yaml(doc.to_doc()), force=force)
        return doc

    doc = run_guarded(work)
    if json_out:
        typer.echo(to_json(doc.to_doc()), nl=False)
        return
    console = Console()
    _render(doc, console)
    if out is not None:
        err_console.print(f"wrote {out}: pass it to plan, estimate or simulate with --perf-calibration {out}")
