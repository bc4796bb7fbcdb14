"""The report as rich tables on a terminal.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.report.render.common import (
    deployment_rows,
    headline,
    plan_notes,
    schedule_rows,
    schedule_text,
    sensitivity_rows,
    strategy_rows,
    verification_lines,
    verification_rows,
)


def _kv_table(title: str, rows: list[list[str]]) -> Table:
    """A titled two-column table whose values wrap (the arrivals sentence is long)."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, show_header=False)
    table.add_column("", justify="left", no_wrap=True)
    table.add_column("", justify="left")
    for k, v in rows:
        table.add_row(escape(k), escape(v))
    return table


def render_terminal(report: dict[str, Any], console: Console) -> None:
    """Rich tables on ``console``."""
    for p in report["plans"]:
        console.print(
            f"[bold]{escape(p['name'])}[/]: {escape(p['model'])} ({p['weight_dtype']}, {p.get('engine', 'vllm')}), "
            f"{p['strategy']} plan "
            f"[dim]({escape(p['source'])})[/]",
            highlight=False,
        )
        verdict = (p.get("verification") or {}).get("verdict")
        if verdict:  # the first block: a line of its own (a table cell would cut it)
            console.print(str(verdict), highlight=False, markup=False)
        for title, (head, rows) in (
            ("", (["", ""], [[k, v] for k, v in headline(p) if k != "simulated verdict"])),
            ("Deployment", deployment_rows(p)),
            ("Simulated check", (["", ""], verification_rows(p["verification"]) if "verification" in p else [])),
            ("Strategies compared", strategy_rows(p)),
            ("Price sensitivity (each GPU type ±20 %)", sensitivity_rows(p)),
        ):
            if not rows:
                continue
            if title == "Simulated check":
                console.print(_kv_table(title, rows))
                for line in verification_lines(p["verification"]):
                    console.print(line, highlight=False, markup=False)
                continue
            keep = [i for i, h in enumerate(head) if h != "GPUs" or console.width >= 110]
            table = Table(title=title or None, box=box.SIMPLE_HEAD, pad_edge=False, show_header=bool(title))
            for i in keep:
                table.add_column(head[i], justify="left" if i == 0 or head[i] == "GPUs" else "right", no_wrap=True)
            for row in rows:
                cells = [row[0].replace(" -> ", "\n-> ")] + row[1:]
                table.add_row(*[escape(cells[i]) for i in keep])
            console.print(table)
        for line in plan_notes(p):
            console.print(line, highlight=False, markup=False)
        for w in p["warnings"]:
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    for s in report.get("schedules", []):
        console.print(f"[bold]{escape(s['scenario'])}[/]: autoscaling schedule over {escape(s['curve']['source'])}")
        head, rows = schedule_rows(s)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(head):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*[escape(c) for c in row])
        console.print(table)
        console.print(schedule_text(s), highlight=False, markup=False)
        for w in s.get("warnings", []):
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
