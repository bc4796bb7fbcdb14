"""Scheduling policies under overload: Azure conversation + code traces mixed, FCFS/SJF/EDF/CASCADE.

The two one-hour Azure traces (Splitwise, 2023) are replayed together as two request classes with different
SLOs (conversation: the plan's TTFT 2 s, TPOT 100 ms; code: TTFT 4 s, TPOT 100 ms, since code prompts are about
twice as long) through example (a)'s Cauchy plan (tests/fixtures/plan_two_combos.json) with each combo deployed
twice (8 instances: 2x A100 TP2 -> A10G TP8, 2x H100 TP2 -> A100 TP4, Llama-3-70B). At rate scale 1 the mix
offers about 7.9 req/s and 11.5k prompt tokens/s, with minute-long bursts three times that; the sweep drives it
further into overload. CASCADE's κ and q₂ are first calibrated on the mix at rate scale 1 (``hetplan
calibrate``'s procedure) and used for the ``cascade`` rows; ``cascade-k1`` repeats CASCADE with κ = 1 to show
how much the calibrated safety margin costs. Prints goodput (req/s meeting both SLOs), joint attainment,
per-class attainment and Jain's index over the two classes.

Expected direction from the CASCADE paper (DESIGN §3.4): CASCADE's goodput above FCFS, SJF and EDF under
overload, Jain ≥ 0.95 while SJF's falls. This script reports what hetplan's simulator gives; it does not
assert it.

Needs ../shared/data/traces/AzureLLMInferenceTrace_{conv,code}.csv (relative to the repository).

Usage: python benchmarks/scheduling.py [--scales 1,1.5,2,3] [--minutes 60] [--copies 2] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import replace
from pathlib import Path

from hetplan.plan.doc import load_plan
from hetplan.sim.calibrate import calibrate
from hetplan.sim.policies import CascadeSettings
from hetplan.sim.run import SimRequest, simulate
from hetplan.workload.model import ClassSlo
from hetplan.workload.readers import read_stream

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
CONV, CODE = "AzureLLMInferenceTrace_conv", "AzureLLMInferenceTrace_code"
SLOS = {CONV: ClassSlo(2.0, 0.1), CODE: ClassSlo(4.0, 0.1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1,1.5,2,3")
    ap.add_argument("--minutes", type=float, default=60.0, help="replay only the first N minutes of the mix")
    ap.add_argument("--copies", type=int, default=2, help="deploy each combo of the plan this many times")
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder (default ../shared/data)")
    args = ap.parse_args()
    paths = [args.data / "traces" / f"{name}.csv" for name in (CONV, CODE)]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"missing {missing[0]}: pass --data PATH/TO/shared/data", file=sys.stderr)
        return 2
    stream = read_stream([str(p) for p in paths])
    keep = int((stream.arrival_s <= args.minutes * 60).sum())
    stream = stream.head(keep)
    plan = load_plan(ROOT / "tests" / "fixtures" / "plan_two_combos.json")
    plan = dataclasses.replace(plan, combos=tuple(dataclasses.replace(c, count=args.copies) for c in plan.combos))
    print(
        f"{stream.n:,} requests over {stream.duration_s:,.0f} s ({stream.n / stream.duration_s:.2f} req/s): "
        + ", ".join(f"{name} {int((stream.class_id == i).sum()):,}" for i, name in enumerate(stream.class_names))
    )
    print("SLOs: " + "; ".join(f"{k}: TTFT {v.ttft_s:g} s, TPOT {v.tpot_s * 1e3:g} ms" for k, v in SLOS.items()))
    base = SimRequest(plan, stream, SLOS)
    start = time.perf_counter()
    block = calibrate(base, quantile=0.95)
    print(
        f"calibrated at rate scale 1 in {time.perf_counter() - start:.1f} s: kappa {block['kappa']:.4g} "
        f"(coverage {block['coverage']:.1%}), q2 {block['q2']:g}"
    )
    cascade = CascadeSettings(kappa=block["kappa"], q2=block["q2"])
    print("goodput = requests meeting both SLOs / serving span (first arrival to last arrival or completion)")
    header = (
        f"{'scale':>5} {'policy':10} {'goodput':>8} {'span s':>7} {'attain':>7} {'conv':>7} {'code':>7} {'Jain':>6} "
        f"{'unfin':>6} {'>ctx':>5} {'time':>6}"
    )
    print(header)
    for scale in (float(x) for x in args.scales.split(",")):
        for policy in ("fcfs", "sjf", "edf", "cascade", "cascade-k1"):
            start = time.perf_counter()
            settings = cascade if policy == "cascade" else replace(cascade, kappa=1.0)
            run = replace(base, policy=policy.split("-")[0], rate_scale=scale, cascade=settings)
            m = simulate(run)
            took = time.perf_counter() - start
            by = {c["class"]: c["attainment"] for c in m["classes"]}
            jain = "-" if m["jain_index"] is None else f"{m['jain_index']:.3f}"
            print(
                f"{scale:5.2f} {policy:10} {m['goodput_req_per_s']:8.3f} {m['serving_span_s']:7.0f} "
                f"{m['attainment']['joint']:7.1%} {by[CONV]:7.1%} {by[CODE]:7.1%} {jain:>6} {m['unfinished']:6d} "
                f"{m['dropped_over_context']:5d} {took:5.1f}s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
