"""``hetplan plan``: cheapest heterogeneous prefill/decode deployment for a scenario or flags."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan import api
from hetplan.catalog.loader import format_validation
from hetplan.cli.main import app, err_console, run_guarded
from hetplan.errors import InputError
from hetplan.io import check_output, dump_for_path, to_json, write_atomic
from hetplan.scenario import Scenario, load_scenario
from hetplan.units import format_duration, format_signed_percent

FLAG_FOR_FIELD = {
    "goodput_req_per_s": "--goodput",
    "headroom": "--headroom",
    "tp": "--tp",
    "max_ratio": "--max-ratio",
    "gpus": "--gpus",
    "inventory": "--inventory",
    "cloud": "--cloud",
    "slo.ttft": "--ttft",
    "slo.tpot": "--tpot",
    "slo.percentile": "--percentile",
    "workload.synthetic.rate_per_s": "--rate/--goodput",
    "workload.rate_per_s": "--rate",
    "workload.synthetic.class": "--synthetic",
}


def _split(text: str, flag: str, example: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise InputError(f"{flag}: empty list", fix=f"pass e.g. {flag} {example}")
    return items


def _inventory(text: str) -> dict[str, int]:
    inv: dict[str, int] = {}
    for item in _split(text, "--inventory", "H800=16,H20=32"):
        name, sep, count = item.partition("=")
        if not sep or not count.strip().isdigit() or not name.strip():
            raise InputError(
                f"--inventory: cannot read {item!r}",
                "expected GPU=COUNT with a whole number",
                "write e.g. --inventory H800=16,A800=32,H20=32",
            )
        if name.strip() in inv:
            raise InputError(f"--inventory names {name.strip()} twice", fix="give each GPU type once")
        inv[name.strip()] = int(count)
    return inv


def _tp_list(text: str) -> list[int]:
    items = _split(text, "--tp", "1,2,4,8")
    if not all(x.isdigit() for x in items):
        raise InputError(f"--tp: cannot read {text!r}", "expected whole numbers", "pass e.g. --tp 1,2,4,8")
    return [int(x) for x in items]


def build_scenario(scenario_file: Path | None, overrides: dict[str, Any]) -> Scenario:
    """Merge a scenario file (optional) with command-line overrides and validate the result.

    Paths given on the command line are made absolute (they are relative to the working directory, the
    scenario's own paths to its folder).
    """
    base: dict[str, Any] = {}
    base_dir = "."
    if scenario_file is not None:
        loaded = load_scenario(scenario_file)
        base = loaded.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
        base_dir = loaded.base_dir
    if overrides.get("workload_path") is not None and overrides.get("synthetic") is not None:
        raise InputError("--workload and --synthetic both given", fix="pass one of them")
    for key, value in overrides.items():
        if value is None:
            continue
        if key in ("ttft", "tpot", "percentile"):
            base.setdefault("slo", {})[key] = value
        elif key == "workload_path":
            base["workload"] = {"path": str(Path(value).resolve())}
            if overrides.get("workload_format") is not None:
                base["workload"]["format"] = overrides["workload_format"]
            if overrides.get("rate") is not None:
                base["workload"]["rate_per_s"] = overrides["rate"]
        elif key == "synthetic":
            rate = overrides["rate"] if overrides.get("rate") is not None else overrides.get("goodput_req_per_s")
            if rate is None:
                raise InputError(
                    "--synthetic needs an arrival rate",
                    "a synthetic workload has no timestamps",
                    "pass --rate REQ_PER_S or --goodput REQ_PER_S",
                )
            if overrides.get("workload_format") is not None:
                raise InputError("--workload-format applies to trace files, not --synthetic", fix="drop it")
            base["workload"] = {"synthetic": {"class": value, "rate_per_s": rate}}
        elif key in ("workload_format", "rate"):
            if overrides.get("workload_path") is None and overrides.get("synthetic") is None:
                workload = base.get("workload")
                if workload is None or "synthetic" in workload:
                    flag = "--workload-format" if key == "workload_format" else "--rate"
                    raise InputError(f"{flag} needs a trace file", fix="pass --workload TRACE (or --synthetic)")
                workload["format" if key == "workload_format" else "rate_per_s"] = value
        elif key in ("prices", "model") and (key == "prices" or Path(str(value)).exists()):
            base[key] = str(Path(value).resolve())
        else:
            base[key] = value
    if "model" not in base:
        raise InputError("no model given", fix="pass --model NAME or a scenario file with 'model:'")
    if "workload" not in base:
        raise InputError("no workload given", fix="pass --workload TRACE, --synthetic CLASS, or a scenario file")
    try:
        scenario = Scenario.model_validate(base)
    except ValidationError as exc:
        raise InputError("invalid plan settings", _with_flags(format_validation(exc)), "fix the named values") from None
    return scenario.with_base_dir(base_dir)


def _with_flags(text: str) -> str:
    """Add the command-line flag after each scenario field a validation message names."""
    for field_name, flag in sorted(FLAG_FOR_FIELD.items(), key=lambda x: -len(x[0])):
        text = text.replace(f"{field_name}:", f"{field_name} ({flag}):")
    return text


@app.command()
def plan(
    scenario_file: Path = typer.Argument(None, help="Scenario YAML (flags override its fields).", show_default=False),
    model: str = typer.Option(None, "--model", "-m", help="Catalog model name or config.json path."),
    workload: Path = typer.Option(None, "--workload", "-w", help="Trace: Azure CSV, Mooncake JSONL or length CSV."),
    workload_format: str = typer.Option(None, "--workload-format", help="auto, azure, mooncake or lengths."),
    synthetic: str = typer.Option(
        None, "--synthetic", help="Synthetic class: long-input-short-output, balanced, short-input-long-output."
    ),
    rate: float = typer.Option(None, "--rate", help="Arrival rate, req/s, for length-only or synthetic workloads."),
    goodput: float = typer.Option(None, "--goodput", help="Goodput target, req/s (default: the trace's rate)."),
    ttft: str = typer.Option(None, "--ttft", help="TTFT SLO with a unit, e.g. 2s or 800ms (default 2s)."),
    tpot: str = typer.Option(None, "--tpot", help="TPOT SLO with a unit, e.g. 80ms (default 100ms)."),
    percentile: str = typer.Option(None, "--percentile", help="SLO percentile, e.g. 90 or p99 (default 90)."),
    gpus: str = typer.Option(
        None, "--gpus", help="Candidate GPU types, comma-separated (default: the inventory's, else every priced GPU)."
    ),
    inventory: str = typer.Option(None, "--inventory", help="GPU counts available, e.g. H800=16,H20=32."),
    cloud: str = typer.Option(
        None,
        "--cloud",
        help="Take prices from this cloud (aws, azure, gcp, lambda, runpod, nebius) (default: the cheapest listing).",
    ),
    spot: bool = typer.Option(None, "--spot/--on-demand", help="Use spot prices."),
    prices: Path = typer.Option(None, "--prices", help="Price file overriding catalog prices."),
    headroom: float = typer.Option(None, "--headroom", help="Extra goodput to provision, fraction (default 0.1)."),
    tp: str = typer.Option(None, "--tp", help="TP degrees to consider, e.g. 1,2,4,8."),
    max_ratio: int = typer.Option(None, "--max-ratio", help="Largest n and m in an n:m combo (default 8)."),
    weight_dtype: str = typer.Option(None, "--weight-dtype", help="bf16, fp16, fp8, int8 or int4."),
    kv_dtype: str = typer.Option(
        None, "--kv-dtype", help="bf16, fp16 or fp8 (vLLM keeps a 16-bit KV cache in the weight dtype)."
    ),
    out: Path = typer.Option(None, "--out", "-o", help="Write the plan file (YAML, or JSON for *.json)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON on stdout."),
    strategy: str = typer.Option(
        "cauchy",
        "--strategy",
        help="cauchy (mixed prefill/decode), homogeneous (one GPU type), melange (aggregated) or hetis (with --pool).",
    ),
    analysis: bool = typer.Option(
        True,
        "--analysis/--no-analysis",
        help="Add price sensitivity and cost vs goodput (many ILP solves: 1 s to tens of seconds).",
    ),
    emit_dir: Path = typer.Option(
        None, "--emit", help="Also write every deployable target for the plan here (as 'hetplan emit --target all')."
    ),
    validate: bool = typer.Option(False, "--validate", help="With --emit: check the manifests offline first."),
    router_image: str = typer.Option(
        None, "--router-image", help="With --emit: image with vllm-router (as 'hetplan emit --router-image')."
    ),
    # --- Hetis (issue 7): --strategy hetis plans a fixed GPU pool; see hetplan/planning/hetis.py ---
    pool: Path = typer.Option(None, "--pool", help="With --strategy hetis: the GPU pool file (POOL.yaml)."),
    # --- end Hetis ---
    # -- measured profiles and A1/A2 pruning (hetplan profile; docs/profile.md) --
    profile_files: list[Path] = typer.Option(
        None, "--profile", help="Profile file from 'hetplan profile' (repeat): measured figures replace datasheet."
    ),
    prune_with: Path = typer.Option(
        None, "--prune-with", help="A1/A2 fit from 'hetplan profile fit': enumerate only its best GPU pairs."
    ),
    prune_top_k: int = typer.Option(
        None, "--prune-top-k", help="With --prune-with: heterogeneous GPU pairs kept (default 6)."
    ),
    # -- end of profile options --
    # -- simulator check of the chosen plan (hetplan.sim) -------------------------------------------------------
    verify: bool = typer.Option(
        False, "--verify", help="Replay the scenario's workload through the plan in the simulator; flag SLO misses."
    ),
    verify_policy: str = typer.Option("fcfs", "--verify-policy", help="Scheduling policy for --verify."),
    verify_strict: bool = typer.Option(
        False,
        "--verify-strict",
        help="With --verify: exit 1 when the simulation misses an SLO (outputs written first).",
    ),
    verify_resize: bool = typer.Option(
        False,
        "--verify-resize",
        help="With --verify: on a simulated miss, re-plan with more goodput headroom until the simulation holds "
        "the SLOs, and keep the cheapest such plan.",
    ),
    # -- end of simulator check ---------------------------------------------------------------------------------
) -> None:
    """Find the cheapest prefill/decode GPU combos that hold the SLOs at the goodput target.

    Example: hetplan plan examples/llama3-70b-azure-conv.yaml --goodput 8 --ttft 1s
    """

    emitted: list[Any] = []

    def work() -> tuple[dict[str, Any], float]:
        if validate and emit_dir is None:
            raise InputError("--validate checks emitted files", fix="add --emit DIR")
        if router_image is not None and emit_dir is None:
            raise InputError("--router-image is for emitted files", fix="add --emit DIR")
        overrides: dict[str, Any] = {
            "model": model,
            "workload_path": workload,
            "workload_format": workload_format,
            "synthetic": synthetic,
            "rate": rate,
            "goodput_req_per_s": goodput,
            "ttft": ttft,
            "tpot": tpot,
            "percentile": percentile,
            "gpus": _split(gpus, "--gpus", "H100,L4") if gpus is not None else None,
            "inventory": _inventory(inventory) if inventory is not None else None,
            "cloud": cloud,
            "spot": spot,
            "prices": prices,
            "headroom": headroom,
            "tp": _tp_list(tp) if tp is not None else None,
            "max_ratio": max_ratio,
            "weight_dtype": weight_dtype,
            "kv_dtype": kv_dtype,
        }
        if prune_top_k is not None and prune_with is None:  # profile options (docs/profile.md)
            raise InputError("--prune-top-k is for --prune-with", fix="add --prune-with FIT, or drop --prune-top-k")
        scenario = build_scenario(scenario_file, overrides)
        if out is not None:
            check_output(out, force)  # refuse before any work is done
        if verify or verify_strict:  # simulator check (hetplan.sim): refuse bad options before planning
            from hetplan.sim.policies import POLICIES

            if not verify:
                raise InputError("--verify-strict needs --verify", fix="add --verify, or drop --verify-strict")
            if verify_policy.lower().strip() not in POLICIES:
                raise InputError(
                    f"unknown --verify-policy {verify_policy!r}",
                    f"known: {', '.join(POLICIES)}",
                    "pass --verify-policy fcfs|sjf|edf|cascade",
                )
        if verify_resize and not verify:
            raise InputError("--verify-resize needs --verify", fix="add --verify, or drop --verify-resize")
        if verify_policy.lower().strip() != "fcfs" and not verify:
            raise InputError("--verify-policy needs --verify", fix="add --verify, or drop --verify-policy")
        # --- Hetis (issue 7) ---
        if strategy.lower() == "hetis" or pool is not None:
            from hetplan.cli.hetis_render import hetis_work

            if profile_files or prune_with is not None:
                raise InputError(
                    "--profile and --prune-with do not apply to --strategy hetis",
                    "a Hetis plan reads measured figures from the pool file",
                    "drop them, and put measured TFLOPS/GB/s in the pool file's GPU entries",
                )
            if verify:
                raise InputError(
                    "--verify does not apply to --strategy hetis",
                    "the simulator replays prefill/decode combos and aggregated instances, not head-wise splits",
                    "drop --verify",
                )

            return hetis_work(scenario, strategy, pool, out, force, emit_dir)
        # --- end Hetis ---
        if emit_dir is not None and not force and (emit_dir / "manifest.json").exists():
            raise InputError(
                f"--emit {emit_dir} already holds emitted files",
                "hetplan does not overwrite them",
                "pass --force, or choose another --emit folder",
            )
        start = time.perf_counter()
        plan_kwargs: dict[str, Any] = {
            "profiles": list(profile_files or []),
            "prune_with": prune_with,
            "prune_top_k": 6 if prune_top_k is None else prune_top_k,
        }
        with err_console.status("planning", spinner="dots") as status:
            if verify_resize:  # plan, simulate, and re-plan with more headroom until the simulation holds the SLOs
                made = api.plan_verified(
                    scenario, strategy.lower(), analysis, verify_policy, resize=True,
                    progress=lambda text: status.update(text), **plan_kwargs,
                )  # fmt: skip
            else:
                made = api.plan(
                    scenario, strategy.lower(), analysis, progress=lambda text: status.update(text), **plan_kwargs
                )
        elapsed = time.perf_counter() - start
        doc = api.to_doc(made)
        if out is not None:
            write_atomic(out, dump_for_path(out, doc), force=force)
        if verify and not verify_resize:  # simulator check (hetplan.sim); the plan is already written
            try:
                with err_console.status("simulating the plan", spinner="dots"):
                    made = api.verify(made, scenario, verify_policy)
            except InputError as exc:
                kept = f"; the plan was written to {out}" if out is not None else ""
                raise InputError(f"--verify failed: {exc.what}{kept}", exc.why, exc.fix) from None
            doc = api.to_doc(made)
            if out is not None:
                write_atomic(out, dump_for_path(out, doc), force=True)
        if emit_dir is not None:
            emitted.append(
                api.emit(made, emit_dir, ("all",), _emit_settings(router_image), validate=validate, force=force)
            )
        return doc, elapsed

    doc, elapsed = run_guarded(work)
    # --- Hetis (issue 7) ---
    if doc.get("kind") == "hetis-deployment":
        from hetplan.cli.hetis_render import hetis_output

        hetis_output(doc, json_out, out, elapsed)
        return
    # --- end Hetis ---
    if json_out:
        typer.echo(to_json(doc), nl=False)
    else:
        render_plan(doc, Console())
    err_console.print(f"planned in {elapsed:.2f} s" + (f"; wrote {escape(str(out))}" if out else ""))
    if "verification" in doc:  # simulator check (hetplan.sim)
        v = doc["verification"]
        err_console.print(f"verify: {v['summary']}", highlight=False, markup=False)
        if "resized" in v:
            r = v["resized"]
            err_console.print(
                f"verify: resized: the plan at headroom {r['headroom_asked']:g} missed in simulation; headroom "
                f"{r['headroom_used']:g} holds the SLOs: ${r['usd_per_hour_before']:,.2f}/h -> "
                f"${r['usd_per_hour_after']:,.2f}/h ({len(r['attempts'])} plans tried)",
                highlight=False,
                markup=False,
            )
        for text in v["warnings"]:
            err_console.print(f"[yellow]warning (simulated):[/] {escape(text)}", highlight=False)
        for text in v["misses"]:
            err_console.print(f"[yellow]SLO miss (simulated):[/] {escape(text)}", highlight=False)
    if emitted:
        from hetplan.cli.emit import render_result

        err_console.print(render_result(emitted[0]), markup=False, highlight=False)
    if verify_strict and doc.get("verification", {}).get("misses"):  # simulator check: outputs are written
        raise typer.Exit(1)


def _combo_rows(table: Table, combos: list[dict[str, Any]], wide: bool) -> None:
    for c in combos:
        cells = [
            f"{c['n_prefill']}x {c['prefill_gpu']} TP{c['prefill_tp']}\n"
            f"-> {c['n_decode']}x {c['decode_gpu']} TP{c['decode_tp']}",
            str(c["count"]),
            f"{c['usd_per_hour']:.2f}",
            f"{c['goodput_req_per_s']:.2f}",
            f"{c['tokens_per_usd'] / 1e3:,.0f}k",
            format_duration(c["predicted_ttft_s"]),
            format_duration(c["predicted_tpot_s"]),
            f"{c['utilization'] * 100:.0f}%",
            c["bound_by"].replace("kv_transfer", "kv"),
        ]
        if not wide:
            del cells[8], cells[4]
        table.add_row(*cells)


TITLES = {
    "cauchy": "Cauchy plan (cheapest mixed prefill/decode deployment)",
    "homogeneous": "Best homogeneous fleet",
    "melange": "Mélange plan (aggregated serving)",
}


def render_plan(doc: dict[str, Any], console: Console) -> None:
    """Rich tables for a plan document: the deployment, then every strategy side by side."""
    sc = doc["scenario"]
    slo = sc["slo"]
    console.print(
        f"[bold]{escape(sc['name'])}[/]: {escape(sc['model'])} ({sc['weight_dtype']}), workload "
        f"{escape(sc['workload']['name'])} "
        f"({sc['workload']['requests']} requests), goodput target {sc['goodput_target_req_per_s']:.4g} req/s "
        f"+{sc['headroom'] * 100:g} % headroom, SLO p{slo['percentile']:g} TTFT "
        f"{format_duration(slo['ttft_s'])}, TPOT {format_duration(slo['tpot_s'])}"
    )
    title = TITLES.get(doc["strategy"], doc["strategy"])
    if doc.get("gpu"):
        title += f" ({doc['gpu']} only)"
    if doc["combos"]:
        _plan_table(title, doc, f"p{slo['percentile']:g}", console)
    else:
        _instances_table(title, doc, console)
    _comparison(doc, console)
    s = doc["solver"]
    console.print(
        f"solver: {s['backend']}, {s['status']}, gap {s['mip_gap']:g}; {s['combos_enumerated']:,} combos "
        f"enumerated over {s['instance_options']} instance options, {s['combos_in_ilp']:,} in the ILP, "
        f"pruning {s['pruning']}"
    )
    for name, part in doc.get("baselines", {}).items():
        if part.get("status") != "infeasible" and part["total_usd_per_hour"] < doc["total_usd_per_hour"]:
            console.print(
                f"note: {name} costs ${part['total_usd_per_hour']:.2f}/h here, this plan "
                f"{(doc['total_usd_per_hour'] / part['total_usd_per_hour'] - 1) * 100:.1f} % more; plan it with "
                f"--strategy {name}.",
                highlight=False,
            )
    for w in doc.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


def _comparison(doc: dict[str, Any], console: Console) -> None:
    rows = [(doc["strategy"], doc)] + list(doc.get("baselines", {}).items())
    table = Table(title="Strategies compared", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("strategy", "$/h", "req/s", "tok/USD", "GPUs", "plan saves"):
        table.add_column(col, justify="left" if col in ("strategy", "GPUs") else "right")
    for name, part in rows:
        label = name + (" (this plan)" if part is doc else "")
        if part.get("status") == "infeasible":
            table.add_row(label, "-", "-", "-", "infeasible", "-")
            continue
        gpus = ", ".join(f"{n}x {g}" for g, n in part["gpus_used"].items())
        saves = "" if part is doc else format_signed_percent(1 - doc["total_usd_per_hour"] / part["total_usd_per_hour"])
        table.add_row(
            label,
            f"{part['total_usd_per_hour']:.2f}",
            f"{part['goodput_req_per_s']:.2f}",
            f"{part['tokens_per_usd'] / 1e3:,.0f}k",
            gpus,
            saves,
        )
    console.print(table)
    for name, part in rows[1:]:
        if part.get("status") == "infeasible":
            console.print(f"[yellow]{name}: infeasible[/] - {escape(part['reason'])}", highlight=False)


def _instances_table(title: str, part: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"{title}: ${part['total_usd_per_hour']:.2f}/h, {part['goodput_req_per_s']:.2f} req/s, "
        f"{part['tokens_per_usd']:,.0f} tokens/USD (in+out)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for col in ("instance", "n", "$/h each", "util", "traffic"):
        table.add_column(col, justify="left" if col == "instance" else "right", no_wrap=True)
    for inst in part["instances"]:
        table.add_row(
            f"{inst['gpu']} TP{inst['tp']} ({inst['role']})",
            str(inst["count"]),
            f"{inst['usd_per_hour']:.2f}",
            f"{inst['utilization'] * 100:.0f}%",
            f"{inst['traffic_share'] * 100:.0f}%",
        )
    console.print(table)
    console.print("GPUs: " + ", ".join(f"{n} x {g}" for g, n in part["gpus_used"].items()))


def _plan_table(title: str, part: dict[str, Any], q: str, console: Console) -> None:
    table = Table(
        title=f"{title}: ${part['total_usd_per_hour']:.2f}/h, {part['goodput_req_per_s']:.2f} req/s, "
        f"{part['tokens_per_usd']:,.0f} tokens/USD (in+out)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    wide = console.width >= 100
    table.add_column("combo: prefill -> decode", no_wrap=True)
    for col in ("n", "$/h", "req/s", "tok/$", f"{q} TTFT", "TPOT", "util"):
        if wide or col != "tok/$":
            table.add_column(col, justify="right", no_wrap=True)
    if wide:
        table.add_column("bound", no_wrap=True)
    _combo_rows(table, part["combos"], wide)
    console.print(table)
    console.print("GPUs: " + ", ".join(f"{n} x {g}" for g, n in part["gpus_used"].items()))


def _emit_settings(router_image: str | None) -> Any:
    """Emit settings for --emit: the defaults of ``hetplan emit``, with --router-image when given."""
    from hetplan.emit.ir import EmitSettings

    return EmitSettings() if router_image is None else EmitSettings(router_image=router_image)
