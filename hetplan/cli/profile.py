"""``hetplan profile``: measure a GPU (or the CPU), merge profiles into a catalog, emit profiling Jobs, fit A1/A2."""

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hetplan import api
from hetplan.cli.app import CheckedCommand, CheckedGroup, catalog_from_env, err_console, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import (
    ForceFlag,
    ModelOpt,
    PricesOpt,
    ScenarioFileArg,
    SyntheticOpt,
    TimeoutOpt,
    TpListOpt,
    WorkloadOpt,
    cloud_option,
    force_option,
    gpus_option,
    json_option,
    model_option,
    out_option,
    profile_option,
    rate_option,
    tpot_option,
    ttft_option,
)
from hetplan.cli.render.format import fit_numbers
from hetplan.cli.scenario_flags import build_scenario, parse_tp_list, split_list
from hetplan.errors import InputError
from hetplan.io import check_output, dump_for_path, to_json, to_yaml, write_atomic, write_files_atomic

profile_app = typer.Typer(
    cls=CheckedGroup,
    no_args_is_help=False,
    invoke_without_command=True,
    help="Measure a GPU (GEMM TFLOP/s per dtype, memory and host bandwidth, attention, all-reduce) into a profile "
    "file; 'merge' profiles into a catalog folder; 'fit' Cauchy's A1/A2 cost-efficiency model.",
)


@profile_app.callback()
def profile(
    ctx: typer.Context,
    device: Annotated[
        str | None,
        typer.Option("--device", "-d", help="cuda, cuda:N or cpu (cpu: small sizes, a test); default cuda:0."),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer shapes and repeats (about a minute on a GPU).")] = False,
    out: Annotated[
        Path | None, out_option("Write the profile here (YAML; JSON for *.json); with --emit-job, a folder.")
    ] = None,
    force: ForceFlag = False,
    json_out: Annotated[bool, json_option("Print the profile as JSON on stdout.")] = False,
    model: Annotated[str | None, model_option("Model whose weight shapes the GEMMs use (default Llama-3-8B).")] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", "-g", help="Catalog GPU to file the figures under (default: matched)."),
    ] = None,
    kernel_tables: Annotated[
        Path | None,
        typer.Option(
            "--kernel-tables",
            metavar="DIR",
            help="Also write the GEMM, attention and all-reduce rows as kernel tables (CSV) under "
            "DIR/DEVICE/FAMILY/hetplan-profile/VERSION/, for benchmarks/kernel_curves.py --tables DIR.",
        ),
    ] = None,
    emit_job: Annotated[
        bool,
        typer.Option(
            "--emit-job",
            help="Write Kubernetes Jobs that profile each --gpu-label (with --model and --quick passed to each Job; "
            "--device and --gpu are refused: a Job profiles its node's GPU, named from the label).",
        ),
    ] = False,
    gpu_label: Annotated[
        list[str] | None, typer.Option("--gpu-label", help="With --emit-job: a GPU node label value (repeat).")
    ] = None,
    label_key: Annotated[
        str | None,
        typer.Option("--gpu-label-key", help="With --emit-job: label key (default nvidia.com/gpu.product)."),
    ] = None,
    image: Annotated[
        str | None, typer.Option("--image", help="With --emit-job: image with CUDA torch (default PyTorch's).")
    ] = None,
    install: Annotated[
        str | None,
        typer.Option("--install", help="With --emit-job: pip requirement ('' = none; default hetplan-profiler)."),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="With --emit-job: namespace of the Jobs (default).")
    ] = None,
    gpus_per_job: Annotated[
        int | None, typer.Option("--gpus-per-job", help="With --emit-job: GPUs per Job (default 1; 2+: all-reduce).")
    ] = None,
    pvc: Annotated[
        str | None, typer.Option("--pvc", help="With --emit-job: PersistentVolumeClaim that keeps the files.")
    ] = None,
) -> None:
    """Measure one device and write its profile (see docs/profile.md).

    Examples: hetplan profile --quick --out h200.yaml;  hetplan profile --device cpu --quick --out p.yaml;
    hetplan profile --emit-job --gpu-label NVIDIA-H100-80GB-HBM3 --gpu-label NVIDIA-L4 --out jobs/
    """
    if ctx.invoked_subcommand is not None:
        return
    if emit_job:
        given = [
            flag
            for flag, value in (("--device", device), ("--gpu", gpu), ("--kernel-tables", kernel_tables))
            if value is not None
        ]
        if given:
            run_guarded(lambda: _refuse_with_emit_job(given))
        _emit_jobs(
            gpu_label or [],
            out,
            force,
            json_out,
            label_key,
            image,
            install,
            namespace,
            gpus_per_job,
            pvc,
            quick,
            model,
        )
        return
    job_only = [
        flag
        for flag, value in (
            ("--gpu-label", gpu_label or None),
            ("--gpu-label-key", label_key),
            ("--image", image),
            ("--install", install),
            ("--namespace", namespace),
            ("--gpus-per-job", gpus_per_job),
            ("--pvc", pvc),
        )
        if value is not None
    ]
    if job_only:
        run_guarded(lambda: _refuse_job_only(job_only))
    from hetplan.catalog.profile_measure import measure, save_kernel_tables  # the profiler package, imported there

    device = device or "cuda:0"
    model = model or "Llama-3-8B"

    def work() -> Any:
        if out is not None:
            check_output(out, force)
        command = f"hetplan profile --device {device}{' --quick' if quick else ''} --model {model}"
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err_console, transient=True
        ) as bar:
            task = bar.add_task("starting", total=None)

            def tell(name: str, done: int, total: int) -> None:
                bar.update(task, description=f"profiling: {name}", completed=done, total=total)

            asked = command + (f" --gpu {gpu}" if gpu else "")
            doc, prof = measure(device, quick, model, gpu, asked, catalog_from_env(), tell)
        if kernel_tables is not None:  # refused before --out is written: nothing partial
            save_kernel_tables(doc, kernel_tables, force, check_only=True)
        if out is not None:
            write_atomic(out, to_json(doc) if str(out).endswith(".json") else to_yaml(doc), force=force)
        if kernel_tables is not None:
            for path in save_kernel_tables(doc, kernel_tables, force):
                err_console.print(f"wrote {escape(str(path))}")
        return doc, prof

    doc, prof = run_guarded(work)
    if json_out:
        typer.echo(to_json(doc), nl=False)
    else:
        render_profile(prof, Console())
    if out is not None:
        err_console.print(f"wrote {escape(str(out))}")
    elif not json_out:
        err_console.print("not saved: pass --out FILE to keep the profile (and its per-shape tables)")


def _refuse_job_only(flags: list[str]) -> None:
    raise InputError(
        f"{', '.join(flags)} {'is' if len(flags) == 1 else 'are'} for --emit-job",
        "without --emit-job hetplan profiles this machine and writes no Job",
        f"add --emit-job, or drop {', '.join(flags)}",
    )


def _refuse_with_emit_job(flags: list[str]) -> None:
    raise InputError(
        f"{', '.join(flags)} {'does' if len(flags) == 1 else 'do'} not apply to --emit-job",
        "each Job profiles its node's GPU on cuda:0 and files the figures under the catalog GPU its --gpu-label "
        "names (or the device's own name)",
        f"drop {', '.join(flags)}; --model and --quick are passed to every Job",
    )


def render_profile(prof: Any, console: Console) -> None:
    """Summary table of a profile: measured figures, datasheet, efficiency."""
    g, m = prof.gpu, prof.gpu.measured
    label = "CPU" if m.device_kind == "cpu" else "GPU"
    console.print(
        f"[bold]{escape(m.device_name)}[/] ({label}) -> {escape(g.name)} ({escape(prof.match.how)})", highlight=False
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("figure", "measured", "datasheet", "measured / datasheet"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    matched = prof.match.catalog_gpu is not None
    for dtype, value in sorted(m.gemm_tflops.items()):
        eff = prof.efficiency_vs_datasheet.get(dtype)
        sheet = ""
        if matched and eff:
            peak = g.dense_tflops("bf16" if dtype == "tf32" else dtype)[0]
            sheet = f"{peak / 2 if dtype == 'tf32' else peak:,.4g}"
        table.add_row(f"GEMM {dtype} TFLOP/s", f"{value:,.4g}", sheet, f"{eff:.1%}" if eff else "")
    for key, value in (("read", m.memory_read_gb_per_s), ("copy", m.memory_copy_gb_per_s)):
        eff = prof.efficiency_vs_datasheet.get(f"memory_{key}")
        table.add_row(
            f"memory {key} GB/s",
            f"{value:,.4g}",
            f"{g.hbm_gb_per_s:,.4g}" if matched else "",
            f"{eff:.1%}" if eff else "",
        )
    if m.host_to_device_gb_per_s:
        table.add_row("host -> device GB/s (pinned)", f"{m.host_to_device_gb_per_s:,.4g}", "", "")
    if m.allreduce_bus_gb_per_s:
        table.add_row(f"all-reduce bus GB/s ({m.allreduce_gpus} GPUs)", f"{m.allreduce_bus_gb_per_s:,.4g}", "", "")
        table.add_row("all-reduce latency (smallest message)", f"{(m.allreduce_latency_s or 0) * 1e6:,.1f} us", "", "")
    console.print(fit_numbers(table, console))
    for note in prof.notes:
        console.print(f"note: {escape(note)}", highlight=False)


def _emit_jobs(
    labels: list[str],
    out: Path | None,
    force: bool,
    json_out: bool,
    label_key: str | None,
    image: str | None,
    install: str | None,
    namespace: str | None,
    gpus_per_job: int | None,
    pvc: str | None,
    quick: bool,
    model: str | None,
) -> None:
    from hetplan.emit.profile_job import DEFAULT_IMAGE, DEFAULT_INSTALL, JobSettings, build_jobs, job_model

    catalog = catalog_from_env()
    settings = run_guarded(
        lambda: JobSettings(
            label_key or "nvidia.com/gpu.product",
            image or DEFAULT_IMAGE,
            DEFAULT_INSTALL if install is None else install,
            namespace or "default",
            1 if gpus_per_job is None else gpus_per_job,
            quick,
            job_model(model, catalog),
            pvc=pvc,
        )
    )

    def work() -> dict[str, str]:
        files = build_jobs(labels, settings, catalog)
        if out is not None and not json_out:
            if out.exists() and not out.is_dir():
                raise InputError(f"--out {out} is a file", fix="with --emit-job, --out is a folder")
            write_files_atomic({out / name: text for name, text in files.items()}, force=force)
        return files

    files = run_guarded(work)
    if json_out:
        from hetplan.emit.profile_job import build_job

        typer.echo(to_json(dict(build_job(label, settings, catalog) for label in labels)), nl=False)
        return
    if out is None:
        typer.echo("\n---\n".join(files.values()), nl=False)
        return
    err_console.print(
        f"wrote {len(files)} Job(s) to {escape(str(out))} (validated with kubernetes-validate, strict); "
        f"collect each profile with: kubectl logs job/NAME | sed -n '/^# hetplan-profile-begin/,"
        f"/^# hetplan-profile-end/p' | sed '1d;$d' > NAME.yaml"
    )


@profile_app.command("merge", cls=CheckedCommand)
def merge(
    profiles: Annotated[list[Path], typer.Argument(help="Profile files (one per GPU type).")],
    out: Annotated[Path, out_option("Catalog folder to write (gpus, prices, models YAML).")],
    force: Annotated[bool, force_option("Overwrite files in --out.")] = False,
) -> None:
    """Combine profiles into a catalog folder; use it with HETPLAN_CATALOG_DIR=FOLDER hetplan plan ..."""
    from hetplan.catalog.profile_merge import merge_profiles

    written = run_guarded(lambda: merge_profiles(list(profiles), out, catalog_from_env(), force))
    err_console.print(
        f"wrote {len(written)} files to {escape(str(out))}; plan with it: HETPLAN_CATALOG_DIR={escape(str(out))} "
        "hetplan plan ..."
    )


@profile_app.command("fit", cls=CheckedCommand)
def fit(
    scenario_file: ScenarioFileArg = None,
    model: ModelOpt = None,
    workload: WorkloadOpt = None,
    synthetic: SyntheticOpt = None,
    rate: Annotated[float | None, rate_option("Arrival rate, req/s (synthetic or length-only workloads).")] = None,
    gpus: Annotated[str | None, gpus_option("GPU types to fit over, comma-separated.")] = None,
    cloud: Annotated[str | None, cloud_option("Take prices from this cloud.")] = None,
    prices: PricesOpt = None,
    ttft: Annotated[str | None, ttft_option("TTFT SLO with a unit (default 2s).")] = None,
    tpot: Annotated[str | None, tpot_option("TPOT SLO with a unit (default 100ms).")] = None,
    tp: TpListOpt = None,
    profile_files: Annotated[list[Path] | None, profile_option("Profile file(s) with measured figures.")] = None,
    out: Annotated[Path | None, out_option("Save the fit (YAML, or JSON for *.json).")] = None,
    force: ForceFlag = False,
    json_out: Annotated[bool, json_option("Print the fit as JSON on stdout.")] = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Fit CE ~ A1*F_p/price_p + A2*B_d/price_d over every GPU pair (DESIGN 3.1) and rank prefill/decode GPUs.

    Example: hetplan profile fit --model Llama-3-70B --synthetic long-input-short-output --gpus H100,A100-80GB,L40S
    """

    def work() -> dict[str, Any]:
        overrides: dict[str, Any] = {
            "model": model,
            "workload_path": workload,
            "synthetic": synthetic,
            "rate": rate if rate is not None or synthetic is None else 1.0,
            "ttft": ttft,
            "tpot": tpot,
            "gpus": split_list(gpus, "--gpus", "H100,L4") if gpus is not None else None,
            "cloud": cloud,
            "prices": prices,
            "tp": parse_tp_list(tp) if tp is not None else None,
            "goodput_req_per_s": None if scenario_file is not None else 1.0,
        }
        scenario = build_scenario(scenario_file, overrides)
        if out is not None:
            check_output(out, force)
        with err_console.status("fitting A1/A2 over every GPU pair", spinner="dots"):
            doc = api.fit_ce(scenario, list(profile_files or []), catalog=catalog_from_env())
        if out is not None:
            write_atomic(out, dump_for_path(out, doc), force=force)
        return doc

    doc = run_guarded(lambda: run_with_timeout(timeout, work, "profile fit"))
    if json_out:
        typer.echo(to_json(doc), nl=False)
    else:
        from hetplan.cli.render.fit import render_fit

        render_fit(doc, Console())
    if out is not None:
        err_console.print(f"wrote {escape(str(out))}; plan with it: hetplan plan ... --prune-with {escape(str(out))}")
