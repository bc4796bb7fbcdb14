"""``hetplan calibrate``: CASCADE's safety coefficients fitted on a trace, and the router config that carries them.

Each request's unscaled TTFT estimate T̂₀ (:mod:`hetplan.sim.ttft_estimate`: its own remaining prefill work at its
instance's current and maximal load) is recorded when its prefill is first scheduled; since the budget subtracts
the wait separately (budget = SLO − wait − T̂), T̂ predicts the TTFT *after* that wait, and κ is the smallest
factor with ``P(TTFT − wait ≤ κ·T̂₀) ≥ q``, i.e. ``P(TTFT ≤ wait + κ·T̂₀) ≥ q`` (the q-quantile of the ratio,
numpy's "higher" method so the share is at least q), measured under CASCADE with κ = 1: over all requests
(``kappa``) and **per class** (``kappa_by_class``; DESIGN §3.4: κ is calibrated so that P(TTFT ≤ T̂) ≥ q, and a
class whose requests straddle chunk boundaries or wait for long transfers needs its own). The ratio exceeds 1
where an iteration is shared with other prompts or where the load at the first iteration is not the load of the
later ones.

q₂ is then chosen from :data:`Q2_CANDIDATES` under CASCADE with the fitted κ by **fairness-weighted goodput**,
goodput (requests meeting every SLO per second of the serving span) × Jain's index over the classes' joint
attainment (ties: the smaller q₂): goodput alone favours q₂ = 0, which starves Tier 2 (DESIGN §4: "starves at
q₂ = 0"); the product is hetplan's choice of a fairness-aware objective (the paper does not say how q₂ is chosen).
With several classes q₂ is then chosen **per class** (``q2_by_class``, only when it beats the single q₂:
:func:`hetplan.sim.cascade.choose_q2_by_class`, one coordinate pass over the same candidates and objective).
The result goes into the plan (``cascade`` block) and into a small router config.

Source: calibration procedure after DESIGN §3.4 (CASCADE calibrates κ on a trace so that P(TTFT ≤ T̂) ≥ q);
the per-class fit and the q₂ objective are hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.calibration_result import CalibratedOn, CascadeCalibration, ClassCalibration, Q2Point
from hetplan.sim.cascade import CascadeSettings, choose_q2_by_class
from hetplan.sim.deployment import Deployment, deployment_from_plan
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.metrics import measure
from hetplan.sim.policies import get_scheduler
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.result import RunMetrics
from hetplan.sim.run import SimRequest, plan_cascade, prepare_run
from hetplan.units import rnd
from hetplan.workload.model import RequestStream

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

Q2_CANDIDATES = (0.0, 0.05, 0.1, 0.2, 0.3)
MIN_CALIBRATION_REQUESTS = 50  # fewer first tokens than this: calibrate warns that κ rests on too few samples


def fit_kappa(
    estimate_s: np.ndarray, after_wait_s: np.ndarray, class_id: np.ndarray, names: tuple[str, ...], quantile: float
) -> tuple[float, dict[str, float], float]:
    """κ over all requests and per class: the ``quantile``-quantile ("higher") of ``after_wait_s / estimate_s``.

    Args:
        estimate_s: shape (n,), each request's unscaled T̂₀ (NaN: never scheduled). after_wait_s: shape (n,),
            first token − first scheduling (inf/NaN: none). class_id: shape (n,), index into ``names``.

    Returns:
        ``(kappa, {class: kappa}, coverage)``: classes without samples are left out; coverage is the share of
        requests with ``TTFT after the wait ≤ κ_class · T̂₀``.

    Raises:
        InputError: no request has both an estimate and a first token.
    """
    ok = np.isfinite(after_wait_s) & np.isfinite(estimate_s) & (estimate_s > 0)
    if not ok.any():
        raise InputError("no request reached its first token in the calibration run", fix="lower --rate-scale")
    ratio = np.full(estimate_s.shape, np.nan)
    ratio[ok] = after_wait_s[ok] / estimate_s[ok]
    kappa = max(float(np.quantile(ratio[ok], quantile, method="higher")), 1e-3)
    by: dict[str, float] = {}
    k_req = np.full(estimate_s.shape, kappa)
    for c, name in enumerate(names):
        m = ok & (class_id == c)
        if m.any():
            by[name] = round(max(float(np.quantile(ratio[m], quantile, method="higher")), 1e-3), 5)
            k_req[class_id == c] = by[name]
    covered = float(np.mean(after_wait_s[ok] <= k_req[ok] * estimate_s[ok] * (1 + 1e-9)))
    return round(kappa, 5), by, covered


def fairness_objective(goodput: float | None, jain: float | None) -> float:
    """q₂'s objective: goodput (req/s) × Jain's index (0 when either is missing)."""
    return float(goodput or 0.0) * float(jain or 0.0)


def calibrate(req: SimRequest, quantile: float = 0.95, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """:func:`calibration` as the plan's ``cascade`` block (:meth:`CascadeCalibration.to_doc`). Same errors."""
    return calibration(req, quantile, progress).to_doc()


def calibration(
    req: SimRequest, quantile: float = 0.95, progress: Callable[[str], None] | None = None
) -> CascadeCalibration:
    """Fit κ (overall and per class) and choose q₂ for CASCADE on ``req``'s trace and plan (module docstring).

    Returns:
        The typed ``cascade`` block for the plan: kappa, kappa_by_class, q2, tier2_order, quantile, coverage,
        per-class SLOs and budgets, the q₂ sweep (goodput, attainment, Jain, objective).

    Raises:
        InputError: ``quantile`` outside (0, 1), or no request reached its first token.
    """
    if not 0 < quantile < 1:
        raise InputError(f"--quantile must be in (0, 1), got {quantile}", fix="pass e.g. --quantile 0.95")
    dep, stream = prepare_run(req)
    return calibrate_fit(dep, stream, plan_cascade(req.plan), req.config, quantile, progress, req.rate_scale,
                         predictor=req.predictor)  # fmt: skip


def calibrate_fit(
    dep: Deployment,
    stream: RequestStream,
    planned: CascadeSettings | None = None,
    config: SimConfig | None = None,
    quantile: float = 0.95,
    progress: Callable[[str], None] | None = None,
    rate_scale: float = 1.0,
    q2_stream: RequestStream | None = None,
    predictor: OutputPredictor | None = None,
) -> CascadeCalibration:
    """:func:`calibration` on a deployment and a stream with its SLOs (already at the rate to calibrate at);
    ``planned`` supplies the settings κ and q₂ are not fitted for (tier order, host tier); ``q2_stream``, when
    given, is the stream q₂ is chosen on (e.g. the trace at an overload: at a rate the deployment holds, Tier 2 is
    empty and every q₂ ties); ``predictor``: what the scheduler may know of output lengths (the sizing data's,
    ``--sizing-trace``; None: the calibration stream's own, :class:`hetplan.sim.engine.Simulator`'s default).
    Same result and errors."""
    if not 0 < quantile < 1:
        raise InputError(f"--quantile must be in (0, 1), got {quantile}", fix="pass e.g. --quantile 0.95")
    step = progress or (lambda _: None)
    planned = planned or CascadeSettings()
    cfg = config or SimConfig()

    def run(
        settings: CascadeSettings, record: bool = False, on: RequestStream | None = None
    ) -> tuple[RunMetrics, Simulator]:
        s = stream if on is None else on
        sim = Simulator(dep, s, get_scheduler("cascade", settings), cfg, record_estimates=record, predictor=predictor)
        return measure(s, sim.run()), sim

    step("fitting kappa")
    _, sim = run(replace(planned, kappa=1.0, kappa_by_class=()), record=True)
    est = np.array(sim.estimate_s)
    after_wait = np.array(sim.first) - np.array(sim.scheduled_s)  # TTFT after the wait: what T̂ predicts
    ok = np.isfinite(after_wait) & (est > 0)
    if not ok.any():
        m0, _ = run(replace(planned, kappa=1.0, kappa_by_class=()))
        if m0.dropped + m0.dropped_over_context >= m0.requests:
            raise InputError(
                "no request reached its first token in the calibration run",
                f"all {m0.requests} requests were dropped: too long for the model's context window or for every "
                "instance's KV cache",
                "calibrate on a trace with shorter requests",
            )
        raise InputError(
            "no request reached its first token in the calibration run",
            f"the deployment is overloaded at rate scale {rate_scale:g}",
            "lower --rate-scale",
        )
    warnings: list[str] = []
    if int(ok.sum()) < MIN_CALIBRATION_REQUESTS:
        k = int(ok.sum())
        warnings.append(
            f"kappa is fitted on only {k} request{'s' if k != 1 else ''} that reached their first token (fewer than "
            f"{MIN_CALIBRATION_REQUESTS}); calibrate on a longer trace for a reliable fit"
        )
    kappa, by_class, covered = fit_kappa(est, after_wait, stream.class_id, stream.class_names, quantile)
    fitted_base = replace(planned, kappa=kappa, kappa_by_class=tuple(sorted(by_class.items())))
    sweep = []
    for q2 in Q2_CANDIDATES:
        step(f"q2 = {q2:g}")
        m, _ = run(replace(fitted_base, q2=q2), on=q2_stream)
        sweep.append(Q2Point(q2=q2, goodput_req_per_s=m.goodput_req_per_s, attainment=m.attainment.joint,
                             jain_index=m.jain_index,
                             objective=rnd(fairness_objective(m.goodput_req_per_s, m.jain_index), 6)))  # fmt: skip
    best = max(sweep, key=lambda r: (r.objective or 0.0, -r.q2))

    def objective(settings: CascadeSettings) -> float:
        m = run(settings, on=q2_stream)[0]
        return fairness_objective(m.goodput_req_per_s, m.jain_index)

    step("q2 per class")
    base = replace(fitted_base, q2=best.q2)
    q2_by_class = choose_q2_by_class(base, stream.class_names, Q2_CANDIDATES, objective, float(best.objective or 0.0))
    classes = {}
    for c, name in enumerate(stream.class_names):
        sel = (stream.class_id == c) & ok
        ttft_slo = float(stream.ttft_slo_s[stream.class_id == c][0])
        typical = float(np.median(est[sel])) * by_class.get(name, kappa) if sel.any() else None
        classes[name] = ClassCalibration(
            ttft_slo_s=rnd(ttft_slo, 6),
            tpot_slo_s=rnd(float(stream.tpot_slo_s[stream.class_id == c][0]), 6),
            kappa=by_class.get(name, kappa),
            median_estimate_s=None if typical is None else rnd(typical, 5),
            median_budget_s=None if typical is None else rnd(ttft_slo - typical, 5),
        )
    return CascadeCalibration(
        kappa=kappa,
        kappa_by_class=dict(sorted(by_class.items())),
        q2=best.q2,
        q2_by_class=dict(q2_by_class) if q2_by_class else None,
        q2_objective="goodput x Jain index over the classes (ties: the smaller q2)",
        tier2_order=planned.tier2_order,
        quantile=quantile,
        coverage=rnd(covered, 5),
        calibrated_on=CalibratedOn(trace=stream.source, rate_scale=rate_scale, requests=int(ok.sum())),
        classes=classes,
        q2_sweep=sweep,
        warnings=warnings,
    )


class _RouterInputs(BaseModel):
    """What :func:`router_config` takes from a ``cascade`` block (values kept as they are)."""

    model_config = ConfigDict(extra="ignore")
    kappa: Any
    kappa_by_class: Any = Field(default_factory=dict)
    q2: Any
    q2_by_class: Any = None
    tier2_order: Any = "least-budget"
    quantile: Any = None
    classes: Any


def router_config(
    plan: Plan, cascade: Mapping[str, Any] | CascadeCalibration, catalog: Catalog | None = None
) -> dict[str, Any]:
    """A small config a router can read: policy, κ, q₂, per-class SLOs/budgets, and the routing weights
    (``catalog``: where the deployment's curves come from; None: the shipped catalogs)."""
    dep = deployment_from_plan(plan, catalog)
    c = _RouterInputs.model_validate(cascade.to_doc() if isinstance(cascade, CascadeCalibration) else cascade)
    return {
        "kind": "hetplan-router-config",
        "schema_version": 1,
        "policy": "cascade",
        "kappa": c.kappa,
        "kappa_by_class": c.kappa_by_class,
        "q2": c.q2,
        **({"q2_by_class": c.q2_by_class} if c.q2_by_class else {}),
        "tier2_order": c.tier2_order,
        "quantile": c.quantile,
        "estimator": (
            "T_hat(request) = kappa[class] * (T(current load) + T(max load)) / 2 over the request's own remaining "
            "prefill chunks (+ KV transfer when disaggregated); budget = TTFT SLO - wait - T_hat, re-computed every "
            "iteration; decode admission: budget = first token + TPOT SLO x (n - 1) - remaining x step - now"
        ),
        "classes": c.classes,
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


__all__ = [
    "MIN_CALIBRATION_REQUESTS",
    "Q2_CANDIDATES",
    "calibrate",
    "calibrate_fit",
    "calibration",
    "fairness_objective",
    "fit_kappa",
    "router_config",
]
