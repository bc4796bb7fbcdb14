"""Acceptance of ``hetplan calibrate-perf``: the error left on a user's own points with one benchmark point per group.

    python benchmarks/user_calibration.py            # the figures
    python benchmarks/user_calibration.py --spread   # also the shrinkage constants' measurement (tau, sigma)

The aggregated rows of ``../shared/data/measured/engine_silicon_calibration.csv`` (``silicon.load``, both splits;
not ``silicon.MULTI_NODE_SPLIT``) stand in for user benchmark points. For every group (engine x GPU x model, and the
same with the engine version, as one user's runs share it; and engine x GPU over its models) and every point j of
it, the correction fitted on j alone (:func:`hetplan.perf.user_calibration.shrunk_factor`, as calibrate-perf fits
it) predicts every other point of the group: "one user benchmark point per group, the rest held out". The median
|error| over all such pairs, before (shipped curves) and after, is printed, and the leave-one-out error with every
other point of the group (what calibrate-perf prints). Acceptance (issue 30): TTFT <= 8 %, TPOT <= 5 % with one
point per engine x GPU.

``--spread``: tau (spread of the groups' median ln(measured/predicted)) and sigma (median absolute deviation of
the points from their group's median, x 1.4826) per metric, the figures behind ``SHRINKAGE``.

Reads ``../shared`` (benchmarks may; the package never does). Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import silicon  # noqa: E402

from hetplan.perf.points import estimate_points  # noqa: E402
from hetplan.perf.user_calibration import shrunk_factor  # noqa: E402

GROUPINGS = (
    (
        "engine x GPU x model x engine version x layout x dtype x ISL x OSL (C varies)",
        ("engine", "gpu", "model", "backend_version", "tp", "dp_attention", "ep", "weight_dtype", "isl", "osl"),
    ),
    (
        "engine x GPU x model x engine version x TP/DP/EP x dtype",
        ("engine", "gpu", "model", "backend_version", "tp", "dp_attention", "ep", "weight_dtype"),
    ),
    ("engine x GPU x model x TP x dtype (calibrate-perf's key)", ("engine", "gpu", "model", "tp", "weight_dtype")),
    ("engine x GPU x model x engine version", ("engine", "gpu", "model", "backend_version")),
    ("engine x GPU x model", ("engine", "gpu", "model")),
    ("engine x GPU (over its models)", ("engine", "gpu")),
)


def predicted() -> pd.DataFrame:
    """The silicon rows the shipped model can estimate, with ``r_ttft``/``r_tpot`` = ln(measured / predicted)."""
    df, _ = silicon.load()
    # the rows labelled over several nodes stand in for no user's points: their labels do not hold up (silicon.py)
    df = df[df["split"] != silicon.MULTI_NODE_SPLIT].reset_index(drop=True)
    res = estimate_points(silicon.as_point_rows(df))
    df["p_ttft_ms"] = [r.get("ttft_s", np.nan) * 1e3 for r in res]
    df["p_tpot_ms"] = [r.get("tpot_s", np.nan) * 1e3 for r in res]
    ok = df[np.isfinite(df["p_ttft_ms"]) & np.isfinite(df["p_tpot_ms"])].copy()
    ok["r_ttft"] = np.log(ok["ttft_ms"] / ok["p_ttft_ms"])
    ok["r_tpot"] = np.log(ok["tpot_ms"] / ok["p_tpot_ms"])
    return ok.reset_index(drop=True)


def one_point(df: pd.DataFrame, keys: tuple[str, ...], as_applied: bool = False) -> dict[str, np.ndarray]:
    """Relative errors (predicted / measured - 1) of every (calibration point j, held-out point i) pair of a group,
    before and after j's correction. ``as_applied``: as hetplan applies a file with j alone
    (:func:`hetplan.perf.settings.find_correction`): both factors where i has j's TP and weight dtype, else the
    TPOT factor only."""
    out: dict[str, list[float]] = {"before_ttft": [], "before_tpot": [], "after_ttft": [], "after_tpot": []}
    for _, g in df.groupby(list(keys)):
        if len(g) < 2:
            continue
        layout = (g["tp"].astype(str) + "/" + g["weight_dtype"]).to_numpy()
        for m in ("ttft", "tpot"):
            r = g[f"r_{m}"].to_numpy()
            factors = np.array([shrunk_factor(r[j : j + 1], m) for j in range(r.size)])
            for j in range(r.size):
                rest = np.arange(r.size) != j
                f = np.full(r.size, factors[j])
                if as_applied and m == "ttft":
                    f = np.where(layout == layout[j], factors[j], 1.0)
                out[f"before_{m}"] += list(np.exp(-r[rest]) - 1.0)
                out[f"after_{m}"] += list(np.exp(-r[rest]) * f[rest] - 1.0)
    return {k: np.array(v) for k, v in out.items()}


def leave_one_out(df: pd.DataFrame, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Relative error of each point with the correction fitted on the other points of its group."""
    out: dict[str, list[float]] = {"ttft": [], "tpot": []}
    for _, g in df.groupby(list(keys)):
        for m in ("ttft", "tpot"):
            r = g[f"r_{m}"].to_numpy()
            for j in range(r.size):
                out[m].append(float(np.exp(-r[j]) * shrunk_factor(r[np.arange(r.size) != j], m) - 1.0))
    return {k: np.array(v) for k, v in out.items()}


def pct(x: np.ndarray) -> str:
    """``median |x| / p90 |x| / signed median`` in percent."""
    return (f"median |err| {np.median(np.abs(x)) * 100:5.1f} %  p90 {np.quantile(np.abs(x), 0.9) * 100:6.1f} %  "
            f"bias {np.median(x) * 100:+6.1f} %")  # fmt: skip


def spread(df: pd.DataFrame) -> None:
    """Print tau and sigma per metric and grouping (see module docstring)."""
    print("\n== shrinkage constants: tau (spread of group levels), sigma (spread of points around their level)")
    for label, keys in GROUPINGS[-2:]:
        for m in ("ttft", "tpot"):
            med = df.groupby(list(keys))[f"r_{m}"].transform("median")
            levels = df.groupby(list(keys))[f"r_{m}"].median()
            tau = float(np.sqrt(np.mean(levels**2)))
            sigma = float(np.median(np.abs(df[f"r_{m}"] - med)) * 1.4826)
            print(f"  {label:32s} {m.upper()}  tau {tau:.3f}  sigma {sigma:.3f}  ({len(levels)} groups)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spread", action="store_true", help="also print the shrinkage constants' measurement")
    args = ap.parse_args(argv)
    df = predicted()
    print(f"{len(df)} measured serving points (engine_silicon_calibration.csv, aggregated, estimable)")
    for label, keys in GROUPINGS:
        one = one_point(df, keys)
        loo = leave_one_out(df, keys)
        groups = df.groupby(list(keys)).ngroups
        print(f"\n== one user point per {label} ({groups} groups, {one['after_ttft'].size} held-out pairs)")
        print(f"  TTFT before  {pct(one['before_ttft'])}")
        print(f"  TTFT after   {pct(one['after_ttft'])}")
        print(f"  TPOT before  {pct(one['before_tpot'])}")
        print(f"  TPOT after   {pct(one['after_tpot'])}")
        print(f"  leave-one-out with every other point of the group: TTFT {pct(loo['ttft'])}")
        print(f"  {'':51s}TPOT {pct(loo['tpot'])}")
    for label, keys in (
        ("engine x GPU x model", ("engine", "gpu", "model")),
        ("engine x GPU x model x engine version", ("engine", "gpu", "model", "backend_version")),
    ):
        one = one_point(df, keys, as_applied=True)
        print(f"\n== one user point per {label}, applied as hetplan applies the file (TTFT only at its layout)")
        print(f"  TTFT before  {pct(one['before_ttft'])}")
        print(f"  TTFT after   {pct(one['after_ttft'])}")
        print(f"  TPOT before  {pct(one['before_tpot'])}")
        print(f"  TPOT after   {pct(one['after_tpot'])}")
    if args.spread:
        spread(df)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
