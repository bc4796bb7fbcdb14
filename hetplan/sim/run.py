"""Python twins of ``hetplan simulate``, ``hetplan simulate --find-capacity``, ``hetplan calibrate`` and
``hetplan plan --verify``.

- :func:`simulate`: one run of a trace through a plan under one policy → the metrics document.
- :func:`find_capacity`: goodput capacity (DESIGN §1): the highest rate scale at which joint SLO attainment ≥
  target, by doubling/halving to bracket it and then bisection (``steps`` runs); capacity search is a layer above
  the simulator, as in Vidur.
- :func:`calibrate`: CASCADE's safety coefficients. Each request's unscaled TTFT estimate ``T̂₀ = (T(current load)
  + T(max load))/2`` is recorded when its prefill is first scheduled; since the budget subtracts the wait
  separately (budget = SLO − wait − T̂), T̂ predicts the TTFT *after* that wait, and κ is the smallest factor with
  ``P(TTFT − wait ≤ κ·T̂₀) ≥ q`` over the trace, i.e. ``P(TTFT ≤ wait + κ·T̂₀) ≥ q`` (the q-quantile of the
  ratio, numpy's "higher" method so the share is at least q), measured under CASCADE with κ = 1. The ratio
  exceeds 1 where prompts are chunked over several iterations, share iterations with decoding, or wait for the
  KV transfer. q₂ is then chosen from ``Q2_CANDIDATES`` as the share that
  gives the highest goodput (requests meeting every SLO over the serving span, see ``metrics``) under CASCADE
  with the fitted κ (ties: higher Jain index, then the smaller q₂). The
  result goes into the plan (``cascade`` block) and into a small router config.

Source: calibration procedure after DESIGN §3.4 (CASCADE calibrates κ on a trace so that P(TTFT ≤ T̂) ≥ q);
the q₂ search is hetplan's own reconstruction (the paper does not say how q₂ is chosen).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import Deployment, deployment_from_plan
from hetplan.sim.engine import SimConfig, SimResult, Simulator
from hetplan.sim.metrics import request_outcomes, summarize
from hetplan.sim.policies import CascadeSettings, get_scheduler
from hetplan.units import rnd
from hetplan.workload.model import ClassSlo, RequestStream, Workload, make_stream, stream_from_workload

Q2_CANDIDATES = (0.0, 0.05, 0.1, 0.2, 0.3)
MIN_CALIBRATION_REQUESTS = 50  # fewer first tokens than this: calibrate warns that κ rests on too few samples
VERIFY_SEED = 0  # Poisson arrivals for --verify on a workload without timestamps


@dataclass(frozen=True)
class SimRequest:
    """What to simulate: a plan document, a request stream and the run's settings.

    Attributes:
        plan: the typed plan (:func:`hetplan.plan.doc.load_plan`).
        stream: requests (unscaled). class_slos: per-class SLO overrides (else the plan's SLOs).
        policy: fcfs, sjf, edf or cascade. rate_scale: arrival-rate multiplier.
        cascade: CASCADE settings (default: the plan's calibrated κ and q₂, if any, else the defaults).
        config: router, seed, chunked prefill, drain time. window_s: time-series window, seconds.
    """

    plan: Plan
    stream: RequestStream
    class_slos: dict[str, ClassSlo] | None = None
    policy: str = "fcfs"
    rate_scale: float = 1.0
    cascade: CascadeSettings | None = None
    config: SimConfig = SimConfig()
    window_s: float = 60.0


class _CascadeClass(BaseModel):
    """One class of a plan's ``cascade.classes`` (the SLOs are what the simulator reads)."""

    model_config = ConfigDict(extra="allow")
    ttft_slo_s: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    tpot_slo_s: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)


class _CascadeBlock(BaseModel):
    """A plan's ``cascade`` block as ``hetplan calibrate`` writes it (other keys are reports, kept as they are)."""

    model_config = ConfigDict(extra="allow")
    kappa: float = Field(default=1.0, gt=0, allow_inf_nan=False, strict=True)
    q2: float = Field(default=0.1, ge=0, le=1, allow_inf_nan=False, strict=True)
    classes: dict[str, _CascadeClass] = Field(default_factory=dict)


def cascade_block(plan: Plan) -> _CascadeBlock:
    """The plan's ``cascade`` block, validated (an empty block when absent).

    Raises:
        InputError: the block is not a mapping, or a field has the wrong type or range (the message names it,
            e.g. ``cascade.classes.code.ttft_slo_s``).
    """
    block = plan.extra.get("cascade")
    if block is None:
        return _CascadeBlock()
    try:
        return _CascadeBlock.model_validate(block)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(["cascade", *(str(x) for x in e["loc"])]) if e["loc"] else "cascade"
        raise InputError(
            f"the plan's {where} is invalid: {e['msg']} (got {e.get('input')!r})",
            "the simulator reads kappa > 0, q2 in [0, 1] and per-class SLOs > 0 (seconds) from this block",
            f"fix {where} in the plan, or re-run 'hetplan calibrate'",
        ) from None


def plan_cascade(plan: Plan) -> CascadeSettings:
    """CASCADE settings recorded in a plan by ``hetplan calibrate`` (defaults when absent).

    Raises:
        InputError: the plan's ``cascade`` block holds invalid values (see :func:`cascade_block`).
    """
    block = cascade_block(plan)
    return CascadeSettings(kappa=block.kappa, q2=block.q2)


def _prepare(req: SimRequest) -> tuple[Deployment, RequestStream]:
    dep = deployment_from_plan(req.plan)
    slos = dict(req.class_slos or {})
    for name, cls in cascade_block(req.plan).classes.items():
        if name in req.stream.class_names and name not in slos:
            slos[name] = ClassSlo(cls.ttft_slo_s, cls.tpot_slo_s)
    stream = req.stream.with_slos(dep.ttft_slo_s, dep.tpot_slo_s, slos)
    if req.window_s <= 0:
        raise InputError(f"--window must be > 0, got {req.window_s}", fix="pass e.g. --window 60s")
    return dep, stream.scaled(req.rate_scale)


def _run(
    req: SimRequest, dep: Deployment, stream: RequestStream, record: bool = False
) -> tuple[dict[str, Any], Simulator, SimResult]:
    cascade = req.cascade or plan_cascade(req.plan)
    sim = Simulator(dep, stream, get_scheduler(req.policy, cascade), req.config, record_estimates=record)
    res = sim.run()
    return summarize(stream, res, req.window_s), sim, res


def simulate(req: SimRequest) -> dict[str, Any]:
    """Simulate ``req``; returns the metrics document with the run's settings (deterministic).

    Raises:
        InputError: bad settings, unknown policy or router, or a plan the simulator cannot rebuild.
    """
    dep, stream = _prepare(req)
    doc, sim, _ = _run(req, dep, stream)
    head = {
        "kind": "simulation",
        "policy": req.policy.lower(),
        "router": req.config.router,
        "seed": req.config.seed,
        "chunked_prefill": req.config.chunked_prefill,
        "rate_scale": req.rate_scale,
        "trace": stream.source,
        "instances": len(dep.instances),
        "plan_strategy": req.plan.strategy,
        "plan_goodput_req_per_s": req.plan.goodput_req_per_s,
        "slo_percentile": req.plan.slo.percentile,
    }
    settings = sim.scheduler.settings()
    if settings:
        head[sim.scheduler.name] = settings
    return head | doc


def find_capacity(
    req: SimRequest,
    target: float = 0.9,
    steps: int = 8,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Highest rate scale with joint SLO attainment ≥ ``target`` (goodput capacity).

    Attainment on a finite trace is not strictly monotone in the rate, so the answer is a bracket: attainment ≥
    target at ``rate_scale`` and below it at ``failing_rate_scale`` (within a factor ``2**(1/2**steps)``). The
    goodput capacity is, as DESIGN §1 defines it, the arrival rate at ``rate_scale`` (the highest rate at which
    attainment holds); ``goodput_req_per_s`` is that run's goodput, requests meeting every SLO over the serving
    span (lower on a short trace, whose span is stretched by the last requests' decode tail).

    Returns:
        ``{"target", "rate_scale", "failing_rate_scale", "capped", "goodput_capacity_req_per_s",
        "arrival_rate_per_s", "goodput_req_per_s", "runs": [...], "metrics": <metrics at the capacity>}``;
        ``rate_scale`` is None when even 1/64 of the rate misses, ``capped`` True when 64x still meets the target.

    Raises:
        InputError: ``target`` outside (0, 1].
    """
    if not 0 < target <= 1:
        raise InputError(f"--target must be in (0, 1], got {target}", fix="pass e.g. --target 0.9")
    step = progress or (lambda _: None)
    runs: list[dict[str, Any]] = []
    cache: dict[float, dict[str, Any]] = {}

    def attain(scale: float) -> float:
        if scale not in cache:
            step(f"rate scale {scale:.4g}")
            cache[scale] = simulate(replace(req, rate_scale=scale))
            m = cache[scale]
            runs.append({"rate_scale": rnd(scale, 6), "attainment": m["attainment"]["joint"],
                         "goodput_req_per_s": m["goodput_req_per_s"]})  # fmt: skip
        return float(cache[scale]["attainment"]["joint"])

    lo, hi = None, None
    x = 1.0
    if attain(x) >= target:
        lo = x
        while hi is None and x < 64:
            x *= 2
            if attain(x) >= target:
                lo = x
            else:
                hi = x
    else:
        hi = x
        while lo is None and x > 1 / 64:
            x /= 2
            if attain(x) >= target:
                lo = x
            else:
                hi = x
    if lo is not None and hi is not None:
        for _ in range(steps):
            mid = (lo * hi) ** 0.5
            if attain(mid) >= target:
                lo = mid
            else:
                hi = mid
    best = cache[lo] if lo is not None else None
    return {
        "kind": "capacity",
        "target": target,
        "policy": req.policy.lower(),
        "rate_scale": None if lo is None else rnd(lo, 6),
        "capped": lo is not None and hi is None,
        "failing_rate_scale": None if hi is None else rnd(hi, 6),
        "arrival_rate_per_s": None if best is None else best["arrival_rate_per_s"],
        "goodput_capacity_req_per_s": None if best is None else best["arrival_rate_per_s"],
        "goodput_req_per_s": None if best is None else best["goodput_req_per_s"],
        "runs": sorted(runs, key=lambda r: r["rate_scale"]),
        "metrics": best,
    }


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
    dep, stream = _prepare(req)
    base = replace(req, policy="cascade", cascade=CascadeSettings(kappa=1.0, q2=plan_cascade(req.plan).q2))
    step("fitting kappa")
    _, sim, _ = _run(base, dep, stream, record=True)
    est = np.array(sim.estimate_s)
    first = np.array(sim.first)
    ttft = first - np.array(sim.scheduled_s)  # TTFT after the wait: what T̂ predicts
    ok = np.isfinite(ttft) & (est > 0)
    if not ok.any():
        m0, _, _ = _run(base, dep, stream)
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
        m, _, _ = _run(replace(req, policy="cascade", cascade=CascadeSettings(kappa=kappa, q2=q2)), dep, stream)
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


def verify(plan: Plan, stream: RequestStream, policy: str = "fcfs", rate_scale: float = 1.0) -> dict[str, Any]:
    """Simulate a freshly planned deployment on its own workload (arrivals times ``rate_scale``) and list SLO
    misses.

    Returns:
        ``{"metrics": ..., "ttft_q_s", "tpot_q_s", "misses": [text, ...]}`` where q is the plan's SLO percentile;
        a miss is a q-percentile TTFT/TPOT above its SLO (unfinished and dropped requests count as infinite) or a
        joint attainment below q.
    """
    req = SimRequest(plan, stream, policy=policy, rate_scale=rate_scale)
    dep, scaled = _prepare(req)
    m, _, res = _run(req, dep, scaled)
    o = request_outcomes(scaled, res)
    slo = {"ttft_s": plan.slo.ttft_s, "tpot_s": plan.slo.tpot_s}
    q = plan.slo.percentile
    ttft = np.where(np.isfinite(o["ttft_s"]) & ~res.dropped, o["ttft_s"], np.inf)
    keep = scaled.output_tokens > 1
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
    # requests longer than the context window cannot be served by any deployment: the planner leaves them out of
    # its length distribution (and warns), so the check leaves them out too instead of counting them as misses
    window = deployment_from_plan(plan).arch.spec.max_position_embeddings
    fits = (workload.prompt_tokens + workload.output_tokens) <= window
    left_out = int((~fits).sum())
    if left_out == workload.n_requests:
        raise InputError(
            f"every request of the workload is longer than the model's {window:,}-token context window",
            fix="use a model with a longer context or a trace of shorter requests",
        )
    if left_out:
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
        + (f"; {left_out} request(s) longer than the {window:,}-token context window left out" if left_out else "")
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
        "attainment": m["attainment"],
        "goodput_req_per_s": m["goodput_req_per_s"],
        "goodput_definition": m["goodput_definition"],
        f"ttft_p{q:g}_s": v["ttft_q_s"],
        f"tpot_p{q:g}_s": v["tpot_q_s"],
        "summary": summary,
        "misses": v["misses"],
        "warnings": m["warnings"],
    }


__all__ = [
    "Q2_CANDIDATES",
    "SimRequest",
    "calibrate",
    "cascade_block",
    "find_capacity",
    "plan_cascade",
    "router_config",
    "simulate",
    "verify",
    "verify_plan",
]
