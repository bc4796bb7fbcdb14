"""The simulated check as every report format shows it: the verdict rows of a plan's first block, the "Simulated
check" key/value rows and the sentences (misses, simulator warnings) beside them.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.report.render.fmt import opt, share, usd, vs_slo
from hetplan.report.types import VerificationSummary


def verdict_rows(v: VerificationSummary | None) -> list[tuple[str, str]]:
    """The simulated verdict and both capacities, for the report's first block (none for an unverified plan)."""
    if v is None or not v.verdict:
        return []
    a, c = v.analytic_capacity_req_per_s, v.simulated_capacity_req_per_s
    ratio = f" ({c / a:.2f}x)" if a and c is not None else ""
    return [
        ("simulated verdict", str(v.verdict)),
        ("capacity: analytic / simulated", f"{opt(a, '.3g')} / {opt(c, '.3g')} req/s{ratio}"),
    ]


def slo_cell(model_met: bool, v: VerificationSummary | None) -> str:
    """A combo's SLO cell. Without a simulated check it reads "met"/"MISSED" as it always did; with one it says
    that the verdict is the model's, and a model "met" is never left unqualified when the simulation missed."""
    if v is None:
        return "met" if model_met else "MISSED"
    if not model_met:
        return "MISSED (model)"
    return "met (model), sim MISSED" if v.slo_held is False else "met (model)"


def verification_rows(v: VerificationSummary) -> list[list[str]]:
    """Key/value rows of the "Simulated check" section (see :func:`hetplan.report.model.verification_report`)."""
    q = f"p{v.percentile:g}"
    att = v.attainment
    verdict = {True: "SLOs held in simulation", False: "SLO MISSED in simulation", None: "-"}[v.slo_held]
    rows = [
        ["verdict", verdict],
        ["policy", str(v.policy or "-")],
        ["target rate", f"{opt(v.target_req_per_s, 'g')} req/s (rate scale x{opt(v.rate_scale, '.4g')})"],
        ["arrivals", str(v.arrivals or "-")],
        [
            "requests",
            f"{opt(v.requests, ',.0f')} ({opt(v.unfinished, ',.0f')} unfinished, {opt(v.dropped, ',.0f')} dropped)",
        ],
        [
            "SLO attainment",
            f"joint {share(att.joint)}, TTFT {share(att.ttft)}, TPOT {share(att.tpot)} (needs {v.percentile:g} %)",
        ],
        [f"simulated {q} TTFT", vs_slo(v.ttft_q_s, v.slo_ttft_s)],
        [f"simulated {q} TPOT", vs_slo(v.tpot_q_s, v.slo_tpot_s)],
        [
            "goodput over the serving span",
            f"{opt(v.goodput_req_per_s, '.3g')} req/s met every SLO, offered {opt(v.target_req_per_s, 'g')} "
            "req/s (the span runs to the last completion, so this is below the offered rate even when the SLOs "
            "hold; compare the capacity with the target)",
        ],
    ]
    oos = v.out_of_sample
    if oos:
        rows.append(["sized on", str(oos.split or "-")])
        rows.append(["in sample", str(v.in_sample_status or "-")])
        for r in oos.runs:
            held = "holds" if r.holds else "MISSES"
            rows.append(
                [
                    f"out of sample: {r.label}",
                    f"{held}: joint {share(r.attainment)} over {opt(r.requests, ',.0f')} requests, "
                    f"{q} TTFT {vs_slo(r.ttft_p_s, v.slo_ttft_s)}, {q} TPOT {vs_slo(r.tpot_p_s, v.slo_tpot_s)}",
                ]
            )
    if v.cheaper_search:
        for t in v.cheaper_search.tried:
            what = f"${t.usd_per_hour:,.2f}/h {t.deployment}" if t.usd_per_hour is not None else "-"
            rows.append(["cheaper plan tried", f"{what}: {t.status or ('infeasible: ' + str(t.infeasible))}"])
    if v.model_error:
        rows.append(["model error", str(v.model_error.summary or "-").removeprefix("model error: ")])
    if v.attainment_by_class:
        rows.append(["attainment by class", ", ".join(f"{k} {share(x)}" for k, x in v.attainment_by_class.items())])
        rows.append(["Jain index (classes)", "-" if v.jain_index is None else f"{v.jain_index:.3f}"])
    for k in v.classes or ():  # request classes: each against its own SLOs
        rows.append(
            [
                f"class {k.class_}",
                f"{'holds' if k.holds else 'misses'}: attainment {share(k.attainment)}, "
                f"p{opt(v.percentile, 'g')} TTFT {vs_slo(k.ttft_p_s, k.ttft_slo_s)}, "
                f"TPOT {vs_slo(k.tpot_p_s, k.tpot_slo_s)}",
            ]
        )
    c = v.cascade
    if c:
        per = c.kappa_by_class or {}
        rows.append(
            [
                "CASCADE settings",
                f"kappa {opt(c.kappa, '.4g')}"
                + (" (" + ", ".join(f"{k} {x:.4g}" for k, x in per.items()) + ")" if per else "")
                + f", q2 {opt(c.q2, 'g')}, Tier 2 {c.tier2_order or '-'}",
            ]
        )
    resized = v.resized
    if resized is not None:
        before, after = resized.usd_per_hour_before, resized.usd_per_hour_after
        change = "" if not before or after is None else f" ({(after / before - 1) * 100:+.1f} %)"
        rows += [
            [
                "resized: headroom",
                f"asked {opt(resized.headroom_asked, 'g')}, used {opt(resized.headroom_used, 'g')} "
                f"({resized.attempts} attempts)",
            ],
            ["resized: $/hour", f"{usd(before)} -> {usd(after)}{change}"],
        ]
    return rows


def verification_lines(v: VerificationSummary) -> list[str]:
    """The misses and the simulator's warnings, one sentence each."""
    return [f"miss: {m}" for m in v.misses] + [f"simulator warning: {w}" for w in v.warnings]


__all__ = ["slo_cell", "verdict_rows", "verification_lines", "verification_rows"]
