"""Wall time of ``hetplan explore`` on the bundled examples: a handful of what-if points each (target: under a
minute per command on 2 cores, issue 31).

Each command runs once in a fresh process (start-up included), with the simulated check of every point (the
default) unless ``--no-verify`` is passed here; the script prints each command, its points, the wall and CPU
seconds and the seconds per point, then the largest wall time. Wall time depends on other load on the machine
(the CPU figure less so): run it on an idle machine for the figure docs/explore.md quotes.

    python benchmarks/explore_speed.py [--no-verify] [--python PYTHON]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: (scenario, --vary values): 4-5 points each, the what-ifs issue 31 names.
RUNS = (
    ("examples/llama3-70b-azure-conv.yaml", ("goodput=1x,1.5x,2x,3x",)),
    ("examples/llama3-70b-azure-conv.yaml", ("ttft=1s,2s,3s,5s,8s",)),
    ("examples/llama3-70b-azure-conv.yaml", ("price:L40S=-40%,-20%,+0%,+20%",)),
    ("examples/cauchy-h800-a800-h20.yaml", ("goodput=0.5x,1x", "owned:H800=+0,+16")),
    ("examples/llama31-8b-mooncake.yaml", ("tpot=40ms,60ms,80ms,120ms",)),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-verify", action="store_true", help="plan the points without the simulated check")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs hetplan (default: this one)")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worst = 0.0
    for scenario, axes in RUNS:
        argv = [args.python, "-c", "from hetplan.cli.entry import main; main()", "explore", scenario]
        for a in axes:
            argv += ["--vary", a]
        if args.no_verify:
            argv.append("--no-verify")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv[3:])} exited {proc.returncode}: {proc.stderr[-500:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        points = 1
        for a in axes:
            points *= len(a.split("=", 1)[1].split(","))
        worst = max(worst, wall)
        shown = " ".join(f"--vary {a}" for a in axes) + (" --no-verify" if args.no_verify else "")
        print(f"hetplan explore {scenario} {shown}: {points} points, {wall:.1f} s wall, {cpu:.1f} s CPU, "
              f"{wall / points:.1f} s/point", flush=True)  # fmt: skip
    print(f"slowest: {worst:.1f} s wall (target: under 60 s on 2 cores); load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
