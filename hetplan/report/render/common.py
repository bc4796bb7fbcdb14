"""What every report format shows, as plain strings: the headline numbers, the deployment, simulated-check,
strategy, price-sensitivity and schedule rows (``(head, rows)`` tables or key/value rows), the cells that mark a
missed SLO and the sentences a reader needs beside the tables. The format modules lay these out.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from hetplan.plan.types import HOURS_PER_MONTH
from hetplan.report.model import owned_text
from hetplan.units import cost_vs, format_signed_percent


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else format_signed_percent(x)


def _tokens(x: float | None) -> str:
    """Tokens/USD, ``-`` when not defined (None: the plan costs $0/h, see :func:`hetplan.report.model.per_usd`)."""
    return "-" if x is None else f"{x:,.0f}"


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s"


def _gpus(used: dict[str, int]) -> str:
    return ", ".join(f"{n}x {g}" for g, n in used.items())


def headline(p: dict[str, Any]) -> list[tuple[str, str]]:
    slo = p["slo"]
    return [
        ("$/hour", _usd(p["usd_per_hour"])),
        (f"$/month ({HOURS_PER_MONTH:g} h)", _usd(p["usd_per_month"])),
        ("$ per million tokens (in+out)", _usd(p["usd_per_million_tokens"])),
        ("tokens/USD, input+output", _tokens(p["tokens_per_usd"])),
        ("tokens/USD, output only", _tokens(p["output_tokens_per_usd"])),
        ("goodput capacity / target", f"{p['goodput_req_per_s']:.2f} / {p['goodput_target_req_per_s']:g} req/s"),
        ("SLO", f"p{slo['percentile']:g} TTFT {_ms(slo['ttft_s'])}, TPOT {_ms(slo['tpot_s'])}"),
        ("GPUs", _gpus(p["gpus_used"])),
    ] + verdict_rows(p.get("verification"))


def verdict_rows(v: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The simulated verdict and both capacities, for the report's first block (none for an unverified plan)."""
    if not v or not v.get("verdict"):
        return []
    a, c = v.get("analytic_capacity_req_per_s"), v.get("simulated_capacity_req_per_s")
    ratio = f" ({c / a:.2f}x)" if a and c is not None else ""
    return [
        ("simulated verdict", str(v["verdict"])),
        ("capacity: analytic / simulated", f"{_opt(a, '.3g')} / {_opt(c, '.3g')} req/s{ratio}"),
    ]


def deployment_rows(p: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    q = f"p{p['slo']['percentile']:g}"
    if p["deployment"] and "predicted_ttft_s" in p["deployment"][0]:
        # the latencies are the model's prediction; the simulated ones are in the "Simulated check" rows
        head = ["combo: prefill -> decode", "n", "$/h", "req/s", f"model {q} TTFT", "model TPOT", "util", "SLO"]
        rows = [
            [
                d["label"],
                str(d["count"]),
                f"{d['usd_per_hour_each']:.2f}",
                f"{d['goodput_req_per_s_each']:.2f}",
                _ms(d["predicted_ttft_s"]),
                _ms(d["predicted_tpot_s"]),
                f"{d['utilization'] * 100:.0f} %",
                _slo_cell(d["meets_ttft_slo"] and d["meets_tpot_slo"], p.get("verification")),
            ]
            if "predicted_ttft_s" in d
            else [  # a mixed plan's aggregated instances, after its combos
                d["label"],
                str(d["count"]),
                f"{d['usd_per_hour_each']:.2f}",
                f"{d['traffic_share'] * 100:.0f} % of traffic",
                "-",
                "-",
                f"{d['utilization'] * 100:.0f} %",
                "-",
            ]
            for d in p["deployment"]
        ]
        return head, rows
    head = ["instance", "n", "$/h", "traffic", "util"]
    rows = [
        [
            d["label"],
            str(d["count"]),
            f"{d['usd_per_hour_each']:.2f}",
            f"{d['traffic_share'] * 100:.0f} %",
            f"{d['utilization'] * 100:.0f} %",
        ]
        for d in p["deployment"]
    ]
    return head, rows


def _slo_cell(model_met: bool, v: dict[str, Any] | None) -> str:
    """A combo's SLO cell. Without a simulated check it reads "met"/"MISSED" as it always did; with one it says
    that the verdict is the model's, and a model "met" is never left unqualified when the simulation missed."""
    if v is None:
        return "met" if model_met else "MISSED"
    if not model_met:
        return "MISSED (model)"
    return "met (model), sim MISSED" if v["slo_held"] is False else "met (model)"


MISSED_CELLS = ("MISSED", "MISSED (model)", "met (model), sim MISSED")


def _opt(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _vs_slo(x: float | None, slo: float) -> str:
    if x is None:
        return f"- (not finite) vs SLO {_ms(slo)}"
    return f"{_ms(x)} vs SLO {_ms(slo)}: " + ("met" if x <= slo else "MISSED")


def verification_rows(v: dict[str, Any]) -> list[list[str]]:
    """Key/value rows of the "Simulated check" section (see :func:`hetplan.report.model.verification_report`)."""
    q = f"p{v['percentile']:g}"
    att = v["attainment"]
    verdict = {True: "SLOs held in simulation", False: "SLO MISSED in simulation", None: "-"}[v["slo_held"]]
    rows = [
        ["verdict", verdict],
        ["policy", str(v["policy"] or "-")],
        ["target rate", f"{_opt(v['target_req_per_s'], 'g')} req/s (rate scale x{_opt(v['rate_scale'], '.4g')})"],
        ["arrivals", str(v["arrivals"] or "-")],
        [
            "requests",
            f"{_opt(v['requests'], ',.0f')} ({_opt(v['unfinished'], ',.0f')} unfinished, "
            f"{_opt(v['dropped'], ',.0f')} dropped)",
        ],
        [
            "SLO attainment",
            f"joint {_share(att['joint'])}, TTFT {_share(att['ttft'])}, TPOT {_share(att['tpot'])} "
            f"(needs {v['percentile']:g} %)",
        ],
        [f"simulated {q} TTFT", _vs_slo(v["ttft_q_s"], v["slo_ttft_s"])],
        [f"simulated {q} TPOT", _vs_slo(v["tpot_q_s"], v["slo_tpot_s"])],
        [
            "goodput over the serving span",
            f"{_opt(v['goodput_req_per_s'], '.3g')} req/s met every SLO, offered {_opt(v['target_req_per_s'], 'g')} "
            "req/s (the span runs to the last completion, so this is below the offered rate even when the SLOs "
            "hold; compare the capacity with the target)",
        ],
    ]
    oos = v.get("out_of_sample")
    if oos:
        rows.append(["sized on", str(oos.get("split") or "-")])
        rows.append(["in sample", str(v.get("in_sample_status") or "-")])
        for r in oos.get("runs") or []:
            held = "holds" if r.get("holds") else "MISSES"
            rows.append(
                [
                    f"out of sample: {r.get('label')}",
                    f"{held}: joint {_share(r.get('attainment'))} over {_opt(r.get('requests'), ',.0f')} requests, "
                    f"{q} TTFT {_vs_slo(r.get('ttft_p_s'), v['slo_ttft_s'])}, "
                    f"{q} TPOT {_vs_slo(r.get('tpot_p_s'), v['slo_tpot_s'])}",
                ]
            )
    search = v.get("cheaper_search")
    if search:
        for t in search.get("tried") or []:
            what = f"${t['usd_per_hour']:,.2f}/h {t.get('deployment')}" if t.get("usd_per_hour") is not None else "-"
            rows.append(["cheaper plan tried", f"{what}: {t.get('status') or ('infeasible: ' + str(t['infeasible']))}"])
    error = v.get("model_error")
    if error:
        rows.append(["model error", str(error.get("summary") or "-").removeprefix("model error: ")])
    by_class = v.get("attainment_by_class")
    if by_class:
        rows.append(["attainment by class", ", ".join(f"{k} {_share(x)}" for k, x in by_class.items())])
        jain = v.get("jain_index")
        rows.append(["Jain index (classes)", "-" if jain is None else f"{jain:.3f}"])
    for k in v.get("classes") or []:  # request classes: each against its own SLOs
        rows.append(
            [
                f"class {k['class']}",
                f"{'holds' if k.get('holds') else 'misses'}: attainment {_share(k.get('attainment'))}, "
                f"p{_opt(v.get('percentile'), 'g')} TTFT {_vs_slo(k.get('ttft_p_s'), k['ttft_slo_s'])}, "
                f"TPOT {_vs_slo(k.get('tpot_p_s'), k['tpot_slo_s'])}",
            ]
        )
    c = v.get("cascade")
    if c:
        per = c.get("kappa_by_class") or {}
        rows.append(
            [
                "CASCADE settings",
                f"kappa {_opt(c.get('kappa'), '.4g')}"
                + (" (" + ", ".join(f"{k} {x:.4g}" for k, x in per.items()) + ")" if per else "")
                + f", q2 {_opt(c.get('q2'), 'g')}, Tier 2 {c.get('tier2_order') or '-'}",
            ]
        )
    r = v.get("resized")
    if r is not None:
        before, after = r["usd_per_hour_before"], r["usd_per_hour_after"]
        change = "" if not before or after is None else f" ({(after / before - 1) * 100:+.1f} %)"
        rows += [
            [
                "resized: headroom",
                f"asked {_opt(r['headroom_asked'], 'g')}, used {_opt(r['headroom_used'], 'g')} "
                f"({r['attempts']} attempts)",
            ],
            ["resized: $/hour", f"{_usd(before)} -> {_usd(after)}{change}"],
        ]
    return rows


def verification_lines(v: dict[str, Any]) -> list[str]:
    """The misses and the simulator's warnings, one sentence each."""
    return [f"miss: {m}" for m in v["misses"]] + [f"simulator warning: {w}" for w in v["warnings"]]


def strategy_rows(p: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["strategy", "$/h", "req/s", "tok/USD", "GPUs", "vs plan", "tok/USD x"]
    rows = []
    for name, s in p["strategies"].items():
        label = name + (" (plan)" if name == p["strategy"] else "")
        if s.get("status") == "infeasible":
            rows.append([label, "-", "-", "-", "infeasible (see below)", "-", "-"])
            continue
        gain = p["gains"].get(name, {})
        rows.append(
            [
                label,
                f"{s['total_usd_per_hour']:.2f}",
                f"{s['goodput_req_per_s']:.2f}",
                _tokens(s.get("tokens_per_usd")),
                _gpus(s["gpus_used"]),
                "-" if name == p["strategy"] else cost_vs(s["total_usd_per_hour"], p["usd_per_hour"]),
                "-" if gain.get("tokens_per_usd_ratio") is None else f"{gain['tokens_per_usd_ratio']:.3f}x",
            ]
        )
    return head, rows


def sensitivity_rows(p: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["GPU price", "this plan $/h", "re-planned $/h", "best alternative"]
    rows = []
    for r in p["price_sensitivity"]:
        alt = (
            "-"
            if r["best_alternative"] is None
            else f"{r['best_alternative']} {_usd(r['best_alternative_usd_per_hour'])}"
        )
        rows.append(
            [
                f"{r['gpu']} {(r['price_factor'] - 1) * 100:+.0f} %",
                _usd(r["plan_usd_per_hour"]),
                _usd(r["replanned_usd_per_hour"]),
                alt,
            ]
        )
    return head, rows


def schedule_rows(s: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    m = s["summary"]
    peak = m["static_peak_usd"]
    rows = [
        [
            "autoscaled schedule",
            _usd(m["schedule_usd"]),
            "-" if m["saving_vs_static_peak"] is None else _pct(-m["saving_vs_static_peak"]),
            str(m["short_windows"]),
        ],
        ["static fleet sized for the peak", _usd(peak), _pct(0.0), "0"],
    ]
    if m["static_mean_usd"] is not None:
        rows.append(
            [
                "static fleet sized for the mean",
                _usd(m["static_mean_usd"]),
                _pct(m["static_mean_usd"] / peak - 1) if peak else "-",  # a $0 peak fleet: owned GPUs at $0
                str(m.get("static_mean_short_windows", "-")),
            ]
        )
    rows.append(["re-solved every window (bound)", _usd(m["per_window_optimum_usd"]), "-", "-"])
    return ["fleet", "cost", "vs peak fleet", "short windows"], rows


def schedule_text(s: dict[str, Any]) -> str:
    m = s["summary"]
    gpu_hours = ", ".join(f"{g} {h:,.0f}" for g, h in m["gpu_hours"].items() if h)
    return (
        f"{m['windows']} windows of {m['window_s']:g} s ({m['hours']:g} h); demand peak "
        f"{m['peak_demand_req_per_s']:.3g} req/s, mean {m['mean_demand_req_per_s']:.3g} req/s; "
        f"{m['combo_changes']} combo changes in {m['windows_with_changes']} windows; GPU-hours: {gpu_hours}"
    )


def plan_notes(p: dict[str, Any]) -> list[str]:
    """Sentences a reader needs beside the tables: a quality change (quantized weights or KV cache, first), a
    cheaper strategy, and why baselines are infeasible."""
    notes = [str(p["quality_note"])] if p.get("quality_note") else []
    for name, s in p["strategies"].items():
        if s.get("status") == "infeasible":
            notes.append(f"{name} is infeasible: {s.get('reason', '')}")
        elif name != p["strategy"] and s["total_usd_per_hour"] < p["usd_per_hour"]:
            notes.append(
                f"{name} costs ${s['total_usd_per_hour']:,.2f}/h, {cost_vs(s['total_usd_per_hour'], p['usd_per_hour'])}"
                f" than this {p['strategy']} plan (tokens/USD "
                f"{_tokens(s.get('tokens_per_usd'))} against {_tokens(p['tokens_per_usd'])}); plan it with --strategy "
                f"{name}."
            )
    return notes


def plan_title(p: dict[str, Any]) -> str:
    """The section title of one plan: its own ``title`` (unique within the report, see
    :func:`hetplan.report.model.build_report`), else name, model and strategy."""
    return str(
        p.get("title")
        or f"{p['name']}: {p['model']} ({p['weight_dtype']}, {p.get('engine', 'vllm')}), {p['strategy']} plan"
    )


def _purchase_text(item: Any) -> str:
    """One purchase (an instance offer the plan buys) in words, whatever fields the plan gives it."""
    if not isinstance(item, dict):
        return str(item)
    known = ("count", "instance_type", "provider", "region", "gpu", "gpus_per_instance", "owned", "usd_per_hour_each")
    if all(k in item for k in known):  # a plan's typed purchase line (hetplan.plan.types.Purchase)
        where = "owned" if item["owned"] else f"{item['provider']} {item['region']}, rented"
        used = f", {item['gpus_used']} of their GPUs used" if item.get("gpus_used") else ""
        return (
            f"{item['count']}x {item['instance_type']} ({where}): {item['gpus_per_instance']}x {item['gpu']} each, "
            f"${float(item['usd_per_hour_each']):,.2f}/h each{used}"
        )
    count = item.get("count")
    name = item.get("instance_type") or item.get("instance") or item.get("name") or item.get("offer")
    rest = [
        f"{k} {v}"
        for k, v in item.items()
        if k not in ("count", "instance_type", "instance", "name", "offer") and v is not None
    ]
    head = " ".join(str(x) for x in ((f"{count}x" if count is not None else None), name) if x)
    return (head + (": " if head and rest else "") + ", ".join(rest)) or "-"


def decision_rows(p: dict[str, Any]) -> list[tuple[str, str]]:
    """The first block of a plan's report, as key/value rows after the recommendation sentence: the simulated
    verdict, what each GPU type does and at what price from where, purchases, owned GPUs and their use (idle ones
    with the reason), quality changes."""
    d = p.get("decision")
    if not d:
        return []
    verdict = str(d["verdict"])
    shown = verdict if verdict.lower().startswith(str(d["status"]).lower()) else f"{d['status']}: {verdict}"
    rows: list[tuple[str, str]] = [("verification", shown)]
    left = (p.get("workload") or {}).get("over_context") or {}
    if left.get("refused"):  # requests the plan was sized without (hetplan.workload.context)
        total = int(left["requests_total"])
        rate = left.get("arrival_rate_per_s")
        text = (
            f"{left['refused']:,} of {total:,} requests ({left['refused'] / total * 100:.1f} %): prompt over the "
            f"{left['window_tokens']:,}-token window"
        )
        rows.insert(0, ("traffic left out", text + (f"; the trace's rate with them {rate:.3g} req/s" if rate else "")))
    prices = {r["gpu"]: r for r in d["prices"]}
    bought = [item for item in d.get("purchase") or [] if isinstance(item, dict)]
    owned_only = {  # GPU types the plan uses only from owned nodes: their catalog price is not what is paid
        str(item.get("gpu"))
        for item in bought
        if item.get("owned") and not any(o.get("gpu") == item.get("gpu") and not o.get("owned") for o in bought)
    }
    for role in d["gpu_roles"]:
        price = prices.get(role["gpu"])
        text = role["text"]
        if price is not None:
            listed = float(price["usd_per_gpu_hour"])
            paid = price.get("usd_per_gpu_hour_bought")
            if role["gpu"] in owned_only and paid is not None and abs(float(paid)) < 5e-3:
                text += (f"; owned, priced at $0/GPU-hour (no price given: give its amortised usd_per_gpu_hour in a "
                         f"price file); renting it costs ${listed:,.2f}/GPU-hour, {price['source']}")  # fmt: skip
            elif paid is not None and abs(float(paid) - listed) > 0.005 * max(listed, 1e-9):
                text += (f"; ${float(paid):,.2f}/GPU-hour as bought ({', '.join(price['bought_as'])}); the lowest "
                         f"per-GPU price is ${listed:,.2f}/GPU-hour, {price['source']}")  # fmt: skip
            else:
                text += f"; ${listed:,.2f}/GPU-hour, {price['source']}"
        rows.append((role["gpu"], text))
    for item in d.get("purchase") or []:
        rows.append(("purchase", _purchase_text(item)))
    for row in d.get("owned") or []:  # every owned type, used or idle, and why idle (issue 31)
        rows.append((f"owned {row['gpu']}", owned_text(row)))
    simulated = "verification" in p
    for name, other in p["strategies"].items():
        cheaper = other.get("status") != "infeasible" and other["total_usd_per_hour"] < p["usd_per_hour"]
        if name != p["strategy"] and cheaper:
            rows.append(
                (
                    "cheaper on paper",
                    f"{name}: ${other['total_usd_per_hour']:,.2f}/h by the model"
                    + (", not simulated" if simulated else "")
                    + f"; plan it with --strategy {name}"
                    + (" to verify it" if simulated else ""),
                )
            )
    for note in d["quality"]:
        rows.append(("quality change", note))
    return rows
