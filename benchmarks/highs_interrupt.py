"""How long a HiGHS solve takes to stop after Ctrl-C (SIGINT) or SIGTERM, with hetplan's solver wrapper and with
PuLP's plain HiGHS (``Highs.run()`` on the main thread, which holds off Python's signal handlers).

    python benchmarks/highs_interrupt.py [--after 2] [--repeat 3]

A child process solves a market-split MIP (Cornuejols & Dawande 1999: 4 equality rows over 30 binaries, as
covering and capacity rows), which HiGHS does not finish within its 10 s time limit, with ``hetplan.cli.main``'s
signal handlers installed; the parent sends the signal ``--after`` seconds into the solve and prints the seconds
from the signal to the solve returning and to the child's exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import random, signal, sys, time
import pulp
from hetplan.cli import main as cli_main
from hetplan.solvers import milp_covering
if sys.argv[1] == "plain":
    def _plain(t, g, presolve="on", cutoff=None, settings=None):
        return pulp.HiGHS(msg=False, timeLimit=t, gapRel=g, threads=1)
    milp_covering._solver = _plain  # solve_covering builds its solver through this name
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, cli_main._on_signal)
rng = random.Random(0)
a = [[rng.randint(0, 99) for _ in range(30)] for _ in range(4)]  # market split (Cornuejols & Dawande 1999)
h = [sum(r) // 2 for r in a]
usage = [a[0], *a[1:], *[[-x for x in r] for r in a[1:]]]
capacity = [h[0], *h[1:], *[-x for x in h[1:]]]
print("solving", flush=True)
try:
    milp_covering.solve_covering([1.0] * 30, a[0], h[0], usage, capacity, upper=[1] * 30, time_limit_s=10,
                        second_stage_epsilon=None)
except cli_main.Interrupted as exc:
    print(time.time(), flush=True)  # when the solve gave the main thread back
    sys.exit(128 + exc.signum)
sys.exit(0)
"""


def stop_latency(mode: str, signum: int, after_s: float) -> tuple[float, float, int]:
    """Seconds from sending ``signum`` to the solve returning, and to the child's exit; its exit code."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    child.stdout.readline()  # "solving": the model is being built and solved
    time.sleep(after_s)
    sent, sent_wall = time.perf_counter(), time.time()
    child.send_signal(signum)
    stopped = child.stdout.readline().strip()
    code = child.wait(timeout=60)
    exited = time.perf_counter() - sent
    return (float(stopped) - sent_wall if stopped else float("nan")), exited, code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--after", type=float, default=2.0, help="seconds into the solve to send the signal")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'solver':<10}{'signal':<9}{'median s to stop':>18}{'max':>7}{'median s to exit':>18}{'max':>7}  exits")
    for mode in ("hetplan", "plain"):
        for signum in (signal.SIGINT, signal.SIGTERM):
            runs = [stop_latency(mode, signum, args.after) for _ in range(args.repeat)]
            stop = [s for s, _, _ in runs]
            exit_s = [e for _, e, _ in runs]
            codes = sorted({c for _, _, c in runs})
            name = signal.Signals(signum).name
            print(f"{mode:<10}{name:<9}{statistics.median(stop):>18.3f}{max(stop):>7.3f}"
                  f"{statistics.median(exit_s):>18.3f}{max(exit_s):>7.3f}  {codes}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
