"""Running sweeps on the local executor: error rows, identical rows across worker counts and runs, --resume,
Ctrl-C, the output files and the command's messages."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hetplan import api
from hetplan.cli.main import app
from hetplan.sweep import table
from hetplan.sweep.run import SweepInterrupted
from tests.conftest import EXAMPLES
from tests.sweep.helpers import plan_files, read_rows, sweep_stopped_by_sigterm, write_grid

pytestmark = pytest.mark.slow
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args):
    return CliRunner().invoke(app, list(map(str, args)), env=ENV)


def test_failed_cases_are_rows_and_rows_do_not_depend_on_the_worker_count(tmp_path, small):
    grid = write_grid(tmp_path)
    one = api.sweep(grid, tmp_path / "one", workers=1, catalog=small)
    two = api.sweep(grid, tmp_path / "two", workers=2, catalog=small)
    assert one["counts"] == two["counts"] == {"ok": 6, "infeasible": 0, "error": 2}
    rows = read_rows(tmp_path / "one" / "results.csv")
    assert rows == read_rows(tmp_path / "two" / "results.csv")
    assert plan_files(tmp_path / "one") == plan_files(tmp_path / "two")
    assert [r["case_id"] for r in rows] == [f"case-{i:03d}" for i in range(8)]
    failed = [r for r in rows if r["status"] == "error"]
    assert [r["axes"] for r in failed] == ["gpu_sets=H100+L4; goodputs=1; clouds=lambda",
                                           "gpu_sets=H100+L4; goodputs=3; clouds=lambda"]  # fmt: skip
    assert all(r["error"].startswith("no on-demand price for L4 on lambda") for r in failed)
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(r["verdict"] in ("held", "missed") and r["sim_attainment"] for r in ok), "each plan was simulated"
    assert all(r["purchases"] and r["chosen_units"] and float(r["usd_per_hour"]) > 0 for r in ok)
    assert {r["priced_by"] for r in ok} == {"aws", "lambda"}
    assert sorted(p.name for p in (tmp_path / "one" / "plans").iterdir()) == [f"case-{i:03d}.json" for i in
                                                                             (0, 1, 2, 3, 4, 6)]  # fmt: skip
    doc = json.loads((tmp_path / "one" / "plans" / "case-000.json").read_text())
    assert doc["sweep_case"]["id"] == "case-000" and "verification" in doc
    assert api.load_plan(tmp_path / "one" / "plans" / "case-000.json").total_usd_per_hour == doc["total_usd_per_hour"]


def test_outputs_resume_and_no_clobber(tmp_path, small):
    grid = write_grid(tmp_path)
    out = tmp_path / "out"
    first = api.sweep(grid, out, workers=2, catalog=small)
    for name in ("results.csv", "results.parquet", "report.md", "report.html", "summary.json"):
        assert (out / name).is_file(), name
    assert json.loads((out / "summary.json").read_text()) == first
    report = (out / "report.md").read_text()
    assert "## Cheapest plan per group" in report and "## Pareto front" in report and "## Failed cases" in report
    assert "<svg" in (out / "report.html").read_text()
    rows = read_rows(out / "results.csv")
    r = invoke("sweep", grid, "--out", out)
    assert r.exit_code == 2 and "already exists" in r.output and "--resume" in r.output
    again = api.sweep(grid, out, resume=True, catalog=small)
    assert again["resumed"] == 6 and again["ran"] == 2, "the failed cases run again; the planned ones are reused"
    assert read_rows(out / "results.csv") == rows
    # a changed input is not reused: the case with goodput 3 is planned afresh
    text = grid.read_text().replace("goodputs: [1, 3]", "goodputs: [1, 4]")
    grid.write_text(text, encoding="utf-8")
    changed = api.sweep(grid, out, resume=True, catalog=small)
    assert changed["resumed"] == 3 and changed["ran"] == 5


def test_parquet_table_matches_the_csv_and_is_skipped_with_a_note_without_pyarrow(tmp_path, small,
                                                                                  monkeypatch):  # fmt: skip
    pq = pytest.importorskip("pyarrow.parquet")
    grid = write_grid(tmp_path)
    api.sweep(grid, tmp_path / "a", workers=1, catalog=small)
    parquet = pq.read_table(tmp_path / "a" / "results.parquet").to_pylist()
    assert [r["case_id"] for r in parquet] == [r["case_id"] for r in read_rows(tmp_path / "a" / "results.csv")]
    assert table.csv_text([table.SweepRow(**r) for r in parquet]) == (tmp_path / "a" / "results.csv").read_text()
    monkeypatch.setattr("hetplan.sweep.outputs.parquet_available", lambda: False)
    summary = api.sweep(grid, tmp_path / "b", workers=1, catalog=small)
    assert not (tmp_path / "b" / "results.parquet").exists()
    assert summary["notes"] == [
        "results.parquet not written: pyarrow is not installed (pip install 'hetplan[parquet]')"
    ]


def test_ctrl_c_keeps_the_finished_rows_and_resume_finishes_the_rest(tmp_path, small):
    grid = write_grid(tmp_path)
    full = api.sweep(grid, tmp_path / "full", workers=1, catalog=small)
    seen = []

    def stop_after_three(done, total, row):
        if row is not None:
            seen.append(row["case_id"])
            if len(seen) == 3:
                raise KeyboardInterrupt

    with pytest.raises(SweepInterrupted) as err:
        api.sweep(grid, tmp_path / "cut", workers=2, progress=stop_after_three, catalog=small)
    assert err.value.exit_code == 130 and "3 of 8 cases finished" in err.value.what
    kept = read_rows(tmp_path / "cut" / "results.csv")
    assert [r["case_id"] for r in kept] == sorted(seen)
    summary = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["finished"] == 3
    done = api.sweep(grid, tmp_path / "cut", workers=2, resume=True, catalog=small)
    assert done["finished"] == 8 and done["ran"] == 8 - sum(r["status"] == "ok" for r in kept)
    assert read_rows(tmp_path / "cut" / "results.csv") == read_rows(tmp_path / "full" / "results.csv")
    assert full["counts"] == done["counts"]


def test_sweep_command_prints_the_cheapest_plans_and_exits_1_on_failed_cases(tmp_path, small_catalog):
    grid = write_grid(tmp_path)
    r = invoke("sweep", grid, "--out", tmp_path / "out", "--workers", "1")
    assert r.exit_code == 1, r.output
    assert "Cheapest plan per group" in r.stdout and "goodputs   cheapest" in r.stdout
    assert "error: case-005 (gpu_sets=H100+L4; goodputs=1; clouds=lambda): no on-demand price for L4" in r.output
    assert "ran 8 cases in" in r.output and "plans/: 6 plan files" in r.output
    j = invoke("sweep", grid, "--out", tmp_path / "out", "--resume", "--json")
    summary = json.loads(j.stdout)
    assert summary["resumed"] == 6 and summary["counts"]["error"] == 2
    assert invoke("sweep", grid, "--out", tmp_path / "x", "--executor", "slurm").exit_code == 2
    bad = invoke("sweep", grid, "--out", tmp_path / "y", "--ray-address", "auto")
    assert bad.exit_code == 2 and "--ray-address is for --executor ray" in bad.output


def test_fleet_review_finishes_on_the_local_executor(tmp_path):
    """Acceptance: the bundled grid (both examples x 3 goodputs x 2 SLO tiers x 2 clouds) on 2 workers."""
    summary = api.sweep(EXAMPLES / "sweeps" / "fleet-review.yaml", tmp_path / "review", workers=2)
    assert summary["finished"] == 24 and summary["counts"]["error"] == 0
    rows = read_rows(tmp_path / "review" / "results.csv")
    assert {r["scenario"] for r in rows} == {"llama3-70b-azure-conv", "cauchy-h800-a800-h20"}
    b_rows = [r for r in rows if r["scenario"] == "cauchy-h800-a800-h20"]
    # (b)'s 96 owned GPUs cannot hold the highest targets of its bursty trace: those rows are infeasible, with why
    assert {r["priced_by"] for r in b_rows if r["status"] != "infeasible"} == {"price file"}
    assert all(r["error"] for r in b_rows if r["status"] == "infeasible")
    assert len(summary["groups"]) == 12
    assert (tmp_path / "review" / "report.html").is_file()


def test_sigterm_to_the_process_group_stops_the_sweep_cleanly(tmp_path, small_catalog):
    """SIGTERM (to the driver and its pool workers) printed a traceback from the pool's thread and left no table,
    report or summary; now the finished cases are written and marked incomplete, exit 143."""
    code, err = sweep_stopped_by_sigterm(tmp_path, small_catalog, "--workers", "2")
    assert code == 143, err
    assert "Traceback" not in err and "sweep incomplete: stopped by SIGTERM" in " ".join(err.split())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["incomplete"] is True and summary["interrupted"] is True and summary["finished"] < 8
    assert summary["notes"][0].startswith("incomplete: stopped by SIGTERM after")
    assert len(read_rows(tmp_path / "out" / "results.csv")) == summary["finished"]


def test_sigterm_in_process_writes_the_finished_cases_and_restores_the_handlers(tmp_path, small):
    import os
    import signal

    class Killed(BaseException):
        pass

    def handler(signum, frame):  # without the sweep's own handling, the test fails here instead of dying
        raise Killed

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        seen = []

        def term_after_two(done, total, row):
            if row is not None:
                seen.append(row["case_id"])
                if len(seen) == 2:
                    os.kill(os.getpid(), signal.SIGTERM)

        with pytest.raises(SweepInterrupted) as err:
            api.sweep(write_grid(tmp_path), tmp_path / "cut", workers=1, progress=term_after_two, catalog=small)
        assert err.value.exit_code == 143 and "stopped by SIGTERM after 2 of 8" in err.value.what
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary = json.loads((tmp_path / "cut" / "summary.json").read_text())
    assert summary["incomplete"] is True and summary["finished"] == 2


def test_a_read_only_out_folder_fails_before_any_case_runs(tmp_path, small_catalog, monkeypatch):
    """A sweep into a folder it cannot create or write crashed with a PermissionError traceback (after running its
    first case); now one Error line, exit 1, before any case, and nothing left."""
    import errno
    from pathlib import Path

    grid = write_grid(tmp_path)
    real_mkdir = Path.mkdir
    ro = tmp_path / "ro"

    def mkdir(self, *args, **kwargs):
        if self == ro or ro in self.parents:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    res = invoke("sweep", grid, "--out", ro / "out", "--workers", "1")
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "cannot write the sweep's outputs" in res.output and "Read-only file system" in res.output
    assert "case-" not in res.output and not ro.exists()


def test_a_sweep_stopped_by_its_timeout_writes_the_finished_cases_marked_incomplete(tmp_path, small_catalog):
    """--timeout stopped a sweep with no summary.json and no word that it was incomplete; now the cases finished
    before the deadline are written, marked incomplete, and the command still exits 124."""
    grid = write_grid(tmp_path)
    r = invoke("sweep", grid, "--out", tmp_path / "out", "--workers", "1", "--timeout", "1")
    assert r.exit_code == 124, r.output
    assert "stopped after --timeout 1" in " ".join(r.output.split()) and "Traceback" not in r.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["incomplete"] is True and summary["finished"] < 8
    assert summary["notes"][0].startswith("incomplete: stopped by the command's --timeout after")
    assert len(read_rows(tmp_path / "out" / "results.csv")) == summary["finished"]
