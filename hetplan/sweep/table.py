"""The sweep's table: one row per case, written as CSV (always) and Parquet (with pyarrow).

A row is a function of the case's inputs and its plan document (or its error) only, so a case gives the same row
on every executor, in every run, and when ``--resume`` reads it back from its plan file. Numbers are rounded to 6
significant digits, as the plan document rounds them. The columns after :data:`COMPARED` (:data:`TIMINGS`: seconds
spent, the worker, whether the row was resumed) differ between runs and are left out when rows are compared.

Columns (units in the names; empty = not applicable):

- inputs: ``case_id``, ``axes`` (``goodputs=5; slos=tight``), ``scenario`` (base file stem), ``model``,
  ``workload``, ``goodput_target_req_per_s`` (empty: the trace's own rate), ``slo_tier`` (the ``slos`` label),
  ``slo_ttft_s``, ``slo_tpot_s``, ``slo_percentile``, ``gpus`` (candidates, ``+``-joined), ``inventory``, ``cloud``,
  ``prices`` (file name), ``spot``, ``strategy``, ``engine``, ``weight_dtype``, ``kv_dtype``, ``headroom``,
  ``policy``, ``verify`` (a simulated check was asked);
- outcome: ``status`` (ok, infeasible, error), ``solver_status``, ``usd_per_hour``, ``usd_per_month``,
  ``tokens_per_usd`` (input+output at capacity; empty at $0/h), ``goodput_capacity_req_per_s``, ``gpus_total``,
  ``chosen_units`` (``1x [1x H100-SXM TP2 -> 1x A100-80GB-SXM TP4]; ...``, or aggregated ``2x A100-80GB-SXM TP4``),
  ``purchases`` (GPUs used per type, ``H100-SXM=2 A10G=8``: until hetplan plans purchases, what the plan uses),
  ``priced_by`` (where the used GPUs' prices came from: a cloud's catalog rows or ``price file``),
  ``gain_over_homogeneous`` (cost saved against the best single-type fleet, fraction);
- simulated check: ``verdict`` (held, missed, not run, check failed), ``sim_attainment`` (joint),
  ``sim_goodput_req_per_s``, ``sim_ttft_q_s``, ``sim_tpot_q_s`` (at the SLO percentile), ``sim_misses``;
- ``warnings`` (count), ``error`` (one line), ``inputs_sha256``;
- timings (not compared): ``time_plan_s``, ``time_verify_s``, ``worker``, ``resumed``.

A row is a :class:`SweepRow` (one typed field per column, in table order); the plan document is read once, at the
file edge, into :class:`~hetplan.sweep.planfacts.PlanFacts` (the few plan-file fields a row needs), and rows become
plain mappings only where they are written (CSV, Parquet) or handed to a ``progress`` callback.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from pydantic import BaseModel, ConfigDict

from hetplan.io import atomic_target
from hetplan.sweep.grid import Case
from hetplan.sweep.planfacts import Deployment, PlanFacts, units
from hetplan.units import parse_duration_s, parse_percentile, rnd

if TYPE_CHECKING:
    from hetplan.scenario_blocks import WorkloadSpec


class SweepRow(BaseModel):
    """One case's row: the columns in table order (see the module docstring; None = empty cell). The outcome,
    check and timing columns default to empty, as for a case that failed before it was planned."""

    model_config = ConfigDict(frozen=True)
    # inputs
    case_id: str
    axes: str
    scenario: str
    model: str
    workload: str
    goodput_target_req_per_s: float | None
    slo_tier: str
    slo_ttft_s: float
    slo_tpot_s: float
    slo_percentile: float
    gpus: str
    inventory: str
    cloud: str
    prices: str
    spot: bool
    strategy: str
    engine: str
    weight_dtype: str
    kv_dtype: str
    headroom: float | None
    policy: str
    verify: bool
    # outcome
    status: str
    solver_status: str | None = None
    usd_per_hour: float | None = None
    usd_per_month: float | None = None
    tokens_per_usd: float | None = None
    goodput_capacity_req_per_s: float | None = None
    gpus_total: int | None = None
    chosen_units: str | None = None
    purchases: str | None = None
    priced_by: str | None = None
    gain_over_homogeneous: float | None = None
    # simulated check
    verdict: str = "not run"
    sim_attainment: float | None = None
    sim_goodput_req_per_s: float | None = None
    sim_ttft_q_s: float | None = None
    sim_tpot_q_s: float | None = None
    sim_misses: int | None = None
    warnings: int | None = None
    error: str = ""
    inputs_sha256: str
    # timings (not compared)
    time_plan_s: float | None = None
    time_verify_s: float | None = None
    worker: str = ""
    resumed: bool = False

    def cells(self) -> dict[str, Any]:
        """The row as column -> value, in table order (the CSV/Parquet edge and ``progress`` callbacks)."""
        return self.model_dump()


def _kind(annotation: Any) -> str:
    base = next(a for a in (get_args(annotation) or (annotation,)) if a is not type(None))
    return {str: "str", float: "float", int: "int", bool: "bool"}[base]


_TIMING_NAMES = ("time_plan_s", "time_verify_s", "worker", "resumed")
#: (column, type) of every column, in table order; types: str, float, int, bool (from :class:`SweepRow`).
COLUMNS: tuple[tuple[str, str], ...] = tuple((n, _kind(f.annotation)) for n, f in SweepRow.model_fields.items())
#: The compared columns (all but :data:`TIMINGS`), in table order.
COMPARED: tuple[tuple[str, str], ...] = tuple(c for c in COLUMNS if c[0] not in _TIMING_NAMES)
TIMINGS: tuple[tuple[str, str], ...] = tuple(c for c in COLUMNS if c[0] in _TIMING_NAMES)
COMPARED_NAMES = tuple(name for name, _ in COMPARED)


class Timings(BaseModel):
    """The timing columns of a row: seconds planning and verifying (4 significant digits), the worker
    (``host:pid``), and whether the row was rebuilt from a plan file (``--resume``)."""

    model_config = ConfigDict(frozen=True)
    time_plan_s: float | None = None
    time_verify_s: float | None = None
    worker: str = ""
    resumed: bool = False


def _num(x: float | None) -> float | None:
    return None if x is None else rnd(float(x), 6)


def chosen_units(doc: dict[str, Any]) -> str:
    """A plan document's deployment in one line: ``1x [1x H100-SXM TP2 -> 1x A100-80GB-SXM TP4]; ...`` for combos,
    ``2x A100-80GB-SXM TP4`` for aggregated instances (the ``chosen_units`` column; ``hetplan explore``)."""
    return units(Deployment.model_validate(doc))


def _priced_by(plan: PlanFacts) -> str:
    used = plan.gpus_used or {}
    sources = set()
    for gpu, p in (plan.scenario.prices or {}).items():
        if gpu in used:
            src = str(p.source)
            sources.add("price file" if src.startswith("price file") else src.split(" ")[0])
    return "+".join(sorted(sources))


def _workload_label(work: WorkloadSpec) -> str:
    """The ``workload`` column: ``class@rate`` for a synthetic workload, else the trace's file stem."""
    from hetplan.sweep.axes import label

    if work.synthetic is not None:
        return f"{work.synthetic.kind}@{work.synthetic.rate_per_s}"
    if isinstance(work.path, str):
        return Path(work.path).stem
    return label("workloads", work.model_dump(by_alias=True, exclude_none=True))


def _inputs(case: Case) -> dict[str, Any]:
    """The input columns of ``case``'s row (keyword arguments of :class:`SweepRow`)."""
    from hetplan.sweep.axes import label

    s = case.spec
    return dict(
        case_id=case.id,
        axes="; ".join(f"{n}={lab}" for n, lab in case.axes),
        scenario=Path(case.base).stem,
        model=label("models", s.model),
        workload=_workload_label(s.workload),
        goodput_target_req_per_s=_num(s.goodput_req_per_s),
        slo_tier=next((lab for name, lab in case.axes if name == "slos"), ""),
        slo_ttft_s=rnd(parse_duration_s(s.slo.ttft, "ttft"), 6),
        slo_tpot_s=rnd(parse_duration_s(s.slo.tpot, "tpot"), 6),
        slo_percentile=rnd(parse_percentile(s.slo.percentile, "slo.percentile") * 100, 6),
        gpus="+".join(s.gpus or []),
        inventory=",".join(f"{k}={v}" for k, v in s.inventory.items()),
        cloud=s.cloud or "",
        prices=Path(s.prices).name if s.prices else "",
        spot=s.spot,
        strategy=case.strategy,
        engine=case.engine,
        weight_dtype=s.weight_dtype,
        kv_dtype=s.kv_dtype,
        headroom=_num(s.headroom),
        policy=case.policy,
        verify=case.verify,
    )


def _outcome(plan: PlanFacts) -> dict[str, Any]:
    """The outcome and check columns of a planned case's row (keyword arguments of :class:`SweepRow`)."""
    used = plan.gpus_used or {}
    out: dict[str, Any] = dict(
        solver_status=plan.status,
        usd_per_hour=_num(plan.total_usd_per_hour),
        usd_per_month=_num(plan.usd_per_month),
        # empty at $0/h (owned GPUs without a price): the plan file's 0 means "not defined", not zero tokens
        tokens_per_usd=_num(plan.tokens_per_usd) if plan.total_usd_per_hour else None,
        goodput_capacity_req_per_s=_num(plan.goodput_req_per_s),
        gpus_total=int(sum(used.values())),
        chosen_units=units(plan),
        purchases=" ".join(f"{g}={n}" for g, n in used.items()),
        priced_by=_priced_by(plan),
        gain_over_homogeneous=_num(plan.gain_over_homogeneous),
        warnings=len(plan.warnings or []),
    )
    v = plan.verification
    verify_error = plan.sweep_case.verify_error if plan.sweep_case is not None else None
    if verify_error:
        out.update(verdict="check failed", error=verify_error)
    elif v is not None:
        q = f"{plan.scenario.slo.percentile:g}" if plan.scenario.slo is not None else ""
        out.update(
            verdict="missed" if v.misses else "held",
            sim_attainment=_num(v.joint_attainment()),
            sim_goodput_req_per_s=_num(v.goodput_req_per_s),
            sim_ttft_q_s=_num(v.ttft_p_s if v.ttft_p_s is not None else v.legacy(f"ttft_p{q}_s")),
            sim_tpot_q_s=_num(v.tpot_p_s if v.tpot_p_s is not None else v.legacy(f"tpot_p{q}_s")),
            sim_misses=len(v.misses or []),
        )
    return out


def build_row(
    case: Case, status: str, doc: dict[str, Any] | PlanFacts | None, error: str | None, timings: Timings | None = None
) -> SweepRow:
    """``case``'s row, from its plan document ``doc`` (``status`` ok; a plan file's mapping or its
    :class:`PlanFacts`) or ``error``, with ``timings`` (default: empty).

    Raises:
        pydantic.ValidationError: ``doc`` has a field of the wrong kind (see :class:`PlanFacts`).
    """
    outcome: dict[str, Any] = {}
    if doc is not None:
        outcome = _outcome(doc if isinstance(doc, PlanFacts) else PlanFacts.model_validate(doc))
    outcome.setdefault("error", error or "")
    t = timings or Timings()
    return SweepRow(
        **_inputs(case), status=status, inputs_sha256=case.inputs_sha256, **outcome,
        time_plan_s=t.time_plan_s, time_verify_s=t.time_verify_s, worker=t.worker, resumed=t.resumed,
    )  # fmt: skip


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def csv_text(rows: list[SweepRow], columns: tuple[tuple[str, str], ...] = COLUMNS) -> str:
    """The rows as CSV text (header, then one line per row; booleans ``true``/``false``, missing values empty)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([name for name, _ in columns])
    for row in rows:
        cells = row.cells()
        out.writerow([_cell(cells[name]) for name, _ in columns])
    return buf.getvalue()


def parquet_available() -> bool:
    """True when pyarrow can be imported (Parquet needs it; ``pip install 'hetplan[parquet]'``)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(rows: list[SweepRow], path: Path) -> None:
    """Write the rows as a Parquet file (typed columns, nullable), atomically.

    Raises:
        ImportError: pyarrow is not installed (callers check :func:`parquet_available` first).
        OutputError: the file cannot be written (a full disk); nothing is left behind.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"str": pa.string(), "float": pa.float64(), "int": pa.int64(), "bool": pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in COLUMNS])
    cells = [row.cells() for row in rows]
    table = pa.table({name: [c[name] for c in cells] for name, _ in COLUMNS}, schema=schema)
    with atomic_target(path, force=True) as tmp:
        pq.write_table(table, str(tmp))


def compared(rows: list[SweepRow]) -> list[dict[str, Any]]:
    """The rows' compared columns (timing columns left out) as mappings: what must be equal across executors
    and runs."""
    return [row.model_dump(include=set(COMPARED_NAMES)) for row in rows]


__all__ = ["COLUMNS", "COMPARED", "COMPARED_NAMES", "TIMINGS", "PlanFacts", "SweepRow", "Timings", "build_row",
           "chosen_units", "compared", "csv_text", "parquet_available", "write_parquet"]  # fmt: skip
