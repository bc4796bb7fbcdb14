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

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetplan.errors import InputError
from hetplan.perf.calibration_file import (
    CONFIDENCE_QUANTILES,
    KIND,
    MAX_FACTOR,
    SCHEMA_VERSION,
    BandLevel,
    CalibrationFile,
    CorrectionEntry,
    ErrorSummary,
    EstimateRow,
    InputFile,
    MetricErrors,
    Overall,
    Residuals,
    corrected,
    corrections_from_doc,
    load_calibration,
    sha256_file,
    with_calibration,
)
from hetplan.perf.calibration_readers import FORMATS, Context, MeasuredPoint, detect_format, read_benchmarks

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

#: (tau, sigma) of the shrinkage in natural-log units, for TTFT and TPOT. tau: spread of the shipped curves'
#: level over engine x GPU x model groups; sigma: spread of one point around its group's level (different ISL,
#: OSL, concurrency, layout, repeat runs). Measured on engine_silicon_calibration.csv (34 engine x GPU x model
#: groups, 1,839 points) with ``benchmarks/user_calibration.py --spread``: root mean square of the groups' median
#: ln(measured/predicted), and 1.4826 x the median absolute deviation of the points from their group's median.
#: One point gets weight 0.77 (TTFT) and 0.86 (TPOT).
SHRINKAGE_TTFT = (0.55, 0.30)
SHRINKAGE_TPOT = (0.34, 0.14)
SHRINKAGE = {"ttft": SHRINKAGE_TTFT, "tpot": SHRINKAGE_TPOT}
#: Points a group needs before its leave-one-out residuals replace the shipped error band.
MIN_BAND_POINTS = 3
#: The engines' own run-to-run spread of mean TTFT and TPOT (median over repeated runs of one configuration and
#: engine version in engine_silicon_calibration.csv, issue 30): a band is never narrower.
NOISE_FLOOR_TTFT = 0.096
NOISE_FLOOR_TPOT = 0.025
NOISE_FLOOR = {"ttft": NOISE_FLOOR_TTFT, "tpot": NOISE_FLOOR_TPOT}


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


def predict(points: list[MeasuredPoint], catalog: Catalog | None = None) -> Predicted:
    """The fitted curves' closed-loop estimate of every point (no correction), with ``catalog``'s models, GPUs and
    curves (None: the shipped catalogs).

    Raises:
        InputError: a point hetplan cannot estimate (unknown model or GPU, a layout that does not fit), naming the
            point's source and the reason.
    """
    from hetplan.catalog.context import Catalog
    from hetplan.perf.points import estimate_points

    cat = catalog or Catalog.shipped()
    res = estimate_points([p.row for p in points], cat)
    keys = []
    rows = [EstimateRow.model_validate(r) for r in res]
    for p, r in zip(points, rows, strict=True):
        if r.error is not None:
            raise InputError(
                f"{p.source}: hetplan cannot estimate this point: {r.error}",
                fix="check the GPU, model, TP/EP/DP and dtypes (flags or --metadata), or leave the file out",
            )
        keys.append((str(r.engine), cat.find_gpu(str(r.gpu)).name, cat.find_model(str(r.model)).name, int(r.tp),
                     str(r.weight_dtype)))  # fmt: skip
    return Predicted(points, keys, np.array([r.ttft_s * 1e3 for r in rows]), np.array([r.tpot_s * 1e3 for r in rows]))


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
            (conf, round(max(NOISE_FLOOR_TTFT, float(np.quantile(slow_t, q))), 4),
             round(max(NOISE_FLOOR_TPOT, float(np.quantile(slow_p, q))), 4))
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


def error_summary(rel: np.ndarray) -> ErrorSummary:
    """Median and p90 |error| and bias of relative errors (fractions), rounded to 4 digits (0 for none)."""
    if rel.size == 0:
        return ErrorSummary(median_abs=0.0, p90_abs=0.0, bias=0.0)
    return ErrorSummary(
        median_abs=round(float(np.median(np.abs(rel))), 4),
        p90_abs=round(float(np.quantile(np.abs(rel), 0.9)), 4),
        bias=round(float(np.median(rel)), 4),
    )


def summary(rel: np.ndarray) -> dict[str, float]:
    """``{median_abs, p90_abs, bias}`` of relative errors (:func:`error_summary` as a dict)."""
    return error_summary(rel).to_doc()


def _residuals(
    before_ttft: np.ndarray, before_tpot: np.ndarray, loo_ttft: np.ndarray, loo_tpot: np.ndarray
) -> Residuals:
    return Residuals(
        before=MetricErrors(ttft=error_summary(before_ttft), tpot=error_summary(before_tpot)),
        leave_one_out=MetricErrors(ttft=error_summary(loo_ttft), tpot=error_summary(loo_tpot)),
    )


def calibration_file(pred: Predicted, fits: list[GroupFit], sources: list[str]) -> CalibrationFile:
    """The typed calibration file: ``schema_version``, ``kind``, the method, the input files with their SHA-256,
    the errors of all points before and after (``overall``), and per group the factors, points, errors before and
    after (leave-one-out) and the band."""
    corrections = [
        CorrectionEntry(
            engine=g.engine,
            gpu=g.gpu,
            model=g.model,
            tp=g.tp if g.tp else "*",
            weight_dtype=g.weight_dtype,
            ttft_factor=round(g.ttft_factor, 4),
            tpot_factor=round(g.tpot_factor, 4),
            points=len(g.index),
            sources=sorted({pred.points[i].source for i in g.index}),
            residuals=_residuals(g.before_ttft, g.before_tpot, g.loo_ttft, g.loo_tpot),
            band={conf: BandLevel(ttft=t, tpot=p) for conf, t, p in g.band} if g.band else None,
        )
        for g in fits
    ]
    return CalibrationFile(
        schema_version=SCHEMA_VERSION,
        kind=KIND,
        generated_by="hetplan calibrate-perf",
        method=(
            "factor = exp(w x mean ln(measured / predicted)) per engine x GPU x model x TP x weight dtype (tp and "
            "weight_dtype '*': every layout of the model, TPOT factor only, for layouts without their own entry), "
            f"w = n tau^2 / (n tau^2 + sigma^2), (tau, sigma) TTFT {SHRINKAGE_TTFT}, TPOT "
            f"{SHRINKAGE_TPOT}; residuals: predicted / measured - 1 of mean TTFT and TPOT; band: leave-one-out "
            f"step slowdowns at p50/p80/p90 for groups of >= {MIN_BAND_POINTS} points, at least the engines' "
            f"repeat-run noise {NOISE_FLOOR}"
        ),
        inputs=[InputFile(path=s, sha256=sha256_file(Path(s))) for s in sources],
        overall=_overall([g for g in fits if g.tp]),
        corrections=corrections,
    )


def _overall(fits: list[GroupFit]) -> Overall:
    """Every point's error before and after (leave-one-out within its engine x GPU x model x layout), pooled."""

    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays) if arrays else np.array([])

    r = _residuals(cat([g.before_ttft for g in fits]), cat([g.before_tpot for g in fits]),
                   cat([g.loo_ttft for g in fits]), cat([g.loo_tpot for g in fits]))  # fmt: skip
    return Overall(points=int(sum(len(g.index) for g in fits)), before=r.before, leave_one_out=r.leave_one_out)


__all__ = [
    "FORMATS",
    "KIND",
    "SCHEMA_VERSION",
    "Context",
    "GroupFit",
    "MeasuredPoint",
    "Predicted",
    "calibration_file",
    "error_summary",
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
