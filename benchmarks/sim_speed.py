"""Simulator speed: the one-hour Azure conversation trace through a 16-instance deployment.

Target (issue 4): <= 10 s on the 2-core machine. The deployment is example (a)'s Cauchy plan
(tests/fixtures/plan_two_combos.json) with each of its two combos deployed 4 times: 8 prefill + 8 decode
instances (A100 TP2 -> A10G TP8 and H100 TP2 -> A100 TP4, Llama-3-70B). Prints, per policy, the median wall
time of the run (trace reading and metrics reported separately), events per second, and peak memory: the
process's peak RSS (resource.getrusage) and, in a separate run, the Python-allocated peak (tracemalloc, which
slows the run, so that run is not timed).

Needs ../shared/data/traces/AzureLLMInferenceTrace_conv.csv (relative to the repository).

Usage: python benchmarks/sim_speed.py [--repeats 3] [--policies fcfs,cascade] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from hetplan.plan.doc import load_plan
from hetplan.sim.deployment import deployment_from_plan
from hetplan.sim.engine import Simulator
from hetplan.sim.metrics import measure
from hetplan.sim.policies import get_scheduler
from hetplan.workload.readers import read_stream

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", default="fcfs,sjf,edf,cascade")
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder (default ../shared/data)")
    args = ap.parse_args()
    trace = args.data / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if not trace.is_file():
        print(f"missing {trace}: pass --data PATH/TO/shared/data", file=sys.stderr)
        return 2
    plan = load_plan(ROOT / "tests" / "fixtures" / "plan_two_combos.json")
    plan = dataclasses.replace(plan, combos=tuple(dataclasses.replace(c, count=4) for c in plan.combos))
    start = time.perf_counter()
    stream = read_stream([str(trace)])
    read_s = time.perf_counter() - start
    dep = deployment_from_plan(plan)
    print(
        f"trace: {stream.n:,} requests over {stream.duration_s:,.0f} s (read in {read_s:.2f} s); "
        f"{len(dep.instances)} instances ({sum(i.role == 'prefill' for i in dep.instances)} prefill, "
        f"{sum(i.role == 'decode' for i in dep.instances)} decode)"
    )
    for name in args.policies.split(","):
        times, metrics_s = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            sim = Simulator(dep, stream, get_scheduler(name))
            res = sim.run()
            times.append(time.perf_counter() - start)
            start = time.perf_counter()
            m = measure(stream, res).to_doc()
            metrics_s.append(time.perf_counter() - start)
        run_s = statistics.median(times)
        events = res.counters["events"]
        print(
            f"{name:8s} run median {run_s:.2f} s (runs {', '.join(f'{t:.2f}' for t in times)}), metrics "
            f"{statistics.median(metrics_s):.2f} s; {events:,.0f} events ({res.counters['iterations']:,.0f} "
            f"iterations), {events / run_s:,.0f} events/s; joint attainment {m['attainment']['joint']:.1%}, "
            f"goodput {m['goodput_req_per_s']:.3g} req/s"
        )
    tracemalloc.start()
    Simulator(dep, stream, get_scheduler("cascade")).run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory: process RSS {rss_mib:,.0f} MiB; Python allocations in one cascade run {peak / 2**20:,.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
