"""Speed of ``hetplan plan`` with its verification on (the default) on the bundled examples.

Per example: the wall time of ``hetplan plan EXAMPLE --json`` as a user runs it (a fresh process, start-up
included; median of ``--repeats`` runs), the CPU time of that process and its children (user + system; the
planner forks its weight-dtype plans and MILP solves), the plan's $/hour and how many plans the verification
simulated. The load average is printed first: on a busy machine wall times stretch, CPU times much less.

Usage: python benchmarks/verify_speed.py [--repeats 3] [EXAMPLE.yaml ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("llama3-70b-azure-conv.yaml", "cauchy-h800-a800-h20.yaml", "llama31-8b-mooncake.yaml")


def _one(path: str) -> tuple[float, float, dict[str, object]]:
    """One ``hetplan plan PATH --json`` in a fresh process: (wall s, CPU s of it and its children, the plan)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, "-c", "import sys; from hetplan.cli.entry import main; sys.exit(main())", "plan", path]
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True,
                          check=True)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("examples", nargs="*", default=[str(ROOT / "examples" / x) for x in EXAMPLES])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cores, load average {load}")
    print(f"{'example':<28} {'wall s':>7} {'CPU s':>7} {'$/h':>9}  verification")
    for path in args.examples:
        runs = [_one(path) for _ in range(args.repeats)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        plan = runs[-1][2]
        v = plan.get("verification") or {}
        resized = v.get("resized") or {}
        shapes = [s for s in resized.get("per_strategy") or [] if "plans_tried" in s]
        tried = sum(int(s["plans_tried"]) for s in shapes) if shapes else len(resized.get("attempts") or [])
        cheaper = len((v.get("cheaper_search") or {}).get("tried") or [])
        what = f"{v.get('status')}; {tried} re-sized plans, {cheaper} cheaper candidates"
        print(f"{Path(path).stem:<28} {wall:>7.1f} {cpu:>7.1f} {plan['total_usd_per_hour']:>9.2f}  {what}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
