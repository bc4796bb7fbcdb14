"""The readers of ``hetplan calibrate-perf`` (:mod:`hetplan.perf.user_calibration`): one closed-loop operating
point per vllm bench serve result, GuideLLM concurrent or synchronous benchmark, AIPerf / genai-perf profile export
(JSON or CSV) or row of an ``estimate --points`` CSV with measured ``ttft_ms`` and ``tpot_ms``. The tools' files
are read through typed views of the fields hetplan reads (:mod:`hetplan.perf.benchmark_files`), each value checked
where it is used, with a message that names the field.

Source: the tools' own output schemas (tests/fixtures/user_calibration/README.md); hetplan's own reader.
"""

from __future__ import annotations

import csv
import io as _io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError
from hetplan.perf.benchmark_files import (
    AiperfExport,
    AiperfMetric,
    Benchmark,
    Endpoint,
    InputConfig,
    Loadgen,
    Report,
    ReportArgs,
    Strategy,
    StrategyHolder,
    VllmBenchResult,
    Worker,
    view,
)

FORMATS = ("vllm-bench", "guidellm", "aiperf", "aiperf-csv", "points")
POINT_FIELDS = ("engine", "model", "gpu", "tp", "pp", "ep", "dp_attention", "weight_dtype", "kv_dtype",
                "concurrency", "isl", "osl")  # fmt: skip
MEASURED_COLUMNS = ("ttft_ms", "tpot_ms")

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


@dataclass(frozen=True)
class Context:
    """Point fields the command's flags give (None: not given): they fill in what a file does not say; ``catalog``
    knows the model names (None: the shipped catalogs)."""

    engine: str | None = None
    gpu: str | None = None
    model: str | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    dp_attention: int | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    concurrency: int | None = None
    isl: int | None = None
    osl: int | None = None
    catalog: Catalog | None = None

    def given(self) -> dict[str, Any]:
        """The fields that were given."""
        return {k: getattr(self, k) for k in POINT_FIELDS if getattr(self, k) is not None}


@dataclass(frozen=True)
class MeasuredPoint:
    """One user benchmark point: ``row`` holds the points-table fields (:mod:`hetplan.perf.points`) as text,
    ``ttft_ms``/``tpot_ms`` the measured means, ``source`` the file (and entry) it came from."""

    row: dict[str, str]
    ttft_ms: float
    tpot_ms: float
    source: str


# --- readers --------------------------------------------------------------------------------------------------


def _num(value: Any, where: str) -> float:
    """A finite positive number from a file field, or InputError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{where} is not a number (got {str(value)[:30]!r})", fix="pass the tool's unedited output")
    try:
        x = float(value)
    except ValueError:
        raise InputError(
            f"{where} is not a number (got {value!r:.30})", fix="pass the tool's unedited output"
        ) from None
    if not math.isfinite(x) or x <= 0:
        raise InputError(f"{where} must be a positive number, got {value!r}", fix="pass a run that completed requests")
    return x


def _get(doc: Any, *keys: str) -> Any:
    """``doc[k0][k1]...`` or None when any level is missing."""
    for k in keys:
        if not isinstance(doc, dict) or k not in doc:
            return None
        doc = doc[k]
    return doc


def _point(found: dict[str, Any], ctx: Context, ttft: float, tpot: float, source: str) -> MeasuredPoint:
    """A :class:`MeasuredPoint` from the file's fields ``found`` under the flags ``ctx``.

    Raises:
        InputError: GPU, model or concurrency known neither from the file nor from a flag (named, with the flag).
    """
    vals = {**ctx.given(), **{k: v for k, v in found.items() if v is not None and v != ""}}
    if ctx.model is not None and str(vals["model"]) != ctx.model:
        from hetplan.catalog.context import Catalog

        try:  # a served-model name the catalog does not know: --model says which model it is
            (ctx.catalog or Catalog.shipped()).find_model(str(vals["model"]))
        except InputError:
            vals["model"] = ctx.model
    for name, flag in (("gpu", "--gpu"), ("model", "--model"), ("concurrency", "--concurrency"),
                       ("isl", "--isl"), ("osl", "--osl")):  # fmt: skip
        if name not in vals:
            raise InputError(
                f"{source}: the file does not say the {name} of its run",
                fix=f"pass {flag}"
                + (" (or --metadata gpu=... when running vllm bench serve)" if name == "gpu" else ""),
            )
    for name in ("isl", "osl", "concurrency"):
        vals[name] = max(1, int(round(_num(vals[name], f"{source}: {name}"))))
    return MeasuredPoint({k: str(v) for k, v in vals.items()}, ttft, tpot, source)


_ENGINE_BACKENDS = {"vllm": "vllm", "sglang": "sglang", "sglang-oai": "sglang", "tensorrt-llm": "trtllm",
                    "trt-llm": "trtllm", "trtllm": "trtllm"}  # fmt: skip


def read_vllm_bench(doc: dict[str, Any], path: str, ctx: Context) -> list[MeasuredPoint]:
    """The point of one ``vllm bench serve --save-result`` file (module docstring).

    Raises:
        InputError: no ``max_concurrency`` (an open-loop run), no completed request, a field missing or not a number.
    """
    for key in ("mean_ttft_ms", "mean_tpot_ms", "completed", "total_input_tokens", "total_output_tokens"):
        if key not in doc:
            raise InputError(f"{path}: vllm bench serve result lacks {key!r}", fix="pass the --save-result JSON file")
    v = VllmBenchResult.model_validate(doc)
    if v.max_concurrency is None and ctx.concurrency is None:
        raise InputError(
            f"{path}: max_concurrency is null: an open-loop run (--request-rate), not C closed-loop clients",
            "the correction is fitted on the closed loop hetplan estimates (C clients, each waiting for its answer)",
            "rerun with --max-concurrency C, or pass --concurrency if you know it",
        )
    done = _num(v.completed, f"{path}: completed")
    found: dict[str, Any] = {
        "engine": _ENGINE_BACKENDS.get(str(v.backend).lower()),
        "model": v.model_id,
        "concurrency": v.max_concurrency,
        "isl": _num(v.total_input_tokens, f"{path}: total_input_tokens") / done,
        "osl": _num(v.total_output_tokens, f"{path}: total_output_tokens") / done,
    }
    for key in ("engine", "gpu", "tp", "pp", "ep", "dp_attention", "weight_dtype", "kv_dtype"):
        value = doc.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):  # --metadata KEY=VALUE
            found[key] = value
    ttft = _num(v.mean_ttft_ms, f"{path}: mean_ttft_ms")
    tpot = _num(v.mean_tpot_ms, f"{path}: mean_tpot_ms")
    return [_point(found, ctx, ttft, tpot, path)]


def read_guidellm(doc: dict[str, Any], path: str, ctx: Context) -> tuple[list[MeasuredPoint], list[str]]:
    """The points of a GuideLLM report: one per concurrent or synchronous benchmark (module docstring); returns
    (points, notes on skipped benchmarks).

    Raises:
        InputError: no closed-loop benchmark in the report, or one lacking a metric.
    """
    report = view(Report, doc)
    benches = report.benchmarks
    if not isinstance(benches, list) or not benches:
        raise InputError(f"{path}: GuideLLM report has no benchmarks", fix="pass the report guidellm wrote")
    model = view(ReportArgs, report.args).model
    points, notes = [], []
    for n, raw in enumerate(benches):
        where = f"{path}#benchmarks[{n}]"
        b = view(Benchmark, raw)
        strategy = view(StrategyHolder, b.config).strategy or view(StrategyHolder, b.args).strategy or {}
        kind = str(view(Strategy, strategy).type_) if isinstance(strategy, dict) else ""
        if kind == "synchronous":
            conc: Any = 1
        elif kind == "concurrent":
            conc = view(Strategy, strategy).streams
        else:
            notes.append(f"{where}: strategy {kind or 'unknown'} is open-loop, skipped (only concurrent and "
                         "synchronous benchmarks are closed-loop points)")  # fmt: skip
            continue

        def mean(name: str, metrics: Any = b.metrics, where: str = where) -> float:
            value = _get(metrics, name, "successful", "mean")
            if value is None:
                raise InputError(f"{where}: metrics.{name}.successful.mean is missing", fix="pass guidellm's report")
            return _num(value, f"{where}: metrics.{name}.successful.mean")

        found = {"model": model or view(Worker, b.worker).backend_model, "concurrency": conc,
                 "isl": mean("prompt_token_count"), "osl": mean("output_token_count")}  # fmt: skip
        points.append(_point(found, ctx, mean("time_to_first_token_ms"), mean("inter_token_latency_ms"), where))
    if not points:
        raise InputError(
            f"{path}: no concurrent or synchronous benchmark in the GuideLLM report",
            "; ".join(notes),
            "run guidellm with --profile concurrent --rate C (or synchronous)",
        )
    return points, notes


def read_aiperf(doc: dict[str, Any], path: str, ctx: Context) -> list[MeasuredPoint]:
    """The point of an AIPerf ``profile_export_aiperf.json`` or genai-perf ``profile_export_genai_perf.json``.

    Raises:
        InputError: a metric missing or not in milliseconds / tokens.
    """
    export = view(AiperfExport, doc)
    records: dict[str, Any] = export.records if isinstance(export.records, dict) else doc

    def avg(name: str, ms: bool) -> float:
        metric = records.get(name)
        if not isinstance(metric, dict) or "avg" not in metric:
            raise InputError(f"{path}: {name}.avg is missing", fix="pass profile_export_aiperf.json (or genai-perf's)")
        m = AiperfMetric.model_validate(metric)
        unit = str(m.unit) if "unit" in metric else ("ms" if ms else "tokens")
        if ms and unit != "ms":
            raise InputError(f"{path}: {name} is in {unit!r}, expected ms", fix="export with the default units")
        return _num(m.avg, f"{path}: {name}.avg")

    ttft, tpot = avg("time_to_first_token", True), avg("inter_token_latency", True)
    isl, osl = avg("input_sequence_length", False), avg("output_sequence_length", False)
    cfg = view(InputConfig, export.input_config)
    conc = view(Loadgen, cfg.loadgen).concurrency or cfg.concurrency
    names = view(Endpoint, cfg.endpoint).model_names or cfg.model_names or cfg.model
    model = names[0] if isinstance(names, list) and names else names if isinstance(names, str) else None
    found = {"model": model, "concurrency": conc, "isl": isl, "osl": osl}
    return [_point(found, ctx, ttft, tpot, path)]


_CSV_ROWS = {"ttft": "time to first token", "tpot": "inter token latency", "isl": "input sequence length",
             "osl": "output sequence length"}  # fmt: skip


def read_aiperf_csv(text: str, path: str, ctx: Context) -> list[MeasuredPoint]:
    """The point of an AIPerf / genai-perf CSV export (``Metric,avg,...``; concurrency and model from flags).

    Raises:
        InputError: no ``avg`` column or a metric row missing.
    """
    table = list(csv.reader(_io.StringIO(text, newline="")))
    header = [h.strip().lower() for h in table[0]]
    if "avg" not in header:
        raise InputError(f"{path}: no 'avg' column in the CSV export", fix="pass profile_export_aiperf.csv")
    col = header.index("avg")
    vals: dict[str, float] = {}
    for cells in table[1:]:
        name = cells[0].strip().lower() if cells else ""
        for key, label in _CSV_ROWS.items():
            if name.startswith(label) and key not in vals and len(cells) > col:
                if key in ("ttft", "tpot") and "(ms)" not in name:
                    raise InputError(f"{path}: {cells[0]!r} is not in ms", fix="export with the default units")
                vals[key] = _num(cells[col].replace(",", ""), f"{path}: {cells[0].strip()} avg")
    missing = [label for key, label in _CSV_ROWS.items() if key not in vals]
    if missing:
        raise InputError(f"{path}: rows {', '.join(missing)} are missing", fix="pass the tool's unedited CSV export")
    found = {"isl": vals["isl"], "osl": vals["osl"]}
    return [_point(found, ctx, vals["ttft"], vals["tpot"], path)]


def read_points_measured(path: Path, ctx: Context) -> list[MeasuredPoint]:
    """The points of an ``estimate --points`` CSV with the measured ``ttft_ms`` and ``tpot_ms`` columns.

    Raises:
        InputError: as :func:`hetplan.perf.points_table.read_points`, a measured column missing, or a bad measured cell.
    """
    from hetplan.perf.points_table import read_points

    rows = read_points(path, extra=MEASURED_COLUMNS)
    out = []
    for n, raw in enumerate(rows, 1):
        where = f"{path}: data row {n}"
        for col in MEASURED_COLUMNS:
            if not str(raw.get(col, "")).strip():
                raise InputError(
                    f"{where}: {col} is empty", fix=f"give every row its measured {', '.join(MEASURED_COLUMNS)}"
                )
        ttft = _num(raw.pop("ttft_ms"), f"{where}: ttft_ms")
        tpot = _num(raw.pop("tpot_ms"), f"{where}: tpot_ms")
        found = {k: v for k, v in raw.items() if str(v).strip()}
        out.append(_point(found, ctx, ttft, tpot, where))
    return out


def detect_format(path: Path, text: str) -> tuple[str, Any]:
    """(format name of :data:`FORMATS`, parsed document or text) of one input file.

    Raises:
        InputError: a format none of the readers knows.
    """
    if path.suffix.lower() == ".csv":
        first = next(csv.reader(_io.StringIO(text.split("\n", 1)[0])), [""])
        head = [h.strip().lower() for h in first]
        if head and head[0] == "metric":
            return "aiperf-csv", text
        if "ttft_ms" in head or "tpot_ms" in head or "model" in head or "gpu" in head:
            return "points", text
    else:
        import json

        def no_constant(name: str) -> None:
            raise ValueError(f"{name} is not a number JSON allows")

        try:  # plain JSON: vllm writes "request_rate": "inf" as text, which hetplan's document rules refuse
            doc = json.loads(text, parse_constant=no_constant)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"cannot read benchmark file {path} as JSON", str(exc)[:200],
                             "pass a vllm bench, GuideLLM or AIPerf JSON file") from None  # fmt: skip
        if not isinstance(doc, dict):
            raise InputError(f"benchmark file {path} is not a JSON object", fix="pass the tool's own output file")
        if "mean_ttft_ms" in doc:
            return "vllm-bench", doc
        if "benchmarks" in doc:
            return "guidellm", doc
        raw = view(AiperfExport, doc).records
        if "time_to_first_token" in (raw if isinstance(raw, dict) else doc):
            return "aiperf", doc
    raise InputError(
        f"{path}: not a benchmark file hetplan reads",
        "expected vllm bench serve --save-result JSON (mean_ttft_ms), a GuideLLM report (benchmarks), an AIPerf or "
        "genai-perf profile export (time_to_first_token; CSV starting 'Metric'), or a points CSV with ttft_ms, tpot_ms",
        "pass the tool's own output file",
    )


def read_benchmarks(paths: list[Path], ctx: Context) -> tuple[list[MeasuredPoint], list[str]]:
    """Every point of ``paths`` (each file's format detected, :func:`detect_format`), in order; and notes.

    Raises:
        InputError: no file, an unreadable or unknown file, or a field the file and the flags both lack.
    """
    from hetplan.input_checks import read_text_input

    if not paths:
        raise InputError(
            "no benchmark file given", fix="pass one or more result files, e.g. hetplan calibrate-perf run.json"
        )
    points: list[MeasuredPoint] = []
    notes: list[str] = []
    for path in paths:
        text = read_text_input(path, "benchmark file")
        fmt, doc = detect_format(Path(path), text)
        name = str(path)
        if fmt == "vllm-bench":
            points += read_vllm_bench(doc, name, ctx)
        elif fmt == "guidellm":
            found, skipped = read_guidellm(doc, name, ctx)
            points += found
            notes += skipped
        elif fmt == "aiperf":
            points += read_aiperf(doc, name, ctx)
        elif fmt == "aiperf-csv":
            points += read_aiperf_csv(doc, name, ctx)
        else:
            points += read_points_measured(Path(path), ctx)
    return points, notes
