"""The report as Markdown for a pull-request comment: headline numbers, deployment, strategies, price sensitivity.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

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


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: Report) -> str:
    """Markdown for a pull-request comment: headline numbers, deployment, strategies, price sensitivity."""
    out = ["# hetplan cost report", ""]
    for p in report.plans:
        out += [f"## {plan_title(p)}", ""]
        out += [f"**{p.decision.sentence}**", ""]
        out += _md_table(["", ""], [[k, v] for k, v in decision_rows(p)]) + [""]
        out += _md_table(["", ""], [[k, v] for k, v in headline(p)]) + [""]
        out += ["### Deployment", ""] + _md_table(*deployment_rows(p)) + [""]
        v = p.verification
        if v is not None:
            out += ["### Simulated check", ""] + _md_table(["", ""], verification_rows(v)) + [""]
            out += [f"- {line}" for line in verification_lines(v)] + ([""] if verification_lines(v) else [])
        out += ["### Strategies compared", ""] + _md_table(*strategy_rows(p)) + [""]
        out += [f"- {line}" for line in plan_notes(p)] + ([""] if plan_notes(p) else [])
        if p.price_sensitivity:
            out += ["<details><summary>Price sensitivity (each GPU type ±20 %)</summary>", ""]
            out += _md_table(*sensitivity_rows(p)) + ["", "</details>", ""]
        for w in p.warnings:
            out += [f"> warning: {w}", ""]
        out += [
            f"<sub>{p.tokens_per_usd_basis}; workload {p.workload.source}; plan {p.source}</sub>",
            "",
        ]
    for s in report.schedules or ():
        out += [f"## {s.scenario}: autoscaling schedule over {s.curve_source}", ""]
        out += _md_table(*schedule_rows(s)) + ["", schedule_text(s), ""]
        for w in s.warnings:
            out += [f"> warning: {w}", ""]
    return "\n".join(out)
