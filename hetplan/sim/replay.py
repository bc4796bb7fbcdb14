"""Replaying a plan in the simulator for its check (:mod:`hetplan.sim.verify`): one run judged against the plan's
SLOs (:func:`verify`, :func:`judge`), the arrivals a plan is checked with, the workload fitted to the model's
context window, a :class:`Replayer` that keeps every rate's run, and the simulated capacity search
(:func:`simulated_capacity`). Latencies in seconds, rates in req/s.

Source: hetplan's own reconstruction (goodput capacity after DESIGN §1).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.plan.blocks import Attainment, ClassCheck, Run
from hetplan.plan.types import Plan
from hetplan.sim.metrics import Outcomes, outcomes
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.result import RunMetrics, SimResult
from hetplan.sim.router import SimConfig
from hetplan.sim.run import SimRequest, plan_classes, prepare_run, run_measured
from hetplan.units import rnd
from hetplan.workload.context import apply_context_window
from hetplan.workload.model import RequestStream, Workload, make_stream, stream_from_workload

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

VERIFY_SEED = 0  # Poisson arrivals for --verify on a workload without timestamps

#: Bracketing factor and bisection steps of :func:`simulated_capacity` (a bracket within 1.25^(1/16) ≈ 1.4 %).
CAPACITY_STEP = 1.25
CAPACITY_BISECT = 4
#: Bisection steps of a capacity measured only to steer a re-size (within 1.25^(1/4) ≈ 5.7 %; the re-size bisects
#: its headroom after it anyway).
STEER_BISECT = 2


@dataclass(frozen=True)
class Outcome:
    """One run judged against a plan's SLOs (:func:`judge`): the simulator's metrics, the q-percentile TTFT and
    TPOT (seconds, q the plan's SLO percentile; None when unbounded: too many requests unserved), the misses (empty:
    it holds) and, for a plan with request classes, each class's figures (None without classes). A run of a
    :class:`Replayer` also carries its ``label``, rate scale and rate (req/s)."""

    metrics: RunMetrics
    ttft_q_s: float | None
    tpot_q_s: float | None
    misses: list[str]
    class_checks: list[ClassCheck] | None = None
    label: str = ""
    rate_scale: float = 1.0
    rate_req_per_s: float = 0.0

    @property
    def joint(self) -> float:
        """The joint SLO attainment (0-1)."""
        return self.metrics.attainment.joint

    @property
    def holds(self) -> bool:
        """True when the run missed nothing."""
        return not self.misses

    def run_block(self) -> Run:
        """The run as the verification block's ``runs`` records it (without the metrics)."""
        a = self.metrics.attainment
        return Run(
            label=self.label,
            rate_scale=self.rate_scale,
            rate_req_per_s=self.rate_req_per_s,
            attainment=Attainment(ttft=a.ttft, tpot=a.tpot, joint=a.joint),
            ttft_q_s=self.ttft_q_s,
            tpot_q_s=self.tpot_q_s,
            misses=self.misses,
            **({"class_checks": self.class_checks} if self.class_checks is not None else {}),
        )

    def to_doc(self) -> dict[str, Any]:
        """The outcome as plain data: ``{"metrics", "ttft_q_s", "tpot_q_s", "misses"[, "class_checks"]}``."""
        doc: dict[str, Any] = {
            "metrics": self.metrics.to_doc(),
            "ttft_q_s": self.ttft_q_s,
            "tpot_q_s": self.tpot_q_s,
            "misses": list(self.misses),
        }
        if self.class_checks is not None:
            doc["class_checks"] = [c.to_doc() for c in self.class_checks]
        return doc


def verify(
    plan: Plan, stream: RequestStream, policy: str = "fcfs", rate_scale: float = 1.0, catalog: Catalog | None = None
) -> dict[str, Any]:
    """Simulate a freshly planned deployment on its own workload (arrivals times ``rate_scale``) and list SLO
    misses (step times from ``catalog``'s fitted curves; None: the shipped catalogs).

    Returns:
        :meth:`Outcome.to_doc`: ``{"metrics": ..., "ttft_q_s", "tpot_q_s", "misses": [text, ...]}`` where q is the
        plan's SLO percentile; a miss is a q-percentile TTFT/TPOT above its SLO (unfinished and dropped requests
        count as infinite) or a joint attainment below q.
    """
    req = SimRequest(plan, stream, policy=policy, rate_scale=rate_scale, config=verify_config(stream), catalog=catalog)
    dep, scaled = prepare_run(req)
    m, _, res = run_measured(req, dep, scaled)
    return judge(plan, scaled, m, res).to_doc()


def percentiles(o: Outcomes, dropped: np.ndarray, q: float, among: np.ndarray | None = None) -> tuple[float, float]:
    """The q-th percentile TTFT and TPOT (seconds; inf when too many are unserved) of a run's per-request ``o``
    (:func:`hetplan.sim.metrics.outcomes`) over the requests in ``among``
    (a mask; None: all); dropped and unfinished requests count as infinite, TPOT only over requests served ≥ 2
    output tokens (0.0 where no request qualifies)."""
    sel = np.ones(dropped.shape, dtype=bool) if among is None else among
    ttft = np.where(np.isfinite(o.ttft_s) & ~dropped, o.ttft_s, np.inf)[sel]
    keep = o.tpot_eligible & sel  # TPOT is defined for requests served >= 2 output tokens
    tpot = np.where(np.isfinite(o.tpot_s) & ~dropped, o.tpot_s, np.inf)[keep]
    ttft_q = float(np.percentile(ttft, q, method="higher")) if ttft.size else 0.0
    tpot_q = float(np.percentile(tpot, q, method="higher")) if tpot.size else 0.0
    return ttft_q, tpot_q


def slo_misses(ttft_q: float, tpot_q: float, ttft_slo: float, tpot_slo: float, q: float, who: str) -> list[str]:
    """The percentile misses of one run or one class (``who``: "" or "class NAME: ")."""
    misses = []
    unserved = f"more than {100 - q:g} % of the requests were dropped or never finished"
    if ttft_q > ttft_slo:
        what = f"{ttft_q:.4g} s" if math.isfinite(ttft_q) else f"unbounded ({unserved})"
        misses.append(f"{who}simulated p{q:g} TTFT {what} exceeds the SLO {ttft_slo:g} s")
    if tpot_q > tpot_slo:
        what = f"{tpot_q * 1e3:.4g} ms" if math.isfinite(tpot_q) else f"unbounded ({unserved})"
        misses.append(f"{who}simulated p{q:g} TPOT {what} exceeds the SLO {tpot_slo * 1e3:g} ms")
    return misses


def judge(plan: Plan, scaled: RequestStream, m: RunMetrics, res: SimResult) -> Outcome:
    """The outcome of one run against the plan's SLOs (see :func:`verify`). A plan with request classes
    (``scenario.classes``) is judged per class instead, each against its own SLOs (percentile TTFT and TPOT, and
    attainment ≥ the percentile), and holds only if every class holds; its joint attainment (each request against
    its class's SLOs) must still reach the percentile. ``class_checks`` then lists each class's figures."""
    o = outcomes(scaled, res)
    q = plan.slo.percentile
    ttft_q, tpot_q = percentiles(o, res.dropped, q)
    classes = plan_classes(plan)
    checks: list[ClassCheck] = []
    if not classes:
        misses = slo_misses(ttft_q, tpot_q, plan.slo.ttft_s, plan.slo.tpot_s, q, "")
    else:
        misses = []
        for name, ttft_slo, tpot_slo in classes:
            if name not in scaled.class_names:
                continue  # no request of this class in this stretch of the trace
            among = scaled.class_id == scaled.class_names.index(name)
            c_ttft, c_tpot = percentiles(o, res.dropped, q, among)
            att = float(o.ok[among].mean())
            found = slo_misses(c_ttft, c_tpot, ttft_slo, tpot_slo, q, f"class {name}: ")
            if att < q / 100:
                found.append(f"class {name}: simulated SLO attainment {att:.1%} is below {q:g} %")
            misses += found
            checks.append(
                ClassCheck(
                    class_=name,
                    requests=int(among.sum()),
                    ttft_slo_s=ttft_slo,
                    tpot_slo_s=tpot_slo,
                    attainment=rnd(att, 5),
                    ttft_p_s=rnd(c_ttft, 5) if math.isfinite(c_ttft) else None,
                    tpot_p_s=rnd(c_tpot, 5) if math.isfinite(c_tpot) else None,
                    holds=not found,
                )
            )
    joint = m.attainment.joint
    if joint < q / 100:
        misses.append(f"simulated joint SLO attainment {joint:.1%} is below {q:g} %")
    # an unbounded percentile (too many requests unserved) is None in the document: JSON has no infinity
    return Outcome(
        metrics=m,
        ttft_q_s=rnd(ttft_q, 5) if math.isfinite(ttft_q) else None,
        tpot_q_s=rnd(tpot_q, 5) if math.isfinite(tpot_q) else None,
        misses=misses,
        class_checks=checks if classes else None,
    )


def verify_config(stream: RequestStream) -> SimConfig:
    """The simulator settings a verification runs with: the defaults, and the ``prefix`` router (cache locality,
    :mod:`hetplan.sim.router`) when the stream has prefix blocks: a plan sized with prefix reuse counts on a router
    that keeps a session's turns on the instance holding its prefix, as its llm-d emission configures
    (:mod:`hetplan.emit.llmd`)."""
    return SimConfig(router="prefix") if stream.prefix_blocks is not None else SimConfig()


def plan_arrivals(plan: Plan, workload: Workload, seed: int = VERIFY_SEED) -> tuple[RequestStream, float, str, bool]:
    """The stream to replay, its own rate (req/s), how its arrivals were made, and whether it is a trace (real
    timestamps) rather than Poisson arrivals made here (from ``seed``)."""
    target = plan.goodput_target_req_per_s
    if workload.arrival_s is None:  # a length-only file: Poisson arrivals at the target
        rng = np.random.default_rng(seed)
        arrival = np.cumsum(rng.exponential(1.0 / target, workload.n_requests))
        labels = [workload.name] * workload.n_requests if workload.class_labels is None else workload.class_labels
        stream = make_stream(arrival, workload.prompt_tokens, workload.output_tokens, labels, source=workload.source,
                             prefix_blocks=workload.prefix_blocks)  # fmt: skip
        own = stream.n / stream.duration_s if stream.n > 1 else target
        return stream, own, f"Poisson arrivals at {target:g} req/s (seed {seed}; no timestamps)", False
    stream = stream_from_workload(workload)
    own = stream.n / stream.duration_s if stream.n > 1 and stream.duration_s > 0 else target
    synthetic = workload.attribution == "" and workload.source.startswith("synthetic")
    kind = "Poisson arrivals (synthetic)" if synthetic else "trace arrivals"
    return stream, own, kind, not synthetic


def fit_context(workload: Workload, window: int) -> tuple[Workload, Any]:
    """The workload less the prompts over the context window (any deployment refuses them), and the window's
    record (:func:`hetplan.workload.context.apply_context_window`)."""
    ctx = apply_context_window(workload.prompt_tokens, workload.output_tokens, window)
    if ctx.n_refused and ctx.n_refused < workload.n_requests:
        fits = ~ctx.refused
        workload = replace(
            workload,
            prompt_tokens=workload.prompt_tokens[fits],
            output_tokens=workload.output_tokens[fits],
            class_labels=workload.labels_at(fits),
            arrival_s=None if workload.arrival_s is None else workload.arrival_s[fits],
            prefix_blocks=None if workload.prefix_blocks is None else workload.prefix_blocks.take(np.nonzero(fits)[0]),
        )
    return workload, ctx


class Replayer:
    """Replays one stream through one plan at any rate scale, building the deployment once; ``predictor``: the
    output predictor learnt from the sizing data (None: from ``stream``); ``catalog``: whose fitted curves time the
    steps (None: the shipped catalogs)."""

    def __init__(
        self,
        plan: Plan,
        stream: RequestStream,
        policy: str,
        predictor: OutputPredictor | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        self.plan, self.policy = plan, policy
        self.req = SimRequest(plan, stream, policy=policy, predictor=predictor, config=verify_config(stream),
                              catalog=catalog)  # fmt: skip
        self.dep, self.stream = prepare_run(self.req)
        self.own = stream.n / stream.duration_s if stream.n > 1 else 1.0
        self.cache: dict[float, Outcome] = {}

    def slowed(self, prefill_scale: float, decode_scale: float) -> Replayer:
        """This replayer with every prefill / decode step ``prefill_scale`` / ``decode_scale`` times the model's
        (:meth:`hetplan.sim.deployment.Deployment.slowed`), with its own cache."""
        other = copy.copy(self)
        other.dep = self.dep.slowed(prefill_scale, decode_scale)
        other.cache = {}
        return other

    def run(self, label: str, scale: float) -> Outcome:
        """The outcome at ``scale`` x the stream's rate, labelled: metrics, percentile TTFT/TPOT, misses (see
        :func:`judge`)."""
        if scale not in self.cache:
            scaled = self.stream.scaled(scale)
            m, _, res = run_measured(replace(self.req, rate_scale=scale), self.dep, scaled)
            self.cache[scale] = judge(self.plan, scaled, m, res)
        rate = rnd(self.own * scale, 5)
        return replace(self.cache[scale], label=label, rate_scale=rnd(scale, 6), rate_req_per_s=rate)


def simulated_capacity(
    runner: Replayer, target: float, start: float, holds: bool, own: float, bisect: int = CAPACITY_BISECT
) -> float | None:
    """Goodput capacity in simulation (req/s): the highest rate whose joint SLO attainment is ≥ ``target``,
    searched from ``start`` (a rate scale whose outcome ``holds`` is known) by factors of 1.25 up or down, then
    ``bisect`` bisections (4: within 1.4 %; 2: within 5.7 %); None when even 1/64 of the start misses (capped at 64x
    the start). Like ``simulate --find-capacity``, a bracket on a finite trace (attainment is not strictly monotone
    in the rate)."""

    def ok(scale: float) -> bool:
        return runner.run("capacity", scale).joint >= target

    lo, hi = (start, None) if holds else (None, start)
    x = start
    while (hi is None if holds else lo is None) and start / 64 < x < start * 64:
        x = x * CAPACITY_STEP if holds else x / CAPACITY_STEP
        if ok(x):
            lo = x
        else:
            hi = x
    if lo is None:
        return None
    if hi is not None:
        for _ in range(bisect):
            mid = (lo * hi) ** 0.5
            if ok(mid):
                lo = mid
            else:
                hi = mid
    return rnd(lo * own, 5)


__all__ = [
    "CAPACITY_BISECT",
    "CAPACITY_STEP",
    "STEER_BISECT",
    "Outcome",
    "VERIFY_SEED",
    "Replayer",
    "fit_context",
    "judge",
    "percentiles",
    "plan_arrivals",
    "simulated_capacity",
    "slo_misses",
    "verify",
    "verify_config",
]
