"""What ``hetplan sweep`` prints: the cheapest plan per group and a one-line summary of the run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.format import fit_numbers

if TYPE_CHECKING:
    from hetplan.sweep.outputs import SweepSummary


def _usd(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def render_sweep(summary: SweepSummary, console: Console) -> None:
    """The cheapest plan per group (a table) and the counts, for a sweep's summary."""
    c, v = summary.counts, summary.verdicts
    console.print(
        f"[bold]sweep {escape(summary.grid)}[/]: {summary.finished} of {summary.cases} cases "
        f"({summary.resumed} reused from plan files); {c.ok} planned, {c.infeasible} infeasible, "
        f"{c.error} failed; simulated checks: {v.held} held, {v.missed} missed, "
        f"{v.check_failed} failed, {v.not_run} not run",
        highlight=False,
    )
    groups = summary.groups
    axes = list(groups[0].group) if groups else []
    checked = any(g.cheapest is not None and g.cheapest.verdict != "not run" for g in groups)
    table = Table(box=box.SIMPLE_HEAD, title="Cheapest plan per group", title_justify="left")
    table.add_column(escape(" / ".join(axes) or "group"))
    for name in ("cheapest", "$/h", "tok/USD", "purchases") + (("check", "cheapest held") if checked else ()):
        table.add_column(name, justify="right" if name in ("$/h", "tok/USD") else "left")
    for g in groups:
        s, h = g.cheapest, g.cheapest_held
        cells = [
            escape(" / ".join(g.group.values()) or "all cases"),
            s.case_id if s else "-",
            _usd(s.usd_per_hour) if s else "-",
            f"{s.tokens_per_usd:,.0f}" if s and s.tokens_per_usd is not None else "-",
            escape(s.purchases or "-") if s else "-",
        ]
        if checked:
            cells += [s.verdict if s else "-", f"{h.case_id} (${_usd(h.usd_per_hour)}/h)" if h else "-"]
        table.add_row(*cells)
    console.print(fit_numbers(table, console))


def render_failures(summary: SweepSummary, console: Console, limit: int = 10) -> None:
    """One line per failed case (at most ``limit``), for stderr."""
    failed = summary.failed
    for f in failed[:limit]:
        console.print(f"[red]{f.status}[/]: {f.case_id} ({escape(f.axes)}): {escape(f.error)}",
                      highlight=False)  # fmt: skip
    if len(failed) > limit:
        console.print(f"... and {len(failed) - limit} more (see results.csv)", highlight=False)


__all__ = ["render_failures", "render_sweep"]
