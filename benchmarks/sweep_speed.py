"""Sweep throughput: a 200-case grid (example (a), each case planned and simulated on its 15-minute trace) on the
local process pool and on a local Ray instance, against running the same cases one by one.

The grid: 10 goodput targets (2..11 req/s) x 2 SLO tiers x 5 GPU sets x 2 clouds (aws, gcp) = 200 cases. Printed,
for each way of running them: wall seconds, cases/s and the speed-up over one by one. "One by one" is measured two
ways: the 200 cases in one Python process, one after another (hetplan's own work, no start-up), and a sample of
``--cli-sample`` cases as separate ``hetplan plan CASE.yaml --no-analysis --verify`` commands, extrapolated to 200
(what running them as separate commands costs, start-up included). Ray's start-up (a fresh local instance, loopback
only) is timed apart from the sweep. The rows of the two executors are compared (timing columns left out). Each
line ends with the 1-minute load average when it finished: on a machine shared with other jobs, compare only
lines run at the same load.

    python benchmarks/sweep_speed.py [--workers 2] [--cli-sample 5] [--no-ray]

Needs no ../shared data. Ray: pip install 'hetplan[ray]'.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from hetplan import api
from hetplan.cli.app import loopback_only, worker_environment
from hetplan.executors import default_workers
from hetplan.sweep.case import run_case
from hetplan.sweep.grid import expand
from hetplan.sweep.run import case_task
from hetplan.sweep.table import COMPARED_NAMES

ROOT = Path(__file__).resolve().parents[1]
GRID = f"""\
schema_version: 1
kind: sweep
name: bench-200
base: {ROOT / "examples" / "llama3-70b-azure-conv.yaml"}
axes:
  goodputs: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
  slos:
    standard: {{ttft: 2s, tpot: 100ms, percentile: p90}}
    tight: {{ttft: 1s, tpot: 80ms, percentile: p90}}
  gpu_sets:
    - [H100]
    - [A100-80GB]
    - [H100, A100-80GB]
    - [A100-80GB, L4]
    - [H100, A100-80GB, L4]
  clouds: [aws, gcp]
verify: true
"""


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return [{k: r[k] for k in COMPARED_NAMES} for r in csv.DictReader(fh)]


def line(label: str, seconds: float, n: int, base: float | None) -> None:
    ratio = "" if base is None else f"  {base / seconds:5.2f}x one by one (in-process)"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{label:<44} {seconds:8.1f} s  {n / seconds:6.2f} cases/s{ratio}  [load average {load:.1f}]", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--cli-sample", type=int, default=5, help="cases run as separate hetplan commands (0: skip)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray executor")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hetplan-sweep-bench-"))
    grid_path = tmp / "grid.yaml"
    grid_path.write_text(GRID, encoding="utf-8")
    grid = expand(grid_path)
    n = len(grid.cases)
    print(f"grid: {n} cases (10 goodputs x 2 SLO tiers x 5 GPU sets x 2 clouds), plan + simulated check each; "
          f"{args.workers} workers; machine cores: {default_workers()}", flush=True)  # fmt: skip

    start = time.perf_counter()
    statuses: dict[str, int] = {}
    for case in grid.cases:  # one after another in this process: no pool, no start-up
        out = run_case(case_task(case, (), None, None))
        statuses[out.status] = statuses.get(out.status, 0) + 1
    serial = time.perf_counter() - start
    line("one by one, in one process", serial, n, None)
    print(f"  outcomes: {statuses}", flush=True)

    if args.cli_sample:
        sample = grid.cases[:: max(1, n // args.cli_sample)][: args.cli_sample]
        start = time.perf_counter()
        for case in sample:
            scenario = tmp / f"{case.id}.yaml"
            scenario.write_text(yaml.safe_dump(case.scenario, sort_keys=False), encoding="utf-8")
            subprocess.run(["hetplan", "plan", str(scenario), "--no-analysis", "--verify", "--json"],
                           capture_output=True, check=False)  # fmt: skip
        per = (time.perf_counter() - start) / len(sample)
        print(f"{'one by one, a hetplan command per case':<44} {per * n:8.1f} s  {1 / per:6.2f} cases/s  "
              f"(extrapolated from {len(sample)} commands, {per:.2f} s each)", flush=True)  # fmt: skip

    start = time.perf_counter()
    with worker_environment("local", None):  # as the CLI: one BLAS thread per worker
        local = api.sweep(grid_path, tmp / "local", executor="local", workers=args.workers)
    line(f"local executor, {args.workers} workers", time.perf_counter() - start, n, serial)

    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("ray executor: skipped (pip install 'hetplan[ray]')")
            return 0
        loopback_only()
        start = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        print(f"{'ray: start a local instance':<44} {time.perf_counter() - start:8.1f} s", flush=True)
        start = time.perf_counter()
        on_ray = api.sweep(grid_path, tmp / "ray", executor="ray")
        line(f"ray executor, {args.workers} CPUs (instance running)", time.perf_counter() - start, n, serial)
        ray.shutdown()
        same = rows(tmp / "ray" / "results.csv") == rows(tmp / "local" / "results.csv")
        print(f"rows equal on both executors (timing columns left out): {same}; counts {local['counts']} / "
              f"{on_ray['counts']}")  # fmt: skip
        if not same:
            return 1
    print(f"outputs in {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
