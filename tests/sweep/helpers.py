"""A small sweep grid over the frozen test catalog (``tests/fixtures/catalog``), written into a temporary folder."""

from __future__ import annotations

import csv
from pathlib import Path

from hetplan.sweep.table import COMPARED_NAMES
from tests.conftest import FIXTURES

SCENARIO = """\
schema_version: 1
kind: scenario
name: small-8b
model: Llama-3-8B
workload: {{path: {trace}}}
goodput_req_per_s: 2
slo: {{ttft: 1s, tpot: 60ms, percentile: p90}}
gpus: [H100, A100-80GB, L4]
cloud: aws
tp: [1, 2]
max_ratio: 4
"""

#: 2 GPU sets x 2 goodputs x 2 clouds = 8 cases; the lambda cloud prices no L4, so the [H100, L4] cases on lambda
#: fail (two error rows), and every other case is planned and simulated on the 200-request trace.
GRID = """\
schema_version: 1
kind: sweep
name: small
base: scenario.yaml
cases:
  - gpu_sets: [H100, A100-80GB]
  - gpu_sets: [H100, L4]
axes:
  goodputs: [1, 3]
  clouds: [aws, lambda]
"""


def write_grid(folder: Path, grid: str = GRID) -> Path:
    """``scenario.yaml`` and ``grid.yaml`` in ``folder``; returns the grid's path."""
    (folder / "scenario.yaml").write_text(SCENARIO.format(trace=FIXTURES / "azure_conv_200.csv"), encoding="utf-8")
    path = folder / "grid.yaml"
    path.write_text(grid, encoding="utf-8")
    return path


def read_rows(path: Path) -> list[dict[str, str]]:
    """The compared columns of a results.csv, as text."""
    with open(path, encoding="utf-8", newline="") as fh:
        return [{k: row[k] for k in COMPARED_NAMES} for row in csv.DictReader(fh)]


def plan_files(out: Path) -> dict[str, bytes]:
    """Every plan file of a sweep's output folder, by name."""
    return {p.name: p.read_bytes() for p in sorted((out / "plans").glob("*.json"))}


def sweep_stopped_by_sigterm(folder: Path, catalog: Path, *extra: str) -> tuple[int, str]:
    """Run ``hetplan sweep`` on :data:`GRID` in its own process group, send SIGTERM to the whole group once the
    first plan file is written, and return the exit code and stderr (the output folder is ``folder / "out"``)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    grid = write_grid(folder)
    code = "import sys; from hetplan.cli.entry import main; sys.argv[0] = 'hetplan'; main()"
    env = {**os.environ, "HETPLAN_CATALOG_DIR": str(catalog), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "sweep", str(grid), "--out", str(folder / "out"), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not any((folder / "out" / "plans").glob("*.json")):
        time.sleep(0.1)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # the driver and its workers, as a job runner or a terminal stops them
    _, err = proc.communicate(timeout=240)
    return proc.returncode, err
