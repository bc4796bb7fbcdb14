"""The sweep's output files and its summary: ``results.csv`` (and ``results.parquet``), ``report.md``,
``report.html`` and ``summary.json`` (:class:`SweepSummary`, also what ``hetplan sweep --json`` prints and
:func:`hetplan.api.sweep` returns as a mapping). Plan files are written by the driver as cases finish
(:mod:`hetplan.sweep.run`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from hetplan.io import to_json, write_atomic
from hetplan.sweep.grid import Grid
from hetplan.sweep.report import Counts, Failure, GroupResult, Verdicts
from hetplan.sweep.table import SweepRow, csv_text, parquet_available, write_parquet


class SweepSummary(BaseModel):
    """A sweep's summary (``summary.json``; field order is the file's key order).

    Attributes:
        grid / grid_file / out / executor: the grid's name and file, the output folder, the executor as described.
        cases / finished / resumed / ran: cases in the grid, rows written, rows rebuilt from plan files, cases run.
        interrupted: stopped by Ctrl-C or SIGTERM. incomplete: not every case has a row.
        counts / verdicts: rows per status and per simulated-check verdict.
        elapsed_s / cases_per_s: wall seconds of the run (4 significant digits) and cases run per second (None:
            none ran).
        files: the output files written. plans: planned cases (one plan file each).
        groups / failed: the report's cheapest plan per group and failed cases. notes: what the run says aside.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["sweep"] = "sweep"
    grid: str
    grid_file: str
    out: str
    executor: str
    cases: int
    finished: int
    resumed: int
    ran: int
    interrupted: bool
    incomplete: bool
    counts: Counts
    verdicts: Verdicts
    elapsed_s: float
    cases_per_s: float | None
    files: list[str]
    plans: int
    groups: list[GroupResult]
    failed: list[Failure]
    notes: list[str]

    def to_doc(self) -> dict[str, Any]:
        """The summary as a JSON document (``summary.json``, ``--json``)."""
        return self.model_dump(by_alias=True)


def write_outputs(
    grid: Grid,
    out: Path,
    rows: dict[str, SweepRow],
    executor: str,
    elapsed: float,
    interrupted: bool,
    incomplete_note: str | None = None,
) -> SweepSummary:
    """Write the table, the report and the summary of ``rows`` (case id -> row) into ``out``; returns the summary.
    ``incomplete_note`` (a stopped run) is the summary's first note and sets ``incomplete``.

    Raises:
        OutputError: a file cannot be written (a full disk).
    """
    from hetplan.sweep.report import render_html, render_markdown, report_doc
    from hetplan.units import rnd

    ordered = [rows[k] for k in sorted(rows)]
    notes = [incomplete_note] if incomplete_note else []
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
    resumed = sum(r.resumed for r in ordered)
    summary = SweepSummary(
        grid=grid.name,
        grid_file=grid.path,
        out=str(out),
        executor=executor,
        cases=len(grid.cases),
        finished=finished,
        resumed=resumed,
        ran=finished - resumed,
        interrupted=interrupted,
        incomplete=interrupted or finished < len(grid.cases),
        counts=report.counts,
        verdicts=report.verdicts,
        elapsed_s=rnd(elapsed, 4),
        cases_per_s=rnd((finished - resumed) / elapsed, 4) if elapsed > 0 and finished > resumed else None,
        files=written,
        plans=sum(r.status == "ok" for r in ordered),
        groups=report.groups,
        failed=report.failed,
        notes=notes,
    )
    write_atomic(out / "summary.json", to_json(summary.to_doc()), force=True)
    return summary


__all__ = ["SweepSummary", "write_outputs"]
