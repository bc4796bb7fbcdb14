"""Render a report document as JSON, Markdown (fits a pull-request comment), self-contained HTML or rich tables.

Every renderer is a pure function of the report document, so equal plans give byte-identical reports.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import html
import re
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.io import to_json
from hetplan.plan.types import HOURS_PER_MONTH
from hetplan.report import charts
from hetplan.units import format_signed_percent


def render_json(report: dict[str, Any]) -> str:
    """The report document as stable JSON."""
    return to_json(report)


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else format_signed_percent(x)


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s"


def _gpus(used: dict[str, int]) -> str:
    return ", ".join(f"{n}x {g}" for g, n in used.items())


def _headline(p: dict[str, Any]) -> list[tuple[str, str]]:
    slo = p["slo"]
    return [
        ("$/hour", _usd(p["usd_per_hour"])),
        (f"$/month ({HOURS_PER_MONTH:g} h)", _usd(p["usd_per_month"])),
        ("$ per million tokens (in+out)", _usd(p["usd_per_million_tokens"])),
        ("tokens/USD, input+output", f"{p['tokens_per_usd']:,.0f}"),
        ("tokens/USD, output only", f"{p['output_tokens_per_usd']:,.0f}"),
        ("goodput capacity / target", f"{p['goodput_req_per_s']:.2f} / {p['goodput_target_req_per_s']:g} req/s"),
        ("SLO", f"p{slo['percentile']:g} TTFT {_ms(slo['ttft_s'])}, TPOT {_ms(slo['tpot_s'])}"),
        ("GPUs", _gpus(p["gpus_used"])),
    ] + _verdict_rows(p.get("verification"))


def _verdict_rows(v: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The simulated verdict and both capacities, for the report's first block (none for an unverified plan)."""
    if not v or not v.get("verdict"):
        return []
    a, c = v.get("analytic_capacity_req_per_s"), v.get("simulated_capacity_req_per_s")
    ratio = f" ({c / a:.2f}x)" if a and c is not None else ""
    return [
        ("simulated verdict", str(v["verdict"])),
        ("capacity: analytic / simulated", f"{_opt(a, '.3g')} / {_opt(c, '.3g')} req/s{ratio}"),
    ]


def _deployment_rows(p: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    q = f"p{p['slo']['percentile']:g}"
    if p["deployment"] and "predicted_ttft_s" in p["deployment"][0]:
        head = ["combo: prefill -> decode", "n", "$/h", "req/s", f"{q} TTFT", "TPOT", "util", "SLO"]
        rows = [
            [
                d["label"],
                str(d["count"]),
                f"{d['usd_per_hour_each']:.2f}",
                f"{d['goodput_req_per_s_each']:.2f}",
                _ms(d["predicted_ttft_s"]),
                _ms(d["predicted_tpot_s"]),
                f"{d['utilization'] * 100:.0f} %",
                _slo_cell(d["meets_ttft_slo"] and d["meets_tpot_slo"], p.get("verification")),
            ]
            for d in p["deployment"]
        ]
        return head, rows
    head = ["instance", "n", "$/h", "traffic", "util"]
    rows = [
        [
            d["label"],
            str(d["count"]),
            f"{d['usd_per_hour_each']:.2f}",
            f"{d['traffic_share'] * 100:.0f} %",
            f"{d['utilization'] * 100:.0f} %",
        ]
        for d in p["deployment"]
    ]
    return head, rows


def _slo_cell(model_met: bool, v: dict[str, Any] | None) -> str:
    """A combo's SLO cell. Without a simulated check it reads "met"/"MISSED" as it always did; with one it says
    that the verdict is the model's, and a model "met" is never left unqualified when the simulation missed."""
    if v is None:
        return "met" if model_met else "MISSED"
    if not model_met:
        return "MISSED (model)"
    return "met (model), sim MISSED" if v["slo_held"] is False else "met (model)"


MISSED_CELLS = ("MISSED", "MISSED (model)", "met (model), sim MISSED")


def _opt(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _vs_slo(x: float | None, slo: float) -> str:
    if x is None:
        return f"- (not finite) vs SLO {_ms(slo)}"
    return f"{_ms(x)} vs SLO {_ms(slo)}: " + ("met" if x <= slo else "MISSED")


def _verification_rows(v: dict[str, Any]) -> list[list[str]]:
    """Key/value rows of the "Simulated check" section (see :func:`hetplan.report.model.verification_report`)."""
    q = f"p{v['percentile']:g}"
    att = v["attainment"]
    verdict = {True: "SLOs held in simulation", False: "SLO MISSED in simulation", None: "-"}[v["slo_held"]]
    rows = [
        ["verdict", verdict],
        ["policy", str(v["policy"] or "-")],
        ["target rate", f"{_opt(v['target_req_per_s'], 'g')} req/s (rate scale x{_opt(v['rate_scale'], '.4g')})"],
        ["arrivals", str(v["arrivals"] or "-")],
        [
            "requests",
            f"{_opt(v['requests'], ',.0f')} ({_opt(v['unfinished'], ',.0f')} unfinished, "
            f"{_opt(v['dropped'], ',.0f')} dropped)",
        ],
        [
            "SLO attainment",
            f"joint {_share(att['joint'])}, TTFT {_share(att['ttft'])}, TPOT {_share(att['tpot'])} "
            f"(needs {v['percentile']:g} %)",
        ],
        [f"{q} TTFT", _vs_slo(v["ttft_q_s"], v["slo_ttft_s"])],
        [f"{q} TPOT", _vs_slo(v["tpot_q_s"], v["slo_tpot_s"])],
        [
            "goodput (simulated)",
            f"{_opt(v['goodput_req_per_s'], '.3g')} req/s (target {_opt(v['target_req_per_s'], 'g')} req/s)",
        ],
    ]
    r = v.get("resized")
    if r is not None:
        before, after = r["usd_per_hour_before"], r["usd_per_hour_after"]
        change = "" if not before or after is None else f" ({(after / before - 1) * 100:+.1f} %)"
        rows += [
            [
                "resized: headroom",
                f"asked {_opt(r['headroom_asked'], 'g')}, used {_opt(r['headroom_used'], 'g')} "
                f"({r['attempts']} attempts)",
            ],
            ["resized: $/hour", f"{_usd(before)} -> {_usd(after)}{change}"],
        ]
    return rows


def _verification_lines(v: dict[str, Any]) -> list[str]:
    """The misses and the simulator's warnings, one sentence each."""
    return [f"miss: {m}" for m in v["misses"]] + [f"simulator warning: {w}" for w in v["warnings"]]


def _strategy_rows(p: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["strategy", "$/h", "req/s", "tok/USD", "GPUs", "plan saves", "tok/USD x"]
    rows = []
    for name, s in p["strategies"].items():
        label = name + (" (plan)" if name == p["strategy"] else "")
        if s.get("status") == "infeasible":
            rows.append([label, "-", "-", "-", "infeasible (see below)", "-", "-"])
            continue
        gain = p["gains"].get(name, {})
        rows.append(
            [
                label,
                f"{s['total_usd_per_hour']:.2f}",
                f"{s['goodput_req_per_s']:.2f}",
                f"{s['tokens_per_usd']:,.0f}",
                _gpus(s["gpus_used"]),
                _pct(gain.get("cost_saved_fraction")),
                "-" if gain.get("tokens_per_usd_ratio") is None else f"{gain['tokens_per_usd_ratio']:.3f}x",
            ]
        )
    return head, rows


def _sensitivity_rows(p: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["GPU price", "this plan $/h", "re-planned $/h", "best alternative"]
    rows = []
    for r in p["price_sensitivity"]:
        alt = (
            "-"
            if r["best_alternative"] is None
            else f"{r['best_alternative']} {_usd(r['best_alternative_usd_per_hour'])}"
        )
        rows.append(
            [
                f"{r['gpu']} {(r['price_factor'] - 1) * 100:+.0f} %",
                _usd(r["plan_usd_per_hour"]),
                _usd(r["replanned_usd_per_hour"]),
                alt,
            ]
        )
    return head, rows


def _schedule_rows(s: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    m = s["summary"]
    peak = m["static_peak_usd"]
    rows = [
        ["autoscaled schedule", _usd(m["schedule_usd"]), _pct(-m["saving_vs_static_peak"]), str(m["short_windows"])],
        ["static fleet sized for the peak", _usd(peak), _pct(0.0), "0"],
    ]
    if m["static_mean_usd"] is not None:
        rows.append(
            [
                "static fleet sized for the mean",
                _usd(m["static_mean_usd"]),
                _pct(m["static_mean_usd"] / peak - 1),
                str(m["static_mean_short_windows"]),
            ]
        )
    rows.append(["re-solved every window (bound)", _usd(m["per_window_optimum_usd"]), "-", "-"])
    return ["fleet", "cost", "vs peak fleet", "short windows"], rows


def _schedule_text(s: dict[str, Any]) -> str:
    m = s["summary"]
    gpu_hours = ", ".join(f"{g} {h:,.0f}" for g, h in m["gpu_hours"].items() if h)
    return (
        f"{m['windows']} windows of {m['window_s']:g} s ({m['hours']:g} h); demand peak "
        f"{m['peak_demand_req_per_s']:.3g} req/s, mean {m['mean_demand_req_per_s']:.3g} req/s; "
        f"{m['combo_changes']} combo changes in {m['windows_with_changes']} windows; GPU-hours: {gpu_hours}"
    )


def _notes(p: dict[str, Any]) -> list[str]:
    """Sentences a reader needs beside the tables: a cheaper strategy, and why baselines are infeasible."""
    notes = []
    for name, s in p["strategies"].items():
        if s.get("status") == "infeasible":
            notes.append(f"{name} is infeasible: {s.get('reason', '')}")
        elif name != p["strategy"] and s["total_usd_per_hour"] < p["usd_per_hour"]:
            notes.append(
                f"{name} costs ${s['total_usd_per_hour']:,.2f}/h, this {p['strategy']} plan "
                f"{(p['usd_per_hour'] / s['total_usd_per_hour'] - 1) * 100:.1f} % more (tokens/USD "
                f"{s['tokens_per_usd']:,.0f} against {p['tokens_per_usd']:,.0f}); plan it with --strategy {name}."
            )
    return notes


# -- Markdown ---------------------------------------------------------------------------------------------------
def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    """Markdown for a pull-request comment: headline numbers, deployment, strategies, price sensitivity."""
    out = ["# hetplan cost report", ""]
    for p in report["plans"]:
        out += [f"## {p['name']}: {p['model']} ({p['weight_dtype']}), {p['strategy']} plan", ""]
        out += _md_table(["", ""], [[k, v] for k, v in _headline(p)]) + [""]
        out += ["### Deployment", ""] + _md_table(*_deployment_rows(p)) + [""]
        if "verification" in p:
            v = p["verification"]
            out += ["### Simulated check", ""] + _md_table(["", ""], _verification_rows(v)) + [""]
            out += [f"- {line}" for line in _verification_lines(v)] + ([""] if _verification_lines(v) else [])
        out += ["### Strategies compared", ""] + _md_table(*_strategy_rows(p)) + [""]
        out += [f"- {line}" for line in _notes(p)] + ([""] if _notes(p) else [])
        if p["price_sensitivity"]:
            out += ["<details><summary>Price sensitivity (each GPU type ±20 %)</summary>", ""]
            out += _md_table(*_sensitivity_rows(p)) + ["", "</details>", ""]
        for w in p["warnings"]:
            out += [f"> warning: {w}", ""]
        out += [
            f"<sub>{p['tokens_per_usd_basis']}; workload {p['workload'].get('source', '')}; plan {p['source']}</sub>",
            "",
        ]
    for s in report.get("schedules", []):
        out += [f"## {s['scenario']}: autoscaling schedule over {s['curve']['source']}", ""]
        out += _md_table(*_schedule_rows(s)) + ["", _schedule_text(s), ""]
        for w in s.get("warnings", []):
            out += [f"> warning: {w}", ""]
    return "\n".join(out)


# -- HTML -------------------------------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1a202c}
h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2.5rem;border-bottom:1px solid #e2e8f0}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #e2e8f0;padding:.3rem .6rem;text-align:right}
th{background:#f7fafc}td:first-child,th:first-child{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:1rem}
.chart{border:1px solid #e2e8f0;padding:.5rem}.warn{color:#975a16}.missed{color:#c53030;font-weight:bold}
footer{color:#718096;font-size:.85rem;margin-top:2rem}
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


def render_html(report: dict[str, Any], gate_markdown: str = "") -> str:
    """One self-contained HTML file (inline CSS and SVG charts; no scripts, no external resources)."""
    body = ["<h1>hetplan cost report</h1>"]
    for index, p in enumerate(report["plans"]):
        body.append(
            f"<h2>{html.escape(p['name'])}: {html.escape(p['model'])} ({html.escape(p['weight_dtype'])}), "
            f"{html.escape(p['strategy'])} plan</h2>"
        )
        body.append(_html_table(["", ""], [[k, v] for k, v in _headline(p)]))
        body.append('<div class="charts">')
        body.append(_chart("cost", index, charts.cost_by_strategy(p)))
        body.append(_chart("gpus", index, charts.gpu_mix(p)))
        if p["cost_vs_goodput"]:
            body.append(_chart("goodput", index, charts.cost_vs_goodput(p)))
        body.append("</div>")
        body.append("<h3>Deployment</h3>" + _html_table(*_deployment_rows(p)))
        if "verification" in p:
            v = p["verification"]
            body.append("<h3>Simulated check</h3>" + _html_table(["", ""], _verification_rows(v)))
            body += [f'<p class="missed">{html.escape(line)}</p>' for line in _verification_lines(v)]
        body.append("<h3>Strategies compared</h3>" + _html_table(*_strategy_rows(p)))
        body += [f"<p>{html.escape(line)}</p>" for line in _notes(p)]
        if p["price_sensitivity"]:
            body.append("<h3>Price sensitivity (each GPU type ±20 %)</h3>" + _html_table(*_sensitivity_rows(p)))
        for w in p["warnings"]:
            body.append(f'<p class="warn">warning: {html.escape(w)}</p>')
        body.append(
            f"<p><small>{html.escape(p['tokens_per_usd_basis'])}; workload "
            f"{html.escape(str(p['workload'].get('source', '')))}; plan {html.escape(p['source'])}</small></p>"
        )
    for index, s in enumerate(report.get("schedules", [])):
        body.append(
            f"<h2>{html.escape(s['scenario'])}: autoscaling schedule over {html.escape(s['curve']['source'])}</h2>"
        )
        body.append('<div class="charts">' + _chart("schedule", index, charts.schedule_over_time(s)) + "</div>")
        body.append(_html_table(*_schedule_rows(s)))
        body.append(f"<p>{html.escape(_schedule_text(s))}</p>")
        for w in s.get("warnings", []):
            body.append(f'<p class="warn">warning: {html.escape(w)}</p>')
    if gate_markdown:
        body.append("<h2>Cost gate</h2><pre>" + html.escape(gate_markdown) + "</pre>")
    body.append(f"<footer>hetplan {html.escape(report['hetplan_version'])}</footer>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>hetplan cost report</title>\n<style>"
        + CSS
        + "</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


# -- terminal ---------------------------------------------------------------------------------------------------
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
            f"[bold]{escape(p['name'])}[/]: {escape(p['model'])} ({p['weight_dtype']}), {p['strategy']} plan "
            f"[dim]({escape(p['source'])})[/]",
            highlight=False,
        )
        verdict = (p.get("verification") or {}).get("verdict")
        if verdict:  # the first block: a line of its own (a table cell would cut it)
            console.print(str(verdict), highlight=False, markup=False)
        for title, (head, rows) in (
            ("", (["", ""], [[k, v] for k, v in _headline(p) if k != "simulated verdict"])),
            ("Deployment", _deployment_rows(p)),
            ("Simulated check", (["", ""], _verification_rows(p["verification"]) if "verification" in p else [])),
            ("Strategies compared", _strategy_rows(p)),
            ("Price sensitivity (each GPU type ±20 %)", _sensitivity_rows(p)),
        ):
            if not rows:
                continue
            if title == "Simulated check":
                console.print(_kv_table(title, rows))
                for line in _verification_lines(p["verification"]):
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
        for line in _notes(p):
            console.print(line, highlight=False, markup=False)
        for w in p["warnings"]:
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    for s in report.get("schedules", []):
        console.print(f"[bold]{escape(s['scenario'])}[/]: autoscaling schedule over {escape(s['curve']['source'])}")
        head, rows = _schedule_rows(s)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(head):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*[escape(c) for c in row])
        console.print(table)
        console.print(_schedule_text(s), highlight=False, markup=False)
        for w in s.get("warnings", []):
            console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
