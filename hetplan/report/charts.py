"""Charts for the HTML report, as inline SVG text (deterministic: fixed hash salt, no dates, text kept as text).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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


def cost_by_strategy(plan: dict[str, Any]) -> str:
    """Bar chart: $/hour of each strategy for one plan's scenario (infeasible ones omitted)."""
    rows = [(n, s["total_usd_per_hour"]) for n, s in plan["strategies"].items() if s.get("status") != "infeasible"]
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(5.5, 2.8))
        bars = ax.bar(
            [n for n, _ in rows], [c for _, c in rows], color=[STRATEGY_COLORS.get(n, "#718096") for n, _ in rows]
        )
        for bar, (_, cost) in zip(bars, rows, strict=True):
            ax.annotate(f"${cost:,.2f}/h", (bar.get_x() + bar.get_width() / 2, cost), ha="center", va="bottom")
        ax.set_ylabel("$/hour")
        ax.margins(y=0.15)
        ax.set_title("Cost by strategy")
        return _svg(fig)


def gpu_mix(plan: dict[str, Any]) -> str:
    """Stacked horizontal bars: GPUs of each type used by each strategy."""
    rows = [(n, s["gpus_used"]) for n, s in plan["strategies"].items() if s.get("status") != "infeasible"]
    gpus = sorted({g for _, used in rows for g in used})
    cmap = plt.get_cmap("tab10")
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(6.5, 0.6 + 0.55 * len(rows)))
        left = [0.0] * len(rows)
        for i, gpu in enumerate(gpus):
            counts = [used.get(gpu, 0) for _, used in rows]
            ax.barh([n for n, _ in rows], counts, left=left, color=cmap(i % 10), label=gpu)
            left = [a + b for a, b in zip(left, counts, strict=True)]
        ax.set_xlabel("GPUs")
        ax.set_title("GPU mix")
        ax.invert_yaxis()
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        return _svg(fig)


def cost_vs_goodput(plan: dict[str, Any]) -> str:
    """Lines: $/hour of each strategy against the goodput target (points where it is feasible)."""
    curve = plan["cost_vs_goodput"]
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(5.5, 3.0))
        for name, color in STRATEGY_COLORS.items():
            pts = [
                (r["goodput_req_per_s"], r[f"{name}_usd_per_hour"])
                for r in curve
                if r.get(f"{name}_usd_per_hour") is not None
            ]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color=color, label=name)
        ax.axvline(plan["goodput_target_req_per_s"], color="#718096", linestyle=":", linewidth=1)
        ax.set_xlabel("goodput target (req/s)")
        ax.set_ylabel("$/hour")
        ax.set_title("Cost versus goodput target")
        ax.legend(frameon=False)
        return _svg(fig)


def latency_vs_slo(plan: dict[str, Any]) -> str | None:
    """Two panels, TTFT and TPOT at the SLO percentile: the planner's prediction (the slowest combo's) and the
    simulated check's figure, against the SLO as a dashed line. None when the plan has neither figure."""
    slo = plan["slo"]
    combos = [d for d in plan["deployment"] if "predicted_ttft_s" in d]
    v = plan.get("verification") or {}
    predicted = {
        "TTFT": max((d["predicted_ttft_s"] for d in combos), default=None),
        "TPOT": max((d["predicted_tpot_s"] for d in combos), default=None),
    }
    simulated = {"TTFT": v.get("ttft_q_s"), "TPOT": v.get("tpot_q_s")}
    if all(x is None for x in (*predicted.values(), *simulated.values())):
        return None
    q = f"p{slo['percentile']:g}"
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(6.5, 2.8))
        for ax, metric, limit in zip(axes, ("TTFT", "TPOT"), (slo["ttft_s"], slo["tpot_s"]), strict=True):
            ms = limit < 1.0  # TPOT in ms, TTFT in s unless its SLO is under a second
            scale, unit = (1e3, "ms") if ms else (1.0, "s")
            bars = [(label, x) for label, x in (("predicted (model)", predicted[metric]),
                                                ("simulated", simulated[metric])) if x is not None]  # fmt: skip
            drawn = ax.bar(
                [b for b, _ in bars],
                [x * scale for _, x in bars],
                color=["#2b6cb0" if b.startswith("predicted") else "#2f855a" for b, _ in bars],
            )
            for bar, (_, x) in zip(drawn, bars, strict=True):
                ax.annotate(f"{x * scale:.3g} {unit}", (bar.get_x() + bar.get_width() / 2, x * scale), ha="center",
                            va="bottom")  # fmt: skip
            ax.axhline(limit * scale, color="#c53030", linestyle="--", linewidth=1.2)
            top = max([limit] + [x for _, x in bars]) * scale
            ax.set_ylim(0, top * 1.3)
            ax.set_ylabel(f"{q} {metric} ({unit})")
            ax.set_title(f"{metric}: SLO {limit * scale:g} {unit} (dashed)")
        fig.tight_layout()
        return _svg(fig)


def schedule_over_time(sched: dict[str, Any]) -> str:
    """Two panels over time: demand against available capacity (req/s), and the schedule's $/hour."""
    rows = sched["windows"]
    hours = [r["window_start_s"] / 3600.0 for r in rows]
    with plt.rc_context(RC):
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(9.0, 4.6), sharex=True)
        top.step(
            hours,
            [r["demand_req_per_s"] for r in rows],
            where="post",
            color="#dd6b20",
            linewidth=0.8,
            label="demand (burstiness-adjusted)",
        )
        top.step(
            hours,
            [r["available_capacity_req_per_s"] for r in rows],
            where="post",
            color="#2b6cb0",
            linewidth=0.8,
            label="available capacity",
        )
        top.set_ylabel("req/s")
        top.legend(frameon=False, loc="upper right")
        top.set_title("Demand, capacity and cost over time")
        bottom.step(
            hours, [r["usd_per_hour"] for r in rows], where="post", color="#2f855a", linewidth=0.8, label="schedule"
        )
        peak = sched["summary"]["static_peak_usd"] / sched["summary"]["hours"]
        bottom.axhline(peak, color="#a0aec0", linestyle="--", linewidth=1, label="static peak fleet")
        bottom.set_ylabel("$/hour")
        bottom.set_xlabel("hours since the start of the curve")
        bottom.legend(frameon=False, loc="upper right")
        return _svg(fig)
