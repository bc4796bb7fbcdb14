"""A full disk (an injected ``OSError(ENOSPC)``) for every command that writes a file: an ``Error:`` line, exit 1,
no traceback, and nothing left behind — no output, no temporary file, no folder the command made, and for
commands that write several files none of the ones written before the failing one.

The error is injected in :func:`hetplan.io.atomic_target`'s ``os.fsync`` (the N-th call fails), the step every
output goes through; a writer that bypassed the atomic writer would not fail here, and its test would.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import hetplan.io as hio
from hetplan.cli.main import app
from tests.conftest import FIXTURES

SCENARIO = """\
schema_version: 1
kind: scenario
name: tiny-8b
model: Llama-3-8B
workload: {synthetic: {class: balanced, rate_per_s: 2, requests: 200}}
slo: {ttft: 2s, tpot: 100ms, percentile: p90}
gpus: [H100, A100-80GB]
cloud: aws
tp: [1, 2]
max_ratio: 2
"""
GRID = """\
schema_version: 1
kind: sweep
name: tiny
base: scenario.yaml
cases:
  - gpu_sets: [H100]
axes:
  goodputs: [1, 2]
verify: false
analysis: false
"""
FAST_PLAN = ["plan", "{in}/scenario.yaml", "--no-analysis", "--no-verify"]

# name: (command line with {in}/{out} folders, how many files it writes, marks)
WRITERS: dict[str, tuple[list[str], int, tuple[pytest.MarkDecorator, ...]]] = {
    "plan --out": ([*FAST_PLAN, "--out", "{out}/sub/p.json"], 1, ()),
    "plan --out yaml": ([*FAST_PLAN, "--out", "{out}/p.yaml"], 1, ()),
    "plan --emit": ([*FAST_PLAN, "--emit", "{out}/deploy"], 3, ()),
    "autoscale --out": (["autoscale", "{in}/scenario.yaml", "--diurnal", "1,4,1", "--out", "{out}/s.csv"], 1,
                        (pytest.mark.slow,)),
    "emit": (["emit", "{in}/plan.json", "--out", "{out}/deploy"], 3, ()),
    "simulate --out": (["simulate", "{in}/plan.json", "--trace", "{in}/trace.csv", "--max-requests", "50",
                        "--out", "{out}/m.json"], 1, ()),
    "simulate --concurrency --out": (["simulate", "{in}/plan.json", "--concurrency", "4", "--isl", "100", "--osl",
                                      "10", "--requests", "20", "--out", "{out}/c.yaml"], 1, ()),
    "calibrate": (["calibrate", "{in}/plan.json", "--trace", "{in}/trace.csv", "--out", "{out}/k.json",
                   "--router-config", "{out}/router.yaml"], 2, (pytest.mark.slow,)),
    "report --out": (["report", "{in}/plan.json", "--format", "json", "--out", "{out}/r.json"], 1, ()),
    "report --out html": (["report", "{in}/plan.json", "--format", "html", "--out", "{out}/r.html"], 1, ()),
    "gate --update-baseline": (["gate", "{in}/scenario.yaml", "--baseline", "{out}/baseline.json",
                                "--update-baseline"], 1, ()),
    "sweep": (["sweep", "{in}/grid.yaml", "--out", "{out}/sweep", "--workers", "1"], 3, (pytest.mark.slow,)),
    "profile merge": (["profile", "merge", "{in}/h100.yaml", "--out", "{out}/catalog"], 3, ()),
    "profile fit": (["profile", "fit", "--model", "Llama-3-8B", "--synthetic", "balanced", "--gpus",
                     "H100,A100-80GB", "--out", "{out}/fit.yaml"], 1, ()),
    "profile --emit-job": (["profile", "--emit-job", "--gpu-label", "NVIDIA-H100-80GB-HBM3", "--gpu-label",
                            "NVIDIA-A100-SXM4-80GB", "--out", "{out}/jobs"], 2, ()),
}  # fmt: skip

CASES = [
    pytest.param(name, at, marks=marks, id=f"{name} (write {at})")
    for name, (_, files, marks) in WRITERS.items()
    for at in sorted({1, files})  # the first file, and the last of several (the others are written by then)
]


def _inputs(folder: Path) -> Path:
    from tests.profiler.helpers import write_profile

    folder.mkdir()
    (folder / "scenario.yaml").write_text(SCENARIO, encoding="utf-8")
    (folder / "grid.yaml").write_text(GRID, encoding="utf-8")
    shutil.copy(FIXTURES / "plan_example_a.json", folder / "plan.json")
    shutil.copy(FIXTURES / "azure_conv_200.csv", folder / "trace.csv")
    write_profile(folder / "h100.yaml", gpu="H100")
    return folder


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "fail_at"), CASES)
def test_a_full_disk_is_exit_1_and_leaves_nothing(name, fail_at, tmp_path, monkeypatch):
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    before = _tree(tmp_path)
    args = [a.format(**{"in": inputs, "out": out}) for a in WRITERS[name][0]]
    real_fsync = os.fsync
    calls: list[int] = []

    def full_disk(fd: int) -> None:
        calls.append(fd)
        if len(calls) == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(hio.os, "fsync", full_disk)
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert len(calls) >= fail_at, f"{name} wrote {len(calls)} file(s) through the atomic writer: {res.output}"
    assert res.exit_code == 1, res.output
    assert "Error: cannot write" in res.output and "No space left on device" in res.output, res.output
    assert "Traceback" not in res.output
    assert _tree(tmp_path) == before, f"{name} left files behind"


STDOUT_COMMANDS = {
    "version": ["--version"],
    "help": ["report", "--help"],
    "catalog": ["catalog", "gpus"],
    "catalog json": ["catalog", "models", "--json"],
    "estimate": ["estimate", "--model", "Llama-3-8B", "--gpu", "H100"],
    "report": ["report", str(FIXTURES / "plan_example_a.json")],
    "report json": ["report", str(FIXTURES / "plan_example_a.json"), "--format", "json"],
    "simulate": [
        "simulate",
        str(FIXTURES / "plan_two_combos.json"),
        "--trace",
        str(FIXTURES / "azure_conv_200.csv"),
        "--max-requests",
        "20",
    ],  # fmt: skip
}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("name", sorted(STDOUT_COMMANDS))
def test_stdout_on_a_full_device_is_one_error_line(name):
    """``hetplan ... > /dev/full``: stdout cannot be written. Every command exits 1 with one Error line on stderr
    (it gave an OSError traceback: a write that fails is neither a closed pipe nor a file hetplan writes)."""
    import subprocess
    import sys

    code = "import sys; from hetplan.cli.entry import main; sys.argv[0] = 'hetplan'; main()"
    with open("/dev/full", "w") as full:
        run = subprocess.run([sys.executable, "-c", code, *STDOUT_COMMANDS[name]], stdout=full, stderr=subprocess.PIPE,
                             text=True, timeout=120, env={**os.environ, "COLUMNS": "100"})  # fmt: skip
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: cannot write the output to stdout: No space left on device"), run.stderr
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr
