"""What ``hetplan explore`` prints: the cost curve, one block per point (values, $/h, $/month, check, attainment)
with its deployment on the next line, wrapped, never cut."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.console import Console
from rich.markup import escape


def _money(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def explore_lines(doc: dict[str, Any], width: int) -> list[str]:
    """The curve as plain text lines no wider than ``width`` (at least 60): a header, the check rule, a column
    header, then per point a line of figures and its deployment (or the reason it has none), indented."""
    width = max(60, width)
    axes = ", ".join(f"{a['axis']} = {', '.join(a['values'])}" for a in doc["axes"])
    c = doc["counts"]
    out = textwrap.wrap(
        f"explore {doc['scenario']}: {axes}; {len(doc['points'])} points ({c['ok']} planned, {c['infeasible']} "
        f"infeasible, {c['error']} failed); strategy {doc['strategy']}; goodput target 1x = "
        f"{doc['base_goodput_target_req_per_s']:g} req/s",
        width,
    )
    out += textwrap.wrap(f"check: {doc['check']}", width, subsequent_indent="  ", break_on_hyphens=False)
    rows = doc["points"]
    usd = [_money(r.get("usd_per_hour")) for r in rows]
    month = [_money(r.get("usd_per_month"), 0) for r in rows]
    wd = max([len("$/h"), 8, *map(len, usd)])
    wm = max([len("$/month"), 10, *map(len, month)])
    fig_w = wd + wm + 12 + 6 + 6
    # the point's label beside its figures when both fit the width, else on lines of its own above them
    longest = max([len("point"), *(len(r["point"]) for r in rows)])
    col = min(longest, width - fig_w - 2)
    beside = col == longest or col >= 16
    col = col if beside else 0
    out.append("")
    head = f"{'$/h':>{wd}}  {'$/month':>{wm}}  {'check':<12}  {'joint':>6}"
    out += [f"{'point':<{col}}  {head}".rstrip()] if beside else ["point", head.rstrip()]
    for r, h, m in zip(rows, usd, month, strict=True):
        joint = f"{100 * r['attainment']:.1f}%" if r.get("attainment") is not None else "-"
        check = r["check"] if r["status"] == "ok" else r["status"]
        figures = f"{h:>{wd}}  {m:>{wm}}  {check:<12}  {joint:>6}"
        label = textwrap.wrap(r["point"], col if beside else width, subsequent_indent="  ") or [""]
        if beside:
            out.append(f"{label[0]:<{col}}  {figures}".rstrip())
            out += label[1:]
        else:
            out += label
            out.append(figures.rstrip())
        detail = r.get("deployment") if r["status"] == "ok" else r.get("error")
        if r["status"] == "ok" and r.get("strategy"):
            detail = f"{r['strategy']}: {detail}"
        if r.get("check") == "check failed" and r.get("error"):
            detail = f"{detail}; check failed: {r['error']}"
        out += textwrap.wrap(detail or "", width, initial_indent="    ", subsequent_indent="      ",
                             break_on_hyphens=False)  # fmt: skip
    out.append("")
    held = doc["cheapest_held"]
    out += textwrap.wrap(f"cheapest: {doc['cheapest'] or '-'}" + (f"; cheapest that held: {held}" if held else ""),
                         width, subsequent_indent="  ")  # fmt: skip
    return out


def render_explore(doc: dict[str, Any], console: Console) -> None:
    """Print :func:`explore_lines` at the console's width."""
    for line in explore_lines(doc, console.width):
        console.print(escape(line), highlight=False, soft_wrap=True)
