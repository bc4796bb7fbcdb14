"""``hetplan simulate PLAN --concurrency C --isl I --osl O``: a closed loop at fixed concurrency, as engines are
benchmarked (``vllm bench serve --max-concurrency``, genai-perf's concurrency mode).

C clients each send a request of I prompt tokens and O output tokens and, when it ends (its last token, or a
refusal), send the next one at once, until ``requests`` requests have been sent. All C start at time 0, so the
run includes the ramp-up, as the benchmark tools' runs do. The simulator is the open-loop one
(:class:`~hetplan.sim.engine.Simulator` with ``clients``): each completion schedules the client's next arrival.

Reported (seconds, per request unless said): mean and p50/p90/p99 TTFT, TPOT (requests with ≥ 2 output tokens),
ITL (token-weighted) and E2E; throughput in requests/s, output tokens/s and total tokens/s over the run (first
send to last completion). By Little's law a closed loop's throughput is C ÷ mean E2E, which the document shows as
a check.

Source: the closed-loop set-up of vLLM's ``benchmarks/benchmark_serving.py`` (``--max-concurrency``); hetplan's own
reconstruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.budget import closed_loop_events, events_left, refuse
from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.metrics import measure
from hetplan.sim.policies import get_scheduler, policy_label
from hetplan.sim.result import ClosedLoop
from hetplan.sim.run import plan_cascade
from hetplan.units import rnd
from hetplan.workload.model import MAX_TOKENS, make_stream

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

MAX_REQUESTS = 1_000_000


def closed_loop_run(
    plan: Plan,
    concurrency: int,
    isl: int,
    osl: int,
    requests: int | None = None,
    policy: str = "fcfs",
    config: SimConfig | None = None,
    catalog: Catalog | None = None,
) -> ClosedLoop:
    """Run ``concurrency`` clients of ``isl``/``osl``-token requests through ``plan`` (module docstring);
    ``requests`` in all (default ``max(10 x concurrency, 100)``); step times from ``catalog``'s fitted curves
    (None: the shipped catalogs). Deterministic.

    Returns:
        :class:`~hetplan.sim.result.ClosedLoop`: throughput (req/s, tokens/s), latency statistics (s), Little's
        law's check, attainment, utilisation by role, counters and warnings.

    Raises:
        InputError: a concurrency, length or request count below 1 (or above 1,000,000 requests or clients, or
            10M tokens), or a plan the simulator cannot rebuild.
    """
    n = max(10 * concurrency, 100) if requests is None else requests
    for name, value in (("--concurrency", concurrency), ("--isl", isl), ("--osl", osl), ("--requests", n)):
        if value < 1:
            raise InputError(f"{name} must be >= 1, got {value}", fix=f"pass e.g. {name} 8")
    if n > MAX_REQUESTS:
        raise InputError(f"--requests {n:,} is more than {MAX_REQUESTS:,}", fix="pass fewer --requests")
    for name, value in (("--isl", isl), ("--osl", osl)):
        if value > MAX_TOKENS:
            raise InputError(
                f"{name} {value:,} is more than {MAX_TOKENS:,} tokens",
                "no served model has a context that long (the largest are about 10M tokens)",
                f"pass a request length in tokens, e.g. {name} 1000",
            )
    if concurrency > MAX_REQUESTS:
        raise InputError(f"--concurrency {concurrency:,} is more than {MAX_REQUESTS:,} clients",
                         fix="pass fewer clients, e.g. --concurrency 64")  # fmt: skip
    cfg = config or SimConfig()
    dep = deployment_from_plan(plan, catalog)
    # the work budget (hetplan.budget): at most max_num_seqs sequences decode together on each instance, so the
    # loop needs at least n x osl / that many iterations (--concurrency 1 --requests 1000000 --osl 10000000 asked
    # for 10^13)
    seqs = sum(s.max_num_seqs for s in dep.instances if s.role != "prefill")
    need = closed_loop_events(n, min(osl, dep.arch.spec.max_position_embeddings), concurrency, seqs,
                              not plan.instances and not dep.aggregated)  # fmt: skip
    left = events_left()
    if left is not None and need > left:
        raise refuse(
            f"a closed loop of {n:,} requests of {osl:,} output tokens at --concurrency {concurrency:,}",
            need,
            left,
            "simulator events",
            "pass fewer --requests, a shorter --osl or a higher --concurrency",
            True,
        )
    stream = make_stream(np.zeros(n), np.full(n, isl), np.full(n, osl), ttft_slo_s=plan.slo.ttft_s,
                         tpot_slo_s=plan.slo.tpot_s, source=f"closed loop: {concurrency} clients")  # fmt: skip
    sim = Simulator(dep, stream, get_scheduler(policy, plan_cascade(plan)), cfg, clients=concurrency)
    res = sim.run()
    m = measure(stream, res)
    done = res.done_s[np.isfinite(res.done_s)]
    span = float(done.max()) if done.size else 0.0
    out_tokens = int(res.output_tokens[np.isfinite(res.done_s) & ~res.dropped].sum())

    def per_s(x: float) -> float | None:
        return rnd(x / span, 5) if span > 0 else None

    e2e_mean = m.e2e_s.mean
    return ClosedLoop(
        policy=policy_label(policy),
        router=cfg.router,
        instances=len(dep.instances),
        plan_strategy=plan.strategy,
        concurrency=concurrency,
        isl=isl,
        osl=osl,
        requests=n,
        finished=m.finished,
        dropped=m.dropped + m.dropped_over_context,
        duration_s=rnd(span, 6),
        throughput_req_per_s=per_s(m.finished),
        output_tokens_per_s=per_s(out_tokens),
        total_tokens_per_s=per_s(out_tokens + isl * m.finished),
        littles_law_req_per_s=rnd(min(concurrency, n) / e2e_mean, 5) if e2e_mean else None,
        ttft_s=m.ttft_s,
        tpot_s=m.tpot_s,
        itl_s=m.itl_s,
        e2e_s=m.e2e_s,
        attainment=m.attainment,
        tpot_ineligible=m.tpot_ineligible,
        utilization=m.utilization.by_role,
        counters=m.counters,
        warnings=m.warnings,
    )


def closed_loop(
    plan: Plan,
    concurrency: int,
    isl: int,
    osl: int,
    requests: int | None = None,
    policy: str = "fcfs",
    config: SimConfig | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """:func:`closed_loop_run` as its document (:meth:`ClosedLoop.to_doc`): ``{"kind": "closed-loop",
    "concurrency", "isl", "osl", "requests", "finished", "throughput_req_per_s", "output_tokens_per_s",
    "total_tokens_per_s", "ttft_s", "tpot_s", "itl_s", "e2e_s", "littles_law_req_per_s", "warnings", ...}`` with
    latency statistics ``{"mean", "p50", "p90", "p99"}`` in seconds. Same errors."""
    return closed_loop_run(plan, concurrency, isl, osl, requests, policy, config, catalog).to_doc()


__all__ = ["MAX_REQUESTS", "closed_loop", "closed_loop_run"]
