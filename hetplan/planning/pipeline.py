"""The planning pipeline: scenario → request → solvers → typed :class:`~hetplan.plan.types.Plan`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hetplan.catalog.context import Catalog
from hetplan.catalog.offers import scale_offers
from hetplan.catalog.profile import LoadedProfiles, load_profiles, profile_notes
from hetplan.errors import InfeasibleError, InputError
from hetplan.plan.blocks import DtypeTry, ProfileRecord, PruneWith
from hetplan.plan.types import Plan
from hetplan.planning.document import PlanLater, build_plan
from hetplan.planning.dtypes import AUTO_QUANTIZED, AUTOS, MODEL_DTYPE, model_dtype, quality_note, weight_candidates
from hetplan.planning.forked import plan_workers, run_forked
from hetplan.planning.options import PlanOptions
from hetplan.planning.request import _model, build_request, profile_records, workload_sha256
from hetplan.resources import Resources
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import PlanRequest
from hetplan.solvers.ce_fit import (
    DEFAULT_MIN_R2,
    DEFAULT_TOP_K,
    fit_doc,
    fit_mismatch,
    keep_pairs,
    load_fit,
    low_r2_note,
)
from hetplan.solvers.ce_fit import fit_ce as _fit_ce
from hetplan.solvers.milp import DEFAULT_SETTINGS, SolveSettings


def plan(
    scenario: Scenario,
    options: PlanOptions = PlanOptions(),
    progress: Callable[[str], None] | None = None,
    resources: Resources | None = None,
    deferred: list[PlanLater] | None = None,
    solve: SolveSettings = DEFAULT_SETTINGS,
    lean: bool = False,
    catalog: Catalog | None = None,
) -> Plan:
    """Plan ``scenario`` as ``options`` ask (:class:`hetplan.planning.options.PlanOptions`; its verification fields
    are :func:`hetplan.planning.verify.plan_verified`'s): ``options.strategy`` (cauchy, homogeneous, melange, mixed
    or all), the other strategies as baselines.

    Returns the typed plan (:func:`hetplan.plan.doc.to_doc` gives the ``--json`` output and the plan file),
    deterministic for equal inputs; see :mod:`hetplan.planning.solve`. ``options.analysis`` adds price sensitivity
    and cost versus goodput (extra ILP solves). Of ``options``:
    ``profiles`` are ``hetplan profile`` files whose measured figures replace the datasheet and efficiency priors
    of their GPUs (:mod:`hetplan.catalog.profile`; the plan lists them under ``scenario.profiles`` and says
    what each did); ``prune_with`` is an A1/A2 fit file whose top ``prune_top_k`` heterogeneous GPU pairs (plus
    every homogeneous pair) are the only ones enumerated (:func:`hetplan.solvers.ce_fit.keep_pairs`; None:
    :data:`~hetplan.solvers.ce_fit.DEFAULT_TOP_K`); the plan warns when the fit comes from another scenario or its
    R² is below ``min_r2`` (None: :data:`~hetplan.solvers.ce_fit.DEFAULT_MIN_R2`), and keeps every pair with a GPU
    the fit never saw (:func:`hetplan.solvers.ce_fit.fit_mismatch`). ``resources``: the processes the weight-dtype and
    engine search may use (default: the usable cores; :class:`hetplan.resources.Resources`).
    With ``analysis`` False and a ``deferred`` list, a :class:`~hetplan.planning.document.PlanLater` is appended
    to it that returns this plan whole with its analysis block, computed from the planner that made it (no second
    solve; a ``lean`` plan's other strategies are solved on that planner; an argument replaces ``progress``: None
    for silence). Nothing is appended when the plan was made in worker processes (a weight-dtype search on several
    cores): the caller then plans again.
    ``solve``: how the MILPs run (threads, slice presolve, hard stop; :class:`hetplan.solvers.milp.SolveSettings`).
    ``lean``: solve ``strategy`` alone, without baselines (a re-size attempt; see
    :func:`hetplan.planning.document.build_plan`).
    ``price_factors``: canonical GPU name -> factor applied to every price of that GPU (rented offers and owned
    amortised prices alike) after the request is built (``hetplan explore``'s ``price:GPU=-20%``;
    :func:`reprice`); the plan's ``scenario.prices`` records the moved prices.
    ``catalog``: the GPUs, models, prices and fitted curves to plan with (None: the shipped catalogs).

    Raises:
        InputError: bad scenario fields, profile or fit files. InfeasibleError: no plan meets the target (names
        the binding constraint).
    """
    catalog = catalog or Catalog.shipped()
    strategy, analysis, profiles, prune_with = options.strategy, options.analysis, options.profiles, options.prune_with
    prune_top_k = DEFAULT_TOP_K if options.prune_top_k is None else options.prune_top_k
    min_r2 = DEFAULT_MIN_R2 if options.min_r2 is None else options.min_r2
    price_factors = dict(options.price_factors) or None
    loaded = load_profiles(profiles, catalog) if profiles else None
    later: list[PlanLater] | None = [] if deferred is not None and not analysis else None
    if scenario.weight_dtype not in AUTOS and len(scenario.engines or ()) <= 1:
        if scenario.engines:
            scenario = scenario.model_copy(update={"engine": scenario.engines[0], "engines": None})
        made = _plan_one(scenario, strategy, analysis, progress, loaded, prune_with, prune_top_k, min_r2,
                         deferred=later, solve=solve, lean=lean, price_factors=price_factors,
                         catalog=catalog)  # fmt: skip
    else:
        made = _search_dtypes(scenario, strategy, analysis, progress, loaded, prune_with, prune_top_k, min_r2,
                              resources or Resources(), later, solve, lean, price_factors, catalog)  # fmt: skip

    def finish(made: Plan) -> Plan:
        if loaded is not None:
            # the GPU entries the plan was made with, so plan --verify, simulate and calibrate rebuild the same
            # instances without the profile files
            made = replace(made, profiles=tuple(ProfileRecord.from_doc(r) for r in profile_records(loaded, True)))
        if prune_with is not None:
            made = replace(made, prune_with=PruneWith(file=Path(prune_with).name, top_k=prune_top_k))
        return made

    if deferred is not None and later:
        inner = later[0]

        def whole(*report: Callable[[str], None] | None, with_analysis: bool = True) -> Plan:
            return finish(inner(*report, with_analysis=with_analysis))

        deferred.append(whole)
    return finish(made)


def reprice(req: PlanRequest, factors: Mapping[str, float]) -> PlanRequest:
    """``req`` with every price of each GPU in ``factors`` (canonical name -> factor > 0) multiplied by its factor:
    the $/GPU-hour candidates are ranked by and every offer of that GPU, rented or owned
    (:func:`hetplan.catalog.offers.scale_offers`, as the analysis's price sensitivity moves them); each moved price's
    source says so (``..., x0.8 (what-if)``). A GPU that is not among ``req``'s candidates is left alone (the fp8
    half of a dtype search has fewer candidates; ``hetplan explore`` checks the names against the scenario first).
    """
    factors = {g: f for g, f in factors.items() if g in req.prices}
    prices = dict(req.prices)
    for gpu, f in factors.items():
        p = prices[gpu]
        prices[gpu] = replace(p, usd_per_gpu_hour=p.usd_per_gpu_hour * f, source=f"{p.source}, x{f:g} (what-if)")
    return replace(req, prices=prices, offers=scale_offers(req.offers, factors))


def _search_dtypes(
    scenario: Scenario,
    strategy: str,
    analysis: bool,
    progress: Callable[[str], None] | None,
    loaded: LoadedProfiles | None,
    prune_with: Path | None,
    prune_top_k: int,
    min_r2: float,
    resources: Resources,
    keep: list[PlanLater] | None = None,
    solve: SolveSettings = DEFAULT_SETTINGS,
    lean: bool = False,
    price_factors: Mapping[str, float] | None = None,
    catalog: Catalog | None = None,
) -> Plan:
    """``--weight-dtype auto`` / ``auto-quantized`` or several ``engines``: plan every candidate weight dtype
    (:func:`hetplan.planning.dtypes.weight_candidates`; fp8 on the GPUs with fp8 tensor cores only) on every
    engine and return the cheapest plan, with ``dtype_search`` listing each outcome (with an
    ``engine`` key when several engines were searched). Ties keep the first engine and the model's own dtype.
    With more than one core, the (engine, dtype) plans run in forked processes (:mod:`hetplan.planning.forked`).

    Raises:
        InfeasibleError: no (engine, dtype) has a feasible plan (the first one's reason). InputError: bad scenario
        fields.
    """
    catalog = catalog or Catalog.shipped()
    spec = _model(scenario.model_copy(update={"weight_dtype": MODEL_DTYPE}), catalog).spec
    engines = list(scenario.engines or [scenario.engine])
    keys = [(e, d) for e in engines for d in weight_candidates(spec, scenario.weight_dtype)]
    later: dict[tuple[str, str], PlanLater] = {}  # analyses, computed for the kept plan only
    kept: dict[tuple[str, str], PlanLater] = {}  # the same, handed to the caller (keep)
    Found = tuple[tuple[str, str], Plan | None, InfeasibleError | InputError | None]

    def one(key: tuple[str, str], parallel: bool) -> Found:
        engine, dtype = key
        sc = scenario.model_copy(update={"weight_dtype": dtype, "engine": engine, "engines": None})
        try:
            fp8 = dtype == "fp8" and scenario.weight_dtype == AUTO_QUANTIZED
            if parallel:  # in a worker process: the analysis there too (this process cannot call back into it)
                return key, _plan_one(sc, strategy, analysis, None, loaded, prune_with, prune_top_k, min_r2, fp8,
                                      solve=solve, lean=lean, price_factors=price_factors,
                                      catalog=catalog), None  # fmt: skip
            deferred: list[PlanLater] = []
            made = _plan_one(sc, strategy, False, progress, loaded, prune_with, prune_top_k, min_r2, fp8,
                             deferred if analysis or keep is not None else None, solve=solve, lean=lean,
                             price_factors=price_factors, catalog=catalog)  # fmt: skip
            if deferred:
                (later if analysis else kept)[key] = deferred[0]
            return key, made, None
        except (InfeasibleError, InputError) as exc:
            if dtype == model_dtype(spec) and isinstance(exc, InputError):
                raise  # a bad scenario, not an infeasible dtype
            return key, None, exc

    workers = plan_workers(len(keys), resources.plan_workers)
    if workers > 1:  # each (engine, dtype) in its own process (hetplan.planning.forked)
        if progress is not None:
            progress(f"planning {', '.join(f'{e} {d}' for e, d in keys)} in {workers} processes")
        found = run_forked([lambda k=k: one(k, True) for k in keys], workers)  # type: ignore[misc]
    else:
        found = [one(k, False) for k in keys]
    feasible = [(k, made) for k, made, _ in found if made is not None]
    if not feasible:
        first = found[0][2]
        assert first is not None
        raise first
    key, chosen = min(feasible, key=lambda x: x[1].total_usd_per_hour)
    if key in later:  # the chosen plan whole, with its analysis, from its planner
        chosen = later[key]()

    def which(engine: str) -> dict[str, str]:  # each entry names its engine when several were searched
        return {"engine": engine} if len(engines) > 1 else {}

    tries = tuple(
        DtypeTry(**which(e), weight_dtype=d, kv_dtype=scenario.kv_dtype, status="optimal", strategy=strategy,
                 total_usd_per_hour=made.total_usd_per_hour, chosen=(e, d) == key, gpus=list(made.gpus))
        if made is not None
        else DtypeTry(**which(e), weight_dtype=d, kv_dtype=scenario.kv_dtype, status="infeasible",
                      strategy=strategy, reason=exc.why or exc.what if exc is not None else None, chosen=False)
        for (e, d), made, exc in found
    )  # fmt: skip
    if keep is not None and key in kept:  # the caller computes it later (see plan's deferred)
        whole = kept[key]

        def with_tries(*report: Callable[[str], None] | None, with_analysis: bool = True) -> Plan:
            return replace(whole(*report, with_analysis=with_analysis), dtype_search=tries)

        keep.append(with_tries)
    return replace(chosen, dtype_search=tries)


def _plan_one(
    scenario: Scenario,
    strategy: str,
    analysis: bool,
    progress: Callable[[str], None] | None,
    loaded: LoadedProfiles | None,
    prune_with: Path | None,
    prune_top_k: int,
    min_r2: float,
    fp8_cores_only: bool = False,
    deferred: list[PlanLater] | None = None,
    solve: SolveSettings = DEFAULT_SETTINGS,
    lean: bool = False,
    price_factors: Mapping[str, float] | None = None,
    catalog: Catalog | None = None,
) -> Plan:
    """The plan of one weight dtype (``loaded``'s profiled GPUs replace their catalog entries);
    ``deferred`` and ``lean``: see :func:`hetplan.planning.document.build_plan`; ``solve``: how the MILPs run;
    ``price_factors``: see :func:`plan`."""
    overlay = loaded.specs if loaded is not None else ()
    req, workload, warnings, gpu_warnings = build_request(scenario, fp8_cores_only, overlay, solve, catalog)
    if price_factors:
        req = reprice(req, price_factors)
    if loaded is not None:
        warnings = warnings + profile_notes(loaded, [g.name for g in req.gpus])
    if prune_with is not None:
        fit = load_fit(prune_with)
        # the fit must come from this scenario: warn otherwise, and never prune GPUs it never saw
        fit_notes, unseen = fit_mismatch(fit, req, workload.summary(), min_r2)
        warnings = warnings + fit_notes
        req = replace(req, keep_pairs=keep_pairs(fit.a1, fit.a2, req, prune_top_k, unseen))
    profiled = {prof.gpu.name: name for name, prof in loaded.files} if loaded is not None else {}
    inner: list[PlanLater] | None = [] if deferred is not None else None
    made = build_plan(
        req, scenario, workload, warnings, gpu_warnings, strategy, analysis, progress,
        profiled=profiled, workload_sha256=workload_sha256(scenario), deferred=inner,
        catalog_sha=(catalog or Catalog.shipped()).with_overlay(overlay).sha256, lean=lean,
    )  # fmt: skip

    def finish(made: Plan, lean: bool) -> Plan:
        if req.class_slos and not lean:  # request classes: what sizing on the tightest SLOs would have cost
            from hetplan.planning.whatif import tightest_sizing_note

            said = tightest_sizing_note(req, workload, made.strategy, made.total_usd_per_hour)
            if said:
                made = replace(made, warnings=(*made.warnings, said))
        note = quality_note(req.arch.spec, req.arch.weight_dtype, req.arch.kv_dtype)
        return made if note is None else replace(made, quality_note=note)

    kept = finish(made, lean)
    if deferred is not None and inner:
        later = inner[0]

        def whole(*report: Callable[[str], None] | None, with_analysis: bool = True) -> Plan:
            full = later(*report, with_analysis=with_analysis)
            # a lean plan is completed on its planner: finished as a full plan is; else only the analysis is new
            return finish(full, False) if lean else replace(kept, analysis=full.analysis)

        deferred.append(whole)
    return kept


def fit_ce(
    scenario: Scenario, profiles: Sequence[Path] = (), min_r2: float = DEFAULT_MIN_R2, catalog: Catalog | None = None
) -> dict[str, Any]:
    """Fit Cauchy's A1/A2 cost-efficiency model for ``scenario``'s workload and GPUs (``hetplan profile fit``);
    returns the fit document (:func:`hetplan.solvers.ce_fit.fit_doc`), whose ``warnings`` hold the scenario's
    warnings, what each profile did and a low-R² warning (below ``min_r2``); ``catalog`` as in :func:`plan`.

    Raises:
        InputError: bad scenario fields or files, or fewer than two feasible GPU pairs. InfeasibleError: no GPU
        fits the model or meets the SLOs.
    """
    loaded = load_profiles(profiles, catalog) if profiles else None
    req, workload, warnings, _ = build_request(scenario, overlay=loaded.specs if loaded else (), catalog=catalog)
    if loaded is not None:
        warnings = warnings + profile_notes(loaded, [g.name for g in req.gpus])
    tokens = float(workload.prompt_tokens.mean() + workload.output_tokens.mean())
    fit = _fit_ce(req, tokens)
    warnings = warnings + low_r2_note(fit.r2, min_r2)
    return fit_doc(fit, req, workload.summary(), scenario.name, profile_records(loaded), warnings)
