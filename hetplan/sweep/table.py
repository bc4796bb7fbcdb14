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

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from hetplan.io import atomic_target
from hetplan.plan.types import combo_label
from hetplan.sweep.grid import Case
from hetplan.units import parse_duration_s, parse_percentile, rnd

#: (column, type) of the compared columns, in table order; types: str, float, int, bool.
COMPARED: tuple[tuple[str, str], ...] = (
    ("case_id", "str"), ("axes", "str"), ("scenario", "str"), ("model", "str"), ("workload", "str"),
    ("goodput_target_req_per_s", "float"), ("slo_tier", "str"), ("slo_ttft_s", "float"), ("slo_tpot_s", "float"),
    ("slo_percentile", "float"), ("gpus", "str"), ("inventory", "str"), ("cloud", "str"), ("prices", "str"),
    ("spot", "bool"), ("strategy", "str"), ("engine", "str"), ("weight_dtype", "str"), ("kv_dtype", "str"),
    ("headroom", "float"), ("policy", "str"), ("verify", "bool"),
    ("status", "str"), ("solver_status", "str"), ("usd_per_hour", "float"), ("usd_per_month", "float"),
    ("tokens_per_usd", "float"), ("goodput_capacity_req_per_s", "float"), ("gpus_total", "int"),
    ("chosen_units", "str"), ("purchases", "str"), ("priced_by", "str"), ("gain_over_homogeneous", "float"),
    ("verdict", "str"), ("sim_attainment", "float"), ("sim_goodput_req_per_s", "float"), ("sim_ttft_q_s", "float"),
    ("sim_tpot_q_s", "float"), ("sim_misses", "int"), ("warnings", "int"), ("error", "str"),
    ("inputs_sha256", "str"),
)  # fmt: skip
TIMINGS: tuple[tuple[str, str], ...] = (
    ("time_plan_s", "float"), ("time_verify_s", "float"), ("worker", "str"), ("resumed", "bool"),
)  # fmt: skip
COLUMNS = COMPARED + TIMINGS
COMPARED_NAMES = tuple(name for name, _ in COMPARED)


def _num(x: Any) -> float | None:
    return None if x is None else rnd(float(x), 6)


def chosen_units(doc: dict[str, Any]) -> str:
    """A plan document's deployment in one line: ``1x [1x H100-SXM TP2 -> 1x A100-80GB-SXM TP4]; ...`` for combos,
    ``2x A100-80GB-SXM TP4`` for aggregated instances (the ``chosen_units`` column; ``hetplan explore``)."""
    parts = []
    for c in doc.get("combos") or []:
        label = combo_label(c["n_prefill"], c["prefill_gpu"], c["prefill_tp"], c["n_decode"], c["decode_gpu"],
                            c["decode_tp"])  # fmt: skip
        parts.append(f"{c['count']}x [{label}]")
    for t in doc.get("instances") or []:
        parts.append(f"{t['count']}x {t['gpu']} TP{t['tp']}")
    return "; ".join(parts)


def _priced_by(doc: dict[str, Any]) -> str:
    used = doc.get("gpus_used") or {}
    sources = set()
    for gpu, p in (doc["scenario"].get("prices") or {}).items():
        if gpu in used:
            src = str(p.get("source", ""))
            sources.add("price file" if src.startswith("price file") else src.split(" ")[0])
    return "+".join(sorted(sources))


def _inputs(case: Case) -> dict[str, Any]:
    from hetplan.sweep.axes import label

    s = case.scenario
    slo = s.get("slo") or {}
    work = s.get("workload") or {}
    labels = dict(case.axes)
    return {
        "case_id": case.id,
        "axes": "; ".join(f"{n}={lab}" for n, lab in case.axes),
        "scenario": Path(case.base).stem,
        "model": label("models", s.get("model")),
        "workload": label("workloads", work),
        "goodput_target_req_per_s": _num(s.get("goodput_req_per_s")),
        "slo_tier": labels.get("slos", ""),
        "slo_ttft_s": _num(parse_duration_s(slo.get("ttft", "2s"), "ttft")),
        "slo_tpot_s": _num(parse_duration_s(slo.get("tpot", "100ms"), "tpot")),
        "slo_percentile": _num(parse_percentile(slo.get("percentile", "p90"), "slo.percentile") * 100),
        "gpus": "+".join(s.get("gpus") or []),
        "inventory": ",".join(f"{k}={v}" for k, v in (s.get("inventory") or {}).items()),
        "cloud": s.get("cloud") or "",
        "prices": Path(s["prices"]).name if s.get("prices") else "",
        "spot": bool(s.get("spot", False)),
        "strategy": case.strategy,
        "engine": case.engine,
        "weight_dtype": s.get("weight_dtype", "bf16"),
        "kv_dtype": s.get("kv_dtype", "bf16"),
        "headroom": _num(s.get("headroom", 0.1)),
        "policy": case.policy,
        "verify": case.verify,
    }


def build_row(case: Case, status: str, doc: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
    """The compared columns of ``case``'s row, from its plan document ``doc`` (``status`` ok) or ``error``."""
    row: dict[str, Any] = dict.fromkeys(COMPARED_NAMES)
    row.update(_inputs(case))
    row.update(status=status, error=error or "", inputs_sha256=case.inputs_sha256, verdict="not run")
    if doc is None:
        return row
    used = doc.get("gpus_used") or {}
    row.update(
        solver_status=doc.get("status", ""),
        usd_per_hour=_num(doc.get("total_usd_per_hour")),
        usd_per_month=_num(doc.get("usd_per_month")),
        # empty at $0/h (owned GPUs without a price): the plan file's 0 means "not defined", not zero tokens
        tokens_per_usd=_num(doc.get("tokens_per_usd")) if doc.get("total_usd_per_hour") else None,
        goodput_capacity_req_per_s=_num(doc.get("goodput_req_per_s")),
        gpus_total=int(sum(used.values())),
        chosen_units=chosen_units(doc),
        purchases=" ".join(f"{g}={n}" for g, n in used.items()),
        priced_by=_priced_by(doc),
        gain_over_homogeneous=_num(doc.get("gain_over_homogeneous")),
        warnings=len(doc.get("warnings") or []),
    )
    sweep = doc.get("sweep_case") or {}
    v = doc.get("verification")
    if sweep.get("verify_error"):
        row.update(verdict="check failed", error=sweep["verify_error"])
    elif v is not None:
        q = f"{doc['scenario']['slo']['percentile']:g}"
        att = v.get("attainment")  # the joint attainment (older verification blocks: a map with "joint")
        row.update(
            verdict="missed" if v.get("misses") else "held",
            sim_attainment=_num(att.get("joint") if isinstance(att, dict) else att),
            sim_goodput_req_per_s=_num(v.get("goodput_req_per_s")),
            sim_ttft_q_s=_num(v.get("ttft_p_s", v.get(f"ttft_p{q}_s"))),
            sim_tpot_q_s=_num(v.get("tpot_p_s", v.get(f"tpot_p{q}_s"))),
            sim_misses=len(v.get("misses") or []),
        )
    return row


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def csv_text(rows: list[dict[str, Any]], columns: tuple[tuple[str, str], ...] = COLUMNS) -> str:
    """The rows as CSV text (header, then one line per row; booleans ``true``/``false``, missing values empty)."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([name for name, _ in columns])
    for row in rows:
        out.writerow([_cell(row.get(name)) for name, _ in columns])
    return buf.getvalue()


def parquet_available() -> bool:
    """True when pyarrow can be imported (Parquet needs it; ``pip install 'hetplan[parquet]'``)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """Write the rows as a Parquet file (typed columns, nullable), atomically.

    Raises:
        ImportError: pyarrow is not installed (callers check :func:`parquet_available` first).
        OutputError: the file cannot be written (a full disk); nothing is left behind.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"str": pa.string(), "float": pa.float64(), "int": pa.int64(), "bool": pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in COLUMNS])
    table = pa.table({name: [row.get(name) for row in rows] for name, _ in COLUMNS}, schema=schema)
    with atomic_target(path, force=True) as tmp:
        pq.write_table(table, str(tmp))


def compared(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the timing columns left out (what must be equal across executors and runs)."""
    return [{k: row.get(k) for k in COMPARED_NAMES} for row in rows]


__all__ = ["COLUMNS", "COMPARED", "COMPARED_NAMES", "TIMINGS", "build_row", "chosen_units", "compared", "csv_text",
           "parquet_available", "write_parquet"]  # fmt: skip
