"""The part of ``hetplan autoscale``'s document its table reads (:func:`hetplan.cli.render.autoscale.render_summary`),
typed; loaded only when a schedule is printed (pydantic stays out of the CLI's start-up)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class CurveView(_View):
    """The load curve: where it came from."""

    source: str


class SummaryView(_View):
    """The schedule's summary (:func:`hetplan.autoscale.schedule.summary`): windows, costs in $ over the curve,
    demand in req/s, changes and GPU-hours per GPU type."""

    windows: int
    window_s: float
    hours: float
    levels: int
    startup_lag_windows: int
    windows_with_capped_cv: int
    peak_demand_req_per_s: float
    mean_demand_req_per_s: float
    schedule_usd: float
    static_peak_usd: float | None
    static_mean_usd: float | None
    saving_vs_static_peak: float | None
    nesting: str
    per_window_optimum_usd: float | None
    short_windows: int
    static_mean_short_windows: int
    combo_changes: int
    windows_with_changes: int
    gpu_hours: dict[str, float]


class ScheduleView(_View):
    """What the table shows of a schedule document: the scenario's name, the curve, the summary, warnings."""

    scenario: str
    curve: CurveView
    summary: SummaryView
    warnings: list[str] = []


__all__ = ["CurveView", "ScheduleView", "SummaryView"]
