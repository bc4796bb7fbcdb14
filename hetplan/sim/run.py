"""Python twins of ``hetplan simulate`` and ``hetplan simulate --find-capacity``.

- :func:`simulate`: one run of a trace through a plan under one policy → the metrics document.
- :func:`find_capacity`: goodput capacity (DESIGN §1): the highest rate scale at which joint SLO attainment ≥
  target, by doubling/halving to bracket it and then bisection (``steps`` runs); capacity search is a layer above
  the simulator, as in Vidur.

``hetplan calibrate`` (CASCADE's κ and q₂) is :mod:`hetplan.sim.calibrate`; ``hetplan plan --verify`` is
:mod:`hetplan.sim.verify`.

Source: hetplan's own reconstruction (the capacity search after DESIGN §1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import Deployment, deployment_from_plan
from hetplan.sim.engine import SimConfig, SimResult, Simulator
from hetplan.sim.metrics import measure
from hetplan.sim.policies import CascadeSettings, get_scheduler, policy_label
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.result import Capacity, CapacityRun, CascadeRunSettings, HostKvRun, RunMetrics, Simulation
from hetplan.units import rnd
from hetplan.workload.model import ClassSlo, RequestStream

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


@dataclass(frozen=True)
class SimRequest:
    """What to simulate: a plan document, a request stream and the run's settings.

    Attributes:
        plan: the typed plan (:func:`hetplan.plan.doc.load_plan`).
        stream: requests (unscaled). class_slos: per-class SLO overrides (else the plan's SLOs).
        policy: fcfs, sjf, edf, cascade or the oracle reference oracle-sjf-total. rate_scale: arrival-rate multiplier.
        cascade: CASCADE settings (default: the plan's calibrated κ and q₂, if any, else the defaults).
        config: router, seed, chunked prefill, drain time. window_s: time-series window, seconds.
        predictor: what policies may know of output lengths (:mod:`hetplan.sim.predict`), learnt from the sizing
            data; None: from ``stream``'s own length distribution (in-sample, :func:`default_predictor`).
        predictor_source: what ``predictor`` was learnt from, in words, for the run's document
            (``output_predictor``; None: the in-sample default's own wording).
            data; None: from ``stream``'s own length distribution.
        catalog: whose fitted engine curves time the steps (:func:`hetplan.sim.deployment.deployment_from_plan`);
            None: the shipped catalogs.
    """

    plan: Plan
    stream: RequestStream
    class_slos: dict[str, ClassSlo] | None = None
    policy: str = "fcfs"
    rate_scale: float = 1.0
    cascade: CascadeSettings | None = None
    config: SimConfig = SimConfig()
    window_s: float = 60.0
    predictor: OutputPredictor | None = None
    predictor_source: str | None = None
    catalog: Catalog | None = None


def plan_cascade(plan: Plan) -> CascadeSettings:
    """CASCADE settings recorded in a plan by ``hetplan calibrate`` (defaults where the plan's typed ``cascade``
    block, checked when the plan was read (:func:`hetplan.plan.docblocks.cascade_of`), writes none)."""
    default = CascadeSettings()
    block = plan.cascade
    if block is None:
        return default
    return CascadeSettings(
        kappa=default.kappa if block.kappa is None else float(block.kappa),
        q2=default.q2 if block.q2 is None else float(block.q2),
        kappa_by_class=tuple(sorted((str(k), float(v)) for k, v in (block.kappa_by_class or {}).items())),
        q2_by_class=tuple(sorted((str(k), float(v)) for k, v in (block.q2_by_class or {}).items())),
        tier2_order=block.tier2_order or default.tier2_order,
    )


#: The fields every ``scenario.classes`` entry must write (:func:`plan_classes`).
_CLASS_FIELDS = frozenset({"name", "ttft_s", "tpot_s"})


def plan_classes(plan: Plan) -> list[tuple[str, float, float]]:
    """The plan's request classes (``scenario.classes``, :mod:`hetplan.workload.classes`): ``(name, ttft_s,
    tpot_s)`` each; empty for a one-class plan.

    Raises:
        InputError: a malformed ``classes`` entry (a hand-edited plan).
    """
    out = []
    for c in plan.classes or ():
        if not _CLASS_FIELDS <= c.model_fields_set:  # the typed block reads a missing field as its default
            raise InputError(
                f"the plan's scenario.classes entry {c.to_doc()!r} is malformed",
                fix="each class needs name, ttft_s and tpot_s (re-plan the scenario)",
            )
        name, ttft, tpot = c.name, float(c.ttft_s), float(c.tpot_s)
        if not (ttft > 0 and tpot > 0):
            raise InputError(f"the plan's class {name!r} has a non-positive SLO", fix="re-plan the scenario")
        out.append((name, ttft, tpot))
    return out


def prepare_run(req: SimRequest) -> tuple[Deployment, RequestStream]:
    """The deployment rebuilt from ``req.plan`` and the stream with its SLOs (per class: ``req.class_slos``, then
    the plan's ``scenario.classes``, then its ``cascade.classes``, then the plan's) at ``req.rate_scale``.

    Raises:
        InputError: a plan the simulator cannot rebuild, a malformed ``cascade`` block or a window <= 0.
    """
    dep = deployment_from_plan(req.plan, req.catalog)
    slos = dict(req.class_slos or {})
    for name, ttft_s, tpot_s in plan_classes(req.plan):  # the scenario's request classes, each with its SLOs
        if name in req.stream.class_names and name not in slos:
            slos[name] = ClassSlo(ttft_s, tpot_s)
    for name, cls in ((req.plan.cascade.classes or {}) if req.plan.cascade is not None else {}).items():
        if name in req.stream.class_names and name not in slos:
            slos[name] = ClassSlo(*(None if x is None else float(x) for x in (cls.ttft_slo_s, cls.tpot_slo_s)))
    stream = req.stream.with_slos(dep.ttft_slo_s, dep.tpot_slo_s, slos)
    if req.window_s <= 0:
        raise InputError(f"--window must be > 0, got {req.window_s}", fix="pass e.g. --window 60s")
    return dep, stream.scaled(req.rate_scale)


IN_SAMPLE = "the replayed trace's own outputs (in-sample: no sizing data; pass --sizing-trace)"
"""``output_predictor`` of a run without sizing data (:func:`default_predictor`)."""


def default_predictor(req: SimRequest, stream: RequestStream) -> tuple[OutputPredictor, str]:
    """The output predictor of a run of ``req`` on ``stream`` and what it was learnt from: ``req.predictor`` (the
    sizing data's), else ``stream``'s own outputs (in-sample to the replay: :data:`IN_SAMPLE`). One run and a
    windowed run (:mod:`hetplan.sim.windows`) take the same."""
    if req.predictor is not None:
        return req.predictor, req.predictor_source or "the sizing data"
    return OutputPredictor(stream.prompt_tokens, stream.output_tokens), IN_SAMPLE


def run_measured(
    req: SimRequest, dep: Deployment, stream: RequestStream, record: bool = False
) -> tuple[RunMetrics, Simulator, SimResult]:
    """One simulation of ``stream`` on ``dep`` under ``req``'s policy (its CASCADE settings, else the plan's):
    (typed metrics, the simulator, its raw result); ``record`` keeps each request's TTFT estimate."""
    cascade = req.cascade or plan_cascade(req.plan)
    predictor, _ = default_predictor(req, stream)
    sim = Simulator(
        dep, stream, get_scheduler(req.policy, cascade), req.config, record_estimates=record, predictor=predictor
    )
    res = sim.run()
    return measure(stream, res, req.window_s), sim, res


def simulation(req: SimRequest) -> Simulation:
    """Simulate ``req``: the typed metrics with the run's settings (deterministic).

    Raises:
        InputError: bad settings, unknown policy or router, or a plan the simulator cannot rebuild.
    """
    dep, stream = prepare_run(req)
    metrics, sim, _ = run_measured(req, dep, stream)
    settings = sim.scheduler.settings()
    return Simulation(
        policy=policy_label(req.policy),
        router=req.config.router,
        seed=req.config.seed,
        chunked_prefill=req.config.chunked_prefill,
        rate_scale=req.rate_scale,
        trace=stream.source,
        instances=len(dep.instances),
        plan_strategy=req.plan.strategy,
        plan_goodput_req_per_s=req.plan.goodput_req_per_s,
        slo_percentile=req.plan.slo.percentile,
        cascade=CascadeRunSettings.model_validate(settings) if settings else None,
        output_predictor=default_predictor(req, stream)[1] if settings else None,  # CASCADE's decode budgets
        host_kv=host_kv_run(req.config),
        **dict(metrics),
    )


def host_kv_run(config: SimConfig) -> HostKvRun | None:
    """The document's record of ``config``'s host KV tier (``--host-kv``); None without one."""
    tier = config.host_kv
    if tier is None:
        return None
    return HostKvRun(
        dram_gib=rnd(tier.dram_gib), ssd_gib=rnd(tier.ssd_gib) if math.isfinite(tier.ssd_gib) else None,
        dram_gb_per_s=tier.dram_gb_per_s, ssd_gb_per_s=tier.ssd_gb_per_s, restore_latency_s=tier.restore_latency_s,
    )  # fmt: skip


def capacity(
    req: SimRequest,
    target: float = 0.9,
    steps: int = 8,
    progress: Callable[[str], None] | None = None,
) -> Capacity:
    """Highest rate scale with joint SLO attainment ≥ ``target`` (goodput capacity).

    Attainment on a finite trace is not strictly monotone in the rate, so the answer is a bracket: attainment ≥
    target at ``rate_scale`` and below it at ``failing_rate_scale`` (within a factor ``2**(1/2**steps)``). The
    goodput capacity is, as DESIGN §1 defines it, the arrival rate at ``rate_scale`` (the highest rate at which
    attainment holds); ``goodput_req_per_s`` is that run's goodput, requests meeting every SLO over the serving
    span (lower on a short trace, whose span is stretched by the last requests' decode tail).

    Returns:
        :class:`Capacity`: target, rate_scale, failing_rate_scale, capped, goodput_capacity_req_per_s,
        arrival_rate_per_s, goodput_req_per_s, the runs and the metrics at the capacity; ``rate_scale`` is None
        when even 1/64 of the rate misses, ``capped`` True when 64x still meets the target.

    Raises:
        InputError: ``target`` outside (0, 1], or a trace whose requests all arrive at one instant (no rate).
    """
    if not 0 < target <= 1:
        raise InputError(f"--target must be in (0, 1], got {target}", fix="pass e.g. --target 0.9")
    step = progress or (lambda _: None)
    runs: list[CapacityRun] = []
    cache: dict[float, Simulation] = {}

    def attain(scale: float) -> float:
        if scale not in cache:
            step(f"rate scale {scale:.4g}")
            cache[scale] = m = simulation(replace(req, rate_scale=scale))
            runs.append(CapacityRun(rate_scale=rnd(scale, 6), attainment=m.attainment.joint,
                                    goodput_req_per_s=m.goodput_req_per_s))  # fmt: skip
        return float(cache[scale].attainment.joint)

    lo, hi = None, None
    x = 1.0
    first = attain(x)
    if cache[x].arrival_rate_per_s is None:  # every request arrives at one instant: no rate to scale
        raise InputError(
            "--find-capacity needs a trace whose arrivals span some time",
            f"its {cache[x].requests} request(s) arrive at the same instant, so an arrival rate (req/s) is not defined",
            "give a trace with requests at two or more times, or simulate it without --find-capacity",
        )
    if first >= target:
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
    return Capacity(
        target=target,
        policy=policy_label(req.policy),
        rate_scale=None if lo is None else rnd(lo, 6),
        capped=lo is not None and hi is None,
        failing_rate_scale=None if hi is None else rnd(hi, 6),
        arrival_rate_per_s=None if best is None else best.arrival_rate_per_s,
        goodput_capacity_req_per_s=None if best is None else best.arrival_rate_per_s,
        goodput_req_per_s=None if best is None else best.goodput_req_per_s,
        runs=sorted(runs, key=lambda r: r.rate_scale),
        metrics=best,
    )


def find_capacity(
    req: SimRequest,
    target: float = 0.9,
    steps: int = 8,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """:func:`capacity` as its document (:meth:`Capacity.to_doc`): ``{"kind": "capacity", "target", "policy",
    "rate_scale", "capped", "failing_rate_scale", "arrival_rate_per_s", "goodput_capacity_req_per_s",
    "goodput_req_per_s", "runs": [...], "metrics": <metrics at the capacity>}``. Same errors."""
    return capacity(req, target, steps, progress).to_doc()


__all__ = [
    "SimRequest",
    "capacity",
    "find_capacity",
    "plan_cascade",
    "prepare_run",
    "run_measured",
    "simulation",
]
