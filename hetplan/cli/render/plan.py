"""Tables of a plan document (``hetplan plan``): the deployment, every strategy side by side, the solver line,
and the simulator check of ``--verify`` on stderr."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.answer import answer_lines, cost_vs
from hetplan.cli.render.format import print_warnings, tokens_per_usd, tokens_per_usd_phrase
from hetplan.units import format_duration


def _combo_rows(table: Table, combos: list[dict[str, Any]], wide: bool) -> None:
    """One row per combo. Narrow (``wide`` False): tok/$ goes on the second line of the $/h cell and the bound on
    the second line of the util cell (the combo cell has two lines anyway), so no column's information is lost."""
    for c in combos:
        usd = f"{c['usd_per_hour']:.2f}"
        tokens = tokens_per_usd(c.get("tokens_per_usd"), c["usd_per_hour"], thousands=True)
        util = f"{c['utilization'] * 100:.0f}%"
        bound = c["bound_by"].replace("kv_transfer", "kv")
        cells = [
            f"{c['n_prefill']}x {c['prefill_gpu']} TP{c['prefill_tp']}\n"
            f"-> {c['n_decode']}x {c['decode_gpu']} TP{c['decode_tp']}",
            str(c["count"]),
            usd if wide else f"{usd}\n{tokens}",
            f"{c['goodput_req_per_s']:.2f}",
            *([tokens] if wide else []),
            format_duration(c["predicted_ttft_s"]),
            format_duration(c["predicted_tpot_s"]),
            util if wide else f"{util}\n{bound}",
            *([bound] if wide else []),
        ]
        table.add_row(*cells)


#: Narrowest console (columns) that gets one column per figure; below it tok/$ and bound share cells (two lines).
WIDE_TABLE_COLUMNS = 100


TITLES = {
    "cauchy": "Cauchy plan (cheapest mixed prefill/decode deployment)",
    "homogeneous": "Best homogeneous fleet",
    "melange": "Mélange plan (aggregated serving)",
    "mixed": "Mixed plan (aggregated instances and prefill/decode combos, routed by request size)",
}


def render_plan(doc: dict[str, Any], console: Console, verbose: bool = False) -> None:
    """Rich tables for a plan document. First the answer (:mod:`hetplan.cli.render.answer`): the scenario, the
    traffic left out of sizing, the verdict, the decision in purchase terms, the owned GPUs, the confidence and the
    other strategies as one number each; then the deployment, the purchase, every strategy side by side, the
    simulated check in full. Solver internals (the --strategy all tie rule, the MILP footers) only with ``verbose``.
    """
    sc = doc["scenario"]
    slo = sc["slo"]
    wl = sc["workload"]
    left = wl.get("over_context") or {}
    requests = (
        f"{wl['requests']:,} of {left['requests_total']:,} requests sized"
        if left.get("refused")
        else f"{wl['requests']:,} requests"
    )
    console.print(
        f"[bold]{escape(sc['name'])}[/]: {escape(sc['model'])} ({sc['weight_dtype']}), workload "
        f"{escape(wl['name'])} "
        f"({requests}), goodput target {sc['goodput_target_req_per_s']:.4g} req/s "
        f"{_headroom_text(sc['headroom'])}, SLO p{slo['percentile']:g} TTFT "
        f"{format_duration(slo['ttft_s'])}, TPOT {format_duration(slo['tpot_s'])}"
    )
    lines = answer_lines(doc)
    first = 1 if lines and lines[0].startswith("traffic: ") else 0  # the traffic left out: right under the header
    for line in lines[:first]:
        console.print(f"[bold yellow]{escape(line)}[/]", highlight=False)
    if doc.get("quality_note"):  # quantized weights or KV cache (hetplan.planning.dtypes)
        console.print(f"[bold yellow]{escape(doc['quality_note'])}[/]", highlight=False)
    v = doc.get("verification")
    for line in lines[first:]:
        style = ""
        if line.startswith("VERIFIED"):
            style = "green"
        elif line.startswith("NOT VERIFIED"):
            style = "bold red"
        elif line.startswith("decision: "):
            style = "bold"
        console.print(f"[{style}]{escape(line)}[/]" if style else line, highlight=False, markup=bool(style))
    search = doc.get("dtype_search") or []
    if len(search) == 1 and not search[0].get("engine"):  # weight_dtype auto: the model's own dtype, nothing else
        console.print(
            f"weights: {search[0]['weight_dtype']}, the model's own (weight_dtype auto; auto-quantized also plans "
            "fp8 weights, with an accuracy note)",
            highlight=False,
            markup=False,
        )
    elif search:
        tried = "; ".join(
            (f"{d['engine']} " if d.get("engine") else "")
            + f"{d['weight_dtype']} weights: "
            + (f"${d['total_usd_per_hour']:.2f}/h" if d["status"] == "optimal" else "infeasible")
            + (" (this plan)" if d.get("chosen") else "")
            for d in doc["dtype_search"]
        )
        label = "engines and dtypes tried" if any(d.get("engine") for d in doc["dtype_search"]) else "dtypes tried"
        console.print(f"{label}: {escape(tried)}", highlight=False)
    title = TITLES.get(doc["strategy"], doc["strategy"])
    if doc.get("gpu"):
        title += f" ({doc['gpu']} only)"
    if doc["combos"]:
        _plan_table(title, doc, f"p{slo['percentile']:g}", console)
    if doc["instances"]:  # Mélange plans, and mixed plans (combos and aggregated instances)
        _instances_table("aggregated instances of this plan" if doc["combos"] else title, doc, console,
                         totals=not doc["combos"])  # fmt: skip
    if doc.get("assignment"):  # a mixed plan: which unit serves which request sizes, in words
        console.print(f"routing by request size: {doc['assignment']}", highlight=False, markup=False)
    _purchase_table(doc, console)
    _sites(doc, console)
    if verbose and doc.get("shape_won"):  # names the tie rule: solver internals
        console.print(f"--strategy all: {doc['shape_won']}", highlight=False, markup=False)
    _comparison(doc, console)
    if isinstance(v, dict) and v.get("verdict"):  # the simulated check in full (hetplan.sim.verify)
        console.print(f"simulated on the trace: {escape(v['verdict'])}", highlight=False)
        console.print(capacity_line(v), highlight=False, markup=False)
    pc = doc.get("prefix_cache")
    if isinstance(pc, dict):  # prefix reuse in sizing (hetplan.planning.prefix)
        console.print(prefix_cache_line(pc, doc["strategy"]), highlight=False, markup=False)
    s = doc["solver"]
    if verbose:
        console.print(
            f"solver: {s['backend']}, {s['status']}, gap {s['mip_gap']:g}; {s['combos_enumerated']:,} combos "
            f"enumerated over {s['instance_options']} instance options, {s['combos_in_ilp']:,} in the ILP, "
            f"pruning {s['pruning']}"
        )
    elif s.get("status") not in ("optimal", None) or s.get("mip_gap"):  # a solve that stopped short: always said
        console.print(f"solver: {s['status']}, gap {s['mip_gap']:g} (--verbose for the solver's figures)",
                      highlight=False, markup=False)  # fmt: skip
    mixed = s.get("mixed")
    if verbose and isinstance(mixed, dict):  # the mixed strategy's MILP (hetplan.solvers.mixed)
        console.print(
            f"mixed MILP: {mixed['status']}, {mixed['aggregated_columns']} aggregated + {mixed['combo_columns']} combo "
            f"columns, {mixed['variables']:,} variables, {mixed['constraints']:,} constraints before the purchase "
            f"layer; columns {mixed['columns']}; {mixed['bound']}"
            + (f"; {mixed['note']}" if mixed.get("note") else ""),
            highlight=False,
            markup=False,
        )
    verified = isinstance(doc.get("verification"), dict)
    # shapes the verification simulated and could not verify (--strategy all re-sizes each): say so, not "verify it"
    missed = {
        str(s["strategy"]): str(s["infeasible"])
        for s in ((doc.get("verification") or {}).get("resized") or {}).get("per_strategy", [])
        if isinstance(s, dict) and s.get("infeasible")
    }
    for name, part in doc.get("baselines", {}).items():
        if part.get("status") != "infeasible" and 0 <= part["total_usd_per_hour"] < doc["total_usd_per_hour"]:
            if name in missed:
                console.print(
                    f"note: {name} costs ${part['total_usd_per_hour']:.2f}/h on paper, but its plan did not hold "
                    f"the SLOs in simulation and could not be re-sized to: {missed[name]}",
                    highlight=False,
                    markup=False,
                )
                continue
            console.print(
                f"note: {name} costs ${part['total_usd_per_hour']:.2f}/h by the model, "
                f"{cost_vs(part['total_usd_per_hour'], doc['total_usd_per_hour'])} than this plan"
                + (" (its analytic plan, not simulated)" if verified else "")
                + f"; plan it with --strategy {name}"
                + (" to verify it." if verified else "."),
                highlight=False,
            )
    print_warnings(console, doc.get("warnings", []))


def _purchase_table(doc: dict[str, Any], console: Console) -> None:
    """What to buy (and which owned nodes to use), per offer, with the roles each one hosts."""
    lines = doc.get("purchase") or []
    if not lines:
        return
    table = Table(title="What to buy (instances; owned nodes at their amortised price)", box=box.SIMPLE_HEAD,
                  pad_edge=False)  # fmt: skip
    wide = console.width >= 120
    cols: tuple[str, ...] = ("provider", "instance type", "region", "GPUs each", "n", "owned", "$/h each", "$/h")
    cols += ("roles",)
    if not wide:  # narrow terminals: one "buy" cell per offer
        cols = ("buy", "GPUs each", "$/h", "roles")
    for col in cols:
        table.add_column(col, justify="right" if col in ("GPUs each", "n", "$/h each", "$/h") else "left")
    for p in lines:
        roles = sorted(
            {
                f"{role} {c[f'{role}_gpu']} TP{c[f'{role}_tp']}"
                for c in doc.get("combos") or []
                for role in ("prefill", "decode")
                if c.get(f"{role}_instance_type") == p["instance_type"] and c[f"{role}_gpu"] == p["gpu"]
            }
            | {
                f"aggregated TP{i['tp']}"
                for i in doc.get("instances") or []
                if i.get("instance_type") == p["instance_type"] and i["gpu"] == p["gpu"]
            }
        )
        idle = p["gpus_per_instance"] * p["count"] - p.get("gpus_used", 0)
        role_text = ", ".join(roles) + (f" ({idle} GPUs idle)" if idle > 0 else "")
        owned = "owned" if p["owned"] else "rented"
        if wide:
            table.add_row(
                p["provider"], p["instance_type"], p["region"] or "-", f"{p['gpus_per_instance']}x {p['gpu']}",
                str(p["count"]), owned, f"{p['usd_per_hour_each']:.2f}", f"{p['count'] * p['usd_per_hour_each']:.2f}",
                role_text,
            )  # fmt: skip
        else:
            where = f"{p['provider']}/{p['region']}" if p["region"] else p["provider"]
            place = owned if where == owned else f"{where}, {owned}"  # an owned node's provider is "owned"
            table.add_row(
                f"{p['count']}x {p['instance_type']}\n{place}", f"{p['gpus_per_instance']}x {p['gpu']}",
                f"{p['count'] * p['usd_per_hour_each']:.2f}", role_text,
            )  # fmt: skip
    console.print(table)


def _sites(doc: dict[str, Any], console: Console) -> None:
    """Each role's site, one line per combo, for plans made with --allow-cross-provider (others run in one site,
    named in the purchase table); cross-site combos say so, with their WAN link and egress."""
    wan = doc["scenario"].get("cross_provider")
    if not wan:
        return
    link = f"{wan['wan_gb_per_s']:g} GB/s, {format_duration(wan['wan_latency_s'])}, ${wan['egress_usd_per_gb']:g}/GB"
    console.print(f"--allow-cross-provider: WAN link {link}", highlight=False, markup=False)
    for c in doc.get("combos") or []:
        label = f"{c['count']}x ({c['n_prefill']}x {c['prefill_gpu']} TP{c['prefill_tp']} -> {c['n_decode']}x "
        label += f"{c['decode_gpu']} TP{c['decode_tp']})"
        p_at = f"{c.get('site', '')} {c.get('prefill_instance_type', '')}".strip()
        if c.get("cross_site"):
            d_at = f"{c.get('decode_site', '')} {c.get('decode_instance_type', '')}".strip()
            text = (f"{label}: prefill at {p_at}, decode at {d_at}: cross-site, KV over the WAN, egress "
                    f"${c.get('egress_usd_per_hour', 0.0):.2f}/h")  # fmt: skip
        else:
            text = f"{label}: prefill and decode at {c.get('site', '')} (same site)"
        console.print(text, highlight=False, markup=False)
    if doc.get("egress_usd_per_hour") is not None:
        console.print(f"WAN egress: ${doc['egress_usd_per_hour']:.2f}/h (in the total, not a purchase line)",
                      highlight=False, markup=False)  # fmt: skip


def _comparison(doc: dict[str, Any], console: Console) -> None:
    rows = [(doc["strategy"], doc)] + list(doc.get("baselines", {}).items())
    verified = isinstance(doc.get("verification"), dict)
    title = "Strategies compared" + (" (the others: analytic, not simulated)" if verified else "")
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("strategy", "$/h", "req/s", "tok/USD", "GPUs", "vs plan"):
        table.add_column(col, justify="left" if col in ("strategy", "GPUs") else "right", no_wrap=col != "GPUs")
    for name, part in rows:
        status = (doc.get("verification") or {}).get("status")
        label = name + (f" (plan, {status})" if part is doc and status else " (plan)" if part is doc else "")
        if part.get("status") == "infeasible":
            table.add_row(label, "-", "-", "-", "infeasible", "-")
            continue
        gpus = ", ".join(f"{n}x {g}" for g, n in part["gpus_used"].items())
        saves = "" if part is doc else cost_vs(part["total_usd_per_hour"], doc["total_usd_per_hour"])
        table.add_row(
            label,
            f"{part['total_usd_per_hour']:.2f}",
            f"{part['goodput_req_per_s']:.2f}",
            tokens_per_usd(part.get("tokens_per_usd"), part["total_usd_per_hour"], thousands=True),
            gpus,
            saves,
        )
    console.print(table)
    for name, part in rows[1:]:
        if part.get("status") == "infeasible":
            console.print(f"[yellow]{name}: infeasible[/] - {escape(part['reason'])}", highlight=False)


def _instances_table(title: str, part: dict[str, Any], console: Console, totals: bool = True) -> None:
    table = Table(
        title=f"{title}: ${part['total_usd_per_hour']:.2f}/h, {part['goodput_req_per_s']:.2f} req/s, "
        f"{tokens_per_usd_phrase(part.get('tokens_per_usd'), part['total_usd_per_hour'])}"
        if totals
        else title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col in ("instance", "n", "$/h each", "util", "traffic"):
        table.add_column(col, justify="left" if col == "instance" else "right", no_wrap=True)
    for inst in part["instances"]:
        table.add_row(
            f"{inst['gpu']} TP{inst['tp']} ({inst['role']})",
            str(inst["count"]),
            f"{inst['usd_per_hour']:.2f}",
            f"{inst['utilization'] * 100:.0f}%",
            f"{inst['traffic_share'] * 100:.0f}%",
        )
    console.print(table)
    if totals:
        console.print("GPUs: " + ", ".join(f"{n} x {g}" for g, n in part["gpus_used"].items()))


def _plan_table(title: str, part: dict[str, Any], q: str, console: Console) -> None:
    table = Table(
        title=f"{title}: ${part['total_usd_per_hour']:.2f}/h, {part['goodput_req_per_s']:.2f} req/s, "
        f"{tokens_per_usd_phrase(part.get('tokens_per_usd'), part['total_usd_per_hour'])}",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    wide = console.width >= WIDE_TABLE_COLUMNS
    narrow = console.width < 72  # even two-line cells do not fit: let the combo cell wrap too
    table.add_column("combo: prefill -> decode", no_wrap=not narrow, overflow="fold")
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("$/h" if wide else "$/h\ntok/$", justify="right", no_wrap=True)
    table.add_column("req/s", justify="right", no_wrap=True)
    if wide:
        table.add_column("tok/$", justify="right", no_wrap=True)
    for col in (f"{q} TTFT\nmodel", "TPOT\nmodel"):  # the model's prediction, not the simulated figure
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("util" if wide else "util\nbound", justify="right" if not wide else "right", no_wrap=True)
    if wide:
        table.add_column("bound", no_wrap=True)
    _combo_rows(table, part["combos"], wide)
    console.print(table)
    console.print("GPUs: " + ", ".join(f"{n} x {g}" for g, n in part["gpus_used"].items()))


def prefix_cache_line(pc: dict[str, Any], strategy: str) -> str:
    """The plan's prefix-reuse assumption and what the strategy would cost without reuse, in one sentence."""
    without = pc["without_reuse"]
    if without.get("status") == "infeasible":
        other = f"without reuse no {strategy} plan meets the target ({without['reason']})"
    else:
        extra = without.get("extra_cost")
        more = "" if extra is None else f", {extra * 100:+.1f} %"
        other = f"without reuse it would cost ${without['cost_per_hour']:.2f}/h{more}"
    rates = pc.get("plan_token_hit_rate") or []
    assumed = "no reuse on this plan's prefill instances" if not rates else (
        ", ".join(f"{r['token_hit_rate'] * 100:.1f} % ({r['gpu']} TP{r['tp']})" for r in rates)
        + " of prompt tokens reused on this plan's prefill instances"
    )  # fmt: skip
    return (
        f"prefix cache ({pc['source']}): sizing assumes {assumed} (each instance type's KV room as an LRU cache); "
        f"the analytic {strategy} plan costs ${pc['with_reuse_cost_per_hour']:.2f}/h, {other}"
    )


def capacity_line(v: dict[str, Any]) -> str:
    """The capacity against the target, e.g. ``capacity (the most it holds at 90 % joint attainment): simulated
    5.99 req/s, 1.20x the 5 req/s target; analytic 6.84 req/s (the planner's model; simulated 0.88x)``.

    Capacity is what the fleet sustains, the target what was asked for: capacity above the target is headroom."""
    a, c = v.get("analytic_capacity_req_per_s"), v.get("simulated_capacity_req_per_s")
    q = v.get("percentile", 90)
    target = v.get("target_req_per_s")
    head = f"capacity (the most it holds at {q:g} % joint attainment): "
    vs = "" if not target else f"{target:.3g} req/s target"
    if c is None:
        sim = "simulated -"
    else:
        times = f", {c / target:.2f}x the {vs}" if target else ""
        sim = f"simulated {c:.3g} req/s{times} (find-capacity on the {v.get('arrivals', 'replay')})"
    ratio = f"; simulated {c / a:.2f}x" if c is not None and a else ""
    analytic = "-" if a is None else f"{a:.3g} req/s"
    return f"{head}{sim}; analytic {analytic} (the planner's model{ratio})"


def _headroom_text(headroom: float) -> str:
    """``+10 % headroom``, or for a plan sized under its target (verification found it holds the target in
    simulation): ``sized 36.6 % under it (it holds the target in simulation)``."""
    if headroom >= 0:
        return f"+{round(headroom * 100, 1):g} % headroom"
    return f"sized {round(-headroom * 100, 1):g} % under it by the model (it holds the target in simulation)"


def _cheaper_search_text(search: dict[str, Any]) -> str:
    """One line: the cheaper plans verification tried below a verified one, and how each fared."""
    rows = []
    for t in search.get("tried") or []:
        if "infeasible" in t:
            rows.append(f"headroom {t['headroom']:+g}: infeasible ({t['infeasible']})")
            continue
        head = f"${t['usd_per_hour']:,.2f}/h ({t['deployment']})"
        status = str(t.get("status"))
        if status == "verified":
            rows.append(f"{head}: verified in and out of sample")
        elif status.startswith("not cheaper"):
            rows.append(f"{head}: not cheaper")
        else:
            worst = [f"{r['joint_attainment'] * 100:.1f} % {r['label']}" for r in t.get("out_of_sample") or []]
            rows.append(f"{head}: NOT verified (joint {t['joint_attainment'] * 100:.1f} % in sample"
                        + (f"; {', '.join(worst)}" if worst else "") + ")")  # fmt: skip
    kept, start = search.get("usd_per_hour_kept"), search.get("from_usd_per_hour")
    outcome = (
        f"kept ${kept:,.2f}/h, {(1 - kept / start) * 100:.0f} % under the first verified plan's ${start:,.2f}/h"
        if kept is not None and start and kept < start
        else "the first verified plan is the cheapest found"
    )
    return f"verify: searched for a cheaper plan that holds: {'; '.join(rows)}; {outcome}"


def render_verification(v: dict[str, Any], console: Console) -> None:
    """The ``verification`` block of a plan: re-sizing, simulated warnings and misses (the verdict itself is in
    the plan's first block, :func:`render_plan`)."""
    if "verdict" not in v:  # a block written before verification gave a verdict
        console.print(f"verify: {v.get('summary', '')}", highlight=False, markup=False)
    if "resized" in v:
        r = v["resized"]
        before = r.get("simulated_capacity_before_req_per_s")
        held = r.get("out_of_sample_capacity_before_req_per_s")
        caps = ([f"simulated capacity {before:.3g} req/s"] if before is not None else []) + (
            [f"{held:.3g} req/s out of sample"] if held is not None else []
        )
        after = r.get("strategy_after")
        kept = (
            f"the cheapest verified plan is the {after} plan at headroom {r['headroom_used']:g}"
            if after is not None and after != r.get("strategy_before")
            else f"at headroom {r['headroom_used']:g} it is"
        )
        shapes = [s for s in r.get("per_strategy") or [] if isinstance(s, dict) and "plans_tried" in s]
        tried = (  # --strategy all re-sizes every shape: count them all, not only the kept shape's
            f"{sum(int(s['plans_tried']) for s in shapes)} plans tried over {len(shapes)} shapes"
            if shapes
            else f"{len(r.get('attempts') or [])} re-sized plans tried"
        )
        console.print(
            f"verify: resized: the {r['strategy_before'] + ' ' if r.get('strategy_before') else ''}plan at "
            f"headroom {r['headroom_asked']:g} was NOT verified"
            + (f" ({'; '.join(caps)})" if caps else "")
            + f"; {kept}: ${r['usd_per_hour_before']:,.2f}/h -> ${r['usd_per_hour_after']:,.2f}/h "
            f"({tried})",
            highlight=False,
            markup=False,
        )
    pc = v.get("prefix_cache")
    if isinstance(pc, dict):  # the simulated prefix-cache hits (hetplan.sim.prefix)
        console.print(
            f"verify: prefix cache in simulation ({pc.get('router', 'round-robin')} router): "
            f"{pc['token_hit_rate'] * 100:.1f} % of prompt tokens reused, "
            f"{pc['hit_blocks']:,} block hits, {pc['miss_blocks']:,} misses, {pc['evicted_blocks']:,} evictions",
            highlight=False,
            markup=False,
        )
    search = v.get("cheaper_search")
    if isinstance(search, dict) and search.get("tried"):
        console.print(_cheaper_search_text(search), highlight=False, markup=False)
    by_class = v.get("attainment_by_class")
    if by_class:  # a workload with classes: per-class attainment and Jain's index over them
        jain = v.get("jain_index")
        console.print(
            "verify: attainment by class "
            + ", ".join(f"{k} {'-' if x is None else f'{x * 100:.1f} %'}" for k, x in by_class.items())
            + f"; Jain index {'-' if jain is None else f'{jain:.3f}'}",
            highlight=False,
            markup=False,
        )
    c = v.get("cascade")
    if c:
        console.print(
            f"verify: CASCADE calibrated on this workload: kappa {c['kappa']:.4g} "
            + ", ".join(f"{k} {x:.4g}" for k, x in (c.get("kappa_by_class") or {}).items())
            + f"; q2 {c['q2']:g} (written into the plan's cascade block)",
            highlight=False,
            markup=False,
        )
    print_warnings(console, v["warnings"], "warning (simulated)")
    print_warnings(console, v["misses"], "SLO miss (simulated)")
