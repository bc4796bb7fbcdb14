"""CPU seconds of starting the CLI: ``hetplan --help`` and ``hetplan catalog gpus`` (target: 0.3 s each).

Each command runs ``--repeat`` times in a fresh process (stdout and stderr to a pipe); the script prints the
fastest and the median user+system CPU time of the child. CPU time, not wall time, so other load on the machine
matters less (it still matters some: shared caches and cores). The CLI keeps numpy, pandas, the solvers,
matplotlib and jsonschema out of its start-up (tests/cli/test_structure.py checks that); this measures the rest.

    python benchmarks/cli_startup.py [--repeat 7] [--python PYTHON] [--cache-bytecode]

``--python`` runs ``PYTHON -c 'from hetplan.cli.main import main; main()'`` instead of the ``hetplan`` script
found on PATH (e.g. to compare two checkouts with PYTHONPATH; run it outside the checkout). With
PYTHONDONTWRITEBYTECODE set, hetplan's own modules are compiled again on every start (about 0.04 s here);
``--cache-bytecode`` lets Python keep their bytecode in a temporary folder, as an installed wheel has it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

COMMANDS = (("--help",), ("catalog", "gpus"))


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of ``argv`` (a child process, waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per command (default 7)")
    parser.add_argument("--python", help="run the CLI with this Python instead of the hetplan script on PATH")
    parser.add_argument("--cache-bytecode", action="store_true", help="keep compiled bytecode between runs")
    args = parser.parse_args()
    env = dict(os.environ, COLUMNS="120")
    if args.cache_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="hetplan-pycache-")
    cached = "PYTHONDONTWRITEBYTECODE" not in env
    if args.python:
        base = [args.python, "-c", "from hetplan.cli.main import main; main()"]
    else:
        script = shutil.which("hetplan")
        if script is None:
            raise SystemExit("no 'hetplan' on PATH: pip install -e . (or pass --python)")
        base = [script]
    for cmd in COMMANDS:  # warm the file cache (and write bytecode, when it is kept) first
        cpu_seconds(base + list(cmd), env)
    print(
        f"{'command':<22} {'fastest s':>10} {'median s':>10}  (CPU, user+system, {args.repeat} runs, "
        f"bytecode {'cached' if cached else 'compiled each run'}; load average {os.getloadavg()[0]:.1f})"
    )
    for cmd in COMMANDS:
        runs = [cpu_seconds(base + list(cmd), env) for _ in range(args.repeat)]
        print(f"{'hetplan ' + ' '.join(cmd):<22} {min(runs):>10.3f} {statistics.median(runs):>10.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
