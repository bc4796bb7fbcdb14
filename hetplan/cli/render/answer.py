"""The first screen of ``hetplan plan``'s terminal answer, for a buyer (issue 31): the verdict, the decision in
purchase terms (instances, provider, region, $/h and $/month), the owned GPUs' use, the traffic left out of sizing
and why, the confidence (out of sample and against the model's own error), then the other strategies as one number
each. Plain strings, so the same lines print on any console and tests read them without a terminal.

Comparisons follow one fixed rule (:func:`hetplan.units.cost_vs`): another plan's cost against this plan's,
"X % more" or "X % less" of this plan's $/h ("the same" within half a cent; dollars when either costs $0/h, owned
GPUs without a price).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from hetplan.units import cost_vs, format_duration

#: How providers are written in the decision sentence (others as the catalog spells them).
PROVIDER_NAMES = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "lambda": "Lambda", "runpod": "RunPod",
                  "nebius": "Nebius"}  # fmt: skip


def money_per_month(usd: float) -> str:
    """``$71.8k/month``, ``$730/month``, ``$1.23M/month``: a monthly figure a manager reads at a glance."""
    if usd >= 1e6:
        return f"${usd / 1e6:.3g}M/month"
    if usd >= 1e3:
        return f"${usd / 1e3:.1f}k/month"
    return f"${usd:,.0f}/month"


def decision_line(doc: dict[str, Any]) -> str:
    """``decision: rent 1 AWS p5.48xlarge in us-east-1: $98.32/h, $71.8k/month``; owned nodes the plan uses are
    named too (``use 1 owned 8-GPU L40S node``); a plan without purchase lines names its GPUs."""
    rented: dict[tuple[str, str], list[str]] = {}
    owned: list[str] = []
    for p in doc.get("purchase") or []:
        if p.get("owned"):
            n = int(p["count"])
            owned.append(f"{n} owned {p['gpus_per_instance']}-GPU {p['gpu']} node{'s' if n != 1 else ''}")
            continue
        provider = str(p.get("provider", ""))
        key = (provider, str(p.get("region") or ""))
        rented.setdefault(key, []).append(f"{p['count']} {PROVIDER_NAMES.get(provider, provider)} {p['instance_type']}")
    parts = []
    for (_, region), items in rented.items():
        parts.append(f"rent {' and '.join(items)}" + (f" in {region}" if region else ""))
    if owned:
        parts.append("use " + " and ".join(owned))
    if not parts:  # no instance offers (per-GPU prices): the GPUs
        parts.append("run " + ", ".join(f"{n}x {g}" for g, n in (doc.get("gpus_used") or {}).items()))
    usd = float(doc["total_usd_per_hour"])
    month = doc.get("usd_per_month")
    cost = f"${usd:,.2f}/h" + (f", {money_per_month(float(month))}" if month is not None else "")
    return f"decision: {'; '.join(parts)}: {cost}"


def traffic_line(doc: dict[str, Any]) -> str | None:
    """The traffic the plan was sized without, and why: ``traffic: 230 of 2,728 requests (8.4 %) left out: prompt
    over the 32,768-token window; trace 3.03 req/s with them`` (None when nothing was left out)."""
    left = (doc["scenario"].get("workload") or {}).get("over_context")
    if not isinstance(left, dict) or not (left.get("refused") or left.get("truncated")):
        return None
    total = int(left["requests_total"])
    text = "traffic: "
    if left.get("refused"):
        text += (
            f"{left['refused']:,} of {total:,} requests ({left['refused'] / total * 100:.1f} %) left out: prompt over "
            f"the {left['window_tokens']:,}-token window"
        )
    if left.get("truncated"):
        text += ("; " if left.get("refused") else "") + f"{left['truncated']:,} outputs cut at the window"
    if left.get("arrival_rate_per_s") is not None:
        text += f"; trace {left['arrival_rate_per_s']:.3g} req/s with them"
    return text


def verdict_line(doc: dict[str, Any]) -> str:
    """One line: whether the simulator held the SLOs with this plan, at what rate, and what it measured."""
    v = doc.get("verification")
    if not isinstance(v, dict):
        return "not simulated (--no-verify): every figure below is the planner's model"
    head = "VERIFIED" if v.get("status") == "verified" else "NOT VERIFIED"
    q = v.get("percentile", doc["scenario"]["slo"]["percentile"])
    att = v.get("attainment")
    target = v.get("target_req_per_s")
    text = f"{head} in simulation on the trace"
    if isinstance(att, (int, float)):
        text += f": {att * 100:.1f} % of requests meet both SLOs (needs {q:g} %)"
    if isinstance(target, (int, float)):
        text += f" at {target:.3g} req/s"
    ttft, tpot = v.get("ttft_p_s"), v.get("tpot_p_s")
    if isinstance(ttft, (int, float)) and isinstance(tpot, (int, float)):
        text += f"; simulated p{q:g} TTFT {format_duration(ttft)}, TPOT {format_duration(tpot)}"
    return text


def confidence_line(doc: dict[str, Any]) -> str | None:
    """Out of sample and against the model's error, from the verification block (None without one)."""
    v = doc.get("verification")
    if not isinstance(v, dict):
        return None
    parts = []
    oos = v.get("out_of_sample")
    if isinstance(oos, dict) and oos.get("runs"):
        runs = ", ".join(
            f"{r['label']} {r['attainment'] * 100:.1f} %"
            for r in oos["runs"]
            if isinstance(r, dict) and isinstance(r.get("attainment"), (int, float))
        )
        parts.append(f"out of sample it {oos.get('status', '-')} ({runs})")
    err = v.get("model_error")
    if isinstance(err, dict):
        margin = err.get("margin_step_slowdown")
        text = "model error: "
        if isinstance(margin, (int, float)):
            text += f"holds with steps up to {margin * 100:.0f} % slower than predicted"
        level = err.get("confidence")
        if level and err.get("holds_at_confidence") is not None:
            text += ("; " if isinstance(margin, (int, float)) else "") + (
                f"{'holds' if err['holds_at_confidence'] else 'misses'} at the model's {level} error"
            )
        parts.append(text)
    return "confidence: " + "; ".join(parts) if parts else None


def comparison_line(doc: dict[str, Any]) -> str | None:
    """``other strategies (the model's cost): homogeneous the same, melange 30.5 % more, mixed infeasible``."""
    this = float(doc["total_usd_per_hour"])
    parts = []
    for name, part in (doc.get("baselines") or {}).items():
        if part.get("status") == "infeasible":
            parts.append(f"{name} infeasible")
        else:
            parts.append(f"{name} {cost_vs(float(part['total_usd_per_hour']), this)}")
    return f"other strategies cost (the model's figures): {', '.join(parts)}" if parts else None


def owned_lines(doc: dict[str, Any]) -> list[str]:
    """``owned L40S: 8 owned, 0 used, 8 idle: <why>``, one per owned type (:mod:`hetplan.planning.owned`)."""
    out = []
    for gpu, row in (doc.get("owned_gpus") or {}).items():
        text = f"owned {gpu}: {row['owned']} owned, {row['used']} used"
        if row.get("idle"):
            text += f", {row['idle']} idle" + (f": {row['idle_reason']}" if row.get("idle_reason") else "")
        out.append(text)
    return out


def answer_lines(doc: dict[str, Any]) -> list[str]:
    """The answer's first lines after the scenario line: traffic left out (when any), the verdict, the decision,
    the owned GPUs, the confidence, the other strategies."""
    lines = [line for line in (traffic_line(doc), verdict_line(doc), decision_line(doc)) if line]
    lines += owned_lines(doc)
    lines += [line for line in (confidence_line(doc), comparison_line(doc)) if line]
    return lines


__all__ = [
    "PROVIDER_NAMES",
    "answer_lines",
    "comparison_line",
    "confidence_line",
    "cost_vs",  # re-exported: hetplan.units.cost_vs
    "decision_line",
    "money_per_month",
    "owned_lines",
    "traffic_line",
    "verdict_line",
]
