"""Charts for the HTML report, as inline SVG text (deterministic: fixed hash salt, no dates, text kept as text).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hetplan.report.types import ComboRow, PlanSection, ScheduleSection  # noqa: E402

STRATEGY_COLORS = {"cauchy": "#2b6cb0", "homogeneous": "#a0aec0", "melange": "#dd6b20"}
RC: Any = {
    "svg.hashsalt": "hetplan",
    "svg.fonttype": "none",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: the SVG is inlined into HTML


def figure_svg(fig: Any) -> str:
    """A matplotlib figure as inline SVG text (closes the figure), as every chart here is written."""
    return _svg(fig)


#: The chosen plan's colour in every chart; the other strategies are drawn in :data:`OTHER_COLOR`.
PLAN_COLOR = "#2b6cb0"
OTHER_COLOR = "#a0aec0"


def _label(section: PlanSection, name: str) -> str:
    """A strategy's axis label: the chosen plan's says so."""
    return f"{name}\n(this plan)" if name == section.strategy else name


def cost_by_strategy(section: PlanSection) -> str:
    """Bar chart: $/hour of each strategy for one plan's scenario (infeasible ones omitted); the chosen plan's bar
    in :data:`PLAN_COLOR`, the others in :data:`OTHER_COLOR`, with a legend saying which is which."""
    rows = [(n, s.usd_per_hour) for n, s in section.strategies.items() if not s.infeasible]
    chosen = section.strategy
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(5.5, 2.8))
        bars = ax.bar(
            [_label(section, n) for n, _ in rows],
            [c for _, c in rows],
            color=[PLAN_COLOR if n == chosen else OTHER_COLOR for n, _ in rows],
        )
        for bar, (_, cost) in zip(bars, rows, strict=True):
            ax.annotate(f"${cost:,.2f}/h", (bar.get_x() + bar.get_width() / 2, cost), ha="center", va="bottom")
        handles = [Patch(color=PLAN_COLOR, label=f"this plan ({chosen})"), Patch(color=OTHER_COLOR,
                   label="other strategies (the model's cost)")]  # fmt: skip
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax.set_ylabel("$/hour")
        ax.margins(y=0.15)
        ax.set_title("Cost by strategy")
        return _svg(fig)


def gpu_mix(section: PlanSection) -> str:
    """Stacked horizontal bars: GPUs of each type used by each strategy (the chosen plan's labelled so)."""
    rows = [(n, s.gpus_used) for n, s in section.strategies.items() if not s.infeasible]
    gpus = sorted({g for _, used in rows for g in used})
    cmap = plt.get_cmap("tab10")
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(6.5, 0.6 + 0.55 * len(rows)))
        left = [0.0] * len(rows)
        for i, gpu in enumerate(gpus):
            counts = [used.get(gpu, 0) for _, used in rows]
            ax.barh([_label(section, n) for n, _ in rows], counts, left=left, color=cmap(i % 10), label=gpu)
            left = [a + b for a, b in zip(left, counts, strict=True)]
        ax.set_xlabel("GPUs")
        ax.set_title("GPU mix")
        ax.invert_yaxis()
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        return _svg(fig)


def cost_vs_goodput(section: PlanSection) -> str:
    """Lines: $/hour of each strategy against the goodput target (points where it is feasible); the chosen
    strategy's line drawn thicker and the plan itself a star at its target and cost, all in the legend."""
    curve = section.cost_vs_goodput
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(5.5, 3.0))
        for name, color in STRATEGY_COLORS.items():
            pts = [(r.goodput_req_per_s, y) for r in curve if (y := r.usd_per_hour.get(name)) is not None]
            if pts:
                mine = name == section.strategy
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color=color,
                        label=f"{name} (this plan)" if mine else name, linewidth=2.5 if mine else 1.2)  # fmt: skip
        target = section.goodput_target_req_per_s
        ax.axvline(target, color="#718096", linestyle=":", linewidth=1, label=f"goodput target {target:g} req/s")
        ax.plot([target], [section.usd_per_hour], marker="*", markersize=12, color="#c53030", linestyle="none",
                label="this plan")  # fmt: skip
        ax.set_xlabel("goodput target (req/s)")
        ax.set_ylabel("$/hour")
        ax.set_title("Cost versus goodput target")
        ax.legend(frameon=False)
        return _svg(fig)


def latency_vs_slo(section: PlanSection) -> str | None:
    """Two panels, TTFT and TPOT at the SLO percentile: what the model predicts (the slowest combo's) and what the
    simulated check measured on the trace, labelled so, against the SLO as a dashed line in the legend. None when
    the plan has neither figure."""
    slo = section.slo
    combos = [d for d in section.deployment if isinstance(d, ComboRow)]
    v = section.verification
    predicted = {
        "TTFT": max((d.predicted_ttft_s for d in combos), default=None),
        "TPOT": max((d.predicted_tpot_s for d in combos), default=None),
    }
    simulated = {"TTFT": None if v is None else v.ttft_q_s, "TPOT": None if v is None else v.tpot_q_s}
    if all(x is None for x in (*predicted.values(), *simulated.values())):
        return None
    q = f"p{slo.percentile:g}"
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(6.5, 2.8))
        for ax, metric, limit in zip(axes, ("TTFT", "TPOT"), (slo.ttft_s, slo.tpot_s), strict=True):
            ms = limit < 1.0  # TPOT in ms, TTFT in s unless its SLO is under a second
            scale, unit = (1e3, "ms") if ms else (1.0, "s")
            named = (("model predicts", predicted[metric]), ("simulated on\nthe trace", simulated[metric]))
            bars = [(label, x) for label, x in named if x is not None]
            drawn = ax.bar(
                [b for b, _ in bars],
                [x * scale for _, x in bars],
                color=["#2b6cb0" if b.startswith("model") else "#2f855a" for b, _ in bars],
            )
            for bar, (_, x) in zip(drawn, bars, strict=True):
                ax.annotate(f"{x * scale:.3g} {unit}", (bar.get_x() + bar.get_width() / 2, x * scale), ha="center",
                            va="bottom")  # fmt: skip
            ax.axhline(
                limit * scale, color="#c53030", linestyle="--", linewidth=1.2, label=f"SLO {limit * scale:g} {unit}"
            )
            ax.legend(frameon=False, loc="upper right", fontsize=8)
            top = max([limit] + [x for _, x in bars]) * scale
            ax.set_ylim(0, top * 1.3)
            ax.set_ylabel(f"{q} {metric} ({unit})")
            ax.set_title(f"{metric}: SLO {limit * scale:g} {unit} (dashed)")
        fig.tight_layout()
        return _svg(fig)


def schedule_over_time(sched: ScheduleSection) -> str:
    """Two panels over time: demand against available capacity (req/s), and the schedule's $/hour."""
    rows = sched.windows
    hours = [r.window_start_s / 3600.0 for r in rows]
    with plt.rc_context(RC):
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(9.0, 4.6), sharex=True)
        top.step(
            hours,
            [r.demand_req_per_s for r in rows],
            where="post",
            color="#dd6b20",
            linewidth=0.8,
            label="demand (burstiness-adjusted)",
        )
        top.step(
            hours,
            [r.available_capacity_req_per_s for r in rows],
            where="post",
            color="#2b6cb0",
            linewidth=0.8,
            label="available capacity",
        )
        top.set_ylabel("req/s")
        top.legend(frameon=False, loc="upper right")
        top.set_title("Demand, capacity and cost over time")
        bottom.step(
            hours, [r.usd_per_hour for r in rows], where="post", color="#2f855a", linewidth=0.8, label="schedule"
        )
        peak = sched.summary.static_peak_usd / sched.summary.hours
        bottom.axhline(peak, color="#a0aec0", linestyle="--", linewidth=1, label="static peak fleet")
        bottom.set_ylabel("$/hour")
        bottom.set_xlabel("hours since the start of the curve")
        bottom.legend(frameon=False, loc="upper right")
        return _svg(fig)
