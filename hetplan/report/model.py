"""The report document: what every report format renders, built from plan documents without re-solving.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from hetplan import __version__
from hetplan.planning import STRATEGIES

REPORT_SCHEMA_VERSION = 1


def _gpu_label(combo: dict[str, Any]) -> str:
    return (
        f"{combo['n_prefill']}x {combo['prefill_gpu']} TP{combo['prefill_tp']} -> "
        f"{combo['n_decode']}x {combo['decode_gpu']} TP{combo['decode_tp']}"
    )


def combo_label(combo: dict[str, Any]) -> str:
    """Stable human-readable name of a combo or an aggregated instance type."""
    if "prefill_gpu" in combo:
        return _gpu_label(combo)
    return f"{combo['gpu']} TP{combo['tp']} (aggregated)"


def plan_report(plan: dict[str, Any], source: str) -> dict[str, Any]:
    """Report section for one plan document (see module docstring); ``source`` names the plan file."""
    sc = plan["scenario"]
    slo = sc["slo"]
    deployment = []
    for combo in plan.get("combos", []):
        deployment.append(
            {
                "label": combo_label(combo),
                "count": combo["count"],
                "usd_per_hour_each": combo["usd_per_hour"],
                "goodput_req_per_s_each": combo["goodput_req_per_s"],
                "predicted_ttft_s": combo["predicted_ttft_s"],
                "predicted_tpot_s": combo["predicted_tpot_s"],
                "meets_ttft_slo": combo["predicted_ttft_s"] <= slo["ttft_s"],
                "meets_tpot_slo": combo["predicted_tpot_s"] <= slo["tpot_s"],
                "utilization": combo["utilization"],
                "bound_by": combo["bound_by"],
            }
        )
    for inst in plan.get("instances", []):
        deployment.append(
            {
                "label": combo_label(inst),
                "count": inst["count"],
                "usd_per_hour_each": inst["usd_per_hour"],
                "traffic_share": inst["traffic_share"],
                "utilization": inst["utilization"],
            }
        )
    strategies: dict[str, Any] = {plan["strategy"]: _summary(plan)}
    for name, other in plan.get("baselines", {}).items():
        strategies[name] = other if other.get("status") == "infeasible" else _summary(other)
    gains = {}
    for name, part in strategies.items():
        if name != plan["strategy"] and part.get("status") != "infeasible":
            gains[name] = {
                "cost_saved_fraction": round(1 - plan["total_usd_per_hour"] / part["total_usd_per_hour"], 4) + 0.0,
                "tokens_per_usd_ratio": round(plan["tokens_per_usd"] / part["tokens_per_usd"], 4)
                if part["tokens_per_usd"]
                else None,
            }
    analysis = plan.get("analysis", {})
    out = {
        "source": source,
        "name": sc["name"],
        "strategy": plan["strategy"],
        "model": sc["model"],
        "weight_dtype": sc["weight_dtype"],
        "workload": {
            k: sc["workload"][k]
            for k in ("name", "source", "requests", "prompt_tokens_mean", "output_tokens_mean")
            if k in sc["workload"]
        },
        "slo": slo,
        "goodput_target_req_per_s": sc["goodput_target_req_per_s"],
        "demand_req_per_s": sc["demand_req_per_s"],
        "usd_per_hour": plan["total_usd_per_hour"],
        "usd_per_month": plan["usd_per_month"],
        "usd_per_million_tokens": plan.get("usd_per_million_tokens"),
        "goodput_req_per_s": plan["goodput_req_per_s"],
        "tokens_per_usd": plan["tokens_per_usd"],
        "output_tokens_per_usd": plan["output_tokens_per_usd"],
        "tokens_per_usd_basis": plan.get("tokens_per_usd_basis", ""),
        "gpus_used": plan["gpus_used"],
        "prices": {g: p["usd_per_gpu_hour"] for g, p in sc["prices"].items()},
        "price_sources": {g: p["source"] for g, p in sc["prices"].items()},
        "deployment": deployment,
        "strategies": {name: strategies[name] for name in STRATEGIES if name in strategies},
        "gains": gains,
        "price_sensitivity": analysis.get("price_sensitivity", []),
        "cost_vs_goodput": analysis.get("cost_vs_goodput", []),
        "warnings": plan.get("warnings", []),
    }
    if isinstance(plan.get("verification"), dict):  # only then: reports of unverified plans stay as they were
        out["verification"] = verification_report(plan["verification"], slo)
    return out


def verification_report(v: dict[str, Any], slo: dict[str, Any]) -> dict[str, Any]:
    """The report's view of a plan's ``verification`` block (``hetplan plan --verify``, see
    :func:`hetplan.sim.run.verify_plan`; ``resized`` from ``--verify-resize``, see :func:`hetplan.api.plan_verified`).

    Every value may be missing or None in the block (a non-finite percentile is written as null); it stays None here
    and the renderers print it as "-". ``ttft_q_s``/``tpot_q_s`` are the simulated p-``percentile`` TTFT/TPOT in
    seconds; ``slo_held`` is False when the simulation recorded any miss, None when the block says nothing.
    """
    q = slo["percentile"]
    raw = v.get("attainment")
    att: dict[str, Any] = raw if isinstance(raw, dict) else {}
    misses = [str(m) for m in v.get("misses") or []]
    out: dict[str, Any] = {
        "policy": v.get("policy"),
        "target_req_per_s": v.get("target_req_per_s"),
        "rate_scale": v.get("rate_scale"),
        "arrivals": v.get("arrivals"),
        "requests": v.get("requests"),
        "unfinished": v.get("unfinished"),
        "dropped": v.get("dropped"),
        "attainment": {k: att.get(k) for k in ("joint", "ttft", "tpot")},
        "percentile": q,
        "ttft_q_s": v.get(f"ttft_p{q:g}_s"),
        "tpot_q_s": v.get(f"tpot_p{q:g}_s"),
        "slo_ttft_s": slo["ttft_s"],
        "slo_tpot_s": slo["tpot_s"],
        "goodput_req_per_s": v.get("goodput_req_per_s"),
        "goodput_definition": v.get("goodput_definition"),
        "misses": misses,
        "slo_held": (not misses) if "misses" in v else None,
        "summary": v.get("summary"),
        "warnings": [str(w) for w in v.get("warnings") or []],
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


def _summary(part: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "status",
        "gpu",
        "total_usd_per_hour",
        "goodput_req_per_s",
        "tokens_per_usd",
        "output_tokens_per_usd",
        "gpus_used",
    )
    return {k: part[k] for k in keys if k in part}


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
    plans: list[tuple[str, dict[str, Any]]], schedules: list[tuple[str, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The report document for ``(source, plan document)`` pairs and autoscaling schedules, in the given order."""
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "report",
        "hetplan_version": __version__,
        "plans": [plan_report(doc, source) for source, doc in plans],
    }
    if schedules:
        report["schedules"] = [schedule_report(doc, source) for source, doc in schedules]
    return report
