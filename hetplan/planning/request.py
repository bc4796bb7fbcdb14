"""Scenario to plan request: the model, workload, SLOs, candidate GPUs, prices and inventory, validated.

:func:`build_request` turns a :class:`~hetplan.scenario.Scenario` into the
:class:`~hetplan.solvers.cauchy.PlanRequest` every solver takes, plus the workload and the warnings a plan shows.
Every name (model, GPU, price file entry) is resolved here, once; the plan records what was resolved.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hetplan.catalog.context import Catalog
from hetplan.catalog.offers import WanLink
from hetplan.catalog.pricing import GpuPrice, check_cloud, check_region, resolve_price
from hetplan.catalog.profile import LoadedProfiles
from hetplan.catalog.schemas import GpuSpec
from hetplan.deploy_rules import Deployment, canonical_connector
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.calibration import curves_for
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats, PrefillReuse, prefill_work_tokens
from hetplan.perf.latency import compute_dtype
from hetplan.perf.measured import measured_notes
from hetplan.perf.settings import PerfSettings, engine_settings
from hetplan.perf.user_calibration import with_calibration
from hetplan.planning.calibration_notes import calibration_notes
from hetplan.planning.dtypes import AUTOS, has_fp8_cores, model_dtype
from hetplan.planning.offers import build_offers, candidate_gpus, ranking_price
from hetplan.planning.offers import user_prices as read_user_prices
from hetplan.planning.prefix import apply_reuse, estimate_reuse, reuse_doc
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import PlanRequest, check_request
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings
from hetplan.units import parse_duration_s, parse_percentile
from hetplan.workload.classes import assign_classes, binding_slos, class_slos
from hetplan.workload.context import served_workload
from hetplan.workload.model import Workload
from hetplan.workload.readers import load_workload
from hetplan.workload.split import time_split
from hetplan.workload.synthetic import synthetic_workload

MAX_SAMPLES = 4000


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
    """The workload the plan is sized on: the scenario's trace file or synthetic draw, less the held-out last
    ``workload.holdout`` of a trace's span (:func:`hetplan.workload.split.time_split`; the whole trace when it is
    unset or 0, or too short to split). A trace's source is recorded as its file name and SHA-256, so plans do not
    depend on the working directory."""
    whole = build_whole_workload(scenario)
    holdout = scenario.workload.holdout
    if not holdout or scenario.workload.synthetic is not None:
        return whole
    parts = time_split(whole, holdout)
    return whole if parts is None else parts[0]


def build_whole_workload(scenario: Scenario) -> Workload:
    """The scenario's whole workload (trace file or synthetic), whatever ``workload.holdout`` says, with the prefix
    block ids ``workload.prefix_cache`` and ``workload.reuse`` give (:func:`hetplan.planning.prefix.apply_reuse`),
    each request labelled with its class when the scenario declares ``classes``
    (:func:`hetplan.workload.classes.assign_classes`)."""
    spec = scenario.workload
    if spec.synthetic is not None:
        s = spec.synthetic
        drawn = synthetic_workload(
            s.kind, s.rate_per_s, s.requests, s.seed, s.prompt_tokens_median, s.output_tokens_median, s.sigma
        )
        return assign_classes(apply_reuse(spec, drawn), scenario, None)
    path = Path(scenario.resolve(spec.path) or "")
    display = path.name
    if path.is_file():
        display = f"{path.name} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]})"
    return assign_classes(apply_reuse(spec, load_workload(path, spec.format, spec.rate_per_s, display)), scenario, path)


def workload_sha256(scenario: Scenario) -> str | None:
    """SHA-256 of the scenario's workload: the trace file's bytes (with request classes that bring traces of their
    own: of the space-joined hashes of the workload's file and theirs), or the synthetic workload's settings as
    canonical JSON; None when a trace file cannot be read (loading it reports why)."""
    spec = scenario.workload
    if spec.synthetic is not None:
        text = json.dumps(spec.synthetic.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
    path = Path(scenario.resolve(spec.path) or "")
    try:
        own = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        added = [Path(scenario.resolve(c.path) or "") for c in scenario.classes or () if c.path is not None]
        if own is None or not added:
            return own
        # request classes with traces of their own: the hash of the files' hashes, in the scenario's order
        hashes = [own] + [hashlib.sha256(p.read_bytes()).hexdigest() for p in added]
        return hashlib.sha256(" ".join(hashes).encode()).hexdigest()
    except OSError:
        return None


def _model(scenario: Scenario, catalog: Catalog) -> ModelArch:
    local = Path(scenario.resolve(scenario.model) or "")
    name = str(local) if local.exists() else scenario.model
    spec = catalog.find_model(name)
    # weight_dtype auto or auto-quantized outside the plan's dtype search (hetplan.planning.pipeline): the model's
    # own dtype
    weight = model_dtype(spec) if scenario.weight_dtype in AUTOS else scenario.weight_dtype
    return ModelArch(spec, weight, scenario.kv_dtype)


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


def _inventory(scenario: Scenario, catalog: Catalog) -> dict[str, int]:
    inventory: dict[str, int] = {}
    for name, count in scenario.inventory.items():
        canonical = catalog.find_gpu(name).name
        if canonical in inventory:
            raise InputError(f"inventory names {canonical} twice ({name!r} is an alias)", fix="give each GPU once")
        inventory[canonical] = int(count)
    return inventory


MAX_ARRIVALS = 200_000
"""Most requests of a trace the burst-aware capacities replay (the first ones; hetplan.perf.capacity)."""


def _arrivals(workload: Workload, sized_rate: float, work: PrefillReuse | None = None) -> ArrivalTrace | None:
    """The workload's arrivals for the burst-aware capacities, replayed at ``sized_rate`` req/s (None without
    timestamps or a rate); ``work``: the prefill work with prefix reuse (workload order)."""
    a = workload.arrival_s
    if a is None or a.size < 2 or not sized_rate > 0:
        return None
    order = np.argsort(a, kind="stable")[:MAX_ARRIVALS]
    a, p, o = a[order], workload.prompt_tokens[order], workload.output_tokens[order]
    span = float(a[-1] - a[0])
    if span <= 0:
        return None
    w = None if work is None else work.take(order)
    labels = workload.labels_at(order)
    return ArrivalTrace(a, p, a.size / span, sized_rate, o, w, labels)  # the rate the verification scales from


def build_request(
    scenario: Scenario,
    fp8_cores_only: bool = False,
    overlay: Sequence[GpuSpec] = (),
    solve: SolveSettings = DEFAULT_SETTINGS,
    catalog: Catalog | None = None,
) -> tuple[PlanRequest, Workload, list[str], list[tuple[str, str]]]:
    """Validate a scenario into a :class:`PlanRequest`, the workload, general warnings and per-GPU warnings
    (GPU name, text; shown only when a plan uses that GPU). ``fp8_cores_only`` keeps only the candidate GPUs with
    fp8 tensor cores (the fp8 half of ``--weight-dtype auto``, :mod:`hetplan.planning.dtypes`). ``overlay``: the
    GPU entries of ``--profile`` files, which replace ``catalog``'s entries of the same name (or add new GPUs)
    wherever a GPU name is looked up (:meth:`hetplan.catalog.context.Catalog.with_overlay`); ``solve``: how the
    request's MILPs run (:class:`hetplan.solvers.milp.SolveSettings`, the CLI's from the environment);
    ``catalog``: the GPUs, models, prices and fitted curves to plan with (None: the shipped catalogs), carried by
    the request (``PlanRequest.catalog``, with the overlay) to the solvers and the performance model.

    Raises:
        InputError: any invalid or inconsistent setting, named with its fix.
    """
    warnings: list[str] = []
    gpu_warnings: list[tuple[str, str]] = []
    catalog = (catalog or Catalog.shipped()).with_overlay(overlay)
    check_cloud(catalog, scenario.cloud)
    arch = _model(scenario, catalog)
    quantile = parse_percentile(scenario.slo.percentile, "slo.percentile")
    ttft = parse_duration_s(scenario.slo.ttft, "ttft")
    tpot = parse_duration_s(scenario.slo.tpot, "tpot")
    binding = binding_slos(scenario)
    if binding is not None:  # request classes: the tightest TTFT and TPOT among them (docs/methods.md); Cauchy's
        ttft, tpot = binding  # prefill capacities judge each class on its own TTFT (PlanRequest.class_slos)
    workload = build_workload(scenario)
    # the default target is the whole trace's mean rate: a requirement, whatever part of the trace sizing sees
    whole_rate = scenario.workload.holdout and scenario.goodput_req_per_s is None  # else not read: a hot path
    goodput = _goodput(scenario, build_whole_workload(scenario) if whole_rate else workload, warnings)
    user_prices = read_user_prices(scenario, catalog)
    inventory = _inventory(scenario, catalog)
    explicit = bool(scenario.gpus or inventory or user_prices)
    prices: dict[str, GpuPrice] = {}
    chosen = []
    dtype_skipped: list[str] = []  # candidates skipped for lacking the compute dtype
    fp16_ok = True
    kind = "spot" if scenario.spot else "on-demand"
    where = f" on {scenario.cloud}" if scenario.cloud else ""
    where += f" in {scenario.region}" if scenario.region else ""
    candidates = candidate_gpus(scenario, inventory, warnings, user_prices, catalog)
    if fp8_cores_only:
        candidates = [g for g in candidates if has_fp8_cores(g)]
        if not candidates:
            raise InputError("no candidate GPU has fp8 tensor cores", fix="plan with a 16-bit --weight-dtype")
    check_region(
        catalog, scenario.region, scenario.cloud, [o.region for o in (user_prices.offers if user_prices else ())]
    )
    offers = build_offers(scenario, candidates, inventory, user_prices, warnings, catalog)
    for gpu in candidates:
        fallback = resolve_price(gpu, catalog, scenario.cloud, scenario.spot, user_prices, scenario.region)
        price = ranking_price(gpu, offers, fallback)
        if not any(o.gpu == gpu.name for o in offers):
            if not scenario.rent:
                warnings.append(f"{gpu.name} skipped: none owned, and --no-rent forbids renting it")
                continue
            price = None
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
        # a GPU without fitted curves of its own (no kernel tables, no architecture fit) borrows; say so
        curve_note = curves_for(scenario.engine, gpu.arch, gpu.vendor, gpu.name, catalog=catalog)[1]
        if curve_note:
            gpu_warnings.append((gpu.name, f"{gpu.name}: {curve_note}"))
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
    if not chosen and not scenario.rent:  # every candidate skipped above: none of them is owned
        owned = ", ".join(f"{n} {g}" for g, n in sorted(inventory.items()) if n) or "no GPUs"
        raise InputError(
            f"--no-rent: none of the candidate GPUs ({', '.join(g.name for g in candidates)}) is owned",
            f"the inventory holds {owned}",
            "add the owned GPU types to --gpus (or the scenario's gpus), or drop --no-rent to rent the candidates",
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
    # the engine's over-context rule (hetplan.workload.context): refused prompts out, outputs cut at the window
    window = arch.spec.max_position_embeddings
    if scenario.max_model_len_tokens is not None and scenario.max_model_len_tokens < window:
        window = scenario.max_model_len_tokens
    workload, window_note = served_workload(workload, window, arch.spec.name)
    if window_note:
        warnings.append(window_note)
    prompt, output = workload.sample(MAX_SAMPLES)
    settings = with_calibration(
        engine_settings(
            scenario.engine,
            scenario.engine_version,
            scenario.gpu_memory_utilization,
            scenario.max_num_batched_tokens,
            scenario.max_num_seqs,
            scenario.max_model_len_tokens,
        ),
        scenario.resolve(scenario.perf.calibration) if scenario.perf is not None else None,
    )
    # prefix caching (hetplan.planning.prefix): the hit rate at the planned cache size prices each prefill
    source = "declared reuse" if scenario.workload.reuse is not None else "hash_ids"
    reuse = estimate_reuse(workload, arch, tuple(chosen), tps, settings, source, catalog)
    work = None
    if reuse is not None:
        work = PrefillReuse(reuse.block_tokens, reuse.reserve_tokens, {
            k: prefill_work_tokens(arch, workload.prompt_tokens, v) for k, v in reuse.cached_by_cache.items()
        })  # fmt: skip
    index = workload.sample_index(MAX_SAMPLES)
    work_sample = None if work is None else work if index is None else work.take(index)
    arrivals = _arrivals(workload, float(goodput) * (1.0 + scenario.headroom), work)
    # --max-model-len: the longest request the plan keeps; every instance must hold it (hetplan.deploy_rules)
    longest = int((workload.prompt_tokens + workload.output_tokens).max()) if workload.prompt_tokens.size else 1
    deployment = Deployment(
        kv_connector=canonical_connector(scenario.kv_connector),
        block_size_tokens=PerfSettings().block_size_tokens,
        max_model_len_tokens=max(1, longest)
        if scenario.max_model_len_tokens is None
        else min(scenario.max_model_len_tokens, arch.spec.max_position_embeddings),
    )
    labels = workload.class_labels if index is None else workload.labels_at(index)
    req = PlanRequest(
        arch,
        LengthStats(prompt, output, quantile, work_sample, labels),
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
        settings=settings,
        arrivals=arrivals,
        deployment=deployment,
        offers=tuple(o for o in offers if o.gpu in prices),
        wan=WanLink(scenario.wan_gb_per_s, scenario.wan_latency_s, scenario.egress_usd_per_gb)
        if scenario.allow_cross_provider
        else None,
        solve=solve,
        prefix_reuse=None if reuse is None else reuse_doc(reuse),
        class_slos=tuple((name, t, p) for name, (t, p) in class_slos(scenario).items()),
        catalog=catalog,
    )
    check_request(req)
    # measured figures (hetplan profile): CPU figures under a GPU's name, dtypes the profile lacks
    warnings.extend(measured_notes(req.gpus, compute_dtype(arch.weight_dtype)))
    warnings.extend(calibration_notes(req))
    return req, workload, warnings, gpu_warnings
