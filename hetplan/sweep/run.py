"""The sweep driver (``hetplan sweep``): expand the grid, skip what ``--resume`` may reuse, run the rest on an
executor, and write the table, the plans and the report.

Output folder (``--out``, default ``sweep-<grid name>``)::

    results.csv        one row per case (hetplan.sweep.table), sorted by case id
    results.parquet    the same, typed (needs pyarrow: pip install 'hetplan[parquet]'; skipped with a note)
    report.md          cheapest plan per group, Pareto fronts, failed cases (hetplan.sweep.report)
    report.html        the same with charts, one self-contained file
    summary.json       what --json prints: counts, executor, timings, cheapest per group
    plans/case-007.json  every planned case's plan document (a plan file: hetplan report/emit/simulate read it),
                       with a ``sweep_case`` block: id, axes, inputs_sha256 and the check's error, if any

Every file is written atomically. An existing table is replaced only with ``--force`` or ``--resume``. With
``--resume`` a case whose plan file exists and records the case's ``inputs_sha256`` is not run again: its row is
rebuilt from the plan file (the same row, since rows depend only on inputs and plan). Cases that failed have no plan
file and run again. Plan files are written as cases finish, so a sweep that is stopped (Ctrl-C) keeps them; the table
and report of the finished cases are written on the way out, and the command exits 130.

On Ray, with ``files="ship"`` (default) the catalog and every file a case reads are put into Ray's object store
once and read from there by the workers; ``files="shared"`` sends only paths (the catalog is still shipped), for
clusters that mount the same folder everywhere.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetplan.budget import check_cases
from hetplan.errors import HetplanError, InputError, OutputExistsError
from hetplan.io import check_output, to_json, undo_new_files_on_write_error, write_atomic
from hetplan.sweep.case import CaseOutcome, CaseTask, run_case
from hetplan.sweep.grid import Case, Grid, expand
from hetplan.sweep.table import build_row, csv_text, parquet_available, write_parquet

RAY_FILES = ("ship", "shared")
OUTPUTS = ("results.csv", "results.parquet", "report.md", "report.html", "summary.json")


class SweepInterrupted(HetplanError):
    """The sweep was stopped (Ctrl-C) after writing what had finished (exit code 130)."""

    exit_code = 130


@dataclass(frozen=True)
class SweepSettings:
    """How to run a sweep: output folder (None: ``sweep-<grid name>``), executor (``local`` or ``ray``),
    workers (None: the cores), Ray address (``local``, ``auto`` or a cluster address) and how Ray workers get
    files (``ship`` or ``shared``), ``resume`` and ``force``."""

    out: Path | None = None
    executor: str = "local"
    workers: int | None = None
    ray_address: str | None = None
    ray_files: str = "ship"
    resume: bool = False
    force: bool = False


#: ``progress(finished, total, row)``: called as each case finishes (``row`` None for reused ones, at the start).
Progress = Callable[[int, int, dict[str, Any] | None], None]


def _check_out(out: Path, settings: SweepSettings) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a folder", fix="choose another --out folder")
    replace = settings.force or settings.resume
    for name in OUTPUTS:
        try:
            check_output(out / name, replace)
        except OutputExistsError as exc:
            fix = "pass --resume to reuse its plan files, --force to replace them, or choose another --out"
            raise OutputExistsError(exc.what, exc.why, fix) from None
    if not replace and (out / "plans").is_dir() and any((out / "plans").glob("*.json")):
        raise OutputExistsError(
            f"{out / 'plans'} already holds plan files",
            "hetplan does not overwrite them unless asked",
            "pass --resume to reuse the matching ones, --force to replace them, or choose another --out",
        )


def _reusable(case: Case, path: Path) -> dict[str, Any] | None:
    """The plan document at ``path`` when it was made for exactly ``case``'s inputs, else None."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = doc.get("sweep_case") if isinstance(doc, dict) else None
    if isinstance(record, dict) and record.get("inputs_sha256") == case.inputs_sha256:
        return dict(doc)
    return None


def case_task(case: Case, files: tuple[str, ...], catalog_sha: str | None, catalog_dir: str | None) -> CaseTask:
    """The task a worker runs for ``case`` (``files``/``catalog_sha``: what is shipped with it on Ray;
    ``catalog_dir``: the driver's catalog folder for local workers)."""
    return CaseTask(case.id, case.inputs_sha256, case.axes, case.scenario, case.base_dir, case.strategy,
                    case.analysis, case.verify, case.policy, files, catalog_sha, catalog_dir)  # fmt: skip


def _catalog_payload() -> tuple[dict[str, bytes], str]:
    from hetplan.catalog.loader import catalog_dir, catalog_sha256

    folder = catalog_dir()
    names = ("gpus.yaml", "models.yaml", "prices.yaml")
    files = {n: (folder / n).read_bytes() for n in names if (folder / n).is_file()}
    return files, catalog_sha256()


def _timings(outcome: CaseOutcome | None, resumed: bool) -> dict[str, Any]:
    from hetplan.units import rnd

    def sec(x: float | None) -> float | None:
        return None if x is None else rnd(x, 4)

    if outcome is None:
        return {"time_plan_s": None, "time_verify_s": None, "worker": "", "resumed": resumed}
    return {"time_plan_s": sec(outcome.plan_s), "time_verify_s": sec(outcome.verify_s), "worker": outcome.worker,
            "resumed": resumed}  # fmt: skip


def run_sweep(grid_path: str | Path, settings: SweepSettings, progress: Progress | None = None) -> dict[str, Any]:
    """Run the sweep of the grid at ``grid_path``; returns the summary document (also ``summary.json``).

    Raises:
        InputError: a bad grid (exit 2, naming the axis) or an output that exists without ``--force``/``--resume``.
        WorkBudgetError: over :data:`hetplan.budget.MAX_UNTIMED_CASES` cases without ``--timeout``.
        HetplanError: Ray missing or unreachable (exit 1). SweepInterrupted: Ctrl-C (exit 130), after writing.
    """

    if settings.ray_files not in RAY_FILES:
        raise InputError(f"unknown --ray-files {settings.ray_files!r}", fix="pass ship or shared")
    if settings.ray_files != "ship" and settings.executor != "ray":
        raise InputError("--ray-files is for --executor ray", fix="add --executor ray, or drop --ray-files")
    grid = expand(grid_path)
    check_cases(len(grid.cases))
    out = settings.out if settings.out is not None else Path(f"sweep-{grid.name}")
    _check_out(out, settings)
    with undo_new_files_on_write_error(out):  # a full disk leaves nothing this run made; Ctrl-C keeps the plans
        return _sweep_into(grid, out, settings, progress)


def _sweep_into(grid: Grid, out: Path, settings: SweepSettings, progress: Progress | None) -> dict[str, Any]:
    """Run the cases of ``grid`` into the checked folder ``out`` (see :func:`run_sweep`)."""
    from hetplan.executors import make_executor

    plans = out / "plans"
    rows: dict[str, dict[str, Any]] = {}
    todo: list[Case] = []
    for case in grid.cases:
        doc = _reusable(case, plans / f"{case.id}.json") if settings.resume else None
        if doc is None:
            todo.append(case)
        else:
            rows[case.id] = build_row(case, "ok", doc, None) | _timings(None, True)
    total = len(grid.cases)
    step = progress or (lambda *_: None)
    step(len(rows), total, None)
    start = time.perf_counter()
    interrupted = False
    executor = make_executor(settings.executor, settings.workers, settings.ray_address) if todo else None
    described = executor.describe() if executor is not None else f"{settings.executor} (nothing to run)"

    def finish(case: Case, outcome: CaseOutcome) -> None:
        if outcome.status == "ok" and outcome.doc is not None:
            plans.mkdir(parents=True, exist_ok=True)
            write_atomic(plans / f"{case.id}.json", to_json(outcome.doc), force=True)
        row = build_row(case, outcome.status, outcome.doc, outcome.error) | _timings(outcome, False)
        rows[case.id] = row
        step(len(rows), total, row)

    try:
        if executor is not None:
            with executor:
                tasks: list[tuple[Any, ...]]
                if executor.ships_files:
                    catalog, sha = _catalog_payload()
                    shared_catalog = executor.share(catalog)
                    refs: dict[str, Any] = {}
                    tasks = []
                    for case in todo:
                        files = case.files if settings.ray_files == "ship" else ()
                        for f in files:
                            if f not in refs:
                                refs[f] = executor.share(Path(f).read_bytes())
                        tasks.append((case_task(case, files, sha, None), shared_catalog, *(refs[f] for f in files)))
                else:
                    from hetplan.catalog.loader import catalog_dir

                    folder = str(catalog_dir())
                    tasks = [(case_task(case, (), None, folder),) for case in todo]
                executor.run(
                    run_case, tasks,
                    lambda i, outcome: finish(todo[i], outcome),
                    lambda i, exc: finish(todo[i], CaseOutcome(todo[i].id, "error",
                                                               error=f"worker failed: {type(exc).__name__}: {exc}")),
                )  # fmt: skip
    except KeyboardInterrupt:
        interrupted = True
    elapsed = time.perf_counter() - start
    summary = _write_outputs(grid, out, rows, described, elapsed, interrupted)
    if interrupted:
        raise SweepInterrupted(
            f"sweep interrupted: {summary['finished']} of {total} cases finished",
            f"the table and report in {out} hold the finished cases; every plan made is in {plans}",
            f"rerun with --resume (and --out {out}) to run the rest",
        )
    return summary


def _write_outputs(
    grid: Grid, out: Path, rows: dict[str, dict[str, Any]], executor: str, elapsed: float, interrupted: bool
) -> dict[str, Any]:
    """Write the table, the report and the summary; returns the summary."""
    from hetplan.sweep.report import render_html, render_markdown, report_doc
    from hetplan.units import rnd

    ordered = [rows[k] for k in sorted(rows)]
    out.mkdir(parents=True, exist_ok=True)
    notes = []
    written = ["results.csv"]
    write_atomic(out / "results.csv", csv_text(ordered), force=True)
    if parquet_available():
        write_parquet(ordered, out / "results.parquet")
        written.append("results.parquet")
    else:
        notes.append("results.parquet not written: pyarrow is not installed (pip install 'hetplan[parquet]')")
    report = report_doc(grid, ordered)
    write_atomic(out / "report.md", render_markdown(report), force=True)
    write_atomic(out / "report.html", render_html(report), force=True)
    written += ["report.md", "report.html", "summary.json"]
    finished = len(ordered)
    resumed = sum(bool(r["resumed"]) for r in ordered)
    summary = {
        "kind": "sweep",
        "grid": grid.name,
        "grid_file": grid.path,
        "out": str(out),
        "executor": executor,
        "cases": len(grid.cases),
        "finished": finished,
        "resumed": resumed,
        "ran": finished - resumed,
        "interrupted": interrupted,
        "counts": report["counts"],
        "verdicts": report["verdicts"],
        "elapsed_s": rnd(elapsed, 4),
        "cases_per_s": rnd((finished - resumed) / elapsed, 4) if elapsed > 0 and finished > resumed else None,
        "files": written,
        "plans": sum(r["status"] == "ok" for r in ordered),
        "groups": report["groups"],
        "failed": report["failed"],
        "notes": notes,
    }
    write_atomic(out / "summary.json", to_json(summary), force=True)
    return summary


__all__ = ["OUTPUTS", "RAY_FILES", "SweepInterrupted", "SweepSettings", "case_task", "run_sweep"]
