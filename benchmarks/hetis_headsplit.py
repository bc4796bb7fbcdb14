"""Head split: greedy water-filling against the exact MILP, and how long each takes, as the pool grows.

Devices are drawn like real ones: per-head-token time from A100/RTX-3090/P100-like bandwidths (1e-8 to 8e-8 s),
query shipping 0-2 µs per head and request, fixed cost 0-2 ms (kernel launches plus link latency), KV memory 2e6 to
2e7 head-tokens; three length classes (short, medium, long) of 1-40 requests and 40 KV heads (Llama-2-13B).
Prints, per pool size, the median and worst greedy/MILP makespan ratio over the seeds and the median solve times.

Usage: python benchmarks/hetis_headsplit.py [--seeds 10] [--sizes 4,8,12,16,24]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from hetplan.solvers import headsplit
from hetplan.solvers.headsplit import AttentionDevice, LengthClass


def case(rng: np.random.Generator, n_dev: int) -> tuple[list[AttentionDevice], list[LengthClass]]:
    devices = [
        AttentionDevice(
            f"d{j}",
            "attention",
            float(rng.uniform(1e-8, 8e-8)),
            float(rng.uniform(0, 2e-6)),
            float(rng.uniform(0, 2e-3)),
            float(rng.uniform(2e6, 2e7)) * n_dev / 4,
        )
        for j in range(n_dev)
    ]
    classes = [
        LengthClass("short", float(rng.integers(100, 500)), int(rng.integers(1, 40))),
        LengthClass("medium", float(rng.integers(500, 2000)), int(rng.integers(1, 40))),
        LengthClass("long", float(rng.integers(2000, 4000)), int(rng.integers(1, 20))),
    ]
    return devices, classes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--sizes", default="4,8,12,16,24")
    args = parser.parse_args()
    print(f"{'devices':>7} {'median ratio':>13} {'worst ratio':>12} {'greedy ms':>10} {'milp ms':>9}")
    for n_dev in (int(x) for x in args.sizes.split(",")):
        rng = np.random.default_rng(n_dev)
        ratios, t_greedy, t_milp = [], [], []
        for _ in range(args.seeds):
            devices, classes = case(rng, n_dev)
            start = time.perf_counter()
            greedy = headsplit.solve_greedy(devices, classes, 40)
            t_greedy.append(time.perf_counter() - start)
            start = time.perf_counter()
            exact = headsplit.solve_milp(devices, classes, 40, time_limit_s=60.0)
            t_milp.append(time.perf_counter() - start)
            ratios.append(greedy.makespan_s / exact.makespan_s)
        print(
            f"{n_dev:>7} {statistics.median(ratios):>13.4f} {max(ratios):>12.4f} "
            f"{statistics.median(t_greedy) * 1e3:>10.1f} {statistics.median(t_milp) * 1e3:>9.1f}"
        )


if __name__ == "__main__":
    main()
