"""Python API: one function per command, the CLI's twin. Returns typed results or plain data; never prints.

A thin facade: the work is in :mod:`hetplan.planning` (scenario → request → solvers → :class:`~hetplan.plan.Plan`
→ verification), :mod:`hetplan.emit`, :mod:`hetplan.sim` and :mod:`hetplan.report`. Heavy modules (the MILP
solvers, pandas, the simulator) are imported inside the functions, so importing this module is cheap.

Source: hetplan's own reconstruction (aiconfigurator-style CLI/API pairing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError
from hetplan.resources import Resources

if TYPE_CHECKING:
    from hetplan.emit.settings import EmitSettings
    from hetplan.emit.writer import EmitResult
    from hetplan.perf.estimate import Estimate
    from hetplan.perf.settings import PerfSettings
    from hetplan.plan.types import Plan
    from hetplan.report.gate import GateResult
    from hetplan.scenario import Scenario
    from hetplan.sim.run import SimRequest
    from hetplan.solvers.milp import SolveSettings
    from hetplan.workload.model import Workload

#: Largest number of request lengths the capacity model samples from a workload.
MAX_SAMPLES = 4000


def estimate(
    model: str,
    gpu: str,
    tp: int = 1,
    pp: int = 1,
    batch: int = 1,
    prompt_tokens: int = 1024,
    context_tokens: int | None = None,
    output_tokens: int | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    settings: PerfSettings | None = None,
    profiles: Sequence[Path] = (),
    engine: str = "vllm",
) -> Estimate:
    """Latency, memory and throughput of one instance (``hetplan estimate``); ``profiles`` as in :func:`plan`;
    ``engine`` picks the memory rule and fitted curves (``settings``, when given, carries its own engine).

    Raises:
        InputError: unknown model/GPU, bad TP/PP or sizes. OutOfMemoryError: weights do not fit.
    """
    from hetplan.scenario import MAX_TP

    for field, value in (("batch", batch), ("prompt_tokens", prompt_tokens)):
        if value < 1:
            raise InputError(f"{field} must be >= 1, got {value}", fix=f"pass --{field.replace('_', '-')} 1 or more")
    if output_tokens is not None and output_tokens < 1:
        raise InputError(f"output_tokens must be >= 1, got {output_tokens}", fix="pass --output-tokens 1 or more")
    if tp > MAX_TP and tp > _scale_up(gpu, profiles):
        raise InputError(
            f"TP {tp} spans more than one {MAX_TP}-GPU node",
            "hetplan models tensor parallelism inside one node",
            f"use --tp {MAX_TP} or less (and --pp)",
        )
    from hetplan.catalog.loader import find_gpu, find_model, overlaid_gpus
    from hetplan.catalog.profile import load_profiles, profile_notes
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.estimate import estimate as _estimate
    from hetplan.perf.latency import InstanceModel, compute_dtype
    from hetplan.perf.measured import measured_notes
    from hetplan.perf.settings import PerfSettings
    from hetplan.planning.request import profile_records

    arch = ModelArch(find_model(model), weight_dtype, kv_dtype)
    loaded = load_profiles(profiles) if profiles else None
    spec = find_gpu(gpu, overlaid_gpus(loaded.specs if loaded else ()))
    inst = InstanceModel(arch, spec, tp, pp, settings or PerfSettings.for_engine(engine))
    ctx = prompt_tokens if context_tokens is None else context_tokens
    if ctx < 1:
        raise InputError(f"context_tokens must be >= 1, got {ctx}", fix="pass --context-tokens 1 or more")
    est = _estimate(inst, batch, prompt_tokens, ctx, output_tokens)
    # measured figures: say what each profile did, as plan does
    notes = profile_notes(loaded, [spec.name]) if loaded else []
    notes += measured_notes([spec], compute_dtype(arch.weight_dtype))
    notes += inst.curve_notes
    return replace(est, warnings=notes, profiles=profile_records(loaded))


def _scale_up(gpu: str, profiles: Sequence[Path]) -> int:
    """GPUs in ``gpu``'s NVLink scale-up domain (72 for GB200/GB300 NVL72), 8 when it cannot be looked up here."""
    from hetplan.catalog.loader import find_gpu

    if profiles:
        return 8
    try:
        return find_gpu(gpu).scale_up_gpus
    except InputError:
        return 8


def plan(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    progress: Callable[[str], None] | None = None,
    profiles: Sequence[Path] = (),
    prune_with: Path | None = None,
    prune_top_k: int | None = None,
    min_r2: float | None = None,
    resources: Resources | None = None,
    solve: SolveSettings | None = None,
    price_factors: Mapping[str, float] | None = None,
) -> Plan:
    """Plan ``scenario`` (``hetplan plan``); see :func:`hetplan.planning.pipeline.plan` (``price_factors``: each
    GPU's prices times its factor, a what-if of ``hetplan explore``). ``to_doc`` of the result
    is the ``--json`` output and the plan file. ``resources``: the processes planning may use (default: the usable
    cores; the CLI passes ``HETPLAN_PLAN_WORKERS``); ``solve``: how the MILPs run
    (:class:`hetplan.solvers.milp.SolveSettings`; None: its defaults).

    Raises:
        InputError: bad scenario fields, profile or fit files. InfeasibleError: no plan meets the target.
    """
    from hetplan.planning import pipeline

    kw: dict[str, Any] = {}
    if prune_top_k is not None:
        kw["prune_top_k"] = prune_top_k
    if min_r2 is not None:
        kw["min_r2"] = min_r2
    if solve is not None:
        kw["solve"] = solve
    if price_factors:
        kw["price_factors"] = price_factors
    return pipeline.plan(scenario, strategy, analysis, progress, profiles, prune_with, resources=resources, **kw)


def plan_verified(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    policy: str = "fcfs",
    resize: bool = False,
    progress: Callable[[str], None] | None = None,
    confidence: str | None = "p80",
    confidence_gates: bool = False,
    **plan_kwargs: Any,
) -> Plan:
    """Plan ``scenario`` and check it in the simulator (``hetplan plan``'s default; ``--no-resize``,
    ``--confidence``, ``--size-for-confidence``): in sample, out of sample and against the model's own error at
    ``confidence``; ``resize`` re-plans until the simulation holds the SLOs (on by default in the CLI, off here);
    see :func:`hetplan.planning.verify.plan_verified`. ``plan_kwargs`` go to :func:`hetplan.planning.pipeline.plan`
    (``resources``; ``solve``: :class:`hetplan.solvers.milp.SolveSettings`).

    Raises:
        InputError, InfeasibleError: as :func:`plan`; InfeasibleError also when no headroom holds the SLOs.
    """
    from hetplan.planning.verify import plan_verified as _plan_verified

    return _plan_verified(
        scenario, strategy, analysis, policy, resize, progress, confidence, confidence_gates, **plan_kwargs
    )


def verify(plan: Plan, scenario: Scenario, policy: str = "fcfs") -> Plan:
    """``plan`` with its ``verification`` block: the simulation of ``scenario``'s workload through it at the
    plan's goodput target (:func:`hetplan.sim.verify.verify_plan`), in sample and out of sample
    (:func:`hetplan.planning.verify.verification_workloads`: the scenario's ``workload.holdout`` as set, 0 when unset,
    as for a plan made with ``--no-verify``).

    Raises:
        InputError: unknown policy, or a plan the simulator cannot rebuild.
    """
    from hetplan.plan.doc import verification_block
    from hetplan.planning.verify import verification_workloads
    from hetplan.sim.verify import verify_plan

    _, workload, out_of_sample, split = verification_workloads(scenario)
    block = verify_plan(plan, workload, policy, out_of_sample=out_of_sample)
    block["out_of_sample"]["split"] = split
    if "cascade" in block:  # verified under CASCADE: its calibrated settings go into the plan
        plan = replace(plan, cascade=block["cascade"])
    return replace(plan, verification=verification_block(block))


def build_workload(scenario: Scenario) -> Workload:
    """The scenario's workload (trace file or synthetic); see :func:`hetplan.planning.request.build_workload`."""
    from hetplan.planning.request import build_workload as _build_workload

    return _build_workload(scenario)


def fit_ce(scenario: Scenario, profiles: Sequence[Path] = (), min_r2: float | None = None) -> dict[str, Any]:
    """Fit Cauchy's A1/A2 cost-efficiency model (``hetplan profile fit``); see
    :func:`hetplan.planning.pipeline.fit_ce`.

    Raises:
        InputError: bad scenario fields or files, or fewer than two feasible GPU pairs. InfeasibleError: no GPU
        fits the model or meets the SLOs.
    """
    from hetplan.planning import pipeline

    return pipeline.fit_ce(scenario, profiles, **({} if min_r2 is None else {"min_r2": min_r2}))


def emit(
    plan: Plan | dict[str, Any] | str | Path,
    out_dir: str | Path,
    targets: Iterable[str] = ("all",),
    settings: EmitSettings | None = None,
    validate: bool = False,
    force: bool = False,
) -> EmitResult:
    """Write deployable files for a plan (``hetplan emit``): launch scripts for the plan's engine (vLLM, SGLang or
    TensorRT-LLM), Kubernetes, llm-d and/or Dynamo manifests under ``out_dir/<target>/``, plus
    ``out_dir/manifest.json`` (file, target, SHA-256).

    ``plan`` is a :class:`Plan`, a plan document, or the path of a plan file. ``targets`` are ``vllm``,
    ``sglang`` or ``trtllm`` (the plan's engine only), ``kubernetes``, ``llmd``, ``dynamo`` or ``all``. With
    ``validate`` the files are checked offline before anything is written (see :mod:`hetplan.emit.validate`).
    Files are written atomically; existing ones are replaced only with ``force``. Same inputs -> byte-identical
    files.

    Raises:
        InputError: bad plan, settings or targets, or an output exists without ``force`` (exit 2).
        EmitRuleError: the plan breaks a deployment rule or the files fail validation; nothing is written (exit 1).
    """
    from hetplan.emit.writer import emit_plan

    return emit_plan(as_plan(plan), out_dir, targets, settings, validate, force)


def as_plan(plan: Plan | dict[str, Any] | str | Path, where: str = "plan") -> Plan:
    """A :class:`Plan` from a plan, a plan document (version 1 or 2) or a plan file's path.

    Raises:
        InputError: not a usable plan (see :func:`hetplan.plan.doc.from_doc`).
    """
    from hetplan.plan.doc import from_doc, load_plan
    from hetplan.plan.types import Plan

    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, dict):
        return from_doc(plan, where)
    return load_plan(plan)


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (YAML or JSON, version 1 or 2) into the typed :class:`~hetplan.plan.types.Plan`.

    Raises:
        InputError: the file is missing, unreadable, not a plan, or lacks a field that later stages need.
    """
    from hetplan.plan.doc import load_plan as _load_plan

    return _load_plan(path)


def to_doc(plan: Plan) -> dict[str, Any]:
    """The plan document (what ``--json`` prints and ``--out`` writes): :func:`hetplan.plan.doc.to_doc`."""
    from hetplan.plan.doc import to_doc as _to_doc

    return _to_doc(plan)


def simulate(req: SimRequest) -> dict[str, Any]:
    """Replay a request stream through a plan (``hetplan simulate``); see :func:`hetplan.sim.run.simulate`.

    Raises:
        InputError: bad settings, unknown policy or router, or a plan the simulator cannot rebuild.
    """
    from hetplan.sim.run import simulate as _simulate

    return _simulate(req)


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


def find_capacity(req: SimRequest, target: float, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The highest arrival-rate scale at which the plan still meets ``target`` joint SLO attainment
    (``hetplan simulate --find-capacity``); see :func:`hetplan.sim.run.find_capacity`."""
    from hetplan.sim.run import find_capacity as _find_capacity

    return _find_capacity(req, target, progress=progress)


def calibrate(
    req: SimRequest, quantile: float = 0.95, progress: Callable[[str], None] | None = None
) -> tuple[Plan, dict[str, Any]]:
    """Fit CASCADE's κ and q₂ on ``req``'s trace and plan (``hetplan calibrate``); returns the plan with its
    ``cascade`` block and the block itself (:func:`hetplan.sim.calibrate.calibrate`).

    Raises:
        InputError: ``quantile`` outside (0, 1), or no request reached its first token.
    """
    from hetplan.sim.calibrate import calibrate as _calibrate

    block = _calibrate(req, quantile, progress)
    return replace(req.plan, cascade=block), block


def sweep(
    grid: str | Path,
    out: str | Path | None = None,
    executor: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    ray_files: str = "ship",
    resume: bool = False,
    force: bool = False,
    progress: Callable[[int, int, dict[str, Any] | None], None] | None = None,
    solve: SolveSettings | None = None,
) -> dict[str, Any]:
    """Plan every case of the grid file ``grid`` (``hetplan sweep``) on ``executor`` (``local``: a pool of
    ``workers`` processes; ``ray``: Ray tasks at ``ray_address``) and write the table, plan files and report under
    ``out``; returns the summary document (``--json``). See :mod:`hetplan.sweep.run`. ``solve``: how the cases'
    MILPs run (:class:`hetplan.solvers.milp.SolveSettings`).
    Worker processes inherit this process's environment: the CLI runs this inside
    :func:`hetplan.cli.app.worker_environment` (one BLAS/OpenMP thread per worker; a private Ray instance on the
    loopback interface only); a Python caller wraps its call the same way, or sets those variables itself.

    Raises:
        InputError: a bad grid (naming the axis) or outputs that exist without ``force``/``resume`` (exit 2).
        HetplanError: Ray missing or unreachable (exit 1). SweepInterrupted: Ctrl-C, after writing (exit 130).
    """
    from hetplan.sweep.run import SweepSettings, run_sweep

    settings = SweepSettings(None if out is None else Path(out), executor, workers, ray_address, ray_files, resume,
                             force, solve)  # fmt: skip
    return run_sweep(grid, settings, progress)


def explore(
    scenario: Scenario,
    vary: Sequence[str],
    strategy: str = "all",
    verify: bool = True,
    policy: str = "fcfs",
    progress: Callable[[int, int, str], None] | None = None,
    solve: SolveSettings | None = None,
) -> dict[str, Any]:
    """What-ifs of ``scenario`` (``hetplan explore``): ``vary`` holds one or two axes as ``--vary`` writes them
    (``goodput=1x,1.5x``, ``ttft=1s,5s``, ``tpot=...``, ``price:L40S=-20%``, ``owned:H800=+16``); each point is
    planned as ``hetplan plan`` plans that value and, with ``verify``, simulated under ``policy`` without re-sizing.
    Returns the explore document (``--json``); see :mod:`hetplan.explore`. ``progress(done, total, point)``.

    Raises:
        InputError: a bad axis or value (naming it) or scenario, before any point is planned.
    """
    from hetplan.explore import explore as _explore
    from hetplan.explore import parse_axes

    return _explore(scenario, parse_axes(list(vary)), strategy, verify, policy, progress, solve)


def gate(
    current: dict[str, Plan],
    baseline: dict[str, dict[str, Any]],
    max_cost_increase: float,
    min_tokens_per_usd_ratio: float | None = None,
    max_cost_increase_usd_per_hour: float = 0.0,
) -> list[GateResult]:
    """Compare each scenario's fresh plan with its stored baseline document (``hetplan gate``): one result per
    scenario, failing when the cost rose more than the larger of ``max_cost_increase`` (a fraction) and
    ``max_cost_increase_usd_per_hour`` (the only allowance from a $0.00/h baseline), tokens/USD fell below
    ``min_tokens_per_usd_ratio`` x the baseline's, or a scenario is missing on either side; see
    :func:`hetplan.report.gate.compare`."""
    from hetplan.report.gate import compare, failed

    out = []
    for name in sorted(set(current) | set(baseline)):
        if name not in baseline:
            out.append(failed(name, "not in the baseline; add it on purpose with --update-baseline"))
        elif name not in current:
            out.append(failed(name, "in the baseline but not re-planned"))
        else:
            out.append(
                compare(
                    current[name],
                    baseline[name],
                    max_cost_increase,
                    min_tokens_per_usd_ratio,
                    name,
                    max_cost_increase_usd_per_hour,
                )  # fmt: skip
            )
    return out


def hetis(scenario: Scenario, pool: Path) -> dict[str, Any]:
    """Plan a fixed GPU pool with Hetis (``hetplan plan --strategy hetis --pool``): primaries, workers and the
    head-wise attention split; see :func:`hetplan.planning.hetis.hetis_plan`.

    Raises:
        InputError: bad pool or scenario. InfeasibleError: the pool cannot serve the model.
    """
    from hetplan.planning.hetis import hetis_plan

    return hetis_plan(scenario, pool)


def autoscale(
    scenario: Scenario,
    spec: dict[str, Any],
    curve_path: Path | None = None,
    diurnal_text: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    solve: SolveSettings | None = None,
) -> dict[str, Any]:
    """Plan the combo schedule of ``scenario`` over a load curve (``hetplan autoscale``); see
    :func:`hetplan.planning.autoscale.autoscale` (``progress(done, total)`` as its demand levels are solved;
    ``solve``: how the MILPs run, :class:`hetplan.solvers.milp.SolveSettings`).

    Raises:
        InputError: bad settings or curve. InfeasibleError: the peak cannot be served.
    """
    from hetplan.planning.autoscale import autoscale as _autoscale

    return _autoscale(scenario, spec, curve_path, diurnal_text, progress, solve)


__all__ = [
    "as_plan",
    "autoscale",
    "build_workload",
    "calibrate",
    "emit",
    "estimate",
    "find_capacity",
    "fit_ce",
    "gate",
    "hetis",
    "load_plan",
    "plan",
    "plan_verified",
    "simulate",
    "simulate_windowed",
    "sweep",
    "to_doc",
    "verify",
]
