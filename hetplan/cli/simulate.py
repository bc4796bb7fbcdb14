"""``hetplan simulate`` and ``hetplan calibrate``: replay traces through a plan; fit CASCADE's coefficients."""

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from hetplan import api, units
from hetplan.cli.app import err_console, run_guarded, worker_environment
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
    from hetplan.plan.types import Plan
    from hetplan.sim.run import SimRequest
    from hetplan.workload.model import ClassSlo, RequestStream


def _slo_value(text: str, cls: str, which: str) -> float:
    try:
        return parse_duration_s(text, "slo")
    except InputError as exc:
        raise InputError(
            f"--slo {cls}: {which} {exc.what.removeprefix('slo: ')}",
            exc.why,
            f"write e.g. --slo {cls}=1s,50ms",
        ) from None


def _class_slos(items: list[str] | None) -> dict[str, "ClassSlo"]:
    from hetplan.workload.model import ClassSlo

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
    """A share for ``--target`` and ``--quantile``: :func:`hetplan.units.parse_share`'s one rule (``90%``,
    ``p90``, ``0.9``; a bare number is a fraction, so ``1.5`` is refused), in (0, 1], or (0, 1) with ``upper_open``.

    Raises:
        InputError: unreadable or out of range; the message names ``option``.
    """
    return units.parse_share(text, option, 0.0, 1.0, low_open=True, high_open=upper_open)


def _target(text: str) -> float:
    return parse_share(text, "--target")


_ENGINE_OVERRIDE: dict[str, str | None] = {"engine": None, "perf_calibration": None}
"""``simulate --engine``: replay the plan's deployment with another engine's memory rule and fitted curves;
``--perf-calibration``: with a calibration file's corrections in place of the plan's."""


def _check_plan_path(plan_file: Path) -> "Plan":
    """The plan at ``plan_file`` (its engine replaced by ``--engine``); a Hetis spec is refused with a message
    about the simulator."""
    from hetplan.catalog.loader import read_yaml_mapping
    from hetplan.plan.doc import load_plan

    if plan_file.is_file():
        try:
            raw = read_yaml_mapping(plan_file, "plan file")
        except InputError:
            raw = None  # load_plan below says what is wrong
        if isinstance(raw, dict) and raw.get("kind") == "hetis-deployment":
            raise InputError(
                f"{plan_file} is a Hetis deployment spec, which the simulator cannot replay",
                "the simulator rebuilds prefill/decode combos and aggregated instances, not head-wise splits",
                "simulate a plan from 'hetplan plan --strategy cauchy|homogeneous|melange --out plan.json'",
            )
    plan = load_plan(plan_file)
    engine = _ENGINE_OVERRIDE["engine"]
    if engine is not None:
        from dataclasses import replace

        from hetplan.perf.engines import engine_rules

        plan = replace(plan, settings=replace(plan.settings, engine=engine_rules(engine).name))
    calibration = _ENGINE_OVERRIDE["perf_calibration"]
    if calibration is not None:
        from dataclasses import replace

        from hetplan.perf.user_calibration import with_calibration

        plan = replace(plan, settings=with_calibration(plan.settings, calibration))
    return plan


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
    prefix_cache: bool = True,
    reuse_sessions: float | None = None,
    reuse_system_prompt: int | None = None,
) -> "SimRequest":
    from hetplan.sim.engine import SimConfig
    from hetplan.sim.run import SimRequest, plan_cascade
    from hetplan.workload.model import RequestStream
    from hetplan.workload.readers import read_stream

    plan = _check_plan_path(plan_file)
    if not trace:
        raise InputError("no trace given", fix="pass --trace FILE (repeat it to mix traces)")
    stream: RequestStream = read_stream([str(t) for t in trace], class_column)
    if max_requests is not None:
        if max_requests < 1:
            raise InputError(f"--max-requests must be >= 1, got {max_requests}", fix="pass e.g. --max-requests 1000")
        stream = stream.head(max_requests)
    stream = _declared_reuse(stream, reuse_sessions, reuse_system_prompt)
    base = plan_cascade(plan)
    for label, value in (("--kappa", kappa), ("--q2", q2)):
        if value is not None and not math.isfinite(value):
            raise InputError(f"{label} must be a finite number, got {value}", fix=f"pass e.g. {label} 1.2")
    cascade = replace(base, kappa=base.kappa if kappa is None else kappa, q2=base.q2 if q2 is None else q2)
    try:
        window_s = parse_duration_s(window, "window", 1e-3, 1e6)
    except InputError as exc:
        raise InputError(exc.what, exc.why, "give a window between 1ms and 1e6 s, e.g. --window 60s") from None
    drain_s = parse_duration_s(drain, "drain", 1.0, 1e9)
    return SimRequest(
        plan, stream, _class_slos(slo), _lower(policy), rate_scale, cascade,
        SimConfig(_lower(router), seed, chunked, drain_s, prefix_cache=prefix_cache), window_s,
    )  # fmt: skip


def _declared_reuse(stream: "RequestStream", sessions: float | None, system_prompt: int | None) -> "RequestStream":
    """``stream`` with block ids from the declared reuse model (:func:`hetplan.workload.prefix.declared_reuse`)
    when ``--reuse-sessions`` or ``--reuse-system-prompt`` is given.

    Raises:
        InputError: a declared reuse for a trace with hash_ids, or a value out of range."""
    if sessions is None and system_prompt is None:
        return stream
    from hetplan.workload.prefix import declared_reuse

    if stream.prefix_blocks is not None:
        raise InputError(
            "--reuse-sessions/--reuse-system-prompt declare reuse for a trace without hash_ids",
            "this trace has hash_ids: its own prefix blocks decide the hits",
            "drop the --reuse-* options",
        )
    if sessions is not None and not (math.isfinite(sessions) and 0 <= sessions <= 1):
        raise InputError(f"--reuse-sessions must be a share in [0, 1], got {sessions}", fix="pass e.g. 0.5")
    if system_prompt is not None and not 0 <= system_prompt <= 10_000_000:
        raise InputError(f"--reuse-system-prompt must be 0..10,000,000 tokens, got {system_prompt}", fix="e.g. 1024")
    return stream.with_prefix_blocks(declared_reuse(stream.prompt_tokens, sessions or 0.0, system_prompt or 0))


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
    _ENGINE_OVERRIDE["engine"] = engine
    _ENGINE_OVERRIDE["perf_calibration"] = str(perf_calibration) if perf_calibration is not None else None
    if concurrency is not None or isl is not None or osl is not None or requests is not None:
        _closed_loop_cmd(plan_file, trace, find_cap, rate_scale, concurrency, isl, osl, requests, policy, router,
                         seed, chunked, json_out, out, force, timeout)  # fmt: skip
        return

    def work() -> dict[str, Any]:
        from hetplan.sim.run import find_capacity, simulate

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
        req = _request(
            plan_file, trace, class_column, slo, policy, 1.0 if rate_scale is None else rate_scale, router, seed,
            chunked, kappa, q2, window, max_requests, drain, prefix_cache, reuse_sessions, reuse_system_prompt,
        )  # fmt: skip
        if goal is not None:
            with capacity_progress(err_console, enabled=not json_out) as progress:
                doc = find_capacity(req, goal, progress=progress)
        elif windowed is not None:
            with progress_bar(err_console, "simulating", enabled=not json_out) as bar:
                bar.text(f"{windowed[0]} windows")
                with worker_environment(executor, ray_address):
                    doc = api.simulate_windowed(req, *windowed, executor=executor, workers=workers,
                                                ray_address=ray_address)  # fmt: skip
        else:
            doc = simulate(req)
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
    trace: list[Path] | None,
    find_cap: bool,
    rate_scale: float | None,
    concurrency: int | None,
    isl: int | None,
    osl: int | None,
    requests: int | None,
    policy: str,
    router: str,
    seed: int,
    chunked: bool,
    json_out: bool,
    out: Path | None,
    force: bool,
    timeout: str | None = None,
) -> None:
    """``hetplan simulate PLAN --concurrency C --isl I --osl O`` (:mod:`hetplan.sim.closed`)."""

    def work() -> dict[str, Any]:
        from hetplan.sim.closed import closed_loop
        from hetplan.sim.engine import SimConfig

        if concurrency is None or isl is None or osl is None:
            raise InputError(
                "a closed loop needs --concurrency, --isl and --osl",
                fix="pass e.g. --concurrency 32 --isl 1000 --osl 200",
            )
        if trace or find_cap or rate_scale is not None:
            raise InputError(
                "--concurrency runs a closed loop of synthetic requests",
                "--trace, --find-capacity and --rate-scale are for open-loop replays of a trace",
                "drop them, or drop --concurrency/--isl/--osl/--requests",
            )
        if out is not None:
            check_output(out, force)
        plan = _check_plan_path(plan_file)
        with err_console.status("simulating the closed loop", spinner="dots"):
            doc = closed_loop(plan, concurrency, isl, osl, requests, _lower(policy),
                              SimConfig(_lower(router), seed, chunked))  # fmt: skip
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
    _ENGINE_OVERRIDE.update(engine=None, perf_calibration=None)  # a simulate run earlier in this process set them

    def work() -> dict[str, Any]:
        from hetplan.sim.calibrate import calibrate, router_config

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
        plan = replace(req.plan, cascade=block)
        files = {out: dump_for_path(out, api.to_doc(plan))}
        if router_out is not None:
            files[router_out] = dump_for_path(router_out, router_config(plan, block))
        write_files_atomic(files, force=force)  # both or neither
        return block

    block = run_guarded(lambda: run_with_timeout(timeout, work, "calibrate"))
    _warn(block)
    if json_out:
        typer.echo(to_json(block), nl=False)
        return
    render_calibration(block, Console())
    err_console.print(f"wrote {escape(str(out))}" + (f" and {escape(str(router_out))}" if router_out else ""))
