"""The sweep report: the cheapest plan per group and the Pareto front of cost against goodput and SLO.

- **Groups** (``group_by``, default: the grid's axes that pose the question — scenarios, models, workloads,
  traces, goodputs, SLO axes): per group, the cheapest planned case ($/hour) and, where plans were simulated, the
  cheapest whose simulated check held the SLOs.
- **Pareto fronts** (one per value of ``pareto_by``, default: the axes that say what is served — scenarios,
  models, workloads, traces): a planned case is on the front when no other case of its group is at most as dear
  ($/hour), serves at least as much (goodput target, req/s; the plan's capacity when the target is the trace's
  rate) under SLOs at least as tight (TTFT and TPOT no longer, percentile no lower) and is better in one of them.
  Cases whose simulated check missed the SLOs are left out: the plan does not deliver what it claims.
- **Failed cases**: id, axes, status and the error.

:func:`report_doc` builds the typed :class:`SweepReport` from the rows (:class:`~hetplan.sweep.table.SweepRow`);
:func:`render_markdown` and :func:`render_html` are pure functions of it (the HTML adds one inline SVG chart per
front: $/hour against goodput, one colour per SLO tier, the front joined by a line).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import html
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hetplan.sweep.grid import Grid
from hetplan.sweep.table import SweepRow


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class CaseSummary(_Record):
    """A planned case as the report and the summary show it (a subset of its row's columns)."""

    case_id: str
    axes: str
    usd_per_hour: float | None
    tokens_per_usd: float | None
    goodput_target_req_per_s: float | None
    slo_tier: str
    slo_ttft_s: float
    slo_tpot_s: float
    purchases: str | None
    chosen_units: str | None
    priced_by: str | None
    verdict: str

    @classmethod
    def of(cls, row: SweepRow) -> CaseSummary:
        """The summary of ``row``."""
        return cls(
            case_id=row.case_id, axes=row.axes, usd_per_hour=row.usd_per_hour, tokens_per_usd=row.tokens_per_usd,
            goodput_target_req_per_s=row.goodput_target_req_per_s, slo_tier=row.slo_tier, slo_ttft_s=row.slo_ttft_s,
            slo_tpot_s=row.slo_tpot_s, purchases=row.purchases, chosen_units=row.chosen_units,
            priced_by=row.priced_by, verdict=row.verdict,
        )  # fmt: skip


class GroupResult(_Record):
    """One group of ``group_by``: its axis labels, its cases, how many were planned, the cheapest planned case
    and the cheapest whose simulated check held (None: none)."""

    group: dict[str, str]
    cases: int
    planned: int
    cheapest: CaseSummary | None
    cheapest_held: CaseSummary | None


class FrontResult(_Record):
    """One Pareto front (per value of ``pareto_by``): what it was drawn over (``basis``), how many candidates, the
    front (by goodput, then $/hour) and every candidate (``points``, for the chart)."""

    group: dict[str, str]
    basis: str
    candidates: int
    front: list[CaseSummary]
    points: list[CaseSummary]


class Failure(_Record):
    """A case that failed (status infeasible or error) or whose simulated check failed."""

    case_id: str
    axes: str
    status: str
    error: str


class Counts(_Record):
    """Cases per status."""

    ok: int
    infeasible: int
    error: int


class Verdicts(_Record):
    """Cases per simulated-check verdict (serialised by alias: ``check failed``, ``not run``)."""

    held: int
    missed: int
    check_failed: int = Field(alias="check failed")
    not_run: int = Field(alias="not run")


class SweepReport(_Record):
    """The report of a sweep's rows (see the module docstring)."""

    kind: Literal["sweep-report"] = "sweep-report"
    grid: str
    axes: list[str]
    cases: int
    rows: int
    counts: Counts
    verdicts: Verdicts
    group_by: list[str]
    groups: list[GroupResult]
    pareto_by: list[str]
    fronts: list[FrontResult]
    failed: list[Failure]


def _serves(row: SweepRow | CaseSummary) -> float:
    """What a case serves: its goodput target, else (a row) the plan's capacity, else 0."""
    target = row.goodput_target_req_per_s
    if target is not None:
        return float(target)
    return float((row.goodput_capacity_req_per_s if isinstance(row, SweepRow) else None) or 0.0)


def _cost(row: SweepRow | CaseSummary) -> float:
    """$/hour of a planned case (only planned cases, which have one, are compared or drawn)."""
    assert row.usd_per_hour is not None, f"{row.case_id} has no $/hour"
    return row.usd_per_hour


def _worse_or_equal(a: SweepRow, b: SweepRow) -> tuple[bool, bool]:
    """(b is at least as good as a in every objective, b is strictly better in one)."""
    pairs = [
        (_cost(b), _cost(a)),  # lower is better: (b, a) means b <= a
        (-_serves(b), -_serves(a)),
        (b.slo_ttft_s, a.slo_ttft_s),
        (b.slo_tpot_s, a.slo_tpot_s),
        (-b.slo_percentile, -a.slo_percentile),
    ]
    return all(x <= y for x, y in pairs), any(x < y for x, y in pairs)


def pareto_front(rows: list[SweepRow]) -> list[SweepRow]:
    """The planned rows no other row dominates (see the module docstring), sorted by goodput then $/hour."""
    front = []
    for a in rows:
        dominated = False
        for b in rows:
            if b is a:
                continue
            at_least, better = _worse_or_equal(a, b)
            if at_least and better:
                dominated = True
                break
        if not dominated:
            front.append(a)
    return sorted(front, key=lambda r: (_serves(r), _cost(r), r.case_id))


def _key(row: SweepRow, axes: tuple[str, ...], labels: dict[str, dict[str, str]]) -> tuple[str, ...]:
    return tuple(labels[row.case_id].get(a, "") for a in axes)


def _cheapest(rows: list[SweepRow]) -> CaseSummary | None:
    return CaseSummary.of(min(rows, key=lambda r: (_cost(r), r.case_id))) if rows else None


def report_doc(grid: Grid, rows: list[SweepRow]) -> SweepReport:
    """The report of ``rows`` (:mod:`hetplan.sweep.table`'s rows; those of other grids' cases left out), in
    case-id order."""
    labels = {c.id: dict(c.axes) for c in grid.cases}
    rows = sorted((r for r in rows if r.case_id in labels), key=lambda r: r.case_id)
    planned = [r for r in rows if r.status == "ok" and r.usd_per_hour is not None]
    planned_ids = {r.case_id for r in planned}
    counts = Counts(**{s: sum(r.status == s for r in rows) for s in ("ok", "infeasible", "error")})
    verdicts = Verdicts(**{v: sum(r.verdict == v for r in rows) for v in ("held", "missed", "check failed", "not run")})
    groups = []
    for key in sorted({_key(r, grid.group_by, labels) for r in rows}):
        members = [r for r in rows if _key(r, grid.group_by, labels) == key]
        ok = [r for r in members if r.case_id in planned_ids]
        groups.append(
            GroupResult(
                group=dict(zip(grid.group_by, key, strict=True)),
                cases=len(members),
                planned=len(ok),
                cheapest=_cheapest(ok),
                cheapest_held=_cheapest([r for r in ok if r.verdict == "held"]),
            )
        )
    fronts = []
    for key in sorted({_key(r, grid.pareto_by, labels) for r in planned}):
        members = [r for r in planned if _key(r, grid.pareto_by, labels) == key]
        kept = [r for r in members if r.verdict != "missed"]
        basis = "plans that held their simulated check or were not checked"
        if not kept:  # every check missed: the front of the plans as planned, said so
            kept, basis = members, "every simulated check missed: plans as planned"
        fronts.append(
            FrontResult(
                group=dict(zip(grid.pareto_by, key, strict=True)),
                basis=basis,
                candidates=len(kept),
                front=[CaseSummary.of(r) for r in pareto_front(kept)],
                points=[CaseSummary.of(r) for r in kept],
            )
        )
    failed = [Failure(case_id=r.case_id, axes=r.axes, status=r.status, error=r.error)
              for r in rows if r.status != "ok" or r.verdict == "check failed"]  # fmt: skip
    return SweepReport(grid=grid.name, axes=list(grid.axes), cases=len(grid.cases), rows=len(rows), counts=counts,
                       verdicts=verdicts, group_by=list(grid.group_by), groups=groups,
                       pareto_by=list(grid.pareto_by), fronts=fronts, failed=failed)  # fmt: skip


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _tok(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _group_text(group: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in group.items()) or "all cases"


def _cheap_cells(s: CaseSummary | None) -> list[str]:
    if s is None:
        return ["-", "-", "-", "-"]
    return [s.case_id, _usd(s.usd_per_hour), _tok(s.tokens_per_usd), s.purchases or "-"]


def _tables(doc: SweepReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table in the report, shared by the Markdown and HTML renderers."""
    out = []
    head = ["group", "cases", "planned", "cheapest", "$/h", "tok/USD", "purchases", "cheapest held", "$/h (held)"]
    body = []
    for g in doc.groups:
        held = g.cheapest_held
        body.append([_group_text(g.group), str(g.cases), str(g.planned), *_cheap_cells(g.cheapest),
                     held.case_id if held else "-", _usd(held.usd_per_hour) if held else "-"])  # fmt: skip
    out.append(("Cheapest plan per group", head, body))
    for f in doc.fronts:
        head = ["case", "goodput req/s", "SLO tier", "TTFT", "TPOT", "$/h", "tok/USD", "purchases", "verdict"]
        body = [
            [p.case_id, "-" if p.goodput_target_req_per_s is None else f"{p.goodput_target_req_per_s:g}",
             p.slo_tier or "-", f"{p.slo_ttft_s:g} s", f"{p.slo_tpot_s * 1e3:g} ms",
             _usd(p.usd_per_hour), _tok(p.tokens_per_usd), p.purchases or "-", p.verdict]
            for p in f.front
        ]  # fmt: skip
        title = f"Pareto front ({_group_text(f.group)}): {len(f.front)} of {f.candidates} {f.basis}"
        out.append((title, head, body))
    if doc.failed:
        out.append(("Failed cases", ["case", "axes", "status", "error"],
                    [[x.case_id, x.axes, x.status, x.error] for x in doc.failed]))  # fmt: skip
    return out


def _intro(doc: SweepReport) -> list[str]:
    c, v = doc.counts, doc.verdicts
    lines = [
        f"{doc.rows} of {doc.cases} cases: {c.ok} planned, {c.infeasible} infeasible, {c.error} failed.",
        f"Simulated checks: {v.held} held the SLOs, {v.missed} missed, {v.check_failed} failed, {v.not_run} not run.",
        "Pareto front: no other plan of the group is as cheap while serving as much under SLOs as tight; plans "
        "whose simulated check missed are left out (unless every check of the group missed).",
    ]
    return lines


def render_markdown(doc: SweepReport) -> str:
    """The report as Markdown (fits a pull-request comment for small grids)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    parts = [f"# Sweep report: {doc.grid}", "", *_intro(doc), ""]
    for title, head, body in _tables(doc):
        parts += [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        parts += ["| " + " | ".join(cell(x) for x in row) + " |" for row in body]
        parts.append("")
    return "\n".join(parts)


def _chart(front: FrontResult) -> str:
    """Inline SVG: $/hour against goodput, one colour per SLO tier, the front joined by a line."""
    import matplotlib.pyplot as plt

    from hetplan.report.charts import RC, figure_svg

    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(6.0, 3.2))
        tiers = sorted({p.slo_tier or "-" for p in front.points})
        cmap = plt.get_cmap("tab10")
        for i, tier in enumerate(tiers):
            pts = [p for p in front.points if (p.slo_tier or "-") == tier]
            ax.scatter([_serves(p) for p in pts], [_cost(p) for p in pts], color=cmap(i % 10), label=tier,
                       s=22, alpha=0.8)  # fmt: skip
        line = front.front
        ax.plot([_serves(p) for p in line], [_cost(p) for p in line], color="#2d3748", linewidth=1,
                marker="o", markerfacecolor="none", markersize=9, label="Pareto front")  # fmt: skip
        ax.set_xlabel("goodput target (req/s)")
        ax.set_ylabel("$/hour")
        ax.set_title(_group_text(front.group))
        ax.legend(frameon=False, fontsize=8)
        return figure_svg(fig)


def render_html(doc: SweepReport) -> str:
    """The report as one self-contained HTML file (tables and inline SVG charts; no script, no external file)."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Sweep report: {esc(doc.grid)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #cbd5e0;padding:2px 8px;"
        "text-align:left;font-size:0.9em}th{background:#edf2f7}</style></head><body>",
        f"<h1>Sweep report: {esc(doc.grid)}</h1>",
    ]
    parts += [f"<p>{esc(line)}</p>" for line in _intro(doc)]
    fronts = iter(doc.fronts)
    for title, head, body in _tables(doc):
        parts.append(f"<h2>{esc(title)}</h2>")
        if title.startswith("Pareto front"):
            front = next(fronts)
            if front.points:
                parts.append(_chart(front))
        parts.append("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>" for row in body]
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


__all__ = ["CaseSummary", "Counts", "Failure", "FrontResult", "GroupResult", "SweepReport", "Verdicts", "pareto_front",
           "render_html", "render_markdown", "report_doc"]  # fmt: skip
