"""What ``hetplan explore`` prints: the cost curve, one block per point (values, $/h, $/month, check, attainment)
with its deployment on the next line, wrapped, never cut."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # hetplan.explore loads pydantic and the workload code when the command runs
    from hetplan.explore import ExploreDoc


def _money(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def explore_lines(doc: ExploreDoc | Mapping[str, Any], width: int) -> list[str]:
    """The curve as plain text lines no wider than ``width`` (at least 60): a header, the check rule, a column
    header, then per point a line of figures and its deployment (or the reason it has none), indented."""
    from hetplan.explore import ExploreDoc

    d = doc if isinstance(doc, ExploreDoc) else ExploreDoc.model_validate(doc)
    width = max(60, width)
    axes = ", ".join(f"{a.axis} = {', '.join(a.values)}" for a in d.axes)
    c = d.counts
    out = textwrap.wrap(
        f"explore {d.scenario}: {axes}; {len(d.points)} points ({c.ok} planned, {c.infeasible} "
        f"infeasible, {c.error} failed); strategy {d.strategy}; goodput target 1x = "
        f"{d.base_goodput_target_req_per_s:g} req/s",
        width,
    )
    out += textwrap.wrap(f"check: {d.check}", width, subsequent_indent="  ", break_on_hyphens=False)
    rows = d.points
    usd = [_money(r.usd_per_hour) for r in rows]
    month = [_money(r.usd_per_month, 0) for r in rows]
    wd = max([len("$/h"), 8, *map(len, usd)])
    wm = max([len("$/month"), 10, *map(len, month)])
    fig_w = wd + wm + 12 + 6 + 6
    # the point's label beside its figures when both fit the width, else on lines of its own above them
    longest = max([len("point"), *(len(r.point) for r in rows)])
    col = min(longest, width - fig_w - 2)
    beside = col == longest or col >= 16
    col = col if beside else 0
    out.append("")
    head = f"{'$/h':>{wd}}  {'$/month':>{wm}}  {'check':<12}  {'joint':>6}"
    out += [f"{'point':<{col}}  {head}".rstrip()] if beside else ["point", head.rstrip()]
    for r, h, m in zip(rows, usd, month, strict=True):
        joint = f"{100 * r.attainment:.1f}%" if r.attainment is not None else "-"
        check = r.check if r.status == "ok" else r.status
        figures = f"{h:>{wd}}  {m:>{wm}}  {check:<12}  {joint:>6}"
        label = textwrap.wrap(r.point, col if beside else width, subsequent_indent="  ") or [""]
        if beside:
            out.append(f"{label[0]:<{col}}  {figures}".rstrip())
            out += label[1:]
        else:
            out += label
            out.append(figures.rstrip())
        detail = r.deployment if r.status == "ok" else r.error
        if r.status == "ok" and r.strategy:
            detail = f"{r.strategy}: {detail}"
        if r.check == "check failed" and r.error:
            detail = f"{detail}; check failed: {r.error}"
        out += textwrap.wrap(detail or "", width, initial_indent="    ", subsequent_indent="      ",
                             break_on_hyphens=False)  # fmt: skip
    out.append("")
    held = d.cheapest_held
    out += textwrap.wrap(f"cheapest: {d.cheapest or '-'}" + (f"; cheapest that held: {held}" if held else ""),
                         width, subsequent_indent="  ")  # fmt: skip
    return out


def render_explore(doc: ExploreDoc | Mapping[str, Any], console: Console) -> None:
    """Print :func:`explore_lines` at the console's width."""
    for line in explore_lines(doc, console.width):
        console.print(escape(line), highlight=False, soft_wrap=True)
