"""``hetplan sweep``: plan (and simulate) every case of a grid of what-ifs, on a process pool or on Ray."""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from hetplan import api
from hetplan.cli.app import catalog_from_env, err_console, run_guarded, worker_environment
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    ExecutorOpt,
    RayAddressOpt,
    TimeoutOpt,
    WorkersOpt,
    force_option,
    json_option,
    out_option,
)
from hetplan.cli.render.sweep import render_failures, render_sweep
from hetplan.cli.resources import solve_settings
from hetplan.io import to_json


def sweep(
    grid_file: Annotated[Path, typer.Argument(help="Sweep grid YAML (docs/sweep.md).", show_default=False)],
    out: Annotated[
        Path | None, out_option("Output folder: table, report, plan files (default: sweep-<grid name>).")
    ] = None,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = None,
    ray_address: RayAddressOpt = None,
    ray_files: Annotated[
        str,
        typer.Option(
            "--ray-files",
            help="With --executor ray: ship (file contents through Ray's object store) or shared (paths, for a "
            "folder every node mounts).",
        ),
    ] = "ship",
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Reuse plan files in --out made for the same inputs; run only the rest."),
    ] = False,
    force: Annotated[bool, force_option("Replace the table, report and plan files in --out.")] = False,
    json_out: Annotated[bool, json_option("Print the summary as JSON on stdout.")] = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Plan every case of a grid (and simulate it when it has a trace); one table row per case, a report with the
    cheapest plan per group and the Pareto front of cost against goodput and SLO.

    Example: hetplan sweep examples/sweeps/fleet-review.yaml --out results/ --executor ray
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hetplan.sweep.outputs import SweepSummary
    from hetplan.sweep.table import SweepRow

    tally = _Tally()
    bar = Progress(
        TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), console=err_console, transient=True, disable=json_out or not err_console.is_terminal,
    )  # fmt: skip
    task = bar.add_task("", total=None)

    def step(done: int, total: int, row: dict[str, Any] | None) -> None:
        if not bar.live.is_started:  # the grid is expanded and checked: the bar starts with the work
            bar.start()
        if row is not None:  # the API hands the row over as column -> value
            tally.add(SweepRow.model_validate(row).status)
        text = f"{tally.ok} planned, {tally.infeasible} infeasible, {tally.error} failed"
        bar.update(task, completed=done, total=total, description=text)

    def work() -> dict[str, Any]:
        try:
            with worker_environment(executor, ray_address):
                return api.sweep(grid_file, out, executor, workers, ray_address, ray_files, resume, force,
                                 progress=step, solve=solve_settings(), catalog=catalog_from_env())  # fmt: skip
        finally:
            if bar.live.is_started:
                bar.stop()

    doc = run_guarded(lambda: run_with_timeout(timeout, work, "sweep"))
    if json_out:
        typer.echo(to_json(doc), nl=False)
    summary = SweepSummary.model_validate(doc)  # the API returns the summary.json document
    if not json_out:
        render_sweep(summary, Console())
    render_failures(summary, err_console)
    for note in summary.notes:
        err_console.print(f"note: {escape(note)}", highlight=False)
    rate = "" if summary.cases_per_s is None else f", {summary.cases_per_s:.3g} cases/s"
    ran = f"{summary.ran} case" + ("" if summary.ran == 1 else "s")
    plans = f"{summary.plans} plan file" + ("" if summary.plans == 1 else "s")
    err_console.print(
        f"ran {ran} in {summary.elapsed_s:.1f} s on {escape(summary.executor)}{rate}; "
        f"wrote {escape(summary.out)}/ ({', '.join(summary.files)}, plans/: {plans})",
        highlight=False,
    )
    if summary.counts.error:
        raise typer.Exit(1)


@dataclass
class _Tally:
    """Finished cases per status, for the progress bar."""

    ok: int = 0
    infeasible: int = 0
    error: int = 0

    def add(self, status: str) -> None:
        """Count one case of ``status`` (ok, infeasible or error)."""
        if status == "ok":
            self.ok += 1
        elif status == "infeasible":
            self.infeasible += 1
        elif status == "error":
            self.error += 1
