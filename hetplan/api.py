"""Python API: one function per command, the CLI's twin. Returns plain data; never prints.

Source: hetplan's own reconstruction (aiconfigurator-style CLI/API pairing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from hetplan import __version__
from hetplan.catalog.loader import (
    active_gpus,
    find_gpu,
    find_model,
    format_validation,
    gpu_overlay,
    load_user_prices,
)
from hetplan.catalog.pricing import GpuPrice, check_cloud, resolve_price
from hetplan.catalog.schemas import GpuSpec, UserPriceFile
from hetplan.emit.ir import EmitSettings
from hetplan.emit.writer import EmitResult, emit_plan
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.capacity import LengthStats
from hetplan.perf.estimate import Estimate
from hetplan.perf.estimate import estimate as _estimate
from hetplan.perf.latency import InstanceModel, compute_dtype
from hetplan.perf.measured import measured_notes
from hetplan.perf.settings import PerfSettings
from hetplan.planfile import load_plan
from hetplan.planning import build_plan
from hetplan.profiler.fit import (
    DEFAULT_MIN_R2,
    DEFAULT_TOP_K,
    fit_doc,
    fit_mismatch,
    keep_pairs,
    load_fit,
    low_r2_note,
)
from hetplan.profiler.fit import fit_ce as _fit_ce
from hetplan.profiler.profile_file import LoadedProfiles, load_profiles, profile_notes
from hetplan.scenario import MAX_TP, Scenario
from hetplan.solvers.cauchy import PlanRequest, check_request
from hetplan.units import parse_duration_s, parse_percentile
from hetplan.workload.model import Workload
from hetplan.workload.readers import load_workload
from hetplan.workload.synthetic import synthetic_workload

HOURS_PER_MONTH = 730.0
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
) -> Estimate:
    """Latency, memory and throughput of one instance (``hetplan estimate``); ``profiles`` as in :func:`plan`.

    Raises:
        InputError: unknown model/GPU, bad TP/PP or sizes. OutOfMemoryError: weights do not fit.
    """
    for field, value in (("batch", batch), ("prompt_tokens", prompt_tokens)):
        if value < 1:
            raise InputError(f"{field} must be >= 1, got {value}", fix=f"pass --{field.replace('_', '-')} 1 or more")
    if output_tokens is not None and output_tokens < 1:
        raise InputError(f"output_tokens must be >= 1, got {output_tokens}", fix="pass --output-tokens 1 or more")
    if tp > MAX_TP:
        raise InputError(
            f"TP {tp} spans more than one {MAX_TP}-GPU node",
            "hetplan models tensor parallelism inside one node",
            f"use --tp {MAX_TP} or less (and --pp)",
        )
    arch = ModelArch(find_model(model), weight_dtype, kv_dtype)
    loaded = load_profiles(profiles) if profiles else None
    with gpu_overlay(loaded.specs if loaded else ()):
        spec = find_gpu(gpu)
    inst = InstanceModel(arch, spec, tp, pp, settings or PerfSettings())
    ctx = prompt_tokens if context_tokens is None else context_tokens
    if ctx < 1:
        raise InputError(f"context_tokens must be >= 1, got {ctx}", fix="pass --context-tokens 1 or more")
    est = _estimate(inst, batch, prompt_tokens, ctx, output_tokens)
    # -- measured figures: say what each profile did, as plan does --
    notes = profile_notes(loaded, [spec.name]) if loaded else []
    notes += measured_notes([spec], compute_dtype(arch.weight_dtype))
    return replace(est, warnings=notes, profiles=profile_records(loaded))
    # -- end measured figures --


def profile_records(loaded: LoadedProfiles | None, with_spec: bool = False) -> list[dict[str, Any]]:
    """What the JSON outputs (plan, estimate, fit) record of each ``--profile`` file; ``with_spec`` adds the
    profiled GPU entry itself (``gpu_spec``, in plans: the simulator rebuilds instances from it)."""
    if loaded is None:
        return []
    return [
        {
            "file": name,
            "gpu": prof.gpu.name,
            "device_kind": prof.gpu.measured.device_kind if prof.gpu.measured else None,
            "device_name": prof.gpu.measured.device_name if prof.gpu.measured else None,
            "profiled_at": prof.gpu.measured.profiled_at if prof.gpu.measured else None,
        }
        | ({"gpu_spec": prof.gpu.model_dump(mode="json", exclude_none=True)} if with_spec else {})
        for name, prof in loaded.files
    ]


def build_workload(scenario: Scenario) -> Workload:
    """The scenario's workload (trace file or synthetic); a trace's source is recorded as its file name and
    SHA-256, so plans do not depend on the working directory."""
    spec = scenario.workload
    if spec.synthetic is not None:
        s = spec.synthetic
        return synthetic_workload(
            s.kind, s.rate_per_s, s.requests, s.seed, s.prompt_tokens_median, s.output_tokens_median, s.sigma
        )
    path = Path(scenario.resolve(spec.path) or "")
    display = path.name
    if path.is_file():
        display = f"{path.name} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]})"
    return load_workload(path, spec.format, spec.rate_per_s, display)


def _model(scenario: Scenario) -> ModelArch:
    local = Path(scenario.resolve(scenario.model) or "")
    name = str(local) if local.exists() else scenario.model
    return ModelArch(find_model(name), scenario.weight_dtype, scenario.kv_dtype)


def _goodput(scenario: Scenario, workload: Workload, warnings: list[str]) -> float:
    if scenario.goodput_req_per_s is not None:
        return scenario.goodput_req_per_s
    if workload.arrival_rate_per_s is None or not workload.arrival_rate_per_s > 0:
        if workload.duration_s is None:
            why = "the workload has no timestamps (a length-only file or a single request)"
        else:
            why = f"the workload's timestamps span {workload.duration_s:g} s, so it has no arrival rate"
        raise InputError("no goodput target", why, "pass --goodput REQ_PER_S (or --rate for a length-only file)")
    rate = workload.arrival_rate_per_s
    warnings.append(f"goodput target defaults to the workload's mean arrival rate, {rate:.4g} req/s")
    return rate


def _inventory(scenario: Scenario) -> dict[str, int]:
    inventory: dict[str, int] = {}
    for name, count in scenario.inventory.items():
        canonical = find_gpu(name).name
        if canonical in inventory:
            raise InputError(f"inventory names {canonical} twice ({name!r} is an alias)", fix="give each GPU once")
        inventory[canonical] = int(count)
    return inventory


def _user_prices(scenario: Scenario) -> UserPriceFile | None:
    if not scenario.prices:
        return None
    path = scenario.resolve(scenario.prices) or ""
    user = load_user_prices(Path(path))
    seen: dict[str, str] = {}
    for name in user.usd_per_gpu_hour:
        try:
            canonical = find_gpu(name).name
        except InputError as exc:
            raise InputError(
                f"price file {path}: {exc.what}", exc.why, "fix the GPU name in usd_per_gpu_hour"
            ) from None
        if canonical in seen:
            raise InputError(
                f"price file {path} prices {canonical} twice ({seen[canonical]!r} and {name!r})",
                fix="keep one entry per GPU",
            )
        seen[canonical] = name
    return user


def _candidate_gpus(
    scenario: Scenario, inventory: dict[str, int], warnings: list[str], user: UserPriceFile | None = None
) -> list[GpuSpec]:
    """--gpus, else the inventory's types, else the GPUs a user price file prices, else every catalog GPU."""
    if scenario.gpus:
        gpus = list(dict.fromkeys(find_gpu(g) for g in scenario.gpus))
        left_out = sorted(set(inventory) - {g.name for g in gpus})
        if left_out:
            warnings.append(f"inventory of {', '.join(left_out)} is ignored: not among the candidate --gpus")
        return gpus
    if inventory:
        return [find_gpu(g) for g in inventory]
    if user is not None:
        return list(dict.fromkeys(find_gpu(g) for g in user.usd_per_gpu_hour))
    return list(active_gpus())


def build_request(scenario: Scenario) -> tuple[PlanRequest, Workload, list[str], list[tuple[str, str]]]:
    """Validate a scenario into a :class:`PlanRequest`, the workload, general warnings and per-GPU warnings
    (GPU name, text; shown only when a plan uses that GPU).

    Raises:
        InputError: any invalid or inconsistent setting, named with its fix.
    """
    warnings: list[str] = []
    gpu_warnings: list[tuple[str, str]] = []
    check_cloud(scenario.cloud)
    arch = _model(scenario)
    quantile = parse_percentile(scenario.slo.percentile)
    ttft = parse_duration_s(scenario.slo.ttft, "ttft")
    tpot = parse_duration_s(scenario.slo.tpot, "tpot")
    workload = build_workload(scenario)
    goodput = _goodput(scenario, workload, warnings)
    user_prices = _user_prices(scenario)
    inventory = _inventory(scenario)
    explicit = bool(scenario.gpus or inventory or user_prices)
    prices: dict[str, GpuPrice] = {}
    chosen = []
    dtype_skipped: list[str] = []  # candidates skipped for lacking the compute dtype
    fp16_ok = True
    kind = "spot" if scenario.spot else "on-demand"
    where = f" on {scenario.cloud}" if scenario.cloud else ""
    for gpu in _candidate_gpus(scenario, inventory, warnings, user_prices):
        price = resolve_price(gpu, scenario.cloud, scenario.spot, user_prices)
        if price is None:
            if explicit:
                raise InputError(
                    f"no {kind} price for {gpu.name}{where}",
                    "every GPU type in the plan needs a $/GPU-hour",
                    "pass --prices FILE with usd_per_gpu_hour for it, pick another --cloud, or drop it from --gpus",
                )
            continue
        try:
            tflops, estimated = gpu.dense_tflops(compute_dtype(arch.weight_dtype))
        except KeyError as exc:
            dtype_skipped.append(exc.args[0] if exc.args else f"{gpu.name}: no compute figure")
            fp16_ok = fp16_ok and bool(gpu.fp16_dense_tflops)
            warnings.append(
                f"{gpu.name} skipped: {exc.args[0] if exc.args else 'no compute figure'}"
                + (" (plan with --weight-dtype fp16 to use it)" if gpu.fp16_dense_tflops else "")
            )
            continue
        if estimated and gpu.measured is None:
            note = gpu.estimate_note or "no published value"
            gpu_warnings.append(
                (gpu.name, f"{gpu.name}: {tflops:g} TFLOPS is an estimate, not a datasheet figure ({note})")
            )
        if price.illustrative:
            gpu_warnings.append(
                (
                    gpu.name,
                    f"{gpu.name}: ${price.usd_per_gpu_hour:g}/GPU-hour is illustrative, not a quote ({price.source})",
                )
            )
        if price.unreliable:
            gpu_warnings.append(
                (
                    gpu.name,
                    f"{gpu.name}: ${price.usd_per_gpu_hour:g}/GPU-hour comes from a catalog "
                    f"row flagged unreliable ({price.source}); pass --prices to set your own",
                )
            )
        prices[gpu.name] = price
        chosen.append(gpu)
    if not chosen and dtype_skipped:
        dtype = compute_dtype(arch.weight_dtype)
        raise InputError(
            f"no candidate GPU can run {dtype}: " + "; ".join(dtype_skipped),
            f"the planner computes in the weight dtype ({arch.weight_dtype}) and every priced candidate lacks it",
            ("pass --weight-dtype fp16, or " if fp16_ok and dtype != "fp16" else "")
            + f"add a GPU with {dtype} support to --gpus or the --prices file (see hetplan catalog gpus)",
        )
    if not chosen:
        raise InputError(
            f"no candidate GPU has {'a spot' if scenario.spot else 'an on-demand'} price{where}",
            "the catalog lists no matching price rows",
            "drop --spot, pick another --cloud, or pass --prices",
        )
    heads = arch.attention_heads
    tps = tuple(sorted({t for t in scenario.tp if heads % t == 0}))
    dropped = sorted(set(scenario.tp) - set(tps))
    if not tps:
        raise InputError(
            f"no TP degree in {sorted(set(scenario.tp))} divides the {heads} attention heads of {arch.spec.name}",
            fix="pass TP degrees that divide the head count, e.g. --tp 1,2,4,8",
        )
    if dropped:
        warnings.append(f"TP {', '.join(map(str, dropped))} skipped: does not divide the {heads} attention heads")
    window = arch.spec.max_position_embeddings
    too_long = (workload.prompt_tokens + workload.output_tokens) > window
    if too_long.all():
        raise InputError(
            f"every request is longer than {arch.spec.name}'s {window:,}-token context window",
            fix="use a model with a longer context or a trace of shorter requests",
        )
    if too_long.any():
        warnings.append(
            f"{int(too_long.sum())} request(s) ({too_long.mean() * 100:.2g} %) exceed {arch.spec.name}'s "
            f"{window:,}-token context window and are left out of the length distribution"
        )
        workload = replace(
            workload,
            prompt_tokens=workload.prompt_tokens[~too_long],
            output_tokens=workload.output_tokens[~too_long],
            arrival_s=None if workload.arrival_s is None else workload.arrival_s[~too_long],
        )
    prompt, output = workload.sample(MAX_SAMPLES)
    req = PlanRequest(
        arch,
        LengthStats(prompt, output, quantile),
        float(goodput),
        ttft,
        tpot,
        tuple(chosen),
        prices,
        inventory,
        tps,
        scenario.max_ratio,
        scenario.headroom,
        scenario.max_ilp_combos,
    )
    check_request(req)
    # -- measured figures (hetplan profile): CPU figures under a GPU's name, dtypes the profile lacks --
    warnings.extend(measured_notes(req.gpus, compute_dtype(arch.weight_dtype)))
    # -- end measured figures --
    return req, workload, warnings, gpu_warnings


def plan(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    progress: Callable[[str], None] | None = None,
    profiles: Sequence[Path] = (),
    prune_with: Path | None = None,
    prune_top_k: int = DEFAULT_TOP_K,
    min_r2: float = DEFAULT_MIN_R2,
) -> dict[str, Any]:
    """Plan ``scenario`` with ``strategy`` (cauchy, homogeneous or melange), the other strategies as baselines.

    Returns the plan document (the ``--json`` output and the plan file), deterministic for equal inputs; see
    :mod:`hetplan.planning`. ``analysis`` adds price sensitivity and cost versus goodput (extra ILP solves).
    ``profiles`` are ``hetplan profile`` files whose measured figures replace the datasheet and efficiency priors
    of their GPUs (:mod:`hetplan.profiler.profile_file`; the plan lists them under ``scenario.profiles`` and says
    what each did); ``prune_with`` is an A1/A2 fit file whose top ``prune_top_k`` heterogeneous GPU pairs (plus
    every homogeneous pair) are the only ones enumerated (:func:`hetplan.profiler.fit.keep_pairs`); the plan warns
    when the fit comes from another scenario or its R² is below ``min_r2``, and keeps every pair with a GPU the fit
    never saw (:func:`hetplan.profiler.fit.fit_mismatch`).

    Raises:
        InputError: bad scenario fields, profile or fit files. InfeasibleError: no plan meets the target (names
        the binding constraint).
    """
    loaded = load_profiles(profiles) if profiles else None
    with gpu_overlay(loaded.specs if loaded else ()):
        req, workload, warnings, gpu_warnings = build_request(scenario)
        if loaded is not None:
            warnings = warnings + profile_notes(loaded, [g.name for g in req.gpus])
        if prune_with is not None:
            fit = load_fit(prune_with)
            # the fit must come from this scenario: warn otherwise, and never prune GPUs it never saw
            fit_notes, unseen = fit_mismatch(fit, req, workload.summary(), min_r2)
            warnings = warnings + fit_notes
            req = replace(req, keep_pairs=keep_pairs(fit.a1, fit.a2, req, prune_top_k, unseen))
        doc = build_plan(req, scenario, workload, warnings, gpu_warnings, strategy, analysis, progress)
    if loaded is not None:
        # the GPU entries the plan was made with, so plan --verify, simulate and calibrate rebuild the same
        # instances without the profile files
        doc["scenario"]["profiles"] = profile_records(loaded, with_spec=True)
    if prune_with is not None:
        doc["scenario"]["prune_with"] = {"file": Path(prune_with).name, "top_k": prune_top_k}
    return doc


def fit_ce(scenario: Scenario, profiles: Sequence[Path] = (), min_r2: float = DEFAULT_MIN_R2) -> dict[str, Any]:
    """Fit Cauchy's A1/A2 cost-efficiency model for ``scenario``'s workload and GPUs (``hetplan profile fit``);
    returns the fit document (:func:`hetplan.profiler.fit.fit_doc`), whose ``warnings`` hold the scenario's
    warnings, what each profile did and a low-R² warning (below ``min_r2``).

    Raises:
        InputError: bad scenario fields or files, or fewer than two feasible GPU pairs. InfeasibleError: no GPU
        fits the model or meets the SLOs.
    """
    loaded = load_profiles(profiles) if profiles else None
    with gpu_overlay(loaded.specs if loaded else ()):
        req, workload, warnings, _ = build_request(scenario)
        if loaded is not None:
            warnings = warnings + profile_notes(loaded, [g.name for g in req.gpus])
        tokens = float(workload.prompt_tokens.mean() + workload.output_tokens.mean())
        fit = _fit_ce(req, tokens)
        warnings = warnings + low_r2_note(fit.r2, min_r2)
        return fit_doc(fit, req, workload.summary(), scenario.name, profile_records(loaded), warnings)


def emit(
    plan_doc: dict[str, Any] | str | Path,
    out_dir: str | Path,
    targets: Iterable[str] = ("all",),
    settings: EmitSettings | None = None,
    validate: bool = False,
    force: bool = False,
) -> EmitResult:
    """Write deployable files for a plan (``hetplan emit``): vLLM scripts, Kubernetes, llm-d and/or Dynamo
    manifests under ``out_dir/<target>/``, plus ``out_dir/manifest.json`` (file, target, SHA-256).

    ``plan_doc`` is a plan document (as returned by :func:`plan`) or the path of a plan file. ``targets`` are
    ``vllm``, ``kubernetes``, ``llmd``, ``dynamo`` or ``all``. With ``validate`` the files are checked offline
    before anything is written (see :mod:`hetplan.emit.validate`). Files are written atomically; existing ones
    are replaced only with ``force``. Same inputs -> byte-identical files.

    Raises:
        InputError: bad plan, settings or targets, or an output exists without ``force`` (exit 2).
        EmitRuleError: the plan breaks a deployment rule or the files fail validation; nothing is written (exit 1).
    """
    doc = plan_doc if isinstance(plan_doc, dict) else load_plan(plan_doc)
    return emit_plan(doc, out_dir, targets, settings, validate, force)


#: Headroom multipliers tried by :func:`plan_verified`, relative to ``1 + headroom``, before bisection.
RESIZE_FACTORS = (1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
#: Bisection steps between the last failing and the first passing multiplier.
RESIZE_BISECT_STEPS = 3


def plan_verified(
    scenario: Scenario,
    strategy: str = "cauchy",
    analysis: bool = True,
    policy: str = "fcfs",
    resize: bool = False,
    progress: Callable[[str], None] | None = None,
    **plan_kwargs: Any,
) -> dict[str, Any]:
    """Plan ``scenario``, replay its workload through the plan in the simulator, and, with ``resize``, re-plan
    with more headroom until the simulation holds the SLOs.

    The planner's capacities assume Poisson arrivals (M/G/1 and Erlang C, :mod:`hetplan.perf.capacity`); a bursty
    trace can miss the SLOs on a plan the model calls sufficient. ``resize`` searches the goodput headroom: it
    tries ``(1 + headroom) x f`` for f in :data:`RESIZE_FACTORS` until the simulation at the scenario's goodput
    target (:func:`hetplan.sim.run.verify_plan`) has no miss, then bisects :data:`RESIZE_BISECT_STEPS` times
    between the last failing and the first passing factor, and returns the passing plan with the least headroom
    (re-planned with ``analysis`` when that was asked for). The search assumes that more headroom never makes the
    simulated attainment worse, which holds for the plans tried here but is not proven.

    Returns:
        The plan document with a ``verification`` block; with ``resize`` and a first miss, the block carries
        ``resized``: the headroom asked for and used, the $/hour before and after, and every attempt.

    Raises:
        InputError, InfeasibleError: as :func:`plan` and :func:`hetplan.sim.run.verify_plan`; InfeasibleError
        also when no headroom up to the largest factor (or the scenario's headroom limit of 10) holds the SLOs
        in simulation.

    Source: hetplan's own reconstruction.
    """
    from hetplan.errors import InfeasibleError
    from hetplan.sim.run import verify_plan

    workload = build_workload(scenario)

    def attempt(headroom: float, with_analysis: bool) -> dict[str, Any]:
        sc = scenario.model_copy(update={"headroom": headroom})
        doc = plan(sc, strategy, with_analysis, progress=progress, **plan_kwargs)
        if progress is not None:
            progress(f"simulating the plan at headroom {headroom:.3g}")
        doc["verification"] = verify_plan(doc, workload, policy)
        return doc

    base = scenario.headroom
    first = attempt(base, analysis)
    if not resize or not first["verification"]["misses"]:
        return first
    tried: list[dict[str, Any]] = [_attempt_record(base, first)]

    def probe(factor: float) -> tuple[bool, dict[str, Any] | None]:
        """Plan and simulate at headroom (1 + base) x factor - 1, record it; (holds the SLOs, plan or None when
        the inventory cannot reach that headroom)."""
        headroom = (1 + base) * factor - 1
        try:
            doc = attempt(headroom, False)
        except InfeasibleError as exc:  # inventory runs out before the SLOs hold
            tried.append({"headroom": _rnd_h(headroom), "infeasible": exc.what})
            return False, None
        tried.append(_attempt_record(headroom, doc))
        return not doc["verification"]["misses"], doc

    lo, hi, best = 1.0, None, None
    for f in RESIZE_FACTORS:
        if (1 + base) * f - 1 > 10:
            break
        passed, doc = probe(f)
        if passed:
            hi, best = f, doc
            break
        if doc is None:
            break
        lo = f
    if hi is None or best is None:
        last = tried[-1]
        raise InfeasibleError(
            "no headroom makes the plan hold its SLOs in simulation",
            f"tried headroom up to {last['headroom']:g}: "
            + (last.get("infeasible") or "; ".join(last.get("misses", []))),
            "lower the goodput target or relax the SLOs, add inventory, or plan without --verify-resize"
            + (
                f"; {last['dropped']} request(s) were dropped because they fit no instance's KV cache, which more "
                "copies of the same instances do not change: a GPU with more memory or a higher TP would"
                if last.get("dropped")
                else ""
            ),
        )
    for _ in range(RESIZE_BISECT_STEPS):
        mid = (lo + hi) / 2
        passed, doc = probe(mid)
        if passed and doc is not None:
            hi, best = mid, doc
        else:
            lo = mid
    chosen = (1 + base) * hi - 1
    if analysis:
        best = attempt(chosen, True)
    best["verification"]["resized"] = {
        "headroom_asked": base,
        "headroom_used": _rnd_h(chosen),
        "usd_per_hour_before": first["total_usd_per_hour"],
        "usd_per_hour_after": best["total_usd_per_hour"],
        "attempts": tried,
        "method": "headroom x (1 + h) over RESIZE_FACTORS until no simulated miss, then bisection",
    }
    return best


def _rnd_h(headroom: float) -> float:
    """Headroom rounded for the plan document (4 decimals)."""
    return round(headroom, 4)


def _attempt_record(headroom: float, doc: dict[str, Any]) -> dict[str, Any]:
    v = doc["verification"]
    return {
        "headroom": _rnd_h(headroom),
        "usd_per_hour": doc["total_usd_per_hour"],
        "joint_attainment": v["attainment"]["joint"],
        "dropped": v["dropped"],
        "misses": v["misses"],
    }


def autoscale(
    scenario: Scenario, spec: dict[str, Any], curve_path: Path | None = None, diurnal_text: str | None = None
) -> dict[str, Any]:
    """Plan the combo schedule of ``scenario`` over a load curve (``hetplan autoscale``).

    ``spec`` holds :class:`hetplan.scenario.AutoscaleSpec` fields (durations as text); the curve comes from
    ``curve_path`` (ServeGen per-window CSV or a request trace) or ``diurnal_text`` ("DAYS,PEAK,TROUGH").

    Returns a document with ``summary`` (costs, short windows, GPU-hours), ``windows`` (one row each), ``curve`` and
    ``deployment``: a plan document whose combos carry ``min_count``/``max_count`` for autoscaler bounds.

    Raises:
        InputError: bad settings or curve. InfeasibleError: the peak cannot be served.
    """
    from hetplan.autoscale.curves import diurnal, load_curve
    from hetplan.autoscale.schedule import ScheduleSettings, build_schedule, rows, summary
    from hetplan.planning import Planner, combo_doc, rnd, scenario_doc
    from hetplan.scenario import AutoscaleSpec

    try:
        parsed = AutoscaleSpec.model_validate(spec)
    except ValidationError as exc:
        raise InputError("invalid autoscale settings", format_validation(exc), "fix the named values") from None
    window_s = None if parsed.window is None else parse_duration_s(parsed.window, "window", 1.0, 86400.0)
    if diurnal_text is not None:
        parts = [p.strip() for p in diurnal_text.split(",")]
        try:
            days, peak, trough = (float(p) for p in parts)
        except ValueError:
            raise InputError(
                f"--diurnal {diurnal_text!r}: expected DAYS,PEAK,TROUGH", fix="e.g. --diurnal 7,12,2"
            ) from None
        curve = diurnal(days, window_s or 600.0, peak, trough)
    else:
        assert curve_path is not None
        curve = load_curve(curve_path, window_s)
    lags = tuple(
        sorted(
            (find_gpu(g).name, parse_duration_s(v, f"startup lag of {g}", 0.0, 86400.0))
            for g, v in parsed.startup_lag_by_gpu.items()
        )
    )
    settings = ScheduleSettings(
        startup_lag_s=lags,
        default_startup_lag_s=parse_duration_s(parsed.startup_lag, "startup_lag", 0.0, 86400.0),
        cooldown_s=parse_duration_s(parsed.cooldown, "cooldown", 0.0, 7 * 86400.0),
        hysteresis=parsed.hysteresis,
        max_changes_per_window=parsed.max_changes_per_window,
        min_goodput_req_per_s=parsed.min_goodput_req_per_s,
        level_step=parsed.level_step,
        design_utilization=parsed.design_utilization,
        max_cv=parsed.max_cv,
    )
    req, workload, warnings, gpu_warnings = build_request(scenario.model_copy(update={"goodput_req_per_s": 1.0}))
    sched = build_schedule(req, curve, settings)
    sched_summary = summary(sched)
    # the same per-GPU warnings (estimated TFLOPS, illustrative or unreliable prices) as `hetplan plan`, for every
    # GPU type the schedule runs at some point
    scheduled = {gpu for gpu, hours in sched_summary["gpu_hours"].items() if hours}
    warnings = warnings + [text for name, text in gpu_warnings if name in scheduled]
    counts = np.array([sched.fleets[int(i)].counts for i in sched.requested_level])
    planner = Planner(req, (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean())))
    peak_req = replace(req, goodput_req_per_s=float(sched.demand_req_per_s.max()), headroom=0.0)
    deployment = scenario_doc(scenario, peak_req, workload)
    combos = []
    tokens = sum(planner.token_means)
    for k, combo in enumerate(sched.combos):
        high, low = int(counts[:, k].max()), int(counts[:, k].min())
        if high:
            # latencies predicted at full load (the most a copy carries before the autoscaler adds one)
            doc = combo_doc(peak_req, planner.cands, combo, high, combo.goodput_req_per_s * (1 - 1e-9), tokens)
            # pod metrics cannot wake a combo with no pods, so each combo the schedule uses keeps one copy
            doc["min_count"] = max(low, 1)
            combos.append(doc)
    used: dict[str, int] = {}
    for doc in combos:
        for role in ("prefill", "decode"):
            gpu = doc[f"{role}_gpu"]
            used[gpu] = used.get(gpu, 0) + doc[f"n_{role}"] * doc[f"{role}_tp"] * doc["count"]
    total = sum(d["usd_per_hour"] * d["count"] for d in combos)
    goodput = sum(d["goodput_req_per_s"] * d["count"] for d in combos)
    plan_doc: dict[str, Any] = {
        "schema_version": 1,
        "kind": "plan",
        "hetplan_version": __version__,
        "strategy": "cauchy",
        "scenario": deployment,
    }
    plan_doc.update(
        {
            "status": "optimal",
            "total_usd_per_hour": rnd(total),
            "usd_per_month": rnd(total * 730),
            "goodput_req_per_s": rnd(goodput),
            "tokens_per_usd": rnd(3600 * goodput * tokens / total),
            "output_tokens_per_usd": rnd(3600 * goodput * planner.token_means[1] / total),
            "gpus_used": dict(sorted(used.items())),
            "combos": combos,
            "instances": [],
            "warnings": warnings,
            "autoscaling": "combos carry min_count (fewest copies over the schedule, at least 1: pod metrics "
            "cannot wake a combo with no pods) and count (most); the schedule's own cost lets unused combo types "
            "drop to zero; predicted latencies are at full load",
        }
    )
    return {
        "schema_version": 1,
        "kind": "autoscale-schedule",
        "hetplan_version": __version__,
        "scenario": scenario.name,
        "curve": {
            "name": curve.name,
            "source": curve.source,
            "attribution": curve.attribution,
            "window_s": curve.window_s,
            "windows": curve.windows,
        },
        "settings": {
            "startup_lag_s": settings.default_startup_lag_s,
            "startup_lag_by_gpu_s": dict(lags),
            "cooldown_s": settings.cooldown_s,
            "hysteresis": settings.hysteresis,
            "max_changes_per_window": settings.max_changes_per_window,
            "min_goodput_req_per_s": settings.min_goodput_req_per_s,
            "level_step": settings.level_step,
            "design_utilization": settings.design_utilization,
            "max_cv": settings.max_cv,
            "headroom": req.headroom,
        },
        "summary": sched_summary,
        "warnings": warnings,
        "deployment": plan_doc,
        "windows": rows(sched),
    }
