"""What every report format shows, as plain strings: the headline numbers, the deployment, strategy,
price-sensitivity and schedule rows (``(head, rows)`` tables or key/value rows), the cells that mark a missed SLO
and the sentences a reader needs beside the tables; the simulated check's rows are in
:mod:`hetplan.report.render.checks`, the first block's in :mod:`hetplan.report.render.decision`. The format
modules lay these out; all read the typed report (:mod:`hetplan.report.types`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.plan.types import HOURS_PER_MONTH
from hetplan.report.model import base_title
from hetplan.report.render.checks import slo_cell, verdict_rows, verification_lines, verification_rows
from hetplan.report.render.decision import decision_rows
from hetplan.report.render.fmt import gpus, ms, pct, tokens, usd
from hetplan.report.types import ComboRow, PlanSection, ScheduleSection
from hetplan.units import cost_vs

MISSED_CELLS = ("MISSED", "MISSED (model)", "met (model), sim MISSED")


def headline(p: PlanSection) -> list[tuple[str, str]]:
    """The headline figures: cost per hour, month and million tokens, tokens/USD, goodput, SLO, GPUs, verdict."""
    slo = p.slo
    return [
        ("$/hour", usd(p.usd_per_hour)),
        (f"$/month ({HOURS_PER_MONTH:g} h)", usd(p.usd_per_month)),
        ("$ per million tokens (in+out)", usd(p.usd_per_million_tokens)),
        ("tokens/USD, input+output", tokens(p.tokens_per_usd)),
        ("tokens/USD, output only", tokens(p.output_tokens_per_usd)),
        ("goodput capacity / target", f"{p.goodput_req_per_s:.2f} / {p.goodput_target_req_per_s:g} req/s"),
        ("SLO", f"p{slo.percentile:g} TTFT {ms(slo.ttft_s)}, TPOT {ms(slo.tpot_s)}"),
        ("GPUs", gpus(p.gpus_used)),
    ] + verdict_rows(p.verification)


def deployment_rows(p: PlanSection) -> tuple[list[str], list[list[str]]]:
    """The deployment table: combos (with the model's latencies and the SLO cell) then aggregated instances."""
    q = f"p{p.slo.percentile:g}"
    if p.deployment and isinstance(p.deployment[0], ComboRow):
        # the latencies are the model's prediction; the simulated ones are in the "Simulated check" rows
        head = ["combo: prefill -> decode", "n", "$/h", "req/s", f"model {q} TTFT", "model TPOT", "util", "SLO"]
        rows = [
            [
                d.label,
                str(d.count),
                f"{d.usd_per_hour_each:.2f}",
                f"{d.goodput_req_per_s_each:.2f}",
                ms(d.predicted_ttft_s),
                ms(d.predicted_tpot_s),
                f"{d.utilization * 100:.0f} %",
                slo_cell(d.meets_ttft_slo and d.meets_tpot_slo, p.verification),
            ]
            if isinstance(d, ComboRow)
            else [  # a mixed plan's aggregated instances, after its combos
                d.label,
                str(d.count),
                f"{d.usd_per_hour_each:.2f}",
                f"{d.traffic_share * 100:.0f} % of traffic",
                "-",
                "-",
                f"{d.utilization * 100:.0f} %",
                "-",
            ]
            for d in p.deployment
        ]
        return head, rows
    head = ["instance", "n", "$/h", "traffic", "util"]
    rows = [
        [
            d.label,
            str(d.count),
            f"{d.usd_per_hour_each:.2f}",
            f"{d.traffic_share * 100:.0f} %" if not isinstance(d, ComboRow) else "-",
            f"{d.utilization * 100:.0f} %",
        ]
        for d in p.deployment
    ]
    return head, rows


def strategy_rows(p: PlanSection) -> tuple[list[str], list[list[str]]]:
    """Every strategy's cost, goodput, tokens/USD and GPUs against this plan."""
    head = ["strategy", "$/h", "req/s", "tok/USD", "GPUs", "vs plan", "tok/USD x"]
    rows = []
    for name, s in p.strategies.items():
        label = name + (" (plan)" if name == p.strategy else "")
        if s.infeasible:
            rows.append([label, "-", "-", "-", "infeasible (see below)", "-", "-"])
            continue
        gain = p.gains.get(name)
        ratio = None if gain is None else gain.tokens_per_usd_ratio
        rows.append(
            [
                label,
                f"{s.usd_per_hour:.2f}",
                f"{s.goodput_req_per_s or 0.0:.2f}",
                tokens(s.tokens_per_usd),
                gpus(s.gpus_used),
                "-" if name == p.strategy else cost_vs(s.usd_per_hour, p.usd_per_hour),
                "-" if ratio is None else f"{ratio:.3f}x",
            ]
        )
    return head, rows


def sensitivity_rows(p: PlanSection) -> tuple[list[str], list[list[str]]]:
    """The price-sensitivity table: each GPU type's price moved, this plan's and the re-planned cost."""
    head = ["GPU price", "this plan $/h", "re-planned $/h", "best alternative"]
    rows = []
    for r in p.price_sensitivity:
        alt = "-" if r.best_alternative is None else f"{r.best_alternative} {usd(r.best_alternative_usd_per_hour)}"
        rows.append(
            [
                f"{r.gpu} {(r.price_factor - 1) * 100:+.0f} %",
                usd(r.plan_usd_per_hour),
                usd(r.replanned_usd_per_hour),
                alt,
            ]
        )
    return head, rows


def schedule_rows(s: ScheduleSection) -> tuple[list[str], list[list[str]]]:
    """An autoscaling schedule's cost against static fleets sized for the peak and for the mean."""
    m = s.summary
    peak = m.static_peak_usd
    rows = [
        [
            "autoscaled schedule",
            usd(m.schedule_usd),
            "-" if m.saving_vs_static_peak is None else pct(-m.saving_vs_static_peak),
            str(m.short_windows),
        ],
        ["static fleet sized for the peak", usd(peak), pct(0.0), "0"],
    ]
    if m.static_mean_usd is not None:
        given = "static_mean_short_windows" in m.model_fields_set
        rows.append(
            [
                "static fleet sized for the mean",
                usd(m.static_mean_usd),
                pct(m.static_mean_usd / peak - 1) if peak else "-",  # a $0 peak fleet: owned GPUs at $0
                str(m.static_mean_short_windows) if given else "-",
            ]
        )
    rows.append(["re-solved every window (bound)", usd(m.per_window_optimum_usd), "-", "-"])
    return ["fleet", "cost", "vs peak fleet", "short windows"], rows


def schedule_text(s: ScheduleSection) -> str:
    """An autoscaling schedule in one sentence: windows, demand, combo changes, GPU-hours."""
    m = s.summary
    gpu_hours = ", ".join(f"{g} {h:,.0f}" for g, h in m.gpu_hours.items() if h)
    return (
        f"{m.windows} windows of {m.window_s:g} s ({m.hours:g} h); demand peak "
        f"{m.peak_demand_req_per_s:.3g} req/s, mean {m.mean_demand_req_per_s:.3g} req/s; "
        f"{m.combo_changes} combo changes in {m.windows_with_changes} windows; GPU-hours: {gpu_hours}"
    )


def plan_notes(p: PlanSection) -> list[str]:
    """Sentences a reader needs beside the tables: a quality change (quantized weights or KV cache, first), a
    cheaper strategy, and why baselines are infeasible."""
    notes = [p.quality_note] if p.quality_note else []
    for name, s in p.strategies.items():
        if s.infeasible:
            notes.append(f"{name} is infeasible: {s.reason}")
        elif name != p.strategy and s.usd_per_hour < p.usd_per_hour:
            notes.append(
                f"{name} costs ${s.usd_per_hour:,.2f}/h, {cost_vs(s.usd_per_hour, p.usd_per_hour)}"
                f" than this {p.strategy} plan (tokens/USD "
                f"{tokens(s.tokens_per_usd)} against {tokens(p.tokens_per_usd)}); plan it with --strategy "
                f"{name}."
            )
    return notes


def plan_title(p: PlanSection) -> str:
    """The section title of one plan: its own ``title`` (unique within the report, see
    :func:`hetplan.report.model.build_report`), else name, model and strategy."""
    return p.title or base_title(p)


__all__ = [
    "MISSED_CELLS",
    "decision_rows",
    "deployment_rows",
    "headline",
    "plan_notes",
    "plan_title",
    "schedule_rows",
    "schedule_text",
    "sensitivity_rows",
    "strategy_rows",
    "verification_lines",
    "verification_rows",
]
