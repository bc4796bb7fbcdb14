"""What-ifs of one scenario (``hetplan explore``): vary one or two things, plan each point, print the cost curve.

An axis is ``NAME=V1,V2,...`` (``--vary``, at most two; two make a product, the first varying slowest):

=================  ====================================================  =========================================
axis               values                                                what a point changes
=================  ====================================================  =========================================
``goodput``        ``1x,1.5x,2x`` (times the scenario's target, else     ``goodput_req_per_s``
                   the trace's mean rate), ``+50%``, or req/s (``7.5``)
``ttft``           durations with a unit: ``1s,2s,5s``                   ``slo.ttft``
``tpot``           durations with a unit: ``50ms,100ms``                 ``slo.tpot``
``price:GPU``      ``-20%,+10%`` or factors ``0.8x``                      every price of that GPU (rented offers
                                                                         and owned amortised prices), after the
                                                                         request is built
``owned:GPU``      ``+4,+8`` (more than the scenario owns) or counts       ``inventory[GPU]``
                   ``4,12``
=================  ====================================================  =========================================

Each point is planned exactly as ``hetplan plan SCENARIO --no-verify --no-analysis`` with that value would plan it
(the same pipeline, :func:`hetplan.planning.pipeline.plan`; same strategy rule), so its cost is that command's.
What is shared across points: the points run in this one process, one after another, so the model, the catalog,
the fitted performance curves and the planner are loaded once, and the base scenario is validated and its
request built once before any point runs (which checks every axis value, so a bad one stops the command before
any work). The candidate enumeration is not shared: every axis but ``price``/``owned`` changes the capacities it
computes (TTFT and TPOT bound them; a goodput target replays the trace's bursts at the sized rate), and it takes a
tenth of a point's time on the bundled examples. Unlike ``hetplan sweep`` (a grid file, a process pool or Ray, a
folder of plan files and a report, every case planned from scratch in a worker), explore takes one scenario and one
or two axes on the command line, runs in-process and prints the curve with each point's deployment.

The check (default): each point is planned and simulated as ``hetplan plan --no-resize --no-analysis --confidence
none`` does it: a trace's last 30 % (``workload.holdout`` when set) is held out of sizing, the plan is simulated at
its goodput target and the trace's own rate in sample and on the held-out part
(:func:`hetplan.sim.verify.verify_plan`, without the simulated-capacity search), and ``held`` / ``missed`` says
whether the plan *as sized* holds the SLOs; ``hetplan plan`` at that value would re-size a missed plan (at more
cost). ``verify=False`` (``--no-verify``): each point as ``hetplan plan --no-verify --no-analysis`` plans it (on the
whole trace), check ``not run``. Why every point and not only the cheapest: the check is what tells a relaxed SLO
that saves money from one that only looks cheaper on paper (example (a) at ``ttft=5s``: $56.03/h planned, misses
in simulation), and it costs about a second a point on the bundled examples.

Source: hetplan's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from hetplan.errors import HetplanError, InfeasibleError, InputError, OutOfMemoryError
from hetplan.explore_axes import AXES, MAX_AXES, MAX_POINTS, Axis, Point, Value, build_points, parse_axes, parse_axis
from hetplan.plan.blocks import Attainment
from hetplan.units import parse_duration_s, rnd

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.plan.types import Plan
    from hetplan.scenario import Scenario
    from hetplan.solvers.milp import SolveSettings
    from hetplan.workload.model import Workload


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, HetplanError):
        return exc.what + (f" ({exc.why})" if exc.why else "")
    return f"internal error: {type(exc).__name__}: {exc}"


class _Doc(BaseModel):
    """A typed row or document; ``to_doc()`` leaves out the fields never set (a row's fields depend on its status)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_doc(self) -> dict[str, Any]:
        """The JSON-friendly dict ``--json`` prints (keys in field order, unset fields left out)."""
        return self.model_dump(mode="python", exclude_unset=True)


class OwnedUse(_Doc):
    """Owned GPUs of one type at a point: how many the scenario owns and how many the plan uses."""

    owned: int
    used: int


class PointRow(_Doc):
    """One point of the curve (:func:`point_row`): its values, SLOs (s) and goodput target (req/s); planned: the
    strategy, $/h and $/month, deployment and GPUs; checked: held or missed, joint attainment and the SLO
    percentiles (s) in simulation; failed or infeasible: the error. Every row :func:`point_row` makes sets the
    goodput target and SLOs (None only in a hand-made row)."""

    point: str
    values: dict[str, str]
    status: str
    goodput_target_req_per_s: float | None = None
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    strategy: str | None = None
    usd_per_hour: float | None = None
    usd_per_month: float | None = None
    deployment: str | None = None
    gpus_used: dict[str, int] | None = None
    owned_gpus: dict[str, OwnedUse] | None = None
    check: str
    error: str | None = None
    out_of_sample: str | None = None
    attainment: float | None = None
    ttft_q_s: float | None = None
    tpot_q_s: float | None = None
    misses: list[str] | None = None


class AxisDoc(_Doc):
    """An axis as the document lists it: its title and the values as written."""

    axis: str
    values: list[str]


class Counts(_Doc):
    """Points planned, infeasible and failed."""

    ok: int
    infeasible: int
    error: int


class ExploreDoc(_Doc):
    """``hetplan explore``'s document (:func:`explore`): the axes, the check rule, one row per point, the counts,
    the cheapest point and the cheapest that held (their ``point`` labels)."""

    kind: str = "explore"
    scenario: str
    strategy: str
    axes: list[AxisDoc]
    base_goodput_target_req_per_s: float
    check: str
    points: list[PointRow]
    counts: Counts
    cheapest: str | None
    cheapest_held: str | None

    def to_doc(self) -> dict[str, Any]:
        """The document, ``kind`` included (it has a default, so it is set here)."""
        return {"kind": self.kind, **super().to_doc()}


def point_row(point: Point, status: str, plan: Plan | None, error: str | None) -> PointRow:
    """The row of one point: its values, the plan's cost, deployment and GPUs (from the typed ``plan``), and the
    check's outcome."""
    head: dict[str, Any] = dict(
        point=point.shown,
        values=dict(point.labels),
        status=status,
        goodput_target_req_per_s=rnd(point.scenario.goodput_req_per_s)
        if point.scenario.goodput_req_per_s is not None
        else None,
        slo_ttft_s=rnd(parse_duration_s(point.scenario.slo.ttft, "ttft")),
        slo_tpot_s=rnd(parse_duration_s(point.scenario.slo.tpot, "tpot")),
    )
    if plan is None:
        return PointRow(**head, check="not run", error=error or "")
    head.update(
        goodput_target_req_per_s=plan.goodput_target_req_per_s,
        strategy=plan.strategy,
        usd_per_hour=plan.total_usd_per_hour,
        usd_per_month=plan.usd_per_month,
        deployment=units_line(plan),
        gpus_used=dict(plan.gpus_used),
        owned_gpus={g: OwnedUse(owned=o.owned, used=o.used) for g, o in (plan.owned_gpus or {}).items()},
    )
    v = plan.verification
    if error is not None:
        return PointRow(**head, check="check failed", error=error)
    if v is None:
        return PointRow(**head, check="not run")
    att = v.attainment
    return PointRow(
        **head,
        check="held" if v.status == "verified" else "missed",
        out_of_sample=None if v.out_of_sample is None else v.out_of_sample.status,
        attainment=att.joint if isinstance(att, Attainment) else att,
        ttft_q_s=v.ttft_p_s,
        tpot_q_s=v.tpot_p_s,
        misses=list(v.misses or []),
    )


def units_line(plan: Plan) -> str:
    """The plan's deployment in one line: ``1x [1x H100-SXM TP2 -> 1x A100-80GB-SXM TP4]; ...`` for combos,
    ``2x A100-80GB-SXM TP4`` for aggregated instances (as :func:`hetplan.sweep.table.chosen_units` writes a plan
    file's)."""
    return "; ".join(
        [f"{c.count}x [{c.label}]" for c in plan.combos] + [f"{t.count}x {t.gpu} TP{t.tp}" for t in plan.instances]
    )


def explore_points(
    base: Scenario,
    axes: list[Axis],
    strategy: str = "all",
    verify: bool = True,
    policy: str = "fcfs",
    progress: Callable[[int, int, str], None] | None = None,
    solve: SolveSettings | None = None,
    catalog: Catalog | None = None,
) -> ExploreDoc:
    """Plan (and by default simulate) every point of ``axes`` over ``base``; returns the typed explore document
    (:class:`ExploreDoc`): the axes, how points were checked, one row per point (:func:`point_row`), the cheapest
    point and the cheapest that held. ``progress(done, total, point)`` is called before each point and at the end.
    Deterministic: no timings in the document (the caller measures). ``catalog``: as :func:`hetplan.api.plan`.

    Raises:
        InputError: a bad axis value or scenario (before any point is planned). A point's own infeasibility or
        failure is its row's ``status`` (infeasible, error), not raised.
    """
    from dataclasses import replace

    from hetplan import api
    from hetplan.budget import command_budget
    from hetplan.planning.verify import DEFAULT_HOLDOUT, verification_workloads, with_split
    from hetplan.resources import Resources
    from hetplan.sim.verify import verify_plan

    points, target = build_points(base, axes, catalog)
    rows = []
    for i, point in enumerate(points):
        if progress is not None:
            progress(i, len(points), point.shown)
        scenario, workload, split = point.scenario, None, ""
        held_out: list[tuple[str, Workload]] = []
        if verify:  # sized as hetplan plan sizes a plan it checks: a trace's last 30 % held out (unless set)
            scenario, workload, held_out, split = verification_workloads(scenario, DEFAULT_HOLDOUT)
        try:
            plan = api.plan(scenario, strategy, False, resources=Resources(plan_workers=1), solve=solve,
                            price_factors=dict(point.price_factors), catalog=catalog)  # fmt: skip
        except (InfeasibleError, OutOfMemoryError) as exc:
            rows.append(point_row(point, "infeasible", None, _one_line(exc)))
            continue
        except InputError:
            raise
        except HetplanError as exc:
            rows.append(point_row(point, "error", None, _one_line(exc)))
            continue
        check_error = None
        if workload is not None:
            if progress is not None:
                progress(i, len(points), f"{point.shown}: simulating ${plan.total_usd_per_hour:,.2f}/h")
            try:
                with command_budget():  # each point's check has the whole budget of simulated work
                    v = verify_plan(plan, workload, policy, False, held_out, catalog)
                plan = replace(plan, verification=with_split(v, split))
            except HetplanError as exc:  # the plan stands; the row says the check failed and why
                check_error = _one_line(exc)
        rows.append(point_row(point, "ok", plan, check_error))
    if progress is not None:
        progress(len(points), len(points), "done")
    ok = [r for r in rows if r.status == "ok"]
    held = [r for r in ok if r.check == "held"]
    cheapest = min(ok, key=_usd_per_hour, default=None)
    cheapest_held = min(held, key=_usd_per_hour, default=None)
    return ExploreDoc(
        scenario=base.name,
        strategy=strategy,
        axes=[AxisDoc(axis=a.title, values=[v.label for v in a.values]) for a in axes],
        base_goodput_target_req_per_s=rnd(target),
        check=check_text(verify, policy),
        points=rows,
        counts=Counts(**{s: sum(r.status == s for r in rows) for s in ("ok", "infeasible", "error")}),
        cheapest=None if cheapest is None else cheapest.point,
        cheapest_held=None if cheapest_held is None else cheapest_held.point,
    )


def _usd_per_hour(row: PointRow) -> float:
    """A planned row's $/h (the cheapest point's key)."""
    assert row.usd_per_hour is not None
    return row.usd_per_hour


def check_text(verify: bool, policy: str) -> str:
    """How each point was checked, one line (printed above the curve and in ``--json``)."""
    if not verify:
        return "none (--no-verify): each point as hetplan plan --no-verify --no-analysis plans it, not simulated"
    return (
        f"each point planned and simulated ({policy}) as hetplan plan --no-resize --no-analysis --confidence none "
        "does it (a trace's last 30 % held out of sizing and checked too; a synthetic workload also on its next "
        "seed); not re-sized: a missed point is what hetplan plan would re-size, at more cost"
    )


__all__ = ["AXES", "MAX_AXES", "MAX_POINTS", "Axis", "AxisDoc", "Counts", "ExploreDoc", "OwnedUse", "Point",
           "PointRow", "Value", "build_points", "check_text", "explore_points", "parse_axes", "parse_axis",
           "point_row"]  # fmt: skip
