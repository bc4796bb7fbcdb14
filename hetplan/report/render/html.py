"""The report as one self-contained HTML file: inline CSS and matplotlib SVG charts (:mod:`hetplan.report.charts`),
no scripts, no external resources.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import html
import re

from hetplan.report import charts
from hetplan.report.render.common import (
    MISSED_CELLS,
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
from hetplan.report.types import PlanSection, Report

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1a202c}
h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2.5rem;border-bottom:1px solid #e2e8f0}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #e2e8f0;padding:.3rem .6rem;text-align:right}
th{background:#f7fafc}td:first-child,th:first-child{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:1rem}
.chart{border:1px solid #e2e8f0;padding:.5rem}.warn{color:#975a16}.missed{color:#c53030;font-weight:bold}
footer{color:#718096;font-size:.85rem;margin-top:2rem}
.decision{border:2px solid #2b6cb0;border-radius:6px;padding:.6rem 1rem;margin:1rem 0;background:#f7fbff}
.decision .recommendation{font-size:1.15rem;font-weight:600;margin:.3rem 0 .6rem}
.decision table{margin:.3rem 0}.decision td{text-align:left}.verified{color:#276749;font-weight:bold}
"""


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>" if any(head) else ""
    parts = ["<table>" + header]
    for row in rows:
        cells = "".join(
            f'<td class="missed">{html.escape(c)}</td>'
            if c in MISSED_CELLS or c.endswith(": MISSED")
            else f"<td>{html.escape(c)}</td>"
            for c in row
        )
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def _chart(kind: str, index: int, svg: str) -> str:
    """Wrap an SVG with ids made unique per chart (matplotlib reuses ids such as figure_1 in every figure)."""
    prefix = f"p{index}-{kind}-"
    svg = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)
    return f'<div class="chart" id="p{index}-{kind}">{svg}</div>'


def _decision_block(p: PlanSection, index: int) -> str:
    """The first block of a plan: the recommendation in one sentence, then the verdict, what each GPU type does
    and its price source, purchases and quality changes (:func:`hetplan.report.render.common.decision_rows`)."""
    d = p.decision
    rows = decision_rows(p)
    cells = []
    for key, value in rows:
        cls = ""
        if key == "verification":
            cls = ' class="verified"' if d.status == "verified" else ' class="missed"'
        cells.append(f"<tr><th>{html.escape(key)}</th><td{cls}>{html.escape(value)}</td></tr>")
    return (
        f'<div class="decision" id="decision-{index + 1}">'
        f'<p class="recommendation">{html.escape(d.sentence)}</p>'
        "<table>" + "".join(cells) + "</table></div>"
    )


def render_html(report: Report, gate_markdown: str = "") -> str:
    """One self-contained HTML file (inline CSS and SVG charts; no scripts, no external resources)."""
    body = ["<h1>hetplan cost report</h1>"]
    for index, p in enumerate(report.plans):
        body.append(f'<h2 id="plan-{index + 1}">{html.escape(plan_title(p))}</h2>')
        body.append(_decision_block(p, index))
        body.append('<div class="charts">')
        body.append(_chart("cost", index, charts.cost_by_strategy(p)))
        body.append(_chart("gpus", index, charts.gpu_mix(p)))
        if p.cost_vs_goodput:
            body.append(_chart("goodput", index, charts.cost_vs_goodput(p)))
        latency = charts.latency_vs_slo(p)
        if latency is not None:
            body.append(_chart("latency", index, latency))
        body.append("</div>")
        body.append("<h3>Figures</h3>" + _html_table(["", ""], [[k, v] for k, v in headline(p)]))
        body.append("<h3>Deployment</h3>" + _html_table(*deployment_rows(p)))
        v = p.verification
        if v is not None:
            body.append("<h3>Simulated check</h3>" + _html_table(["", ""], verification_rows(v)))
            body += [f'<p class="missed">{html.escape(line)}</p>' for line in verification_lines(v)]
        body.append("<h3>Strategies compared</h3>" + _html_table(*strategy_rows(p)))
        body += [f"<p>{html.escape(line)}</p>" for line in plan_notes(p)]
        if p.price_sensitivity:
            body.append("<h3>Price sensitivity (each GPU type ±20 %)</h3>" + _html_table(*sensitivity_rows(p)))
        for w in p.warnings:
            body.append(f'<p class="warn">warning: {html.escape(w)}</p>')
        body.append(
            f"<p><small>{html.escape(p.tokens_per_usd_basis)}; workload "
            f"{html.escape(p.workload.source)}; plan {html.escape(p.source)}</small></p>"
        )
    for index, s in enumerate(report.schedules or ()):
        body.append(f"<h2>{html.escape(s.scenario)}: autoscaling schedule over {html.escape(s.curve_source)}</h2>")
        body.append('<div class="charts">' + _chart("schedule", index, charts.schedule_over_time(s)) + "</div>")
        body.append(_html_table(*schedule_rows(s)))
        body.append(f"<p>{html.escape(schedule_text(s))}</p>")
        for w in s.warnings:
            body.append(f'<p class="warn">warning: {html.escape(w)}</p>')
    if gate_markdown:
        body.append("<h2>Cost gate</h2><pre>" + html.escape(gate_markdown) + "</pre>")
    body.append(f"<footer>hetplan {html.escape(report.hetplan_version)}</footer>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>hetplan cost report</title>\n<style>"
        + CSS
        + "</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
