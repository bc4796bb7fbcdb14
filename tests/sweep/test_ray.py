"""The same grid on the local executor and on a local Ray instance gives equal rows and byte-identical plan files;
windowed simulation on Ray equals it on the local pool. Skipped where Ray is not installed (pip install
'hetplan[ray]'); CI installs it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from hetplan import api
from hetplan.cli.app import loopback_only
from tests.conftest import EXAMPLES, FIXTURES
from tests.sweep.helpers import plan_files, read_rows, sweep_stopped_by_sigterm, write_grid

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    loopback_only()  # this machine's Ray listens on 127.0.0.1 only
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_a_grid_gives_equal_rows_on_local_and_on_ray(tmp_path, small, local_ray):
    grid = write_grid(tmp_path)
    local = api.sweep(grid, tmp_path / "local", executor="local", workers=2, catalog=small)
    on_ray = api.sweep(grid, tmp_path / "ray", executor="ray", catalog=small)
    assert on_ray["executor"].startswith("ray") and on_ray["counts"] == local["counts"]
    assert read_rows(tmp_path / "ray" / "results.csv") == read_rows(tmp_path / "local" / "results.csv")
    assert plan_files(tmp_path / "ray") == plan_files(tmp_path / "local")
    # ray_files="shared": the workers read the trace from its path (the catalog still travels by object store)
    shared = api.sweep(grid, tmp_path / "shared", executor="ray", ray_files="shared", catalog=small)
    assert read_rows(tmp_path / "shared" / "results.csv") == read_rows(tmp_path / "local" / "results.csv")
    assert shared["counts"] == local["counts"]


def test_windowed_simulation_on_ray_equals_the_local_pool(local_ray):
    from hetplan.plan.doc import load_plan
    from hetplan.sim.run import SimRequest
    from hetplan.workload.readers import read_stream

    plan = load_plan(FIXTURES / "plan_example_a.json")
    req = SimRequest(plan, read_stream([str(EXAMPLES / "data" / "azure_conv_15min.csv")], None))
    on_ray = api.simulate_windowed(req, 4, 60.0, executor="ray")
    local = api.simulate_windowed(req, 4, 60.0, executor="local", workers=2)
    for doc in (on_ray, local):
        for w in doc["windowed"]["per_window"]:
            w.pop("wall_s")
        doc["windowed"].pop("executor")
    assert on_ray == local


def test_sigterm_stops_a_ray_sweep_cleanly(tmp_path, small_catalog):
    """ray.init replaces SIGTERM's handler with sys.exit: a Ray sweep stopped by SIGTERM died without a table,
    report or summary. Now it writes the finished cases, marked incomplete, and exits 143. Its own Ray instance
    (not the module's), started by the command as a user's would be."""
    pytest.importorskip("ray")
    code, err = sweep_stopped_by_sigterm(tmp_path, small_catalog, "--executor", "ray", "--workers", "2")
    assert code == 143, err
    assert "sweep incomplete: stopped by SIGTERM" in " ".join(err.split()) and "Traceback" not in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["incomplete"] is True and summary["notes"][0].startswith("incomplete: stopped by SIGTERM")
