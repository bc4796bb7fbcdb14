"""A points table (``hetplan estimate --points FILE.csv``) read and checked row by row: its columns
(:data:`COLUMNS`, :data:`REQUIRED`, :data:`DEFAULTS`), one :class:`Point` per row, and :func:`read_points`. The
estimates for all rows at once: :mod:`hetplan.perf.points`.

A table without a required column is refused as a whole (:class:`~hetplan.errors.InputError`); a row with a bad
cell (a NaN or negative number, a fraction out of range) is refused by :func:`parse_point` with its error, and the
estimator reports it on that row. Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetplan.budget import WorkBudgetError
from hetplan.errors import InputError

REQUIRED = ("model", "gpu", "concurrency", "isl", "osl")


COLUMNS = (
    "engine",
    "model",
    "gpu",
    "tp",
    "pp",
    "ep",
    "dp_attention",
    "weight_dtype",
    "kv_dtype",
    "concurrency",
    "isl",
    "osl",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "gpu_memory_utilization",
)


DEFAULTS: dict[str, Any] = {"engine": "vllm", "tp": 1, "pp": 1, "ep": 1, "dp_attention": 1, "weight_dtype": "bf16"}


#: Largest whole number a cell may hold (concurrency, token counts, parallel degrees): the 10M-token bound of
#: trace lengths (hetplan.workload.model.MAX_TOKENS); a row's lengths must also fit the model's window.
MAX_CELL = 10_000_000


INTEGER_COLUMNS = ("tp", "pp", "ep", "dp_attention", "concurrency", "isl", "osl", "max_num_seqs",
                   "max_num_batched_tokens", "max_model_len")  # fmt: skip


@dataclass(frozen=True)
class Point:
    """One validated operating point (see module docstring for the fields)."""

    engine: str
    model: str
    gpu: str
    tp: int
    pp: int
    ep: int
    dp_attention: int
    weight_dtype: str
    kv_dtype: str
    concurrency: int
    isl: int
    osl: int
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None


def _fraction(name: str, value: Any) -> float:
    """``value`` as a fraction in (0, 1], or ValueError naming the column."""
    from hetplan.input_checks import parse_number

    text = str(value).strip()
    wrong = ValueError(f"{name} must be a fraction in (0, 1], got {text[:24]!r}{'...' * (len(text) > 24)}")
    try:
        number = parse_number(text, name)
    except InputError:
        raise wrong from None
    if not 0 < number <= 1:
        raise wrong
    return float(number)


def _blank(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def _integer(name: str, value: Any) -> int:
    """``value`` as a whole number in [1, :data:`MAX_CELL`], or ValueError naming the column (the numeric rule of
    :func:`hetplan.input_checks.parse_number` first: ASCII, finite, at most 1e15, so a 5,000-digit cell is never
    converted)."""
    from hetplan.input_checks import parse_number

    text = str(value).strip()
    wrong = ValueError(
        f"{name} must be a whole number in [1, {MAX_CELL:,}], got {text[:24]!r}{'...' * (len(text) > 24)}"
    )
    try:
        number = parse_number(text, name)
    except InputError:
        raise wrong from None
    if number < 1 or number != int(number) or number > MAX_CELL:
        raise wrong
    return int(number)


def parse_point(raw: dict[str, Any]) -> Point:
    """A :class:`Point` from one table row (strings or numbers; blanks take defaults).

    Raises:
        ValueError: a missing required value or a bad number, naming the column.
    """
    from hetplan.perf.engines import default_kv_dtype, engine_rules

    vals: dict[str, Any] = {}
    for name in COLUMNS:
        value = raw.get(name)
        if _blank(value):
            if name in REQUIRED:
                raise ValueError(f"{name} is empty")
            if name in DEFAULTS:
                vals[name] = DEFAULTS[name]
            continue
        if name in INTEGER_COLUMNS:
            vals[name] = _integer(name, value)
        elif name == "gpu_memory_utilization":
            vals[name] = _fraction(name, value)
        else:
            vals[name] = str(value).strip()
    try:
        vals["engine"] = engine_rules(vals["engine"]).name
    except InputError as exc:
        raise ValueError(exc.what) from None
    if "kv_dtype" not in vals:
        vals["kv_dtype"] = default_kv_dtype(vals["engine"], vals["weight_dtype"])
    return Point(**vals)


#: Rows of one points file (20,000 rows take about 4 s; a 64 MiB file holds over a million).
MAX_POINTS = 200_000


def read_points(path: Path, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rows of a points CSV as dicts of strings (input order). The file must be a regular file (never a FIFO or
    ``/dev/zero``) of at most 64 MiB; every column name appears once and every row has exactly one cell per column.
    ``extra``: further columns allowed and required (``hetplan calibrate-perf``'s measured ``ttft_ms``, ``tpot_ms``).

    Raises:
        InputError: not a regular file, unreadable, no header, a column named twice, a row with more or fewer
            cells than the header, or a required column missing (named). WorkBudgetError: more than
            :data:`MAX_POINTS` rows.
    """
    import csv
    import io as _io

    from hetplan.input_checks import read_text_input

    try:
        text = read_text_input(path, "points file")
    except InputError as exc:
        raise InputError(exc.what, exc.why, "pass a CSV file with a header row") from None
    try:
        table = list(csv.reader(_io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(f"cannot read points file {path}", str(exc), "pass a CSV file with a header row") from None
    while table and not any(cell.strip() for cell in table[-1]):
        table.pop()  # trailing blank lines
    if len(table) - 1 > MAX_POINTS:
        raise WorkBudgetError(
            f"points file {path} has more than {MAX_POINTS:,} rows, hetplan's budget for one estimate --points",
            "hetplan estimates a command's work from its inputs (20,000 rows take about 4 s)",
            "split it into files of at most that many rows",
        )
    header = [h.strip() for h in table[0]] if table else []
    twice = sorted({h for h in header if h and header.count(h) > 1})
    if twice:
        raise InputError(
            f"points file {path} names the column(s) {', '.join(twice)} more than once",
            "one of the values would silently win",
            "keep one column of each name",
        )
    missing = [c for c in (*REQUIRED, *extra) if c not in header]
    if missing:
        raise InputError(
            f"points file {path} lacks the column(s) {', '.join(missing)}",
            f"columns found: {', '.join(header) or 'none'}",
            f"add {', '.join(missing)} (required: {', '.join((*REQUIRED, *extra))}; optional: "
            f"{', '.join(c for c in COLUMNS if c not in REQUIRED)})",
        )
    unknown = [c for c in header if c and c not in COLUMNS and c not in extra]
    if unknown:
        raise InputError(
            f"points file {path} has unknown column(s) {', '.join(unknown)}",
            f"known columns: {', '.join((*COLUMNS, *extra))}",
            "rename or drop them",
        )
    rows = []
    for n, cells in enumerate(table[1:], 1):
        if not any(cell.strip() for cell in cells):
            continue  # a blank line
        if len(cells) != len(header):
            raise InputError(
                f"points file {path}: data row {n} has {len(cells)} cells for {len(header)} columns",
                "a cell past the header would be dropped, a missing one read as blank",
                "give every row one cell per column (quote cells that hold commas)",
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return rows
