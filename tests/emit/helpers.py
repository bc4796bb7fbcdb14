"""Plan documents for emitter tests: real plans of the shipped examples (solved once per process) and small
synthetic ones built by hand (no solver), plus helpers to read emitted files."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import yaml

from hetplan import api
from hetplan.emit import build_ir, render
from hetplan.emit.ir import DeploymentIR
from hetplan.emit.settings import EmitSettings
from hetplan.plan.doc import from_doc
from hetplan.scenario import load_scenario
from tests.conftest import EXAMPLES, ROOT

PERF = {
    "gpu_memory_utilization": 0.9,
    "activation_reserve_gib": 1.25,
    "block_size_tokens": 16,
    "max_num_seqs": 256,
    "max_num_batched_tokens": 8192,
}


@cache
def _solved(example: str, strategy: str) -> dict[str, Any]:
    return api.to_doc(api.plan(load_scenario(EXAMPLES / f"{example}.yaml"), strategy=strategy, analysis=False))


def ir_of(doc: dict[str, Any], settings: EmitSettings | None = None) -> DeploymentIR:
    """The deployment IR of a plan document (read as a plan file is: checked, then typed)."""
    return build_ir(from_doc(doc), settings)


def two_combo_plan() -> dict[str, Any]:
    """Example (a)'s plan as hetplan made it before burst-aware sizing: two mixed combos (A100 TP2 -> A10G TP8,
    H100 TP2 -> A100 TP4), frozen in tests/fixtures/plan_two_combos.json so emitter tests keep a mixed plan."""
    return copy.deepcopy(json.loads((ROOT / "tests" / "fixtures" / "plan_two_combos.json").read_text()))


def example_plan(example: str, strategy: str = "cauchy") -> dict[str, Any]:
    """A plan of a shipped example (solved once per test process; a fresh copy each call)."""
    return copy.deepcopy(_solved(example, strategy))


def combo(
    prefill_gpu: str,
    prefill_tp: int,
    n_prefill: int,
    decode_gpu: str,
    decode_tp: int,
    n_decode: int,
    count: int = 1,
    goodput: float = 2.0,
    **extra: Any,
) -> dict[str, Any]:
    doc = {
        "prefill_gpu": prefill_gpu,
        "prefill_tp": prefill_tp,
        "n_prefill": n_prefill,
        "decode_gpu": decode_gpu,
        "decode_tp": decode_tp,
        "n_decode": n_decode,
        "count": count,
        "usd_per_hour": 10.0,
        "goodput_req_per_s": goodput,
        "bound_by": "prefill",
        "prefill_capacity_req_per_s": 3.0,
        "decode_batch": 40,
        "predicted_ttft_s": 1.0,
        "predicted_tpot_s": 0.05,
        "utilization": 0.8,
    }
    doc.update(extra)
    return doc


def aggregated(gpu: str, tp: int, count: int = 1, **extra: Any) -> dict[str, Any]:
    """A plan ``instances`` entry: ``count`` aggregated instances of ``gpu`` at TP ``tp`` (``pp`` etc. in extra)."""
    doc = {"role": "aggregated", "gpu": gpu, "tp": tp, "count": count, "usd_per_hour": 10.0, "utilization": 0.8,
           "traffic_share": 1.0}  # fmt: skip
    return doc | extra


def plan_doc(
    combos: list[dict[str, Any]] | None = None,
    instances: list[dict[str, Any]] | None = None,
    model: str = "Llama-3-8B",
    name: str = "syn",
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    inventory: dict[str, int] | None = None,
    perf: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A minimal valid plan document; ``gpus_used`` is computed from the combos and instances."""
    combos = combos or []
    instances = instances or []
    used: dict[str, int] = {}
    for c in combos:
        for side, n in (("prefill", "n_prefill"), ("decode", "n_decode")):
            gpus = c[n] * c[f"{side}_tp"] * c.get(f"{side}_pp", 1) * c["count"]
            used[c[f"{side}_gpu"]] = used.get(c[f"{side}_gpu"], 0) + gpus
    for i in instances:
        used[i["gpu"]] = used.get(i["gpu"], 0) + i["count"] * i["tp"] * i.get("pp", 1)
    goodput = sum(c["goodput_req_per_s"] * c["count"] for c in combos) or 4.0
    total = 10.0 * sum(c["count"] for c in combos) + sum(i.get("usd_per_hour", 10.0) for i in instances)
    return {
        "schema_version": 1,
        "kind": "plan",
        "strategy": "cauchy" if combos else "melange",
        "status": "optimal",
        "scenario": {
            "name": name,
            "model": model,
            "weight_dtype": weight_dtype,
            "kv_dtype": kv_dtype,
            "goodput_target_req_per_s": goodput / 1.1,
            "headroom": 0.1,
            "demand_req_per_s": goodput,
            "slo": {"ttft_s": 2.0, "tpot_s": 0.1, "percentile": 90.0},
            "workload": {
                "name": "synthetic",
                "source": "hand-made test plan",
                "requests": 1000,
                "prompt_tokens_mean": 1024.0,
                "output_tokens_mean": 256.0,
            },
            "gpus": sorted(used),
            "inventory": inventory or {},
            "prices": {gpu: {"usd_per_gpu_hour": 2.0, "source": "test price"} for gpu in sorted(used)},
            "perf_settings": {**PERF, **(perf or {})},
        },
        "total_usd_per_hour": total,
        "usd_per_month": total * 730.0,
        "goodput_req_per_s": goodput,
        "tokens_per_usd": 3600 * goodput * 1280.0 / total,
        "output_tokens_per_usd": 3600 * goodput * 256.0 / total,
        "gpus_used": dict(sorted(used.items())),
        "combos": combos,
        "instances": instances,
    }


def files_of(plan: dict[str, Any], settings: EmitSettings | None = None, targets: tuple[str, ...] = ("all",)):
    """{path: text} of the rendered targets (rules checked)."""
    return {path: text for path, (_, text) in render(ir_of(plan, settings), targets).items()}


def docs(text: str) -> list[dict[str, Any]]:
    """The YAML documents of one emitted file."""
    return [d for d in yaml.safe_load_all(text) if d is not None]


def all_docs(files: dict[str, str], prefix: str) -> list[dict[str, Any]]:
    """Every manifest in the YAML files under ``prefix``."""
    return [d for path, text in files.items() if path.startswith(prefix) and path.endswith(".yaml") for d in docs(text)]
