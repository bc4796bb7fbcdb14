"""The report as rich tables on a terminal.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.report.render.common import (
    decision_rows,
    deployment_rows,
    headline,
    plan_notes,
    plan_title,
    schedule_rows,
    schedule_text,
    sensitivity_rows,
    strategy_rows,
    verification_lines,
    verification_rows,
)
from hetplan.report.types import Report
from hetplan.tables import fit_numbers


def _kv_table(title: str, rows: list[list[str]]) -> Table:
    """A titled two-column table whose values wrap (the arrivals sentence is long)."""
    table = Table(title=title or None, box=box.SIMPLE_HEAD, pad_edge=False, show_header=False)
    table.add_column("", justify="left", no_wrap=True)
    table.add_column("", justify="left")
    for k, v in rows:
        table.add_row(escape(k), escape(v))
    return table


#: Columns of text (wrapped on a narrow terminal); the others hold numbers and keep one line.
WRAPPED_COLUMNS = ("GPUs", "SLO", "best alternative", "GPU price", "fleet")


def render_terminal(report: Report, console: Console) -> None:
    """Rich tables on ``console``."""
    for p in report.plans:
        title = plan_title(p)
        console.print(
            f"[bold]{escape(title)}[/]" + ("" if p.source in title else f" [dim]({escape(p.source)})[/]"),
            highlight=False,
        )
        # the first block: the recommendation, then the verdict and what each GPU type does
        console.print(f"[bold]{escape(p.decision.sentence)}[/]", highlight=False)
        console.print(fit_numbers(_kv_table("", [[k, v] for k, v in decision_rows(p)]), console))
        v = p.verification
        for title, (head, rows) in (
            ("", (["", ""], [[k, v] for k, v in headline(p) if k != "simulated verdict"])),
            ("Deployment", deployment_rows(p)),
            ("Simulated check", (["", ""], verification_rows(v) if v is not None else [])),
            ("Strategies compared", strategy_rows(p)),
            ("Price sensitivity (each GPU type ±20 %)", sensitivity_rows(p)),
        ):
            if not rows:
                continue
            if title == "Simulated check" and v is not None:
                console.print(fit_numbers(_kv_table(title, rows), console))
                for line in verification_lines(v):
                    console.print(line, highlight=False, markup=False)
                continue
            # every column is kept at any width: text columns wrap, numbers do not (never a silently lost column)
            table = Table(title=title or None, box=box.SIMPLE_HEAD, pad_edge=False, show_header=bool(title))
            for i, h in enumerate(head):
                text_column = i == 0 or h in WRAPPED_COLUMNS
                table.add_column(h, justify="left" if text_column else "right", no_wrap=not text_column,
                                 overflow="fold")  # fmt: skip
            for row in rows:
                cells = [row[0].replace(" -> ", "\n-> ")] + row[1:]
                table.add_row(*[escape(c) for c in cells])
            console.print(fit_numbers(table, console))
        for line in plan_notes(p):
            console.print(line, highlight=False, markup=False)
        for w in p.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    for s in report.schedules or ():
        console.print(f"[bold]{escape(s.scenario)}[/]: autoscaling schedule over {escape(s.curve_source)}")
        head, rows = schedule_rows(s)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(head):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*[escape(c) for c in row])
        console.print(fit_numbers(table, console))
        console.print(schedule_text(s), highlight=False, markup=False)
        for w in s.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
