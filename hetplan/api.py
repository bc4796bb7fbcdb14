"""Python API: one function per command, the CLI's twin. Returns typed results or plain data; never prints.

A thin facade: the work is in :mod:`hetplan.planning` (scenario → request → solvers → :class:`~hetplan.plan.Plan`
→ verification), :mod:`hetplan.emit`, :mod:`hetplan.sim` and :mod:`hetplan.report`; the commands that orchestrate
several of those (``estimate``, ``gate``, ``simulate``, ``calibrate``) in :mod:`hetplan.commands`. A function
that reads the catalogs takes ``catalog``: a :class:`hetplan.catalog.context.Catalog` (None: the one in use).
Heavy modules (the MILP solvers, pandas, the simulator) are imported inside the functions, so importing this
module is cheap.

Source: hetplan's own reconstruction (aiconfigurator-style CLI/API pairing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# gate and simulate orchestrate several library calls: their functions live in hetplan.commands (as light to
# import as this module) and are this module's, re-exported
from hetplan.commands.gate import gate, read_gate_baseline, update_gate_baseline
from hetplan.commands.simulate import (
    calibrate,
    find_capacity,
    sim_request,
    simulate,
    simulate_closed_loop,
    simulate_windowed,
)
from hetplan.resources import Resources

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.emit.settings import EmitSettings
    from hetplan.emit.writer import EmitResult
    from hetplan.perf.estimate import Estimate
    from hetplan.perf.settings import PerfSettings
    from hetplan.plan.types import Plan
    from hetplan.planning.options import PlanOptions
    from hetplan.scenario import Scenario
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
    catalog: Catalog | None = None,
) -> Estimate:
    """Latency, memory and throughput of one instance (``hetplan estimate``); ``profiles`` and ``catalog`` as in
    :func:`plan`; ``engine`` picks the memory rule and fitted curves (``settings``, when given, carries its own
    engine).

    Raises:
        InputError: unknown model/GPU, bad TP/PP or sizes. OutOfMemoryError: weights do not fit.
    """
    from hetplan.commands.estimate import estimate as _estimate

    return _estimate(model, gpu, tp, pp, batch, prompt_tokens, context_tokens, output_tokens, weight_dtype,
                     kv_dtype, settings, profiles, engine, catalog)  # fmt: skip


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
    catalog: Catalog | None = None,
) -> Plan:
    """Plan ``scenario`` (``hetplan plan --no-verify``): :func:`plan_with` the
    :class:`~hetplan.planning.options.PlanOptions` these arguments make; see :func:`hetplan.planning.pipeline.plan`
    (``price_factors``: each GPU's prices times its factor, a what-if of ``hetplan explore``). ``to_doc`` of the
    result is the ``--json`` output and the plan file. ``resources``: the processes planning may use (default: the
    usable cores; the CLI passes ``HETPLAN_PLAN_WORKERS``); ``solve``: how the MILPs run
    (:class:`hetplan.solvers.milp.SolveSettings`; None: its defaults); ``catalog``: the GPUs, models, prices and
    fitted curves to plan with (:class:`hetplan.catalog.context.Catalog`, passed down to everything that looks a
    name up or reads a curve; None: the shipped catalogs; the CLI passes the one ``HETPLAN_CATALOG_DIR`` names);
    its hash is the plan's ``provenance.catalog_sha256``.

    Raises:
        InputError: bad scenario fields, profile or fit files. InfeasibleError: no plan meets the target.
    """
    from hetplan.planning.options import PlanOptions

    options = PlanOptions.of(
        price_factors, strategy=strategy, analysis=analysis, profiles=tuple(profiles), prune_with=prune_with,
        prune_top_k=prune_top_k, min_r2=min_r2,
    )  # fmt: skip
    return plan_with(scenario, options, progress, resources, solve, catalog)


def plan_verified(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    policy: str = "fcfs",
    resize: bool = False,
    progress: Callable[[str], None] | None = None,
    confidence: str | None = "p80",
    confidence_gates: bool = False,
    catalog: Catalog | None = None,
    **plan_kwargs: Any,
) -> Plan:
    """Plan ``scenario`` and check it in the simulator (``hetplan plan``'s default; ``--no-resize``,
    ``--confidence``, ``--size-for-confidence``): in sample, out of sample and against the model's own error at
    ``confidence``; ``resize`` re-plans until the simulation holds the SLOs (on by default in the CLI, off here);
    see :func:`hetplan.planning.verify.plan_verified`. ``plan_kwargs``: :func:`plan`'s ``profiles``, ``prune_with``,
    ``prune_top_k``, ``min_r2`` and ``price_factors`` (with the arguments above, the
    :class:`~hetplan.planning.options.PlanOptions` value passed down, as :func:`plan_with` does), ``resources`` and
    ``solve`` (:class:`hetplan.solvers.milp.SolveSettings`); ``catalog`` as in :func:`plan`.

    Raises:
        InputError, InfeasibleError: as :func:`plan`; InfeasibleError also when no headroom holds the SLOs.
    """
    from hetplan.planning.options import PlanOptions

    run = {k: plan_kwargs.pop(k) for k in ("resources", "solve") if k in plan_kwargs}
    options = PlanOptions.of(
        plan_kwargs.pop("price_factors", None), strategy=strategy, analysis=analysis, verify=True, policy=policy,
        resize=resize, confidence=confidence, confidence_gates=confidence_gates,
        profiles=tuple(plan_kwargs.pop("profiles", ())), **plan_kwargs,
    )  # fmt: skip
    return plan_with(scenario, options, progress, catalog=catalog, **run)


def plan_with(
    scenario: Scenario,
    options: PlanOptions,
    progress: Callable[[str], None] | None = None,
    resources: Resources | None = None,
    solve: SolveSettings | None = None,
    catalog: Catalog | None = None,
) -> Plan:
    """Plan ``scenario`` as ``options`` ask (``hetplan plan``: the CLI builds them from its flags;
    :class:`hetplan.planning.options.PlanOptions`): :func:`plan_verified` when ``options.verify``, else
    :func:`plan`; ``resources``, ``solve`` and ``catalog`` as in :func:`plan`.

    Raises:
        As :func:`plan` and :func:`plan_verified`.
    """
    from hetplan.planning import pipeline
    from hetplan.planning.verify import plan_verified as _plan_verified
    from hetplan.solvers.milp import DEFAULT_SETTINGS

    if options.verify:
        return _plan_verified(
            scenario, options, progress, catalog, resources=resources, solve=solve or DEFAULT_SETTINGS
        )
    return pipeline.plan(scenario, options, progress, resources, solve=solve or DEFAULT_SETTINGS, catalog=catalog)


def verify(plan: Plan, scenario: Scenario, policy: str = "fcfs", catalog: Catalog | None = None) -> Plan:
    """``plan`` with its ``verification`` block: the simulation of ``scenario``'s workload through it at the
    plan's goodput target (:func:`hetplan.sim.verify.verify_plan`), in sample and out of sample
    (:func:`hetplan.planning.verify.verification_workloads`: the scenario's ``workload.holdout`` as set, 0 when unset,
    as for a plan made with ``--no-verify``); ``catalog`` as in :func:`plan`.

    Raises:
        InputError: unknown policy, or a plan the simulator cannot rebuild.
    """
    from hetplan.planning.verify import verification_workloads, with_split
    from hetplan.sim.verify import verify_plan

    _, workload, out_of_sample, split = verification_workloads(scenario)
    v = verify_plan(plan, workload, policy, out_of_sample=out_of_sample, catalog=catalog)
    if v.cascade is not None:  # verified under CASCADE: its calibrated settings go into the plan
        plan = replace(plan, cascade=v.cascade)
    return replace(plan, verification=with_split(v, split))


def build_workload(scenario: Scenario) -> Workload:
    """The scenario's workload (trace file or synthetic); see :func:`hetplan.planning.request.build_workload`."""
    from hetplan.planning.request import build_workload as _build_workload

    return _build_workload(scenario)


def fit_ce(
    scenario: Scenario, profiles: Sequence[Path] = (), min_r2: float | None = None, catalog: Catalog | None = None
) -> dict[str, Any]:
    """Fit Cauchy's A1/A2 cost-efficiency model (``hetplan profile fit``); see
    :func:`hetplan.planning.pipeline.fit_ce`; ``catalog`` as in :func:`plan`.

    Raises:
        InputError: bad scenario fields or files, or fewer than two feasible GPU pairs. InfeasibleError: no GPU
        fits the model or meets the SLOs.
    """
    from hetplan.planning import pipeline

    return pipeline.fit_ce(scenario, profiles, **({} if min_r2 is None else {"min_r2": min_r2}), catalog=catalog)


def emit(
    plan: Plan | dict[str, Any] | str | Path,
    out_dir: str | Path,
    targets: Iterable[str] = ("all",),
    settings: EmitSettings | None = None,
    validate: bool = False,
    force: bool = False,
    catalog: Catalog | None = None,
) -> EmitResult:
    """Write deployable files for a plan (``hetplan emit``): launch scripts for the plan's engine (vLLM, SGLang or
    TensorRT-LLM), Kubernetes, llm-d and/or Dynamo manifests under ``out_dir/<target>/``, plus
    ``out_dir/manifest.json`` (file, target, SHA-256).

    ``plan`` is a :class:`Plan`, a plan document, or the path of a plan file. ``targets`` are ``vllm``,
    ``sglang`` or ``trtllm`` (the plan's engine only), ``kubernetes``, ``llmd``, ``dynamo`` or ``all``. With
    ``validate`` the files are checked offline before anything is written (see :mod:`hetplan.emit.validate`).
    Files are written atomically; existing ones are replaced only with ``force``. Same inputs -> byte-identical
    files. ``catalog``: what a version-1 plan's names are resolved in (:func:`as_plan`).

    Raises:
        InputError: bad plan, settings or targets, or an output exists without ``force`` (exit 2).
        EmitRuleError: the plan breaks a deployment rule or the files fail validation; nothing is written (exit 1).
    """
    from hetplan.emit.writer import emit_plan

    return emit_plan(as_plan(plan, catalog=catalog), out_dir, targets, settings, validate, force)


def as_plan(plan: Plan | dict[str, Any] | str | Path, where: str = "plan", catalog: Catalog | None = None) -> Plan:
    """A :class:`Plan` from a plan, a plan document (version 1 or 2) or a plan file's path (``catalog``: what a
    version-1 plan's names are resolved in; None: the shipped catalogs).

    Raises:
        InputError: not a usable plan (see :func:`hetplan.plan.doc.from_doc`).
    """
    from hetplan.plan.doc import from_doc, load_plan
    from hetplan.plan.types import Plan

    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, dict):
        return from_doc(plan, where, catalog)
    return load_plan(plan, catalog)


def load_plan(path: str | Path, catalog: Catalog | None = None) -> Plan:
    """Read a plan file (YAML or JSON, version 1 or 2) into the typed :class:`~hetplan.plan.types.Plan`
    (``catalog``: as :func:`as_plan`).

    Raises:
        InputError: the file is missing, unreadable, not a plan, or lacks a field that later stages need.
    """
    from hetplan.plan.doc import load_plan as _load_plan

    return _load_plan(path, catalog)


def to_doc(plan: Plan) -> dict[str, Any]:
    """The plan document (what ``--json`` prints and ``--out`` writes): :func:`hetplan.plan.doc.to_doc`."""
    from hetplan.plan.doc import to_doc as _to_doc

    return _to_doc(plan)


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
    catalog: Catalog | None = None,
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

    # the cases are planned with the catalog (its folder goes to local workers, its files to Ray workers)
    settings = SweepSettings(None if out is None else Path(out), executor, workers, ray_address, ray_files, resume,
                             force, solve, catalog)  # fmt: skip
    return run_sweep(grid, settings, progress)


def explore(
    scenario: Scenario,
    vary: Sequence[str],
    strategy: str = "all",
    verify: bool = True,
    policy: str = "fcfs",
    progress: Callable[[int, int, str], None] | None = None,
    solve: SolveSettings | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """What-ifs of ``scenario`` (``hetplan explore``): ``vary`` holds one or two axes as ``--vary`` writes them
    (``goodput=1x,1.5x``, ``ttft=1s,5s``, ``tpot=...``, ``price:L40S=-20%``, ``owned:H800=+16``); each point is
    planned as ``hetplan plan`` plans that value and, with ``verify``, simulated under ``policy`` without re-sizing.
    Returns the explore document (``--json``); see :mod:`hetplan.explore`. ``progress(done, total, point)``.

    Raises:
        InputError: a bad axis or value (naming it) or scenario, before any point is planned.
    """
    from hetplan.explore import explore_points, parse_axes

    return explore_points(scenario, parse_axes(list(vary)), strategy, verify, policy, progress, solve, catalog).to_doc()


def hetis(scenario: Scenario, pool: Path, catalog: Catalog | None = None) -> dict[str, Any]:
    """Plan a fixed GPU pool with Hetis (``hetplan plan --strategy hetis --pool``): primaries, workers and the
    head-wise attention split; see :func:`hetplan.planning.hetis.hetis_plan`.

    Raises:
        InputError: bad pool or scenario. InfeasibleError: the pool cannot serve the model.
    """
    from hetplan.planning.hetis import hetis_plan

    return hetis_plan(scenario, pool, catalog=catalog)


def autoscale(
    scenario: Scenario,
    spec: dict[str, Any],
    curve_path: Path | None = None,
    diurnal_text: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    solve: SolveSettings | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """Plan the combo schedule of ``scenario`` over a load curve (``hetplan autoscale``); see
    :func:`hetplan.planning.autoscale.autoscale` (``progress(done, total)`` as its demand levels are solved;
    ``solve``: how the MILPs run, :class:`hetplan.solvers.milp.SolveSettings`).

    Raises:
        InputError: bad settings or curve. InfeasibleError: the peak cannot be served.
    """
    from hetplan.planning.autoscale import autoscale as _autoscale

    return _autoscale(scenario, spec, curve_path, diurnal_text, progress, solve, catalog)


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
    "read_gate_baseline",
    "update_gate_baseline",
    "hetis",
    "load_plan",
    "plan",
    "plan_verified",
    "plan_with",
    "sim_request",
    "simulate",
    "simulate_closed_loop",
    "simulate_windowed",
    "sweep",
    "to_doc",
    "verify",
]
