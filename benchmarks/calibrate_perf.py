"""Fit hetplan's efficiency curves per engine x GPU architecture on measured serving points; write
``catalogs/perf/<engine>.yaml``.

    python benchmarks/calibrate_perf.py            # fit, print residuals, write the catalogs
    python benchmarks/calibrate_perf.py --dry-run  # fit and print only

Data: ``../shared/data/measured/engine_silicon_calibration.csv`` (measured serving data from NVIDIA AIConfigurator,
Apache-2.0), aggregated rows only (:mod:`silicon`). Split by MODEL: the models in ``silicon.VALIDATION_MODELS``
(Llama-3.1-8B dense, Qwen3-235B-A22B and GLM-5 MoE) are never seen by the fit; ``benchmarks/fidelity.py`` reports
the error on them.

Method: for each engine x architecture group, the curve parameters of
:class:`hetplan.perf.calibration.EfficiencyCurves` minimise the mean soft-L1 loss of ``log(predicted / measured)``
of TTFT and TPOT over the group's fit rows (TPOT weighted 1.5), by Nelder-Mead in log-parameter space from the
prior, with each parameter clipped to a physical range (:data:`BOUNDS`). Deterministic: same data, same catalogs.
Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
    "attention_efficiency": (0.05, 0.9),
    "step_overhead_s": (2e-4, 0.05),
    "seq_overhead_s": (1e-7, 5e-4),
    "allreduce_latency_s": (2e-6, 2e-4),
    "link_efficiency": (0.2, 0.95),
    "prefill_queue_factor": (0.1, 30.0),
    "sync_share": (0.001, 0.95),
}
TPOT_WEIGHT = 1.5
MAX_EVALS = 700


def _clip(values: np.ndarray) -> dict[str, float]:
    out = {}
    for v, name in zip(values, CURVE_FIELDS, strict=True):
        lo, hi = BOUNDS[name]
        out[name] = float(min(max(np.exp(v), lo), hi))
    return out


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


def soft_l1(x: np.ndarray) -> np.ndarray:
    """Robust loss ``2(sqrt(1 + x²) - 1)`` (quadratic near 0, linear in the tails: queueing outliers)."""
    return 2.0 * (np.sqrt(1.0 + x * x) - 1.0)


def nelder_mead(f: Any, x0: np.ndarray, step: float = 0.4, max_evals: int = MAX_EVALS) -> tuple[np.ndarray, float]:
    """Minimise ``f`` from ``x0`` (standard Nelder-Mead: reflection 1, expansion 2, contraction 0.5, shrink 0.5)."""
    n = x0.size
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < 1e-7:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        xr = centroid + (centroid - simplex[-1])
        fr = f(xr)
        evals += 1
        if fr < values[0]:
            xe = centroid + 2.0 * (centroid - simplex[-1])
            fe = f(xe)
            evals += 1
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(xc)
            evals += 1
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
                evals += n
    best = int(np.argmin(values))
    return simplex[best], float(values[best])


def fit_group(prep: Prepared, rows: Rows, sel: np.ndarray, ttft: np.ndarray, tpot: np.ndarray) -> EfficiencyCurves:
    """Curves minimising the robust log error on the selected rows (module docstring)."""
    sub = _sub(prep, sel)

    def loss(v: np.ndarray) -> float:
        r = _rows_with(rows, sel, _clip(v))
        e1, e2 = log_errors(sub, r, ttft[sel], tpot[sel])
        val = float(np.mean(soft_l1(e1)) + TPOT_WEIGHT * np.mean(soft_l1(e2)))
        return val if np.isfinite(val) else 1e9

    x0 = np.log(np.array([min(max(getattr(PRIOR, n), BOUNDS[n][0]), BOUNDS[n][1]) for n in CURVE_FIELDS]))
    best, _ = nelder_mead(loss, x0)
    best, _ = nelder_mead(loss, best, step=0.15, max_evals=MAX_EVALS // 2)  # restart: NM stalls in 10 dimensions
    return EfficiencyCurves(**_clip(best))


def summary(e: np.ndarray) -> dict[str, float]:
    """Median and p90 |relative error| and signed median, from log ratios."""
    rel = np.exp(e) - 1.0
    return {
        "median_abs": round(float(np.median(np.abs(rel))), 4),
        "p90_abs": round(float(np.percentile(np.abs(rel), 90)), 4),
        "median_signed": round(float(np.median(rel)), 4),
        "rows": int(e.size),
    }


def main(argv: list[str] | None = None) -> int:
    """Fit, print, and (unless ``--dry-run``) write ``catalogs/perf/<engine>.yaml``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print the fit, write nothing")
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
        f"{len(frame)} aggregated rows ({n_disagg} disaggregated rows left out), {refused} refused by hetplan's "
        f"layout checks, {len(ok)} used; validation models (never fitted): {held_out}"
    )
    for eng in ("vllm", "sglang", "trtllm"):
        curves: dict[str, dict[str, float]] = {}
        provenance: dict[str, Any] = {}
        for a in sorted({str(x) for x in arch[engine == eng]}):
            sel = (engine == eng) & (arch == a) & (split == "fit")
            if sel.sum() < 10:
                print(f"{eng:7s} {a:10s} only {int(sel.sum())} fit rows: not fitted")
                continue
            c = fit_group(prep, prep.rows, sel, ttft, tpot)
            curves[a] = {n: float(f"{getattr(c, n):.6g}") for n in CURVE_FIELDS}
            r = _rows_with(prep.rows, sel, {n: getattr(c, n) for n in CURVE_FIELDS})
            e1, e2 = log_errors(_sub(prep, sel), r, ttft[sel], tpot[sel])
            vals = sorted({str(v) for v in versions[sel]})
            provenance[a] = {
                "fit_rows": int(sel.sum()),
                "models": sorted({str(m) for m in models[sel]}),
                "gpus": sorted({p.gpu for p, s in zip(prep.points, sel, strict=True) if s}),
                "engine_versions": vals,
                "fit_residuals": {"ttft": summary(e1), "tpot": summary(e2)},
            }
            print(f"{eng:7s} {a:10s} {int(sel.sum()):4d} fit rows  TTFT median |err| "
                  f"{summary(e1)['median_abs']:.1%}  TPOT median |err| {summary(e2)['median_abs']:.1%}")  # fmt: skip
        doc = {
            "schema_version": CATALOG_VERSION,
            "kind": "perf",
            "engine": eng,
            "source": "fitted by benchmarks/calibrate_perf.py on measured serving data from NVIDIA AIConfigurator "
            "(Apache-2.0), aiconfigurator_core/systems/silicon_sample.csv, aggregated rows",
            "validation_models": list(silicon.VALIDATION_MODELS),
            "curves": curves,
            "provenance": provenance,
        }
        if not args.dry_run:
            args.out.mkdir(parents=True, exist_ok=True)
            text = yaml.safe_dump(doc, sort_keys=False, width=120)
            (args.out / f"{eng}.yaml").write_text(text)
    print(f"fit took {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
