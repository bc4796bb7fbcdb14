"""What ``hetplan autoscale`` prints and writes: the schedule's costs as a table, its windows as CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.format import fit_numbers, print_warnings
from hetplan.units import format_signed_percent


def schedule_csv(rows: list[dict[str, Any]]) -> str:
    """One CSV row per window (``--out schedule.csv``), the columns in the rows' key order."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def render_summary(doc: Mapping[str, Any], console: Console) -> None:
    """The schedule's costs and risks as a table."""
    from hetplan.cli.render.autoscale_view import ScheduleView

    view = ScheduleView.model_validate(doc)
    s = view.summary
    console.print(
        f"[bold]{escape(view.scenario)}[/]: load curve {escape(view.curve.source)}, "
        f"{s.windows} windows of {s.window_s:g} s ({s.hours:g} h)",
        highlight=False,
    )
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("fleet", "cost $", "vs peak fleet", "short windows"):
        t.add_column(col, justify="left" if col == "fleet" else "right")
    t.add_row(
        "autoscaled schedule",
        f"{s.schedule_usd:,.0f}",
        format_signed_percent(-s.saving_vs_static_peak) if s.saving_vs_static_peak is not None else "-",
        str(s.short_windows),
    )
    t.add_row("static, sized for the peak", f"{s.static_peak_usd:,.0f}", "+0.0 %", "0")
    if s.static_mean_usd is not None:
        t.add_row(
            "static, sized for the mean",
            f"{s.static_mean_usd:,.0f}",
            format_signed_percent(s.static_mean_usd / s.static_peak_usd - 1) if s.static_peak_usd else "-",
            str(s.static_mean_short_windows),
        )
    t.add_row("re-solved every window, no lag or hysteresis (bound)", f"{s.per_window_optimum_usd:,.0f}", "", "")
    console.print(fit_numbers(t, console))
    console.print(
        f"demand peak {s.peak_demand_req_per_s:.3g} req/s, mean {s.mean_demand_req_per_s:.3g} req/s "
        f"(burstiness-adjusted, headroom included); {s.levels} demand levels; start-up lag "
        f"{s.startup_lag_windows} window(s); {s.combo_changes} combo changes in "
        f"{s.windows_with_changes} windows; fleets: {s.nesting}",
        highlight=False,
    )
    if s.windows_with_capped_cv:
        console.print(
            f"note: {s.windows_with_capped_cv} windows have an inter-arrival CV above max_cv and were "
            "planned at the cap",
            highlight=False,
        )
    console.print("GPU-hours: " + ", ".join(f"{g} {h:,.0f}" for g, h in s.gpu_hours.items() if h), highlight=False)
    print_warnings(console, view.warnings)
