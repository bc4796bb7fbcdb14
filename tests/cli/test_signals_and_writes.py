"""Ctrl-C, SIGTERM and failed writes: exit 130/143 (or 1) with one line on stderr, no traceback, nothing half-written.

Each signal is raised from inside the command at a fixed point (a patched function sends it to the process), so
the tests are deterministic: the command is in the middle of solving, simulating or writing files when it lands.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, FIXTURES

pytestmark = pytest.mark.e2e

PLAN = FIXTURES / "plan_example_a.json"
TRACE = FIXTURES / "azure_conv_200.csv"

# Patches applied before the CLI runs: each sends SIGNAL to this process at a point where work is under way.
INJECT = {
    "solve": """
import hetplan.planning.solve as solve
real = solve.SOLVERS["cauchy"]
def boom(*a, **k):
    os.kill(os.getpid(), SIGNAL)
    return real(*a, **k)
solve.SOLVERS["cauchy"] = boom
""",
    "simulate": """
import hetplan.sim.run as run
real = run.run_measured  # every simulation of a plan runs through it
def boom(*a, **k):
    os.kill(os.getpid(), SIGNAL)
    return real(*a, **k)
run.run_measured = boom
""",
    "emit": """
import hetplan.emit.writer as writer
real = writer.write_atomic
calls = []
def boom(*a, **k):
    calls.append(1)
    if len(calls) == 4:  # three files are already in place
        os.kill(os.getpid(), SIGNAL)
    return real(*a, **k)
writer.write_atomic = boom
""",
}


def run_cli(inject: str, signum: int, args: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = f"import os, signal\nSIGNAL = {signum}\n{INJECT[inject]}\nfrom hetplan.cli.main import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*"))


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_plan_stopped_while_solving_writes_nothing(tmp_path, signame, code):
    import signal

    res = run_cli("solve", getattr(signal, signame), ["plan", EXAMPLES / "llama3-70b-azure-conv.yaml", "--out",
                                                     tmp_path / "plan.json", "--no-analysis"], tmp_path)  # fmt: skip
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr and "Interrupted" in res.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_simulate_stopped_mid_run_writes_nothing(tmp_path, signame, code):
    import signal

    res = run_cli("simulate", getattr(signal, signame),
                  ["simulate", PLAN, "--trace", TRACE, "--out", tmp_path / "metrics.json"], tmp_path)  # fmt: skip
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_emit_stopped_after_three_files_leaves_no_partial_folder(tmp_path, signame, code):
    import signal

    res = run_cli("emit", getattr(signal, signame), ["emit", PLAN, "--out", tmp_path / "deploy"], tmp_path)
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr
    assert leftovers(tmp_path) == []


def test_emit_on_a_full_disk_exits_1_and_leaves_nothing(tmp_path, monkeypatch):
    """ENOSPC on the fifth file: an Error line, exit 1, and the four files already written are removed."""
    import errno
    import os

    from typer.testing import CliRunner

    import hetplan.io as hio
    from hetplan.cli.main import app

    real_replace = os.replace
    calls: list[str] = []

    def full_disk(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(hio.os, "replace", full_disk)
    res = CliRunner().invoke(app, ["emit", str(PLAN), "--out", str(tmp_path / "deploy")])
    assert res.exit_code == 1, res.output
    assert "Error: cannot write" in res.output and "No space left on device" in res.output
    assert leftovers(tmp_path) == []


def test_a_read_only_folder_is_an_error_not_a_traceback(tmp_path, monkeypatch):
    """EACCES on creating the temporary file (what a read-only folder gives; injected, since root may write
    anywhere): an Error line, exit 1, nothing written."""
    import errno

    from typer.testing import CliRunner

    import hetplan.io as hio
    from hetplan.cli.main import app

    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(hio.tempfile, "mkstemp", read_only)
    res = CliRunner().invoke(app, ["simulate", str(PLAN), "--trace", str(TRACE), "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 1 and "Error: cannot write" in res.output and "Permission denied" in res.output
    assert leftovers(tmp_path) == []


HARD_SOLVE = """
import random, sys
import hetplan.planning.solve as solve
from hetplan.solvers.milp_covering import solve_covering
def hard(*a, **k):
    rng = random.Random(0)
    a = [[rng.randint(0, 99) for _ in range(30)] for _ in range(4)]  # market split: HiGHS runs to its time limit
    h = [sum(r) // 2 for r in a]
    print("solving", file=sys.stderr, flush=True)
    solve_covering([1.0] * 30, a[0], h[0], [a[0], *a[1:], *[[-x for x in r] for r in a[1:]]],
                   [h[0], *h[1:], *[-x for x in h[1:]]], upper=[1] * 30, time_limit_s=60, second_stage_epsilon=None)
    raise AssertionError("the solve was not interrupted")
solve.SOLVERS["cauchy"] = hard
from hetplan.cli.main import main
main()
"""


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_stops_a_highs_solve_within_a_second(tmp_path, signame, code):
    """The signal lands while HiGHS is inside a market-split MIP it does not finish in 60 s (PuLP's plain
    ``Highs.run()`` held Ctrl-C off until the solve ended): the command exits within a second of it, with
    nothing written (benchmarks/highs_interrupt.py measures the same)."""
    import signal
    import time

    args = ["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--gpus", "H100",
            "--out", tmp_path / "plan.json", "--no-analysis", "--no-verify"]  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", HARD_SOLVE, *map(str, args)], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert child.stderr is not None
    while "solving" not in child.stderr.readline():
        assert child.poll() is None, child.communicate()
    time.sleep(0.5)  # HiGHS is solving
    sent = time.perf_counter()
    child.send_signal(getattr(signal, signame))
    _, stderr = child.communicate(timeout=60)
    took = time.perf_counter() - sent
    assert child.returncode == code, stderr
    assert "Traceback" not in stderr and "Interrupted" in stderr
    assert took < 3.0, f"{took:.2f} s from {signame} to exit"  # the solve alone runs 60 s; loaded CI room
    assert leftovers(tmp_path) == []


STARTUP = """
import os, signal, sys
class SignalOnImport:  # the signal lands while the CLI's modules are being imported
    def find_spec(self, name, path=None, target=None):
        if name == "hetplan.cli.main":
            os.kill(os.getpid(), SIGNAL)
        return None
sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["hetplan", "catalog", "gpus"]
from hetplan.cli.entry import main
main()
"""


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_start_up_is_not_a_traceback(tmp_path, signame, code):
    import signal

    script = f"SIGNAL = {int(getattr(signal, signame))}\n{STARTUP}"
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr and "Interrupted" in res.stderr and "while starting" in res.stderr
    assert res.stdout == "" and leftovers(tmp_path) == []
