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
file and run again. Plan files are written as cases finish, so a sweep that is stopped (Ctrl-C or SIGTERM, on the
local pool or Ray) keeps them; the table, report and summary of the finished cases are written on the way out, the
summary with ``"incomplete": true`` and a note saying so, and the command exits 130 (SIGTERM: 143).

On Ray, with ``files="ship"`` (default) the catalog and every file a case reads are put into Ray's object store
once and read from there by the workers; ``files="shared"`` sends only paths (the catalog is still shipped), for
clusters that mount the same folder everywhere.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hetplan.budget import check_cases
from hetplan.catalog.context import Catalog
from hetplan.errors import HetplanError, InputError, OutputError, OutputExistsError
from hetplan.io import check_output, to_json, undo_new_files_on_write_error, write_atomic
from hetplan.sweep.case import CaseOutcome, CaseTask, run_case
from hetplan.sweep.grid import Case, Grid, expand
from hetplan.sweep.outputs import SweepSummary, write_outputs
from hetplan.sweep.planfacts import PlanFacts
from hetplan.sweep.table import SweepRow, Timings, build_row

if TYPE_CHECKING:
    from hetplan.solvers.milp import SolveSettings

RAY_FILES = ("ship", "shared")
OUTPUTS = ("results.csv", "results.parquet", "report.md", "report.html", "summary.json")


class SweepInterrupted(HetplanError):
    """The sweep was stopped (Ctrl-C: exit code 130, SIGTERM: 143) after writing what had finished."""

    exit_code = 130


class _Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM while the cases run (a KeyboardInterrupt, so the executors cancel and stop their workers)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _handlers() -> dict[int, Any]:
    """The SIGINT and SIGTERM handlers now (empty off the main thread, where none can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {int(sig): signal.getsignal(sig) for sig in _SIGNALS}


def _restore(handlers: dict[int, Any]) -> None:
    for sig, handler in handlers.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def _stop_on_signals(before: dict[int, Any], received: list[int]) -> Iterator[None]:
    """While the cases run, SIGINT and SIGTERM stop the sweep cleanly (:class:`_Stopped`, its number appended to
    ``received``): the finished cases are written with a note that the run is incomplete. Installed after the
    executor started, because ``ray.init`` replaces the SIGTERM handler with one that exits at once; ``before``
    (the handlers from before the executor) are put back on the first signal, so a second one stops the writing
    as it would any command, and on the way out (signals the shell ignores stay ignored)."""
    if not before:
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        _restore(before)
        raise _Stopped(signum)

    for sig, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, stop)
    try:
        yield
    finally:
        _restore(before)


def _signal_name(signum: int) -> str:
    return "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C (SIGINT)"


def _check_writable(out: Path) -> None:
    """Make ``out`` and check a file can be created in it, before any case runs (a read-only folder fails now,
    not after the cases; the folders made here are removed again by the caller's clean-up).

    Raises:
        OutputError: the folder cannot be made or written.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".hetplan-write-check.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(
            f"cannot write the sweep's outputs to {out}", str(exc), "choose a writable --out folder (or free space)"
        ) from None


@dataclass(frozen=True)
class SweepSettings:
    """How to run a sweep: output folder (None: ``sweep-<grid name>``), executor (``local`` or ``ray``),
    workers (None: the cores), Ray address (``local``, ``auto`` or a cluster address) and how Ray workers get
    files (``ship`` or ``shared``), ``resume`` and ``force``; ``catalog``: what the cases are planned with (its
    folder goes to local workers, its files to Ray workers; None: the shipped catalogs)."""

    out: Path | None = None
    executor: str = "local"
    workers: int | None = None
    ray_address: str | None = None
    ray_files: str = "ship"
    resume: bool = False
    force: bool = False
    solve: SolveSettings | None = None  # how the cases' MILPs run (hetplan.solvers.milp.SolveSettings)
    catalog: Catalog | None = None


#: ``progress(finished, total, row)``: called as each case finishes with its row as column -> value
#: (:meth:`SweepRow.cells`; None for the reused ones, at the start).
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


def _reusable(case: Case, path: Path) -> PlanFacts | None:
    """What a row reads from the plan file at ``path`` when it was made for exactly ``case``'s inputs, else None."""
    from hetplan.input_checks import load_json, read_text_input

    try:  # a hand-edited plan (100,000 levels deep, a FIFO, a field of the wrong kind) is not reused, never a crash
        facts = PlanFacts.model_validate(load_json(read_text_input(path, "plan file"), f"plan file {path}"))
    except (InputError, ValidationError):
        return None
    record = facts.sweep_case
    return facts if record is not None and record.inputs_sha256 == case.inputs_sha256 else None


def case_task(
    case: Case,
    files: tuple[str, ...],
    catalog_sha: str | None,
    catalog_dir: str | None,
    solve: SolveSettings | None = None,
) -> CaseTask:
    """The task a worker runs for ``case`` (``files``/``catalog_sha``: what is shipped with it on Ray;
    ``catalog_dir``: the driver's catalog folder for local workers; ``solve``: how its MILPs run)."""
    return CaseTask(case.id, case.inputs_sha256, case.axes, case.scenario, case.base_dir, case.strategy,
                    case.analysis, case.verify, case.policy, files, catalog_sha, catalog_dir, solve=solve)  # fmt: skip


def _catalog_payload(catalog: Catalog) -> tuple[dict[str, bytes], str]:
    from hetplan.catalog.context import CATALOG_FILES

    folder = catalog.folder
    files = {n: (folder / n).read_bytes() for n in CATALOG_FILES if (folder / n).is_file()}
    files |= {f"perf/{engine}.yaml": path.read_bytes() for engine, path in catalog.perf_files().items()}
    return files, catalog.sha256


def _timings(outcome: CaseOutcome) -> Timings:
    from hetplan.units import rnd

    def sec(x: float | None) -> float | None:
        return None if x is None else rnd(x, 4)

    return Timings(time_plan_s=sec(outcome.plan_s), time_verify_s=sec(outcome.verify_s), worker=outcome.worker)


def run_sweep(grid_path: str | Path, settings: SweepSettings, progress: Progress | None = None) -> dict[str, Any]:
    """Run the sweep of the grid at ``grid_path``; returns the summary document (``summary.json``,
    :meth:`SweepSummary.to_doc`). Raises as :func:`sweep`."""
    return sweep(grid_path, settings, progress).to_doc()


def sweep(grid_path: str | Path, settings: SweepSettings, progress: Progress | None = None) -> SweepSummary:
    """Run the sweep of the grid at ``grid_path``; returns its summary (also written as ``summary.json``).

    Raises:
        InputError: a bad grid (exit 2, naming the axis) or an output that exists without ``--force``/``--resume``.
        WorkBudgetError: over :data:`hetplan.budget.MAX_UNTIMED_CASES` cases without ``--timeout``.
        HetplanError: Ray missing or unreachable (exit 1). OutputError: ``--out`` cannot be made or written
            (checked before any case runs; exit 1). SweepInterrupted: Ctrl-C (exit 130) or SIGTERM (143), after
            writing the finished cases with ``incomplete`` and a note in the summary.
    """

    if settings.ray_files not in RAY_FILES:
        raise InputError(f"unknown --ray-files {settings.ray_files!r}", fix="pass ship or shared")
    if settings.ray_files != "ship" and settings.executor != "ray":
        raise InputError("--ray-files is for --executor ray", fix="add --executor ray, or drop --ray-files")
    grid = expand(grid_path, settings.catalog)
    check_cases(len(grid.cases))
    out = settings.out if settings.out is not None else Path(f"sweep-{grid.name}")
    _check_out(out, settings)
    with undo_new_files_on_write_error(out):  # a full disk leaves nothing this run made; Ctrl-C keeps the plans
        _check_writable(out)
        return _sweep_into(grid, out, settings, progress)


def _sweep_into(grid: Grid, out: Path, settings: SweepSettings, progress: Progress | None) -> SweepSummary:
    """Run the cases of ``grid`` into the checked folder ``out`` (see :func:`run_sweep`)."""
    from hetplan.executors import make_executor

    plans = out / "plans"
    rows: dict[str, SweepRow] = {}
    todo: list[Case] = []
    for case in grid.cases:
        facts = _reusable(case, plans / f"{case.id}.json") if settings.resume else None
        if facts is None:
            todo.append(case)
        else:
            rows[case.id] = build_row(case, "ok", facts, None, Timings(resumed=True))
    total = len(grid.cases)
    step = progress or (lambda *_: None)
    step(len(rows), total, None)
    start = time.perf_counter()
    interrupted = False
    deadline: BaseException | None = None
    received: list[int] = []
    before = _handlers()  # ray.init replaces SIGTERM's handler: these are put back after the run
    executor = make_executor(settings.executor, settings.workers, settings.ray_address) if todo else None
    described = executor.describe() if executor is not None else f"{settings.executor} (nothing to run)"

    def finish(case: Case, outcome: CaseOutcome) -> None:
        if outcome.status == "ok" and outcome.doc is not None:
            write_atomic(plans / f"{case.id}.json", to_json(outcome.doc), force=True)
        row = build_row(case, outcome.status, outcome.doc, outcome.error, _timings(outcome))
        rows[case.id] = row
        step(len(rows), total, row.cells())

    try:
        if executor is not None:
            with executor, _stop_on_signals(before, received):
                tasks: list[tuple[Any, ...]]
                if executor.ships_files:
                    catalog, sha = _catalog_payload(settings.catalog or Catalog.shipped())
                    shared_catalog = executor.share(catalog)
                    refs: dict[str, Any] = {}
                    tasks = []
                    for case in todo:
                        files = case.files if settings.ray_files == "ship" else ()
                        for f in files:
                            if f not in refs:
                                refs[f] = executor.share(Path(f).read_bytes())
                        tasks.append(
                            (
                                case_task(case, files, sha, None, settings.solve),
                                shared_catalog,
                                *(refs[f] for f in files),
                            )
                        )
                else:
                    folder = str((settings.catalog or Catalog.shipped()).folder)
                    tasks = [(case_task(case, (), None, folder, settings.solve),) for case in todo]
                executor.run(
                    run_case, tasks,
                    lambda i, outcome: finish(todo[i], outcome),
                    lambda i, exc: finish(todo[i], CaseOutcome(todo[i].id, "error",
                                                               error=f"worker failed: {type(exc).__name__}: {exc}")),
                )  # fmt: skip
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM through _stop_on_signals (Ray may raise its own instead)
        interrupted = True
    except BaseException as exc:  # a stop from outside the library: the command's --timeout deadline
        if isinstance(exc, Exception | SystemExit | GeneratorExit):
            raise
        deadline = exc
    finally:
        _restore(before)
    if deadline is not None:  # keep what finished, marked incomplete, then let the deadline through
        cut_note = (
            f"incomplete: stopped by the command's --timeout after {len(rows)} of {total} cases; results.csv, "
            f"the reports and this summary hold only those; rerun with --resume --out {out} to run the rest"
        )
        masked = hasattr(signal, "pthread_sigmask")
        if masked:  # the deadline's timer repeats: hold it off while the finished cases are written
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            write_outputs(grid, out, rows, described, time.perf_counter() - start, True, cut_note)
        finally:
            if masked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
        raise deadline
    stopped_by = received[0] if received else int(signal.SIGINT)
    elapsed = time.perf_counter() - start
    note = None
    if interrupted:
        note = (
            f"incomplete: stopped by {_signal_name(stopped_by)} after {len(rows)} of {total} cases; results.csv, "
            f"the reports and this summary hold only those; rerun with --resume --out {out} to run the rest"
        )
    summary = write_outputs(grid, out, rows, described, elapsed, interrupted, note)
    if interrupted:
        err = SweepInterrupted(
            f"sweep incomplete: stopped by {_signal_name(stopped_by)} after {summary.finished} of {total} cases "
            "finished",
            f"the table, report and summary.json in {out} hold the finished cases (summary.json says incomplete); "
            f"every plan made is in {plans}",
            f"rerun with --resume (and --out {out}) to run the rest",
        )
        err.exit_code = 128 + int(stopped_by)
        raise err
    return summary


__all__ = ["OUTPUTS", "RAY_FILES", "SweepInterrupted", "SweepSettings", "SweepSummary", "case_task", "run_sweep",
           "sweep"]  # fmt: skip
