"""Fidelity of hetplan's calibrated performance model on data the fit never saw.

    python benchmarks/fidelity.py             # validation split, DGX-A100 latencies, published throughputs
    python benchmarks/fidelity.py --groups    # also every engine x GPU x model group
    python benchmarks/fidelity.py --levels    # also the error left when each group's level were right
    python benchmarks/fidelity.py --bins      # also the signed error binned by ISL, OSL and concurrency
    python benchmarks/fidelity.py --hold-out version  # refit without each engine version, error on it (minutes)
    python benchmarks/fidelity.py --hold-out system   # the same per engine x GPU
    python benchmarks/fidelity.py --fixture tests/fixtures/perf/silicon_validation_sample.csv  # the shipped subset
    python benchmarks/fidelity.py --refresh-fixture  # rewrite the shipped subset and its stored thresholds (on purpose)

1. The validation split of the measured serving points (``silicon.VALIDATION_MODELS``, whole models held out of
   ``benchmarks/calibrate_perf.py``): median and p90 |relative error| and the signed median of mean TTFT and TPOT,
   overall, per engine x GPU (the bias check: no group of 20 rows or more beyond +-10 %) and per engine x GPU x
   model, and the ranking agreement of option pairs (two GPUs, layouts, dtypes or engines at one model, ISL, OSL
   and concurrency whose measured times differ by more than 10 %: ordered right by the predictions?). The fit
   split is printed too (in-sample), and the rows labelled with layouts over several nodes
   (``silicon.MULTI_NODE_SPLIT``, in neither split: their labels do not hold up), with the share that repeat a
   single-node run. H100 against H200 option pairs are broken down by layout (EP / attention DP, MoE TP, dense).
   ``--hold-out``: whole measurement campaigns held out of a refit instead.
2. Measured DGX-A100 Llama-2-70B prefill and decode iteration times (Splitwise's data, MIT) with the vLLM rules
   (A100 has no fitted curves: the nearest architecture's stand in, as the model says).
3. Published throughputs (MLPerf v4.x Offline, TensorRT-LLM tables; ``published_perf.csv``) with the TensorRT-LLM
   rules, per GPU and dtype, signed.

Reads ``../shared/data`` (benchmarks may; the package never does). Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy  # noqa: E402
import silicon  # noqa: E402

from hetplan.perf.points import estimate_points  # noqa: E402
from hetplan.perf.settings import PerfSettings  # noqa: E402


def stats(rel: np.ndarray) -> str:
    """``median |e| / p90 |e| / signed median`` of relative errors, in percent."""
    if rel.size == 0:
        return "no rows"
    return (f"median |err| {np.median(np.abs(rel)) * 100:5.1f} %  p90 {np.percentile(np.abs(rel), 90) * 100:6.1f} %  "
            f"bias {np.median(rel) * 100:+6.1f} %")  # fmt: skip


def predict(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with predicted ``p_ttft_ms``/``p_tpot_ms`` (NaN and ``error`` for refused rows)."""
    res = estimate_points(silicon.as_point_rows(frame))
    out = frame.copy()
    out["p_ttft_ms"] = [r.get("ttft_s", np.nan) * 1e3 for r in res]
    out["p_tpot_ms"] = [r.get("tpot_s", np.nan) * 1e3 for r in res]
    out["error"] = [r.get("error", "") for r in res]
    out["e_ttft"] = out["p_ttft_ms"] / out["ttft_ms"] - 1.0
    out["e_tpot"] = out["p_tpot_ms"] / out["tpot_ms"] - 1.0
    return out


OPTION_KEY = ("model", "isl", "osl", "concurrency")
"""Pairs of options are rows with these equal: the same workload served by two GPUs, layouts, dtypes or engines."""
CONFIG_KEY = ("engine", "gpu", "tp", "pp", "ep", "dp_attention", "weight_dtype", "kv_dtype")
"""Rows that also agree on these are repeated runs of one option, not two options (left out of the pairs)."""
RANK_MIN_GAP = 0.10
BIAS_GROUP_MIN_ROWS = 20
BIAS_LIMIT = 0.10


def ranking(df: pd.DataFrame, metric: str, same_engine: bool = False) -> tuple[int, int]:
    """(pairs ordered right, pairs) of options (:data:`OPTION_KEY`, different :data:`CONFIG_KEY`; with
    ``same_engine`` only pairs on one engine) whose measured ``metric`` differs by more than :data:`RANK_MIN_GAP`;
    right when the predictions order the two the same way. ``metric``: ``ttft``, ``tpot`` or ``tput`` (output
    tokens per second per GPU, ``C x O / (TTFT + (O - 1) TPOT) / GPUs``: what the planner's cost ranking reads)."""
    right = total = 0
    keys = [*OPTION_KEY, "engine"] if same_engine else list(OPTION_KEY)
    for _, g in df.groupby(keys):
        if len(g) < 2:
            continue
        if metric == "tput":
            gpus = (g["tp"] * g["dp_attention"] * g["pp"]).to_numpy(dtype=float)
            work = (g["concurrency"] * g["osl"]).to_numpy(dtype=float)
            meas = work / (g["ttft_ms"] + (g["osl"] - 1) * g["tpot_ms"]).to_numpy() / gpus
            pred = work / (g["p_ttft_ms"] + (g["osl"] - 1) * g["p_tpot_ms"]).to_numpy() / gpus
        else:
            meas = g[f"{metric}_ms"].to_numpy()
            pred = g[f"p_{metric}_ms"].to_numpy()
        conf = [tuple(r) for r in g[list(CONFIG_KEY)].itertuples(index=False)]
        for i in range(len(g)):
            for j in range(i + 1, len(g)):
                if conf[i] == conf[j] or max(meas[i], meas[j]) <= (1 + RANK_MIN_GAP) * min(meas[i], meas[j]):
                    continue
                total += 1
                right += int((meas[i] < meas[j]) == (pred[i] < pred[j]))
    return right, total


def rank_text(df: pd.DataFrame, same_engine: bool = False) -> str:
    """``TTFT r/n (x %)  TPOT ...  tok/s/GPU ...`` (:func:`ranking`)."""
    parts = []
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("tput", "tok/s/GPU")):
        right, total = ranking(df, metric, same_engine)
        parts.append(f"{label} {right}/{total} ({right / total * 100:.1f} %)" if total else f"{label} -")
    return "  ".join(parts)


GPU_PAIR = ("H100-SXM", "H200-SXM")
"""The two GPUs whose options :func:`gpu_pair_ranking` compares (issue 30: MoE layouts with EP or attention DP
ranked H100 against H200 the wrong way round)."""


def layout_class(model: str, ep: int, dp: int) -> str:
    """``EP / attention DP`` (a mixture-of-experts layout with expert or attention-data parallelism), ``MoE TP``
    (a MoE model on TP alone) or ``dense``."""
    from hetplan.catalog import find_model

    if ep > 1 or dp > 1:
        return "EP / attention DP"
    return "MoE TP" if find_model(model).is_moe else "dense"


def gpu_pair_ranking(df: pd.DataFrame, metric: str, same_engine: bool = False) -> dict[str, tuple[int, int]]:
    """(pairs ordered right, pairs) per :func:`layout_class` of the option pairs (:data:`OPTION_KEY`) with one row
    on each GPU of :data:`GPU_PAIR` whose measured ``metric`` (``ttft`` or ``tpot``) differs by more than
    :data:`RANK_MIN_GAP`; a pair's class is ``EP / attention DP`` when either row has EP or attention DP.
    ``same_engine``: only pairs on one engine."""
    out: dict[str, list[int]] = {}
    keys = [*OPTION_KEY, "engine"] if same_engine else list(OPTION_KEY)
    for _, g in df[df["gpu"].isin(GPU_PAIR)].groupby(keys):
        first, second = g[g["gpu"] == GPU_PAIR[0]], g[g["gpu"] == GPU_PAIR[1]]
        for a in first.itertuples(index=False):
            for b in second.itertuples(index=False):
                ma, mb = getattr(a, f"{metric}_ms"), getattr(b, f"{metric}_ms")
                if max(ma, mb) <= (1 + RANK_MIN_GAP) * min(ma, mb):
                    continue
                ca, cb = layout_class(a.model, a.ep, a.dp_attention), layout_class(b.model, b.ep, b.dp_attention)
                cls = "EP / attention DP" if "EP / attention DP" in (ca, cb) else ca
                pa, pb = getattr(a, f"p_{metric}_ms"), getattr(b, f"p_{metric}_ms")
                tally = out.setdefault(cls, [0, 0])
                tally[0] += int((ma < mb) == (pa < pb))
                tally[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def gpu_pair_text(df: pd.DataFrame, same_engine: bool = False) -> list[str]:
    """One line per layout class: ``class: TTFT r/n (x %)  TPOT r/n (x %)`` (:func:`gpu_pair_ranking`)."""
    per = {m: gpu_pair_ranking(df, m, same_engine) for m in ("ttft", "tpot")}
    lines = []
    for cls in sorted(set(per["ttft"]) | set(per["tpot"])):
        parts = []
        for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT")):
            right, total = per[metric].get(cls, (0, 0))
            parts.append(f"{label} {right}/{total} ({right / total * 100:.1f} %)" if total else f"{label} -")
        lines.append(f"{cls:18s} {'  '.join(parts)}")
    return lines or ["no pairs"]


def report_split(df: pd.DataFrame, name: str, groups: bool) -> dict[str, float]:
    """Print the figures of one split; return its overall medians."""
    ok = df[df["error"] == ""]
    print(f"\n== {name}: {len(ok)} rows estimated, {len(df) - len(ok)} refused by the layout checks")
    print(f"  TTFT  {stats(ok['e_ttft'].to_numpy())}")
    print(f"  TPOT  {stats(ok['e_tpot'].to_numpy())}")
    print(f"  ranking of option pairs differing > 10 %: {rank_text(ok)}")
    print(f"    pairs on one engine (GPUs, layouts, dtypes): {rank_text(ok, same_engine=True)}")
    for same, what in ((False, "any engines"), (True, "one engine")):
        print(f"    {GPU_PAIR[0]} vs {GPU_PAIR[1]} option pairs ({what}) by layout:")
        for line in gpu_pair_text(ok, same):
            print(f"      {line}")
    biased = []
    print(f"  per engine x GPU (the check: no group of >= {BIAS_GROUP_MIN_ROWS} rows with |bias| > 10 %)")
    for (eng, gpu), g in ok.groupby(["engine", "gpu"]):
        print(f"    {eng:7s} {gpu:9s} {len(g):4d} rows  TTFT {stats(g['e_ttft'].to_numpy())}")
        print(f"    {'':7s} {'':9s} {'':4s}       TPOT {stats(g['e_tpot'].to_numpy())}")
        if len(g) >= BIAS_GROUP_MIN_ROWS:
            for col in ("ttft", "tpot"):
                bias = float(np.median(g[f"e_{col}"]))
                if abs(bias) > BIAS_LIMIT:
                    biased.append(f"{eng} {gpu} {col.upper()} {bias * 100:+.1f} %")
    print(f"  groups of >= {BIAS_GROUP_MIN_ROWS} rows biased beyond +-10 %: {', '.join(biased) or 'none'}")
    if "campaign" in ok.columns:
        print("  per measurement campaign (silicon_data_source)")
        for camp, g in ok.groupby("campaign"):
            print(f"    {camp:44s} {len(g):4d} rows  TTFT {stats(g['e_ttft'].to_numpy())}")
            print(f"    {'':44s} {'':4s}       TPOT {stats(g['e_tpot'].to_numpy())}")
    if groups:
        print("  per engine x GPU x model")
        for (eng, gpu, model), g in ok.groupby(["engine", "gpu", "model"]):
            print(f"    {eng:7s} {gpu:9s} {model:18s} {len(g):4d}  TTFT {stats(g['e_ttft'].to_numpy())}")
            print(f"    {'':7s} {'':9s} {'':18s} {'':4s}  TPOT {stats(g['e_tpot'].to_numpy())}")
    return {"ttft": float(np.median(np.abs(ok["e_ttft"]))), "tpot": float(np.median(np.abs(ok["e_tpot"])))}


LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("none", ()),
    ("engine x GPU", ("engine", "gpu")),
    ("campaign x engine x GPU x model", ("campaign", "engine", "gpu", "model")),
    ("... x layout x dtype (ISL, OSL, concurrency vary)", ("campaign", "engine", "gpu", "model", "tp",
                                                          "dp_attention", "ep", "weight_dtype")),
    ("... x ISL x OSL (layout, dtype, concurrency vary)", ("campaign", "engine", "gpu", "model", "isl", "osl")),
    ("... x layout x dtype x ISL x OSL (concurrency varies)", ("campaign", "engine", "gpu", "model", "tp",
                                                               "dp_attention", "ep", "weight_dtype", "isl", "osl")),
)  # fmt: skip
"""Groupings for :func:`report_levels`, coarse to fine."""


def report_levels(df: pd.DataFrame, name: str) -> None:
    """Print the median |error| left when every group of each grouping in :data:`LEVELS` had the right level: each
    prediction divided by its group's median ratio of predicted to measured. What is left is the error of the
    model's shape within the groups; the difference from "none" is what per-group levels (constants) could win at
    best, even fitted on these very rows."""
    ok = df[df["error"] == ""]
    print(f"\n== {name}: median |error| left with each group's level right (shape error within the groups)")
    for label, keys in LEVELS:
        out = []
        for col in ("e_ttft", "e_tpot"):
            log = np.log1p(ok[col])
            if keys:
                log = log - log.groupby([ok[k] for k in keys]).transform("median")
            out.append(float(np.median(np.abs(np.expm1(log)))) * 100)
        print(f"  {label:55s} TTFT {out[0]:5.1f} %  TPOT {out[1]:5.1f} %")


def report_bins(df: pd.DataFrame, name: str) -> None:
    """Print the signed median and median |error| of TTFT and TPOT binned by ISL, OSL and concurrency (each on its
    own; pooled and per engine; the bins of ``calibrate_perf.BINS``, as its leave-one-model-out printout): the shape
    an error follows."""
    from calibrate_perf import BINS

    ok = df[df["error"] == ""]
    print(f"\n== {name}: signed error binned by ISL, OSL and concurrency")
    for col, edges in BINS.items():
        for eng in ("all", "vllm", "sglang", "trtllm"):
            part = ok if eng == "all" else ok[ok["engine"] == eng]
            cells = []
            for lo, hi in zip(edges[:-1], edges[1:], strict=True):
                cell = part[(part[col] > lo) & (part[col] <= hi)]
                if cell.empty:
                    continue
                t, p = cell["e_ttft"].to_numpy(), cell["e_tpot"].to_numpy()
                top = f"{hi}" if hi < 1 << 30 else "inf"
                cells.append(f"({lo},{top}] {len(cell)}: TTFT {np.median(t):+.0%} |{np.median(np.abs(t)):.0%}| "
                             f"TPOT {np.median(p):+.0%}")  # fmt: skip
            if cells:
                print(f"  by {col:11s} {eng:6s} " + "; ".join(cells))


FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "perf"
FIXTURE_ROWS = 96
THRESHOLD_MARGIN = 0.02
"""Absolute slack over the measured median |error| stored as the gate (2 percentage points)."""


def refresh_fixture() -> int:
    """Write the shipped validation subset (every k-th estimable validation row, by id) and the thresholds that
    ``tests/unit/test_fidelity_gate.py`` enforces: the subset's median |error| now plus :data:`THRESHOLD_MARGIN`."""
    import json

    frame, _ = silicon.load()
    val = predict(frame[frame["split"] == "validation"])
    val = val[val["error"] == ""].sort_values("id")
    step = max(1, len(val) // FIXTURE_ROWS)
    sample = val.iloc[::step].head(FIXTURE_ROWS)
    FIXTURE.mkdir(parents=True, exist_ok=True)
    cols = [*silicon.POINT_COLUMNS, "ttft_ms", "tpot_ms", "id"]
    sample[cols].to_csv(FIXTURE / "silicon_validation_sample.csv", index=False, float_format="%.6g")
    doc = {
        "rows": len(sample),
        "ttft_median_abs_max": round(float(np.median(np.abs(sample["e_ttft"]))) + THRESHOLD_MARGIN, 4),
        "tpot_median_abs_max": round(float(np.median(np.abs(sample["e_tpot"]))) + THRESHOLD_MARGIN, 4),
        "refresh": "python benchmarks/fidelity.py --refresh-fixture (after benchmarks/calibrate_perf.py)",
    }
    (FIXTURE / "fidelity_threshold.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"wrote {len(sample)} rows and thresholds {doc}")
    return 0


ERROR_BANDS = Path(__file__).resolve().parents[1] / "catalogs" / "perf" / "error_bands.yaml"
BAND_QUANTILES = (50, 80, 90)
BAND_MIN_ROWS = 20
"""Fewest held-out rows for an engine x GPU group of its own; smaller groups fall back to the engine's figure."""


def write_error_bands() -> int:
    """Write ``catalogs/perf/error_bands.yaml``: quantiles of the *step slowdown* (measured / predicted - 1 of mean
    TTFT and of mean TPOT) on the validation split (whole models the fit never saw), per engine x GPU (groups of
    at least :data:`BAND_MIN_ROWS` rows), per engine and overall. Verification reads it
    (:mod:`hetplan.perf.error_bands`): the plan's margin against the model's own error."""
    import yaml

    frame, _ = silicon.load()
    val = predict(frame[frame["split"] == "validation"])
    val = val[val["error"] == ""].copy()
    val["s_ttft"] = val["ttft_ms"] / val["p_ttft_ms"] - 1.0
    val["s_tpot"] = val["tpot_ms"] / val["p_tpot_ms"] - 1.0

    def band(g: pd.DataFrame, engine: str | None, gpu: str | None) -> dict[str, object]:
        q = {col: {f"p{k}": round(float(np.percentile(g[f"s_{col}"], k)), 4) for k in BAND_QUANTILES}
             for col in ("ttft", "tpot")}  # fmt: skip
        return {"engine": engine, "gpu": gpu, "rows": len(g), "models": sorted(set(g["model"])), **q}

    groups = [band(val, None, None)]
    for eng, g in val.groupby("engine"):
        groups.append(band(g, str(eng), None))
        for gpu, h in g.groupby("gpu"):
            if len(h) >= BAND_MIN_ROWS:
                groups.append(band(h, str(eng), str(gpu)))
    doc = {
        "schema_version": 1,
        "kind": "perf-error-bands",
        "generated_by": "python benchmarks/fidelity.py --write-error-bands (after benchmarks/calibrate_perf.py)",
        "definition": "step slowdown = measured / predicted - 1 of mean TTFT and of mean TPOT, on serving points "
        "of whole models the fit never saw (the validation split of engine_silicon_calibration.csv); "
        "positive: the engine was slower than hetplan predicted",
        "source": "shared/data/measured/engine_silicon_calibration.csv (validation models: "
        + ", ".join(silicon.VALIDATION_MODELS)
        + ")",
        "min_rows_per_gpu": BAND_MIN_ROWS,
        "groups": groups,
    }
    text = "# generated: do not edit; " + doc["generated_by"] + "\n" + yaml.safe_dump(doc, sort_keys=False, width=110)
    ERROR_BANDS.write_text(text)
    print(f"wrote {ERROR_BANDS} ({len(groups)} groups over {len(val)} held-out rows)")
    for g in groups:
        print(f"  {g['engine'] or 'all':7s} {g['gpu'] or '-':9s} {g['rows']:4d} rows  step slowdown p80 "
              f"TTFT {g['ttft']['p80'] * 100:+6.1f} %  TPOT {g['tpot']['p80'] * 100:+6.1f} %")  # fmt: skip
    return 0


HOLD_OUT_MIN_ROWS = 20
"""Fewest fit rows a held-out engine version or system needs to be reported on its own."""


def hold_out(kind: str, groups: bool) -> int:
    """Refit (``benchmarks/calibrate_perf.py``'s :func:`fit_engine`) without each engine version (``version``) or
    each engine x GPU (``system``) in turn, predict that campaign's fit-split rows with the refit curves and print
    the pooled figures: the error on measurement campaigns the fit never saw (kernel tables stay in: they are not
    end-to-end points). Groups with fewer than :data:`HOLD_OUT_MIN_ROWS` fit rows are left out."""
    import calibrate_perf as cp

    from hetplan.catalog.context import Catalog
    from hetplan.perf.calibration import EfficiencyCurves, peak_16bit_tflops, sibling_gpu
    from hetplan.perf.points import prepare_points, steady_state

    frame, _ = silicon.load()
    prep = prepare_points(silicon.as_point_rows(frame))
    assert prep.rows is not None
    ok = np.array(prep.index)
    meas = frame.iloc[ok].reset_index(drop=True)
    ttft = meas["ttft_ms"].to_numpy() / 1e3
    tpot = meas["tpot_ms"].to_numpy() / 1e3
    engine = np.array([p.engine for p in prep.points])
    arch = np.array(prep.arch_names)
    gpus = cp.gpu_names_of(prep)
    versions = meas["backend_version"].to_numpy()
    models = meas["model"].to_numpy()
    fit = meas["split"].to_numpy() == "fit"
    key = versions if kind == "version" else gpus
    parts: dict[str, list[pd.DataFrame]] = {"gpu": [], "arch": [], "sibling": []}
    catalog = Catalog.shipped()
    # the other engines' fits, for the scale of borrowed overheads: a held-out campaign is one engine's rows only
    full = {eng: cp.fit_engine(prep, eng, engine, arch, gpus, fit, ttft, tpot, versions, models) for eng in cp.ENGINES}
    for eng in cp.ENGINES:
        for value in sorted({str(v) for v in key[(engine == eng) & fit]}):
            test = (engine == eng) & (key == value) & fit
            if test.sum() < HOLD_OUT_MIN_ROWS:
                continue
            res = cp.fit_engine(prep, eng, engine, arch, gpus, fit & ~test, ttft, tpot, versions, models,
                                peers=cp.peer_overheads(full, eng))  # fmt: skip
            idx = np.nonzero(test)[0]
            for variant in ("gpu", "arch", "sibling"):
                if variant == "sibling" and kind != "system":
                    continue
                curves = []
                for i in idx:
                    table = res["gpu_curves"].get(str(gpus[i])) if variant == "gpu" else None
                    if variant == "sibling":  # as a GPU without kernel tables whose architecture has no curves
                        others = {g: c for g, c in res["gpu_curves"].items() if g != str(gpus[i])}
                        spec = catalog.find_gpu(str(gpus[i]))
                        sib = sibling_gpu(spec.arch, others, peak_16bit_tflops(spec), catalog=catalog)
                        table = others[sib] if sib else None
                    if table is None:
                        nearest = cp._nearest_fitted(str(arch[i]), res["curves"])
                        table = cp._arch_params(res["curves"][nearest]) if nearest else None
                    curves.append(EfficiencyCurves(**table) if table else EfficiencyCurves())
                rows = cp._rows_with(prep.rows, test, {}).with_curves(curves)
                ss = steady_state(cp._sub(prep, test), rows)
                part = meas.iloc[idx].copy()
                part["p_ttft_ms"] = ss.ttft_s * 1e3
                part["p_tpot_ms"] = ss.tpot_s * 1e3
                part["error"] = ""
                parts[variant].append(part)
                if variant == "gpu":
                    e1 = (part["p_ttft_ms"] / part["ttft_ms"] - 1).to_numpy()
                    e2 = (part["p_tpot_ms"] / part["tpot_ms"] - 1).to_numpy()
                    print(f"  without {eng:7s} {value:30s} {len(part):4d} rows  TTFT {stats(e1)}")
                    print(f"  {'':8s} {'':7s} {'':30s} {'':4s}       TPOT {stats(e2)}")
    label = "engine version" if kind == "version" else "engine x GPU (system)"
    for variant, what in (("arch", "architecture curves only, every field end to end (the fit before kernel tables)"),
                          ("sibling", "another GPU of the architecture's per-GPU curves (as a GPU without kernel "
                           "tables on an architecture without curves takes)"),
                          ("gpu", "per-GPU curves: kernel tables + overheads end to end")):  # fmt: skip
        if not parts[variant]:
            continue
        df = pd.concat(parts[variant], ignore_index=True)
        df["e_ttft"] = df["p_ttft_ms"] / df["ttft_ms"] - 1.0
        df["e_tpot"] = df["p_tpot_ms"] / df["tpot_ms"] - 1.0
        report_split(df, f"held-out campaigns, each {label} predicted by a fit without it; {what}", groups)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print every figure; exit 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", action="store_true", help="print every engine x GPU x model group")
    ap.add_argument("--levels", action="store_true", help="print the error left with each group's level right")
    ap.add_argument("--bins", action="store_true", help="print the signed error binned by ISL, OSL and concurrency")
    ap.add_argument("--fixture", type=Path, help="a points CSV with measured ttft_ms/tpot_ms columns instead")
    ap.add_argument("--refresh-fixture", action="store_true", help="rewrite tests/fixtures/perf (on purpose)")
    ap.add_argument("--write-error-bands", action="store_true", help="rewrite catalogs/perf/error_bands.yaml")
    ap.add_argument(
        "--hold-out",
        choices=("version", "system"),
        help="refit without each engine version (or engine x GPU) in turn and print the error on it (minutes)",
    )
    args = ap.parse_args(argv)
    if args.hold_out:
        return hold_out(args.hold_out, args.groups)
    if args.refresh_fixture:
        return refresh_fixture()
    if args.write_error_bands:
        return write_error_bands()
    if args.fixture:
        frame = pd.read_csv(args.fixture, keep_default_na=False)
        report_split(predict(frame), f"fixture {args.fixture}", args.groups)
        return 0
    frame, n_disagg = silicon.load()
    print(f"measured serving points: {len(frame)} aggregated rows; {n_disagg} disaggregated rows left out, "
          f"{silicon.DISAGG_REASON}")  # fmt: skip
    print(f"validation models (whole models never seen by the fit): {', '.join(silicon.VALIDATION_MODELS)}")
    pred = predict(frame)
    report_split(pred[pred["split"] == "validation"], "validation split (models the fit never saw)", args.groups)
    report_split(pred[pred["split"] == "fit"], "fit split (in-sample)", False)
    multi = pred[pred["split"] == silicon.MULTI_NODE_SPLIT]
    report_split(multi, "layouts labelled over more than one node (silicon.MULTI_NODE_SPLIT: in no fit or validation)",
                 False)  # fmt: skip
    ok = multi[multi["error"] == ""]
    read = predict(silicon.single_node_reading(pred))
    read = read[read["error"] == ""]
    print("  as labelled (over nodes) against read as the single-node runs (silicon.single_node_reading):")
    for twin, what in ((True, "repeating a single-node run to 0.2 %"), (False, "without such a twin")):
        for label, part in (("labelled", ok), ("single-node", read)):
            rows = part[part["single_node_twin"] == twin]
            print(f"    {len(rows):4d} rows {what:37s} {label:11s} TTFT {stats(rows['e_ttft'].to_numpy())}")
            print(f"    {'':4s} {'':42s} {'':11s} TPOT {stats(rows['e_tpot'].to_numpy())}")
    if args.levels:
        report_levels(pred[pred["split"] == "validation"], "validation split")
        report_levels(pred[pred["split"] == "fit"], "fit split")
    if args.bins:
        report_bins(pred[pred["split"] == "validation"], "validation split")
        report_bins(pred[pred["split"] == "fit"], "fit split (in-sample)")

    data = silicon.SHARED
    rows = accuracy.load_measured(data)
    pre, dec = accuracy.measured_errors(rows, PerfSettings.for_engine("vllm"))
    print(f"\n== DGX-A100 Llama-2-70B iteration times ({len(rows)} configurations), vLLM rules")
    print(f"  prefill {stats(pre)}")
    print(f"  decode  {stats(dec)}")
    by_tp: dict[int, list[float]] = defaultdict(list)
    for r, d in zip(rows, dec, strict=True):
        by_tp[r["tp"]].append(d)
    for tp, errs in sorted(by_tp.items()):
        print(f"  decode TP{tp}: {stats(np.array(errs))}")
    pub = accuracy.published_errors(data, PerfSettings.for_engine("trtllm"))
    print(f"\n== published throughputs ({len(pub)} rows: MLPerf Offline, TensorRT-LLM tables), TensorRT-LLM rules")
    print(f"  all    {stats(np.array([e for *_, e in pub]))}")
    groups: dict[str, list[float]] = defaultdict(list)
    for label, _pred, _pub, e in pub:
        parts = label.split()
        groups[f"{parts[1].split('x', 1)[1]} {parts[2]}"].append(e)
    for key, errs in sorted(groups.items()):
        print(f"  {key:22s} {len(errs):3d} rows  {stats(np.array(errs))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
