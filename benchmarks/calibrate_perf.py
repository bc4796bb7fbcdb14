"""Fit hetplan's efficiency curves per engine x GPU (kernel tables plus serving points) and per engine x GPU
architecture (serving points only, the fallback); write ``catalogs/perf/<engine>.yaml``.

    python benchmarks/calibrate_perf.py            # fit, print residuals, write the catalogs
    python benchmarks/calibrate_perf.py --dry-run  # fit and print only
    python benchmarks/calibrate_perf.py --leave-one-model-out  # each fit model predicted by a fit without it

Data: ``../shared/data/measured/engine_silicon_calibration.csv`` (measured serving data from NVIDIA AIConfigurator,
Apache-2.0), aggregated rows only (:mod:`silicon`). Split by MODEL: the models in ``silicon.VALIDATION_MODELS``
(Llama-3.1-8B dense, Qwen3-235B-A22B and GLM-5 MoE) are never seen by the fit; ``benchmarks/fidelity.py`` reports
the error on them.

Two sections per engine. ``gpu_curves`` (per GPU with kernel tables): the kernel-level fields
(:data:`kernel_curves.KERNEL_FIELDS`) from :func:`kernel_curves.fit_all` on ``../shared/data/measured/kernels/``
(kernel measurements from NVIDIA AIConfigurator (Apache-2.0)), and the :data:`OVERHEAD_FIELDS` fitted on the
engine x architecture's serving points with every row's kernel fields held at its GPU's values, or on the GPU's
own points where it has :data:`GPU_OVERHEAD_MIN_ROWS` or more (a GPU without serving points on its architecture
takes the nearest architecture's overheads; ``gpu_provenance`` says which).
``curves`` (per architecture, the fallback for GPUs without kernel tables): every field of :data:`ARCH_FIELDS` end
to end, as before the kernel tables (``kv_mbu`` = ``mbu``, ``moe_efficiency`` 1).

Method: for each engine x architecture group, the curve parameters of
:class:`hetplan.perf.calibration.EfficiencyCurves` minimise the soft-L1 loss (scale :data:`LOSS_SCALE`) of
``log(predicted / measured)`` mean TTFT and TPOT over the group's fit rows (TPOT weighted 1.5), plus a light ridge
towards the prior (:data:`PRIOR_WEIGHT`), by Levenberg-Marquardt on the square-root residuals, in coordinates that
keep each parameter inside its physical range (:data:`BOUNDS`). Each group is fitted a second time without the rows
the first fit misses by more than :data:`OUTLIER_FACTOR` (broken runs); a group with fewer than
:data:`SMALL_GROUP_ROWS` rows centres its ridge on the engine's largest group's curves instead of the prior
(:data:`SMALL_GROUP_WEIGHT`). Deterministic: same data, same catalogs.
Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kernel_curves  # noqa: E402
import silicon  # noqa: E402

from hetplan.perf.calibration import PRIOR, EfficiencyCurves  # noqa: E402
from hetplan.perf.closed_loop import CURVE_FIELDS, Rows  # noqa: E402
from hetplan.perf.points import Prepared, prepare_points, steady_state  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CATALOG_VERSION = 1
BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_max": (0.2, 0.95),
    "gemm_half_tokens": (4.0, 2048.0),
    "mbu": (0.3, 0.95),
    "kv_mbu": (0.3, 0.95),
    "attention_efficiency": (0.05, 0.9),
    "step_overhead_s": (2e-4, 2e-3),  # at most 2 ms: see STEP_OVERHEAD_NOTE
    "layer_overhead_s": (1e-7, 5e-4),
    "moe_layer_overhead_s": (1e-7, 5e-4),
    "seq_overhead_s": (1e-7, 5e-4),
    "allreduce_latency_s": (2e-6, 2e-4),
    "link_efficiency": (0.2, 0.95),
    "prefill_queue_factor": (0.1, 30.0),
    "sync_share": (0.001, 0.95),
    "ttft_overhead_s": (1e-3, 0.5),
    "ttft_token_overhead_s": (1e-8, 2e-4),
    "ttft_decode_steps": (0.01, 50.0),
    "moe_efficiency": (0.05, 2.0),
    "sync_half_clients": (1.0, 1e6),
}
PREFILL_MIX = {"vllm": 1.0, "sglang": 0.0, "trtllm": 1.0}
"""``prefill_mix`` per engine, from the engines' schedulers, not fitted: vLLM V1 (chunked prefill, always on) and
TensorRT-LLM (in-flight batching) put prefill into the steps that decode; SGLang runs prefill batches as steps of
their own, ahead of decoding (``--enable-mixed-chunk`` is off by default): its decodes stop while a prompt
prefills (TPOT up) and a prompt does not wait behind decode steps (TTFT down)."""
STEP_OVERHEAD_NOTE = """``step_overhead_s`` (the per-step cost that does not grow with layers) is bounded at 2 ms.
Left up to 50 ms, the fit, whose models all have 36-80 layers, put up to 3 ms there and predicted small dense models too
slow (TensorRT-LLM Hopper: Llama-3.1-70B left out of the fit +31 % TPOT bias, Llama-3.1-8B on H100 in the validation
split +32 %). With the bound, leave-one-model-out (``--leave-one-model-out``, fit models only) median |error|
38.0 % -> 37.4 % TTFT, 15.9 % -> 14.7 % TPOT."""
ARCH_FIELDS = tuple(
    f for f in CURVE_FIELDS if f not in ("kv_mbu", "moe_efficiency", "sync_half_clients", "prefill_mix")
)
"""Fields of the architecture curves, fitted end to end (``kv_mbu`` follows ``mbu``, ``moe_efficiency`` is 1)."""
OVERHEAD_FIELDS = tuple(f for f in CURVE_FIELDS if f not in (*kernel_curves.KERNEL_FIELDS, "prefill_mix"))
"""Fields the per-GPU curves fit on the end-to-end points, the kernel-level fields held fixed."""
TPOT_WEIGHT = 1.5
LOSS_SCALE = 0.25
"""Soft-L1 scale on log errors: residuals beyond about 25 % count linearly (outlying runs do not steer the fit)."""
PRIOR_WEIGHT = 0.01
"""Ridge on the bounded parameters' distance from the prior (per parameter, relative to one row's loss): keeps
parameters the group's rows cannot identify near :data:`hetplan.perf.calibration.PRIOR`."""
LM_ITERATIONS = 60
SMALL_GROUP_ROWS = 60
SMALL_GROUP_WEIGHT = 0.3
"""An engine x architecture group with fewer fit rows than :data:`SMALL_GROUP_ROWS` cannot identify its 17 curve
fields (SGLang Hopper: 31 rows of two models; leaving either out, the other was predicted 40-50 % off): its fit is
drawn towards the engine's largest group's curves (ridge weight :data:`SMALL_GROUP_WEIGHT` per parameter, relative to
one row's loss) instead of the prior's."""
OUTLIER_FACTOR = 3.0
"""A fit row whose mean TTFT or TPOT the first fit misses by more than this factor (either way) is a broken run,
not a shape to follow: the group is fitted again without such rows (when at least 80 % of them remain)."""


def _bounded(z: np.ndarray, names: tuple[str, ...] = ARCH_FIELDS) -> dict[str, float]:
    """Parameters from unbounded coordinates: ``log p = log lo + (log hi - log lo) x sigmoid(z)``."""
    out = {}
    for v, name in zip(z, names, strict=True):
        lo, hi = np.log(BOUNDS[name][0]), np.log(BOUNDS[name][1])
        out[name] = float(np.exp(lo + (hi - lo) / (1.0 + np.exp(-v))))
    return out


def _unbounded(params: dict[str, float], names: tuple[str, ...] = ARCH_FIELDS) -> np.ndarray:
    """Coordinates of ``params`` (:func:`_bounded`'s inverse). A value outside its bounds maps to the centre of the
    range, z = 0 (the geometric mean of the bounds): at a bound the sigmoid is flat, so a start there never moves
    and a ridge centred there pins the parameter (the prior's ``sync_share`` of 0 lies below its bound 0.001)."""
    z = []
    for name in names:
        if not BOUNDS[name][0] <= params[name] <= BOUNDS[name][1]:
            z.append(0.0)
            continue
        lo, hi = np.log(BOUNDS[name][0]), np.log(BOUNDS[name][1])
        frac = (np.log(min(max(params[name], BOUNDS[name][0] * 1.001), BOUNDS[name][1] / 1.001)) - lo) / (hi - lo)
        z.append(np.log(frac / (1.0 - frac)))
    return np.array(z)


def robust_residual(x: np.ndarray, scale: float = LOSS_SCALE) -> np.ndarray:
    """Residual whose square is the soft-L1 loss ``2 s² (sqrt(1 + (x/s)²) - 1)``: ~x near 0, ~sqrt(2 s |x|) beyond
    ``s`` (the square-root trick that lets Levenberg-Marquardt minimise a robust loss)."""
    return np.sign(x) * np.sqrt(2.0 * scale * scale * (np.sqrt(1.0 + (x / scale) ** 2) - 1.0))


def levenberg_marquardt(f: Any, z0: np.ndarray, iterations: int = LM_ITERATIONS) -> np.ndarray:
    """Minimise ``sum(f(z)²)`` from ``z0``: Levenberg-Marquardt with a forward-difference Jacobian (step 1e-3) and
    Marquardt's diagonal scaling; deterministic. Source: Marquardt (1963), textbook form."""
    z = z0.copy()
    r = f(z)
    cost = float(r @ r)
    mu = 1e-2
    for _ in range(iterations):
        h = 1e-3
        jac = np.empty((r.size, z.size))
        for k in range(z.size):
            dz = z.copy()
            dz[k] += h
            jac[:, k] = (f(dz) - r) / h
        jtj = jac.T @ jac
        g = jac.T @ r
        improved = False
        for _attempt in range(8):
            step = np.linalg.solve(jtj + mu * (np.diag(np.diag(jtj)) + 1e-9 * np.eye(z.size)), -g)
            r_new = f(z + step)
            cost_new = float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                z, r, mu, improved = z + step, r_new, max(mu / 3.0, 1e-7), True
                break
            mu *= 4.0
        if not improved:
            break
        gain = cost - cost_new
        cost = cost_new
        if gain < 1e-6 * cost:
            break
    return z


def _rows_with(rows: Rows, sel: np.ndarray, params: dict[str, float]) -> Rows:
    cols = {f: np.asarray(getattr(rows, f))[sel] for f in rows.__dataclass_fields__}
    for name, value in params.items():
        cols[name] = np.full(int(sel.sum()), value)
    return Rows(**cols)


def _sub(prep: Prepared, sel: np.ndarray) -> Prepared:
    idx = np.nonzero(sel)[0]
    return Prepared(
        prep.out,
        [prep.index[i] for i in idx],
        [prep.points[i] for i in idx],
        prep.kv_tokens[idx],
        [prep.notes[i] for i in idx],
        None,
        [prep.arch_names[i] for i in idx],
    )


def log_errors(prep: Prepared, rows: Rows, meas_ttft_s: np.ndarray, meas_tpot_s: np.ndarray) -> tuple[Any, Any]:
    """(log TTFT ratio, log TPOT ratio) of predictions against measurements."""
    ss = steady_state(prep, rows)
    return np.log(ss.ttft_s / meas_ttft_s), np.log(ss.tpot_s / meas_tpot_s)


def _arch_params(params: dict[str, float]) -> dict[str, float]:
    """Architecture curves: every field fitted end to end, ``kv_mbu`` = ``mbu``, ``moe_efficiency`` 1."""
    fixed = {"moe_efficiency": 1.0, "sync_half_clients": PRIOR.sync_half_clients}
    return {**params, "kv_mbu": params["mbu"], **fixed}


def fit_group(
    prep: Prepared, rows: Rows, sel: np.ndarray, ttft: np.ndarray, tpot: np.ndarray,
    names: tuple[str, ...] = ARCH_FIELDS, outliers: bool = True, centre: EfficiencyCurves | None = None,
) -> EfficiencyCurves:  # fmt: skip
    """Curves minimising the robust log error on the selected rows (module docstring): the fields ``names``
    (architecture curves: :data:`ARCH_FIELDS`, :func:`_arch_params`; per-GPU curves: :data:`OVERHEAD_FIELDS`, the
    other fields kept as ``rows`` carries them)."""
    sub = _sub(prep, sel)
    n = int(sel.sum())
    z_prior = _unbounded({name: getattr(centre or PRIOR, name) for name in names}, names)
    ridge = np.sqrt((PRIOR_WEIGHT if centre is None else SMALL_GROUP_WEIGHT) * n)
    complete = _arch_params if names == ARCH_FIELDS else (lambda p: p)

    def residuals(z: np.ndarray) -> np.ndarray:
        r = _rows_with(rows, sel, complete(_bounded(z, names)))
        e1, e2 = log_errors(sub, r, ttft[sel], tpot[sel])
        out = np.concatenate([robust_residual(e1), np.sqrt(TPOT_WEIGHT) * robust_residual(e2), ridge * (z - z_prior)])
        return np.where(np.isfinite(out), out, 1e3)

    best = levenberg_marquardt(residuals, z_prior)
    # second pass without the broken runs: rows the first fit misses by more than OUTLIER_FACTOR in TTFT or TPOT
    r = _rows_with(rows, sel, complete(_bounded(best, names)))
    e1, e2 = log_errors(sub, r, ttft[sel], tpot[sel])
    keep = (np.abs(e1) <= np.log(OUTLIER_FACTOR)) & (np.abs(e2) <= np.log(OUTLIER_FACTOR))
    if outliers and keep.sum() >= max(10, int(0.8 * n)) and not keep.all():
        inner = sel.copy()
        inner[np.nonzero(sel)[0][~keep]] = False
        return fit_group(prep, rows, inner, ttft, tpot, names, outliers=False, centre=centre)
    return EfficiencyCurves(**complete(_bounded(best, names)))


def summary(e: np.ndarray) -> dict[str, float]:
    """Median and p90 |relative error| and signed median, from log ratios."""
    rel = np.exp(e) - 1.0
    return {
        "median_abs": round(float(np.median(np.abs(rel))), 4),
        "p90_abs": round(float(np.percentile(np.abs(rel), 90)), 4),
        "median_signed": round(float(np.median(rel)), 4),
        "rows": int(e.size),
    }


def _largest_group(engine: np.ndarray, arch: np.ndarray, fit_mask: np.ndarray, eng: str) -> str | None:
    """The architecture with the most fit rows of engine ``eng`` (the centre of its small groups' fits)."""
    names, counts = np.unique(arch[(engine == eng) & fit_mask], return_counts=True)
    return str(names[int(np.argmax(counts))]) if names.size else None


def leave_one_model_out(
    prep: Prepared,
    engine: np.ndarray,
    arch: np.ndarray,
    split: np.ndarray,
    models: np.ndarray,
    ttft: np.ndarray,
    tpot: np.ndarray,
    t0: float,
) -> int:
    """For every engine x architecture group and every fit model in it with another fit model beside it, fit on
    the group's other models and predict the left-out model's rows; print the pooled median |error| (the validation
    models stay out throughout), then the signed error binned by ISL, OSL and concurrency (:func:`print_bins`)."""
    assert prep.rows is not None
    e_ttft: list[np.ndarray] = []
    e_tpot: list[np.ndarray] = []
    tested: list[np.ndarray] = []
    for eng in ("vllm", "sglang", "trtllm"):
        for a in sorted({str(x) for x in arch[engine == eng]}):
            group = (engine == eng) & (arch == a) & (split == "fit")
            names = sorted({str(m) for m in models[group]})
            for m in names:
                train = group & (models != m)
                test = group & (models == m)
                if train.sum() < 10 or len(names) < 2:
                    continue
                centre = None
                if group.sum() < SMALL_GROUP_ROWS:  # drawn to the engine's largest group, fitted without m too
                    big = _largest_group(engine, arch, split == "fit", eng)
                    if big is not None and big != a:
                        own = (engine == eng) & (arch == big) & (split == "fit") & (models != m)
                        centre = fit_group(prep, prep.rows, own, ttft, tpot)
                c = fit_group(prep, prep.rows, train, ttft, tpot, centre=centre)
                r = _rows_with(prep.rows, test, {n: getattr(c, n) for n in CURVE_FIELDS})
                e1, e2 = log_errors(_sub(prep, test), r, ttft[test], tpot[test])
                e_ttft.append(e1)
                e_tpot.append(e2)
                tested.append(np.nonzero(test)[0])
                print(f"{eng:7s} {a:10s} without {m:18s} {int(test.sum()):4d} rows  TTFT median |err| "
                      f"{summary(e1)['median_abs']:.1%} bias {summary(e1)['median_signed']:+.1%}  TPOT median |err| "
                      f"{summary(e2)['median_abs']:.1%} bias {summary(e2)['median_signed']:+.1%}")  # fmt: skip
    all1, all2 = summary(np.concatenate(e_ttft)), summary(np.concatenate(e_tpot))
    print(f"leave-one-model-out, {all1['rows']} rows: TTFT median |err| {all1['median_abs']:.1%} "
          f"(p90 {all1['p90_abs']:.1%}), TPOT median |err| {all2['median_abs']:.1%} (p90 {all2['p90_abs']:.1%}); "
          f"took {time.perf_counter() - t0:.1f} s")  # fmt: skip
    print_bins(prep, np.concatenate(tested), np.concatenate(e_ttft), np.concatenate(e_tpot))
    return 0


BINS = {
    "isl": (0, 300, 700, 1500, 3000, 6000, 1 << 30),
    "osl": (0, 150, 300, 700, 1500, 3000, 1 << 30),
    "concurrency": (0, 1, 4, 16, 64, 256, 1 << 30),
}
"""Bin edges (left-open, right-closed) of :func:`print_bins`."""


def print_bins(prep: Prepared, idx: np.ndarray, e_ttft: np.ndarray, e_tpot: np.ndarray) -> None:
    """Print the signed median and median |error| of TTFT and TPOT binned by ISL, OSL and concurrency (each on its
    own, per engine and pooled) for the rows ``idx`` of ``prep`` with log errors ``e_ttft``, ``e_tpot``: the shape
    an error follows, not only its size."""
    engines = np.array([prep.points[i].engine for i in idx])
    for name, edges in BINS.items():
        values = np.array([getattr(prep.points[i], name) for i in idx])
        for eng in ("all", "vllm", "sglang", "trtllm"):
            keep = np.ones(idx.size, bool) if eng == "all" else engines == eng
            cells = []
            for lo, hi in zip(edges[:-1], edges[1:], strict=True):
                sel = keep & (values > lo) & (values <= hi)
                if sel.sum() == 0:
                    continue
                t, p = summary(e_ttft[sel]), summary(e_tpot[sel])
                top = f"{hi}" if hi < 1 << 30 else "inf"
                cells.append(f"({lo},{top}] {int(sel.sum())}: TTFT {t['median_signed']:+.0%} |{t['median_abs']:.0%}| "
                             f"TPOT {p['median_signed']:+.0%}")  # fmt: skip
            print(f"  by {name:11s} {eng:6s} " + "; ".join(cells))


GPU_OVERHEAD_MIN_ROWS = 60
"""Fewest fit rows on one GPU for overheads of its own (else its engine x architecture's)."""


def gpu_names_of(prep: Prepared) -> np.ndarray:
    """Catalog GPU name of every estimable row of ``prep``."""
    from hetplan.catalog.loader import find_gpu

    names: dict[str, str] = {}
    for p in prep.points:
        if p.gpu not in names:
            names[p.gpu] = find_gpu(p.gpu).name
    return np.array([names[p.gpu] for p in prep.points])


def kernel_values(eng: str) -> dict[str, tuple[dict[str, float], dict[str, Any]]]:
    """``{gpu: (kernel-level fields, provenance)}`` of engine ``eng`` (:mod:`kernel_curves`); a field the engine's
    tables do not give on a GPU comes from another engine's tables on that GPU (provenance ``borrowed``)."""
    fits = kernel_curves.fit_all()
    out: dict[str, tuple[dict[str, float], dict[str, Any]]] = {}
    for gpu, f in fits[eng].items():
        values = dict(f["values"])
        prov = dict(f["provenance"])
        borrowed: dict[str, str] = {}
        for field in kernel_curves.KERNEL_FIELDS:
            if field in values:
                continue
            for other in kernel_curves.ENGINES:
                if other != eng and gpu in fits[other] and field in fits[other][gpu]["values"]:
                    values[field] = fits[other][gpu]["values"][field]
                    borrowed[field] = other
                    break
        if borrowed:
            prov["borrowed"] = borrowed
        out[gpu] = (values, prov)
    return out


def _nearest_fitted(arch_name: str, fitted: dict[str, Any]) -> str | None:
    """The fitted architecture nearest to ``arch_name`` by generation (as :func:`curves_for` picks)."""
    from hetplan.perf.calibration import ARCH_ORDER

    if arch_name in fitted:
        return arch_name
    known = [a for a in ARCH_ORDER if a in fitted]
    if not known or arch_name not in ARCH_ORDER:
        return known[-1] if known else None
    index = ARCH_ORDER.index(arch_name)
    return min(known, key=lambda a: (abs(ARCH_ORDER.index(a) - index), -ARCH_ORDER.index(a)))


def fit_engine(
    prep: Prepared, eng: str, engine: np.ndarray, arch: np.ndarray, gpu_names: np.ndarray, fit_mask: np.ndarray,
    ttft: np.ndarray, tpot: np.ndarray, versions: np.ndarray, models: np.ndarray, log: bool = False,
    peers: dict[str, dict[str, dict[str, float]]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Fit engine ``eng`` on the rows of ``fit_mask``: the architecture curves (every field end to end) and the
    per-GPU curves (kernel-level fields from :func:`kernel_values`, the :data:`OVERHEAD_FIELDS` refitted on the
    engine x architecture's end-to-end rows with each row's GPU kernel fields held fixed). Returns ``curves``,
    ``provenance``, ``gpu_curves``, ``gpu_provenance`` as the catalog writes them (:func:`assemble_gpu_curves`, with
    ``peers``: the other engines' ``overheads``, fitted on their own rows) and, for that assembly, ``overheads``
    (per architecture), ``gpu_overheads`` and ``kernels``."""
    assert prep.rows is not None
    curves: dict[str, dict[str, float]] = {}
    provenance: dict[str, Any] = {}
    overheads: dict[str, dict[str, float]] = {}
    gpu_overheads: dict[str, dict[str, float]] = {}
    kernels = kernel_values(eng)
    prep.rows.prefill_mix[engine == eng] = PREFILL_MIX[eng]
    big = _largest_group(engine, arch, fit_mask, eng)
    order = sorted({str(x) for x in arch[engine == eng]}, key=lambda a: (a != big, a))
    centre: EfficiencyCurves | None = None
    centre_k: EfficiencyCurves | None = None
    for a in order:
        sel = (engine == eng) & (arch == a) & fit_mask
        if sel.sum() < 10:
            if log:
                print(f"{eng:7s} {a:10s} only {int(sel.sum())} fit rows: not fitted")
            continue
        small = a != big and sel.sum() < SMALL_GROUP_ROWS
        c = fit_group(prep, prep.rows, sel, ttft, tpot, centre=centre if small else None)
        c = replace(c, prefill_mix=PREFILL_MIX[eng])
        if a == big:
            centre = c
        curves[a] = {**{n: float(f"{getattr(c, n):.6g}") for n in ARCH_FIELDS}, "prefill_mix": PREFILL_MIX[eng]}
        r = _rows_with(prep.rows, sel, {n: getattr(c, n) for n in CURVE_FIELDS})
        e1, e2 = log_errors(_sub(prep, sel), r, ttft[sel], tpot[sel])
        provenance[a] = {
            "fit_rows": int(sel.sum()),
            "models": sorted({str(m) for m in models[sel]}),
            "gpus": sorted({str(g) for g in gpu_names[sel]}),
            "engine_versions": sorted({str(v) for v in versions[sel]}),
            "fit_residuals": {"ttft": summary(e1), "tpot": summary(e2)},
        }
        if small and centre is not None:
            provenance[a]["drawn_towards"] = f"{eng} {big} curves (fewer than {SMALL_GROUP_ROWS} fit rows)"
        if log:
            print(f"{eng:7s} {a:10s} {int(sel.sum()):4d} fit rows  TTFT median |err| "
                  f"{summary(e1)['median_abs']:.1%}  TPOT median |err| {summary(e2)['median_abs']:.1%}  "
                  "(architecture curves, every field end to end)")  # fmt: skip
        # per-GPU curves: kernel fields per row fixed, the overheads refitted on the same rows
        base = {n: getattr(c, n) for n in CURVE_FIELDS}
        cols = {n: np.asarray(getattr(prep.rows, n)).copy() for n in prep.rows.__dataclass_fields__}
        for i in np.nonzero(sel)[0]:
            vals = {**base, **kernels.get(str(gpu_names[i]), ({}, {}))[0]}
            for n in CURVE_FIELDS:
                cols[n][i] = vals[n]
        rows_k = Rows(**cols)
        ck = fit_group(prep, rows_k, sel, ttft, tpot, OVERHEAD_FIELDS, centre=centre_k if small else None)
        if a == big:
            centre_k = ck
        overheads[a] = {n: float(f"{getattr(ck, n):.6g}") for n in OVERHEAD_FIELDS}
        r = _rows_with(rows_k, sel, overheads[a])
        e1, e2 = log_errors(_sub(prep, sel), r, ttft[sel], tpot[sel])
        provenance[a]["overheads_with_kernel_curves"] = {"fit_residuals": {"ttft": summary(e1), "tpot": summary(e2)}}
        if log:
            print(f"{eng:7s} {a:10s} {int(sel.sum()):4d} fit rows  TTFT median |err| "
                  f"{summary(e1)['median_abs']:.1%}  TPOT median |err| {summary(e2)['median_abs']:.1%}  "
                  "(per-GPU kernel curves, overheads end to end)")  # fmt: skip
        for gpu in sorted({str(g) for g in gpu_names[sel]}):
            own = sel & (gpu_names == gpu)
            if own.sum() >= GPU_OVERHEAD_MIN_ROWS and gpu in kernels:
                cg = fit_group(prep, rows_k, own, ttft, tpot, OVERHEAD_FIELDS)
                gpu_overheads[gpu] = {n: float(f"{getattr(cg, n):.6g}") for n in OVERHEAD_FIELDS}
    fit = {"curves": curves, "provenance": provenance, "overheads": overheads, "gpu_overheads": gpu_overheads,
           "kernels": kernels}  # fmt: skip
    return {**fit, **assemble_gpu_curves(eng, fit, peers)}


OVERHEAD_TIME_FIELDS = ("step_overhead_s", "layer_overhead_s", "moe_layer_overhead_s", "seq_overhead_s",
                        "ttft_overhead_s", "ttft_token_overhead_s")  # fmt: skip
"""Overhead fields in seconds (per step, layer, MoE layer, running sequence; per request and prompt token before
the first token) that a GPU borrows from the other engines on its own architecture (:func:`borrow_overheads`); the
unit-free ones (queueing, synchronised waves, decode steps before the first token) describe the engine's
scheduler and come from the same engine on the nearest architecture."""


def borrow_overheads(
    eng: str, arch_name: str, overheads: dict[str, dict[str, float]],
    peers: dict[str, dict[str, dict[str, float]]] | None = None,
) -> tuple[str, dict[str, float], list[str]] | None:  # fmt: skip
    """The overhead fields of engine ``eng`` on architecture ``arch_name``.

    ``overheads``: ``eng``'s fitted :data:`OVERHEAD_FIELDS` per architecture; ``peers``: the same of the other
    engines, fitted on their own rows. Where ``eng`` has overheads on ``arch_name`` they are returned as fitted.
    Else the nearest fitted architecture's (by generation, :func:`_nearest_fitted`) stand in for the unit-free
    fields (the engine's scheduler), and the seconds-valued ones (:data:`OVERHEAD_TIME_FIELDS`: host, launch and
    small-kernel costs of this generation's systems) are the geometric mean of the peer engines' on ``arch_name``
    (the nearest architecture's too when no peer is fitted there).

    Chosen by the error on held-out systems (``benchmarks/fidelity.py --hold-out system``; fit-split rows of the
    three campaigns that borrow: TensorRT-LLM H200 and B200, SGLang H200), sum of their TTFT and TPOT median
    |errors| 199 % with the nearest architecture's overheads as fitted, 227 % with their per-step times scaled by
    the peers' ratio between the two architectures, 178 % with every overhead field from the peers, 169 % with the
    nearest architecture's end-to-end curves (no kernel tables), 153 % with this rule.

    Returns:
        (source architecture, overhead fields, peer engines whose times are used), or None when ``eng`` has no
        fitted architecture at all.
    """
    source = _nearest_fitted(arch_name, overheads)
    if source is None:
        return None
    values = dict(overheads[source])
    if source == arch_name:
        return source, values, []
    on_arch = {peer: fitted[arch_name] for peer, fitted in sorted((peers or {}).items()) if arch_name in fitted}
    on_arch.pop(eng, None)
    for name in OVERHEAD_TIME_FIELDS if on_arch else ():
        values[name] = float(np.exp(np.mean([np.log(fields[name]) for fields in on_arch.values()])))
    used = list(on_arch)
    return source, values, used


def assemble_gpu_curves(
    eng: str, fit: dict[str, Any], peers: dict[str, dict[str, dict[str, float]]] | None = None
) -> dict[str, Any]:
    """``gpu_curves`` and ``gpu_provenance`` of engine ``eng`` from its group fit (:func:`fit_engine`'s
    ``curves``, ``overheads``, ``gpu_overheads``, ``kernels``): each GPU with kernel tables takes its kernel-level
    fields, its own overheads where it has them, else its architecture's, else borrowed (:func:`borrow_overheads`:
    the nearest architecture's, their seconds-valued fields from the other engines on its own; ``peers``: the
    other engines' ``overheads``)."""
    from hetplan.catalog.loader import find_gpu
    from hetplan.perf.calibration import normalize_arch

    curves: dict[str, dict[str, float]] = fit["curves"]
    overheads: dict[str, dict[str, float]] = fit["overheads"]
    gpu_overheads: dict[str, dict[str, float]] = fit["gpu_overheads"]
    gpu_curves: dict[str, dict[str, float]] = {}
    gpu_provenance: dict[str, Any] = {}
    for gpu, (values, prov) in sorted(fit["kernels"].items()):
        a = normalize_arch(find_gpu(gpu).arch)
        borrowed = borrow_overheads(eng, a, overheads, peers)
        if borrowed is None:
            continue
        group, group_overheads, used = borrowed
        full = {**curves[group], **gpu_overheads.get(gpu, group_overheads), **values, "prefill_mix": PREFILL_MIX[eng]}
        gpu_curves[gpu] = {n: float(f"{full[n]:.6g}") for n in CURVE_FIELDS if n in full}
        if gpu in gpu_overheads:
            source = f"{eng} {gpu} end-to-end rows (its own: {GPU_OVERHEAD_MIN_ROWS} fit rows or more)"
        elif group == a:
            source = f"{eng} {group} end-to-end rows"
        elif used:
            source = (f"{eng} {group} end-to-end rows (no end-to-end rows on {a}: borrowed from the nearest "
                      f"architecture; its overheads in seconds from {' and '.join(used)} on {a})")  # fmt: skip
        else:
            source = (f"{eng} {group} end-to-end rows (no end-to-end rows on {a}: borrowed from the nearest "
                      "architecture, as fitted there: no other engine has rows on it)")  # fmt: skip
        gpu_provenance[gpu] = {"kernel_tables": prov, "overheads_from": source}
    return {"gpu_curves": gpu_curves, "gpu_provenance": gpu_provenance}


ENGINES = ("vllm", "sglang", "trtllm")


def peer_overheads(fits: dict[str, dict[str, Any]], eng: str) -> dict[str, dict[str, dict[str, float]]]:
    """The other engines' fitted overheads per architecture (``{engine: {architecture: fields}}``) from
    :func:`fit_engine` results ``fits``: the ``peers`` of ``eng``'s :func:`assemble_gpu_curves`."""
    return {other: fit["overheads"] for other, fit in sorted(fits.items()) if other != eng}


def main(argv: list[str] | None = None) -> int:
    """Fit, print, and (unless ``--dry-run``) write ``catalogs/perf/<engine>.yaml``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print the fit, write nothing")
    ap.add_argument(
        "--leave-one-model-out",
        action="store_true",
        help="print the leave-one-model-out error on the fit split (each fit model predicted by a fit without it) "
        "and write nothing: the honest way to compare model variants without touching the validation models",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "catalogs" / "perf", help="folder for <engine>.yaml")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    frame, n_disagg = silicon.load()
    prep = prepare_points(silicon.as_point_rows(frame))
    assert prep.rows is not None
    ok = np.array(prep.index)
    meas = frame.iloc[ok]
    ttft = meas["ttft_ms"].to_numpy() / 1e3
    tpot = meas["tpot_ms"].to_numpy() / 1e3
    engine = np.array([p.engine for p in prep.points])
    arch = np.array(prep.arch_names)
    split = meas["split"].to_numpy()
    versions = meas["backend_version"].to_numpy()
    models = meas["model"].to_numpy()
    refused = len(frame) - len(ok)
    held_out = ", ".join(silicon.VALIDATION_MODELS)
    print(
        f"{len(frame)} aggregated rows ({n_disagg} disaggregated rows left out, {silicon.DISAGG_REASON}), "
        f"{refused} refused by hetplan's "
        f"layout checks, {len(ok)} used; validation models (never fitted): {held_out}"
    )
    if args.leave_one_model_out:
        return leave_one_model_out(prep, engine, arch, split, models, ttft, tpot, t0)
    gpu_names = gpu_names_of(prep)
    fits = {
        eng: fit_engine(prep, eng, engine, arch, gpu_names, split == "fit", ttft, tpot, versions, models, log=True)
        for eng in ENGINES
    }
    for eng in ENGINES:  # borrowed overheads take the other engines' on the GPU's architecture
        fit = {**fits[eng], **assemble_gpu_curves(eng, fits[eng], peer_overheads(fits, eng))}
        doc = {
            "schema_version": CATALOG_VERSION,
            "kind": "perf",
            "engine": eng,
            "source": "fitted by benchmarks/calibrate_perf.py on measured serving data from NVIDIA AIConfigurator "
            "(Apache-2.0), aiconfigurator_core/systems/silicon_sample.csv, aggregated rows; gpu_curves: kernel-level "
            "fields fitted by benchmarks/kernel_curves.py on per-operation kernel latencies",
            "attribution": kernel_curves.ATTRIBUTION,
            "validation_models": list(silicon.VALIDATION_MODELS),
            "gpu_curves": fit["gpu_curves"],
            "curves": fit["curves"],
            "gpu_provenance": fit["gpu_provenance"],
            "provenance": fit["provenance"],
        }
        if not args.dry_run:
            args.out.mkdir(parents=True, exist_ok=True)
            text = yaml.safe_dump(doc, sort_keys=False, width=120)
            (args.out / f"{eng}.yaml").write_text(text)
    print(f"fit took {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
