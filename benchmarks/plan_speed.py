"""Planning speed over the whole GPU catalog: every GPU type, TP 1/2/4/8, ratios up to 8:8, bf16 and fp8 weights,
disaggregated (Cauchy combos) and aggregated (Mélange instances) candidates.

GPUs without a catalog price get a placeholder price proportional to their bf16 TFLOPS (printed as such):
this measures the planner's speed, not a recommendation. The fp8 candidates are the GPUs with fp8 tensor cores
(the planner's default dtype space, docs/search.md). Prints the candidates (instance options, combos enumerated
and kept, aggregated instance types), the two MILPs' sizes (variables and constraints) and the wall and CPU time
per phase (median of --repeats runs, after one warm-up):

- inputs: scenario to request (trace, prices) for both dtypes;
- candidates: per dtype, in its own worker process as the planner runs its dtypes (hetplan.planning.forked;
  HETPLAN_PLAN_WORKERS=1 runs them one after another): prefill/decode capacities, combos and exact dominance
  pruning (hetplan.solvers.cauchy), the Mélange instance types' per-bucket capacities
  (hetplan.solvers.melange.instance_types) and the mixed strategy's per-bucket capacities of its best combos
  (hetplan.solvers.mixed.bucket_combos); each step's CPU time in its process is printed too;
- ilp: the combo covering MILP over both dtypes' combos, and the Mélange slice MILP over both dtypes' types;
- mixed: the mixed strategy's restricted combo columns and its one MILP over them and every aggregated type,
  capped at the restricted optima as the planner solves it (a HiGHS cutoff: only plans cheaper than both are
  sought). The same MILP without the cap is solved after the timed phases and its optimum and time printed.

Then the planner itself, end to end on the same scenario with ``weight_dtype: auto-quantized`` (``api.plan``,
strategy all, no analysis, no verification): it plans each dtype whole (its own MILPs, homogeneous baselines and
purchase layer per dtype), so it does more than the phases above.

Usage: python benchmarks/plan_speed.py [--model Llama-3-70B] [--repeats 3] [--dtypes bf16,fp8] [--no-planner]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from hetplan import api
from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import load_gpus
from hetplan.catalog.pricing import resolve_price
from hetplan.cli.app import resources_from_env
from hetplan.errors import InfeasibleError
from hetplan.planning.forked import plan_workers, run_forked
from hetplan.planning.request import build_request
from hetplan.scenario import Scenario
from hetplan.solvers.cauchy import PlanRequest, solve_allocation
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from hetplan.solvers.melange import instance_types, make_buckets, solve_melange
from hetplan.solvers.milp_slices import MAX_SLICE_LOAD
from hetplan.solvers.mixed import bucket_combos, combo_columns, mixed_size, solve_mixed
from hetplan.solvers.packing import _undominated_columns

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("inputs", "candidates", "ilp", "mixed", "total")


def _candidates(req: PlanRequest) -> tuple[Any, ...]:
    """One dtype's candidates (run in a worker process): combos, buckets, aggregated types, the mixed strategy's
    per-bucket combo pool, and the CPU seconds of each step in that process."""
    marks = [time.process_time()]
    cands = enumerate_candidates(req)
    marks.append(time.process_time())
    buckets = make_buckets(req.stats)
    types = instance_types(req, buckets)
    marks.append(time.process_time())
    pool = bucket_combos(req, cands, buckets)
    marks.append(time.process_time())
    steps = dict(zip(("enumerate", "aggregated", "bucket pool"), np.diff(marks).tolist(), strict=True))
    return cands, buckets, types, pool, steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="Llama-3-70B")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-ilp-combos", type=int, default=20000)
    ap.add_argument("--dtypes", default="bf16,fp8", help="weight dtypes to enumerate (fp8: GPUs with fp8 cores)")
    ap.add_argument("--no-planner", dest="planner", action="store_false", help="skip the end-to-end planner timing")
    args = ap.parse_args()
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    gpus = [g for g in load_gpus().gpus if (g.bf16_dense_tflops or g.fp16_dense_tflops or g.fp16_dense_tflops_estimate)]
    prices: dict[str, float] = {}
    placeholder = []
    for g in gpus:
        p = resolve_price(g, Catalog.shipped())
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
    base = Scenario(
        model=args.model,
        workload={"path": str(ROOT / "examples/data/azure_conv_15min.csv")},
        goodput_req_per_s=20,
        gpus=[g.name for g in gpus],
        tp=[1, 2, 4, 8],
        max_ratio=8,
        max_ilp_combos=args.max_ilp_combos,
        prices=str(price_file),
    )
    scenarios = {}
    for dtype in dtypes:
        chosen = [g.name for g in gpus if dtype != "fp8" or g.fp8_dense_tflops]
        scenarios[dtype] = base.model_copy(update={"weight_dtype": dtype, "gpus": chosen})
    print(f"{len(gpus)} GPU types; placeholder prices for {len(placeholder)}: {', '.join(placeholder)}")
    for dtype, sc in scenarios.items():
        print(f"  {dtype}: {len(sc.gpus or [])} GPU types")
    wall: dict[str, list[float]] = {k: [] for k in PHASES}
    cpu: dict[str, list[float]] = {k: [] for k in PHASES}
    inner: dict[tuple[str, str], list[float]] = {}
    workers = plan_workers(len(dtypes), resources_from_env().plan_workers)  # HETPLAN_PLAN_WORKERS, as the CLI
    for run in range(args.repeats + 1):
        marks = [(time.perf_counter(), time.process_time())]
        reqs = {d: build_request(sc)[0] for d, sc in scenarios.items()}
        marks.append((time.perf_counter(), time.process_time()))
        # each dtype's candidates in its own process, as the planner runs its dtypes (hetplan.planning.forked)
        made = dict(zip(dtypes, run_forked([lambda r=reqs[d]: _candidates(r) for d in dtypes], workers), strict=True))
        cands = {d: m[0] for d, m in made.items()}
        buckets = {d: m[1] for d, m in made.items()}
        types = {d: m[2] for d, m in made.items()}
        marks.append((time.perf_counter(), time.process_time()))
        first = reqs[dtypes[0]]
        combos = [c for d in dtypes for c in cands[d].combos]
        alloc = solve_allocation(first, combos)
        all_types = [t for d in dtypes for t in types[d]]
        # one bucket set for the aggregated MILP: the buckets are the same (same workload); types of both dtypes
        mel = solve_melange(all_types, buckets[dtypes[0]], first.demand_req_per_s, 4, first.inventory)
        marks.append((time.perf_counter(), time.process_time()))
        pool = [bc for d in dtypes for bc in made[d][3]]
        columns = combo_columns(pool, len(buckets[dtypes[0]]), [c for c, _ in alloc.combos])
        # as the planner solves it (hetplan.planning.solve._solve_mixed): only plans cheaper than both restricted
        # optima (none: the MILP proves it, and the cheaper restricted optimum is the mixed optimum)
        cap = min(alloc.total_usd_per_hour, mel.total_usd_per_hour) * (1 - 1e-6)
        capped_s = time.perf_counter()
        try:
            found = solve_mixed(all_types, columns, buckets[dtypes[0]], first, 4, cost_cap=cap)
            capped = f"${found.total_usd_per_hour:.2f}/h"
        except InfeasibleError:
            capped = "none cheaper"
        capped_s = time.perf_counter() - capped_s
        marks.append((time.perf_counter(), time.process_time()))
        # not timed: the same MILP without the cap, for its optimum and its solve time
        mixed = solve_mixed(all_types, columns, buckets[dtypes[0]], first, 4)
        if run == 0:
            continue  # warm-up (imports, HiGHS start-up)
        for i, key in enumerate(PHASES[:-1]):
            wall[key].append(marks[i + 1][0] - marks[i][0])
            cpu[key].append(marks[i + 1][1] - marks[i][1])
        wall["total"].append(marks[-1][0] - marks[0][0])
        cpu["total"].append(marks[-1][1] - marks[0][1])
        for d, m in made.items():
            for key, seconds in m[4].items():
                inner.setdefault((d, key), []).append(seconds)
    for d in dtypes:
        c = cands[d]
        print(
            f"{d}: instance options (GPU x TP that fit) {len(c.options)}; combos enumerated {c.enumerated:,}, kept "
            f"{len(c.combos):,} (pruning {'exact' if c.exact else 'heuristic'}); aggregated instance types "
            f"{len(types[d])} over {len(buckets[d])} buckets"
        )
    types_in_ilp = len({g for c in combos for g in c.gpus_used()})
    inventory_rows = len({g for c in combos for g in c.gpus_used()} & set(first.inventory))
    kept = len(_undominated_columns([c.usd_per_hour for c in combos], [c.goodput_req_per_s for c in combos]))
    print(
        f"combo MILP: {len(combos):,} candidate combos, {kept:,} integer variables after (cost, goodput) dominance "
        f"(exact with one demand row and no inventory rows), {1 + inventory_rows} constraints (1 demand row + "
        f"{inventory_rows} inventory rows; {types_in_ilp} GPU types appear)"
    )
    k = 4
    loads = sum(
        1
        for b, bucket in enumerate(buckets[dtypes[0]])
        for t in all_types
        if t.capacity_req_per_s[b] > 0
        and first.demand_req_per_s * bucket.share / k / t.capacity_req_per_s[b] <= MAX_SLICE_LOAD
    )
    print(
        f"aggregated MILP: {len(all_types) + loads:,} integer variables ({len(all_types)} instance counts, {loads} "
        f"slice assignments), {len(buckets[dtypes[0]]) + len(all_types)} constraints (+ one per assignment when "
        "re-solved with link rows)"
    )
    print(
        f"plans: combos ${alloc.total_usd_per_hour:.2f}/h, {alloc.goodput_req_per_s:.2f} req/s, {alloc.status}; "
        f"aggregated ${mel.total_usd_per_hour:.2f}/h, {mel.status}"
    )
    size = mixed_size(all_types, columns, buckets[dtypes[0]], first, 4)
    print(
        f"mixed MILP: {len(pool)} combos with per-bucket capacities, {size['aggregated_columns']} aggregated + "
        f"{size['combo_columns']} combo columns, {size['variables']:,} variables, {size['constraints']} constraints "
        f"before the purchase layer; capped at the restricted optima as the planner solves it (timed): {capped}, "
        f"{capped_s:.2f} s wall (last run); without the cap (not timed): ${mixed.total_usd_per_hour:.2f}/h, "
        f"{mixed.status}, MILP {mixed.milp_seconds:.2f} s wall"
    )
    print(f"phases ({workers} worker processes for the candidates; CPU: this process only):")
    for key in PHASES:
        print(
            f"  {key:10s} wall median {statistics.median(wall[key]):.3f} s (runs: "
            f"{', '.join(f'{v:.3f}' for v in wall[key])}); CPU median {statistics.median(cpu[key]):.3f} s"
        )
    for (d, key), values in inner.items():
        print(f"    {d} {key:11s} CPU median {statistics.median(values):.3f} s (in its worker process)")
    serial = sum(statistics.median(v) for v in inner.values())
    print(f"    candidates' CPU summed over dtypes: {serial:.3f} s (their wall on one core)")
    if args.planner:
        scenario = base.model_copy(update={"weight_dtype": "auto-quantized"})
        times = []
        for run in range(args.repeats + 1):
            started = time.perf_counter()
            plan = api.plan(scenario, strategy="all", analysis=False)
            if run:
                times.append(time.perf_counter() - started)
        print(
            "planner end to end (hetplan plan --weight-dtype auto-quantized --strategy all --no-analysis --no-verify, "
            "both "
            f"dtypes in {workers} processes): wall median {statistics.median(times):.3f} s (runs: "
            f"{', '.join(f'{v:.3f}' for v in times)}); ${plan.total_usd_per_hour:.2f}/h ({plan.strategy})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
