"""Autoscaling speed: plan the 14-day ServeGen curve (2,016 ten-minute windows) for both examples.

Target (issue): <= 30 s on the 2-core machine. Prints windows, demand levels, time and the schedule's cost
against the static peak and mean fleets.

Usage: python benchmarks/autoscale_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from hetplan import api
from hetplan.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    curve = ROOT / "examples" / "data" / "servegen_m_large_14d.csv"
    for name in ("llama3-70b-azure-conv.yaml", "cauchy-h800-a800-h20.yaml"):
        scenario = load_scenario(ROOT / "examples" / name)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            doc = api.autoscale(scenario, {}, curve)
            times.append(time.perf_counter() - start)
        s = doc["summary"]
        print(
            f"{name}: {s['windows']} windows, {s['levels']} demand levels, median {statistics.median(times):.2f} s "
            f"(runs {', '.join(f'{t:.2f}' for t in times)})"
        )
        print(
            f"  schedule ${s['schedule_usd']:,.0f}; static peak ${s['static_peak_usd']:,.0f} "
            f"({s['saving_vs_static_peak'] * 100:.1f} % saved); static mean ${s['static_mean_usd']:,.0f} with "
            f"{s['static_mean_short_windows']} short windows; schedule short windows {s['short_windows']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
