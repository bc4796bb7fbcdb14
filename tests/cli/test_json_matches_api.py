"""The CLI's ``--json`` is the Python API's result: one function per command, no second implementation."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan import api
from hetplan.cli.main import app
from hetplan.io import to_json
from hetplan.scenario import load_scenario
from tests.conftest import EXAMPLES, FIXTURES

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
TRACE = FIXTURES / "azure_conv_200.csv"


def cli_json(*args: str | Path) -> str:
    res = runner.invoke(app, [str(a) for a in args], env=ENV)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "strategy"),
    [
        ("llama3-70b-azure-conv", "cauchy"),
        ("llama3-70b-azure-conv", "melange"),
        ("cauchy-h800-a800-h20", "cauchy"),
        ("llama3-70b-azure-conv", "homogeneous"),
    ],
)
def test_plan_json_is_the_api_plan(example, strategy):
    path = EXAMPLES / f"{example}.yaml"
    printed = cli_json("plan", path, "--strategy", strategy, "--no-analysis", "--no-verify", "--json")
    assert printed == to_json(api.to_doc(api.plan(load_scenario(path), strategy, analysis=False)))


@pytest.mark.slow
def test_verified_plan_json_is_the_api_plan_verified():
    path = EXAMPLES / "llama3-70b-azure-conv.yaml"
    printed = cli_json("plan", path, "--no-analysis", "--json")  # verified by default
    doc = json.loads(printed)
    assert doc["verification"]["status"] == "verified"
    assert printed == to_json(api.to_doc(api.plan_verified(load_scenario(path), "all", analysis=False)))


def test_estimate_json_is_the_api_estimate():
    printed = cli_json("estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--tp", "2", "--batch", "8", "--json")
    est = api.estimate("Llama-3-8B", "H100", tp=2, batch=8)
    assert json.loads(printed) == json.loads(to_json(asdict(est)))


@pytest.mark.parametrize("policy", ["fcfs", "cascade"])
def test_simulate_json_is_the_api_simulation(policy):
    from hetplan.sim.run import SimRequest
    from hetplan.workload.readers import read_stream

    plan_file = FIXTURES / "plan_example_a.json"
    printed = cli_json("simulate", plan_file, "--trace", TRACE, "--policy", policy, "--json")
    req = SimRequest(api.load_plan(plan_file), read_stream([str(TRACE)], None), policy=policy)
    assert json.loads(printed) == json.loads(to_json(api.simulate(req)))


def test_simulate_with_options_is_the_api_sim_request():
    """The flags become one SimOptions; the CLI's --json is api.simulate of api.sim_request's request."""
    from hetplan.commands.simulate import SimOptions

    plan_file = FIXTURES / "plan_example_a.json"
    printed = cli_json("simulate", plan_file, "--trace", TRACE, "--policy", "sjf", "--router", "jsq", "--window",
                       "30s", "--max-requests", "150", "--rate-scale", "1.5", "--json")  # fmt: skip
    options = SimOptions((str(TRACE),), policy="sjf", router="jsq", window="30s", max_requests=150, rate_scale=1.5)
    assert printed == to_json(api.simulate(api.sim_request(plan_file, options)))


def test_find_capacity_json_is_the_api_find_capacity():
    from hetplan.commands.simulate import SimOptions

    plan_file = FIXTURES / "plan_example_a.json"
    printed = cli_json("simulate", plan_file, "--trace", TRACE, "--find-capacity", "--target", "0.8", "--json")
    req = api.sim_request(plan_file, SimOptions((str(TRACE),)))
    assert printed == to_json(api.find_capacity(req, 0.8))


def test_closed_loop_json_is_the_api_closed_loop():
    plan_file = FIXTURES / "plan_example_a.json"
    printed = cli_json("simulate", plan_file, "--concurrency", "4", "--isl", "256", "--osl", "32", "--requests",
                       "100", "--json")  # fmt: skip
    assert printed == to_json(api.simulate_closed_loop(plan_file, 4, 256, 32, 100))


@pytest.mark.slow
def test_gate_json_is_the_api_gate():
    """Pass or fail (a fresh plan made with --no-verify against verified baselines fails), the CLI prints the
    API's gate document; the baseline scenarios not given are warnings in both."""
    scenario = EXAMPLES / "llama31-8b-mooncake.yaml"
    baseline = EXAMPLES / "ci" / "baseline.json"
    res = runner.invoke(app, ["gate", str(scenario), "--baseline", str(baseline), "--no-verify", "--json"], env=ENV)
    assert res.exit_code in (0, 1), res.output
    run = api.gate([scenario], baseline, 0.02, verify=False)
    assert res.stdout == to_json(run.to_doc())
    assert res.exit_code == (0 if run.passed else 1)
    assert len(run.warnings) == len(api.read_gate_baseline(baseline).scenarios) - 1


@pytest.mark.slow
def test_gate_update_baseline_writes_what_the_api_writes(tmp_path):
    scenario = EXAMPLES / "llama31-8b-mooncake.yaml"
    res = runner.invoke(app, ["gate", str(scenario), "--baseline", str(tmp_path / "cli.json"), "--no-verify",
                              "--update-baseline"], env=ENV)  # fmt: skip
    assert res.exit_code == 0, res.output
    api.update_gate_baseline([scenario], tmp_path / "api.json", verify=False)
    assert (tmp_path / "cli.json").read_bytes() == (tmp_path / "api.json").read_bytes()


def test_emit_json_is_the_api_emit(tmp_path):
    plan_file = FIXTURES / "plan_example_a.json"
    printed = cli_json("emit", plan_file, "--out", tmp_path / "cli", "--json")
    result = api.emit(plan_file, tmp_path / "api")
    cli_doc, api_doc = json.loads(printed), json.loads(to_json(result.to_doc()))
    assert cli_doc["files"] == api_doc["files"] and cli_doc["targets"] == api_doc["targets"]
