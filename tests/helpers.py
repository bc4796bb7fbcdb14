"""Builders for small, hand-checkable planning problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hetplan.catalog.loader import find_model
from hetplan.catalog.pricing import GpuPrice
from hetplan.catalog.schemas import GpuSpec
from hetplan.perf.arch import ModelArch
from hetplan.perf.capacity_inputs import LengthStats
from hetplan.solvers.cauchy import PlanRequest


def gpu(
    name: str, tflops: float, gb_per_s: float, hbm_gib: float = 80, link: float = 900, net_gbit: float = 400
) -> GpuSpec:
    return GpuSpec(
        name=name,
        bf16_dense_tflops=tflops,
        fp16_dense_tflops=tflops,
        hbm_gib=hbm_gib,
        hbm_gb_per_s=gb_per_s,
        interconnect_gb_per_s=link,
        network_gbit_per_s=net_gbit,
    )


def request(
    gpus: list[GpuSpec],
    prices: dict[str, float],
    inventory: dict[str, int] | None = None,
    model: str = "Llama-3-8B",
    goodput: float = 10.0,
    ttft: float = 2.0,
    tpot: float = 0.1,
    prompt: int = 1024,
    output: int = 256,
    tp: tuple[int, ...] = (1,),
    max_ratio: int = 4,
    headroom: float = 0.0,
    top_k: int = 10_000,
) -> PlanRequest:
    rng = np.random.default_rng(0)
    p = np.maximum(1, rng.normal(prompt, prompt * 0.2, 500)).astype(int)
    o = np.maximum(2, rng.normal(output, output * 0.2, 500)).astype(int)
    return PlanRequest(
        arch=ModelArch(find_model(model)),
        stats=LengthStats(p, o, 0.9),
        goodput_req_per_s=goodput,
        ttft_slo_s=ttft,
        tpot_slo_s=tpot,
        gpus=tuple(gpus),
        prices={g.name: GpuPrice(g.name, prices[g.name], "test") for g in gpus},
        inventory=inventory or {},
        tp_options=tp,
        max_ratio=max_ratio,
        headroom=headroom,
        max_ilp_combos=top_k,
    )


VERIFY_FLAGS = ("--verify", "--no-verify", "--verify-policy", "--verify-strict", "--resize", "--no-resize")


def cli(args: tuple[object, ...] | list[object]) -> list[str]:
    """CLI arguments for a test: ``plan`` and ``gate`` get ``--no-verify`` (the simulated check costs seconds per
    plan) unless the test asks about verification with one of :data:`VERIFY_FLAGS`."""
    out = [str(a) for a in args]
    if out and out[0] in ("plan", "gate") and not any(a in VERIFY_FLAGS for a in out):
        out.append("--no-verify")
    return out


#: A scenario whose plan uses only owned GPUs: 16 owned H100 without a price file, so every strategy costs $0.00/h
#: and tokens/USD is not defined (the plan file writes 0, its combos null). ``{rent}`` is empty or a ``cloud:`` line.
OWNED_ONLY_SCENARIO = """schema_version: 1
kind: scenario
name: owned-only
model: Llama-3.1-8B
weight_dtype: bf16
workload:
  path: {trace}
goodput_req_per_s: 3
slo: {{ttft: 6s, tpot: 80ms, percentile: p90}}
{fleet}
"""


def owned_only_scenario(folder: Path, rented: bool = False) -> Path:
    """Write the owned-only scenario (or, with ``rented``, the same scenario renting H100s on AWS instead) into
    ``folder`` and return its path. The trace is the repository's ``tests/fixtures/mooncake_300.jsonl``."""
    trace = Path(__file__).resolve().parent / "fixtures" / "mooncake_300.jsonl"
    fleet = "gpus: [H100]\ncloud: aws" if rented else "inventory: {H100: 16}"
    path = folder / ("rented.yaml" if rented else "owned-only.yaml")
    path.write_text(OWNED_ONLY_SCENARIO.format(trace=trace, fleet=fleet))
    return path


def fake_plan_check(verify: Any) -> type:
    """A stand-in for :class:`hetplan.sim.verify.PlanCheck` (monkeypatched over it) whose verdict is the typed block
    of ``verify(plan, workload, policy, capacity, out_of_sample)`` (a document dict) with ``capacity`` True unless
    the mode is "none"."""

    class _Check:
        def __init__(
            self, plan: Any, workload: Any, policy: str = "fcfs", out_of_sample: Any = (), catalog: Any = None
        ) -> None:  # the catalog, which PlanCheck now takes, is not used
            self.args = (plan, workload, policy, out_of_sample)

        def verdict(self, capacity: str = "full") -> Any:
            from hetplan.plan.blocks import Verification

            p, w, policy, oos = self.args
            return Verification.from_doc(dict(verify(p, w, policy, capacity != "none", oos)))

    return _Check
