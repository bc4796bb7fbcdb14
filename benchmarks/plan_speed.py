"""Planning speed over the whole GPU catalog: every GPU type, TP 1/2/4/8, ratios up to 8:8.

GPUs without a catalog price get a placeholder price proportional to their bf16 TFLOPS (printed as such):
this measures the planner's speed, not a recommendation. Prints the instance options, combos enumerated,
combos in the ILP, and wall time per stage (median of --repeats runs, after one warm-up).

Usage: python benchmarks/plan_speed.py [--model Llama-3-70B] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from hetplan.catalog.loader import load_gpus
from hetplan.catalog.pricing import resolve_price
from hetplan.planning.request import build_request
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import enumerate_candidates, solve_allocation

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="Llama-3-70B")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-ilp-combos", type=int, default=20000)
    args = ap.parse_args()
    gpus = [g for g in load_gpus().gpus if (g.bf16_dense_tflops or g.fp16_dense_tflops or g.fp16_dense_tflops_estimate)]
    prices: dict[str, float] = {}
    placeholder = []
    for g in gpus:
        p = resolve_price(g)
        if p is None:
            # a placeholder price that grows with compute (Volta/Turing/Pascal have fp16 tensor cores only)
            tflops = g.bf16_dense_tflops or g.fp16_dense_tflops or g.fp16_dense_tflops_estimate or 0.0
            prices[g.name] = round(0.004 * tflops + 0.2, 2)
            placeholder.append(g.name)
        else:
            prices[g.name] = p.usd_per_gpu_hour
    price_file = Path(tempfile.mkdtemp()) / "prices.yaml"
    price_file.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "kind": "prices",
                "source": "benchmark placeholders",
                "as_of": "n/a",
                "usd_per_gpu_hour": prices,
            }
        )
    )
    scenario = Scenario(
        model=args.model,
        workload={"path": str(ROOT / "examples/data/azure_conv_15min.csv")},
        goodput_req_per_s=20,
        gpus=[g.name for g in gpus],
        tp=[1, 2, 4, 8],
        max_ratio=8,
        max_ilp_combos=args.max_ilp_combos,
        prices=str(price_file),
    )
    print(f"{len(gpus)} GPU types; placeholder prices for {len(placeholder)}: {', '.join(placeholder)}")
    times: dict[str, list[float]] = {"inputs": [], "enumerate": [], "ilp": [], "total": []}
    for run in range(args.repeats + 1):
        t0 = time.perf_counter()
        req, _, _, _ = build_request(scenario)
        t1 = time.perf_counter()
        cands = enumerate_candidates(req)
        t2 = time.perf_counter()
        alloc = solve_allocation(req, cands.combos)
        t3 = time.perf_counter()
        if run == 0:
            continue  # warm-up (imports, HiGHS start-up)
        for key, value in (("inputs", t1 - t0), ("enumerate", t2 - t1), ("ilp", t3 - t2), ("total", t3 - t0)):
            times[key].append(value)
    print(f"instance options (GPU x TP that fit): {len(cands.options)}")
    types_in_ilp = len({g for c in cands.combos for g in c.gpus_used()})
    print(
        f"combos enumerated: {cands.enumerated:,}; ILP: {len(cands.combos)} integer variables, 1 demand row "
        f"(+ one inventory row per GPU type with an inventory; {types_in_ilp} types appear)"
    )
    print(
        f"plan: ${alloc.total_usd_per_hour:.2f}/h, {alloc.goodput_req_per_s:.2f} req/s, status {alloc.status}, "
        f"pruning {'exact' if cands.exact else 'heuristic'}"
    )
    for key, vals in times.items():
        print(f"  {key:10s} median {statistics.median(vals):.3f} s  (runs: {', '.join(f'{v:.3f}' for v in vals)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
