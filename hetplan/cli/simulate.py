"""``hetplan simulate`` and ``hetplan calibrate``: replay traces through a plan; fit CASCADE's coefficients."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from hetplan import api, units
from hetplan.cli.app import catalog_from_env, err_console, run_guarded, worker_environment
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    ClassColumnOpt,
    ExecutorOpt,
    ForceFlag,
    PerfCalibrationOpt,
    PlanFileArg,
    RayAddressOpt,
    SloOpt,
    TimeoutOpt,
    TraceOpt,
    WorkersOpt,
    engine_option,
    force_option,
    json_option,
    out_option,
    rate_scale_option,
)
from hetplan.cli.render.format import print_warnings
from hetplan.cli.render.progress import progress_bar
from hetplan.cli.render.simulate import (
    capacity_progress,
    render_calibration,
    render_capacity,
    render_closed_loop,
    render_metrics,
)
from hetplan.errors import InputError
from hetplan.io import check_output, dump_for_path, to_json, write_atomic, write_files_atomic
from hetplan.units import parse_duration_s

if TYPE_CHECKING:
    from hetplan.commands.simulate import SimOptions


def parse_share(text: str, option: str, upper_open: bool = False) -> float:
    """A share for ``--target`` and ``--quantile``: :func:`hetplan.units.parse_share`'s one rule (``90%``,
    ``p90``, ``0.9``; a bare number is a fraction, so ``1.5`` is refused), in (0, 1], or (0, 1) with ``upper_open``.

    Raises:
        InputError: unreadable or out of range; the message names ``option``.
    """
    return units.parse_share(text, option, 0.0, 1.0, low_open=True, high_open=upper_open)


def _target(text: str) -> float:
    return parse_share(text, "--target")


def _window_flags(
    windows: int | None, warmup: str, executor: str, workers: int | None, ray_address: str | None, find_cap: bool
) -> tuple[int, float] | None:
    """``(windows, warm-up seconds)`` for ``--windows``, or None; refuses the window flags without it.

    Raises:
        InputError: ``--warmup``/``--executor``/``--workers``/``--ray-address`` without ``--windows``, or with
            ``--find-capacity``; an unreadable warm-up.
    """
    if windows is None:
        given = [flag for flag, value, default in (("--warmup", warmup, "60s"), ("--executor", executor, "local"),
                 ("--workers", workers, None), ("--ray-address", ray_address, None)) if value != default]  # fmt: skip
        if given:
            one = len(given) == 1
            raise InputError(f"{', '.join(given)} {'is' if one else 'are'} for --windows",
                             fix=f"add --windows N, or drop {'it' if one else 'them'}")  # fmt: skip
        return None
    if find_cap:
        raise InputError(
            "--windows does not apply to --find-capacity",
            "the capacity search runs many short simulations one after another",
            "drop --windows, or drop --find-capacity",
        )
    try:
        warm = parse_duration_s(warmup, "warmup", 0.0, 1e9)
    except InputError as exc:
        raise InputError(exc.what, exc.why, "give a warm-up with a unit, e.g. --warmup 60s") from None
    return windows, warm


def _warn(doc: dict[str, Any]) -> None:
    print_warnings(err_console, doc.get("warnings") or [])


def _write(out: Path | None, force: bool, doc: dict[str, Any]) -> None:
    if out is not None:
        write_atomic(out, dump_for_path(out, doc), force=force)


def simulate_cmd(
    plan_file: PlanFileArg,
    trace: TraceOpt = None,
    class_column: ClassColumnOpt = None,
    slo: SloOpt = None,
    policy: Annotated[
        str, typer.Option("--policy", "-p", help="fcfs, sjf, edf, cascade, or the oracle reference oracle-sjf-total.")
    ] = "fcfs",
    rate_scale: Annotated[
        float | None,
        rate_scale_option("Multiply the arrival rate (compress time); default 1. Not with --find-capacity."),
    ] = None,
    router: Annotated[
        str,
        typer.Option("--router", help="round-robin (goodput-weighted), jsq, random or prefix (cache locality + load)."),
    ] = "round-robin",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random router.")] = 0,
    chunked: Annotated[bool, typer.Option("--chunked-prefill/--no-chunked-prefill", help="Chunked prefill.")] = True,
    prefix_cache: Annotated[
        bool,
        typer.Option(
            "--prefix-cache/--no-prefix-cache",
            help="Reuse cached prompt prefixes per instance when the trace has hash_ids or reuse is declared.",
        ),
    ] = True,
    reuse_sessions: Annotated[
        float | None,
        typer.Option("--reuse-sessions", help="For a trace without hash_ids: share of requests continuing a session."),
    ] = None,
    reuse_system_prompt: Annotated[
        int | None,
        typer.Option("--reuse-system-prompt", help="For a trace without hash_ids: system-prompt tokens all share."),
    ] = None,
    sizing_trace: Annotated[
        list[Path] | None,
        typer.Option(
            "--sizing-trace",
            help="Trace the plan was sized on (repeat to mix): CASCADE's output predictor learns from it (default: "
            "the plan's sizing part of a --trace it was planned on, else the replayed trace itself).",
        ),
    ] = None,
    host_kv: Annotated[
        str | None,
        typer.Option(
            "--host-kv",
            help="Host KV tier per instance for preempted KV and evicted prefix blocks, e.g. dram=256GiB,ssd=2TiB "
            "(a key left out: DRAM 256 GiB, SSD unbounded).",
        ),
    ] = None,
    kappa: Annotated[
        float | None, typer.Option("--kappa", help="CASCADE safety coefficient (default: the plan's, else 1).")
    ] = None,
    q2: Annotated[
        float | None, typer.Option("--q2", help="CASCADE Tier-2 share (default: the plan's, else 0.1).")
    ] = None,
    window: Annotated[
        str, typer.Option("--window", help="Time-series window, e.g. 60s (at most 10,000 windows).")
    ] = "60s",
    drain: Annotated[
        str,
        typer.Option(
            "--drain", help="Simulated time allowed after the last arrival; requests unfinished then are misses."
        ),
    ] = "3600s",
    max_requests: Annotated[
        int | None, typer.Option("--max-requests", help="Replay only the first N requests.")
    ] = None,
    find_cap: Annotated[
        bool, typer.Option("--find-capacity", help="Binary-search the highest rate scale meeting --target.")
    ] = False,
    target: Annotated[
        str,
        typer.Option("--target", help="With --find-capacity: joint SLO attainment target: 90%, p90 or 0.9."),
    ] = "0.9",
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", help="Closed loop instead of a trace: this many clients (with --isl, --osl)."),
    ] = None,
    isl: Annotated[int | None, typer.Option("--isl", help="With --concurrency: prompt tokens per request.")] = None,
    osl: Annotated[int | None, typer.Option("--osl", help="With --concurrency: output tokens per request.")] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", help="With --concurrency: requests in all (default 10 x C, >= 100).")
    ] = None,
    json_out: Annotated[bool, json_option("Print the metrics as JSON on stdout.")] = False,
    out: Annotated[Path | None, out_option("Write the metrics (JSON, or YAML for *.yaml).")] = None,
    force: ForceFlag = False,
    windows: Annotated[
        int | None,
        typer.Option("--windows", help="Split the trace into N time windows simulated in parallel, then merged."),
    ] = None,
    warmup: Annotated[
        str, typer.Option("--warmup", help="With --windows: arrivals before each window replayed as warm-up.")
    ] = "60s",
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = None,
    ray_address: RayAddressOpt = None,
    engine: Annotated[
        str | None, engine_option("Replay with this engine's memory rule and curves (default: the plan's).")
    ] = None,
    perf_calibration: PerfCalibrationOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Replay a trace through a plan's deployment and report TTFT/TPOT/ITL/E2E, SLO attainment and goodput.

    Example: hetplan simulate plan.json --trace trace.csv --policy cascade --rate-scale 2
    Closed loop (as engines are benchmarked): hetplan simulate plan.json --concurrency 32 --isl 1000 --osl 200
    """
    from hetplan.commands.simulate import SimOptions

    options = SimOptions(
        tuple(str(t) for t in trace or ()), class_column, tuple(slo or ()), policy,
        1.0 if rate_scale is None else rate_scale, router, seed, chunked, kappa, q2, window, max_requests, drain,
        prefix_cache, reuse_sessions, reuse_system_prompt, engine,
        str(perf_calibration) if perf_calibration is not None else None, host_kv,
        tuple(str(t) for t in sizing_trace or ()),
    )  # fmt: skip
    if concurrency is not None or isl is not None or osl is not None or requests is not None:
        _closed_loop_cmd(plan_file, options, find_cap, rate_scale, concurrency, isl, osl, requests, json_out, out,
                         force, timeout)  # fmt: skip
        return

    def work() -> dict[str, Any]:
        if out is not None:
            check_output(out, force)
        windowed = _window_flags(windows, warmup, executor, workers, ray_address, find_cap)
        if find_cap and rate_scale is not None:
            raise InputError(
                "--find-capacity searches the rate scale itself",
                "it starts at the trace's own rate (scale 1) and doubles/halves from there",
                "drop --rate-scale, or drop --find-capacity to simulate at that scale",
            )
        goal = _target(target) if find_cap else None
        req = api.sim_request(plan_file, options, catalog_from_env())
        if goal is not None:
            with capacity_progress(err_console, enabled=not json_out) as progress:
                doc = api.find_capacity(req, goal, progress=progress)
        elif windowed is not None:
            with progress_bar(err_console, "simulating", enabled=not json_out) as bar:
                bar.text(f"{windowed[0]} windows")
                with worker_environment(executor, ray_address):
                    doc = api.simulate_windowed(req, *windowed, executor=executor, workers=workers,
                                                ray_address=ray_address)  # fmt: skip
        else:
            doc = api.simulate(req)
        _write(out, force, doc)
        return doc

    doc = run_guarded(lambda: run_with_timeout(timeout, work, "simulate"))
    _warn(doc["metrics"] if doc["kind"] == "capacity" and doc["metrics"] else doc)
    if json_out:
        typer.echo(to_json(doc), nl=False)
        return
    if doc["kind"] == "capacity":
        render_capacity(doc, Console())
    else:
        render_metrics(doc, Console())


def _closed_loop_cmd(
    plan_file: Path,
    options: "SimOptions",
    find_cap: bool,
    rate_scale: float | None,
    concurrency: int | None,
    isl: int | None,
    osl: int | None,
    requests: int | None,
    json_out: bool,
    out: Path | None,
    force: bool,
    timeout: str | None = None,
) -> None:
    """``hetplan simulate PLAN --concurrency C --isl I --osl O`` (:mod:`hetplan.sim.closed`)."""

    def work() -> dict[str, Any]:
        if concurrency is None or isl is None or osl is None:
            raise InputError(
                "a closed loop needs --concurrency, --isl and --osl",
                fix="pass e.g. --concurrency 32 --isl 1000 --osl 200",
            )
        if options.trace or find_cap or rate_scale is not None:
            raise InputError(
                "--concurrency runs a closed loop of synthetic requests",
                "--trace, --find-capacity and --rate-scale are for open-loop replays of a trace",
                "drop them, or drop --concurrency/--isl/--osl/--requests",
            )
        if out is not None:
            check_output(out, force)
        with err_console.status("simulating the closed loop", spinner="dots"):
            doc = api.simulate_closed_loop(plan_file, concurrency, isl, osl, requests, options, catalog_from_env())
        _write(out, force, doc)
        return doc

    doc = run_guarded(lambda: run_with_timeout(timeout, work, "simulate"))
    _warn(doc)
    if json_out:
        typer.echo(to_json(doc), nl=False)
        return
    render_closed_loop(doc, Console())


def calibrate_cmd(
    plan_file: PlanFileArg,
    *,  # keyword-only from here, so the required --out keeps its place in --help
    trace: TraceOpt = None,
    class_column: ClassColumnOpt = None,
    slo: SloOpt = None,
    quantile: Annotated[
        str,
        typer.Option(
            "--quantile",
            "-q",
            help="Fit kappa so that P(TTFT <= T_hat) >= q: 95%, p95 or 0.95.",
        ),
    ] = "0.95",
    rate_scale: Annotated[float, rate_scale_option("Calibrate at this multiple of the trace's rate.")] = 1.0,
    out: Annotated[Path, out_option("Calibrated plan file to write (the plan plus 'cascade').")],
    router_out: Annotated[
        Path | None, typer.Option("--router-config", help="Also write the router config (JSON or YAML).")
    ] = None,
    force: Annotated[bool, force_option("Overwrite existing outputs.")] = False,
    json_out: Annotated[bool, json_option("Print the cascade block as JSON on stdout.")] = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Fit CASCADE's safety coefficient kappa and choose the Tier-2 share q2 for a plan on a trace.

    Example: hetplan calibrate plan.json --trace trace.csv --out plan-cascade.json --router-config router.yaml
    """

    def work() -> dict[str, Any]:
        from hetplan.commands.simulate import SimOptions
        from hetplan.sim.calibrate import router_config

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
        options = SimOptions(tuple(str(t) for t in trace or ()), class_column, tuple(slo or ()), "cascade", rate_scale)
        req = api.sim_request(plan_file, options, catalog_from_env())
        with err_console.status("calibrating", spinner="dots") as status:
            plan, block = api.calibrate(req, q, progress=lambda text: status.update(text))
        files = {out: dump_for_path(out, api.to_doc(plan))}
        if router_out is not None:
            files[router_out] = dump_for_path(router_out, router_config(plan, block, req.catalog))
        write_files_atomic(files, force=force)  # both or neither
        return block

    block = run_guarded(lambda: run_with_timeout(timeout, work, "calibrate"))
    _warn(block)
    if json_out:
        typer.echo(to_json(block), nl=False)
        return
    render_calibration(block, Console())
    err_console.print(f"wrote {escape(str(out))}" + (f" and {escape(str(router_out))}" if router_out else ""))
