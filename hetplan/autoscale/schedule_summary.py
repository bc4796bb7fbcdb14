"""What an autoscaling schedule reports: its summary (costs against the static fleets, shortfalls, changes, owned
GPUs' idle hours, instances) and its per-window rows (:func:`summary`, :func:`rows`), from a
:class:`~hetplan.autoscale.schedule.Schedule`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetplan.autoscale.fleet_cost import fleet_changes, used_gpus
from hetplan.autoscale.schedule import Schedule


def summary(s: Schedule) -> dict[str, Any]:
    """Costs, short windows and GPU-hours of a schedule against static peak and mean fleets (JSON-friendly)."""
    hours_per_window = s.curve.window_s / 3600.0
    cost = float(s.cost_per_window().sum() * hours_per_window)
    avail_cap = s.capacity(s.available_level)
    short = avail_cap + 1e-9 < s.demand_req_per_s
    peak_cost = s.static_usd_per_hour(s.static_peak) * s.hours if s.static_peak else None
    mean_cap = s.static_mean.goodput_req_per_s if s.static_mean else 0.0
    mean_short = s.demand_req_per_s > mean_cap + 1e-9
    gpu_hours: dict[str, float] = {}
    for w in range(s.curve.windows):
        fleet = s.fleets[int(s.requested_level[w])]
        for combo, n in zip(s.combos, fleet.counts, strict=True):
            for gpu, k in combo.gpus_used().items():
                gpu_hours[gpu] = gpu_hours.get(gpu, 0.0) + k * n * hours_per_window
    changes = [
        fleet_changes(s.fleets[int(a)], s.fleets[int(b)])
        for a, b in zip(s.requested_level[:-1], s.requested_level[1:], strict=True)
    ]
    deficit = np.where(short, s.demand_req_per_s - avail_cap, 0.0)
    return {
        "windows": s.curve.windows,
        "window_s": s.curve.window_s,
        "hours": round(s.hours, 4),
        "levels": len(s.levels),
        "startup_lag_windows": s.lag_windows,
        "windows_with_capped_cv": s.capped_cv_windows,
        "peak_demand_req_per_s": round(float(s.demand_req_per_s.max()), 6),
        "mean_demand_req_per_s": round(float(s.demand_req_per_s.mean()), 6),
        "schedule_usd": round(cost, 2),
        "static_peak_usd": None if peak_cost is None else round(peak_cost, 2),
        "static_mean_usd": None if s.static_mean is None else round(s.static_usd_per_hour(s.static_mean) * s.hours, 2),
        "saving_vs_static_peak": None if not peak_cost else round(1 - cost / peak_cost, 4),
        "nesting": s.nesting,
        "per_window_optimum_usd": None
        if s.per_window_optimum_usd_per_hour is None
        else round(float(s.per_window_optimum_usd_per_hour.sum() * hours_per_window), 2),
        "short_windows": int(short.sum()),
        "largest_shortfall_req_per_s": round(float(deficit.max()), 6),
        "static_mean_short_windows": int(mean_short.sum()),
        "combo_changes": int(sum(changes)),
        "windows_with_changes": int(sum(1 for c in changes if c)),
        "gpu_hours": {g: round(v, 2) for g, v in sorted(gpu_hours.items())},
        **({} if s.costing is None else _owned_summary(s, hours_per_window)),
        **({} if s.pricing is None else _instance_summary(s, hours_per_window)),
    }


def _instance_summary(s: Schedule, hours_per_window: float) -> dict[str, Any]:
    """Rented instance-hours per offer of a schedule priced in whole instances (:class:`InstancePricing`)."""
    assert s.pricing is not None
    hours: dict[str, float] = {}
    for w in range(s.curve.windows):
        for p in s.fleets[int(s.requested_level[w])].purchase:
            if not p.owned:
                key = f"{p.provider} {p.instance_type}" + (f" ({p.region})" if p.region else "")
                hours[key] = hours.get(key, 0.0) + p.count * hours_per_window
    return {
        "pricing": "whole instances: owned nodes in every window, rented instances bought per window",
        "rented_site": s.pricing.site or None,
        "rented_instance_hours": {k: round(v, 2) for k, v in sorted(hours.items())},
    }


def _owned_summary(s: Schedule, hours_per_window: float) -> dict[str, Any]:
    """Owned GPUs of a schedule: always paid (``owned_fixed_usd``), and their idle GPU-hours per type."""
    assert s.costing is not None
    idle: dict[str, float] = {}
    for w in range(s.curve.windows):
        fleet = s.fleets[int(s.requested_level[w])]
        for g, n in s.costing.idle(used_gpus(s.combos, fleet.counts)).items():
            idle[g] = idle.get(g, 0.0) + n * hours_per_window
    return {
        "owned_gpus": dict(s.costing.owned),
        "owned_fixed_usd": round(s.costing.fixed_usd_per_hour * s.hours, 2),
        "owned_idle_gpu_hours": {g: round(v, 2) for g, v in sorted(idle.items())},
        "owned_note": "owned GPUs are paid in every window (their amortised price); switching them off saves "
        "nothing, so the schedule counts only rented GPUs as savings",
    }


def rows(s: Schedule) -> list[dict[str, Any]]:
    """One row per window: demand, requested and available capacity, cost, fleet (for CSV/JSON output)."""
    out = []
    for w in range(s.curve.windows):
        fleet = s.fleets[int(s.requested_level[w])]
        mix = "; ".join(f"{n}x [{c.label}]" for c, n in zip(s.combos, fleet.counts, strict=True) if n)
        out.append(
            {
                "window_start_s": float(s.curve.start_s[w]),
                "rate_req_per_s": round(float(s.curve.rate_req_per_s[w]), 6),
                "demand_req_per_s": round(float(s.demand_req_per_s[w]), 6),
                "requested_capacity_req_per_s": round(fleet.capacity_req_per_s, 6),
                "available_capacity_req_per_s": round(s.fleets[int(s.available_level[w])].capacity_req_per_s, 6),
                "usd_per_hour": round(fleet.usd_per_hour, 4),
                "combos": mix,
            }
        )
    return out
