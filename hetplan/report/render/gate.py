"""The cost gate's results as text for CI: GitHub Actions workflow commands and a Markdown summary.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math

from hetplan.report.gate_types import GateResult


def allowance_text(max_cost_increase: float, max_cost_increase_usd_per_hour: float = 0.0) -> str:
    """The allowed rise in words: ``+2 %``, or ``+2 % or +$1.50/h, whichever is larger``."""
    text = f"+{max_cost_increase * 100:g} %"
    if max_cost_increase_usd_per_hour > 0:
        text += f" or +${max_cost_increase_usd_per_hour:,.2f}/h, whichever is larger"
    return text


def _escape(text: str) -> str:
    """Escape a workflow-command message (GitHub: % CR LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_annotations(results: list[GateResult], warnings: list[str] | None = None) -> str:
    """GitHub Actions workflow commands: one ``::error`` per failure, ``::warning`` per warning, a ``::notice``
    per passing plan. Written to stdout, where the runner reads them."""
    lines = [f"::warning title=hetplan cost gate::{_escape(w)}" for w in warnings or []]
    for r in results:
        if r.passed:
            lines.append(
                _escape_cmd("notice", f"{r.name}: ${r.usd_per_hour:,.2f}/h ({r.change_text()} against the baseline)")
            )
        for failure in r.failures:
            lines.append(_escape_cmd("error", f"{r.name}: {failure}"))
    return "\n".join(lines) + ("\n" if lines else "")


def _escape_cmd(kind: str, message: str) -> str:
    return f"::{kind} title=hetplan cost gate::{_escape(message)}"


def markdown_summary(
    results: list[GateResult],
    max_cost_increase: float,
    warnings: list[str] | None = None,
    max_cost_increase_usd_per_hour: float = 0.0,
) -> str:
    """A Markdown summary for a CI job page or pull-request comment."""
    passed = bool(results) and all(r.passed for r in results)
    out = [
        f"## hetplan cost gate: {'passed' if passed else 'FAILED'}",
        "",
        f"Allowed cost increase: {allowance_text(max_cost_increase, max_cost_increase_usd_per_hour)}",
        "",
        "| scenario | baseline $/h | now $/h | change | tokens/USD ratio | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if math.isnan(r.usd_per_hour):
            out.append(f"| {r.name} | - | - | - | - | FAIL |")
            continue
        out.append(
            f"| {r.name} | {r.baseline_usd_per_hour:,.2f} | {r.usd_per_hour:,.2f} | {r.change_text()} "
            f"| {r.ratio_text()} | {'pass' if r.passed else 'FAIL'} |"
        )
    if not results:
        out.append("| (nothing compared) | - | - | - | - | FAIL |")
    for w in warnings or []:
        out += ["", f"> warning: {w}"]
    for r in results:
        if r.changes or r.failures:
            out += ["", f"### {r.name}", ""]
            out += [f"- **{f}**" for f in r.failures] + [f"- {c}" for c in r.changes]
    return "\n".join(out) + "\n"
