"""``hetplan plan``: cheapest heterogeneous prefill/decode deployment for a scenario or flags."""

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from hetplan import api
from hetplan.cli.app import catalog_from_env, err_console, resources_from_env, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    ForceFlag,
    GoodputOpt,
    HeadroomOpt,
    InventoryOpt,
    MaxRatioOpt,
    ModelOpt,
    PercentileOpt,
    PerfCalibrationOpt,
    PrefixCacheOpt,
    PricesOpt,
    RouterImageEmitOpt,
    ScenarioFileArg,
    SpotOpt,
    SyntheticOpt,
    TimeoutOpt,
    TpListOpt,
    ValidateEmitFlag,
    WorkloadFormatOpt,
    WorkloadOpt,
    cloud_option,
    emit_dir_option,
    engine_option,
    gpus_option,
    json_option,
    kv_dtype_option,
    out_option,
    profile_option,
    rate_option,
    region_option,
    tpot_option,
    ttft_option,
    weight_dtype_option,
)
from hetplan.cli.render.emit import render_result
from hetplan.cli.render.hetis import render_hetis
from hetplan.cli.render.plan import render_plan, render_verification
from hetplan.cli.render.progress import StepLog, progress_bar
from hetplan.cli.resources import solve_settings
from hetplan.cli.scenario_flags import (
    build_scenario,
    check_emit_flags,
    check_verify_flags,
    emit_settings,
    engine_overrides,
    load_planner,
    parse_inventory,
    parse_tp_list,
    split_list,
)
from hetplan.errors import InputError
from hetplan.io import check_output, dump_for_path, to_json, write_atomic
from hetplan.units import parse_duration_s

if TYPE_CHECKING:
    from hetplan.plan.types import Plan
    from hetplan.scenario import Scenario


def plan(
    scenario_file: ScenarioFileArg = None,
    model: ModelOpt = None,
    workload: WorkloadOpt = None,
    workload_format: WorkloadFormatOpt = None,
    prefix_cache: PrefixCacheOpt = None,
    synthetic: SyntheticOpt = None,
    rate: Annotated[float | None, rate_option("Arrival rate, req/s, for length-only or synthetic workloads.")] = None,
    goodput: GoodputOpt = None,
    ttft: Annotated[str | None, ttft_option("TTFT SLO with a unit, e.g. 2s or 800ms (default 2s).")] = None,
    tpot: Annotated[str | None, tpot_option("TPOT SLO with a unit, e.g. 80ms (default 100ms).")] = None,
    percentile: PercentileOpt = None,
    gpus: Annotated[
        str | None,
        gpus_option("Candidate GPU types, comma-separated (default: the inventory's, else every priced GPU)."),
    ] = None,
    inventory: InventoryOpt = None,
    cloud: Annotated[
        str | None,
        cloud_option(
            "Take prices from this cloud (aws, azure, gcp, lambda, runpod, nebius) (default: the cheapest listing)."
        ),
    ] = None,
    region: Annotated[
        str | None,
        region_option(
            "Rent only in this region, e.g. us-east-2 (default: the cheapest region that has the instances)."
        ),
    ] = None,
    spot: SpotOpt = None,
    prices: PricesOpt = None,
    rent: Annotated[
        bool | None,
        typer.Option(
            "--rent/--no-rent",
            help="Rent cloud instances beside the owned --inventory (default) or use only the owned GPUs.",
        ),
    ] = None,
    allow_cross_provider: Annotated[
        bool | None,
        typer.Option(
            "--allow-cross-provider",
            help="Let a combo's prefill and decode run at different sites (providers, regions, owned), its KV cache "
            "crossing a WAN link priced by --wan-gb-per-s, --wan-latency and --egress-usd-per-gb (docs/purchases.md).",
        ),
    ] = None,
    wan_gb_per_s: Annotated[
        float | None,
        typer.Option("--wan-gb-per-s", help="WAN bandwidth per cross-site combo copy, GB/s (default 1.25)."),
    ] = None,
    wan_latency: Annotated[
        str | None,
        typer.Option("--wan-latency", help="WAN one-way latency with a unit, e.g. 30ms (default 30ms)."),
    ] = None,
    egress_usd_per_gb: Annotated[
        float | None,
        typer.Option("--egress-usd-per-gb", help="Egress $/GB on KV bytes sent across sites (default 0.09)."),
    ] = None,
    headroom: HeadroomOpt = None,
    tp: TpListOpt = None,
    max_ratio: MaxRatioOpt = None,
    weight_dtype: Annotated[str | None, weight_dtype_option()] = None,
    kv_dtype: Annotated[str | None, kv_dtype_option()] = None,
    kv_connector: Annotated[
        str | None,
        typer.Option(
            "--kv-connector",
            help="nixl (default) or mooncake: the KV connector whose TP rule every combo must pass (docs/search.md); "
            "--emit uses it.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        engine_option(
            "Serving engine: vllm (default), sglang or trtllm (emit deploys each); a comma list (vllm,sglang) plans "
            "each and keeps the cheapest plan."
        ),
    ] = None,
    perf_calibration: PerfCalibrationOpt = None,
    out: Annotated[Path | None, out_option("Write the plan file (YAML, or JSON for *.json).")] = None,
    force: ForceFlag = False,
    json_out: Annotated[bool, json_option("Print the plan as JSON on stdout.")] = False,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help="all (default: the cheapest of the strategies below), cauchy (mixed prefill/decode), homogeneous "
            "(one GPU type), melange (aggregated) or hetis (with --pool).",
        ),
    ] = "all",
    analysis: Annotated[
        bool,
        typer.Option(
            "--analysis/--no-analysis",
            help="Add price sensitivity and cost vs goodput (many ILP solves: 1 s to tens of seconds).",
        ),
    ] = True,
    emit_dir: Annotated[
        Path | None,
        emit_dir_option("Also write every deployable target for the plan here (as 'hetplan emit --target all')."),
    ] = None,
    validate: ValidateEmitFlag = False,
    router_image: RouterImageEmitOpt = None,
    # --strategy hetis plans a fixed GPU pool instead (hetplan/planning/hetis.py)
    pool: Annotated[
        Path | None, typer.Option("--pool", help="With --strategy hetis: the GPU pool file (POOL.yaml).")
    ] = None,
    # measured profiles and A1/A2 pruning (hetplan profile; docs/profile.md)
    profile_files: Annotated[
        list[Path] | None,
        profile_option("Profile file from 'hetplan profile' (repeat): measured figures replace datasheet."),
    ] = None,
    prune_with: Annotated[
        Path | None,
        typer.Option("--prune-with", help="A1/A2 fit from 'hetplan profile fit': enumerate only its best GPU pairs."),
    ] = None,
    prune_top_k: Annotated[
        int | None,
        typer.Option("--prune-top-k", help="With --prune-with: heterogeneous GPU pairs kept (default 6)."),
    ] = None,
    # simulator check of the chosen plan (hetplan.sim, hetplan.planning.verify)
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Replay the workload through the plan in the simulator (a trace at the goodput target and its own "
            "rate; Poisson arrivals otherwise), re-size on a miss, and print the verdict (default: on).",
        ),
    ] = True,
    resize: Annotated[
        bool,
        typer.Option(
            "--resize/--no-resize",
            help="With verification: on a simulated miss, re-plan for more demand until the plan is verified "
            "(default: on; --no-resize keeps the plan and says NOT verified).",
        ),
    ] = True,
    verify_policy: Annotated[str, typer.Option("--verify-policy", help="Scheduling policy for the check.")] = "fcfs",
    verify_strict: Annotated[
        bool,
        typer.Option("--verify-strict", help="Exit 1 when the plan is NOT verified (outputs written first)."),
    ] = False,
    confidence: Annotated[
        str,
        typer.Option(
            "--confidence",
            help="With verification: replay the kept plan with steps as slow as the performance model's measured "
            "error at this quantile (p50, p80, p90; none skips it) and report how much slower they may run.",
        ),
    ] = "p80",
    size_for_confidence: Annotated[
        bool,
        typer.Option(
            "--size-for-confidence",
            help="With verification: a plan that misses with steps as slow as the model's error at --confidence is "
            "not verified, so re-sizing buys for it (default: off; the margin is reported either way).",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Also print the solver's figures: the --strategy all tie rule, the MILP status and footers.",
        ),
    ] = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Find the cheapest prefill/decode GPU combos that hold the SLOs at the goodput target.

    Example: hetplan plan examples/llama3-70b-azure-conv.yaml --goodput 8 --ttft 1s
    """

    emitted: list[Any] = []
    steps = StepLog()  # the last progress step, named by --timeout

    def work() -> tuple[dict[str, Any], "Plan | None", float]:
        check_emit_flags(emit_dir, validate, router_image)
        overrides: dict[str, Any] = {
            "model": model,
            "workload_path": workload,
            "workload_format": workload_format,
            "prefix_cache": prefix_cache,
            "synthetic": synthetic,
            "rate": rate,
            "goodput_req_per_s": goodput,
            "ttft": ttft,
            "tpot": tpot,
            "percentile": percentile,
            "gpus": split_list(gpus, "--gpus", "H100,L4") if gpus is not None else None,
            "inventory": parse_inventory(inventory) if inventory is not None else None,
            "cloud": cloud,
            "region": region,
            "spot": spot,
            "prices": prices,
            "rent": rent,
            "allow_cross_provider": allow_cross_provider,
            "wan_gb_per_s": wan_gb_per_s,
            "wan_latency_s": parse_duration_s(wan_latency, "wan_latency", 0.0, 10.0) if wan_latency else None,
            "egress_usd_per_gb": egress_usd_per_gb,
            "headroom": headroom,
            "tp": parse_tp_list(tp) if tp is not None else None,
            "max_ratio": max_ratio,
            "weight_dtype": weight_dtype,
            "kv_dtype": kv_dtype,
            "kv_connector": kv_connector.lower().strip() if kv_connector is not None else None,
            **engine_overrides(engine),
            "perf_calibration": perf_calibration,
        }
        if prune_top_k is not None and prune_with is None:  # profile options (docs/profile.md)
            raise InputError("--prune-top-k is for --prune-with", fix="add --prune-with FIT, or drop --prune-top-k")
        scenario = build_scenario(scenario_file, overrides)
        if out is not None:
            check_output(out, force)  # refuse before any work is done
        level = check_verify_flags(verify, verify_policy, verify_strict, confidence, size_for_confidence)
        if strategy.lower() == "hetis" or pool is not None:
            if profile_files or prune_with is not None:
                raise InputError(
                    "--profile and --prune-with do not apply to --strategy hetis",
                    "a Hetis plan reads measured figures from the pool file",
                    "drop them, and put measured TFLOPS/GB/s in the pool file's GPU entries",
                )
            # the simulator replays prefill/decode combos and aggregated instances, not head-wise splits: a Hetis
            # plan is not verified
            return _hetis_work(scenario, strategy, pool, out, force, emit_dir)
        if emit_dir is not None and not force and (emit_dir / "manifest.json").exists():
            raise InputError(
                f"--emit {emit_dir} already holds emitted files",
                "hetplan does not overwrite them",
                "pass --force, or choose another --emit folder",
            )
        load_planner()
        from hetplan.planning.options import PlanOptions

        start = time.perf_counter()
        # what was asked; verified: plan, simulate, and re-size until the simulation verifies the plan
        options = PlanOptions(
            strategy.lower(), analysis, verify, verify_policy, resize, level, size_for_confidence,
            tuple(profile_files or ()), prune_with, 6 if prune_top_k is None else prune_top_k,
        )  # fmt: skip
        # progress on stderr (a bar on a terminal, else status lines): planning, each simulated check and re-size
        # attempt, the analysis
        with progress_bar(err_console, "planning", enabled=not json_out, log=steps) as bar:
            made = api.plan_with(
                scenario, options, bar.text, resources_from_env(),  # HETPLAN_PLAN_WORKERS
                solve_settings(),  # HETPLAN_SOLVE_THREADS, HETPLAN_SLICE_PRESOLVE
                catalog_from_env(),  # HETPLAN_CATALOG_DIR
            )  # fmt: skip
        elapsed = time.perf_counter() - start
        doc = api.to_doc(made)
        if out is not None:
            write_atomic(out, dump_for_path(out, doc), force=force)
        if emit_dir is not None:
            # emit with the KV connector the plan's deployment rules assumed (hetplan.deploy_rules)
            from hetplan.deploy_rules import canonical_connector

            settings = replace(emit_settings(router_image), kv_connector=canonical_connector(scenario.kv_connector))
            emitted.append(api.emit(made, emit_dir, ("all",), settings, validate=validate, force=force))
        return doc, made, elapsed

    doc, made, elapsed = run_guarded(lambda: run_with_timeout(timeout, work, "plan", steps.describe))
    if json_out:
        typer.echo(to_json(doc), nl=False)
    elif made is None:  # a Hetis pool plan
        from hetplan.plan.blocks.hetis import HetisSpec

        render_hetis(HetisSpec.from_doc(doc), Console())
    else:
        render_plan(made, Console(), verbose=verbose)
    err_console.print(f"planned in {elapsed:.2f} s" + (f"; wrote {escape(str(out))}" if out else ""))
    if made is None:
        err_console.print(f"note: {doc['engine_note']}")
        return
    if made.verification is not None:  # simulator check (hetplan.sim): the verdict is in the table's first block
        render_verification(made.verification, err_console)
    if emitted:
        err_console.print(render_result(emitted[0]), markup=False, highlight=False)
    if verify_strict and (made.verification is None or not made.verification.verified):  # outputs are written
        raise typer.Exit(1)


def _hetis_work(
    scenario: "Scenario", strategy: str, pool: Path | None, out: Path | None, force: bool, emit_dir: Path | None
) -> tuple[dict[str, Any], None, float]:
    """Check the Hetis flags, plan with Hetis, write ``--out``; returns the document, None (no typed plan: a Hetis
    spec is its own kind) and the seconds it took.

    Raises:
        InputError: ``--pool`` without ``--strategy hetis`` or the reverse, or ``--emit`` (nothing to emit).
    """
    from hetplan.api import hetis as hetis_plan

    if strategy.lower() != "hetis":
        raise InputError("--pool is for --strategy hetis", fix="add --strategy hetis, or drop --pool")
    if pool is None:
        raise InputError(
            "--strategy hetis needs a GPU pool", fix="pass --pool POOL.yaml (see examples/hetis/pool.yaml)"
        )
    if emit_dir is not None:
        raise InputError(
            "--emit has no target for a Hetis plan",
            "no serving engine runs Hetis today",
            "drop --emit; --out writes the JSON deployment spec",
        )
    start = time.perf_counter()
    with err_console.status("planning Hetis primaries and head split", spinner="dots"):
        doc = hetis_plan(scenario, pool, catalog_from_env())
    elapsed = time.perf_counter() - start
    if out is not None:
        write_atomic(out, dump_for_path(out, doc), force=force)
    return doc, None, elapsed
