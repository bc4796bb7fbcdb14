"""``hetplan report`` (cost reports and the baseline gate) and ``hetplan gate`` (re-plan scenarios against a
stored baseline)."""

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from hetplan import api
from hetplan.cli.app import catalog_from_env, err_console, resources_from_env, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    ForceFlag,
    TimeoutOpt,
    baseline_option,
    github_option,
    json_option,
    max_cost_increase_option,
    max_cost_increase_usd_option,
    min_ratio_option,
    out_option,
    summary_option,
)
from hetplan.cli.render.stdout import StdoutConsole, to_stdout
from hetplan.cli.resources import solve_settings
from hetplan.errors import InputError, OutputError
from hetplan.io import check_output, to_json, write_atomic

if TYPE_CHECKING:
    from hetplan.report.gate import GateResult
    from hetplan.report.gate_types import GateRun
    from hetplan.report.types import Report

SCHEDULE_SCHEMA_VERSION = 1  # of hetplan autoscale --out schedule.json
BASELINE_SUFFIXES = (".json", ".yaml", ".yml")
USD_HELP = (
    "Allowed $/hour rise in dollars (default 0); the gate allows the larger of this and --max-cost-increase. "
    "The only allowance for a baseline at $0.00/h (all GPUs owned without a price)."
)


def _check_baseline_suffix(path: Path) -> None:
    if path.suffix.lower() not in BASELINE_SUFFIXES:
        raise InputError(
            f"cannot tell the format of the baseline {path}",
            "--update-baseline writes JSON for *.json and YAML for *.yaml or *.yml",
            "name the baseline *.json, *.yaml or *.yml",
        )


def _read_doc(path: Path, what: str) -> dict[str, Any]:
    from hetplan.catalog.loader import read_yaml_file
    from hetplan.plan.doc import PlanMapping

    return read_yaml_file(path, PlanMapping, what, "a plan file written by 'hetplan plan --out'").model_dump()


def _load_baseline(path: Path) -> dict[str, Any]:
    """The baseline plan document (a report is refused: the gate compares plans)."""
    from hetplan.plan.doc import check_plan

    doc = _read_doc(path, "baseline")
    if doc.get("kind") == "report":
        raise InputError(f"{path} is a report, not a plan", fix="use a plan file: hetplan plan ... --json > base.json")
    check_plan(doc, str(path))
    return doc


def _load_schedule(path: Path) -> dict[str, Any]:
    """A schedule written by ``hetplan autoscale --out schedule.json`` (checked for what the report reads)."""
    from hetplan.plan.doc import check_schema_version
    from hetplan.report.model import check_schedule

    doc = _read_doc(path, "schedule")
    check_schema_version(doc, str(path), "schedule", (SCHEDULE_SCHEMA_VERSION,))
    check_schedule(doc, str(path))
    return doc


def _check_summary_path(summary: Path | None) -> None:
    if summary is not None and not summary.parent.is_dir():
        raise InputError(f"--summary {summary}: folder {summary.parent} does not exist", fix="create it first")


def _append_summary(path: Path, text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as fh:  # GitHub's $GITHUB_STEP_SUMMARY is appended to, by design
            fh.write(text)
    except OSError as exc:
        raise OutputError(f"cannot write the summary to {path}", str(exc), "check --summary") from None


def report(
    plans: Annotated[list[Path], typer.Argument(help="Plan files written by 'hetplan plan --out' (YAML or JSON).")],
    fmt: Annotated[
        str | None,
        typer.Option("--format", "-f", help="term, md, html or json (default: from --out, else term)."),
    ] = None,
    out: Annotated[Path | None, out_option("Write the report to this file instead of stdout.")] = None,
    force: ForceFlag = False,
    baseline: Annotated[Path | None, baseline_option("Gate against this baseline plan (JSON or YAML).")] = None,
    max_cost_increase: Annotated[str | None, max_cost_increase_option("Allowed $/hour rise (default 2%).")] = None,
    max_usd: Annotated[float | None, max_cost_increase_usd_option(USD_HELP)] = None,
    min_ratio: Annotated[
        float | None, min_ratio_option("Fail when tokens/USD falls below this multiple of the baseline's.")
    ] = None,
    github: Annotated[bool, github_option("Print GitHub Actions annotations for the gate (stdout).")] = False,
    summary: Annotated[
        Path | None, summary_option("Append a Markdown gate summary here (e.g. $GITHUB_STEP_SUMMARY).")
    ] = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Cost report of one or more plans; with --baseline, a CI gate that exits 1 when cost rose too much.

    Example: hetplan report plan.json --baseline base.json --max-cost-increase 2%
    """

    from hetplan.plan.doc import load_plan
    from hetplan.report.gate import compare, markdown_summary, parse_fraction, parse_usd_per_hour
    from hetplan.report.model import build_report
    from hetplan.report.render.formats import format_for, render_text
    from hetplan.report.render.terminal import render_terminal
    from hetplan.report.types import GateSummary

    def work() -> tuple[str, "Report", list["GateResult"], float, float]:
        kind = format_for(fmt, out)
        gate_opts = (
            max_cost_increase is not None or max_usd is not None or min_ratio is not None or github
            or summary is not None
        )  # fmt: skip
        if baseline is None and gate_opts:
            raise InputError(
                "gate options need --baseline",
                "--max-cost-increase(-usd-per-hour), --min-tokens-per-usd-ratio, --github and --summary only apply "
                "to a gate",
                "add --baseline BASE.json",
            )
        if github and out is None and kind in ("md", "json", "html"):
            raise InputError(
                "--github prints annotations on stdout, where this report goes too",
                fix="write the report with --out FILE",
            )
        allowed = parse_fraction(max_cost_increase or "2%", "--max-cost-increase")
        allowed_usd = parse_usd_per_hour(max_usd, "--max-cost-increase-usd-per-hour")
        _check_ratio(min_ratio)
        _check_summary_path(summary)
        if out is not None:
            check_output(out, force)
        docs, schedules = [], []
        for p in plans:
            kind_of = _read_doc(p, "report input").get("kind")
            if kind_of == "autoscale-schedule":
                schedules.append((p.name, _load_schedule(p)))
            else:
                docs.append((p.name, load_plan(p, catalog_from_env())))
        if baseline is not None and schedules:
            raise InputError("--baseline gates plans, not schedules", fix="pass plan files with --baseline")
        rep = build_report(docs, schedules)
        results: list[GateResult] = []
        if baseline is not None:
            base = _load_baseline(baseline)
            for src, typed in docs:
                if typed.name != base["scenario"]["name"]:
                    raise InputError(
                        f"{src} plans scenario {typed.name!r}, the baseline {base['scenario']['name']!r}",
                        "the gate compares a scenario with its own earlier plan",
                        "pass the baseline of the same scenario",
                    )
                results.append(
                    compare(
                        typed,
                        base,
                        allowed,
                        min_ratio,
                        name=f"{typed.name} ({src})",
                        max_cost_increase_usd_per_hour=allowed_usd,
                    )  # fmt: skip
                )
            passed = all(r.passed for r in results)
            rep = replace(rep, gate=GateSummary(baseline.name, allowed, allowed_usd, min_ratio, tuple(results), passed))
        return kind, rep, results, allowed, allowed_usd

    kind, rep, results, allowed, allowed_usd = run_guarded(lambda: run_with_timeout(timeout, work, "report"))
    gate_md = markdown_summary(results, allowed, None, allowed_usd) if results else ""
    text = render_text(rep, kind, gate_md)
    if out is not None:
        run_guarded(lambda: write_atomic(out, text, force=force))
        err_console.print(f"wrote {escape(str(out))}")
    elif kind == "term":
        to_stdout(lambda: render_terminal(rep, StdoutConsole()))
    else:
        to_stdout(lambda: typer.echo(text, nl=False))
    if results:
        _finish_gate(results, allowed, github, summary, [], allowed_usd=allowed_usd)


def _check_ratio(min_ratio: float | None) -> None:
    if min_ratio is not None and not (math.isfinite(min_ratio) and 0 < min_ratio <= 10):
        raise InputError(f"--min-tokens-per-usd-ratio {min_ratio} is out of range", fix="use e.g. 0.98")


def _finish_gate(
    results: list["GateResult"],
    allowed: float,
    github: bool,
    summary: Path | None,
    warnings: list[str],
    quiet: bool = False,
    allowed_usd: float = 0.0,
) -> None:
    from hetplan.report.gate import github_annotations, markdown_summary

    if github:
        to_stdout(lambda: typer.echo(github_annotations(results, warnings), nl=False))
    if summary is not None:
        run_guarded(lambda: _append_summary(summary, markdown_summary(results, allowed, warnings, allowed_usd)))
    if not quiet:
        _print_gate(results, allowed, warnings, allowed_usd)
    if not results or not all(r.passed for r in results):
        raise typer.Exit(1)


def _print_gate(results: list["GateResult"], allowed: float, warnings: list[str], allowed_usd: float = 0.0) -> None:
    from hetplan.report.gate import allowance_text

    for w in warnings:
        err_console.print(f"[yellow]warning:[/] {escape(w)}")
    if not results:
        err_console.print("gate [red]FAIL[/]: nothing was compared")
    for r in results:
        state = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
        if math.isnan(r.usd_per_hour):
            err_console.print(f"gate {state} {escape(r.name)}")
        else:
            err_console.print(
                f"gate {state} {escape(r.name)}: ${r.baseline_usd_per_hour:,.2f}/h -> ${r.usd_per_hour:,.2f}/h "
                f"({r.change_text()}, allowed {allowance_text(allowed, allowed_usd)}), tokens/USD {r.ratio_text()}",
                highlight=False,
            )
        for line in r.failures:
            err_console.print(f"  [red]{escape(line)}[/]", highlight=False)
        for line in r.changes:
            err_console.print(f"  {line}", highlight=False, markup=False)


def gate(
    scenarios: Annotated[
        list[Path], typer.Argument(help="Scenario files to re-plan with the current code and catalogs.")
    ],
    baseline: Annotated[Path, baseline_option("Baseline file (.json, .yaml or .yml) holding one plan per scenario.")],
    max_cost_increase: Annotated[str, max_cost_increase_option("Allowed $/hour rise per scenario.")] = "2%",
    max_usd: Annotated[float | None, max_cost_increase_usd_option(USD_HELP)] = None,
    min_ratio: Annotated[float | None, min_ratio_option("Minimum tokens/USD vs the baseline.")] = None,
    update: Annotated[
        bool,
        typer.Option("--update-baseline", help="Add or refresh these scenarios' plans in the baseline (on purpose)."),
    ] = False,
    github: Annotated[bool, github_option("Print GitHub Actions annotations (stdout).")] = False,
    summary: Annotated[
        Path | None, summary_option("Append a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY).")
    ] = None,
    json_out: Annotated[bool, json_option("Print the gate results as JSON.")] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Verify each re-planned scenario in the simulator (re-sizing on a miss), as hetplan plan does; "
            "a scenario whose baseline plan was verified fails when the fresh one is not (default: on).",
        ),
    ] = True,
    timeout: TimeoutOpt = None,
) -> None:
    """Re-plan SCENARIOS and compare each with the stored baseline, so a change to models, prices, SLOs or
    hetplan itself that makes serving dearer fails CI. Exit 0 when all pass, 1 when any fails or was not compared."""
    from hetplan.report.gate import parse_fraction, parse_usd_per_hour

    def work() -> tuple["GateRun | None", int, int, float, float]:
        allowed = parse_fraction(max_cost_increase, "--max-cost-increase")
        allowed_usd = parse_usd_per_hour(max_usd, "--max-cost-increase-usd-per-hour")
        _check_ratio(min_ratio)
        _check_summary_path(summary)
        if json_out and github:
            raise InputError("--json and --github both print on stdout", fix="drop one of them")
        if update and (json_out or github or summary is not None):
            raise InputError(
                "--update-baseline writes the baseline; it does not gate",
                fix="drop --json, --github and --summary when updating",
            )
        if update:
            _check_baseline_suffix(baseline)
        stored = None if update else api.read_gate_baseline(baseline)
        resources = resources_from_env()
        solve = solve_settings()  # HETPLAN_SOLVE_THREADS, HETPLAN_SLICE_PRESOLVE
        catalog = catalog_from_env()  # HETPLAN_CATALOG_DIR
        with err_console.status("re-planning scenarios", spinner="dots") as status:

            def progress(name: str) -> None:
                status.update(f"planning {escape(name)}")

            if stored is None:
                kept = api.update_gate_baseline(scenarios, baseline, verify, resources, solve, progress, catalog)
                return None, len(scenarios), len(kept.scenarios), allowed, allowed_usd
            run = api.gate(scenarios, stored, allowed, min_ratio, allowed_usd, verify, resources, solve, progress,
                       catalog)  # fmt: skip
        return run, 0, 0, allowed, allowed_usd

    run, planned, total, allowed, allowed_usd = run_guarded(lambda: run_with_timeout(timeout, work, "gate"))
    if run is None:
        err_console.print(f"updated {planned} scenario(s) in {escape(str(baseline))} ({total} in all)")
        return
    if json_out:
        to_stdout(lambda: typer.echo(to_json(run.to_doc()), nl=False))
    _finish_gate(list(run.results), allowed, github, summary, list(run.warnings), quiet=json_out,
                 allowed_usd=allowed_usd)  # fmt: skip
