"""The user's own benchmarks in the loop: ``hetplan calibrate-perf`` reads serving benchmarks, fits per engine x GPU x
model corrections on top of the shipped curves, and writes a calibration file that ``plan``, ``estimate`` and
``simulate`` take (``--perf-calibration``, scenario ``perf.calibration``).

**Inputs** (one closed-loop operating point each: C clients, mean prompt and output lengths, mean TTFT and TPOT):

- ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``: ``model_id``, ``backend``,
  ``max_concurrency``, ``completed``, ``total_input_tokens``, ``total_output_tokens``, ``mean_ttft_ms``,
  ``mean_tpot_ms``; ``--metadata KEY=VALUE`` pairs land at the top level, so ``--metadata gpu=H100-SXM tp=2``
  names the GPU and layout). A run without ``--max-concurrency`` is open-loop and refused;
- GuideLLM reports (``guidellm/benchmark/schemas/generative/report.py``: ``args.model``, ``benchmarks[]`` with
  ``config.strategy`` ``{type_: concurrent, streams}`` or ``synchronous``, and ``metrics.time_to_first_token_ms``,
  ``inter_token_latency_ms`` (GuideLLM's ``time_per_output_token_ms`` includes the first token; its
  ``inter_token_latency_ms`` is TPOT), ``prompt_token_count``, ``output_token_count``, each
  ``{successful: {mean, ...}}``). Benchmarks of open-loop strategies (constant, poisson, throughput) are skipped;
- AIPerf ``profile_export_aiperf.json`` (``aiperf/exporters/json_exporter.py``: ``records`` of
  ``time_to_first_token``, ``inter_token_latency``, ``input_sequence_length``, ``output_sequence_length``, each
  ``{unit, avg, ...}``; ``input_config.loadgen.concurrency``, ``input_config.endpoint.model_names``), genai-perf's
  ``profile_export_genai_perf.json`` (the same metrics at the top level, ``input_config.concurrency``) and either
  tool's CSV export (``Metric,avg,...`` rows ``Time To First Token (ms)``, ``Inter Token Latency (ms)``,
  ``Input Sequence Length (tokens)``, ``Output Sequence Length (tokens)``; concurrency and model from flags);
- the ``estimate --points`` CSV (:mod:`hetplan.perf.points`) with two measured columns, ``ttft_ms`` and
  ``tpot_ms`` (means).

What a file does not say (GPU, engine, TP, ...) comes from :class:`Context` (the command's flags); what it says
wins, except a model name the catalog does not know (a served-model name), which ``--model`` replaces.

**Fit.** For each point the shipped model's closed-loop estimate (:func:`hetplan.perf.points.estimate_points`)
gives predicted mean TTFT and TPOT; ``r = ln(measured / predicted)``. A group's correction is ``exp(w x mean r)``
with ``w = n tau^2 / (n tau^2 + sigma^2)`` (the posterior mean of a normal prior on the group's level, centred on
the shipped curves): ``tau`` is how far the shipped curves' level is off for a group, ``sigma`` how far one point
scatters around its group's level (:data:`SHRINKAGE`). One point moves the level most of the way; a point that
disagrees with the shipped curves by much is trusted as much as one that agrees. Groups are engine x GPU x model
x layout (TP and weight dtype: both factors apply to that layout), and engine x GPU x model over all its layouts
(``tp``/``weight_dtype`` ``"*"``: its TPOT factor applies to layouts without their own entry, its TTFT factor is
1), as measured on the silicon data (:func:`hetplan.perf.settings.find_correction`). A correction never applies
to another model: one model's points moved other models' TTFT error the wrong way (27 % -> 34 % median |error|).

**Leave-one-out.** Each point is predicted with the correction fitted on the other points of its group (none: the
shipped curves), so the "after" error is out of sample; printed next to the "before" error of the shipped curves.

**Error band.** A group with at least :data:`MIN_BAND_POINTS` points gets, per confidence, the quantile of its
leave-one-out slowdowns (measured / corrected - 1), never below the engines' repeat-run noise
(:data:`NOISE_FLOOR`); verification uses it instead of the shipped band for that engine x GPU
(:func:`hetplan.perf.error_bands.error_band`), never a wider one.

Source: hetplan's own reconstruction (normal-normal shrinkage, leave-one-out cross-validation).
"""

from __future__ import annotations

import csv
import hashlib
import io as _io
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hetplan.errors import InputError
from hetplan.perf.settings import PerfCorrection, PerfSettings, find_correction

SCHEMA_VERSION = 1
KIND = "perf-calibration"
FORMATS = ("vllm-bench", "guidellm", "aiperf", "aiperf-csv", "points")

#: (tau, sigma) of the shrinkage in natural-log units, for TTFT and TPOT. tau: spread of the shipped curves'
#: level over engine x GPU x model groups; sigma: spread of one point around its group's level (different ISL,
#: OSL, concurrency, layout, repeat runs). Measured on engine_silicon_calibration.csv (34 engine x GPU x model
#: groups, 1,839 points) with ``benchmarks/user_calibration.py --spread``: root mean square of the groups' median
#: ln(measured/predicted), and 1.4826 x the median absolute deviation of the points from their group's median.
#: One point gets weight 0.77 (TTFT) and 0.86 (TPOT).
SHRINKAGE = {"ttft": (0.55, 0.30), "tpot": (0.34, 0.14)}
#: Points a group needs before its leave-one-out residuals replace the shipped error band.
MIN_BAND_POINTS = 3
#: The engines' own run-to-run spread of mean TTFT and TPOT (median over repeated runs of one configuration and
#: engine version in engine_silicon_calibration.csv, issue 30): a band is never narrower.
NOISE_FLOOR = {"ttft": 0.096, "tpot": 0.025}
CONFIDENCE_QUANTILES = {"p50": 0.5, "p80": 0.8, "p90": 0.9}
#: Largest correction factor either way: a point 20x off the model is a wrong GPU or model name, not a level.
MAX_FACTOR = 20.0
POINT_FIELDS = ("engine", "model", "gpu", "tp", "pp", "ep", "dp_attention", "weight_dtype", "kv_dtype",
                "concurrency", "isl", "osl")  # fmt: skip
MEASURED_COLUMNS = ("ttft_ms", "tpot_ms")


@dataclass(frozen=True)
class Context:
    """Point fields the command's flags give (None: not given): they fill in what a file does not say."""

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
        from hetplan.catalog.loader import find_model

        try:  # a served-model name the catalog does not know: --model says which model it is
            find_model(str(vals["model"]))
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
    if doc.get("max_concurrency") is None and ctx.concurrency is None:
        raise InputError(
            f"{path}: max_concurrency is null: an open-loop run (--request-rate), not C closed-loop clients",
            "the correction is fitted on the closed loop hetplan estimates (C clients, each waiting for its answer)",
            "rerun with --max-concurrency C, or pass --concurrency if you know it",
        )
    done = _num(doc["completed"], f"{path}: completed")
    found: dict[str, Any] = {
        "engine": _ENGINE_BACKENDS.get(str(doc.get("backend", "")).lower()),
        "model": doc.get("model_id"),
        "concurrency": doc.get("max_concurrency"),
        "isl": _num(doc["total_input_tokens"], f"{path}: total_input_tokens") / done,
        "osl": _num(doc["total_output_tokens"], f"{path}: total_output_tokens") / done,
    }
    for key in ("engine", "gpu", "tp", "pp", "ep", "dp_attention", "weight_dtype", "kv_dtype"):
        if isinstance(doc.get(key), (str, int)) and not isinstance(doc.get(key), bool):  # --metadata KEY=VALUE
            found[key] = doc[key]
    ttft = _num(doc["mean_ttft_ms"], f"{path}: mean_ttft_ms")
    tpot = _num(doc["mean_tpot_ms"], f"{path}: mean_tpot_ms")
    return [_point(found, ctx, ttft, tpot, path)]


def read_guidellm(doc: dict[str, Any], path: str, ctx: Context) -> tuple[list[MeasuredPoint], list[str]]:
    """The points of a GuideLLM report: one per concurrent or synchronous benchmark (module docstring); returns
    (points, notes on skipped benchmarks).

    Raises:
        InputError: no closed-loop benchmark in the report, or one lacking a metric.
    """
    benches = doc.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise InputError(f"{path}: GuideLLM report has no benchmarks", fix="pass the report guidellm wrote")
    model = _get(doc, "args", "model")
    points, notes = [], []
    for n, b in enumerate(benches):
        where = f"{path}#benchmarks[{n}]"
        strategy = _get(b, "config", "strategy") or _get(b, "args", "strategy") or {}
        kind = str(strategy.get("type_", "")) if isinstance(strategy, dict) else ""
        if kind == "synchronous":
            conc: Any = 1
        elif kind == "concurrent":
            conc = strategy.get("streams")
        else:
            notes.append(f"{where}: strategy {kind or 'unknown'} is open-loop, skipped (only concurrent and "
                         "synchronous benchmarks are closed-loop points)")  # fmt: skip
            continue
        metrics = b.get("metrics") if isinstance(b, dict) else None

        def mean(name: str, metrics: Any = metrics, where: str = where) -> float:
            value = _get(metrics, name, "successful", "mean")
            if value is None:
                raise InputError(f"{where}: metrics.{name}.successful.mean is missing", fix="pass guidellm's report")
            return _num(value, f"{where}: metrics.{name}.successful.mean")

        found = {"model": model or _get(b, "worker", "backend_model"), "concurrency": conc,
                 "isl": mean("prompt_token_count"), "osl": mean("output_token_count")}  # fmt: skip
        points.append(_point(found, ctx, mean("time_to_first_token_ms"), mean("inter_token_latency_ms"), where))
    if not points:
        raise InputError(
            f"{path}: no concurrent or synchronous benchmark in the GuideLLM report",
            "; ".join(notes),
            "run guidellm with --profile concurrent --rate C (or synchronous)",
        )
    return points, notes


_AIPERF_METRICS = {"ttft": "time_to_first_token", "tpot": "inter_token_latency", "isl": "input_sequence_length",
                   "osl": "output_sequence_length"}  # fmt: skip


def read_aiperf(doc: dict[str, Any], path: str, ctx: Context) -> list[MeasuredPoint]:
    """The point of an AIPerf ``profile_export_aiperf.json`` or genai-perf ``profile_export_genai_perf.json``.

    Raises:
        InputError: a metric missing or not in milliseconds / tokens.
    """
    raw = doc.get("records")
    records: dict[str, Any] = raw if isinstance(raw, dict) else doc
    vals: dict[str, float] = {}
    for key, name in _AIPERF_METRICS.items():
        metric = records.get(name)
        if not isinstance(metric, dict) or "avg" not in metric:
            raise InputError(f"{path}: {name}.avg is missing", fix="pass profile_export_aiperf.json (or genai-perf's)")
        unit = str(metric.get("unit", "ms" if key in ("ttft", "tpot") else "tokens"))
        if key in ("ttft", "tpot") and unit != "ms":
            raise InputError(f"{path}: {name} is in {unit!r}, expected ms", fix="export with the default units")
        vals[key] = _num(metric["avg"], f"{path}: {name}.avg")
    raw_cfg = doc.get("input_config")
    cfg: dict[str, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    conc = _get(cfg, "loadgen", "concurrency") or cfg.get("concurrency")
    names = _get(cfg, "endpoint", "model_names") or cfg.get("model_names") or cfg.get("model")
    model = names[0] if isinstance(names, list) and names else names if isinstance(names, str) else None
    found = {"model": model, "concurrency": conc, "isl": vals["isl"], "osl": vals["osl"]}
    return [_point(found, ctx, vals["ttft"], vals["tpot"], path)]


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
        InputError: as :func:`hetplan.perf.points.read_points`, a measured column missing, or a bad measured cell.
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
        raw = doc.get("records")
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
    from hetplan.io import read_text_input

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


# --- fit ------------------------------------------------------------------------------------------------------


@dataclass
class Predicted:
    """Points with the shipped model's predictions; ``keys`` per point: (engine, gpu, model, tp, weight_dtype),
    names as in the catalogs."""

    points: list[MeasuredPoint]
    keys: list[tuple[str, str, str, int, str]]
    pred_ttft_ms: np.ndarray
    pred_tpot_ms: np.ndarray

    @property
    def meas_ttft_ms(self) -> np.ndarray:
        """Measured mean TTFT per point, ms."""
        return np.array([p.ttft_ms for p in self.points])

    @property
    def meas_tpot_ms(self) -> np.ndarray:
        """Measured mean TPOT per point, ms."""
        return np.array([p.tpot_ms for p in self.points])


def predict(points: list[MeasuredPoint]) -> Predicted:
    """The shipped curves' closed-loop estimate of every point (no correction).

    Raises:
        InputError: a point hetplan cannot estimate (unknown model or GPU, a layout that does not fit), naming the
            point's source and the reason.
    """
    from hetplan.catalog.loader import find_gpu, find_model
    from hetplan.perf.points import estimate_points

    res = estimate_points([p.row for p in points])
    keys = []
    for p, r in zip(points, res, strict=True):
        if "error" in r:
            raise InputError(
                f"{p.source}: hetplan cannot estimate this point: {r['error']}",
                fix="check the GPU, model, TP/EP/DP and dtypes (flags or --metadata), or leave the file out",
            )
        keys.append((str(r["engine"]), find_gpu(str(r["gpu"])).name, find_model(str(r["model"])).name, int(r["tp"]),
                     str(r["weight_dtype"])))  # fmt: skip
    return Predicted(
        points, keys, np.array([r["ttft_s"] * 1e3 for r in res]), np.array([r["tpot_s"] * 1e3 for r in res])
    )


def shrunk_factor(log_ratios: np.ndarray, metric: str) -> float:
    """``exp(w x mean(log_ratios))`` with the shrinkage weight of :data:`SHRINKAGE` (1.0 for no points), clipped to
    [1 / :data:`MAX_FACTOR`, :data:`MAX_FACTOR`]."""
    n = log_ratios.size
    if n == 0:
        return 1.0
    tau, sigma = SHRINKAGE[metric]
    w = n * tau**2 / (n * tau**2 + sigma**2)
    return float(np.clip(math.exp(w * float(np.mean(log_ratios))), 1 / MAX_FACTOR, MAX_FACTOR))


@dataclass
class GroupFit:
    """The fit of one engine x GPU x model at one layout (``tp``, ``weight_dtype``), or over all its layouts
    (``tp`` 0, ``weight_dtype`` ``"*"``: the TPOT factor only, :func:`hetplan.perf.settings.find_correction`)."""

    engine: str
    gpu: str
    model: str
    tp: int
    weight_dtype: str
    index: list[int]
    ttft_factor: float
    tpot_factor: float
    loo_ttft: np.ndarray  # relative error of each point with the others' correction (predicted / measured - 1)
    loo_tpot: np.ndarray
    before_ttft: np.ndarray
    before_tpot: np.ndarray
    band: tuple[tuple[str, float, float], ...] = field(default=())


def _fit_group(pred: Predicted, index: list[int], key: tuple[str, str, str, int, str]) -> GroupFit:
    idx = np.array(index)
    any_layout = key[3] == 0
    r_t = np.log(pred.meas_ttft_ms[idx] / pred.pred_ttft_ms[idx])
    r_p = np.log(pred.meas_tpot_ms[idx] / pred.pred_tpot_ms[idx])
    loo_t, loo_p = np.empty(idx.size), np.empty(idx.size)
    for j in range(idx.size):
        rest = np.arange(idx.size) != j
        loo_t[j] = math.exp(-r_t[j]) * (1.0 if any_layout else shrunk_factor(r_t[rest], "ttft")) - 1.0
        loo_p[j] = math.exp(-r_p[j]) * shrunk_factor(r_p[rest], "tpot") - 1.0
    band: tuple[tuple[str, float, float], ...] = ()
    if idx.size >= MIN_BAND_POINTS and not any_layout:
        # step slowdown left: measured / corrected - 1 = 1 / (1 + loo) - 1
        slow_t, slow_p = 1.0 / (1.0 + loo_t) - 1.0, 1.0 / (1.0 + loo_p) - 1.0
        band = tuple(
            (conf, round(max(NOISE_FLOOR["ttft"], float(np.quantile(slow_t, q))), 4),
             round(max(NOISE_FLOOR["tpot"], float(np.quantile(slow_p, q))), 4))
            for conf, q in CONFIDENCE_QUANTILES.items()
        )  # fmt: skip
    ttft_factor = 1.0 if any_layout else shrunk_factor(r_t, "ttft")
    return GroupFit(
        key[0], key[1], key[2], key[3], key[4], list(index), ttft_factor, shrunk_factor(r_p, "tpot"), loo_t, loo_p,
        np.exp(-r_t) - 1.0, np.exp(-r_p) - 1.0, band,
    )  # fmt: skip


def fit(pred: Predicted) -> list[GroupFit]:
    """One :class:`GroupFit` per engine x GPU x model x layout (TP, weight dtype) of ``pred`` and one per engine x
    GPU x model over all its layouts (``tp`` 0, ``"*"``; TPOT only), sorted."""
    groups: dict[tuple[str, str, str, int, str], list[int]] = {}
    for i, (eng, gpu, model, tp, dtype) in enumerate(pred.keys):
        groups.setdefault((eng, gpu, model, tp, dtype), []).append(i)
        groups.setdefault((eng, gpu, model, 0, "*"), []).append(i)
    order = sorted(groups, key=lambda k: (k[:3], k[3] == 0, k[3], k[4]))  # each model's layouts, then "*"
    return [_fit_group(pred, groups[key], key) for key in order]


def summary(rel: np.ndarray) -> dict[str, float]:
    """``{median_abs, p90_abs, bias}`` of relative errors (fractions), rounded to 4 digits."""
    if rel.size == 0:
        return {"median_abs": 0.0, "p90_abs": 0.0, "bias": 0.0}
    return {
        "median_abs": round(float(np.median(np.abs(rel))), 4),
        "p90_abs": round(float(np.quantile(np.abs(rel), 0.9)), 4),
        "bias": round(float(np.median(rel)), 4),
    }


def calibration_doc(pred: Predicted, fits: list[GroupFit], sources: list[str]) -> dict[str, Any]:
    """The calibration file's document: ``schema_version``, ``kind``, the method, the input files with their
    SHA-256, the errors of all points before and after (``overall``), and per group the factors, points, errors
    before and after (leave-one-out) and the band."""
    corrections = []
    for g in fits:
        entry: dict[str, Any] = {
            "engine": g.engine,
            "gpu": g.gpu,
            "model": g.model,
            "tp": g.tp if g.tp else "*",
            "weight_dtype": g.weight_dtype,
            "ttft_factor": round(g.ttft_factor, 4),
            "tpot_factor": round(g.tpot_factor, 4),
            "points": len(g.index),
            "sources": sorted({pred.points[i].source for i in g.index}),
            "residuals": {
                "before": {"ttft": summary(g.before_ttft), "tpot": summary(g.before_tpot)},
                "leave_one_out": {"ttft": summary(g.loo_ttft), "tpot": summary(g.loo_tpot)},
            },
        }
        if g.band:
            entry["band"] = {conf: {"ttft": t, "tpot": p} for conf, t, p in g.band}
        corrections.append(entry)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "generated_by": "hetplan calibrate-perf",
        "method": (
            "factor = exp(w x mean ln(measured / predicted)) per engine x GPU x model x TP x weight dtype (tp and "
            "weight_dtype '*': every layout of the model, TPOT factor only, for layouts without their own entry), "
            f"w = n tau^2 / (n tau^2 + sigma^2), (tau, sigma) TTFT {SHRINKAGE['ttft']}, TPOT "
            f"{SHRINKAGE['tpot']}; residuals: predicted / measured - 1 of mean TTFT and TPOT; band: leave-one-out "
            f"step slowdowns at p50/p80/p90 for groups of >= {MIN_BAND_POINTS} points, at least the engines' "
            f"repeat-run noise {NOISE_FLOOR}"
        ),
        "inputs": [{"path": s, "sha256": _sha(Path(s))} for s in sources],
        "overall": _overall([g for g in fits if g.tp]),
        "corrections": corrections,
    }


def _overall(fits: list[GroupFit]) -> dict[str, Any]:
    """Every point's error before and after (leave-one-out within its engine x GPU x model x layout), pooled."""

    def cat(name: str) -> np.ndarray:
        arrays = [getattr(g, name) for g in fits]
        return np.concatenate(arrays) if arrays else np.array([])

    return {
        "points": int(sum(len(g.index) for g in fits)),
        "before": {"ttft": summary(cat("before_ttft")), "tpot": summary(cat("before_tpot"))},
        "leave_one_out": {"ttft": summary(cat("loo_ttft")), "tpot": summary(cat("loo_tpot"))},
    }


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- the file, read back ---------------------------------------------------------------------------------------


def _finite(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= float(value) <= hi:
        raise InputError(f"{where} must be a number in [{lo:g}, {hi:g}], got {value!r}",
                         fix="regenerate the file with hetplan calibrate-perf")  # fmt: skip
    return float(value)


def corrections_from_doc(doc: Any, where: str) -> tuple[PerfCorrection, ...]:
    """The corrections of a calibration document (:func:`calibration_doc`), checked.

    Raises:
        InputError: not a calibration file, a newer schema, or a field missing, of the wrong type or out of range
            (named, e.g. ``corrections[2].ttft_factor``).
    """
    from hetplan.perf.engines import ENGINE_NAMES

    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise InputError(f"{where} is not a perf calibration file (kind: {KIND})",
                         fix="pass the file hetplan calibrate-perf --out wrote")  # fmt: skip
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"{where}: schema_version {version!r} is not {SCHEMA_VERSION}",
                         fix="regenerate the file with this hetplan's calibrate-perf")  # fmt: skip
    items = doc.get("corrections")
    if not isinstance(items, list):
        raise InputError(f"{where}: corrections is not a list", fix="regenerate the file with hetplan calibrate-perf")
    out = []
    seen = set()
    for n, c in enumerate(items):
        at = f"{where}: corrections[{n}]"
        if not isinstance(c, dict):
            raise InputError(f"{at} is not a mapping", fix="regenerate the file with hetplan calibrate-perf")
        for key in ("engine", "gpu", "model"):
            if not isinstance(c.get(key), str) or not c[key]:
                raise InputError(f"{at}.{key} must be text", fix="regenerate the file with hetplan calibrate-perf")
        if c["engine"] not in ENGINE_NAMES:
            raise InputError(f"{at}.engine {c['engine']!r} is not one of {', '.join(ENGINE_NAMES)}",
                             fix="fix or regenerate the file")  # fmt: skip
        tp_raw, dtype = c.get("tp", "*"), c.get("weight_dtype", "*")
        if tp_raw == "*":
            tp = 0
        elif isinstance(tp_raw, int) and not isinstance(tp_raw, bool) and 1 <= tp_raw <= 1024:
            tp = tp_raw
        else:
            raise InputError(f"{at}.tp must be a whole number 1..1024 or '*', got {tp_raw!r}",
                             fix="regenerate the file with hetplan calibrate-perf")  # fmt: skip
        if not isinstance(dtype, str) or not dtype or (tp == 0) != (dtype == "*"):
            raise InputError(f"{at}.weight_dtype must be a dtype with a TP, or '*' with tp '*', got {dtype!r}",
                             fix="regenerate the file with hetplan calibrate-perf")  # fmt: skip
        entry_key = (c["engine"], c["gpu"], c["model"], str(tp or "*"), dtype)
        if entry_key in seen:
            raise InputError(
                f"{at}: {'/'.join(entry_key)} is corrected twice",
                fix="keep one entry per engine x GPU x model x layout",
            )
        seen.add(entry_key)
        band = []
        raw_band = c.get("band") or {}
        if not isinstance(raw_band, dict):
            raise InputError(f"{at}.band is not a mapping", fix="regenerate the file with hetplan calibrate-perf")
        for conf, v in sorted(raw_band.items()):
            if conf not in CONFIDENCE_QUANTILES or not isinstance(v, dict):
                raise InputError(f"{at}.band.{conf} is not one of p50, p80, p90 with ttft and tpot",
                                 fix="regenerate the file with hetplan calibrate-perf")  # fmt: skip
            band.append((str(conf), _finite(v.get("ttft"), f"{at}.band.{conf}.ttft", 0.0, 100.0),
                         _finite(v.get("tpot"), f"{at}.band.{conf}.tpot", 0.0, 100.0)))  # fmt: skip
        out.append(
            PerfCorrection(
                c["engine"],
                c["gpu"],
                c["model"],
                _finite(c.get("ttft_factor"), f"{at}.ttft_factor", 1 / MAX_FACTOR, MAX_FACTOR),
                _finite(c.get("tpot_factor"), f"{at}.tpot_factor", 1 / MAX_FACTOR, MAX_FACTOR),
                tuple(band),
                tp,
                dtype,
            )  # fmt: skip
        )
    return tuple(out)


def load_calibration(path: str | Path) -> tuple[tuple[PerfCorrection, ...], str]:
    """(corrections, SHA-256 of the file's bytes) of a calibration file.

    Raises:
        InputError: unreadable, not a calibration file, or a bad field (:func:`corrections_from_doc`).
    """
    from hetplan.catalog.loader import read_yaml_mapping
    from hetplan.errors import CatalogError

    p = Path(path)
    try:
        doc = read_yaml_mapping(p, "perf calibration file", "pass the file hetplan calibrate-perf --out wrote")
    except CatalogError as exc:
        raise InputError(exc.what, exc.why, exc.fix) from None
    return corrections_from_doc(doc, str(p)), _sha(p)


def with_calibration(settings: PerfSettings, path: str | Path | None) -> PerfSettings:
    """``settings`` with the calibration file ``path``'s corrections and hash (unchanged when ``path`` is None).

    Raises:
        InputError: as :func:`load_calibration`.
    """
    if path is None:
        return settings
    corrections, sha = load_calibration(path)
    return replace(settings, corrections=corrections, calibration_sha256=sha)


def corrected(rows: list[dict[str, Any]], corrections: tuple[PerfCorrection, ...]) -> list[dict[str, Any]]:
    """Closed-loop estimates (:func:`hetplan.perf.points.estimate_points` output) with each row's correction
    applied to ``ttft_s``, ``tpot_s`` and ``itl_s`` (throughput follows Little's law with the corrected times) and
    a note naming it; rows without one (or with an error) unchanged."""
    from hetplan.catalog.loader import find_gpu, find_model

    out = []
    for r in rows:
        c = None
        if "error" not in r and corrections:
            c = find_correction(corrections, str(r["engine"]), find_gpu(str(r["gpu"])).name,
                                find_model(str(r["model"])).name, int(r["tp"]), str(r["weight_dtype"]))  # fmt: skip
        if c is None:
            out.append(r)
            continue
        ttft, tpot = r["ttft_s"] * c.ttft_factor, r["tpot_s"] * c.tpot_factor
        conc, osl = float(r["concurrency"]), float(r["osl"])
        rps = conc / (ttft + (osl - 1.0) * tpot)
        layout = f"TP{c.tp} {c.weight_dtype}" if c.tp else "all layouts: TPOT only"
        note = f"calibrated: TTFT x {c.ttft_factor:.3f}, TPOT x {c.tpot_factor:.3f} ({c.gpu}, {c.model}, {layout})"
        out.append({**r, "ttft_s": ttft, "tpot_s": tpot, "itl_s": tpot, "requests_per_s": rps,
                    "output_tokens_per_s": rps * osl, "notes": [*r.get("notes", []), note]})  # fmt: skip
    return out


__all__ = [
    "FORMATS",
    "KIND",
    "SCHEMA_VERSION",
    "Context",
    "GroupFit",
    "MeasuredPoint",
    "Predicted",
    "calibration_doc",
    "corrected",
    "corrections_from_doc",
    "detect_format",
    "fit",
    "load_calibration",
    "predict",
    "read_benchmarks",
    "shrunk_factor",
    "summary",
    "with_calibration",
]
