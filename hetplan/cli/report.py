"""``hetplan report`` (cost reports and the baseline gate) and ``hetplan gate`` (re-plan scenarios against a
stored baseline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from hetplan import api
from hetplan.catalog.loader import read_yaml_file
from hetplan.cli.main import app, err_console, run_guarded
from hetplan.errors import InputError
from hetplan.io import check_output, to_json, write_atomic
from hetplan.planfile import _Open, check_plan, load_plan
from hetplan.report.gate import GateResult, compare, github_annotations, markdown_summary, parse_fraction
from hetplan.report.model import build_report
from hetplan.report.render import render_html, render_json, render_markdown, render_terminal
from hetplan.scenario import load_scenario

FORMATS = ("term", "md", "html", "json")


def _format_for(fmt: str | None, out: Path | None) -> str:
    if fmt is None:
        suffix = out.suffix.lower() if out else ""
        fmt = {".md": "md", ".html": "html", ".htm": "html", ".json": "json"}.get(
            suffix, "term" if out is None else "md"
        )
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r} is not known", f"known: {', '.join(FORMATS)}", "pick one of them")
    return fmt


def _read_doc(path: Path, what: str) -> dict[str, Any]:
    return read_yaml_file(path, _Open, what, "a plan file written by 'hetplan plan --out'").model_dump()


def _load_baseline(path: Path) -> dict[str, Any]:
    """The baseline plan document (a report is refused: the gate compares plans)."""
    doc = _read_doc(path, "baseline")
    if doc.get("kind") == "report":
        raise InputError(f"{path} is a report, not a plan", fix="use a plan file: hetplan plan ... --json > base.json")
    check_plan(doc, str(path))
    return doc


def _append_summary(path: Path, text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as fh:  # GitHub's $GITHUB_STEP_SUMMARY is appended to, by design
            fh.write(text)
    except OSError as exc:
        raise InputError(f"cannot write the summary to {path}", str(exc), "check --summary") from None


@app.command()
def report(
    plans: list[Path] = typer.Argument(..., help="Plan files written by 'hetplan plan --out' (YAML or JSON)."),
    fmt: str = typer.Option(None, "--format", "-f", help="term, md, html or json [default: from --out, else term]."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the report to this file instead of stdout."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
    baseline: Path = typer.Option(None, "--baseline", help="Gate against this baseline plan (JSON or YAML)."),
    max_cost_increase: str = typer.Option("2%", "--max-cost-increase", help="Allowed $/hour rise against --baseline."),
    min_ratio: float = typer.Option(
        None, "--min-tokens-per-usd-ratio", help="Fail when tokens/USD falls below this multiple of the baseline's."
    ),
    github: bool = typer.Option(False, "--github", help="Print GitHub Actions annotations for the gate."),
    summary: Path = typer.Option(
        None, "--summary", help="Append a Markdown gate summary here (e.g. $GITHUB_STEP_SUMMARY)."
    ),
) -> None:
    """Cost report of one or more plans; with --baseline, a CI gate that exits 1 when cost rose too much.

    Example: hetplan report plan.json --baseline base.json --max-cost-increase 2%
    """

    def work() -> tuple[str, dict[str, Any], list[GateResult]]:
        kind = _format_for(fmt, out)
        if out is not None:
            check_output(out, force)
        docs = [(p.name, load_plan(p)) for p in plans]
        rep = build_report(docs)
        results: list[GateResult] = []
        if baseline is not None:
            allowed = parse_fraction(max_cost_increase, "--max-cost-increase")
            if min_ratio is not None and not 0 < min_ratio <= 10:
                raise InputError(f"--min-tokens-per-usd-ratio {min_ratio} is out of range", fix="use e.g. 0.98")
            base = _load_baseline(baseline)
            results = [
                compare(doc, base, allowed, min_ratio, name=f"{doc['scenario']['name']} ({src})") for src, doc in docs
            ]
            rep["gate"] = {
                "baseline": baseline.name,
                "max_cost_increase_fraction": allowed,
                "min_tokens_per_usd_ratio": min_ratio,
                "results": [r.as_dict() for r in results],
                "passed": all(r.passed for r in results),
            }
        return kind, rep, results

    kind, rep, results = run_guarded(work)
    gate_md = markdown_summary(results, rep["gate"]["max_cost_increase_fraction"]) if results else ""
    if kind == "json":
        text = render_json(rep)
    elif kind == "md":
        text = render_markdown(rep) + ("\n" + gate_md if gate_md else "")
    elif kind == "html":
        text = render_html(rep)
        if gate_md:
            text = text.replace("</body>", "<pre>" + gate_md.replace("<", "&lt;") + "</pre>\n</body>")
    else:
        text = ""
    if out is not None:
        run_guarded(lambda: write_atomic(out, text if kind != "term" else render_markdown(rep), force=force))
        err_console.print(f"wrote {out}")
    elif kind == "term":
        render_terminal(rep, Console())
    else:
        typer.echo(text, nl=False)
    if results:
        _print_gate(
            results, rep["gate"]["max_cost_increase_fraction"], github, summary, quiet=kind == "json" and not out
        )
        if not all(r.passed for r in results):
            raise typer.Exit(1)


def _print_gate(results: list[GateResult], allowed: float, github: bool, summary: Path | None, quiet: bool) -> None:
    if github:
        typer.echo(github_annotations(results), nl=False)
    if summary is not None:
        run_guarded(lambda: _append_summary(summary, markdown_summary(results, allowed)))
    if quiet:
        return
    for r in results:
        state = "[green]pass[/]" if r.passed else "[red]FAIL[/]"
        err_console.print(
            f"gate {state} {r.name}: ${r.baseline_usd_per_hour:,.2f}/h -> ${r.usd_per_hour:,.2f}/h "
            f"({r.cost_change * 100:+.2f} %, allowed +{allowed * 100:g} %), tokens/USD "
            f"{r.tokens_per_usd_ratio:.4f}x",
            highlight=False,
        )
        for line in r.failures:
            err_console.print(f"  [red]{line}[/]", highlight=False)
        for line in r.changes:
            err_console.print(f"  {line}", highlight=False, markup=False)


GATE_KIND = "gate-baseline"


@app.command()
def gate(
    scenarios: list[Path] = typer.Argument(..., help="Scenario files to re-plan with the current code and catalogs."),
    baseline: Path = typer.Option(..., "--baseline", help="Baseline file (JSON) holding one plan per scenario."),
    max_cost_increase: str = typer.Option("2%", "--max-cost-increase", help="Allowed $/hour rise per scenario."),
    min_ratio: float = typer.Option(None, "--min-tokens-per-usd-ratio", help="Minimum tokens/USD vs the baseline."),
    update: bool = typer.Option(False, "--update-baseline", help="Write the new plans as the baseline (on purpose)."),
    github: bool = typer.Option(False, "--github", help="Print GitHub Actions annotations."),
    summary: Path = typer.Option(None, "--summary", help="Append a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)."),
    json_out: bool = typer.Option(False, "--json", help="Print the gate results as JSON."),
) -> None:
    """Re-plan SCENARIOS and compare each with the stored baseline, so a change to models, prices, SLOs or
    hetplan itself that makes serving dearer fails CI. Exit 0 when all pass, 1 when any fails."""

    def work() -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None, float]:
        allowed = parse_fraction(max_cost_increase, "--max-cost-increase")
        fresh: dict[str, dict[str, Any]] = {}
        with err_console.status("re-planning scenarios", spinner="dots") as status:
            for path in scenarios:
                scenario = load_scenario(path)
                if scenario.name in fresh:
                    raise InputError(
                        f"two scenarios are named {scenario.name!r}", fix="give each scenario a unique name"
                    )
                status.update(f"planning {scenario.name}")
                fresh[scenario.name] = api.plan(scenario, analysis=False)
        stored = None
        if not update:
            stored = _read_gate_baseline(baseline)
        return fresh, stored, allowed

    fresh, stored, allowed = run_guarded(work)
    if update:
        doc = {"schema_version": 1, "kind": GATE_KIND, "scenarios": fresh}
        run_guarded(lambda: write_atomic(baseline, to_json(doc), force=True))
        err_console.print(f"wrote the baseline for {len(fresh)} scenario(s) to {baseline}")
        return
    assert stored is not None
    results = []
    for name, plan in fresh.items():
        if name not in stored["scenarios"]:
            err_console.print(f"[yellow]{name}: not in the baseline[/] (run with --update-baseline to add it)")
            continue
        results.append(compare(plan, stored["scenarios"][name], allowed, min_ratio, name=name))
    missing = [n for n in stored["scenarios"] if n not in fresh]
    if json_out:
        typer.echo(
            to_json(
                {
                    "passed": all(r.passed for r in results),
                    "results": [r.as_dict() for r in results],
                    "baseline_only": missing,
                }
            ),
            nl=False,
        )
    _print_gate(results, allowed, github, summary, quiet=json_out)
    if not all(r.passed for r in results):
        raise typer.Exit(1)


def _read_gate_baseline(path: Path) -> dict[str, Any]:
    if not os.path.exists(path):
        raise InputError(f"baseline {path} does not exist", fix="create it once with --update-baseline")
    doc = _read_doc(path, "gate baseline")
    if doc.get("kind") != GATE_KIND or not isinstance(doc.get("scenarios"), dict):
        raise InputError(
            f"{path} is not a gate baseline",
            f"kind is {doc.get('kind')!r}",
            "write one with hetplan gate SCENARIOS --baseline FILE --update-baseline",
        )
    for name, plan in doc["scenarios"].items():
        check_plan(plan, f"{path}: scenario {name}")
    return doc
