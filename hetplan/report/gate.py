"""The CI cost gate: compare a plan with a stored baseline plan and explain what changed.

A plan fails when its $/hour rose by more than ``max_cost_increase`` (a fraction), when set, its tokens/USD fell
below ``min_tokens_per_usd_ratio`` times the baseline's, or the baseline plan was verified in simulation and the
fresh one is not (``verification.status``, :mod:`hetplan.sim.verify`). The explanation lists what differs:
model, SLOs, goodput target, prices per GPU, GPUs per type, combos added or removed, predicted capacity and the
verification status.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hetplan.errors import InputError
from hetplan.plan.doc import to_doc
from hetplan.plan.types import Plan
from hetplan.report.model import combo_label


@dataclass(frozen=True)
class GateResult:
    """Outcome of one comparison. ``cost_change`` and ``tokens_per_usd_ratio`` are relative to the baseline."""

    name: str
    passed: bool
    baseline_usd_per_hour: float
    usd_per_hour: float
    cost_change: float
    tokens_per_usd_ratio: float
    failures: tuple[str, ...] = ()
    changes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6) + 0.0

        return {
            "name": self.name,
            "passed": self.passed,
            "baseline_usd_per_hour": num(self.baseline_usd_per_hour),
            "usd_per_hour": num(self.usd_per_hour),
            "cost_change_fraction": num(self.cost_change),
            "tokens_per_usd_ratio": num(self.tokens_per_usd_ratio),
            "failures": list(self.failures),
            "changes": list(self.changes),
        }


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


def _deployment(plan: dict[str, Any]) -> Counter[str]:
    units: Counter[str] = Counter()
    for part in plan.get("combos", []) + plan.get("instances", []):
        units[combo_label(part)] += part["count"]
    return units


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


def explain(current: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Readable lines saying what differs between two plan documents (empty when nothing does)."""
    lines = []
    cs, bs = current["scenario"], baseline["scenario"]
    for key, label in (
        ("model", "model"),
        ("weight_dtype", "weight dtype"),
        ("kv_dtype", "KV dtype"),
        ("goodput_target_req_per_s", "goodput target (req/s)"),
        ("headroom", "headroom"),
    ):
        if cs.get(key) != bs.get(key):
            lines.append(f"{label}: {bs.get(key)} -> {cs.get(key)}")
    if current.get("strategy") != baseline.get("strategy"):
        lines.append(f"strategy: {baseline.get('strategy')} -> {current.get('strategy')}")
    if cs.get("slo") != bs.get("slo"):
        lines.append(slo_change(bs.get("slo") or {}, cs.get("slo") or {}))
    if cs.get("workload", {}).get("source") != bs.get("workload", {}).get("source"):
        lines.append(f"workload: {bs.get('workload', {}).get('source')} -> {cs.get('workload', {}).get('source')}")
    cp = {g: p["usd_per_gpu_hour"] for g, p in cs.get("prices", {}).items()}
    bp = {g: p["usd_per_gpu_hour"] for g, p in bs.get("prices", {}).items()}
    for gpu in sorted(set(cp) | set(bp)):
        if cp.get(gpu) != bp.get(gpu):
            old = "-" if gpu not in bp else f"${bp[gpu]:g}"
            new = "-" if gpu not in cp else f"${cp[gpu]:g}"
            lines.append(f"price of {gpu}: {old} -> {new} per GPU-hour")
    cu, bu = current["gpus_used"], baseline["gpus_used"]
    for gpu in sorted(set(cu) | set(bu)):
        if cu.get(gpu, 0) != bu.get(gpu, 0):
            lines.append(f"GPUs of {gpu}: {bu.get(gpu, 0)} -> {cu.get(gpu, 0)}")
    cd, bd = _deployment(current), _deployment(baseline)
    for label in sorted(set(cd) | set(bd)):
        if cd[label] != bd[label]:
            verb = "added" if not bd[label] else "removed" if not cd[label] else "count changed"
            lines.append(f"{verb}: {label} ({bd[label]} -> {cd[label]})")
    if abs(current["goodput_req_per_s"] - baseline["goodput_req_per_s"]) > 1e-9:
        lines.append(
            f"predicted goodput capacity: {baseline['goodput_req_per_s']:.4g} -> "
            f"{current['goodput_req_per_s']:.4g} req/s"
        )
    was, now = _status(baseline), _status(current)
    if was != now:
        lines.append(f"verification: {was or 'none'} -> {now or 'none'}")
    if current.get("hetplan_version") != baseline.get("hetplan_version"):
        lines.append(f"hetplan version: {baseline.get('hetplan_version')} -> {current.get('hetplan_version')}")
    return lines


def compare(
    plan: Plan,
    baseline: dict[str, Any],
    max_cost_increase: float,
    min_tokens_per_usd_ratio: float | None = None,
    name: str | None = None,
) -> GateResult:
    """Gate the fresh ``plan`` against ``baseline`` (a stored plan document, version 1 or 2): it fails when the
    cost rose more than ``max_cost_increase`` (a fraction) or tokens/USD fell below ``min_tokens_per_usd_ratio``
    times the baseline's; the explanation names what changed (deployment, prices, SLOs, model)."""
    current = to_doc(plan)
    old, new = baseline["total_usd_per_hour"], current["total_usd_per_hour"]
    change = new / old - 1.0 if old > 0 else 0.0
    ratio = current["tokens_per_usd"] / baseline["tokens_per_usd"] if baseline["tokens_per_usd"] else 1.0
    failures = []
    if change > max_cost_increase + 1e-12:
        failures.append(
            f"cost rose {change * 100:+.2f} % (${old:,.2f}/h -> ${new:,.2f}/h), more than the allowed "
            f"+{max_cost_increase * 100:g} %"
        )
    if min_tokens_per_usd_ratio is not None and ratio < min_tokens_per_usd_ratio - 1e-12:
        failures.append(
            f"tokens/USD fell to {ratio:.4f}x the baseline ({baseline['tokens_per_usd']:,.0f} -> "
            f"{current['tokens_per_usd']:,.0f}), below the required {min_tokens_per_usd_ratio:g}x"
        )
    was, now = _status(baseline), _status(current)
    # a verified plan that stops verifying fails the gate (a gate run with --no-verify gives no verdict to compare)
    if was == "verified" and now is not None and now != "verified":
        verdict = (current.get("verification") or {}).get("verdict") or "the plan was not verified this time"
        failures.append(f"the baseline plan was verified in simulation; this one is not: {verdict}")
    return GateResult(
        name or current["scenario"]["name"],
        not failures,
        old,
        new,
        change,
        ratio,
        tuple(failures),
        tuple(explain(current, baseline)),
    )


def _status(doc: dict[str, Any]) -> str | None:
    """The verification status of a plan document (None when it carries no verdict)."""
    v = doc.get("verification")
    return v.get("status") if isinstance(v, dict) else None


def failed(name: str, reason: str) -> GateResult:
    """A scenario that could not be compared (infeasible now, or missing from the baseline) fails the gate."""
    nan = float("nan")
    return GateResult(name, False, nan, nan, nan, nan, (reason,), ())


def _escape(text: str) -> str:
    """Escape a workflow-command message (GitHub: % CR LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_annotations(results: list[GateResult], warnings: list[str] | None = None) -> str:
    """GitHub Actions workflow commands: one ``::error`` per failure, ``::warning`` per warning, a ``::notice``
    per passing plan. Written to stdout, where the runner reads them."""
    lines = [f"::warning title=hetplan cost gate::{_escape(w)}" for w in warnings or []]
    for r in results:
        if r.passed:
            lines.append(
                _escape_cmd(
                    "notice", f"{r.name}: ${r.usd_per_hour:,.2f}/h ({r.cost_change * 100:+.2f} % against the baseline)"
                )
            )
        for failure in r.failures:
            lines.append(_escape_cmd("error", f"{r.name}: {failure}"))
    return "\n".join(lines) + ("\n" if lines else "")


def _escape_cmd(kind: str, message: str) -> str:
    return f"::{kind} title=hetplan cost gate::{_escape(message)}"


def markdown_summary(results: list[GateResult], max_cost_increase: float, warnings: list[str] | None = None) -> str:
    """A Markdown summary for a CI job page or pull-request comment."""
    passed = bool(results) and all(r.passed for r in results)
    out = [
        f"## hetplan cost gate: {'passed' if passed else 'FAILED'}",
        "",
        f"Allowed cost increase: +{max_cost_increase * 100:g} %",
        "",
        "| scenario | baseline $/h | now $/h | change | tokens/USD ratio | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if math.isnan(r.usd_per_hour):
            out.append(f"| {r.name} | - | - | - | - | FAIL |")
            continue
        out.append(
            f"| {r.name} | {r.baseline_usd_per_hour:,.2f} | {r.usd_per_hour:,.2f} | {r.cost_change * 100:+.2f} % "
            f"| {r.tokens_per_usd_ratio:.4f}x | {'pass' if r.passed else 'FAIL'} |"
        )
    if not results:
        out.append("| (nothing compared) | - | - | - | - | FAIL |")
    for w in warnings or []:
        out += ["", f"> warning: {w}"]
    for r in results:
        if r.changes or r.failures:
            out += ["", f"### {r.name}", ""]
            out += [f"- **{f}**" for f in r.failures] + [f"- {c}" for c in r.changes]
    return "\n".join(out) + "\n"
