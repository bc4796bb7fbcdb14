"""``hetplan autoscale``: plan a schedule of combos over a load curve, price it against static fleets."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan import api
from hetplan.cli.main import app, err_console, run_guarded
from hetplan.cli.plan import _emit_settings, build_scenario
from hetplan.errors import InputError
from hetplan.io import check_output, to_json, write_atomic
from hetplan.units import format_signed_percent


def _to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


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


@app.command()
def autoscale(
    scenario_file: Path = typer.Argument(..., help="Scenario YAML: model, lengths, SLOs, GPUs, prices, inventory."),
    load_curve: Path = typer.Option(None, "--load-curve", help="ServeGen per-window CSV, or an Azure/Mooncake trace."),
    window: str = typer.Option(None, "--window", help="Window for binning a trace, e.g. 10m (ServeGen: its own)."),
    diurnal: str = typer.Option(
        None, "--diurnal", help="Instead of a file: DAYS,PEAK,TROUGH (req/s), e.g. 7,12,2 (peak at 14:00)."
    ),
    startup_lag: str = typer.Option(None, "--startup-lag", help="Request-to-serving time of a combo (default 5m)."),
    startup_lag_gpu: list[str] = typer.Option([], "--startup-lag-gpu", help="GPU=DURATION per type (repeatable)."),
    cooldown: str = typer.Option(None, "--cooldown", help="Low demand needed before scaling in (default 30m)."),
    hysteresis: str = typer.Option(None, "--hysteresis", help="Scale in below (1 - this) x capacity (default 10%)."),
    max_changes: int = typer.Option(None, "--max-changes", help="Most combos added or removed per window (8)."),
    min_goodput: float = typer.Option(None, "--min-goodput", help="Minimum fleet capacity, req/s (default 0)."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the schedule: *.csv (one row per window) or *.json."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
    emit_dir: Path = typer.Option(
        None,
        "--emit",
        help="Write Kubernetes/vLLM/llm-d/Dynamo files with autoscaling "
        "bounds from the schedule (min and max copies per combo).",
    ),
    validate: bool = typer.Option(False, "--validate", help="With --emit: check the manifests offline first."),
    router_image: str = typer.Option(
        None, "--router-image", help="With --emit: image with vllm-router (as 'hetplan emit --router-image')."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Cheapest combo schedule for a load curve (e.g. 14 days of 10-minute windows), with start-up lag,
    hysteresis, cool-down and a bound on changes; costs against static peak- and mean-sized fleets.

    Example: hetplan autoscale examples/llama3-70b-azure-conv.yaml --load-curve examples/data/servegen_m_large_14d.csv
    """

    def work() -> tuple[dict[str, Any], float]:
        from hetplan.report.gate import parse_fraction

        if validate and emit_dir is None:
            raise InputError("--validate checks emitted files", fix="add --emit DIR")
        if router_image is not None and emit_dir is None:
            raise InputError("--router-image is for emitted files", fix="add --emit DIR")
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
            spec["hysteresis"] = parse_fraction(hysteresis, "--hysteresis")
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
        start = time.perf_counter()
        with err_console.status("planning the schedule", spinner="dots"):
            doc = api.autoscale(scenario, spec, curve_path, diurnal)
        elapsed = time.perf_counter() - start
        if out is not None:
            text = _to_csv(doc["windows"]) if out.suffix.lower() == ".csv" else to_json(doc)
            write_atomic(out, text, force=force)
        if emit_dir is not None:
            emitted.append(
                api.emit(
                    doc["deployment"], emit_dir, ("all",), _emit_settings(router_image), validate=validate, force=force
                )
            )
        return doc, elapsed

    emitted: list[Any] = []
    doc, elapsed = run_guarded(work)
    if json_out:
        typer.echo(to_json({k: v for k, v in doc.items() if k != "windows"}), nl=False)
    else:
        render_summary(doc, Console())
    err_console.print(
        f"planned {doc['summary']['windows']} windows in {elapsed:.2f} s"
        + (f"; wrote {escape(str(out))}" if out else "")
    )
    if emitted:
        from hetplan.cli.emit import render_result

        err_console.print(render_result(emitted[0]), markup=False, highlight=False)


def render_summary(doc: dict[str, Any], console: Console) -> None:
    """The schedule's costs and risks as a table."""
    s = doc["summary"]
    console.print(
        f"[bold]{escape(doc['scenario'])}[/]: load curve {escape(doc['curve']['source'])}, "
        f"{s['windows']} windows of {s['window_s']:g} s ({s['hours']:g} h)",
        highlight=False,
    )
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("fleet", "cost $", "vs peak fleet", "short windows"):
        t.add_column(col, justify="left" if col == "fleet" else "right")
    t.add_row(
        "autoscaled schedule",
        f"{s['schedule_usd']:,.0f}",
        format_signed_percent(-s["saving_vs_static_peak"]) if s["saving_vs_static_peak"] is not None else "-",
        str(s["short_windows"]),
    )
    t.add_row("static, sized for the peak", f"{s['static_peak_usd']:,.0f}", "+0.0 %", "0")
    if s["static_mean_usd"] is not None:
        t.add_row(
            "static, sized for the mean",
            f"{s['static_mean_usd']:,.0f}",
            format_signed_percent(s["static_mean_usd"] / s["static_peak_usd"] - 1),
            str(s["static_mean_short_windows"]),
        )
    t.add_row("re-solved every window, no lag or hysteresis (bound)", f"{s['per_window_optimum_usd']:,.0f}", "", "")
    console.print(t)
    console.print(
        f"demand peak {s['peak_demand_req_per_s']:.3g} req/s, mean {s['mean_demand_req_per_s']:.3g} req/s "
        f"(burstiness-adjusted, headroom included); {s['levels']} demand levels; start-up lag "
        f"{s['startup_lag_windows']} window(s); {s['combo_changes']} combo changes in "
        f"{s['windows_with_changes']} windows; fleets: {s['nesting']}",
        highlight=False,
    )
    if s["windows_with_capped_cv"]:
        console.print(
            f"note: {s['windows_with_capped_cv']} windows have an inter-arrival CV above max_cv and were "
            "planned at the cap",
            highlight=False,
        )
    console.print("GPU-hours: " + ", ".join(f"{g} {h:,.0f}" for g, h in s["gpu_hours"].items() if h), highlight=False)
    for w in doc.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
