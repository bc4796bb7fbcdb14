"""The A1/A2 cost-efficiency model of Cauchy (DESIGN §3.1): fit, explain, and prune candidates with it.

For a workload, every ordered pair of GPU types (prefill g_p, decode g_d, homogeneous pairs included) gets its
cost efficiency from the full model: CE = tokens per USD (input + output) of the pair's best combo over TP degrees
and n:m ratios, i.e. ``3600 · (goodput / $ per hour) · tokens per request`` with goodput from
:func:`hetplan.solvers.cauchy_candidates.enumerate_candidates`. Cauchy's model explains it with two terms::

    CE ≈ A1 · F(g_p) / π(g_p) + A2 · B(g_d) / π(g_d),        A1, A2 ≥ 0, no intercept

with F the prefill compute (TFLOP/s) and B the decode bandwidth (GB/s) the performance model uses for one GPU
(measured figures where a profile is given, datasheet × efficiency prior otherwise; see
:mod:`hetplan.perf.measured`) and π the price in $/GPU-hour. A1 and A2 come from non-negative least squares
(:func:`nnls`, exact for a handful of variables); R² (about the mean) and Spearman's rank correlation between the
fitted and the full CE say how well two numbers explain the pairs. A1 · F/π and A2 · B/π are the "relative
advantage" of a GPU as prefill and as decode worker: the most TFLOPS per dollar should prefill, the most bandwidth
per dollar should decode. Pairs whose full model has no feasible combo (CE 0) are left out of the fit and listed.

Pruning (``hetplan plan --prune-with FIT``): the fit's A1, A2 are applied to the plan's own GPUs and prices; the
top-K heterogeneous pairs by fitted CE (and any pair tied with the K-th) are kept together with every
homogeneous pair (which the homogeneous baseline needs and which include the best homogeneous combo); survivors
are scored with the full model and the ILP as usual. This is a heuristic (the plan says so): the test suite checks
that K = 6 keeps the optimum of example (a) (8 of 20 heterogeneous pairs kept) and K = 2 that of example (b);
K = 1 loses example (a)'s ($79.74/h against $63.35/h), so keep K well above 1.

Source: Cauchy (SoCC 2025) for the model and its use in pruning; the calibration set (best combo per type pair),
the NNLS by active-set enumeration and the pruning rule are hetplan's own reconstruction.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hetplan import __version__
from hetplan.catalog.loader import read_yaml_file
from hetplan.errors import InputError
from hetplan.perf.latency import InstanceModel
from hetplan.solvers.cauchy import PlanRequest
from hetplan.solvers.cauchy_candidates import enumerate_candidates

DEFAULT_TOP_K = 6
DEFAULT_MIN_R2 = 0.5
"""R² below which ``profile fit`` and ``plan --prune-with`` warn that pruning with the fit may lose the optimum
(a setting: ``min_r2`` of :func:`hetplan.api.fit_ce` / :func:`hetplan.api.plan`; hetplan's own choice: at 0.5 the
two terms explain less than half of the spread of the pairs' cost efficiency)."""
WORKLOAD_MEAN_TOLERANCE = 0.25
"""Relative difference of mean prompt or output length above which a fit's workload counts as another one."""


def nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares ``argmin_{a >= 0} ||x·a - y||²`` by enumerating active sets.

    The problem is convex, so its minimiser is the unconstrained least-squares solution on some subset of the
    columns (the rest at zero) that is non-negative; trying every subset and keeping the feasible one with the
    smallest residual is exact. Cost 2^n small solves: for n <= 12 columns.

    Args:
        x: design matrix, shape (rows, n). y: targets, shape (rows,).

    Raises:
        ValueError: more than 12 columns or mismatched shapes.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    rows, n = x.shape
    if n > 12 or y.shape != (rows,):
        raise ValueError(f"nnls: need x (rows, n <= 12) and y (rows,), got {x.shape} and {y.shape}")
    best = np.zeros(n)
    best_res = float(y @ y)
    for size in range(1, n + 1):
        for cols in itertools.combinations(range(n), size):
            sub = x[:, cols]
            coef, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if np.any(coef < 0):
                continue
            res = float(np.sum((sub @ coef - y) ** 2))
            if res < best_res - 1e-12 * max(best_res, 1.0):
                best_res = res
                best = np.zeros(n)
                best[list(cols)] = coef
    return best


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    """Coefficient of determination about the mean, ``1 - SS_res / SS_tot`` (can be negative without intercept)."""
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return 1.0 if float(np.sum((y - fitted) ** 2)) == 0 else 0.0
    return 1.0 - float(np.sum((y - fitted) ** 2)) / ss_tot


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(1, x.size + 1)
    values, inverse = np.unique(x, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    counts = np.bincount(inverse)
    return np.asarray((sums / counts)[inverse], dtype=float)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); 0 when either side is constant."""
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclass(frozen=True)
class GpuFeatures:
    """What the A1/A2 model sees of one GPU type: prefill TFLOP/s and decode GB/s the perf model uses, $/GPU-hour."""

    gpu: str
    prefill_tflops: float
    decode_gb_per_s: float
    usd_per_gpu_hour: float
    measured: bool

    @property
    def tflops_per_usd(self) -> float:
        """F / π, TFLOP/s per $/hour."""
        return self.prefill_tflops / self.usd_per_gpu_hour

    @property
    def gb_per_s_per_usd(self) -> float:
        """B / π, GB/s per $/hour."""
        return self.decode_gb_per_s / self.usd_per_gpu_hour


def gpu_features(req: PlanRequest) -> dict[str, GpuFeatures]:
    """Features of every GPU type of ``req`` (one GPU, TP 1, the request's dtypes and settings)."""
    out = {}
    for gpu in req.gpus:
        inst = InstanceModel(req.arch, gpu, 1, 1, req.settings, req.catalog)
        out[gpu.name] = GpuFeatures(
            gpu.name,
            inst.peak_flops * inst.eff.prefill_mfu / 1e12,
            inst.mem_bytes_per_s * inst.eff.decode_mbu / 1e9,
            req.prices[gpu.name].usd_per_gpu_hour,
            gpu.measured is not None,
        )
    return out


def fitted_ce(a1: float, a2: float, p: GpuFeatures, d: GpuFeatures) -> float:
    """``A1·F_p/π_p + A2·B_d/π_d``, tokens/USD."""
    return a1 * p.tflops_per_usd + a2 * d.gb_per_s_per_usd


@dataclass(frozen=True)
class CeFit:
    """Result of :func:`fit_ce`: coefficients, goodness of fit and the pairs it was fitted on."""

    a1: float
    a2: float
    r2: float
    spearman: float
    features: dict[str, GpuFeatures]
    pairs: list[dict[str, Any]]
    left_out: list[str]

    def ranking(self) -> dict[str, list[dict[str, Any]]]:
        """GPUs by relative advantage: as prefill (A1·F/π) and as decode (A2·B/π) worker, best first."""
        pre = sorted(self.features.values(), key=lambda f: (-f.tflops_per_usd, f.gpu))
        dec = sorted(self.features.values(), key=lambda f: (-f.gb_per_s_per_usd, f.gpu))
        return {
            "prefill": [
                {"gpu": f.gpu, "tflops_per_usd_hour": _r(f.tflops_per_usd), "a1_term": _r(self.a1 * f.tflops_per_usd)}
                for f in pre
            ],
            "decode": [
                {
                    "gpu": f.gpu,
                    "gb_per_s_per_usd_hour": _r(f.gb_per_s_per_usd),
                    "a2_term": _r(self.a2 * f.gb_per_s_per_usd),
                }
                for f in dec
            ],
        }


def _r(x: float) -> float:
    return float(f"{x:.6g}") if x else 0.0


def fit_ce(req: PlanRequest, tokens_per_request: float) -> CeFit:
    """Fit A1, A2 on every ordered GPU-type pair of ``req`` (see the module docstring).

    Args:
        req: the plan request (model, workload lengths, SLOs, GPUs, prices, settings; profiles already applied).
        tokens_per_request: mean prompt + output tokens, for tokens/USD.

    Raises:
        InputError: fewer than two pairs have a feasible combo (nothing to fit).
        InfeasibleError: no GPU fits the model or meets the SLOs (from the candidate enumeration).
    """
    cands = enumerate_candidates(req, prune=False)
    feats = gpu_features(req)
    names = [g.name for g in req.gpus]
    rows, left_out = [], []
    for p, d in itertools.product(names, names):
        best = cands.best_req_per_s_per_usd_by_pair.get((p, d), 0.0)
        if best <= 0:
            left_out.append(f"{p} -> {d}")
            continue
        rows.append((p, d, 3600.0 * best * tokens_per_request))
    if len(rows) < 2:
        raise InputError(
            f"only {len(rows)} GPU pair(s) can serve this workload within the SLOs",
            "the A1/A2 fit needs at least two (prefill, decode) pairs with a feasible combo",
            "add GPU types to --gpus or relax the SLOs",
        )
    x = np.array([[feats[p].tflops_per_usd, feats[d].gb_per_s_per_usd] for p, d, _ in rows])
    y = np.array([ce for *_, ce in rows])
    a1, a2 = (float(v) for v in nnls(x, y))
    fitted = x @ np.array([a1, a2])
    pairs: list[dict[str, Any]] = [
        {
            "prefill_gpu": p,
            "decode_gpu": d,
            "tokens_per_usd": _r(ce),
            "fitted_tokens_per_usd": _r(float(f)),
        }
        for (p, d, ce), f in zip(rows, fitted, strict=True)
    ]
    pairs.sort(key=lambda r: (-float(r["tokens_per_usd"]), str(r["prefill_gpu"]), str(r["decode_gpu"])))
    return CeFit(a1, a2, r_squared(y, fitted), spearman(y, fitted), feats, pairs, left_out)


class FitFile(BaseModel):
    """A saved fit (``hetplan profile fit --out``); ``--prune-with`` reads ``a1`` and ``a2``."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    schema_version: Literal[1]
    kind: Literal["ce-fit"]
    a1: float = Field(ge=0)
    a2: float = Field(ge=0)
    # what the fit was fitted on (absent from files written before hetplan recorded it: nothing is checked then)
    model: str | None = None
    workload: dict[str, Any] | None = None
    gpus: dict[str, Any] | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    r2: float | None = None


def low_r2_note(r2: float, min_r2: float = DEFAULT_MIN_R2) -> list[str]:
    """A warning when the fit's R² is below ``min_r2`` (:data:`DEFAULT_MIN_R2`), else nothing."""
    if r2 >= min_r2:
        return []
    return [
        f"the A1/A2 fit explains the GPU pairs poorly (R² {r2:.3f} < {min_r2:g}): pruning with it "
        "(plan --prune-with) may drop the optimal pair; keep --prune-top-k large or plan without pruning"
    ]


def fit_mismatch(
    fit: FitFile, req: PlanRequest, workload: dict[str, Any], min_r2: float = DEFAULT_MIN_R2
) -> tuple[list[str], frozenset[str]]:
    """Compare a fit file with the plan it prunes: (warnings, candidate GPUs the fit never saw).

    Warns when the model, the weight/KV dtypes, the workload (another name, or a mean prompt or output length more
    than :data:`WORKLOAD_MEAN_TOLERANCE` away) or the GPU set differ, and when the fit's R² is below ``min_r2``.
    The unseen GPUs are kept by :func:`keep_pairs` (every pair that involves one), never pruned. Fields a fit file
    lacks (written before hetplan recorded them) are not compared. Source: hetplan's own reconstruction.
    """
    notes: list[str] = []
    differs: list[str] = []
    model = req.arch.spec.name
    if fit.model is not None and fit.model != model:
        differs.append(f"model {fit.model} (plan: {model})")
    for field, mine in (("weight_dtype", req.arch.weight_dtype), ("kv_dtype", req.arch.kv_dtype)):
        theirs = getattr(fit, field)
        if theirs is not None and theirs != mine:
            differs.append(f"{field} {theirs} (plan: {mine})")
    if fit.workload:
        name, their_name = workload.get("name"), fit.workload.get("name")
        far = [
            f"mean {key.split('_')[0]} {float(fit.workload[key]):,.0f} tokens (plan: {float(workload[key]):,.0f})"
            for key in ("prompt_tokens_mean", "output_tokens_mean")
            if key in fit.workload
            and key in workload
            and abs(float(fit.workload[key]) - float(workload[key]))
            > WORKLOAD_MEAN_TOLERANCE * max(float(workload[key]), 1e-9)
        ]
        if their_name != name or far:
            differs.append(f"workload {their_name} (plan: {name})" + "".join(f", {f}" for f in far))
    plan_gpus = {g.name for g in req.gpus}
    unseen: frozenset[str] = frozenset()
    if fit.gpus is not None:
        unseen = frozenset(plan_gpus - set(fit.gpus))
        if unseen:
            notes.append(
                f"the A1/A2 fit never saw {', '.join(sorted(unseen))}: every GPU pair with "
                f"{'it' if len(unseen) == 1 else 'them'} is kept (not pruned); refit on this plan's GPUs "
                "(hetplan profile fit ... --gpus) to prune them"
            )
    if differs:
        notes.insert(
            0,
            f"the A1/A2 fit was fitted on another scenario ({'; '.join(differs)}): its ranking of GPU pairs may not "
            "hold here and pruning may lose the optimum; refit with 'hetplan profile fit' on this scenario",
        )
    if fit.r2 is not None:
        notes += low_r2_note(fit.r2, min_r2)
    return notes, unseen


def fit_doc(
    fit: CeFit,
    req: PlanRequest,
    workload: dict[str, Any],
    scenario_name: str,
    profiles: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The fit as a document (what ``--json`` prints and ``--out`` writes): coefficients, goodness of fit, what
    it was fitted on (model, dtypes, workload summary, SLOs, GPUs, ``profiles`` records) and ``warnings``."""
    return {
        "schema_version": 1,
        "kind": "ce-fit",
        "hetplan_version": __version__,
        "scenario": scenario_name,
        "model": req.arch.spec.name,
        "weight_dtype": req.arch.weight_dtype,
        "kv_dtype": req.arch.kv_dtype,
        "workload": workload,
        "slo": {"ttft_s": req.ttft_slo_s, "tpot_s": req.tpot_slo_s, "percentile": _r(req.stats.quantile * 100)},
        "a1": _r(fit.a1),
        "a2": _r(fit.a2),
        "a1_over_a2": _r(fit.a1 / fit.a2) if fit.a2 > 0 else None,
        "units": {
            "a1": "tokens/USD per (TFLOP/s per $/GPU-hour)",
            "a2": "tokens/USD per (GB/s per $/GPU-hour)",
            "tokens_per_usd": "input+output tokens per USD of the pair's best combo (full model)",
        },
        "r2": round(fit.r2, 6),
        "spearman": round(fit.spearman, 6),
        "gpus": {
            name: {
                "prefill_tflops": _r(f.prefill_tflops),
                "decode_gb_per_s": _r(f.decode_gb_per_s),
                "usd_per_gpu_hour": f.usd_per_gpu_hour,
                "measured": f.measured,
            }
            for name, f in sorted(fit.features.items())
        },
        "ranking": fit.ranking(),
        "pairs": fit.pairs,
        "left_out": fit.left_out,
        "profiles": list(profiles or []),
        "warnings": list(warnings or []),
    }


def load_fit(path: str | Path) -> FitFile:
    """Read a fit file (``hetplan profile fit --out``).

    Raises:
        InputError / CatalogError: unreadable or invalid file.
    """
    return read_yaml_file(Path(path), FitFile, "fit file", "write it with 'hetplan profile fit --out FILE'")


def keep_pairs(
    a1: float, a2: float, req: PlanRequest, top_k: int = DEFAULT_TOP_K, always: frozenset[str] = frozenset()
) -> frozenset[tuple[str, str]]:
    """(prefill GPU, decode GPU) pairs kept by ``--prune-with``: the ``top_k`` heterogeneous pairs by fitted CE,
    every pair tied with the ``top_k``-th (non-negative least squares often sets A1 or A2 to 0, and then the fit
    cannot tell the GPUs on that side apart: cutting inside a tie would choose by name), every homogeneous pair,
    and every pair with a GPU in ``always`` (GPUs the fit never saw, :func:`fit_mismatch`).

    Raises:
        InputError: ``top_k`` < 1.
    """
    if top_k < 1:
        raise InputError(f"--prune-top-k must be >= 1, got {top_k}", fix="pass e.g. --prune-top-k 6")
    feats = gpu_features(req)
    names = sorted(feats)
    scored = sorted(
        (-fitted_ce(a1, a2, feats[p], feats[d]), p, d) for p, d in itertools.product(names, names) if p != d
    )
    kept = scored[:top_k]
    if kept and len(scored) > top_k:
        cut = kept[-1][0]
        kept += [s for s in scored[top_k:] if abs(s[0] - cut) <= 1e-9 * max(abs(cut), 1e-300)]
    unseen = frozenset((p, d) for p, d in itertools.product(names, names) if p in always or d in always)
    return frozenset((p, d) for _, p, d in kept) | frozenset((g, g) for g in names) | unseen
