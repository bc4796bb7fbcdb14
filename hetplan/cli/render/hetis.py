"""Tables of a Hetis deployment spec (``hetplan plan --strategy hetis --pool POOL.yaml``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.format import duration, fit_numbers, print_warnings
from hetplan.units import format_duration

if TYPE_CHECKING:  # the CLI loads hetplan.plan only when a command runs (tests/cli/test_structure.py)
    from hetplan.plan.blocks.hetis import HeadSplit, HetisSpec


def _rate(req_per_s: float) -> str:
    """Requests per second with a fixed number of decimals, so the column lines up (2.20, not 2.2)."""
    return f"{req_per_s:.2f}" if req_per_s >= 1 else f"{req_per_s:.3f}"


def render_hetis(spec: HetisSpec, console: Console) -> None:
    """Roles per device, the primary layout, the head table per length class and the comparison."""
    sc, pred, lay = spec.scenario, spec.predicted, spec.layout
    slo = sc.slo
    console.print(
        f"[bold]{escape(sc.name)}[/]: {escape(sc.model)} ({sc.weight_dtype}) on pool "
        f"{escape(spec.pool.name)} ({', '.join(f'{n}x {g}' for g, n in spec.pool.gpus.items())}), "
        f"workload {escape(sc.workload.name)}, SLO p{slo.percentile:g} TTFT {format_duration(slo.ttft_s)}, "
        f"TPOT {format_duration(slo.tpot_s)}"
    )
    console.print(
        f"Hetis primaries: {lay.label} ({lay.layouts_considered} "
        f"{'layout' if lay.layouts_considered == 1 else 'layouts'} considered); "
        f"{_rate(pred.req_per_s)} req/s, {pred.output_tokens_per_s:,.0f} output tokens/s, "
        f"TPOT {duration(pred.tpot_s)}, p{slo.percentile:g} TTFT {duration(pred.ttft_s)}, "
        f"KV capacity {pred.kv_capacity_tokens:,.0f} tokens, decode batch {pred.decode_batch}"
    )
    if spec.total_usd_per_hour is not None:  # priced like the other strategies (hetplan.planning.hetis)
        console.print(
            f"cost: ${spec.total_usd_per_hour:,.2f}/h for the whole pool, "
            + (f"{spec.tokens_per_usd:,.0f} tokens/USD (in+out) at its capacity; " if spec.tokens_per_usd else "")
            + "prices: "
            + ", ".join(f"{g} ${p.usd_per_gpu_hour:g}/GPU-h ({p.source})" for g, p in spec.prices.items()),
            highlight=False,
            markup=False,
        )
    roles = Table(title="Roles per device", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("device", "gpu", "role", "replica", "stage/rank", "layers", "why"):
        roles.add_column(col, overflow="fold")
    for d in spec.pool.devices:
        primary = d.role == "primary"
        roles.add_row(
            d.name,
            d.gpu,
            d.role,
            "-" if d.replica is None else str(d.replica),
            f"{d.stage}/{d.tp_rank}" if primary else "-",
            str(d.layers) if primary else "-",
            d.reason,
        )
    console.print(fit_numbers(roles, console))
    for part in spec.head_split:
        _head_split(part, console)
    _comparison(spec, console)
    if spec.kv_capacity_ratio_over_splitwise:
        console.print(
            f"KV capacity: {spec.kv_capacity_ratio_over_splitwise:.2f}x the Splitwise-style phase split's (KV only "
            "on decode GPUs)."
        )
    if not pred.ttft_within_slo:
        console.print("[yellow]warning:[/] predicted TTFT is above the TTFT SLO", highlight=False)
    print_warnings(console, spec.warnings)


def _head_split(part: HeadSplit, console: Console) -> None:
    """One replica's KV heads per request by length class, with each device's step time."""
    if part.reason:
        console.print(f"[yellow]replica {part.replica} serves nothing:[/] {escape(part.reason)}")
    if not part.classes:
        return
    names = [d.name for d in part.devices]
    table = Table(
        title=f"Replica {part.replica}: KV heads per request by length class ({part.method}, slowest "
        f"device {format_duration(part.makespan_s)} per step)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("class (context)", no_wrap=True)
    table.add_column("requests", justify="right")
    for n in names:
        table.add_column(n.replace("+", "+\n").replace("/", "/\n"), justify="right")
    rep_note = False
    for c in part.classes:
        # a class with no request in the expected batch shows where one representative request's heads go
        rep_note = rep_note or c.representative
        table.add_row(
            f"{c.name} ({c.context_tokens:,.0f})",
            "0 (1 rep.)" if c.representative else str(c.requests),
            *[str(c.kv_heads.get(n, 0)) for n in names],
        )
    table.add_row("step time", "", *[format_duration(d.step_s) for d in part.devices])
    console.print(fit_numbers(table, console))
    if rep_note:
        console.print(
            "  0 (1 rep.): no request of that class in the expected batch; the row places one representative "
            "request on top of the batch's split"
        )


def _comparison(spec: HetisSpec, console: Console) -> None:
    """Hetis against the Splitwise- and HexGen-style strategies on the same pool."""
    pred = spec.predicted
    cmp_table = Table(title="Same pool, three strategies", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("strategy", "req/s", "TPOT", "TTFT", "KV tokens", "Hetis gain", "layout"):
        cmp_table.add_column(col, justify="left" if col in ("strategy", "layout") else "right", overflow="fold")
    cmp_table.add_row(
        "hetis (this plan)",
        _rate(pred.req_per_s),
        duration(pred.tpot_s),
        duration(pred.ttft_s),
        f"{pred.kv_capacity_tokens:,.0f}",
        "",
        spec.layout.label,
    )
    for name, b in spec.baselines.items():
        label = {"splitwise": "splitwise-style", "hexgen": "hexgen-style"}.get(name, name)
        if b.status == "infeasible":
            cmp_table.add_row(label, "-", "-", "-", "-", "-", f"infeasible: {b.reason}")
            continue
        ratio = spec.throughput_ratio_over.get(name)
        cmp_table.add_row(
            label,
            _rate(b.req_per_s),
            duration(b.tpot_s),
            duration(b.ttft_s),
            f"{b.kv_capacity_tokens:,.0f}",
            f"{ratio:.2f}x" if ratio else "-",
            b.layout,
        )
    console.print(fit_numbers(cmp_table, console))
