"""The CI cost gate: compare a plan with a stored baseline plan and explain what changed.

A plan fails when its $/hour rose by more than it may: the larger of ``max_cost_increase`` (a fraction of the
baseline's $/hour) and ``max_cost_increase_usd_per_hour`` (dollars per hour, 0 unless given). A baseline at $0.00/h
(all GPUs owned, priced at $0) allows no percentage rise, so any rise from $0 fails unless an absolute allowance
covers it. It also fails when its tokens/USD fell below ``min_tokens_per_usd_ratio`` (when set) times the
baseline's (not compared when either plan costs $0/h: tokens per dollar is not defined there), or when the
baseline plan was verified in simulation and the fresh one is not (``verification.status``,
:mod:`hetplan.sim.verify`), naming each request class (``verification.classes``) that held its own SLOs in the
baseline and does not now. The explanation lists what differs:
model, SLOs, goodput target, prices per GPU, GPUs per type, combos added or removed, predicted capacity and the
verification status.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from hetplan.catalog.loader import format_validation
from hetplan.errors import InputError
from hetplan.plan.deployment import combo_label as _label
from hetplan.plan.doc import verification_block
from hetplan.plan.schema import FIX, PlanDoc
from hetplan.plan.types import Plan
from hetplan.report import plan_fields
from hetplan.report.gate_types import GateResult as GateResult  # re-exported: callers import it from here
from hetplan.report.render.gate import allowance_text as allowance_text  # re-exported: the CLI imports them here
from hetplan.report.render.gate import github_annotations as github_annotations
from hetplan.report.render.gate import markdown_summary as markdown_summary
from hetplan.report.verification import ClassOutcome, block_status, block_verdict, class_outcomes


def parse_usd_per_hour(value: float | None, field_name: str) -> float:
    """An absolute allowance in dollars per hour (0 when not given).

    Raises:
        InputError: negative, non-finite or above $1,000,000/h.
    """
    if value is None:
        return 0.0
    if not math.isfinite(value) or not 0.0 <= value <= 1e6:
        raise InputError(
            f"{field_name}: {value!r} is out of range",
            fix=f"give dollars per hour between 0 and 1000000, e.g. {field_name} 5",
        )
    return float(value)


def parse_fraction(text: str | float, field_name: str) -> float:
    """Read a percentage written with its sign: ``2%``, ``0.5 %``.

    Raises:
        InputError: unreadable, negative, non-finite, or a bare number (``2`` or ``0.02`` would be ambiguous).
    """
    raw = str(text).strip()
    if not raw.endswith("%") or raw.count("%") != 1:
        raise InputError(
            f"{field_name}: {text!r} has no percent sign",
            "a bare number could mean a percent or a fraction",
            f"write it as a percentage, e.g. {field_name} 2%",
        )
    try:
        value = float(raw[:-1].strip()) / 100.0
    except ValueError:
        raise InputError(f"{field_name}: cannot read {text!r}", fix=f"write e.g. {field_name} 2%") from None
    if not math.isfinite(value) or not 0.0 <= value < 10.0:
        raise InputError(f"{field_name}: {text!r} is out of range", fix="give a non-negative percentage such as 2%")
    return value


def _slo_value(key: str, x: Any, exact: bool = False) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "-" if x is None else str(x)
    if key == "percentile":
        return f"p{x:g}"
    if exact:
        return f"{x:.6g} s"
    return f"{x * 1e3:.4g} ms" if x < 1 else f"{x:.2f} s"


def slo_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """One readable line for an SLO change, e.g. ``SLO: TTFT 1.00 s -> 2.00 s, TPOT unchanged, percentile
    unchanged`` (TTFT/TPOT in ms below one second, seconds from one second up)."""
    parts = []
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("percentile", "percentile")):
        a, b = old.get(key), new.get(key)
        if a == b:
            parts.append(f"{label} unchanged")
            continue
        exact = _slo_value(key, a) == _slo_value(key, b)  # a change the rounding would hide
        parts.append(f"{label} {_slo_value(key, a, exact)} -> {_slo_value(key, b, exact)}")
    for key in sorted((set(old) | set(new)) - {"ttft_s", "tpot_s", "percentile"}):
        if old.get(key) != new.get(key):
            parts.append(f"{key} {old.get(key)} -> {new.get(key)}")
    return "SLO: " + ", ".join(parts)


@dataclass(frozen=True)
class GateSide:
    """What the gate compares of one plan (the fresh one, or the baseline's stored document): the scenario's
    settings as written (model, dtypes, goodput target in req/s, headroom, SLOs in seconds, workload source, prices
    in $/GPU-hour), the strategy, GPUs per type, deployment units by label, predicted goodput (req/s), cost
    ($/hour), tokens/USD, the verification's status, verdict and per-class checks, and hetplan's version."""

    name: str
    settings: tuple[tuple[str, Any], ...]
    strategy: Any
    slo: Mapping[str, Any] | None
    workload_source: Any
    prices: Mapping[str, float]
    gpus_used: Mapping[str, int]
    deployment: Counter[str]
    goodput_req_per_s: float
    total_usd_per_hour: float
    tokens_per_usd: float
    status: str | None
    verdict: Any
    classes: Mapping[str, ClassOutcome] = field(default_factory=dict)
    hetplan_version: Any = None


#: The scenario settings the explanation compares, with their labels.
SETTINGS = (
    ("model", "model"),
    ("weight_dtype", "weight dtype"),
    ("kv_dtype", "KV dtype"),
    ("goodput_target_req_per_s", "goodput target (req/s)"),
    ("headroom", "headroom"),
)


def side_of_plan(plan: Plan) -> GateSide:
    """The gate's view of a typed plan (the same values its plan document would give)."""
    units: Counter[str] = Counter()
    for c in plan.combos:
        units[c.label] += c.count
    for t in plan.instances:
        units[f"{t.gpu} TP{t.tp} (aggregated)"] += t.count
    values = (plan.model.spec.name, plan.weight_dtype, plan.kv_dtype, plan.goodput_target_req_per_s, plan.headroom)
    return GateSide(
        name=plan.name,
        settings=tuple((label, v) for (_, label), v in zip(SETTINGS, values, strict=True)),
        strategy=plan.strategy,
        slo={"ttft_s": plan.slo.ttft_s, "tpot_s": plan.slo.tpot_s, "percentile": plan.slo.percentile},
        workload_source=plan_fields.workload_source(plan),
        prices={g: p.usd_per_gpu_hour for g, p in plan.prices.items()},
        gpus_used=dict(plan.gpus_used),
        deployment=units,
        goodput_req_per_s=plan.goodput_req_per_s,
        total_usd_per_hour=plan.total_usd_per_hour,
        tokens_per_usd=plan.tokens_per_usd,
        status=plan_fields.verification_status(plan),
        verdict=plan_fields.verification_verdict(plan),
        classes=plan_fields.class_checks(plan),
        hetplan_version=plan.provenance.hetplan_version,
    )


class BaselineDoc(PlanDoc):
    """A stored plan document as the gate reads it: the checked plan (:class:`hetplan.plan.schema.PlanDoc`), the
    hetplan version that wrote it and its verification block (both as written; None when absent)."""

    hetplan_version: Any = None
    verification: Any = None


def side_of_doc(doc: Mapping[str, Any]) -> GateSide:
    """The gate's view of a stored plan document (a baseline; version 1 or 2), read through the plan file's schema.

    Raises:
        InputError: the document is not a usable plan (see :func:`hetplan.plan.doc.check_plan`).
    """
    try:
        base = BaselineDoc.model_validate(doc)
    except ValidationError as exc:
        raise InputError("the baseline is not a usable hetplan plan", format_validation(exc), FIX) from None
    sc = base.scenario
    # the simulated check, typed (a block that is no mapping says nothing, as before)
    written = base.verification
    checked = verification_block(written, "the baseline's verification") if isinstance(written, dict) else None
    units: Counter[str] = Counter()
    for c in base.combos:
        units[_label(c.n_prefill, c.prefill_gpu, c.prefill_tp, c.n_decode, c.decode_gpu, c.decode_tp)] += c.count
    for t in base.instances:
        units[f"{t.gpu} TP{t.tp} (aggregated)"] += t.count
    values = (sc.model, sc.weight_dtype, sc.kv_dtype, sc.goodput_target_req_per_s, sc.headroom)
    return GateSide(
        name=sc.name,
        settings=tuple((label, v) for (_, label), v in zip(SETTINGS, values, strict=True)),
        strategy=base.strategy,
        slo=sc.slo.model_dump(),
        workload_source=sc.workload.source,
        prices={g: p.usd_per_gpu_hour for g, p in sc.prices.items()},
        gpus_used=base.gpus_used,
        deployment=units,
        goodput_req_per_s=base.goodput_req_per_s,
        total_usd_per_hour=base.total_usd_per_hour,
        tokens_per_usd=base.tokens_per_usd,
        status=block_status(checked),
        verdict=block_verdict(checked),
        classes=class_outcomes(checked),
        hetplan_version=base.hetplan_version,
    )


def explain(current: GateSide, baseline: GateSide) -> list[str]:
    """Readable lines saying what differs between two plans (empty when nothing does)."""
    lines = []
    for (label, now), (_, was) in zip(current.settings, baseline.settings, strict=True):
        if now != was:
            lines.append(f"{label}: {was} -> {now}")
    if current.strategy != baseline.strategy:
        lines.append(f"strategy: {baseline.strategy} -> {current.strategy}")
    if current.slo != baseline.slo:
        lines.append(slo_change(dict(baseline.slo or {}), dict(current.slo or {})))
    if current.workload_source != baseline.workload_source:
        lines.append(f"workload: {baseline.workload_source} -> {current.workload_source}")
    cp, bp = current.prices, baseline.prices
    for gpu in sorted(set(cp) | set(bp)):
        if cp.get(gpu) != bp.get(gpu):
            old = "-" if gpu not in bp else f"${bp[gpu]:g}"
            new = "-" if gpu not in cp else f"${cp[gpu]:g}"
            lines.append(f"price of {gpu}: {old} -> {new} per GPU-hour")
    cu, bu = current.gpus_used, baseline.gpus_used
    for gpu in sorted(set(cu) | set(bu)):
        if cu.get(gpu, 0) != bu.get(gpu, 0):
            lines.append(f"GPUs of {gpu}: {bu.get(gpu, 0)} -> {cu.get(gpu, 0)}")
    cd, bd = current.deployment, baseline.deployment
    for label in sorted(set(cd) | set(bd)):
        if cd[label] != bd[label]:
            verb = "added" if not bd[label] else "removed" if not cd[label] else "count changed"
            lines.append(f"{verb}: {label} ({bd[label]} -> {cd[label]})")
    if abs(current.goodput_req_per_s - baseline.goodput_req_per_s) > 1e-9:
        lines.append(
            f"predicted goodput capacity: {baseline.goodput_req_per_s:.4g} -> {current.goodput_req_per_s:.4g} req/s"
        )
    if baseline.status != current.status:
        lines.append(f"verification: {baseline.status or 'none'} -> {current.status or 'none'}")
    if current.hetplan_version != baseline.hetplan_version:
        lines.append(f"hetplan version: {baseline.hetplan_version} -> {current.hetplan_version}")
    return lines


#: Costs closer than this (dollars per hour) are the same: plan files round money to 6 decimals.
USD_PER_HOUR_TOLERANCE = 1e-6


def compare(
    plan: Plan,
    baseline: Mapping[str, Any],
    max_cost_increase: float,
    min_tokens_per_usd_ratio: float | None = None,
    name: str | None = None,
    max_cost_increase_usd_per_hour: float = 0.0,
) -> GateResult:
    """Gate the fresh ``plan`` against ``baseline`` (a stored plan document, version 1 or 2): it fails when the
    cost rose more than the larger of ``max_cost_increase`` (a fraction of the baseline's $/hour) and
    ``max_cost_increase_usd_per_hour`` (dollars per hour), or tokens/USD fell below ``min_tokens_per_usd_ratio``
    times the baseline's; the explanation names what changed (deployment, prices, SLOs, model).

    A baseline at $0.00/h (all GPUs owned without a price) has no percentage change: any rise from it fails unless
    ``max_cost_increase_usd_per_hour`` allows it, and the failure says how to allow one. The tokens/USD ratio is
    not compared when either plan costs $0.00/h (tokens per dollar is not defined there; the plan file writes 0).
    """
    current, base = side_of_plan(plan), side_of_doc(baseline)
    old, new = base.total_usd_per_hour, current.total_usd_per_hour
    rise = new - old
    change = new / old - 1.0 if old > 0 else math.nan
    both_paid = old > 0 and new > 0 and base.tokens_per_usd and current.tokens_per_usd
    ratio = current.tokens_per_usd / base.tokens_per_usd if both_paid else math.nan
    allowed_usd = max(max_cost_increase * old, max_cost_increase_usd_per_hour)
    failures = []
    if rise > allowed_usd + USD_PER_HOUR_TOLERANCE:
        if old > 0:
            failures.append(
                f"cost rose {change * 100:+.2f} % (${old:,.2f}/h -> ${new:,.2f}/h), more than the allowed "
                f"{allowance_text(max_cost_increase, max_cost_increase_usd_per_hour)}"
            )
        else:
            failures.append(
                f"cost rose from $0.00/h to ${new:,.2f}/h (+${rise:,.2f}/h); the baseline costs nothing (owned GPUs "
                "without a price), so a percentage allows no rise"
                + (
                    f" and the allowed +${max_cost_increase_usd_per_hour:,.2f}/h is less"
                    if max_cost_increase_usd_per_hour > 0
                    else ""
                )
                + f": allow one in dollars with --max-cost-increase-usd-per-hour {math.ceil(rise * 100) / 100:g}, "
                "or price the owned GPUs in a price file"
            )
    if min_tokens_per_usd_ratio is not None and not math.isnan(ratio) and ratio < min_tokens_per_usd_ratio - 1e-12:
        failures.append(
            f"tokens/USD fell to {ratio:.4f}x the baseline ({base.tokens_per_usd:,.0f} -> "
            f"{current.tokens_per_usd:,.0f}), below the required {min_tokens_per_usd_ratio:g}x"
        )
    # a verified plan that stops verifying fails the gate (a gate run with --no-verify gives no verdict to compare)
    if base.status == "verified" and current.status is not None and current.status != "verified":
        verdict = current.verdict or "the plan was not verified this time"
        failures.append(f"the baseline plan was verified in simulation; this one is not: {verdict}")
    failures += _class_failures(base, current)
    return GateResult(
        name or current.name,
        not failures,
        old,
        new,
        change,
        ratio,
        tuple(failures),
        tuple(explain(current, base)),
    )


def _class_failures(baseline: GateSide, current: GateSide) -> list[str]:
    """One failure per request class that held its own SLOs in the baseline's verification and does not in the
    current one (each class is named, with its attainment then and now)."""
    out = []
    for name, row in current.classes.items():
        before = baseline.classes.get(name)
        if before is not None and before.holds and not row.holds:
            out.append(
                f"class {name} held its SLOs in the baseline ({float(before.attainment) * 100:.1f} % attainment) "
                f"and does not now ({float(row.attainment) * 100:.1f} %; TTFT SLO {row.ttft_slo_s:g} s, TPOT "
                f"SLO {float(row.tpot_slo_s) * 1e3:g} ms)"
            )
    return out


def failed(name: str, reason: str) -> GateResult:
    """A scenario that could not be compared (infeasible now, or missing from the baseline) fails the gate."""
    nan = float("nan")
    return GateResult(name, False, nan, nan, nan, nan, (reason,), ())
