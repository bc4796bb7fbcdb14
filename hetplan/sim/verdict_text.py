"""The verdict sentences of ``hetplan plan``'s simulated check (:mod:`hetplan.sim.verify`): the in-sample line
(:func:`verdict_line`) and the out-of-sample runs appended to it (:func:`with_out_of_sample`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.plan.blocks import HeldOutRun
from hetplan.plan.types import Plan
from hetplan.sim.replay import Outcome
from hetplan.units import format_duration


def verdict_line(verified: bool, name: str, main: Outcome, runs: list[Outcome], q: float, plan: Plan, kind: str) -> str:
    """The verdict line, e.g. ``verified on azure_code_15min (2,598 requests): joint attainment 92.4 % ≥ 90 %,
    p90 TTFT 1.31 s ≤ 1.5 s, p90 TPOT 61 ms ≤ 80 ms at the goodput target 8 req/s (also at the trace's 2.89 req/s)``."""
    worst = min(runs, key=lambda r: (not r.misses, r.joint))
    shown = main if verified else worst

    def cmp(x: float | None, slo_or_none: float | None) -> str:
        slo = float(slo_or_none or 0.0)  # a class's SLOs are always set (hetplan.sim.replay.judge)
        if x is None:
            return "unbounded > " + format_duration(slo)
        return f"{format_duration(x)} {'≤' if x <= slo else '>'} {format_duration(slo)}"

    att = shown.joint
    slos = f"p{q:g} TTFT {cmp(shown.ttft_q_s, plan.slo.ttft_s)}, p{q:g} TPOT {cmp(shown.tpot_q_s, plan.slo.tpot_s)}"
    if shown.class_checks is not None:  # request classes: each class against its own SLOs
        slos = ", ".join(
            f"class {c.class_} {(c.attainment or 0.0) * 100:.1f} % (p{q:g} TTFT {cmp(c.ttft_p_s, c.ttft_slo_s)}, "
            f"TPOT {cmp(c.tpot_p_s, c.tpot_slo_s)})"
            for c in shown.class_checks
        )
    body = (
        f"joint attainment {att * 100:.1f} % {'≥' if att >= q / 100 else '<'} {q:g} %, {slos}"
        f" at the {shown.label} {shown.rate_req_per_s:.3g} req/s"
    )
    others = [r for r in runs if r is not shown]
    if others:
        body += "; " + "; ".join(
            f"{'holds' if not r.misses else 'misses'} at the {r.label} {r.rate_req_per_s:.3g} req/s" for r in others
        )
    where = f"{name} ({shown.metrics.requests:,} requests, {kind})"
    return f"verified on {where}: {body}" if verified else f"NOT verified on {where}: {body}"


def with_out_of_sample(verdict: str, in_sample: bool, held: list[HeldOutRun]) -> str:
    """The verdict with the out-of-sample runs: ``…; out of sample: holds on the held-out stretch (1,327
    requests): joint 93.1 %; …`` (a miss turns a verified verdict into "NOT verified out of sample")."""
    parts = []
    for r in held:
        att = r.attainment or 0.0  # always set (out_of_sample_runs)
        word = "holds" if not r.misses else "misses"
        parts.append(f"{word} on the {r.label} ({r.requests:,} requests): joint {att * 100:.1f} %")
    text = "out of sample: " + "; ".join(parts)
    if in_sample and any(r.misses for r in held):
        return f"NOT verified {text}; in sample it holds on {verdict.removeprefix('verified on ')}"
    return f"{verdict}; {text}"


__all__ = ["verdict_line", "with_out_of_sample"]
