"""Tables of a plan (``hetplan plan``): the deployment, every strategy side by side, the solver line,
and the simulator check of ``--verify`` on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.answer import answer_lines, cost_vs
from hetplan.cli.render.format import print_warnings, tokens_per_usd, tokens_per_usd_phrase
from hetplan.cli.render.verification import capacity_line, render_verification
from hetplan.units import format_duration

if TYPE_CHECKING:  # the CLI loads hetplan.plan only when a command runs (tests/cli/test_structure.py)
    from hetplan.plan.blocks import DtypeTry, PrefixCache, SolverStats
    from hetplan.plan.deployment import ComboUnit
    from hetplan.plan.types import Plan


def _combo_rows(table: Table, combos: Sequence[ComboUnit], wide: bool) -> None:
    """One row per combo. Narrow (``wide`` False): tok/$ goes on the second line of the $/h cell and the bound on
    the second line of the util cell (the combo cell has two lines anyway), so no column's information is lost."""
    for c in combos:
        usd = f"{c.usd_per_hour:.2f}"
        tokens = tokens_per_usd(c.tokens_per_usd, c.usd_per_hour, thousands=True)
        util = f"{c.utilization * 100:.0f}%"
        bound = c.bound_by.replace("kv_transfer", "kv")
        cells = [
            f"{c.n_prefill}x {c.prefill_gpu} TP{c.prefill_tp}\n-> {c.n_decode}x {c.decode_gpu} TP{c.decode_tp}",
            str(c.count),
            usd if wide else f"{usd}\n{tokens}",
            f"{c.goodput_req_per_s:.2f}",
            *([tokens] if wide else []),
            format_duration(c.predicted_ttft_s),
            format_duration(c.predicted_tpot_s),
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


def render_plan(plan: Plan, console: Console, verbose: bool = False) -> None:
    """Rich tables for a plan. First the answer (:mod:`hetplan.cli.render.answer`): the scenario, the traffic left
    out of sizing, the verdict, the decision in purchase terms, the owned GPUs, the confidence and the other
    strategies as one number each; then the deployment, the purchase, every strategy side by side, the simulated
    check in full. Solver internals (the --strategy all tie rule, the MILP footers) only with ``verbose``.
    """
    slo, wl = plan.slo, plan.workload
    left = wl.over_context if wl is not None else None
    n_requests = wl.requests if wl is not None else 0
    requests = (
        f"{n_requests:,} of {left.requests_total:,} requests sized"
        if left is not None and left.refused
        else f"{n_requests:,} requests"
    )
    console.print(
        f"[bold]{escape(plan.name)}[/]: {escape(plan.model.spec.name)} ({plan.weight_dtype}), workload "
        f"{escape(wl.name if wl is not None else '')} "
        f"({requests}), goodput target {plan.goodput_target_req_per_s:.4g} req/s "
        f"{_headroom_text(plan.headroom)}, SLO p{slo.percentile:g} TTFT "
        f"{format_duration(slo.ttft_s)}, TPOT {format_duration(slo.tpot_s)}"
    )
    lines = answer_lines(plan)
    first = 1 if lines and lines[0].startswith("traffic: ") else 0  # the traffic left out: right under the header
    for line in lines[:first]:
        console.print(f"[bold yellow]{escape(line)}[/]", highlight=False)
    if plan.quality_note:  # quantized weights or KV cache (hetplan.planning.dtypes)
        console.print(f"[bold yellow]{escape(plan.quality_note)}[/]", highlight=False)
    v = plan.verification
    for line in lines[first:]:
        style = ""
        if line.startswith("VERIFIED"):
            style = "green"
        elif line.startswith("NOT VERIFIED"):
            style = "bold red"
        elif line.startswith("decision: "):
            style = "bold"
        console.print(f"[{style}]{escape(line)}[/]" if style else line, highlight=False, markup=bool(style))
    _dtype_search(plan.dtype_search or (), console)
    title = TITLES.get(plan.strategy, plan.strategy)
    if plan.gpu_only:
        title += f" ({plan.gpu_only} only)"
    if plan.combos:
        _plan_table(title, plan, f"p{slo.percentile:g}", console)
    if plan.instances:  # Mélange plans, and mixed plans (combos and aggregated instances)
        _instances_table("aggregated instances of this plan" if plan.combos else title, plan, console,
                         totals=not plan.combos)  # fmt: skip
    if plan.assignment:  # a mixed plan: which unit serves which request sizes, in words
        console.print(f"routing by request size: {plan.assignment}", highlight=False, markup=False)
    _purchase_table(plan, console)
    _sites(plan, console)
    if verbose and plan.shape_won:  # names the tie rule: solver internals
        console.print(f"--strategy all: {plan.shape_won}", highlight=False, markup=False)
    _comparison(plan, console)
    if v is not None and v.verdict:  # the simulated check in full (hetplan.sim.verify)
        console.print(f"simulated on the trace: {escape(v.verdict)}", highlight=False)
        console.print(capacity_line(v), highlight=False, markup=False)
    if plan.prefix_cache is not None:  # prefix reuse in sizing (hetplan.planning.prefix)
        console.print(prefix_cache_line(plan.prefix_cache, plan.strategy), highlight=False, markup=False)
    if plan.solver is not None:
        _solver(plan.solver, console, verbose)
    _notes(plan, console)
    print_warnings(console, plan.warnings)


def _dtype_search(search: Sequence[DtypeTry], console: Console) -> None:
    """The weight dtypes (and engines) a dtype search planned, and which one this plan is."""
    if len(search) == 1 and not search[0].engine:  # weight_dtype auto: the model's own dtype, nothing else
        console.print(
            f"weights: {search[0].weight_dtype}, the model's own (weight_dtype auto; auto-quantized also plans "
            "fp8 weights, with an accuracy note)",
            highlight=False,
            markup=False,
        )
    elif search:
        tried = "; ".join(
            (f"{d.engine} " if d.engine else "")
            + f"{d.weight_dtype} weights: "
            + (f"${d.total_usd_per_hour:.2f}/h" if d.status == "optimal" else "infeasible")
            + (" (this plan)" if d.chosen else "")
            for d in search
        )
        label = "engines and dtypes tried" if any(d.engine for d in search) else "dtypes tried"
        console.print(f"{label}: {escape(tried)}", highlight=False)


def _solver(s: SolverStats, console: Console, verbose: bool) -> None:
    """The solver line: in full with ``verbose``, else only when the solve stopped short."""
    if verbose:
        console.print(
            f"solver: {s.backend}, {s.status}, gap {s.mip_gap:g}; {s.combos_enumerated:,} combos "
            f"enumerated over {s.instance_options} instance options, {s.combos_in_ilp:,} in the ILP, "
            f"pruning {s.pruning}"
        )
    elif s.status not in ("optimal", None) or s.mip_gap:  # a solve that stopped short: always said
        console.print(f"solver: {s.status}, gap {s.mip_gap:g} (--verbose for the solver's figures)",
                      highlight=False, markup=False)  # fmt: skip
    mixed = s.mixed
    if verbose and mixed is not None:  # the mixed strategy's MILP (hetplan.solvers.mixed)
        console.print(
            f"mixed MILP: {mixed.status}, {mixed.aggregated_columns} aggregated + {mixed.combo_columns} combo "
            f"columns, {mixed.variables:,} variables, {mixed.constraints:,} constraints before the purchase "
            f"layer; columns {mixed.columns}; {mixed.bound}" + (f"; {mixed.note}" if mixed.note else ""),
            highlight=False,
            markup=False,
        )


def _notes(plan: Plan, console: Console) -> None:
    """A note per strategy cheaper than the plan on paper: plan it to verify it, or (a shape the verification
    simulated and could not re-size to hold) why it is not the plan."""
    v = plan.verification
    verified = v is not None
    # shapes the verification simulated and could not verify (--strategy all re-sizes each): say so, not "verify it"
    shapes = v.resized.per_strategy if v is not None and v.resized is not None else []
    missed = {s.strategy: s.infeasible for s in shapes if s.infeasible}
    for name, part in plan.baselines.items():
        cost = part.total_usd_per_hour
        if part.status != "infeasible" and cost is not None and 0 <= cost < plan.total_usd_per_hour:
            if name in missed:
                console.print(
                    f"note: {name} costs ${cost:.2f}/h on paper, but its plan did not hold "
                    f"the SLOs in simulation and could not be re-sized to: {missed[name]}",
                    highlight=False,
                    markup=False,
                )
                continue
            console.print(
                f"note: {name} costs ${cost:.2f}/h by the model, "
                f"{cost_vs(cost, plan.total_usd_per_hour)} than this plan"
                + (" (its analytic plan, not simulated)" if verified else "")
                + f"; plan it with --strategy {name}"
                + (" to verify it." if verified else "."),
                highlight=False,
            )


def _purchase_table(plan: Plan, console: Console) -> None:
    """What to buy (and which owned nodes to use), per offer, with the roles each one hosts."""
    if not plan.purchase:
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
    for p in plan.purchase:
        roles = sorted(
            {
                f"{role} {gpu} TP{tp}"
                for c in plan.combos
                for role, gpu, tp, kind in (
                    ("prefill", c.prefill_gpu, c.prefill_tp, c.prefill_instance_type),
                    ("decode", c.decode_gpu, c.decode_tp, c.decode_instance_type),
                )
                if kind == p.instance_type and gpu == p.gpu
            }
            | {f"aggregated TP{i.tp}" for i in plan.instances if i.instance_type == p.instance_type and i.gpu == p.gpu}
        )
        idle = p.gpus_per_instance * p.count - p.gpus_used
        role_text = ", ".join(roles) + (f" ({idle} GPUs idle)" if idle > 0 else "")
        owned = "owned" if p.owned else "rented"
        if wide:
            table.add_row(
                p.provider, p.instance_type, p.region or "-", f"{p.gpus_per_instance}x {p.gpu}",
                str(p.count), owned, f"{p.usd_per_hour_each:.2f}", f"{p.count * p.usd_per_hour_each:.2f}",
                role_text,
            )  # fmt: skip
        else:
            where = f"{p.provider}/{p.region}" if p.region else p.provider
            place = owned if where == owned else f"{where}, {owned}"  # an owned node's provider is "owned"
            table.add_row(
                f"{p.count}x {p.instance_type}\n{place}", f"{p.gpus_per_instance}x {p.gpu}",
                f"{p.count * p.usd_per_hour_each:.2f}", role_text,
            )  # fmt: skip
    console.print(table)


def _sites(plan: Plan, console: Console) -> None:
    """Each role's site, one line per combo, for plans made with --allow-cross-provider (others run in one site,
    named in the purchase table); cross-site combos say so, with their WAN link and egress."""
    wan = plan.cross_provider
    if wan is None:
        return
    link = f"{wan.wan_gb_per_s:g} GB/s, {format_duration(wan.wan_latency_s)}, ${wan.egress_usd_per_gb:g}/GB"
    console.print(f"--allow-cross-provider: WAN link {link}", highlight=False, markup=False)
    for c in plan.combos:
        label = f"{c.count}x ({c.n_prefill}x {c.prefill_gpu} TP{c.prefill_tp} -> {c.n_decode}x "
        label += f"{c.decode_gpu} TP{c.decode_tp})"
        p_at = f"{c.site} {c.prefill_instance_type}".strip()
        if c.cross_site:
            d_at = f"{c.decode_site} {c.decode_instance_type}".strip()
            text = (f"{label}: prefill at {p_at}, decode at {d_at}: cross-site, KV over the WAN, egress "
                    f"${c.egress_usd_per_hour:.2f}/h")  # fmt: skip
        else:
            text = f"{label}: prefill and decode at {c.site} (same site)"
        console.print(text, highlight=False, markup=False)
    if plan.egress_usd_per_hour is not None:
        console.print(f"WAN egress: ${plan.egress_usd_per_hour:.2f}/h (in the total, not a purchase line)",
                      highlight=False, markup=False)  # fmt: skip


def _comparison(plan: Plan, console: Console) -> None:
    from hetplan.plan.types import StrategyResult

    this = StrategyResult(plan.status, None, plan.total_usd_per_hour, plan.goodput_req_per_s, plan.tokens_per_usd,
                          plan.output_tokens_per_usd, plan.gpus_used)  # fmt: skip
    rows = [(plan.strategy, this), *plan.baselines.items()]
    status = plan.verification.status if plan.verification is not None else ""
    title = "Strategies compared" + (" (the others: analytic, not simulated)" if plan.verification else "")
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("strategy", "$/h", "req/s", "tok/USD", "GPUs", "vs plan"):
        table.add_column(col, justify="left" if col in ("strategy", "GPUs") else "right", no_wrap=col != "GPUs")
    for name, part in rows:
        label = name + (f" (plan, {status})" if part is this and status else " (plan)" if part is this else "")
        cost, goodput = part.total_usd_per_hour, part.goodput_req_per_s
        if part.status == "infeasible" or cost is None or goodput is None:
            table.add_row(label, "-", "-", "-", "infeasible", "-")
            continue
        gpus = ", ".join(f"{n}x {g}" for g, n in (part.gpus_used or {}).items())
        saves = "" if part is this else cost_vs(cost, plan.total_usd_per_hour)
        table.add_row(
            label, f"{cost:.2f}", f"{goodput:.2f}", tokens_per_usd(part.tokens_per_usd, cost, thousands=True), gpus,
            saves,
        )  # fmt: skip
    console.print(table)
    for name, part in rows[1:]:
        if part.status == "infeasible":
            console.print(f"[yellow]{name}: infeasible[/] - {escape(part.reason or '')}", highlight=False)


def _instances_table(title: str, plan: Plan, console: Console, totals: bool = True) -> None:
    table = Table(
        title=f"{title}: ${plan.total_usd_per_hour:.2f}/h, {plan.goodput_req_per_s:.2f} req/s, "
        f"{tokens_per_usd_phrase(plan.tokens_per_usd, plan.total_usd_per_hour)}"
        if totals
        else title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col in ("instance", "n", "$/h each", "util", "traffic"):
        table.add_column(col, justify="left" if col == "instance" else "right", no_wrap=True)
    for inst in plan.instances:
        table.add_row(
            f"{inst.gpu} TP{inst.tp} ({inst.role})",
            str(inst.count),
            f"{inst.usd_per_hour:.2f}",
            f"{inst.utilization * 100:.0f}%",
            f"{inst.traffic_share * 100:.0f}%",
        )
    console.print(table)
    if totals:
        console.print("GPUs: " + ", ".join(f"{n} x {g}" for g, n in plan.gpus_used.items()))


def _plan_table(title: str, plan: Plan, q: str, console: Console) -> None:
    table = Table(
        title=f"{title}: ${plan.total_usd_per_hour:.2f}/h, {plan.goodput_req_per_s:.2f} req/s, "
        f"{tokens_per_usd_phrase(plan.tokens_per_usd, plan.total_usd_per_hour)}",
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
    _combo_rows(table, plan.combos, wide)
    console.print(table)
    console.print("GPUs: " + ", ".join(f"{n} x {g}" for g, n in plan.gpus_used.items()))


def prefix_cache_line(pc: PrefixCache, strategy: str) -> str:
    """The plan's prefix-reuse assumption and what the strategy would cost without reuse, in one sentence."""
    from hetplan.plan.blocks import WithoutReuse

    without = pc.without_reuse or WithoutReuse()
    if without.status == "infeasible":
        other = f"without reuse no {strategy} plan meets the target ({without.reason})"
    else:
        extra = without.extra_cost
        more = "" if extra is None else f", {extra * 100:+.1f} %"
        other = f"without reuse it would cost ${without.cost_per_hour:.2f}/h{more}"
    rates = pc.plan_token_hit_rate
    assumed = "no reuse on this plan's prefill instances" if not rates else (
        ", ".join(f"{r.token_hit_rate * 100:.1f} % ({r.gpu} TP{r.tp})" for r in rates)
        + " of prompt tokens reused on this plan's prefill instances"
    )  # fmt: skip
    return (
        f"prefix cache ({pc.source}): sizing assumes {assumed} (each instance type's KV room as an LRU cache); "
        f"the analytic {strategy} plan costs ${pc.with_reuse_cost_per_hour:.2f}/h, {other}"
    )


def _headroom_text(headroom: float) -> str:
    """``+10 % headroom``, or for a plan sized under its target (verification found it holds the target in
    simulation): ``sized 36.6 % under it (it holds the target in simulation)``."""
    if headroom >= 0:
        return f"+{round(headroom * 100, 1):g} % headroom"
    return f"sized {round(-headroom * 100, 1):g} % under it by the model (it holds the target in simulation)"


__all__ = ["TITLES", "WIDE_TABLE_COLUMNS", "capacity_line", "prefix_cache_line", "render_plan", "render_verification"]
