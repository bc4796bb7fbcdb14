"""Reliability figures: run the property-based tests (tests/fuzz: every command, bad and valid inputs) with the
long ``fuzz`` profile (or ``--profile reliability``) and count, per command, the inputs tried, tracebacks,
undocumented exit codes (anything but 0, 1, 2 and --timeout's 124), failed runs without an ``Error`` line, outputs
or temporary files left behind by a failed command (partial or clobbered files), and hangs (one input running past
``HANG_S``, 60 s). A cost gate that fails (exit 1, "gate FAIL", the report written on purpose) is a verdict,
counted in its own column.

    python benchmarks/fuzz_report.py [--seed 1] [--profile fuzz|reliability|ci] [-k PATTERN]

Prints one row per command and the totals (docs/reliability.md holds a run); exits 1 when any check failed
(pytest's failures are listed too).
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
    ap.add_argument("-k", default=None, help="only the tests pytest -k selects")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "fuzz.jsonl"
        env = dict(os.environ, HETPLAN_FUZZ_LOG=str(log))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/fuzz",
               f"--hypothesis-profile={args.profile}", f"--hypothesis-seed={args.seed}"]  # fmt: skip
        if args.k:
            cmd += ["-k", args.k]
        start = time.perf_counter()
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    sys.path.insert(0, str(ROOT))
    from tests.fuzz.test_invalid_inputs import HANG_S

    checks = {
        "inputs": lambda r: True,
        "exit 0": lambda r: r["exit"] == 0,
        "exit 1": lambda r: r["exit"] == 1,
        "exit 2": lambda r: r["exit"] == 2,
        "of which gate FAIL": lambda r: r.get("gate_fail", False),
        "tracebacks": lambda r: r["traceback"],
        "undocumented exit": lambda r: r["exit"] not in (0, 1, 2, 124),
        "no Error line": lambda r: r.get("no_error_line", False),
        "partial files": lambda r: bool(r.get("left")),
        "hangs": lambda r: r.get("seconds", 0.0) >= HANG_S,
    }
    counts = {name: Counter(r["command"] for r in rows if check(r)) for name, check in checks.items()}
    commands = sorted(counts["inputs"])
    width = max([len(c) for c in commands] + [7]) + 2
    print(f"| {'command':<{width}} | " + " | ".join(checks) + " |")
    print(f"| {'-' * width} | " + " | ".join("-" * len(name) for name in checks) + " |")
    for command in [*commands, "total"]:
        cells = [sum(c.values()) if command == "total" else c[command] for c in counts.values()]
        row = " | ".join(f"{n:>{len(name)},}" for n, name in zip(cells, checks, strict=True))
        print(f"| {command:<{width}} | {row} |")
    slowest = max(rows, key=lambda r: r.get("seconds", 0.0)) if rows else None
    if slowest is not None:
        print(f"slowest input: {slowest['command']}, {slowest['seconds']:.1f} s")
    print(f"{elapsed:.0f} s, seed {args.seed}, profile {args.profile}")
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    print(f"pytest: {summary}")
    if res.returncode:
        failed = [line for line in res.stdout.splitlines() if line.startswith(("FAILED", "E   AssertionError"))]
        print("\n".join(failed[:10]))
    return 1 if res.returncode else 0


if __name__ == "__main__":
    raise SystemExit(main())
