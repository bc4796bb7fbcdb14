"""``hetplan autoscale``: plan a schedule of combos over a load curve, price it against static fleets."""

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from hetplan import api
from hetplan.cli.app import catalog_from_env, err_console, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    ForceFlag,
    RouterImageEmitOpt,
    TimeoutOpt,
    ValidateEmitFlag,
    emit_dir_option,
    json_option,
    out_option,
)
from hetplan.cli.render.autoscale import render_summary, schedule_csv
from hetplan.cli.render.emit import render_result
from hetplan.cli.render.progress import progress_bar
from hetplan.cli.resources import solve_settings
from hetplan.cli.scenario_flags import build_scenario, check_emit_flags, emit_settings, load_planner
from hetplan.errors import InputError
from hetplan.io import check_output, to_json, write_atomic


def _lags(items: list[str]) -> dict[str, str]:
    lags: dict[str, str] = {}
    for item in items:
        gpu, sep, value = item.partition("=")
        if not sep or not gpu.strip() or not value.strip():
            raise InputError(
                f"--startup-lag-gpu: cannot read {item!r}",
                "expected GPU=DURATION",
                "write e.g. --startup-lag-gpu H100=10m",
            )
        lags[gpu.strip()] = value.strip()
    return lags


def autoscale(
    scenario_file: Annotated[
        Path, typer.Argument(help="Scenario YAML: model, lengths, SLOs, GPUs, prices, inventory.")
    ],
    load_curve: Annotated[
        Path | None, typer.Option("--load-curve", help="ServeGen per-window CSV, or an Azure/Mooncake trace.")
    ] = None,
    window: Annotated[
        str | None, typer.Option("--window", help="Window for binning a trace, e.g. 10m (ServeGen: its own).")
    ] = None,
    diurnal: Annotated[
        str | None,
        typer.Option("--diurnal", help="Instead of a file: DAYS,PEAK,TROUGH (req/s), e.g. 7,12,2 (peak at 14:00)."),
    ] = None,
    startup_lag: Annotated[
        str | None, typer.Option("--startup-lag", help="Request-to-serving time of a combo (default 5m).")
    ] = None,
    startup_lag_gpu: Annotated[
        list[str], typer.Option("--startup-lag-gpu", help="GPU=DURATION per type (repeatable).")
    ] = [],  # noqa: B006 - typer copies list defaults
    cooldown: Annotated[
        str | None, typer.Option("--cooldown", help="Low demand needed before scaling in (default 30m).")
    ] = None,
    hysteresis: Annotated[
        str | None, typer.Option("--hysteresis", help="Scale in below (1 - this) x capacity: 10% or 0.1 (default 10%).")
    ] = None,
    max_changes: Annotated[
        int | None, typer.Option("--max-changes", help="Most combos added or removed per window (8).")
    ] = None,
    min_goodput: Annotated[
        float | None, typer.Option("--min-goodput", help="Minimum fleet capacity, req/s (default 0).")
    ] = None,
    out: Annotated[Path | None, out_option("Write the schedule: *.csv (one row per window) or *.json.")] = None,
    force: ForceFlag = False,
    emit_dir: Annotated[
        Path | None,
        emit_dir_option(
            "Write Kubernetes/vLLM/llm-d/Dynamo files with autoscaling "
            "bounds from the schedule (min and max copies per combo)."
        ),
    ] = None,
    validate: ValidateEmitFlag = False,
    router_image: RouterImageEmitOpt = None,
    json_out: Annotated[bool, json_option("Print the summary as JSON.")] = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Cheapest combo schedule for a load curve (e.g. 14 days of 10-minute windows), with start-up lag,
    hysteresis, cool-down and a bound on changes; costs against static peak- and mean-sized fleets.

    Example: hetplan autoscale examples/llama3-70b-azure-conv.yaml --load-curve examples/data/servegen_m_large_14d.csv
    """

    def work() -> tuple[dict[str, Any], float]:
        from hetplan.units import parse_share

        check_emit_flags(emit_dir, validate, router_image)
        overrides: dict[str, Any] = {}
        scenario = build_scenario(scenario_file, overrides)
        spec = scenario.autoscale.model_dump() if scenario.autoscale else {}
        if startup_lag is not None:
            spec["startup_lag"] = startup_lag
        if startup_lag_gpu:
            spec["startup_lag_by_gpu"] = _lags(startup_lag_gpu)
        if cooldown is not None:
            spec["cooldown"] = cooldown
        if hysteresis is not None:
            spec["hysteresis"] = parse_share(hysteresis, "--hysteresis", 0.0, 1.0, False, True, "10")
        if max_changes is not None:
            spec["max_changes_per_window"] = max_changes
        if min_goodput is not None:
            spec["min_goodput_req_per_s"] = min_goodput
        if window is not None:
            spec["window"] = window
        if load_curve is not None and diurnal is not None:
            raise InputError("--load-curve and --diurnal both given", fix="pass one of them")
        curve_path = load_curve
        if curve_path is None and diurnal is None and spec.get("load_curve"):  # flags override the scenario's curve
            curve_path = Path(scenario.resolve(spec["load_curve"]) or "")
        if curve_path is None and diurnal is None:
            raise InputError(
                "no load curve",
                "the scenario sets no autoscale.load_curve",
                "pass --load-curve FILE or --diurnal DAYS,PEAK,TROUGH",
            )
        if out is not None:
            check_output(out, force)
            if out.suffix.lower() not in (".csv", ".json"):
                raise InputError(f"--out {out}: write a .csv or .json file", fix="name the file schedule.csv or .json")
        load_planner()
        start = time.perf_counter()
        with progress_bar(err_console, "planning the schedule", 1, enabled=not json_out) as bar:
            bar.text("demand levels")
            doc = api.autoscale(scenario, spec, curve_path, diurnal, progress=bar.count, solve=solve_settings(),
                                 catalog=catalog_from_env())  # fmt: skip
        elapsed = time.perf_counter() - start
        if out is not None:
            text = schedule_csv(doc["windows"]) if out.suffix.lower() == ".csv" else to_json(doc)
            write_atomic(out, text, force=force)
        if emit_dir is not None:
            emitted.append(
                api.emit(
                    doc["deployment"], emit_dir, ("all",), emit_settings(router_image), validate=validate, force=force
                )
            )
        return doc, elapsed

    emitted: list[Any] = []
    doc, elapsed = run_guarded(lambda: run_with_timeout(timeout, work, "autoscale"))
    if json_out:
        typer.echo(to_json({k: v for k, v in doc.items() if k != "windows"}), nl=False)
    else:
        render_summary(doc, Console())
    err_console.print(
        f"planned {doc['summary']['windows']} windows in {elapsed:.2f} s"
        + (f"; wrote {escape(str(out))}" if out else "")
    )
    if emitted:
        err_console.print(render_result(emitted[0]), markup=False, highlight=False)
