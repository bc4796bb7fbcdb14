"""``hetplan estimate --concurrency`` and ``--points``: closed-loop rows (:func:`hetplan.perf.points.estimate_points`)
read into typed values (:class:`PointView`) and shown as one table."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.table import Table

from hetplan.cli.render.format import fit_numbers


class PointView(BaseModel):
    """What the table shows of one closed-loop row: the point (as given; blank when absent) and its estimate, or
    ``error`` for a row that could not be estimated."""

    model_config = ConfigDict(extra="ignore", frozen=True, protected_namespaces=())

    row: Any = ""
    engine: Any = ""
    model: Any = ""
    gpu: Any = ""
    tp: Any = ""
    concurrency: Any = ""
    isl: Any = ""
    osl: Any = ""
    ttft_s: float = 0.0
    tpot_s: float = 0.0
    output_tokens_per_s: float = 0.0
    notes: list[str] = []
    error: str | None = None


def point_error(row: dict[str, Any]) -> str | None:
    """The row's error, None when it was estimated."""
    return PointView.model_validate(row).error


def print_points(rows: list[dict[str, Any]]) -> None:
    """The closed-loop table: one line per row, an error row with its fields and the error."""
    table = Table(title="closed-loop estimates")
    for col in ("row", "engine", "model", "gpu", "tp", "C", "ISL", "OSL", "TTFT ms", "TPOT ms", "out tok/s", "note"):
        table.add_column(col)
    for r in (PointView.model_validate(row) for row in rows):
        point = [str(x) for x in (r.row, r.engine, r.model, r.gpu, r.tp, r.concurrency, r.isl, r.osl)]
        if r.error is not None:
            table.add_row(*point, "", "", "", "error: " + r.error)
            continue
        table.add_row(*point, f"{r.ttft_s * 1e3:,.1f}", f"{r.tpot_s * 1e3:,.2f}", f"{r.output_tokens_per_s:,.0f}",
                      "; ".join(r.notes))  # fmt: skip
    Console().print(fit_numbers(table))


__all__ = ["PointView", "point_error", "print_points"]
