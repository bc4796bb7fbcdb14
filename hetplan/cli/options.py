"""Options that more than one command takes, each declared once.

Two forms: an ``Annotated`` alias where every command spells the option the same way (``JsonFlag``,
``ForceFlag``, ``ModelOpt`` ...), and a ``*_option(help)`` factory where commands share the flag but word its help
for their own output (``--json`` prints "the plan", "the metrics", ...) or give it another type or default. Use a
factory as ``json_out: Annotated[bool, json_option("Print the plan as JSON on stdout.")] = False``; the default
always goes after ``=`` (typer's Annotated style).

Only typer and the standard library are imported: typer reads these while it builds the command line, before any
command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

# --- output: --json, --out, --force ------------------------------------------------------------------------------


def json_option(help: str = "Print JSON.") -> Any:
    """``--json``: print the command's document as JSON on stdout."""
    return typer.Option("--json", help=help)


def out_option(help: str) -> Any:
    """``--out`` / ``-o``: the file (or folder) a command writes."""
    return typer.Option("--out", "-o", help=help)


def force_option(help: str = "Overwrite --out if it exists.") -> Any:
    """``--force``: replace outputs that exist (hetplan never overwrites without it)."""
    return typer.Option("--force", help=help)


JsonFlag = Annotated[bool, json_option()]
ForceFlag = Annotated[bool, force_option()]

# --- scenario flags (plan, profile fit): each overrides one field of the scenario file ---------------------------

ScenarioFileArg = Annotated[
    Path | None, typer.Argument(help="Scenario YAML (flags override its fields).", show_default=False)
]


def model_option(help: str = "Catalog model name or config.json path.") -> Any:
    return typer.Option("--model", "-m", help=help)


ModelOpt = Annotated[str | None, model_option()]
WorkloadOpt = Annotated[
    Path | None, typer.Option("--workload", "-w", help="Trace: Azure CSV, Mooncake JSONL or length CSV.")
]
WorkloadFormatOpt = Annotated[str | None, typer.Option("--workload-format", help="auto, azure, mooncake or lengths.")]
PrefixCacheOpt = Annotated[
    str | None,
    typer.Option(
        "--prefix-cache", help="Prefix reuse in sizing: auto (on with hash_ids or workload.reuse), on or off."
    ),
]
SyntheticOpt = Annotated[
    str | None,
    typer.Option("--synthetic", help="Synthetic class: long-input-short-output, balanced, short-input-long-output."),
]


def rate_option(help: str) -> Any:
    return typer.Option("--rate", help=help)


GoodputOpt = Annotated[
    float | None, typer.Option("--goodput", help="Goodput target, req/s (default: the trace's rate).")
]


def ttft_option(help: str) -> Any:
    return typer.Option("--ttft", help=help)


def tpot_option(help: str) -> Any:
    return typer.Option("--tpot", help=help)


PercentileOpt = Annotated[
    str | None,
    typer.Option("--percentile", help="SLO percentile: p90, 90% or 0.9 (a bare number is a fraction; default p90)."),
]


def gpus_option(help: str) -> Any:
    return typer.Option("--gpus", help=help)


InventoryOpt = Annotated[str | None, typer.Option("--inventory", help="GPU counts available, e.g. H800=16,H20=32.")]


def cloud_option(help: str) -> Any:
    return typer.Option("--cloud", help=help)


def region_option(help: str) -> Any:
    return typer.Option("--region", help=help)


def prices_option(help: str) -> Any:
    return typer.Option("--prices", help=help)


SpotOpt = Annotated[bool | None, typer.Option("--spot/--on-demand", help="Use spot prices.")]
PricesOpt = Annotated[Path | None, typer.Option("--prices", help="Price file overriding catalog prices.")]
HeadroomOpt = Annotated[
    float | None, typer.Option("--headroom", help="Extra goodput to provision, fraction (default 0.1).")
]


def tp_option(help: str = "TP degrees to consider, e.g. 1,2,4,8.") -> Any:
    return typer.Option("--tp", help=help)


TpListOpt = Annotated[str | None, tp_option()]
MaxRatioOpt = Annotated[int | None, typer.Option("--max-ratio", help="Largest n and m in an n:m combo (default 8).")]


def engine_option(help: str = "Serving engine: vllm (default), sglang or trtllm (emit deploys each).") -> Any:
    return typer.Option("--engine", help=help)


PerfCalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        "--perf-calibration",
        help="Calibration file from 'hetplan calibrate-perf': your benchmarks' corrections of the shipped curves.",
    ),
]


def weight_dtype_option() -> Any:
    return typer.Option(
        "--weight-dtype",
        help="bf16, fp16, fp8, int8 or int4; auto: the model's own dtype; auto-quantized (hetplan plan): the "
        "model's dtype and fp8 on GPUs with fp8 tensor cores, the cheaper plan kept (labelled with its accuracy note).",
    )


def kv_dtype_option() -> Any:
    return typer.Option("--kv-dtype", help="bf16, fp16 or fp8 (vLLM keeps a 16-bit KV cache in the weight dtype).")


def profile_option(help: str) -> Any:
    """``--profile`` (repeatable): profile files from ``hetplan profile`` whose measured figures are used."""
    return typer.Option("--profile", help=help)


# --- emitting deployable files along with a plan or schedule (plan, autoscale; emit has its own spellings) -------


def emit_dir_option(help: str) -> Any:
    return typer.Option("--emit", help=help)


def validate_option(help: str = "With --emit: check the manifests offline first.") -> Any:
    return typer.Option("--validate", help=help)


def router_image_option(help: str = "With --emit: image with vllm-router (as 'hetplan emit --router-image').") -> Any:
    return typer.Option("--router-image", help=help)


ValidateEmitFlag = Annotated[bool, validate_option()]
RouterImageEmitOpt = Annotated[str | None, router_image_option()]

# --- the baseline gate (report --baseline, gate) -----------------------------------------------------------------


def baseline_option(help: str) -> Any:
    return typer.Option("--baseline", help=help)


def max_cost_increase_option(help: str) -> Any:
    return typer.Option("--max-cost-increase", help=help)


def max_cost_increase_usd_option(help: str) -> Any:
    return typer.Option("--max-cost-increase-usd-per-hour", help=help)


def min_ratio_option(help: str) -> Any:
    return typer.Option("--min-tokens-per-usd-ratio", help=help)


def github_option(help: str) -> Any:
    return typer.Option("--github", help=help)


def summary_option(help: str) -> Any:
    return typer.Option("--summary", help=help)


# --- replaying a trace through a plan (simulate, calibrate) ------------------------------------------------------

PlanFileArg = Annotated[Path, typer.Argument(help="Plan file written by 'hetplan plan --out'.", show_default=False)]
TraceOpt = Annotated[
    list[Path] | None,
    typer.Option("--trace", "-t", help="Trace (Azure CSV or Mooncake JSONL); repeat to mix."),
]
ClassColumnOpt = Annotated[str | None, typer.Option("--class-column", help="CSV column naming each request's class.")]
SloOpt = Annotated[list[str] | None, typer.Option("--slo", help="Per-class SLO, CLASS=TTFT[,TPOT], e.g. code=1s,50ms.")]


def rate_scale_option(help: str) -> Any:
    return typer.Option("--rate-scale", help=help)


# --- where independent tasks run (sweep, simulate --windows): hetplan/executors.py --------------------------------

ExecutorOpt = Annotated[
    str, typer.Option("--executor", help="local (a process pool on this machine) or ray (Ray tasks).")
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers", help="Processes of the local pool, or CPUs of a local Ray instance (default: the cores)."
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="With --executor ray: local (start a private instance on this machine, loopback only; default), auto "
        "(the running cluster) or a cluster address.",
    ),
]

# --- time limit of the long commands (plan, simulate, calibrate, autoscale, sweep): hetplan/cli/deadline.py ------

TimeoutOpt = Annotated[
    str | None,
    typer.Option(
        "--timeout",
        help="Stop after this many seconds (or 90s, 10m, 2h) with an Error and exit code 124; nothing "
        "half-written is left.",
        metavar="SECONDS",
        show_default=False,
    ),
]
