"""The measured serving points of ``../shared/data/measured/engine_silicon_calibration.csv`` as hetplan points.

Measured serving data from NVIDIA AIConfigurator (Apache-2.0), ``aiconfigurator_core/systems/silicon_sample.csv``;
engine version and container per row in ``silicon_data_source``. Only aggregated (``agg``) rows become points;
disaggregated rows are counted and left out (hetplan's closed-loop estimate models one aggregated instance).

Used by ``benchmarks/calibrate_perf.py`` (the fit), ``benchmarks/fidelity.py`` (the validation) and
``benchmarks/points_speed.py``; the project itself never reads ``../shared``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CSV = SHARED / "measured" / "engine_silicon_calibration.csv"

MODEL = {
    "meta-llama/Llama-3.1-8B-Instruct": "Llama-3.1-8B",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B": "Llama-3.1-70B",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen3-235B-A22B",
    "Qwen/Qwen3.5-397B-A17B": "Qwen3.5-397B-A17B",
    "deepseek-ai/DeepSeek-R1": "DeepSeek-R1",
    "nvidia/DeepSeek-R1-NVFP4": "DeepSeek-R1",
    "deepseek-ai/DeepSeek-V3": "DeepSeek-V3",
    "nvidia/DeepSeek-V3.1-NVFP4": "DeepSeek-V3",
    "moonshotai/Kimi-K2.5": "Kimi-K2.5",
    "zhipuai/GLM-5": "GLM-5",
}
GPU = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM", "b200_sxm": "B200", "b300_sxm": "B300", "gb200": "GB200",
       "gb300": "GB300"}  # fmt: skip
DTYPE = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "int4_wo": "int4"}

VALIDATION_MODELS = ("Llama-3.1-8B", "Qwen3-235B-A22B", "GLM-5")
"""Models the fit never sees: one dense (Llama-3.1-8B), two MoE (Qwen3-235B-A22B GQA, GLM-5 MLA)."""


def weight_dtype(row: Any) -> str:
    """hetplan weight dtype of a row: the expert dtype for MoE checkpoints (most bytes), else the GEMM dtype."""
    mode = row["moe_quant_mode"] if isinstance(row["moe_quant_mode"], str) else row["gemm_quant_mode"]
    return DTYPE.get(mode, "bf16") if isinstance(mode, str) else "bf16"


def campaign(source: str) -> str:
    """The measurement campaign of a row, from ``silicon_data_source``: its dump or file name, with the folder of
    the per-engine gap-analysis files cut to ``gap-analysis/<gpu>/<engine>/<version>``."""
    first = str(source).split(";")[0].removeprefix("source_file=")
    if "aic-auto-gap-analysis/data/" in first:
        return "gap-analysis/" + "/".join(first.split("aic-auto-gap-analysis/data/")[1].split("/")[:3])
    return first


def concurrency_and_layout(agg: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(concurrency, tp, attention DP) of aggregated rows.

    The benchmark's client concurrency is ``silicon_concurrency=N`` in ``silicon_data_source``; ``batch_size`` is the
    engine's batch *per attention-DP rank* (AIConfigurator's convention), so with attention DP the two differ by the
    DP size (101 of the 102 rows with ``attention_dp_size`` > 1). Rows whose concurrency is ``tp_size`` x
    ``batch_size`` with no ``attention_dp_size`` (TensorRT-LLM DeepSeek-R1/V3.1 NVFP4 and gpt-oss-120b runs) are read
    as TensorRT-LLM's attention-DP layout (``enable_attention_dp``: ``tp_size`` GPUs, one DP rank each), i.e. TP 1 x
    DP ``tp_size``. Rows without the field keep ``batch_size`` x DP (hetplan's reading of the data)."""
    measured = agg["silicon_data_source"].str.extract(r"silicon_concurrency=(\d+)")[0].astype(float)
    dp = agg["attention_dp_size"].fillna(1).astype(int)
    tp = agg["tp_size"].astype(int)
    batch = agg["batch_size"].astype(int)
    conc = measured.fillna(batch * dp).astype(int)
    trt_adp = agg["attention_dp_size"].isna() & (tp > 1) & (conc == batch * tp)
    dp = dp.where(~trt_adp, tp)
    tp = tp.where(~trt_adp, 1)
    return conc, tp, dp


def load(csv: Path = CSV) -> tuple[pd.DataFrame, int]:
    """(aggregated rows as points with measured ``ttft_ms``/``tpot_ms``, ``split``, ``backend_version``; the number
    of disaggregated rows left out). Concurrency and layout: :func:`concurrency_and_layout`; exact duplicate
    measurements are kept once, also when two names of one architecture label them (:func:`_architecture`)."""
    df = pd.read_csv(csv)
    agg = df[df["mode"] == "agg"].copy()
    conc, tp, dp = concurrency_and_layout(agg)
    out = pd.DataFrame(
        {
            "engine": agg["backend"],
            "model": agg["model_path"].map(MODEL),
            "gpu": agg["system"].map(GPU),
            "tp": tp,
            "pp": agg["pp_size"].astype(int),
            "ep": agg["moe_ep_size"].astype(int),
            "dp_attention": dp,
            "weight_dtype": [weight_dtype(r) for _, r in agg.iterrows()],
            # an fp8 KV cache for fp8/fp4 checkpoints: with a 16-bit cache the vLLM Llama-3.1-70B rows would queue
            # for KV at concurrencies where the measured TTFT shows no queueing (hetplan's reading of the data)
            "kv_dtype": [
                "fp8" if w in ("fp8", "fp4") else "bf16" for w in (weight_dtype(r) for _, r in agg.iterrows())
            ],
            "concurrency": conc,
            "isl": agg["isl"].astype(int),
            "osl": agg["osl"].astype(int),
            # the measured configurations admit every client (max batch >= concurrency)
            "max_num_seqs": conc,
            "max_num_batched_tokens": "",
            "ttft_ms": agg["silicon_ttft_ms"],
            "tpot_ms": agg["silicon_tpot_ms"],
            "backend_version": agg["backend_version"].fillna("unknown").astype(str),
            "campaign": agg["silicon_data_source"].map(campaign),
            "id": agg["id"],
        }
    ).reset_index(drop=True)
    out["split"] = ["validation" if m in VALIDATION_MODELS else "fit" for m in out["model"]]
    # the same run listed twice under two ids or files (same configuration, same TTFT and TPOT): kept once so that
    # no measurement counts double in the fit or the validation. The files print one run's means to different
    # precision (2026-04-06.csv repeats 2026-03-25.csv rows in the last bits of the float; the per-model
    # gap-analysis files round to 2 decimals), so the times match within SAME_RUN_REL_TOL (_repeated_runs)
    same = [c for c in out.columns if c not in ("id", "backend_version", "campaign")]
    out = out[~_repeated_runs(out, same, out.index)].reset_index(drop=True)
    # the same run under two names of one architecture: 173 db-dump rows labelled DeepSeek-V3 repeat, to every
    # digit, rows of the dated files labelled DeepSeek-R1 (one config.json apart from the name); kept once, from
    # the campaign that sorts first, so that a leave-one-model-out fit without R1 does not train on R1's runs
    out["architecture"] = out["model"].map(_architecture)
    same_arch = [c for c in same if c != "model"] + ["architecture"]
    order = out.sort_values("campaign", kind="stable").index
    keep = ~_repeated_runs(out, same_arch, order)
    out = out.loc[order[keep.loc[order].to_numpy()]].sort_index().drop(columns="architecture").reset_index(drop=True)
    # layouts labelled larger than one node: a split of their own, out of the fit and the validation (MULTI_NODE)
    node = out["gpu"].map(_node_gpus)
    multi = out["tp"] * out["dp_attention"] * out["pp"] > node
    out.loc[multi, "split"] = MULTI_NODE_SPLIT
    out["single_node_twin"] = _single_node_twins(out, multi)
    return out, int((df["mode"] != "agg").sum())


MULTI_NODE_SPLIT = "multi-node"
"""The split of the rows whose labelled layout (``tp_size`` x attention DP x PP) is larger than the GPU's NVLink
domain (``scale_up_gpus``): 248 rows, every one in the fit models (sglang/TensorRT-LLM DeepSeek-R1/V3, gpt-oss-120b,
Qwen3.5-397B-A17B on B200/B300/H200, vLLM Kimi-K2.5 on B200). Kept out of the fit and of the validation because
the labels do not hold up: 104 of them (``single_node_twin``) repeat, to :data:`SAME_RUN_REL_TOL` in both mean TTFT
and mean TPOT, a run of the same engine, GPU, model, dtype, ISL, OSL and concurrency labelled with a 4- or 8-GPU
layout with the labelled GPUs divided by ``moe_ep_size`` (sglang "TP 16, EP 4" is "TP 4, EP 4" to every digit;
TensorRT-LLM "DP 64, EP 8" is "DP 8, EP 8"), or by the DP size (vLLM Kimi-K2.5 "TP 4 x DP 4, EP 16" is "TP 4,
EP 4"), and 15
label sglang Qwen3.5-397B-A17B "TP 64", which its 32 attention heads do not allow. The rest come from the same
configurations (config ids, files) as the twins. ``benchmarks/fidelity.py`` reports the split apart (hetplan's
reading of the data)."""


def single_node_reading(frame: pd.DataFrame) -> pd.DataFrame:
    """The :data:`MULTI_NODE_SPLIT` rows of ``frame`` read as the single-node runs their twins show: the labelled
    GPUs divided by ``ep`` (attention DP when the row has it, else TP), and vLLM's TP 4 x DP 4, EP 16 as TP 4, EP 4.
    What ``benchmarks/fidelity.py`` compares the labelled layouts with (hetplan's reading, not a fact of the
    file: rows without a twin follow the rule by analogy)."""
    out = frame[frame["split"] == MULTI_NODE_SPLIT].copy()
    vllm = out["engine"] == "vllm"
    dp = out["dp_attention"] > 1
    out.loc[dp & ~vllm, "dp_attention"] = out["dp_attention"] // out["ep"]
    out.loc[~dp & ~vllm, "tp"] = out["tp"] // out["ep"]
    out.loc[vllm, "ep"] = out["ep"] // out["dp_attention"]
    out.loc[vllm, "dp_attention"] = 1
    return out


def _node_gpus(gpu: str) -> int:
    """GPUs in one NVLink domain of catalog GPU ``gpu`` (``scale_up_gpus``)."""
    from hetplan.catalog import find_gpu

    return int(find_gpu(gpu).scale_up_gpus)


def _single_node_twins(frame: pd.DataFrame, multi: pd.Series) -> pd.Series:
    """Rows of ``multi`` whose mean TTFT and TPOT repeat, within :data:`SAME_RUN_REL_TOL`, a row that is not
    ``multi`` with the same engine, GPU, model, dtypes, ISL, OSL and concurrency (the same run under a second,
    larger layout label)."""
    key = ["engine", "gpu", "model", "weight_dtype", "kv_dtype", "isl", "osl", "concurrency"]
    small = frame[~multi].groupby(key)
    out = pd.Series(False, index=frame.index)
    for idx in frame.index[multi]:
        row = frame.loc[idx]
        try:
            g = small.get_group(tuple(row[k] for k in key))
        except KeyError:
            continue
        same = ((g["ttft_ms"] / row["ttft_ms"] - 1.0).abs() < SAME_RUN_REL_TOL) & (
            (g["tpot_ms"] / row["tpot_ms"] - 1.0).abs() < SAME_RUN_REL_TOL
        )
        out.at[idx] = bool(same.any())
    return out


SAME_RUN_REL_TOL = 2e-3
"""Relative tolerance within which two rows' mean TTFT and mean TPOT are one run printed twice. Among the rows of
one configuration, the pairs' larger relative difference of the two means is below 1e-3 for 168 pairs (the same
run at another precision) and above 6e-3 for every other pair (distinct runs, 94 pairs): the
tolerance sits in that gap."""

TIMES = ("ttft_ms", "tpot_ms")


def _repeated_runs(frame: pd.DataFrame, key: list[str], order: pd.Index) -> pd.Series:
    """Rows (boolean Series on ``frame``'s index) that repeat a row earlier in ``order`` with equal ``key`` columns
    other than the times and both times within :data:`SAME_RUN_REL_TOL`."""
    cols = [c for c in key if c not in TIMES]
    dup = pd.Series(False, index=frame.index)
    rank = pd.Series(range(len(order)), index=order)
    for _, group in frame.groupby(cols, sort=False, dropna=False):
        if len(group) < 2:
            continue
        kept: list[tuple[float, float]] = []
        for idx in sorted(group.index, key=rank.__getitem__):
            t, p = float(frame.at[idx, "ttft_ms"]), float(frame.at[idx, "tpot_ms"])
            if any(abs(t / kt - 1.0) < SAME_RUN_REL_TOL and abs(p / kp - 1.0) < SAME_RUN_REL_TOL for kt, kp in kept):
                dup.at[idx] = True
            else:
                kept.append((t, p))
    return dup


def _architecture(model: str) -> str:
    """A key equal for catalog models with the same architecture (every spec field but names and sources)."""
    from hetplan.catalog import find_model

    spec = find_model(model).model_dump(exclude={"name", "hf_repo", "notes", "source"})
    return repr(sorted(spec.items()))


DISAGG_REASON = (
    "not modelled: each row is a prefill pool and a decode pool (prefill_num_workers x prefill TP, "
    "decode_num_workers x decode TP) joined by a KV transfer; hetplan's closed loop (hetplan/perf/closed_loop.py) "
    "models one aggregated instance, and a TTFT that includes the KV transfer and the prefill pool's queue has no "
    "model to compare against yet"
)
"""Why the disaggregated rows are left out of the fit and the validation (printed by the benchmarks)."""

POINT_COLUMNS = ("engine", "model", "gpu", "tp", "pp", "ep", "dp_attention", "weight_dtype", "kv_dtype",
                 "concurrency", "isl", "osl", "max_num_seqs", "max_num_batched_tokens")  # fmt: skip


def as_point_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's point columns as the string dicts :func:`hetplan.perf.points.estimate_points` reads."""
    return [{c: ("" if pd.isna(v) else str(v)) for c, v in zip(POINT_COLUMNS, row, strict=True)}
            for row in frame[list(POINT_COLUMNS)].itertuples(index=False)]  # fmt: skip
