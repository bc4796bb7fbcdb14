"""Autoscaling schedules: the combo schedule of a scenario over a load curve, and the plan it deploys.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from hetplan import __version__
from hetplan.autoscale.curves import MAX_WINDOW_S, MIN_WINDOW_S
from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import format_validation
from hetplan.errors import InputError
from hetplan.plan.doc import to_doc
from hetplan.plan.types import DEFAULT_ENGINE, HOURS_PER_MONTH, Plan, Provenance
from hetplan.planning.request import build_request, workload_sha256
from hetplan.scenario import Scenario
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings
from hetplan.units import parse_duration_s, rnd

if TYPE_CHECKING:
    from hetplan.autoscale.schedule import Schedule
    from hetplan.plan.deployment import ComboUnit
    from hetplan.solvers.cauchy import PlanRequest
    from hetplan.workload.model import Workload


def autoscale(
    scenario: Scenario,
    spec: dict[str, Any],
    curve_path: Path | None = None,
    diurnal_text: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    solve: SolveSettings | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """Plan the combo schedule of ``scenario`` over a load curve (``hetplan autoscale``); ``progress(done, total)``
    as the demand levels are solved; ``solve``: how its MILPs run (:class:`hetplan.solvers.milp.SolveSettings`);
    ``catalog``: the GPUs, models, prices and fitted curves to plan with (None: the shipped catalogs).

    ``spec`` holds :class:`hetplan.scenario_blocks.AutoscaleSpec` fields (durations as text); the curve comes from
    ``curve_path`` (ServeGen per-window CSV or a request trace) or ``diurnal_text`` ("DAYS,PEAK,TROUGH").

    Returns a document with ``summary`` (costs, short windows, GPU-hours), ``windows`` (one row each), ``curve`` and
    ``deployment``: a plan document (:func:`deployment_plan`) whose combos carry ``min_count`` (fewest copies) and
    ``count`` (most) for autoscaler bounds.

    Raises:
        InputError: bad settings or curve. InfeasibleError: the peak cannot be served.
    """
    from hetplan.autoscale.curves import diurnal, load_curve
    from hetplan.autoscale.schedule import ScheduleSettings, build_schedule
    from hetplan.autoscale.schedule_summary import rows, summary
    from hetplan.scenario_blocks import AutoscaleSpec

    catalog = catalog or Catalog.shipped()

    try:
        parsed = AutoscaleSpec.model_validate(spec)
    except ValidationError as exc:
        raise InputError("invalid autoscale settings", format_validation(exc), "fix the named values") from None
    window_s = None if parsed.window is None else parse_duration_s(parsed.window, "window", MIN_WINDOW_S, MAX_WINDOW_S)
    if diurnal_text is not None:
        parts = [p.strip() for p in diurnal_text.split(",")]
        try:
            days, peak, trough = (float(p) for p in parts)
        except ValueError:
            raise InputError(
                f"--diurnal {diurnal_text!r}: expected DAYS,PEAK,TROUGH", fix="e.g. --diurnal 7,12,2"
            ) from None
        curve = diurnal(days, window_s or 600.0, peak, trough)
    else:
        assert curve_path is not None
        curve = load_curve(curve_path, window_s)
    lags = tuple(
        sorted(
            (catalog.find_gpu(g).name, parse_duration_s(v, f"startup lag of {g}", 0.0, 86400.0))
            for g, v in parsed.startup_lag_by_gpu.items()
        )
    )
    settings = ScheduleSettings(
        startup_lag_s=lags,
        default_startup_lag_s=parse_duration_s(parsed.startup_lag, "startup_lag", 0.0, 86400.0),
        cooldown_s=parse_duration_s(parsed.cooldown, "cooldown", 0.0, 7 * 86400.0),
        hysteresis=parsed.hysteresis,
        max_changes_per_window=parsed.max_changes_per_window,
        min_goodput_req_per_s=parsed.min_goodput_req_per_s,
        level_step=parsed.level_step,
        design_utilization=parsed.design_utilization,
        max_cv=parsed.max_cv,
    )
    req, workload, warnings, gpu_warnings = build_request(
        scenario.model_copy(update={"goodput_req_per_s": 1.0}), solve=solve or DEFAULT_SETTINGS, catalog=catalog
    )
    # the load curve sets the rates window by window: the trace's own burst pattern, replayed at one rate, does not
    # apply to them, so the capacities are the Poisson ones (hetplan.perf.capacity)
    req = replace(req, arrivals=None)
    sched = build_schedule(req, curve, settings, progress)
    sched_summary = summary(sched)
    # the same per-GPU warnings (estimated TFLOPS, illustrative or unreliable prices) as `hetplan plan`, for every
    # GPU type the schedule runs at some point
    scheduled = {gpu for gpu, hours in sched_summary["gpu_hours"].items() if hours}
    warnings = warnings + [text for name, text in gpu_warnings if name in scheduled]
    plan = deployment_plan(scenario, req, workload, sched, warnings, catalog.sha256)
    # written in the plan file's canonical form (hetplan.plan.doc, the one place a plan becomes a dict)
    plan_doc = to_doc(plan)
    return {
        "schema_version": 1,
        "kind": "autoscale-schedule",
        "hetplan_version": __version__,
        "scenario": scenario.name,
        "curve": {
            "name": curve.name,
            "source": curve.source,
            "attribution": curve.attribution,
            "window_s": curve.window_s,
            "windows": curve.windows,
        },
        "settings": {
            "startup_lag_s": settings.default_startup_lag_s,
            "startup_lag_by_gpu_s": dict(lags),
            "cooldown_s": settings.cooldown_s,
            "hysteresis": settings.hysteresis,
            "max_changes_per_window": settings.max_changes_per_window,
            "min_goodput_req_per_s": settings.min_goodput_req_per_s,
            "level_step": settings.level_step,
            "design_utilization": settings.design_utilization,
            "max_cv": settings.max_cv,
            "headroom": req.headroom,
        },
        "summary": sched_summary,
        "warnings": warnings,
        "deployment": plan_doc,
        "windows": rows(sched),
    }


AUTOSCALING_NOTE = (
    "combos carry min_count (fewest copies over the schedule, at least 1: pod metrics cannot wake a combo with no "
    "pods) and count (most); the schedule's own cost lets unused combo types drop to zero; predicted latencies are "
    "at full load"
)
"""The deployment's ``autoscaling`` note: what its combos' counts mean."""


def deployment_plan(
    scenario: Scenario,
    req: PlanRequest,
    workload: Workload,
    sched: Schedule,
    warnings: Sequence[str],
    catalog_sha: str,
) -> Plan:
    """The typed plan schedule ``sched`` deploys: every combo type it uses, deployed ``count`` = its most copies
    over the windows with ``min_count`` = its fewest (at least 1: pod metrics cannot wake a combo with no pods), the
    autoscaler's bounds; latencies predicted at full load (the most a copy carries before the autoscaler adds one);
    totals ($/hour, req/s, tokens/USD) at the most copies of each. The scenario echo is ``req``'s (the request the
    schedule's levels were solved for) sized for the curve's peak at headroom 0; provenance hashes the catalog
    (``catalog_sha``), the workload and a perf calibration file, as plans do.
    """
    from hetplan.planning.deployed import combo_unit
    from hetplan.planning.echo import scenario_fields
    from hetplan.planning.solve import Planner

    planner = Planner(req, (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean())))
    peak_req = replace(req, goodput_req_per_s=float(sched.demand_req_per_s.max()), headroom=0.0)
    counts = np.array([sched.fleets[int(i)].counts for i in sched.requested_level])
    tokens = sum(planner.token_means)
    combos: list[ComboUnit] = []
    for k, combo in enumerate(sched.combos):
        high, low = int(counts[:, k].max()), int(counts[:, k].min())
        if high:
            unit = combo_unit(peak_req, planner.cands, combo, high, combo.goodput_req_per_s * (1 - 1e-9), tokens)
            combos.append(replace(unit, min_count=max(low, 1)))
    used: dict[str, int] = {}
    for c in combos:
        for gpu, n in ((c.prefill_gpu, c.n_prefill * c.prefill_tp), (c.decode_gpu, c.n_decode * c.decode_tp)):
            used[gpu] = used.get(gpu, 0) + n * c.count
    total = sum(c.usd_per_hour * c.count for c in combos)
    goodput = sum(c.goodput_req_per_s * c.count for c in combos)
    return Plan(
        strategy="cauchy",
        status="optimal",
        total_usd_per_hour=rnd(total),
        usd_per_month=rnd(total * HOURS_PER_MONTH),
        goodput_req_per_s=rnd(goodput),
        gpus_used=dict(sorted(used.items())),
        # 0 at $0/h (owned GPUs priced at $0): tokens per dollar is not defined, as in plan files
        tokens_per_usd=rnd(3600 * goodput * tokens / total) if total > 0 else 0.0,
        output_tokens_per_usd=rnd(3600 * goodput * planner.token_means[1] / total) if total > 0 else 0.0,
        provenance=Provenance(
            __version__, catalog_sha, workload_sha256(scenario), req.settings.calibration_sha256 or None
        ),
        combos=tuple(combos),
        warnings=tuple(warnings),
        engine=DEFAULT_ENGINE,
        autoscaling=AUTOSCALING_NOTE,
        **scenario_fields(req, scenario, workload, peak_req, {}),
    )


__all__ = ["AUTOSCALING_NOTE", "autoscale", "deployment_plan"]
