"""``hetplan plan --verify``: a freshly planned deployment simulated on its own workload, with the SLO misses.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.metrics import request_outcomes
from hetplan.sim.policies import get_scheduler
from hetplan.sim.run import SimRequest, prepare_run, run_simulation
from hetplan.units import rnd
from hetplan.workload.context import apply_context_window, context_note
from hetplan.workload.model import RequestStream, Workload, make_stream, stream_from_workload

VERIFY_SEED = 0  # Poisson arrivals for --verify on a workload without timestamps


def verify(plan: Plan, stream: RequestStream, policy: str = "fcfs", rate_scale: float = 1.0) -> dict[str, Any]:
    """Simulate a freshly planned deployment on its own workload (arrivals times ``rate_scale``) and list SLO
    misses.

    Returns:
        ``{"metrics": ..., "ttft_q_s", "tpot_q_s", "misses": [text, ...]}`` where q is the plan's SLO percentile;
        a miss is a q-percentile TTFT/TPOT above its SLO (unfinished and dropped requests count as infinite) or a
        joint attainment below q.
    """
    req = SimRequest(plan, stream, policy=policy, rate_scale=rate_scale)
    dep, scaled = prepare_run(req)
    m, _, res = run_simulation(req, dep, scaled)
    o = request_outcomes(scaled, res)
    slo = {"ttft_s": plan.slo.ttft_s, "tpot_s": plan.slo.tpot_s}
    q = plan.slo.percentile
    ttft = np.where(np.isfinite(o["ttft_s"]) & ~res.dropped, o["ttft_s"], np.inf)
    keep = o["tpot_eligible"]  # TPOT is defined for requests served >= 2 output tokens
    tpot = o["tpot_s"][keep]
    tpot = np.where(np.isfinite(tpot) & ~res.dropped[keep], tpot, np.inf)
    ttft_q = float(np.percentile(ttft, q, method="higher")) if ttft.size else 0.0
    tpot_q = float(np.percentile(tpot, q, method="higher")) if tpot.size else 0.0
    misses = []
    unserved = f"more than {100 - q:g} % of the requests were dropped or never finished"
    if ttft_q > slo["ttft_s"]:
        what = f"{ttft_q:.4g} s" if math.isfinite(ttft_q) else f"unbounded ({unserved})"
        misses.append(f"simulated p{q:g} TTFT {what} exceeds the SLO {slo['ttft_s']:g} s")
    if tpot_q > slo["tpot_s"]:
        what = f"{tpot_q * 1e3:.4g} ms" if math.isfinite(tpot_q) else f"unbounded ({unserved})"
        misses.append(f"simulated p{q:g} TPOT {what} exceeds the SLO {slo['tpot_s'] * 1e3:g} ms")
    if m["attainment"]["joint"] < q / 100:
        misses.append(f"simulated joint SLO attainment {m['attainment']['joint']:.1%} is below {q:g} %")
    # an unbounded percentile (too many requests unserved) is None in the document: JSON has no infinity
    return {
        "metrics": m,
        "ttft_q_s": rnd(ttft_q, 5) if math.isfinite(ttft_q) else None,
        "tpot_q_s": rnd(tpot_q, 5) if math.isfinite(tpot_q) else None,
        "misses": misses,
    }


def verify_plan(plan: Plan, workload: Workload, policy: str = "fcfs") -> dict[str, Any]:
    """``hetplan plan --verify``: simulate the plan on its scenario's workload at the plan's goodput target.

    The trace is replayed with its arrival pattern compressed or stretched to the scenario's
    ``goodput_target_req_per_s`` (rate scale = target ÷ the trace's own rate). A workload without timestamps (a
    length-only file) gets Poisson arrivals at the target from the fixed seed ``VERIFY_SEED``.

    Returns:
        The ``verification`` block of the plan document: policy, target rate, rate scale, how arrivals were made,
        attainment, goodput, percentile TTFT/TPOT, a one-line summary and the list of misses.

    Raises:
        InputError: unknown policy, or a plan the simulator cannot rebuild.
    """
    get_scheduler(policy)
    target = plan.goodput_target_req_per_s
    # requests whose prompt is longer than the context window are refused by any deployment: the planner leaves
    # them out of its length distribution (hetplan.workload.context), so the check leaves them out too instead of
    # counting them as misses; outputs cut at the window are served cut (the simulator applies the same rule)
    spec = deployment_from_plan(plan).arch.spec
    window = spec.max_position_embeddings
    ctx = apply_context_window(workload.prompt_tokens, workload.output_tokens, window)
    left_out = ctx.n_refused
    if left_out == workload.n_requests:
        raise InputError(
            f"every request's prompt is longer than the model's {window:,}-token context window",
            fix="use a model with a longer context or a trace of shorter prompts",
        )
    if left_out:
        fits = ~ctx.refused
        workload = replace(
            workload,
            prompt_tokens=workload.prompt_tokens[fits],
            output_tokens=workload.output_tokens[fits],
            arrival_s=None if workload.arrival_s is None else workload.arrival_s[fits],
        )
    if workload.arrival_s is None:
        rng = np.random.default_rng(VERIFY_SEED)
        arrival = np.cumsum(rng.exponential(1.0 / target, workload.n_requests))
        stream = make_stream(arrival, workload.prompt_tokens, workload.output_tokens,
                             [workload.name] * workload.n_requests, source=workload.source)  # fmt: skip
        scale = 1.0
        arrivals = f"Poisson arrivals at {target:g} req/s (seed {VERIFY_SEED}; the workload has no timestamps)"
    else:
        stream = stream_from_workload(workload)
        own = stream.n / stream.duration_s if stream.n > 1 and stream.duration_s > 0 else target
        scale = target / own
        arrivals = f"trace arrivals scaled x{scale:.4g} from {own:.4g} to the target {target:g} req/s"
    v = verify(plan, stream, policy, scale)
    m = v["metrics"]
    q = plan.slo.percentile
    ttft_text = "unbounded" if v["ttft_q_s"] is None else f"{v['ttft_q_s']:.3g} s"
    tpot_text = "unbounded" if v["tpot_q_s"] is None else f"{v['tpot_q_s'] * 1e3:.3g} ms"
    summary = (
        f"simulated {m['requests']} request{'' if m['requests'] == 1 else 's'} ({policy.lower()}) at the goodput "
        f"target {target:g} req/s ({arrivals}): "
        f"joint SLO attainment {m['attainment']['joint']:.1%}, p{q:g} TTFT {ttft_text}, p{q:g} TPOT "
        f"{tpot_text}, goodput {m['goodput_req_per_s']:.3g} req/s"
        + (f"; {note} (refused ones left out)" if (note := context_note(left_out, ctx.n_truncated, window)) else "")
    )
    return {
        "policy": policy.lower(),
        "target_req_per_s": target,
        "rate_scale": rnd(scale, 6),
        "arrivals": arrivals,
        "requests": m["requests"],
        "unfinished": m["unfinished"],
        "dropped": m["dropped"] + m["dropped_over_context"],
        "left_out_over_context": left_out,
        "truncated_at_context": ctx.n_truncated,
        "tpot_ineligible": m["tpot_ineligible"],
        "attainment": m["attainment"],
        "goodput_req_per_s": m["goodput_req_per_s"],
        "goodput_definition": m["goodput_definition"],
        f"ttft_p{q:g}_s": v["ttft_q_s"],
        f"tpot_p{q:g}_s": v["tpot_q_s"],
        "summary": summary,
        "misses": v["misses"],
        "warnings": m["warnings"],
    }


__all__ = ["VERIFY_SEED", "verify", "verify_plan"]
