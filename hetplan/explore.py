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

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetplan.errors import HetplanError, InfeasibleError, InputError, OutOfMemoryError
from hetplan.plan.doc import verification_block
from hetplan.units import parse_duration_s, rnd
from hetplan.workload.classes import check_slo_override

if TYPE_CHECKING:
    from hetplan.scenario import Scenario
    from hetplan.solvers.milp import SolveSettings
    from hetplan.workload.model import Workload

#: The axes and what they accept (for messages).
AXES = {
    "goodput": "1x,1.5x,2x (times the target), +50%, or req/s",
    "ttft": "durations, e.g. 1s,2s,5s",
    "tpot": "durations, e.g. 50ms,100ms",
    "price:GPU": "-20%,+10% or 0.8x (every price of that GPU)",
    "owned:GPU": "+4,+8 (more owned) or counts 4,12",
}
MAX_AXES = 2
#: Most points one command plans (a work budget: about a second or two each on the bundled examples).
MAX_POINTS = 64
_FACTOR = re.compile(r"^([0-9]*\.?[0-9]+)\s*x$", re.ASCII)
_PERCENT = re.compile(r"^([+-])\s*([0-9]*\.?[0-9]+)\s*%$", re.ASCII)
_NUMBER = re.compile(r"^[0-9]*\.?[0-9]+$", re.ASCII)
_DELTA = re.compile(r"^([+-])\s*([0-9]+)$", re.ASCII)


@dataclass(frozen=True)
class Value:
    """One value of an axis: its ``label`` as written and what it sets (``kind``: ``factor``, ``absolute``,
    ``delta`` or ``seconds``; ``number``)."""

    label: str
    kind: str
    number: float


@dataclass(frozen=True)
class Axis:
    """One ``--vary`` axis: ``name`` (``goodput``, ``ttft``, ``tpot``, ``price``, ``owned``), ``gpu`` (for
    ``price``/``owned``, as written), the text as given and its values."""

    name: str
    gpu: str | None
    text: str
    values: tuple[Value, ...]

    @property
    def title(self) -> str:
        """``goodput`` or ``price:L40S``."""
        return self.name if self.gpu is None else f"{self.name}:{self.gpu}"


def _bad(axis: str, item: str, expected: str) -> InputError:
    return InputError(f"--vary {axis}: cannot read {item!r}", f"expected {expected}", f"write e.g. {_EXAMPLE[axis]}")


_EXAMPLE = {
    "goodput": "--vary goodput=1x,1.5x,2x",
    "ttft": "--vary ttft=1s,2s,5s",
    "tpot": "--vary tpot=50ms,100ms",
    "price": "--vary price:L40S=-20%,+20%",
    "owned": "--vary owned:L40S=+4,+8",
}


def _factor(axis: str, item: str, expected: str, allow_number: bool) -> Value:
    """``1.5x``, ``+50%``/``-20%`` as a factor; a bare number as an absolute value when ``allow_number``."""
    m = _FACTOR.match(item)
    if m:
        f = float(m.group(1))
    elif (p := _PERCENT.match(item)) is not None:
        f = 1.0 + (1 if p.group(1) == "+" else -1) * float(p.group(2)) / 100.0
    elif allow_number and _NUMBER.match(item):
        v = float(item)
        if not v > 0:
            raise InputError(f"--vary {axis}: {item!r} is not positive", fix=f"write e.g. {_EXAMPLE[axis]}")
        return Value(item, "absolute", v)
    else:
        raise _bad(axis, item, expected)
    if not f > 0:
        raise InputError(
            f"--vary {axis}: {item!r} makes a factor of {f:g}",
            "a factor must be above 0",
            f"write e.g. {_EXAMPLE[axis]}",
        )
    return Value(item, "factor", f)


def parse_axis(text: str) -> Axis:
    """One ``--vary`` value, ``NAME=V1,V2,...`` (module docstring).

    Raises:
        InputError: no ``=``, an unknown axis (with the known ones), a missing GPU name, an empty list, a value the
            axis cannot read or one given twice; the message names the axis and the value.
    """
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep:
        raise InputError(f"--vary {text!r}: expected NAME=V1,V2,...", fix="write e.g. --vary goodput=1x,1.5x,2x")
    base, colon, gpu = name.partition(":")
    base = base.strip().lower()
    if base not in _EXAMPLE:
        import difflib

        close = difflib.get_close_matches(base, list(_EXAMPLE), n=1)
        raise InputError(
            f"--vary: unknown axis {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
            "the axes are: " + "; ".join(f"{k} ({v})" for k, v in AXES.items()),
            "pick one of them",
        )
    if base in ("price", "owned") and not (colon and gpu.strip()):
        raise InputError(f"--vary {base}: no GPU named", f"{base} moves one GPU type", f"write e.g. {_EXAMPLE[base]}")
    if base not in ("price", "owned") and colon:
        raise InputError(f"--vary {name}: {base} takes no GPU", fix=f"write e.g. {_EXAMPLE[base]}")
    items = [x.strip() for x in rest.split(",") if x.strip()]
    if not items:
        raise InputError(f"--vary {name}: no values", fix=f"write e.g. {_EXAMPLE[base]}")
    values: list[Value] = []
    for item in items:
        if base == "goodput":
            values.append(_factor(base, item, "a factor (1.5x), a signed percent (+50%) or req/s (7.5)", True))
        elif base in ("ttft", "tpot"):
            try:
                seconds = parse_duration_s(item, base)
            except InputError as exc:
                raise InputError(f"--vary {base}: {exc.what}", exc.why, f"write e.g. {_EXAMPLE[base]}") from None
            values.append(Value(item, "seconds", seconds))
        elif base == "price":
            values.append(_factor(base, item, "a signed percent (-20%) or a factor (0.8x)", False))
        else:
            d = _DELTA.match(item)
            if d is not None:
                values.append(Value(item, "delta", (1 if d.group(1) == "+" else -1) * float(d.group(2))))
            elif item.isascii() and item.isdigit():
                values.append(Value(item, "absolute", float(item)))
            else:
                raise _bad(base, item, "a change (+4, -8) or a count of owned GPUs (12)")
    seen = [v.label for v in values]
    twice = sorted({s for s in seen if seen.count(s) > 1})
    if twice:
        raise InputError(f"--vary {name}: {twice[0]} given twice", fix="give each value once")
    return Axis(base, gpu.strip() or None, text, tuple(values))


def parse_axes(texts: list[str]) -> list[Axis]:
    """The ``--vary`` axes (one or two, different names).

    Raises:
        InputError: none, more than two, the same axis twice, more than :data:`MAX_POINTS` points, or a bad axis.
    """
    if not texts:
        raise InputError("explore needs an axis", fix="pass e.g. --vary goodput=1x,1.5x,2x")
    if len(texts) > MAX_AXES:
        raise InputError(
            f"--vary given {len(texts)} times", f"explore varies at most {MAX_AXES} axes (a curve or a table)",
            "keep two --vary, or use hetplan sweep for a larger grid",
        )  # fmt: skip
    axes = [parse_axis(t) for t in texts]
    if len(axes) == 2 and axes[0].title.lower() == axes[1].title.lower():
        raise InputError(f"--vary {axes[0].title} given twice", fix="give each axis once, its values comma-separated")
    points = 1
    for a in axes:
        points *= len(a.values)
    if points > MAX_POINTS:
        raise InputError(
            f"--vary: {points} points", f"explore plans at most {MAX_POINTS}",
            "give fewer values, or use hetplan sweep for a grid",
        )  # fmt: skip
    return axes


@dataclass(frozen=True)
class Point:
    """One point: its values (axis title -> label), the scenario it plans and the price factors it applies."""

    labels: tuple[tuple[str, str], ...]
    scenario: Scenario
    price_factors: tuple[tuple[str, float], ...]
    shown: str


def _canonical(gpu: str, axis: str) -> str:
    from hetplan.catalog.loader import find_gpu

    try:
        return find_gpu(gpu).name
    except InputError as exc:
        raise InputError(f"--vary {axis}:{gpu}: {exc.what}", exc.why, exc.fix) from None


def build_points(base: Scenario, axes: list[Axis]) -> tuple[list[Point], float]:
    """The points of ``axes`` over ``base``, each validated (a product, the first axis varying slowest), and the
    goodput target ``goodput=1x`` means (the scenario's, else the workload's mean rate; req/s).

    Builds ``base``'s request once (:func:`hetplan.planning.request.build_request`) for the goodput target and
    the candidate GPUs.

    Raises:
        InputError: the scenario is invalid, a ``price``/``owned`` GPU is unknown or not a candidate, an ``owned``
            count below 0, or a point's scenario the schema refuses (each names the axis and value).
    """
    from pydantic import ValidationError

    from hetplan.catalog.loader import format_validation
    from hetplan.planning.request import build_request
    from hetplan.scenario import Scenario

    req, _, _, _ = build_request(base)
    target = req.goodput_req_per_s
    owned_now: dict[str, int] = {}
    for name, n in base.inventory.items():
        owned_now[_canonical(name, "owned")] = int(n)
    for a in axes:
        if a.gpu is not None:
            gpu = _canonical(a.gpu, a.name)
            if gpu not in req.prices:
                raise InputError(
                    f"--vary {a.name}:{a.gpu}: {gpu} is not a candidate GPU of {base.name}",
                    f"the candidates are {', '.join(sorted(req.prices))}",
                    "name one of them, or add the GPU to the scenario's gpus",
                )
    points = []
    for combo in itertools.product(*(a.values for a in axes)):
        doc = base.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
        doc.setdefault("slo", {})
        factors: dict[str, float] = {}
        shown = []
        for a, v in zip(axes, combo, strict=True):
            if a.name == "goodput":
                rate = v.number if v.kind == "absolute" else target * v.number
                doc["goodput_req_per_s"] = rate
                shown.append(f"{a.title}={v.label}" + ("" if v.kind == "absolute" else f" ({rate:.4g} req/s)"))
                continue
            if a.name in ("ttft", "tpot"):
                check_slo_override(doc.get("classes"), a.name, f"--vary {a.name}")
                doc["slo"][a.name] = v.label
            elif a.name == "price":
                factors[_canonical(a.gpu or "", a.name)] = v.number
            else:
                gpu = _canonical(a.gpu or "", a.name)
                inv = {_canonical(k, "owned"): int(n) for k, n in doc.get("inventory", {}).items()}
                count = int(v.number) if v.kind == "absolute" else owned_now.get(gpu, 0) + int(v.number)
                if count < 0:
                    raise InputError(
                        f"--vary owned:{a.gpu}={v.label}: {count} owned",
                        f"the scenario owns {owned_now.get(gpu, 0)}",
                        "give a change that leaves 0 or more",
                    )
                inv[gpu] = count
                doc["inventory"] = inv
                if v.kind == "delta":
                    shown.append(f"{a.title}={v.label} ({count})")
                    continue
            shown.append(f"{a.title}={v.label}")
        try:
            sc = Scenario.model_validate(doc).with_base_dir(base.base_dir)
        except ValidationError as exc:
            where = ", ".join(shown)
            raise InputError(f"--vary: the point {where} is not a valid scenario", format_validation(exc),
                             "give values inside the field's range") from None  # fmt: skip
        labels = tuple((a.title, v.label) for a, v in zip(axes, combo, strict=True))
        points.append(Point(labels, sc, tuple(sorted(factors.items())), ", ".join(shown)))
    return points, target


def _chosen_units(doc: dict[str, Any]) -> str:
    from hetplan.sweep.table import chosen_units

    return chosen_units(doc)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, HetplanError):
        return exc.what + (f" ({exc.why})" if exc.why else "")
    return f"internal error: {type(exc).__name__}: {exc}"


def point_row(point: Point, status: str, doc: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
    """The JSON row of one point: its values, the plan's cost, deployment and GPUs, and the check's outcome."""
    row: dict[str, Any] = {
        "point": point.shown,
        "values": dict(point.labels),
        "status": status,
        "goodput_target_req_per_s": rnd(point.scenario.goodput_req_per_s)
        if point.scenario.goodput_req_per_s is not None
        else None,
        "slo_ttft_s": rnd(parse_duration_s(point.scenario.slo.ttft, "ttft")),
        "slo_tpot_s": rnd(parse_duration_s(point.scenario.slo.tpot, "tpot")),
    }
    if doc is None:
        row.update(check="not run", error=error or "")
        return row
    row["goodput_target_req_per_s"] = doc["scenario"]["goodput_target_req_per_s"]
    row.update(
        strategy=doc.get("strategy"),
        usd_per_hour=doc.get("total_usd_per_hour"),
        usd_per_month=doc.get("usd_per_month"),
        deployment=_chosen_units(doc),
        gpus_used=doc.get("gpus_used") or {},
        owned_gpus={g: {"owned": o["owned"], "used": o["used"]} for g, o in (doc.get("owned_gpus") or {}).items()},
    )
    v = doc.get("verification")
    if error is not None:
        row.update(check="check failed", error=error)
    elif v is None:
        row.update(check="not run")
    else:
        att = v.get("attainment")
        row.update(
            check="held" if v.get("status") == "verified" else "missed",
            out_of_sample=(v.get("out_of_sample") or {}).get("status"),
            attainment=att.get("joint") if isinstance(att, dict) else att,
            ttft_q_s=v.get("ttft_p_s"),
            tpot_q_s=v.get("tpot_p_s"),
            misses=list(v.get("misses") or []),
        )
    return row


def explore(
    base: Scenario,
    axes: list[Axis],
    strategy: str = "all",
    verify: bool = True,
    policy: str = "fcfs",
    progress: Callable[[int, int, str], None] | None = None,
    solve: SolveSettings | None = None,
) -> dict[str, Any]:
    """Plan (and by default simulate) every point of ``axes`` over ``base``; returns the explore document
    (``--json``): the axes, how points were checked, one row per point (:func:`point_row`), the cheapest point
    and the cheapest that held. ``progress(done, total, point)`` is called before each point and at the end.
    Deterministic: no timings in the document (the caller measures).

    Raises:
        InputError: a bad axis value or scenario (before any point is planned). A point's own infeasibility or
        failure is its row's ``status`` (infeasible, error), not raised.
    """
    from dataclasses import replace

    from hetplan import api
    from hetplan.budget import command_budget
    from hetplan.planning.verify import DEFAULT_HOLDOUT, verification_workloads
    from hetplan.resources import Resources
    from hetplan.sim.verify import verify_plan

    points, target = build_points(base, axes)
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
                            price_factors=dict(point.price_factors))  # fmt: skip
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
                    block = verify_plan(plan, workload, policy, False, held_out)
                block["out_of_sample"]["split"] = split
                plan = replace(plan, verification=verification_block(block))
            except HetplanError as exc:  # the plan stands; the row says the check failed and why
                check_error = _one_line(exc)
        rows.append(point_row(point, "ok", api.to_doc(plan), check_error))
    if progress is not None:
        progress(len(points), len(points), "done")
    ok = [r for r in rows if r["status"] == "ok"]
    held = [r for r in ok if r["check"] == "held"]
    cheapest = min(ok, key=lambda r: r["usd_per_hour"], default=None)
    cheapest_held = min(held, key=lambda r: r["usd_per_hour"], default=None)
    return {
        "kind": "explore",
        "scenario": base.name,
        "strategy": strategy,
        "axes": [{"axis": a.title, "values": [v.label for v in a.values]} for a in axes],
        "base_goodput_target_req_per_s": rnd(target),
        "check": check_text(verify, policy),
        "points": rows,
        "counts": {s: sum(r["status"] == s for r in rows) for s in ("ok", "infeasible", "error")},
        "cheapest": None if cheapest is None else cheapest["point"],
        "cheapest_held": None if cheapest_held is None else cheapest_held["point"],
    }


def check_text(verify: bool, policy: str) -> str:
    """How each point was checked, one line (printed above the curve and in ``--json``)."""
    if not verify:
        return "none (--no-verify): each point as hetplan plan --no-verify --no-analysis plans it, not simulated"
    return (
        f"each point planned and simulated ({policy}) as hetplan plan --no-resize --no-analysis --confidence none "
        "does it (a trace's last 30 % held out of sizing and checked too; a synthetic workload also on its next "
        "seed); not re-sized: a missed point is what hetplan plan would re-size, at more cost"
    )


__all__ = ["AXES", "MAX_AXES", "MAX_POINTS", "Axis", "Point", "Value", "build_points", "check_text", "explore",
           "parse_axes", "parse_axis", "point_row"]  # fmt: skip
