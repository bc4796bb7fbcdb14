"""``hetplan simulate`` and ``hetplan calibrate``: replay traces through a plan; fit CASCADE's coefficients."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
import yaml
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.main import app, err_console, run_guarded
from hetplan.errors import InputError
from hetplan.io import check_output, dump_for_path, to_json, write_atomic
from hetplan.planfile import load_plan
from hetplan.sim.engine import SimConfig
from hetplan.sim.metrics import GOODPUT_DEFINITION
from hetplan.sim.policies import CascadeSettings
from hetplan.sim.run import SimRequest, calibrate, find_capacity, plan_cascade, router_config, simulate
from hetplan.units import format_duration, parse_duration_s
from hetplan.workload.model import ClassSlo, RequestStream
from hetplan.workload.readers import read_stream


def _slo_value(text: str, cls: str, which: str) -> float:
    try:
        return parse_duration_s(text, "slo")
    except InputError as exc:
        raise InputError(
            f"--slo {cls}: {which} {exc.what.removeprefix('slo: ')}",
            exc.why,
            f"write e.g. --slo {cls}=1s,50ms",
        ) from None


def _class_slos(items: list[str] | None) -> dict[str, ClassSlo]:
    slos: dict[str, ClassSlo] = {}
    for item in items or []:
        name, sep, rest = item.partition("=")
        parts = [p.strip() for p in rest.split(",")]
        if not sep or not name.strip() or not 1 <= len(parts) <= 2 or not parts[0]:
            raise InputError(
                f"--slo: cannot read {item!r}",
                "expected CLASS=TTFT or CLASS=TTFT,TPOT with units",
                "write e.g. --slo AzureLLMInferenceTrace_code=1s,50ms",
            )
        cls = name.strip()
        ttft = _slo_value(parts[0], cls, "TTFT")
        tpot = _slo_value(parts[1], cls, "TPOT") if len(parts) == 2 and parts[1] else None
        slos[cls] = ClassSlo(ttft, tpot)
    return slos


def parse_share(text: str, option: str, upper_open: bool = False) -> float:
    """A share given as a fraction or a percent, one rule for ``--target`` and ``--quantile``.

    ``0.9`` is a fraction (a number in (0, 1]); ``90%`` is a percent (a number in (0, 100] followed by ``%``).
    A bare number above 1 (``90``) and ``p90`` are refused as ambiguous. ``upper_open``: 1 (100 %) is refused.

    Raises:
        InputError: unreadable, ambiguous or out of range; the message names ``option``.
    """
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw)
    except ValueError:
        raise InputError(f"{option}: cannot read {text!r}", fix=f"write a fraction or a percent, e.g. {option} 0.9 "
                         f"or {option} 90%") from None  # fmt: skip
    if not math.isfinite(value):
        raise InputError(f"{option}: {text!r} is not a finite number", fix=f"write e.g. {option} 0.9")
    if percent:
        value /= 100
    elif value > 1:
        raise InputError(
            f"{option} {text!r} is ambiguous",
            "a bare number is a fraction in (0, 1]; percents need a % sign",
            f"write {option} {value / 100:g} or {option} {value:g}%",
        )
    top = "1)" if upper_open else "1]"
    if not (0 < value < 1 if upper_open else 0 < value <= 1):
        raise InputError(f"{option} {text!r} is outside (0, {top}", fix=f"write e.g. {option} 0.9 or {option} 90%")
    return value


def _target(text: str) -> float:
    return parse_share(text, "--target")


def _check_plan_path(plan_file: Path) -> dict[str, Any]:
    """The plan at ``plan_file``; a Hetis spec is refused with a message about the simulator."""
    if plan_file.is_file():
        try:
            raw = yaml.safe_load(plan_file.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            raw = None
        if isinstance(raw, dict) and raw.get("kind") == "hetis-deployment":
            raise InputError(
                f"{plan_file} is a Hetis deployment spec, which the simulator cannot replay",
                "the simulator rebuilds prefill/decode combos and aggregated instances, not head-wise splits",
                "simulate a plan from 'hetplan plan --strategy cauchy|homogeneous|melange --out plan.json'",
            )
    return load_plan(plan_file)


def _lower(name: str) -> str:
    return name.strip().lower()


def _request(
    plan_file: Path,
    trace: list[Path] | None,
    class_column: str | None,
    slo: list[str] | None,
    policy: str,
    rate_scale: float,
    router: str,
    seed: int,
    chunked: bool,
    kappa: float | None,
    q2: float | None,
    window: str,
    max_requests: int | None,
    drain: str = "3600s",
) -> SimRequest:
    plan = _check_plan_path(plan_file)
    if not trace:
        raise InputError("no trace given", fix="pass --trace FILE (repeat it to mix traces)")
    stream: RequestStream = read_stream([str(t) for t in trace], class_column)
    if max_requests is not None:
        if max_requests < 1:
            raise InputError(f"--max-requests must be >= 1, got {max_requests}", fix="pass e.g. --max-requests 1000")
        stream = stream.head(max_requests)
    base = plan_cascade(plan)
    for label, value in (("--kappa", kappa), ("--q2", q2)):
        if value is not None and not math.isfinite(value):
            raise InputError(f"{label} must be a finite number, got {value}", fix=f"pass e.g. {label} 1.2")
    cascade = CascadeSettings(kappa=base.kappa if kappa is None else kappa, q2=base.q2 if q2 is None else q2)
    try:
        window_s = parse_duration_s(window, "window", 1e-3, 1e6)
    except InputError as exc:
        raise InputError(exc.what, exc.why, "give a window between 1ms and 1e6 s, e.g. --window 60s") from None
    drain_s = parse_duration_s(drain, "drain", 1.0, 1e9)
    return SimRequest(
        plan, stream, _class_slos(slo), _lower(policy), rate_scale, cascade,
        SimConfig(_lower(router), seed, chunked, drain_s), window_s,
    )  # fmt: skip


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _share(x: float) -> str:
    """A target share as a percent, with a decimal only when needed (0.999 → 99.9%, 0.9 → 90%)."""
    text = f"{x * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _n(k: int, word: str = "request") -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def _warn(doc: dict[str, Any]) -> None:
    for text in doc.get("warnings") or []:
        err_console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)


def _dur(x: float | None) -> str:
    return "-" if x is None else format_duration(x)


def render_metrics(m: dict[str, Any], console: Console) -> None:
    """Rich tables for a simulation's metrics document."""
    rate = "-" if m["arrival_rate_per_s"] is None else f"{m['arrival_rate_per_s']:.3g}"
    console.print(
        f"[bold]simulation[/]: policy {m['policy']}, router {m['router']}, rate scale {m['rate_scale']:g}, "
        f"{m['instances']} instances; {escape(m['trace'])}: {_n(m['requests'])} over "
        f"{m['duration_s']:.1f} s ({rate} req/s), {m['finished']} finished, {m['unfinished']} unfinished at the "
        f"cut-off, {m['dropped']} dropped (KV), {m['dropped_over_context']} dropped (over the context window)",
        highlight=False,
    )
    att = m["attainment"]
    jain = "-" if m["jain_index"] is None else f"{m['jain_index']:.3f}"
    console.print(
        f"goodput {m['goodput_req_per_s']:.3g} req/s over the {m['serving_span_s']:.1f} s serving span; SLO "
        f"attainment joint {_pct(att['joint'])} (TTFT "
        f"{_pct(att['ttft'])}, TPOT {_pct(att['tpot'])}); Jain index over classes {jain}",
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="latency (numpy linear percentiles)")
    for col in ("metric", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for label, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s"), ("E2E", "e2e_s")):
        s = m[key]
        table.add_row(label, _dur(s["mean"]), _dur(s["p50"]), _dur(s["p90"]), _dur(s["p99"]))
    console.print(table)
    console.print(f"goodput = {GOODPUT_DEFINITION}", highlight=False)
    classes = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="per class")
    for col in ("class", "requests", "TTFT SLO", "TPOT SLO", "attainment", "goodput", "p90 TTFT", "p90 TPOT"):
        classes.add_column(col, justify="left" if col == "class" else "right")
    for c in m["classes"]:
        classes.add_row(
            escape(c["class"]),
            str(c["requests"]),
            _dur(c["ttft_slo_s"]),
            _dur(c["tpot_slo_s"]),
            _pct(c["attainment"]),
            f"{c['goodput_req_per_s']:.3g}",
            _dur(c["ttft_s"]["p90"]),
            _dur(c["tpot_s"]["p90"]),
        )
    console.print(classes)
    util = ", ".join(f"{r} {u * 100:.0f}%" for r, u in m["utilization"]["by_role"].items())
    k = m["counters"]
    console.print(
        f"utilization {util}; {int(k['iterations']):,} iterations, {int(k['preemptions'])} preemptions "
        f"({int(k['restores'])} KV restores, {int(k['recomputes'])} recomputes)",
        highlight=False,
    )


def _write(out: Path | None, force: bool, doc: dict[str, Any]) -> None:
    if out is not None:
        write_atomic(out, dump_for_path(out, doc), force=force)


@app.command("simulate")
def simulate_cmd(
    plan_file: Path = typer.Argument(..., help="Plan file written by 'hetplan plan --out'.", show_default=False),
    trace: list[Path] = typer.Option(None, "--trace", "-t", help="Trace (Azure CSV or Mooncake JSONL); repeat to mix."),
    class_column: str = typer.Option(None, "--class-column", help="CSV column naming each request's class."),
    slo: list[str] = typer.Option(None, "--slo", help="Per-class SLO, CLASS=TTFT[,TPOT], e.g. code=1s,50ms."),
    policy: str = typer.Option("fcfs", "--policy", "-p", help="fcfs, sjf, edf or cascade."),
    rate_scale: float = typer.Option(
        None, "--rate-scale", help="Multiply the arrival rate (compress time); default 1. Not with --find-capacity."
    ),
    router: str = typer.Option("round-robin", "--router", help="round-robin (goodput-weighted), jsq or random."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random router."),
    chunked: bool = typer.Option(True, "--chunked-prefill/--no-chunked-prefill", help="Chunked prefill."),
    kappa: float = typer.Option(None, "--kappa", help="CASCADE safety coefficient (default: the plan's, else 1)."),
    q2: float = typer.Option(None, "--q2", help="CASCADE Tier-2 share (default: the plan's, else 0.1)."),
    window: str = typer.Option("60s", "--window", help="Time-series window, e.g. 60s (at most 10,000 windows)."),
    drain: str = typer.Option(
        "3600s", "--drain", help="Simulated time allowed after the last arrival; requests unfinished then are misses."
    ),
    max_requests: int = typer.Option(None, "--max-requests", help="Replay only the first N requests."),
    find_cap: bool = typer.Option(
        False, "--find-capacity", help="Binary-search the highest rate scale meeting --target."
    ),
    target: str = typer.Option(
        "0.9", "--target", help="With --find-capacity: joint SLO attainment target, a fraction (0.9) or percent (90%)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the metrics as JSON on stdout."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the metrics (JSON, or YAML for *.yaml)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
) -> None:
    """Replay a trace through a plan's deployment and report TTFT/TPOT/ITL/E2E, SLO attainment and goodput.

    Example: hetplan simulate plan.json --trace trace.csv --policy cascade --rate-scale 2
    """

    def work() -> dict[str, Any]:
        if out is not None:
            check_output(out, force)
        if find_cap and rate_scale is not None:
            raise InputError(
                "--find-capacity searches the rate scale itself",
                "it starts at the trace's own rate (scale 1) and doubles/halves from there",
                "drop --rate-scale, or drop --find-capacity to simulate at that scale",
            )
        goal = _target(target) if find_cap else None
        req = _request(
            plan_file, trace, class_column, slo, policy, 1.0 if rate_scale is None else rate_scale, router, seed,
            chunked, kappa, q2, window, max_requests, drain,
        )  # fmt: skip
        if goal is not None:
            with err_console.status("finding capacity", spinner="dots") as status:
                doc = find_capacity(req, goal, progress=lambda text: status.update(text))
        else:
            doc = simulate(req)
        _write(out, force, doc)
        return doc

    doc = run_guarded(work)
    _warn(doc["metrics"] if doc["kind"] == "capacity" and doc["metrics"] else doc)
    if json_out:
        typer.echo(to_json(doc), nl=False)
        return
    console = Console()
    if doc["kind"] == "capacity":
        if doc["rate_scale"] is None:
            console.print(f"no rate scale down to 1/64 reaches {_share(doc['target'])} joint SLO attainment")
            return
        more = " (capped: 64x still meets it)" if doc["capped"] else ""
        console.print(
            f"goodput capacity at {_share(doc['target'])} joint SLO attainment ({doc['policy']}): "
            f"{doc['goodput_capacity_req_per_s']:.3g} req/s arriving (rate scale {doc['rate_scale']:.3g}{more}; that "
            f"run's goodput over its serving span {doc['goodput_req_per_s']:.3g} req/s); {len(doc['runs'])} runs",
            highlight=False,
        )
        render_metrics(doc["metrics"], console)
    else:
        render_metrics(doc, console)


@app.command("calibrate")
def calibrate_cmd(
    plan_file: Path = typer.Argument(..., help="Plan file written by 'hetplan plan --out'.", show_default=False),
    trace: list[Path] = typer.Option(None, "--trace", "-t", help="Trace (Azure CSV or Mooncake JSONL); repeat to mix."),
    class_column: str = typer.Option(None, "--class-column", help="CSV column naming each request's class."),
    slo: list[str] = typer.Option(None, "--slo", help="Per-class SLO, CLASS=TTFT[,TPOT], e.g. code=1s,50ms."),
    quantile: str = typer.Option(
        "0.95", "--quantile", "-q", help="Fit kappa so that P(TTFT <= T_hat) >= q: a fraction (0.95) or percent (95%)."
    ),
    rate_scale: float = typer.Option(1.0, "--rate-scale", help="Calibrate at this multiple of the trace's rate."),
    out: Path = typer.Option(..., "--out", "-o", help="Calibrated plan file to write (the plan plus 'cascade')."),
    router_out: Path = typer.Option(None, "--router-config", help="Also write the router config (JSON or YAML)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
    json_out: bool = typer.Option(False, "--json", help="Print the cascade block as JSON on stdout."),
) -> None:
    """Fit CASCADE's safety coefficient kappa and choose the Tier-2 share q2 for a plan on a trace.

    Example: hetplan calibrate plan.json --trace trace.csv --out plan-cascade.json --router-config router.yaml
    """

    def work() -> dict[str, Any]:
        if router_out is not None and router_out.resolve() == out.resolve():
            raise InputError(
                f"--out and --router-config are the same file ({out})",
                "the router config would replace the calibrated plan",
                "give --router-config a different path, e.g. router.yaml",
            )
        check_output(out, force)
        if router_out is not None:
            try:
                check_output(router_out, force)
            except InputError as exc:
                raise type(exc)(
                    f"--router-config {router_out} already exists", exc.why,
                    "pass --force, or choose another --router-config path",
                ) from None  # fmt: skip
        q = parse_share(quantile, "--quantile", upper_open=True)
        req = _request(plan_file, trace, class_column, slo, "cascade", rate_scale, "round-robin", 0, True,
                       None, None, "60s", None)  # fmt: skip
        with err_console.status("calibrating", spinner="dots") as status:
            block = calibrate(req, q, progress=lambda text: status.update(text))
        plan = dict(req.plan)
        plan["cascade"] = block
        write_atomic(out, dump_for_path(out, plan), force=force)
        if router_out is not None:
            write_atomic(router_out, dump_for_path(router_out, router_config(plan, block)), force=force)
        return block

    block = run_guarded(work)
    _warn(block)
    if json_out:
        typer.echo(to_json(block), nl=False)
        return
    console = Console()
    console.print(
        f"kappa {block['kappa']:.4g} (P(TTFT <= kappa x T_hat) = {block['coverage']:.1%} >= {block['quantile']:g}), "
        f"q2 {block['q2']:g}",
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="q2 sweep (CASCADE, fitted kappa)")
    for col in ("q2", "goodput req/s", "attainment", "Jain"):
        table.add_column(col, justify="right")
    for r in block["q2_sweep"]:
        jain = "-" if r["jain_index"] is None else f"{r['jain_index']:.3f}"
        table.add_row(f"{r['q2']:g}", f"{r['goodput_req_per_s']:.3g}", _pct(r["attainment"]), jain)
    console.print(table)
    err_console.print(f"wrote {escape(str(out))}" + (f" and {escape(str(router_out))}" if router_out else ""))
