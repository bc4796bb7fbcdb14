"""What ``hetplan simulate`` and ``hetplan calibrate`` print: latency and attainment tables, the capacity found,
the fitted CASCADE coefficients."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.format import duration, fit_numbers, percent

if TYPE_CHECKING:  # hetplan.sim loads numpy: the CLI loads it when a command runs (tests/cli/test_structure.py)
    from hetplan.sim.calibration_result import CascadeCalibration
    from hetplan.sim.result import Capacity, ClosedLoop, LatencyStats, Simulation


def share(x: float) -> str:
    """A target share as a percent, with a decimal only when needed (0.999 → 99.9%, 0.9 → 90%)."""
    text = f"{x * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _n(k: int, word: str = "request") -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def _latency_table(rows: tuple[tuple[str, LatencyStats], ...], console: Console) -> None:
    """The mean and p50/p90/p99 of each latency (numpy linear percentiles)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="latency (numpy linear percentiles)")
    for col in ("metric", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for label, s in rows:
        table.add_row(label, duration(s.mean), duration(s.p50), duration(s.p90), duration(s.p99))
    console.print(fit_numbers(table, console))


def render_metrics(doc: Simulation | Mapping[str, Any], console: Console) -> None:
    """Rich tables for a simulation's metrics document (typed, or as ``hetplan simulate --json`` prints it)."""
    from hetplan.sim.metrics import GOODPUT_DEFINITION
    from hetplan.sim.result import Simulation

    m = doc if isinstance(doc, Simulation) else Simulation.model_validate(doc)
    rate = "-" if m.arrival_rate_per_s is None else f"{m.arrival_rate_per_s:.3g}"
    console.print(
        f"[bold]simulation[/]: policy {m.policy}, router {m.router}, rate scale {m.rate_scale:g}, "
        f"{m.instances} instances; {escape(m.trace)}: {_n(m.requests)} over "
        f"{m.duration_s:.1f} s ({rate} req/s), {m.finished} finished, {m.unfinished} unfinished at the "
        f"cut-off, {m.dropped} dropped (KV), {m.dropped_over_context} refused (prompt over the context "
        f"window), {m.truncated_at_context} cut at the window",
        highlight=False,
    )
    if m.host_kv is not None:
        ssd = "unbounded" if m.host_kv.ssd_gib is None else f"{m.host_kv.ssd_gib:g} GiB"
        console.print(f"host KV tier per instance: DRAM {m.host_kv.dram_gib:g} GiB, SSD {ssd}", highlight=False)
    if m.output_predictor is not None:
        console.print(f"output predictor (CASCADE's decode budgets): {escape(m.output_predictor)}", highlight=False)
    att = m.attainment
    jain = "-" if m.jain_index is None else f"{m.jain_index:.3f}"
    console.print(
        f"goodput {m.goodput_req_per_s:.3g} req/s over the {m.serving_span_s:.1f} s serving span; SLO "
        f"attainment joint {percent(att.joint)} (TTFT "
        f"{percent(att.ttft)}, TPOT {percent(att.tpot)}"
        + (
            f" of {m.requests - m.tpot_ineligible}: {m.tpot_ineligible} single-token requests not eligible"
            if m.tpot_ineligible
            else ""
        )
        + f"); Jain index over classes {jain}",
        highlight=False,
    )
    _latency_table((("TTFT", m.ttft_s), ("TPOT", m.tpot_s), ("ITL", m.itl_s), ("E2E", m.e2e_s)), console)
    console.print(f"goodput = {GOODPUT_DEFINITION}", highlight=False)
    classes = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="per class")
    for col in ("class", "requests", "TTFT SLO", "TPOT SLO", "attainment", "goodput", "p90 TTFT", "p90 TPOT"):
        classes.add_column(col, justify="left" if col == "class" else "right")
    for c in m.classes:
        classes.add_row(
            escape(c.name),
            str(c.requests),
            duration(c.ttft_slo_s),
            duration(c.tpot_slo_s),
            percent(c.attainment),
            f"{c.goodput_req_per_s:.3g}",
            duration(c.ttft_s.p90),
            duration(c.tpot_s.p90),
        )
    console.print(fit_numbers(classes, console))
    util = ", ".join(f"{r} {u * 100:.0f}%" for r, u in m.utilization.by_role.items())
    console.print(f"utilization {util}; {_counters(m.counters)}", highlight=False)
    pc = m.prefix_cache
    if pc is not None:  # the trace had prefix block ids (hetplan.sim.prefix)
        console.print(
            f"prefix cache: {pc.token_hit_rate * 100:.1f}% of prompt tokens reused ({pc.hit_tokens:,} of "
            f"{pc.lookup_tokens:,}); {pc.hit_blocks:,} block hits, {pc.miss_blocks:,} misses, "
            f"{pc.evicted_blocks:,} evictions",
            highlight=False,
        )
    w = m.windowed
    if w is not None:  # hetplan simulate --windows
        slowest = max(x.wall_s for x in w.per_window)
        console.print(
            f"windowed: {w.windows} time windows with {w.warmup_s:g} s warm-up each, on {escape(w.executor)}; "
            f"slowest window {slowest:.2f} s; {w.counters_note}",
            highlight=False,
        )


COUNTERS = ("iterations", "preemptions", "restores", "recomputes")
"""The engine counters the metrics line shows (every run has them, :class:`hetplan.sim.engine.Simulator`)."""


def _counters(counters: dict[str, float]) -> str:
    """Iterations, preemptions, KV restores and recomputes, as the metrics line shows them."""
    iterations, preemptions, restores, recomputes = (int(counters[k]) for k in COUNTERS)
    return f"{iterations:,} iterations, {preemptions} preemptions ({restores} KV restores, {recomputes} recomputes)"


def render_capacity(doc: Capacity | Mapping[str, Any], console: Console) -> None:
    """The capacity ``--find-capacity`` found (or that none was), then the metrics of the run at that rate."""
    from hetplan.sim.result import Capacity

    cap = doc if isinstance(doc, Capacity) else Capacity.model_validate(doc)
    if cap.rate_scale is None or cap.metrics is None:
        console.print(f"no rate scale down to 1/64 reaches {share(cap.target)} joint SLO attainment")
        return
    more = " (capped: 64x still meets it)" if cap.capped else ""
    console.print(
        f"goodput capacity at {share(cap.target)} joint SLO attainment ({cap.policy}): "
        f"{cap.goodput_capacity_req_per_s:.3g} req/s arriving (rate scale {cap.rate_scale:.3g}{more}; that "
        f"run's goodput over its serving span {cap.goodput_req_per_s:.3g} req/s); {len(cap.runs)} runs",
        highlight=False,
    )
    render_metrics(cap.metrics, console)


def render_closed_loop(doc: ClosedLoop | Mapping[str, Any], console: Console) -> None:
    """The closed loop's throughput and mean latencies (``hetplan simulate --concurrency``)."""
    from hetplan.sim.result import ClosedLoop

    c = doc if isinstance(doc, ClosedLoop) else ClosedLoop.model_validate(doc)
    console.print(
        f"[bold]closed loop[/]: {c.concurrency} clients, {c.isl} prompt + {c.osl} output tokens, "
        f"{c.requests} requests ({c.finished} finished) over {c.duration_s:.1f} s; policy "
        f"{c.policy}, {c.instances} instances",
        highlight=False,
    )
    thr = c.throughput_req_per_s
    console.print(
        f"throughput {'-' if thr is None else f'{thr:.4g}'} req/s, {c.output_tokens_per_s or 0:,.0f} output "
        f"tokens/s, {c.total_tokens_per_s or 0:,.0f} total tokens/s (Little's law, C / mean E2E: "
        f"{c.littles_law_req_per_s or 0:.4g} req/s)",
        highlight=False,
    )
    _latency_table((("TTFT", c.ttft_s), ("TPOT", c.tpot_s), ("ITL", c.itl_s), ("E2E", c.e2e_s)), console)
    if c.tpot_ineligible:
        console.print(f"TPOT: {_n(c.tpot_ineligible)} with one output token not eligible", highlight=False)


@contextmanager
def capacity_progress(console: Console, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A progress bar for ``--find-capacity`` (one step per simulation run; the search takes about 12 runs):
    yields the ``progress`` callback :func:`hetplan.sim.run.find_capacity` calls before each run. Off with
    ``enabled`` False (``--json``) or when ``console`` is not a terminal."""
    from hetplan.cli.render.progress import progress_bar

    with progress_bar(console, "finding capacity", CAPACITY_RUNS, enabled) as bar:
        yield bar.step


CAPACITY_RUNS = 12
"""Simulation runs a typical ``--find-capacity`` makes (bracketing, then 8 bisection steps): the bar's length."""


def render_calibration(doc: CascadeCalibration | Mapping[str, Any], console: Console) -> None:
    """The fitted kappa and chosen q2 (``hetplan calibrate``), and the q2 sweep behind the choice."""
    from hetplan.sim.calibration_result import CascadeCalibration

    block = doc if isinstance(doc, CascadeCalibration) else CascadeCalibration.model_validate(doc)
    by_objective = block.q2_objective is not None
    console.print(
        f"kappa {block.kappa:.4g} (P(TTFT <= kappa x T_hat) = {block.coverage:.1%} >= {block.quantile:g}), "
        f"q2 {block.q2:g}" + (" (by goodput x Jain)" if by_objective else ""),
        highlight=False,
    )
    if block.kappa_by_class:
        console.print(
            "kappa by class: " + ", ".join(f"{k} {v:.4g}" for k, v in block.kappa_by_class.items()), highlight=False
        )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="q2 sweep (CASCADE, fitted kappa)")
    cols = ["q2", "goodput req/s", "attainment", "Jain"] + (["goodput x Jain"] if by_objective else [])
    for col in cols:
        table.add_column(col, justify="right")
    for r in block.q2_sweep:
        jain = "-" if r.jain_index is None else f"{r.jain_index:.3f}"
        row = [f"{r.q2:g}", f"{r.goodput_req_per_s:.3g}", percent(r.attainment), jain]
        if r.objective is not None:
            row.append(f"{r.objective:.3g}")
        table.add_row(*row)
    console.print(fit_numbers(table, console))
