"""``hetplan calibrate``: CASCADE's safety coefficients fitted on a trace, and the router config that carries them.

Each request's unscaled TTFT estimate ``T̂₀ = (T(current load) + T(max load))/2`` is recorded when its prefill is
first scheduled; since the budget subtracts the wait separately (budget = SLO − wait − T̂), T̂ predicts the TTFT
*after* that wait, and κ is the smallest factor with ``P(TTFT − wait ≤ κ·T̂₀) ≥ q`` over the trace, i.e.
``P(TTFT ≤ wait + κ·T̂₀) ≥ q`` (the q-quantile of the ratio, numpy's "higher" method so the share is at least q),
measured under CASCADE with κ = 1. The ratio exceeds 1 where prompts are chunked over several iterations, share
iterations with decoding, or wait for the KV transfer. q₂ is then chosen from :data:`Q2_CANDIDATES` as the share
that gives the highest goodput (requests meeting every SLO over the serving span, see ``metrics``) under CASCADE
with the fitted κ (ties: higher Jain index, then the smaller q₂). The result goes into the plan (``cascade``
block) and into a small router config.

Source: calibration procedure after DESIGN §3.4 (CASCADE calibrates κ on a trace so that P(TTFT ≤ T̂) ≥ q);
the q₂ search is hetplan's own reconstruction (the paper does not say how q₂ is chosen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.policies import CascadeSettings
from hetplan.sim.run import SimRequest, plan_cascade, prepare_run, run_simulation
from hetplan.units import rnd

Q2_CANDIDATES = (0.0, 0.05, 0.1, 0.2, 0.3)
MIN_CALIBRATION_REQUESTS = 50  # fewer first tokens than this: calibrate warns that κ rests on too few samples


def calibrate(req: SimRequest, quantile: float = 0.95, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fit κ and choose q₂ for CASCADE on ``req``'s trace and plan (see the module docstring).

    Returns:
        The ``cascade`` block for the plan: kappa, q2, quantile, per-class SLOs and budgets, the q₂ sweep.

    Raises:
        InputError: ``quantile`` outside (0, 1), or no request reached its first token.
    """
    if not 0 < quantile < 1:
        raise InputError(f"--quantile must be in (0, 1), got {quantile}", fix="pass e.g. --quantile 0.95")
    step = progress or (lambda _: None)
    dep, stream = prepare_run(req)
    base = replace(req, policy="cascade", cascade=CascadeSettings(kappa=1.0, q2=plan_cascade(req.plan).q2))
    step("fitting kappa")
    _, sim, _ = run_simulation(base, dep, stream, record=True)
    est = np.array(sim.estimate_s)
    first = np.array(sim.first)
    ttft = first - np.array(sim.scheduled_s)  # TTFT after the wait: what T̂ predicts
    ok = np.isfinite(ttft) & (est > 0)
    if not ok.any():
        m0, _, _ = run_simulation(base, dep, stream)
        if m0["dropped"] + m0["dropped_over_context"] >= m0["requests"]:
            raise InputError(
                "no request reached its first token in the calibration run",
                f"all {m0['requests']} requests were dropped: too long for the model's context window or for every "
                "instance's KV cache",
                "calibrate on a trace with shorter requests",
            )
        raise InputError(
            "no request reached its first token in the calibration run",
            f"the deployment is overloaded at rate scale {req.rate_scale:g}",
            "lower --rate-scale",
        )
    warnings: list[str] = []
    if int(ok.sum()) < MIN_CALIBRATION_REQUESTS:
        k = int(ok.sum())
        warnings.append(
            f"kappa is fitted on only {k} request{'s' if k != 1 else ''} that reached their first token (fewer than "
            f"{MIN_CALIBRATION_REQUESTS}); calibrate on a longer trace for a reliable fit"
        )
    ratio = ttft[ok] / est[ok]
    kappa = max(float(np.quantile(ratio, quantile, method="higher")), 1e-3)
    sweep = []
    for q2 in Q2_CANDIDATES:
        step(f"q2 = {q2:g}")
        fitted = replace(req, policy="cascade", cascade=CascadeSettings(kappa=kappa, q2=q2))
        m, _, _ = run_simulation(fitted, dep, stream)
        sweep.append({"q2": q2, "goodput_req_per_s": m["goodput_req_per_s"], "attainment": m["attainment"]["joint"],
                      "jain_index": m["jain_index"]})  # fmt: skip
    best = max(sweep, key=lambda r: (r["goodput_req_per_s"] or 0.0, r["jain_index"] or 0.0, -r["q2"]))
    classes = {}
    for c, name in enumerate(stream.class_names):
        m = (stream.class_id == c) & ok
        ttft_slo = float(stream.ttft_slo_s[stream.class_id == c][0])
        typical = float(np.median(est[m])) * kappa if m.any() else None
        classes[name] = {
            "ttft_slo_s": rnd(ttft_slo, 6),
            "tpot_slo_s": rnd(float(stream.tpot_slo_s[stream.class_id == c][0]), 6),
            "median_estimate_s": None if typical is None else rnd(typical, 5),
            "median_budget_s": None if typical is None else rnd(ttft_slo - typical, 5),
        }
    covered = float(np.mean(ttft[ok] <= kappa * est[ok]))
    return {
        "kappa": rnd(kappa, 5),
        "q2": best["q2"],
        "quantile": quantile,
        "coverage": rnd(covered, 5),
        "calibrated_on": {"trace": stream.source, "rate_scale": req.rate_scale, "requests": int(ok.sum())},
        "classes": classes,
        "q2_sweep": sweep,
        "warnings": warnings,
    }


def router_config(plan: Plan, cascade: dict[str, Any]) -> dict[str, Any]:
    """A small config a router can read: policy, κ, q₂, per-class SLOs/budgets, and the routing weights."""
    dep = deployment_from_plan(plan)
    return {
        "kind": "hetplan-router-config",
        "schema_version": 1,
        "policy": "cascade",
        "kappa": cascade["kappa"],
        "q2": cascade["q2"],
        "estimator": "T_hat = kappa * (T(current load) + T(max load)) / 2; budget = SLO - wait - T_hat",
        "classes": cascade["classes"],
        "routing": "goodput-weighted round-robin",
        "groups": [
            {
                "label": g.label,
                "weight_req_per_s": rnd(g.weight_req_per_s, 6),
                "prefill": [dep.instances[i].name for i in g.prefill],
                "decode": [dep.instances[i].name for i in g.decode],
            }
            for g in dep.groups
        ],
    }


__all__ = ["MIN_CALIBRATION_REQUESTS", "Q2_CANDIDATES", "calibrate", "router_config"]
