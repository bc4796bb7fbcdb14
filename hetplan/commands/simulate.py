"""``hetplan simulate`` and ``hetplan calibrate`` behind :mod:`hetplan.api` (which re-exports the public functions
here): the plan file read for the simulator (its engine or calibration replaced on request), the trace stream, the
per-class SLOs, the router and CASCADE settings as one :class:`~hetplan.sim.run.SimRequest`
(:func:`sim_request`), and the replays: :func:`simulate`, :func:`find_capacity`, :func:`simulate_windowed`,
:func:`simulate_closed_loop`, :func:`calibrate`. Heavy modules load inside the functions.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.commands.sim_flags import class_slos, parse_host_kv
from hetplan.errors import InputError
from hetplan.units import parse_duration_s

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.plan.types import Plan
    from hetplan.sim.predict import OutputPredictor
    from hetplan.sim.run import SimRequest
    from hetplan.workload.model import RequestStream


@dataclass(frozen=True)
class SimOptions:
    """How ``hetplan simulate`` replays a plan, as its flags say it (texts as the flags take them; each is checked
    when the request is built, and an error names the flag).

    Attributes:
        trace: trace files, mixed (``--trace``, repeated). class_column: the column naming request classes.
        slo: per-class SLOs, ``CLASS=TTFT[,TPOT]`` (``--slo``). policy / router / seed / chunked / prefix_cache:
            scheduling, routing and engine settings. rate_scale: arrival-rate multiplier.
        kappa / q2: CASCADE's settings (None: the plan's). window / drain: durations with a unit (``60s``).
        max_requests: replay only the first N. reuse_sessions / reuse_system_prompt: declared prefix reuse for a
            trace without hash_ids. engine / perf_calibration: replay with another engine's rules and curves, or a
            calibration file's corrections (None: the plan's). host_kv: the host KV tier's sizes per instance,
            ``dram=SIZE[,ssd=SIZE]`` (``--host-kv``, :func:`parse_host_kv`; None: no host tier).
        sizing_trace: the traces the plan was sized on (``--sizing-trace``): CASCADE's output predictor learns
            from them (:func:`sizing_predictor`; empty: the plan's own sizing part of a replayed trace it names).
    """

    trace: tuple[str, ...] = ()
    class_column: str | None = None
    slo: tuple[str, ...] = ()
    policy: str = "fcfs"
    rate_scale: float = 1.0
    router: str = "round-robin"
    seed: int = 0
    chunked: bool = True
    kappa: float | None = None
    q2: float | None = None
    window: str = "60s"
    max_requests: int | None = None
    drain: str = "3600s"
    prefix_cache: bool = True
    reuse_sessions: float | None = None
    reuse_system_prompt: int | None = None
    engine: str | None = None
    perf_calibration: str | None = None
    host_kv: str | None = None
    sizing_trace: tuple[str, ...] = ()


def sizing_predictor(
    plan: Plan, sizing_trace: Sequence[str], traces: Sequence[str]
) -> tuple[OutputPredictor | None, str | None]:
    """The output predictor a replay of ``plan`` gives CASCADE's decode budgets (:mod:`hetplan.sim.predict`), learnt
    from the sizing data as the plan's own verification does (:class:`hetplan.sim.verify.PlanCheck`), and what it
    was learnt from, in words:

    - ``sizing_trace`` (``--sizing-trace``, mixed as ``--trace`` mixes): every request of those files;
    - else, when the replay is one trace (``traces``) and it is the file the plan was sized on (its name and SHA-256
      prefix as the plan's ``scenario.workload.source`` records them): the plan's sizing part of it, its first
      ``scenario.workload.requests`` requests in arrival order (a plan with ``workload.holdout`` was sized on the
      first part of the trace's span, so the held-out rest stays out of sample); a replay that mixes in other
      traces is not the traffic the plan was sized on, and gets no sizing data from one of its files;
    - else ``(None, None)``: the run learns from the replayed trace itself (in-sample,
      :func:`hetplan.sim.run.default_predictor`).

    Raises:
        InputError: a sizing trace that cannot be read (as ``--trace``).
    """
    import hashlib

    from hetplan.sim.predict import OutputPredictor
    from hetplan.workload.readers import read_stream

    if sizing_trace:
        try:
            s = read_stream([str(t) for t in sizing_trace], None)
        except InputError as exc:  # read as --trace is; the message names this flag
            raise type(exc)(
                f"--sizing-trace: {exc.what}", exc.why, exc.fix.replace("--trace", "--sizing-trace")
            ) from None
        names = ", ".join(Path(t).name for t in sizing_trace)
        return OutputPredictor(s.prompt_tokens, s.output_tokens), f"--sizing-trace {names} ({s.n:,} requests)"
    summary = plan.workload
    if summary is None or not summary.requests or len(traces) != 1:
        return None, None
    for t in traces:
        path = Path(t)
        if not path.is_file():
            continue
        sha = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        if summary.source != f"{path.name} (sha256 {sha})":
            continue
        s = read_stream([str(path)], None)
        n = min(int(summary.requests), s.n)
        return (
            OutputPredictor(s.prompt_tokens[:n], s.output_tokens[:n]),
            f"the plan's sizing data: the first {n:,} requests of {path.name}",
        )
    return None, None


def load_sim_plan(
    plan_file: Path, engine: str | None = None, perf_calibration: str | None = None, catalog: Catalog | None = None
) -> Plan:
    """The plan at ``plan_file`` for the simulator, its engine replaced by ``engine`` and its calibration by the
    file ``perf_calibration`` when given; a Hetis spec is refused with a message about the simulator (``catalog``:
    what a version-1 plan's names are resolved in; None: the shipped catalogs).

    Raises:
        InputError: not a plan the simulator can replay, or a bad engine or calibration file.
    """
    from hetplan.catalog.files import read_yaml_mapping
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
    plan = load_plan(plan_file, catalog)
    if engine is not None:
        from hetplan.perf.engines import engine_rules

        plan = replace(plan, settings=replace(plan.settings, engine=engine_rules(engine).name))
    if perf_calibration is not None:
        from hetplan.perf.user_calibration import with_calibration

        plan = replace(plan, settings=with_calibration(plan.settings, perf_calibration))
    return plan


def build_request(plan_file: Path, options: SimOptions, catalog: Catalog | None = None) -> SimRequest:
    """The simulator's request: the plan (:func:`load_sim_plan`), the trace stream (the first ``max_requests``,
    with declared reuse), the class SLOs and the settings of ``options``; ``catalog``: whose fitted curves time the
    steps (None: the shipped catalogs).

    Raises:
        InputError: no trace, or a bad plan, trace, SLO, CASCADE setting, window or drain (naming the flag).
    """
    from hetplan.sim.engine import SimConfig
    from hetplan.sim.run import SimRequest, plan_cascade
    from hetplan.workload.readers import read_stream

    o = options
    plan = load_sim_plan(plan_file, o.engine, o.perf_calibration, catalog)
    if not o.trace:
        raise InputError("no trace given", fix="pass --trace FILE (repeat it to mix traces)")
    stream: RequestStream = read_stream([str(t) for t in o.trace], o.class_column)
    if o.max_requests is not None:
        if o.max_requests < 1:
            raise InputError(f"--max-requests must be >= 1, got {o.max_requests}", fix="pass e.g. --max-requests 1000")
        stream = stream.head(o.max_requests)
    stream = _declared_reuse(stream, o.reuse_sessions, o.reuse_system_prompt)
    base = plan_cascade(plan)
    for label, value in (("--kappa", o.kappa), ("--q2", o.q2)):
        if value is not None and not math.isfinite(value):
            raise InputError(f"{label} must be a finite number, got {value}", fix=f"pass e.g. {label} 1.2")
    cascade = replace(base, kappa=base.kappa if o.kappa is None else o.kappa, q2=base.q2 if o.q2 is None else o.q2)
    try:
        window_s = parse_duration_s(o.window, "window", 1e-3, 1e6)
    except InputError as exc:
        raise InputError(exc.what, exc.why, "give a window between 1ms and 1e6 s, e.g. --window 60s") from None
    drain_s = parse_duration_s(o.drain, "drain", 1.0, 1e9)
    return SimRequest(
        plan, stream, class_slos(o.slo), _lower(o.policy), o.rate_scale, cascade,
        SimConfig(_lower(o.router), o.seed, o.chunked, drain_s, prefix_cache=o.prefix_cache,
                  host_kv=None if o.host_kv is None else parse_host_kv(o.host_kv)), window_s,
        *sizing_predictor(plan, o.sizing_trace, o.trace),
        catalog=catalog,
    )  # fmt: skip


def closed_loop(
    plan_file: Path,
    concurrency: int,
    isl: int,
    osl: int,
    requests: int | None,
    options: SimOptions,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """``hetplan simulate PLAN --concurrency C --isl I --osl O`` (:func:`hetplan.sim.closed.closed_loop`) with the
    policy, router, seed, chunked prefill, engine and calibration of ``options`` (``catalog``: whose fitted curves
    time the steps; None: the shipped catalogs).

    Raises:
        InputError: a bad plan or setting.
    """
    from hetplan.sim.closed import closed_loop as _closed_loop
    from hetplan.sim.engine import SimConfig

    o = options
    plan = load_sim_plan(plan_file, o.engine, o.perf_calibration, catalog)
    host_kv = None if o.host_kv is None else parse_host_kv(o.host_kv)
    return _closed_loop(plan, concurrency, isl, osl, requests, _lower(o.policy),
                        SimConfig(_lower(o.router), o.seed, o.chunked, host_kv=host_kv), catalog)  # fmt: skip


def _lower(name: str) -> str:
    return name.strip().lower()


def _declared_reuse(stream: RequestStream, sessions: float | None, system_prompt: int | None) -> RequestStream:
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


def sim_request(plan_file: str | Path, options: SimOptions | None = None, catalog: Catalog | None = None) -> SimRequest:
    """What ``hetplan simulate`` and ``hetplan calibrate`` replay: the plan file (``--engine``/``--perf-calibration``
    applied), the trace stream and the settings of ``options`` (:class:`SimOptions`, the
    flags as given; None: its defaults, which have no trace) as a :class:`~hetplan.sim.run.SimRequest`; see
    :func:`build_request`. ``catalog`` as in :func:`hetplan.api.plan`.

    Raises:
        InputError: no trace, or a bad plan, trace, SLO, CASCADE setting, window or drain (naming the flag).
    """
    return build_request(Path(plan_file), options or SimOptions(), catalog)


def simulate(req: SimRequest, catalog: Catalog | None = None) -> dict[str, Any]:
    """Replay a request stream through a plan (``hetplan simulate``; :func:`sim_request` builds ``req`` from the
    command's inputs); see :func:`hetplan.sim.run.simulation`. ``catalog`` as in :func:`hetplan.api.plan` (None: the
    request's own, ``req.catalog``).

    Raises:
        InputError: bad settings, unknown policy or router, or a plan the simulator cannot rebuild.
    """
    from hetplan.sim.run import simulation

    return simulation(_with_catalog(req, catalog)).to_doc()


def simulate_closed_loop(
    plan_file: str | Path,
    concurrency: int,
    isl: int,
    osl: int,
    requests: int | None = None,
    options: SimOptions | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """``hetplan simulate PLAN --concurrency C --isl I --osl O``: ``concurrency`` clients each sending requests of
    ``isl`` prompt and ``osl`` output tokens (``requests`` in all; default 10 x C, at least 100), with the policy,
    router, engine and calibration of ``options``; see :func:`hetplan.sim.closed.closed_loop`.

    Raises:
        InputError: a bad plan or setting.
    """
    return closed_loop(Path(plan_file), concurrency, isl, osl, requests, options or SimOptions(), catalog)


def simulate_windowed(
    req: SimRequest,
    windows: int,
    warmup_s: float = 60.0,
    executor: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """``hetplan simulate --windows``: ``req`` as ``windows`` time windows (each with ``warmup_s`` seconds of
    arrivals before it replayed and discarded) run as parallel tasks on ``executor``, merged into one metrics
    document with a ``windowed`` block; see :mod:`hetplan.sim.windows` for the method and the tolerance.
    Worker processes inherit this process's environment: the CLI runs this inside
    :func:`hetplan.cli.app.worker_environment` (one BLAS/OpenMP thread per worker; a private Ray instance on the
    loopback interface only); a Python caller wraps its call the same way, or sets those variables itself.

    Raises:
        InputError: bad settings. HetplanError: Ray missing or unreachable.
    """
    from hetplan.executors import make_executor
    from hetplan.sim.windows import simulate_windowed as _simulate_windowed

    with make_executor(executor, workers, ray_address) as ex:
        return _simulate_windowed(req, windows, warmup_s, ex)


def _with_catalog(req: SimRequest, catalog: Catalog | None) -> SimRequest:
    """``req`` simulated with ``catalog``'s curves (None: its own)."""
    return req if catalog is None else replace(req, catalog=catalog)


def find_capacity(
    req: SimRequest, target: float, progress: Callable[[str], None] | None = None, catalog: Catalog | None = None
) -> dict[str, Any]:
    """The highest arrival-rate scale at which the plan still meets ``target`` joint SLO attainment
    (``hetplan simulate --find-capacity``); see :func:`hetplan.sim.run.find_capacity` (``catalog``: as
    :func:`simulate`)."""
    from hetplan.sim.run import find_capacity as _find_capacity

    return _find_capacity(_with_catalog(req, catalog), target, progress=progress)


def calibrate(
    req: SimRequest,
    quantile: float = 0.95,
    progress: Callable[[str], None] | None = None,
    catalog: Catalog | None = None,
) -> tuple[Plan, dict[str, Any]]:
    """Fit CASCADE's κ and q₂ on ``req``'s trace and plan (``hetplan calibrate``); returns the plan with its
    ``cascade`` block and the block itself (:func:`hetplan.sim.calibrate.calibrate`; ``catalog``: as
    :func:`simulate`).

    Raises:
        InputError: ``quantile`` outside (0, 1), or no request reached its first token.
    """
    from hetplan.plan.docblocks import cascade_of
    from hetplan.sim.calibrate import calibrate as _calibrate

    block = _calibrate(_with_catalog(req, catalog), quantile, progress)
    return replace(req.plan, cascade=cascade_of(block, "the calibrated plan")), block


__all__ = [
    "SimOptions",
    "parse_host_kv",
    "build_request",
    "calibrate",
    "class_slos",
    "closed_loop",
    "find_capacity",
    "load_sim_plan",
    "sim_request",
    "simulate",
    "simulate_closed_loop",
    "simulate_windowed",
]
