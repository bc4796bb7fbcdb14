"""``hetplan plan``'s simulated check: a freshly planned deployment replayed on its own workload, the verdict and
the simulated capacity.

:func:`verify_plan` replays the workload at the goodput target and (a trace) at its own rate, gives the verdict
("verified on …" or "NOT verified on …") and measures the simulated goodput capacity to print beside the
analytic one. One run with its misses, the replays and the capacity search are :mod:`hetplan.sim.replay`; the
check against the model's own error is :mod:`hetplan.sim.model_error`; re-sizing a plan that misses is
:mod:`hetplan.planning.verify`.

Source: hetplan's own reconstruction (goodput capacity after DESIGN §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hetplan.budget import SIM_FIX, events_left, refuse
from hetplan.errors import InputError
from hetplan.plan.blocks import (
    Attainment,
    CascadeSettings,
    HeldOutRun,
    OutOfSample,
    SimulatedPrefixCache,
    Verification,
)
from hetplan.plan.types import Plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.model_error import MARGIN_BISECT, MARGIN_MAX, error_check
from hetplan.sim.policies import get_scheduler, policy_label
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.replay import (
    CAPACITY_BISECT,
    CAPACITY_STEP,
    STEER_BISECT,
    VERIFY_SEED,
    Replayer,
    fit_context,
    plan_arrivals,
    simulated_capacity,
    verify,
    verify_config,
)
from hetplan.sim.run import SimRequest, plan_cascade, prepare_run
from hetplan.sim.verdict_text import verdict_line, with_out_of_sample
from hetplan.units import rnd
from hetplan.workload.context import context_note
from hetplan.workload.model import RequestStream, Workload

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


def out_of_sample_runs(
    plan: Plan,
    workloads: Sequence[tuple[str, Workload]],
    policy: str,
    predictor: OutputPredictor | None = None,
    capacity: bool = False,
    bisect: int = CAPACITY_BISECT,
    catalog: Catalog | None = None,
) -> list[HeldOutRun]:
    """Replay each labelled workload the plan was not sized on at the plan's goodput target (its arrivals
    compressed or stretched to the target's mean rate; Poisson arrivals from seed 1 where it has no timestamps),
    with ``predictor``, the output predictor learnt from the sizing workload (None: from each replayed stream),
    step times from ``catalog``'s fitted curves (None: the shipped catalogs).

    Returns:
        One record per workload: ``label``, ``trace``, ``requests``, ``arrivals``, ``rate_req_per_s``,
        ``attainment`` (joint), ``ttft_p_s``/``tpot_p_s`` (None when unbounded), ``misses`` (empty: it holds);
        with ``capacity``, a run that misses also carries ``simulated_capacity_req_per_s``, the highest rate that
        holds on that workload (:func:`simulated_capacity` with ``bisect`` bisections; None when even 1/64 of the
        target misses). Only the lowest of them is searched whole: a later workload that holds at the lowest
        capacity found so far is not searched (its capacity is at least that; the record says
        ``capacity_at_least_req_per_s`` instead).
    """
    window = deployment_from_plan(plan, catalog).arch.spec.max_position_embeddings
    target = plan.goodput_target_req_per_s
    q = plan.slo.percentile / 100
    out = []
    lowest: float | None = None  # the lowest capacity found so far (req/s)
    for label, workload in workloads:
        fitted, ctx = fit_context(workload, window)
        if ctx.n_refused == workload.n_requests:
            continue
        stream, own, kind, _ = plan_arrivals(plan, fitted, seed=VERIFY_SEED + 1)
        runner = Replayer(plan, stream, policy, predictor, catalog)
        run = runner.run(label, target / own)
        found: dict[str, float | None] = {}
        if capacity and run.misses:  # how far it is from holding there: what a re-size must add
            at = lowest / own if lowest is not None else None
            if at == 0:  # another workload holds at no rate: the lowest is known
                found = {"simulated_capacity_req_per_s": None, "capacity_at_least_req_per_s": 0.0}
            elif at is not None and runner.run("capacity", at).joint >= q:
                found = {"simulated_capacity_req_per_s": None, "capacity_at_least_req_per_s": lowest}
            else:  # below the lowest so far (or the first): searched down from there
                cap = simulated_capacity(runner, q, at or target / own, False, own, bisect)
                found = {"simulated_capacity_req_per_s": cap}
                lowest = cap if cap is not None else 0.0
        out.append(
            HeldOutRun(
                label=label,
                trace=fitted.name,
                requests=stream.n,
                arrivals=kind,
                rate_req_per_s=run.rate_req_per_s,
                attainment=run.joint,
                ttft_p_s=run.ttft_q_s,
                tpot_p_s=run.tpot_q_s,
                misses=run.misses,
                **found,
            )
        )
    return out


def verify_plan(
    plan: Plan,
    workload: Workload,
    policy: str = "fcfs",
    capacity: bool = True,
    out_of_sample: Sequence[tuple[str, Workload]] = (),
    catalog: Catalog | None = None,
) -> Verification:
    """``hetplan plan``'s simulated check: replay the plan's workload through it and give the verdict (step times
    from ``catalog``'s fitted curves; None: the shipped catalogs).

    Runs: at the plan's goodput target (the trace's arrival pattern compressed or stretched to it: rate scale =
    target ÷ the trace's own rate) and, for a trace, at its own rate too. A workload without timestamps (a
    length-only file) gets Poisson arrivals at the target from the fixed seed ``VERIFY_SEED``; a synthetic one has
    Poisson arrivals already. The plan is **verified** when every run has joint SLO attainment ≥ the SLO percentile
    and the percentile TTFT and TPOT within their SLOs, and every ``out_of_sample`` workload holds too. With
    ``capacity`` the simulated goodput capacity (:func:`simulated_capacity`: the highest rate holding joint
    attainment ≥ the percentile) is measured too, to print beside the plan's analytic capacity.
    :class:`PlanCheck` is the same check kept for more questions (the capacity later, reusing the runs).

    Returns:
        The typed ``verification`` block (:meth:`PlanCheck.verdict`; ``to_doc()`` gives the plan file's data):
        ``status`` ("verified" or "not verified"), ``verdict`` (one line), ``trace``, ``requests``, ``attainment``
        (joint, at the goodput target), ``ttft_p_s`` / ``tpot_p_s`` (the SLO-percentile TTFT/TPOT there, seconds; None
        when unbounded), ``analytic_capacity_req_per_s``, ``simulated_capacity_req_per_s``, ``runs`` (each run's
        figures), ``misses`` and the simulator's warnings.

    Raises:
        InputError: unknown policy, a plan the simulator cannot rebuild, or every prompt over the context window.
    """
    return PlanCheck(plan, workload, policy, out_of_sample, catalog).verdict("full" if capacity else "none")


#: What :meth:`PlanCheck.verdict` measures of the simulated capacity, from least to most: none; only what a
#: re-size needs to steer (the in-sample capacity when it misses in sample, the capacity of each out-of-sample
#: workload it misses); full (the in-sample capacity always, as the plan prints it).
CAPACITY_MODES = ("none", "steer", "full")


class PlanCheck:
    """One plan's simulated check on one workload (:func:`verify_plan`), built once and asked as often as needed:
    every run is simulated once (:class:`Replayer`'s cache), so asking for the capacity after the verdict reuses
    the runs at the target. ``catalog``: whose fitted curves time the steps (None: the shipped catalogs).

    Raises:
        InputError: as :func:`verify_plan`.
    """

    def __init__(
        self,
        plan: Plan,
        workload: Workload,
        policy: str = "fcfs",
        out_of_sample: Sequence[tuple[str, Workload]] = (),
        catalog: Catalog | None = None,
    ) -> None:
        get_scheduler(policy)
        target = plan.goodput_target_req_per_s
        # requests whose prompt is longer than the context window are refused by any deployment: the planner leaves
        # them out of its length distribution (hetplan.workload.context), so the check leaves them out too instead
        # of counting them as misses; outputs cut at the window are served cut (the simulator applies the same rule)
        window = deployment_from_plan(plan, catalog).arch.spec.max_position_embeddings
        workload, ctx = fit_context(workload, window)
        if ctx.n_refused == workload.n_requests:
            raise InputError(
                f"every request's prompt is longer than the model's {window:,}-token context window",
                fix="use a model with a longer context or a trace of shorter prompts",
            )
        stream, own, kind, is_trace = plan_arrivals(plan, workload)
        self.cascade = None
        if policy.lower().strip() == "cascade":  # CASCADE is verified with its settings calibrated on this workload
            self.cascade = calibrate_for_plan(plan, stream, target / own, catalog)
            plan = replace(plan, cascade=self.cascade)
        # what policies may know of output lengths: the distribution of the workload the plan was sized on
        self.predictor = OutputPredictor(workload.prompt_tokens, workload.output_tokens)
        self.runner = Replayer(plan, stream, policy, self.predictor, catalog)
        self.catalog = catalog
        self.plan, self.workload, self.policy, self.ctx, self.window = plan, workload, policy, ctx, window
        self.stream, self.own, self.kind = stream, own, kind
        self.out_of_sample = list(out_of_sample)
        self.scales = [("goodput target", target / own)]
        if is_trace and abs(own / target - 1) > 0.01:
            self.scales.append(("trace rate", 1.0))
        self._held: list[HeldOutRun] | None = None
        self._held_capacity = False
        self._sim_cap: float | None = None
        self._sim_cap_bisect = -1  # the bisections of the in-sample capacity measured (-1: none)
        self._budget_checked = False
        self._more_checked = False

    def verdict(self, capacity: str = "full") -> Verification:
        """The typed ``verification`` block (:func:`verify_plan`), measuring the simulated capacity as ``capacity``
        says (:data:`CAPACITY_MODES`; a capacity not measured is None). A new block on every call.

        Raises:
            InputError: unknown mode. WorkBudgetError: the runs are over the command's simulator events.
        """
        if capacity not in CAPACITY_MODES:
            raise InputError(f"unknown capacity mode {capacity!r}", f"known: {', '.join(CAPACITY_MODES)}")
        plan, runner, stream, own = self.plan, self.runner, self.stream, self.own
        target = plan.goodput_target_req_per_s
        q = plan.slo.percentile
        measure = capacity != "none"
        if not self._budget_checked:
            _check_budget(stream.n, len(self.scales) + int(measure), not plan.instances and not runner.dep.aggregated)
        runs = [runner.run(label, scale) for label, scale in self.scales]
        main = runs[0]
        in_sample = all(not r.misses for r in runs)
        if measure and not self._more_checked:
            # the capacity search makes at least 1 + CAPACITY_BISECT more runs when the target holds (one step up,
            # then the bisection), at least one when it misses, and each out-of-sample workload one; runs cost
            # about what the first did (sparse arrivals a little less as the rate rises), so a search that cannot
            # fit is refused now, not after the budget
            more = (1 + CAPACITY_BISECT if not main.misses else 1) + len(self.out_of_sample)
            each = int(main.metrics.counters.get("events", 0))
            left = events_left()
            if left is not None and more * each > left:
                raise refuse(f"the verification's capacity search and out-of-sample runs ({more} runs at least, of "
                             f"about {each:,} events each on {stream.n:,} requests)", more * each, left,
                             "simulator events", SIM_FIX, True)  # fmt: skip
            self._more_checked = True
        self._budget_checked = True
        # out of sample only where it can change the verdict (a plan that misses in sample is not verified anyway)
        held: list[HeldOutRun] = []
        if in_sample:
            if self._held is None or (measure and not self._held_capacity and any(r.misses for r in self._held)):
                self._held = out_of_sample_runs(plan, self.out_of_sample, self.policy, self.predictor, measure,
                                                CAPACITY_BISECT if capacity == "full" else STEER_BISECT,
                                                self.catalog)  # fmt: skip
                self._held_capacity = measure
            no_cap = ("simulated_capacity_req_per_s", "capacity_at_least_req_per_s")
            held = self._held if measure else [r.without(*no_cap) for r in self._held]
        # the capacities searched (measured, a run that misses has one; one only bounded below has its at-least)
        oos_caps = [
            r.simulated_capacity_req_per_s
            for r in held
            if measure and r.misses and r.capacity_at_least_req_per_s is None
        ]
        verified = in_sample and all(not r.misses for r in held)
        bisect = CAPACITY_BISECT if capacity == "full" else STEER_BISECT if not in_sample else -1
        if bisect > self._sim_cap_bisect:  # searched again finer: the runs it made before are in the cache
            self._sim_cap = simulated_capacity(runner, q / 100, target / own, not main.misses, own, bisect)
            self._sim_cap_bisect = bisect
        sim_cap = self._sim_cap if measure else None
        analytic = plan.goodput_req_per_s
        ctx, window = self.ctx, self.window
        left_out = ctx.n_refused
        note = context_note(left_out, ctx.n_truncated, window)
        name = self.workload.name
        kind = self.kind
        verdict = verdict_line(in_sample, name, main, runs, q, plan, kind)
        if held:
            verdict = with_out_of_sample(verdict, in_sample, held)
        m = main.metrics
        misses = [f"{r.label} ({r.rate_req_per_s:.4g} req/s): {x}" for r in runs for x in r.misses]
        misses += [f"{r.label} ({r.rate_req_per_s:.4g} req/s): {x}" for r in held for x in r.misses]
        extra: dict[str, Any] = {}  # the optional leading fields, by name, in the block's order
        if len(m.classes) > 1:  # a workload with classes: per-class attainment and Jain's index over them
            extra.update(attainment_by_class={c.name: c.attainment for c in m.classes}, jain_index=m.jain_index)
        if main.class_checks is not None:  # the scenario's request classes, each against its own SLOs at the target
            extra.update(classes=main.class_checks)
        if self.cascade is not None:
            extra.update(cascade=self.cascade)
        if m.prefix_cache is not None:  # the simulated hits (hetplan.sim.prefix), under the router verify_config chose
            prefix = {"prefix_cache": SimulatedPrefixCache.from_doc({**m.prefix_cache.to_doc(), "router": "prefix"})}
        else:
            prefix = {}
        oos_status = (
            ("holds" if all(not r.misses for r in held) else "misses")
            if held
            else ("not run: it misses in sample" if not in_sample and self.out_of_sample else "not run")
        )
        a = m.attainment
        return Verification(
            **extra,
            status="verified" if verified else "not verified",
            in_sample_status="verified" if in_sample else "not verified",
            out_of_sample=OutOfSample(status=oos_status, runs=held),
            verdict=verdict,
            trace=name,
            requests=m.requests,
            arrivals=kind,
            policy=policy_label(self.policy),
            percentile=q,
            attainment=a.joint,
            attainment_by_slo=Attainment(ttft=a.ttft, tpot=a.tpot, joint=a.joint),
            ttft_p_s=main.ttft_q_s,
            tpot_p_s=main.tpot_q_s,
            analytic_capacity_req_per_s=analytic,
            simulated_capacity_req_per_s=sim_cap,
            capacity_ratio=rnd(sim_cap / analytic, 4) if sim_cap is not None and analytic else None,
            # the lowest capacity among the out-of-sample workloads it misses (what a re-size must reach)
            out_of_sample_capacity_req_per_s=min((c or 0.0) for c in oos_caps) if oos_caps else None,
            target_req_per_s=target,
            trace_rate_req_per_s=rnd(own, 5),
            rate_scale=rnd(target / own, 6),
            runs=[r.run_block() for r in runs],
            unfinished=m.unfinished,
            dropped=m.dropped + m.dropped_over_context,
            left_out_over_context=left_out,
            truncated_at_context=ctx.n_truncated,
            tpot_ineligible=m.tpot_ineligible,
            goodput_req_per_s=m.goodput_req_per_s,
            goodput_definition=m.goodput_definition,
            summary=verdict + (f"; {note} (refused ones left out)" if note else ""),
            misses=misses,
            warnings=m.warnings,
            **prefix,
        )


def _check_budget(n: int, runs: int, disaggregated: bool) -> None:
    """Refuse a check whose least work is over the command's simulator events left (:mod:`hetplan.budget`):
    ``runs`` runs of ``n`` arrivals, and as many KV transfers when every request crosses a combo's link.

    Raises:
        WorkBudgetError: over the budget.
    """
    need = n * runs * (2 if disaggregated else 1)
    left = events_left()
    if left is not None and need > left:
        raise refuse(f"verifying the plan on {n:,} requests ({runs} simulation runs at least)", need, left,
                     "simulator events", SIM_FIX, True)  # fmt: skip


def calibrate_for_plan(
    plan: Plan, stream: RequestStream, rate_scale: float, catalog: Catalog | None = None
) -> CascadeSettings:
    """CASCADE's typed ``cascade`` block for ``plan`` fitted on ``stream`` at ``rate_scale`` (κ per class, q₂ by
    goodput × Jain; :func:`hetplan.sim.calibrate.calibrate_fit`), as ``hetplan calibrate`` writes it (``catalog``:
    as :func:`verify_plan`)."""
    from hetplan.sim.calibrate import calibrate_fit

    req = SimRequest(plan, stream, policy="cascade", config=verify_config(stream), catalog=catalog)
    dep, scaled = prepare_run(replace(req, rate_scale=rate_scale))
    fit = calibrate_fit(dep, scaled, plan_cascade(plan), req.config, rate_scale=rate_scale)
    return CascadeSettings.from_doc(fit.to_doc())  # the calibration's document is the block, as written


__all__ = [
    "CAPACITY_BISECT",
    "CAPACITY_MODES",
    "CAPACITY_STEP",
    "MARGIN_BISECT",
    "MARGIN_MAX",
    "VERIFY_SEED",
    "STEER_BISECT",
    "PlanCheck",
    "Replayer",
    "error_check",
    "out_of_sample_runs",
    "simulated_capacity",
    "verify",
    "verify_plan",
]
