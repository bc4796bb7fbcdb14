"""No oracles in ``hetplan simulate``: CASCADE's output predictor learns from the plan's sizing data, as the
plan's own verification does, in one run and in a windowed run alike; only without sizing data does a run learn
from the replayed trace itself, and the document says so."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace

import numpy as np

from hetplan.commands.simulate import SimOptions, build_request, sizing_predictor
from hetplan.plan.doc import load_plan, to_doc
from hetplan.sim import windows
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.run import IN_SAMPLE, simulation
from hetplan.workload.readers import read_stream
from tests.conftest import FIXTURES

SIZED = 120  # the plan's sizing part: the first 120 of the trace's 200 requests (as with workload.holdout)


def _plan_sized_on(tmp_path):
    """plan_two_combos re-labelled as sized on the first SIZED requests of a copy of azure_conv_200.csv."""
    trace = tmp_path / "conv.csv"
    shutil.copy(FIXTURES / "azure_conv_200.csv", trace)
    sha = hashlib.sha256(trace.read_bytes()).hexdigest()[:16]
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    assert plan.workload is not None
    plan = replace(plan, workload=plan.workload.with_(source=f"conv.csv (sha256 {sha})", requests=SIZED))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(to_doc(plan)))
    return path, trace


def _same(a: OutputPredictor, b: OutputPredictor) -> bool:
    probes = [(p, g) for p in (40, 300, 1000, 3000) for g in (0, 50, 400)]
    return [a.remaining(p, g) for p, g in probes] == [b.remaining(p, g) for p, g in probes]


def test_the_predictor_learns_from_the_plans_sizing_part_not_the_replay(tmp_path):
    plan_file, trace = _plan_sized_on(tmp_path)
    stream = read_stream([str(trace)])
    req = build_request(plan_file, SimOptions(trace=(str(trace),), policy="cascade"))
    assert req.predictor is not None and "first 120 requests of conv.csv" in (req.predictor_source or "")
    sizing = OutputPredictor(stream.prompt_tokens[:SIZED], stream.output_tokens[:SIZED])
    replayed = OutputPredictor(stream.prompt_tokens, stream.output_tokens)
    assert _same(req.predictor, sizing) and not _same(req.predictor, replayed)
    doc = simulation(req).to_doc()
    assert doc["output_predictor"] == req.predictor_source
    # an explicit --sizing-trace wins; a trace the plan was not sized on gives the in-sample default, said so
    other = build_request(
        plan_file, SimOptions(trace=(str(trace),), sizing_trace=(str(FIXTURES / "mooncake_300.jsonl"),))
    )
    assert other.predictor_source == "--sizing-trace mooncake_300.jsonl (300 requests)"
    plain = build_request(FIXTURES / "plan_two_combos.json", SimOptions(trace=(str(trace),), policy="cascade"))
    assert plain.predictor is None and simulation(plain).to_doc()["output_predictor"] == IN_SAMPLE
    assert "output_predictor" not in simulation(replace(plain, policy="fcfs")).to_doc()  # no policy reads it


def test_a_windowed_run_takes_the_sizing_datas_predictor(tmp_path, monkeypatch):
    plan_file, trace = _plan_sized_on(tmp_path)
    req = build_request(plan_file, SimOptions(trace=(str(trace),), policy="cascade"))
    seen = []
    real = windows.run_window

    def spy(*args):
        seen.append(args[7])  # the predictor each window runs with (then the catalog)
        return real(*args)

    monkeypatch.setattr(windows, "run_window", spy)
    doc = windows.simulate_windowed(req, 2, 5.0)
    assert len(seen) == 2 and all(p is req.predictor for p in seen)
    assert doc["output_predictor"] == req.predictor_source
    stream = read_stream([str(trace)])
    assert not _same(seen[0], OutputPredictor(stream.prompt_tokens, stream.output_tokens))
    assert np.isfinite(doc["ttft_s"]["mean"])


def test_no_sizing_data_is_found_in_a_trace_the_plan_does_not_name(tmp_path):
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    assert sizing_predictor(plan, (), [str(FIXTURES / "azure_conv_200.csv")]) == (None, None)


def test_a_replay_mixing_in_other_traces_gets_no_sizing_data_from_one_of_them(tmp_path):
    plan_file, trace = _plan_sized_on(tmp_path)
    mixed = build_request(plan_file, SimOptions(trace=(str(trace), str(FIXTURES / "mooncake_300.jsonl"))))
    assert mixed.predictor is None and mixed.predictor_source is None


def test_an_unreadable_sizing_trace_is_refused_naming_the_flag(tmp_path):
    from typer.testing import CliRunner

    from hetplan.cli.main import app

    plan, trace = str(FIXTURES / "plan_two_combos.json"), str(FIXTURES / "azure_conv_200.csv")
    res = CliRunner().invoke(app, ["simulate", plan, "--trace", trace, "--sizing-trace", str(tmp_path / "nope.csv")])
    assert res.exit_code == 2 and "Error: --sizing-trace: trace file" in res.output and "Traceback" not in res.output
    assert "check the --sizing-trace path" in res.output


def test_cascade_calibration_schedules_with_the_sizing_datas_predictor(tmp_path, monkeypatch):
    from hetplan.sim import calibrate as calibrate_module

    plan_file, trace = _plan_sized_on(tmp_path)
    req = build_request(plan_file, SimOptions(trace=(str(trace),), policy="cascade"))
    assert req.predictor is not None
    seen = []
    real = calibrate_module.Simulator

    def spy(*args, **kwargs):
        seen.append(kwargs.get("predictor"))  # what each calibration run's scheduler may know of output lengths
        return real(*args, **kwargs)

    monkeypatch.setattr(calibrate_module, "Simulator", spy)
    calibrate_module.calibration(req)
    assert seen and all(p is req.predictor for p in seen)
