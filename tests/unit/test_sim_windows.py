"""``simulate --windows``: a trace split into time windows with warm-up and merged matches one long run within the
tolerance stated in hetplan/sim/windows.py, and an overloaded run that the warm-up cannot reproduce is warned about.

Example (a)'s plan on its own 15-minute Azure conversation trace (4,424 requests), 4 windows, 60 s warm-up.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.executors import LocalExecutor
from hetplan.plan.doc import load_plan
from hetplan.sim.run import SimRequest, simulation
from hetplan.sim.windows import simulate_windowed, split
from hetplan.workload.readers import read_stream
from tests.conftest import EXAMPLES, FIXTURES

PLAN = FIXTURES / "plan_example_a.json"
TRACE = EXAMPLES / "data" / "azure_conv_15min.csv"
#: The tolerance of hetplan/sim/windows.py: attainment (absolute), goodput and latency statistics (relative).
ATTAINMENT, GOODPUT, LATENCY = 0.005, 0.01, 0.02


def _request(policy: str = "fcfs", scale: float = 1.0) -> SimRequest:
    return SimRequest(load_plan(PLAN), read_stream([str(TRACE)], None), policy=policy, rate_scale=scale)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fcfs", "cascade"])
def test_windowed_metrics_match_one_run_within_the_stated_tolerance(policy):
    req = _request(policy, 0.8)  # example (a)'s plan now holds 93.5 % at the trace rate
    one = simulation(req).to_doc()
    split_run = simulate_windowed(req, 4, 60.0, LocalExecutor(2))
    assert one["attainment"]["joint"] > 0.95, "the tolerance is stated for a deployment that is not overloaded"
    for key in ("requests", "finished", "dropped", "dropped_over_context", "unfinished"):
        assert split_run[key] == one[key], key
    for dim in ("joint", "ttft", "tpot"):
        assert abs(split_run["attainment"][dim] - one["attainment"][dim]) <= ATTAINMENT, dim
    assert split_run["goodput_req_per_s"] == pytest.approx(one["goodput_req_per_s"], rel=GOODPUT)
    for metric in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        for stat in ("mean", "p50", "p90", "p99"):
            assert split_run[metric][stat] == pytest.approx(one[metric][stat], rel=LATENCY), (metric, stat)
    assert split_run["warnings"] == one["warnings"] == []
    w = split_run["windowed"]
    assert w["windows"] == 4 and sum(x["requests"] for x in w["per_window"]) == one["requests"]
    assert all(x["warmup_requests"] > 0 for x in w["per_window"][1:])
    # iterations are counted once: each belongs to the window in which it ended
    assert split_run["counters"]["iterations"] == pytest.approx(one["counters"]["iterations"], rel=LATENCY)


@pytest.mark.slow
def test_an_overloaded_run_the_warm_up_cannot_reproduce_is_warned_about():
    req = _request("fcfs", 2.0)
    doc = simulate_windowed(req, 4, 60.0, LocalExecutor(1))
    assert doc["attainment"]["joint"] < 0.2
    assert any("the warm-up did not reach the state of one long run" in w for w in doc["warnings"])


def test_windows_cover_the_stream_once_and_warm_ups_reach_back():
    stream = read_stream([str(FIXTURES / "azure_conv_200.csv")], None)
    wins = split(stream, 3, 5.0)
    assert [w.own_from for w in wins][0] == 0 and wins[-1].own_to == stream.n
    assert all(a.own_to == b.own_from for a, b in zip(wins, wins[1:], strict=False))
    assert wins[0].run_from == 0 and all(w.run_from < w.own_from for w in wins[1:])
    for w in wins[1:]:
        assert stream.arrival_s[w.run_from] >= w.lo_s - 5.0


def test_simulate_windows_flags():
    runner = CliRunner()
    base = ["simulate", str(PLAN), "--trace", str(FIXTURES / "azure_conv_200.csv")]
    r = runner.invoke(app, base + ["--windows", "2", "--warmup", "5s", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert '"windowed"' in r.stdout
    for extra, message in (
        (["--warmup", "30s"], "--warmup is for --windows"),
        (["--executor", "ray"], "--executor is for --windows"),
        (["--windows", "2", "--find-capacity"], "--windows does not apply to --find-capacity"),
        (["--windows", "0"], "--windows must be 1..1024"),
        (["--windows", "2", "--warmup", "30"], "warmup: '30' has no unit"),
        (["--windows", "2", "--executor", "local", "--ray-address", "auto"], "--ray-address is for --executor ray"),
    ):
        bad = runner.invoke(app, base + extra)
        assert bad.exit_code == 2 and message in bad.output, (extra, bad.output)
