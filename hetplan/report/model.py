"""The report document: what every report format renders, built from plan documents without re-solving.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetplan import __version__
from hetplan.catalog.loader import format_validation
from hetplan.errors import InputError
from hetplan.plan.types import STRATEGIES, Plan
from hetplan.plan.types import combo_label as _label
from hetplan.units import cost_vs

REPORT_SCHEMA_VERSION = 1


def combo_label(combo: dict[str, Any]) -> str:
    """Stable human-readable name of a combo or an aggregated instance type (from its document form)."""
    if "prefill_gpu" in combo:
        c = combo
        return _label(c["n_prefill"], c["prefill_gpu"], c["prefill_tp"], c["n_decode"], c["decode_gpu"], c["decode_tp"])
    return f"{combo['gpu']} TP{combo['tp']} (aggregated)"


def saved_fraction(usd_per_hour: float, other_usd_per_hour: float) -> float | None:
    """``1 - usd_per_hour / other_usd_per_hour`` rounded to 4 places (negative when this costs more); None when the
    other costs $0/h (an all-owned fleet without a price), where no fraction is defined."""
    if not other_usd_per_hour > 0:
        return None
    return round(1 - usd_per_hour / other_usd_per_hour, 4) + 0.0


def per_usd(value: float | None, usd_per_hour: float) -> float | None:
    """A tokens/USD figure for the report: None when the cost is $0/h (owned GPUs without a price; the plan file
    writes 0 there, and tokens per dollar is not defined)."""
    return value if usd_per_hour > 0 else None


def plan_report(plan: Plan, source: str) -> dict[str, Any]:
    """Report section for one typed plan (see module docstring); ``source`` names the plan file."""
    slo = {"ttft_s": plan.slo.ttft_s, "tpot_s": plan.slo.tpot_s, "percentile": plan.slo.percentile}
    deployment: list[dict[str, Any]] = []
    cross_provider = "cross_provider" in plan.scenario_extra  # planned with --allow-cross-provider
    for combo in plan.combos:
        label = combo.label
        if cross_provider and combo.site:  # each role's site; a cross-site combo says so
            label += (
                f" (prefill at {combo.site}, decode at {combo.decode_site}: cross-site, KV over the WAN)"
                if combo.cross_site
                else f" (at {combo.site})"
            )
        deployment.append(
            {
                "label": label,
                "count": combo.count,
                "usd_per_hour_each": combo.usd_per_hour,
                "goodput_req_per_s_each": combo.goodput_req_per_s,
                "predicted_ttft_s": combo.predicted_ttft_s,
                "predicted_tpot_s": combo.predicted_tpot_s,
                "meets_ttft_slo": combo.predicted_ttft_s <= plan.slo.ttft_s,
                "meets_tpot_slo": combo.predicted_tpot_s <= plan.slo.tpot_s,
                "utilization": combo.utilization,
                "bound_by": combo.bound_by,
            }
        )
    for inst in plan.instances:
        deployment.append(
            {
                "label": f"{inst.gpu} TP{inst.tp} (aggregated)",
                "count": inst.count,
                "usd_per_hour_each": inst.usd_per_hour,
                "traffic_share": inst.traffic_share,
                "utilization": inst.utilization,
            }
        )
    own = {
        "status": plan.status,
        **({"gpu": plan.extra["gpu"]} if "gpu" in plan.extra else {}),
        "total_usd_per_hour": plan.total_usd_per_hour,
        "goodput_req_per_s": plan.goodput_req_per_s,
        "tokens_per_usd": per_usd(plan.tokens_per_usd, plan.total_usd_per_hour),
        "output_tokens_per_usd": per_usd(plan.output_tokens_per_usd, plan.total_usd_per_hour),
        "gpus_used": dict(plan.gpus_used),
    }
    strategies: dict[str, Any] = {plan.strategy: own}
    for name, other in plan.baselines.items():
        if other.status == "infeasible":
            strategies[name] = {"status": "infeasible", "reason": other.reason}
        else:
            strategies[name] = {
                k: v
                for k, v in (
                    ("status", other.status),
                    ("gpu", other.gpu),
                    ("total_usd_per_hour", other.total_usd_per_hour),
                    ("goodput_req_per_s", other.goodput_req_per_s),
                    ("tokens_per_usd", per_usd(other.tokens_per_usd, other.total_usd_per_hour or 0.0)),
                    ("output_tokens_per_usd", per_usd(other.output_tokens_per_usd, other.total_usd_per_hour or 0.0)),
                    ("gpus_used", dict(other.gpus_used or {})),
                )
                if v is not None
            }
    gains = {}
    for name, part in strategies.items():
        if name != plan.strategy and part.get("status") != "infeasible":
            gains[name] = {
                "cost_saved_fraction": saved_fraction(plan.total_usd_per_hour, part["total_usd_per_hour"]),
                "tokens_per_usd_ratio": round(plan.tokens_per_usd / part["tokens_per_usd"], 4)
                if plan.total_usd_per_hour > 0 and part.get("tokens_per_usd") and part["total_usd_per_hour"] > 0
                else None,
            }
    analysis = plan.extra.get("analysis") or {}
    workload = plan.scenario_extra.get("workload") or {}
    out = {
        "source": source,
        "name": plan.name,
        "strategy": plan.strategy,
        "model": plan.model.spec.name,
        "weight_dtype": plan.weight_dtype,
        **({"quality_note": plan.extra["quality_note"]} if plan.extra.get("quality_note") else {}),
        "engine": plan.settings.engine,
        "engine_version": plan.settings.engine_version,
        "workload": {
            k: workload[k]
            for k in ("name", "source", "requests", "prompt_tokens_mean", "output_tokens_mean", "over_context")
            if k in workload
        },
        "slo": slo,
        "goodput_target_req_per_s": plan.goodput_target_req_per_s,
        "demand_req_per_s": plan.demand_req_per_s,
        "usd_per_hour": plan.total_usd_per_hour,
        "usd_per_month": plan.usd_per_month,
        "usd_per_million_tokens": plan.extra.get("usd_per_million_tokens"),
        "goodput_req_per_s": plan.goodput_req_per_s,
        "tokens_per_usd": per_usd(plan.tokens_per_usd, plan.total_usd_per_hour),
        "output_tokens_per_usd": per_usd(plan.output_tokens_per_usd, plan.total_usd_per_hour),
        "tokens_per_usd_basis": plan.extra.get("tokens_per_usd_basis", ""),
        "gpus_used": dict(plan.gpus_used),
        "prices": {g: p.usd_per_gpu_hour for g, p in plan.prices.items()},
        "price_sources": {g: p.source for g, p in plan.prices.items()},
        "deployment": deployment,
        "strategies": {name: strategies[name] for name in STRATEGIES if name in strategies},
        "gains": gains,
        "price_sensitivity": analysis.get("price_sensitivity", []),
        "cost_vs_goodput": analysis.get("cost_vs_goodput", []),
        "warnings": list(plan.warnings),
    }
    if plan.verification is not None:  # only then: reports of unverified plans stay as they were
        out["verification"] = verification_report(plan.verification.to_doc(), slo)
    out["decision"] = decision(plan, out)
    return out


#: Weight and KV-cache dtypes below 16 bits: they change the model's outputs, so the report lists them.
QUALITY_NOTES = {
    "fp8": "8-bit floating point",
    "int8": "8-bit integer",
    "int4": "4-bit integer",
}


def _gpu_roles(plan: Plan) -> dict[str, dict[str, int]]:
    """GPUs of each type by role (prefill, decode, aggregated), over every copy of every combo or instance type."""
    roles: dict[str, dict[str, int]] = {}
    for c in plan.combos:
        pre = roles.setdefault(c.prefill_gpu, {})
        pre["prefill"] = pre.get("prefill", 0) + c.count * c.n_prefill * c.prefill_tp * c.prefill_pp
        dec = roles.setdefault(c.decode_gpu, {})
        dec["decode"] = dec.get("decode", 0) + c.count * c.n_decode * c.decode_tp * c.decode_pp
    for inst in plan.instances:
        agg = roles.setdefault(inst.gpu, {})
        agg["aggregated"] = agg.get("aggregated", 0) + inst.count * inst.tp * inst.pp
    return roles


def _instances_by_role(plan: Plan, role: str) -> list[str]:
    """``["4x A100-80GB-SXM TP2"]``: the instances of one role (prefill or decode), summed over combo copies."""
    counts: dict[tuple[str, int], int] = {}
    for c in plan.combos:
        gpu, tp, n = (
            (c.prefill_gpu, c.prefill_tp, c.n_prefill) if role == "prefill" else (c.decode_gpu, c.decode_tp, c.n_decode)
        )
        counts[(gpu, tp)] = counts.get((gpu, tp), 0) + c.count * n
    return [f"{n}x {gpu} TP{tp}" for (gpu, tp), n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]


def _best_single_type(out: dict[str, Any]) -> dict[str, Any] | None:
    """The homogeneous baseline (the best single-GPU-type fleet) as the report shows it, or None when the plan
    carries none."""
    own = out["strategies"].get(out["strategy"], {})
    if out["strategy"] == "homogeneous":
        return {"status": "this plan", "usd_per_hour": own.get("total_usd_per_hour"), "gpu": own.get("gpu")}
    base = out["strategies"].get("homogeneous")
    if base is None:
        return None
    if base.get("status") == "infeasible":
        return {"status": "infeasible", "reason": base.get("reason")}
    cost = base["total_usd_per_hour"]
    return {
        "status": base.get("status"),
        "usd_per_hour": cost,
        "gpu": base.get("gpu") or ", ".join(base.get("gpus_used", {})),
        "saved_fraction": saved_fraction(out["usd_per_hour"], cost) if cost is not None else None,
    }


def decision(plan: Plan, out: dict[str, Any]) -> dict[str, Any]:
    """The report's first block: what to run, what it costs and saves, whether the simulator verified it, what each
    GPU type does, where the prices come from, purchases (when the plan lists instance offers), quality changes and
    the owned GPUs' use (``owned``: one row per owned type, from the plan's ``owned_gpus`` block).

    ``out`` is the rest of the plan's report section (:func:`plan_report`). Money in $/hour; ``saved_fraction`` is
    1 - plan cost / best single-GPU-type fleet's cost (negative when the plan costs more).
    """
    cost = f"${plan.total_usd_per_hour:,.2f}/h"
    if plan.combos:
        what = (
            f"Run {' + '.join(_instances_by_role(plan, 'prefill'))} for prefill and "
            f"{' + '.join(_instances_by_role(plan, 'decode'))} for decode"
        )
        if plan.instances:  # a mixed plan: aggregated instances too, requests routed by prompt length
            what += (
                ", and " + " + ".join(f"{i.count}x {i.gpu} TP{i.tp}" for i in plan.instances) + " aggregated"
                + (f" (by request size: {plan.extra['assignment']})" if plan.extra.get("assignment") else "")
            )  # fmt: skip
    else:
        what = "Run " + " + ".join(f"{i.count}x {i.gpu} TP{i.tp}" for i in plan.instances) + " (aggregated)"
    best = _best_single_type(out)
    if best is None:
        vs = ""
    elif best["status"] == "this plan":
        vs = ": this plan is the best single-GPU-type fleet"
    elif best["status"] == "infeasible":
        vs = "; no single-GPU-type fleet holds the SLOs within the inventory"
    elif (best.get("saved_fraction") is not None and abs(best["saved_fraction"]) < 5e-4) or (
        best.get("saved_fraction") is None and best.get("usd_per_hour") == plan.total_usd_per_hour
    ):
        vs = f", the same as the best single-GPU-type fleet ({best['gpu']})"
    else:  # one rule for every comparison (hetplan.units.cost_vs): the other fleet against this plan
        fleet = f"({best['gpu']}, ${best['usd_per_hour']:,.2f}/h)"
        vs = f"; the best single-GPU-type fleet {fleet} costs {cost_vs(best['usd_per_hour'], plan.total_usd_per_hour)}"
    v = out.get("verification")
    if v is None:
        verdict = "not simulated (planned with --no-verify): every figure is the planner's model"
        status = "not simulated"
    else:
        verdict = str(v.get("verdict") or v.get("summary") or "-")
        status = str(v.get("status") or "-")
    roles = _gpu_roles(plan)
    role_rows = []
    for gpu in sorted(roles):
        parts = [f"{n} GPU{'' if n == 1 else 's'} {role}" for role, n in roles[gpu].items() if n]
        role_rows.append({"gpu": gpu, **roles[gpu], "text": ", ".join(parts)})
    # what the purchases pay per GPU-hour: an 8-GPU instance can cost more per GPU than the catalog's lowest
    # per-GPU offer (the L40S's 1-GPU g6e.2xlarge), and the report must not show the lower figure alone
    bought: dict[str, list[Any]] = {}
    for line in plan.purchase:
        b = bought.setdefault(line.gpu, [0.0, 0, []])
        b[0] += line.count * line.usd_per_hour_each
        b[1] += line.count * line.gpus_per_instance
        b[2].append(f"{line.count}x {line.instance_type}")
    prices = [
        {
            "gpu": gpu,
            "usd_per_gpu_hour": price.usd_per_gpu_hour,
            "gpus": int(plan.gpus_used.get(gpu, 0)),
            "source": price.source,
            **(
                {"usd_per_gpu_hour_bought": round(bought[gpu][0] / bought[gpu][1], 4), "bought_as": bought[gpu][2]}
                if bought.get(gpu) and bought[gpu][1]
                else {}
            ),
        }
        for gpu, price in sorted(plan.prices.items())
        if plan.gpus_used.get(gpu)
    ]
    quality = []
    for what_dtype, dtype in (("weights", plan.weight_dtype), ("KV cache", plan.kv_dtype)):
        if dtype in QUALITY_NOTES:
            quality.append(
                f"{what_dtype} in {dtype} ({QUALITY_NOTES[dtype]}), not the 16-bit checkpoint: outputs change; check "
                "the model's quality on your own evaluations before deploying"
            )
    purchase: list[Any] = [dataclasses.asdict(line) for line in plan.purchase]  # the typed lines (issue 14)
    if not purchase and isinstance(plan.extra.get("purchase"), list):
        purchase = list(plan.extra["purchase"])
    owned = plan.extra.get("owned_gpus")
    out_owned: dict[str, Any] = {}
    if isinstance(owned, dict) and owned:  # only then: reports of plans without owned GPUs stay as they were
        out_owned["owned"] = [{"gpu": str(g), **row} for g, row in sorted(owned.items())]
    return {
        "sentence": f"{what}: {cost}{vs}.",
        "status": status,
        "verdict": verdict,
        "best_single_gpu_type": best,
        "gpu_roles": role_rows,
        "prices": prices,
        "purchase": purchase,
        "quality": quality,
        # owned GPUs per type and their use, with why idle ones are idle (hetplan.planning.owned)
        **out_owned,
    }


def owned_text(row: dict[str, Any]) -> str:
    """One owned GPU type's use in words: ``8 owned, 0 used, 8 idle: <why>`` (a row of the decision's ``owned``)."""
    text = f"{row.get('owned', 0)} owned, {row.get('used', 0)} used"
    if row.get("idle"):
        text += f", {row['idle']} idle" + (f": {row['idle_reason']}" if row.get("idle_reason") else "")
    return text


def verification_report(v: dict[str, Any], slo: dict[str, Any]) -> dict[str, Any]:
    """The report's view of a plan's ``verification`` block (``hetplan plan``'s simulated check, see
    :func:`hetplan.sim.verify.verify_plan`; ``resized`` after a re-size, see :func:`hetplan.api.plan_verified`):
    the status and verdict line, the analytic and simulated capacities, the figures behind them.

    Every value may be missing or None in the block (a non-finite percentile is written as null); it stays None here
    and the renderers print it as "-". ``ttft_q_s``/``tpot_q_s`` are the simulated p-``percentile`` TTFT/TPOT in
    seconds; ``slo_held`` is False when the simulation recorded any miss, None when the block says nothing.
    """
    q = slo["percentile"]
    raw = v.get("attainment_by_slo", v.get("attainment"))  # blocks before the verdict: attainment was the dict
    att: dict[str, Any] = raw if isinstance(raw, dict) else {}
    misses = [str(m) for m in v.get("misses") or []]
    out: dict[str, Any] = {
        "status": v.get("status"),
        "verdict": v.get("verdict"),
        "analytic_capacity_req_per_s": v.get("analytic_capacity_req_per_s"),
        "simulated_capacity_req_per_s": v.get("simulated_capacity_req_per_s"),
        "policy": v.get("policy"),
        "target_req_per_s": v.get("target_req_per_s"),
        "rate_scale": v.get("rate_scale"),
        "arrivals": v.get("arrivals"),
        "requests": v.get("requests"),
        "unfinished": v.get("unfinished"),
        "dropped": v.get("dropped"),
        "attainment": {k: att.get(k) for k in ("joint", "ttft", "tpot")},
        "percentile": q,
        "ttft_q_s": v.get("ttft_p_s", v.get(f"ttft_p{q:g}_s")),
        "tpot_q_s": v.get("tpot_p_s", v.get(f"tpot_p{q:g}_s")),
        "slo_ttft_s": slo["ttft_s"],
        "slo_tpot_s": slo["tpot_s"],
        "goodput_req_per_s": v.get("goodput_req_per_s"),
        "goodput_definition": v.get("goodput_definition"),
        "misses": misses,
        "slo_held": (not misses) if "misses" in v else None,
        "summary": v.get("summary"),
        "warnings": [str(w) for w in v.get("warnings") or []],
    }
    by_class = v.get("attainment_by_class")
    if isinstance(by_class, dict):  # a workload with classes (only then: single-class reports stay as they were)
        out["attainment_by_class"] = {str(k): by_class[k] for k in sorted(by_class)}
        out["jain_index"] = v.get("jain_index")
    checks = v.get("classes")
    if isinstance(checks, list):  # the scenario's request classes, each against its own SLOs
        keys = ("class", "requests", "attainment", "ttft_p_s", "tpot_p_s", "ttft_slo_s", "tpot_slo_s", "holds")
        out["classes"] = [{k: c.get(k) for k in keys} for c in checks if isinstance(c, dict)]
    cascade = v.get("cascade")
    if isinstance(cascade, dict):  # verified under CASCADE with its calibrated settings
        out["cascade"] = {k: cascade.get(k) for k in ("kappa", "kappa_by_class", "q2", "tier2_order", "quantile")}
    oos = v.get("out_of_sample")
    if isinstance(oos, dict):  # verified out of sample too (only then: older plans' reports stay as they were)
        out["in_sample_status"] = v.get("in_sample_status")
        out["out_of_sample"] = {
            "status": oos.get("status"),
            "split": oos.get("split"),
            "runs": [
                {k: r.get(k) for k in ("label", "requests", "attainment", "ttft_p_s", "tpot_p_s")}
                | {"holds": not r.get("misses")}
                for r in oos.get("runs") or []
                if isinstance(r, dict)
            ],
        }
    error = v.get("model_error")
    if isinstance(error, dict):  # checked against the model's own error (only then: older reports stay as they were)
        keys = ("confidence", "band_ttft", "band_tpot", "band_scope", "holds_at_confidence", "margin_step_slowdown",
                "margin_capped", "summary")  # fmt: skip
        out["model_error"] = {k: error.get(k) for k in keys}
    search = v.get("cheaper_search")
    if isinstance(search, dict) and search.get("tried"):  # searched below a verified plan
        out["cheaper_search"] = {
            "from_usd_per_hour": search.get("from_usd_per_hour"),
            "usd_per_hour_kept": search.get("usd_per_hour_kept"),
            "tried": [
                {k: t.get(k) for k in ("usd_per_hour", "deployment", "status", "joint_attainment", "infeasible")}
                for t in search["tried"]
                if isinstance(t, dict)
            ],
        }
    resized = v.get("resized")
    if isinstance(resized, dict):
        out["resized"] = {
            "headroom_asked": resized.get("headroom_asked"),
            "headroom_used": resized.get("headroom_used"),
            "usd_per_hour_before": resized.get("usd_per_hour_before"),
            "usd_per_hour_after": resized.get("usd_per_hour_after"),
            "attempts": len(resized.get("attempts") or []),
        }
    return out


def _unique_titles(sections: list[dict[str, Any]]) -> None:
    """Give every plan section a ``title`` no other section of the report has: name, model, dtype and strategy,
    then the plan file when two plans share them, then the position when even that repeats."""
    base = [
        f"{p['name']}: {p['model']} ({p['weight_dtype']}, {p.get('engine', 'vllm')}), {p['strategy']} plan"
        for p in sections
    ]
    titles = [t if base.count(t) == 1 else f"{t} ({p['source']})" for t, p in zip(base, sections, strict=True)]
    for i, (t, p) in enumerate(zip(titles, sections, strict=True)):
        p["title"] = t if titles.count(t) == 1 else f"{t} #{i + 1}"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


_NonNeg = Annotated[float, Field(ge=0)]


class ScheduleWindowDoc(_Open):
    """One window of a schedule as the report reads it (start in seconds, rates in req/s, cost in $/hour)."""

    window_start_s: _NonNeg
    demand_req_per_s: _NonNeg
    available_capacity_req_per_s: _NonNeg
    usd_per_hour: _NonNeg


class ScheduleSummaryDoc(_Open):
    """A schedule's ``summary`` as the report reads it: counts, a positive window length and span, costs in $."""

    windows: int = Field(ge=1)
    window_s: float = Field(gt=0)
    hours: float = Field(gt=0)
    schedule_usd: _NonNeg
    static_peak_usd: _NonNeg
    static_mean_usd: _NonNeg | None
    static_mean_short_windows: int | None = Field(default=None, ge=0)
    saving_vs_static_peak: float | None
    per_window_optimum_usd: _NonNeg | None
    short_windows: int = Field(ge=0)
    peak_demand_req_per_s: _NonNeg
    mean_demand_req_per_s: _NonNeg
    combo_changes: int = Field(ge=0)
    windows_with_changes: int = Field(ge=0)
    gpu_hours: dict[str, _NonNeg]


class ScheduleCurveDoc(_Open):
    source: str


class ScheduleDoc(_Open):
    """The part of ``hetplan autoscale --out schedule.json`` that reports read (fields beyond it are kept)."""

    kind: Literal["autoscale-schedule"]
    scenario: str
    curve: ScheduleCurveDoc
    settings: dict[str, Any]
    summary: ScheduleSummaryDoc
    windows: list[ScheduleWindowDoc] = Field(min_length=1)
    warnings: list[str] = Field(default_factory=list)


def check_schedule(doc: dict[str, Any], where: str) -> None:
    """Check a schedule document for everything the report reads (see :class:`ScheduleDoc`).

    Raises:
        InputError: a field missing, of the wrong type, non-finite or out of range (named), e.g. a zero-length
            window or span, or windows without their start, demand, capacity or cost.
    """
    try:
        ScheduleDoc.model_validate(doc)
    except ValidationError as exc:
        raise InputError(
            f"{where} is not a usable schedule",
            format_validation(exc),
            "write one with hetplan autoscale SCENARIO --load-curve FILE --out schedule.json",
        ) from None


def schedule_report(doc: dict[str, Any], source: str) -> dict[str, Any]:
    """Report section for an autoscaling schedule (``hetplan autoscale --out schedule.json``)."""
    return {
        "source": source,
        "scenario": doc["scenario"],
        "curve": doc["curve"],
        "settings": doc["settings"],
        "summary": doc["summary"],
        "windows": doc["windows"],
        "warnings": doc.get("warnings", []),  # schedules written before hetplan carried warnings have none
    }


def build_report(
    plans: list[tuple[str, Plan]], schedules: list[tuple[str, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The report document for ``(source, plan)`` pairs and autoscaling schedules, in the given order."""
    sections = [plan_report(doc, source) for source, doc in plans]
    _unique_titles(sections)
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "report",
        "hetplan_version": __version__,
        "plans": sections,
    }
    if schedules:
        report["schedules"] = [schedule_report(doc, source) for source, doc in schedules]
    return report
