"""Reliability figures: run the property-based bad-input tests (tests/fuzz) with the long ``fuzz`` profile and
count, per command, the inputs tried, tracebacks, undocumented exit codes (anything but 0, 1, 2) and failures of
any other check (a missing ``Error`` line, an output left behind by a failed command).

    python benchmarks/fuzz_report.py [--seed 1] [--profile fuzz]

Prints one row per command and the totals; exits 1 when any check failed (pytest's failures are listed too).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="Hypothesis seed (default 1)")
    ap.add_argument("--profile", default="fuzz", help="Hypothesis profile: fuzz (600 examples a test) or ci (25)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "fuzz.jsonl"
        env = dict(os.environ, HETPLAN_FUZZ_LOG=str(log))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/fuzz",
               f"--hypothesis-profile={args.profile}", f"--hypothesis-seed={args.seed}"]  # fmt: skip
        start = time.perf_counter()
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    tried: Counter[str] = Counter(r["command"] for r in rows)
    tracebacks: Counter[str] = Counter(r["command"] for r in rows if r["traceback"])
    wrong: Counter[str] = Counter(r["command"] for r in rows if r["exit"] not in (0, 1, 2))
    exits: Counter[int] = Counter(r["exit"] for r in rows)
    print(f"{'command':<10}{'inputs':>8}{'tracebacks':>12}{'undocumented exit':>19}")
    for command in sorted(tried):
        print(f"{command:<10}{tried[command]:>8}{tracebacks[command]:>12}{wrong[command]:>19}")
    print(f"{'total':<10}{sum(tried.values()):>8}{sum(tracebacks.values()):>12}{sum(wrong.values()):>19}")
    print(f"exit codes: {dict(sorted(exits.items()))}; {elapsed:.0f} s, seed {args.seed}, profile {args.profile}")
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    print(f"pytest: {summary}")
    if res.returncode:
        failed = [line for line in res.stdout.splitlines() if line.startswith(("FAILED", "E   AssertionError"))]
        print("\n".join(failed[:10]))
    return 1 if res.returncode else 0


if __name__ == "__main__":
    raise SystemExit(main())
