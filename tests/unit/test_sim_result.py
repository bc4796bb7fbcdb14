"""The typed simulation documents (hetplan/sim/result.py): what the simulator returns is read by attribute, and its
``to_doc()`` is the document ``--json`` prints, read back unchanged (key order included); a plan's request classes
read through their typed view."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hetplan.errors import InputError
from hetplan.io import to_json
from hetplan.plan.doc import from_doc, load_plan
from hetplan.sim.closed import closed_loop_run
from hetplan.sim.result import Capacity, ClosedLoop, Simulation
from hetplan.sim.run import SimRequest, capacity, plan_classes, simulation
from hetplan.workload.readers import read_stream
from tests.conftest import FIXTURES


def _req(**kw: object) -> SimRequest:
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    return SimRequest(plan, read_stream([str(FIXTURES / "azure_conv_200.csv")]), **kw)  # type: ignore[arg-type]


def test_a_simulation_is_typed_and_its_document_round_trips_byte_for_byte():
    sim = simulation(_req(policy="cascade", rate_scale=2.0))
    assert sim.kind == "simulation" and sim.requests == 200 and sim.cascade is not None
    assert 0 <= sim.attainment.joint <= 1 and sim.ttft_s.p90 is not None
    doc = sim.to_doc()
    head = ["kind", "policy", "router", "seed", "chunked_prefill", "rate_scale", "trace", "instances",
            "plan_strategy", "plan_goodput_req_per_s", "slo_percentile", "cascade"]  # fmt: skip
    assert list(doc)[:12] == head
    assert "prefix_cache" not in doc and "windowed" not in doc  # optional blocks absent, not null
    assert doc == simulation(_req(policy="cascade", rate_scale=2.0)).to_doc()
    text = to_json(doc)
    assert to_json(Simulation.model_validate(json.loads(text)).to_doc()) == text


def test_capacity_and_closed_loop_documents_round_trip():
    cap = capacity(_req(), target=0.9, steps=1)
    text = to_json(cap.to_doc())
    assert to_json(Capacity.model_validate(json.loads(text)).to_doc()) == text
    assert cap.metrics is not None and cap.rate_scale == round(cap.metrics.rate_scale, 5)
    plan = load_plan(FIXTURES / "plan_two_combos.json")
    loop = closed_loop_run(replace(plan, combos=plan.combos[1:]), 4, 500, 50, requests=40)
    assert loop.finished == 40 and loop.e2e_s.mean is not None
    text = to_json(loop.to_doc())
    assert to_json(ClosedLoop.model_validate(json.loads(text)).to_doc()) == text


def test_a_malformed_plan_class_is_an_input_error_naming_the_entry():
    """A hand-edited plan's ``scenario.classes`` entry that is not a class (no SLO, not a mapping, a duration that
    is not one) is refused with the entry named: when the plan is read, or when the simulator reads its classes."""
    from hetplan.plan.doc import to_doc

    doc = to_doc(load_plan(FIXTURES / "plan_two_combos.json"))
    doc["scenario"]["classes"] = [{"name": "chat", "ttft_s": 1, "tpot_s": "0.1"}]
    assert plan_classes(from_doc(doc)) == [("chat", 1.0, 0.1)]
    for row, named in (
        ({"name": "chat", "ttft_s": 1.0}, "scenario.classes entry .* is malformed"),
        ("chat", r"scenario.classes\[0\] is not a mapping"),
        ({"name": "chat", "ttft_s": "fast", "tpot_s": 0.1}, r"scenario.classes\[0\] is not a usable"),
    ):
        doc["scenario"]["classes"] = [row]
        with pytest.raises(InputError, match=named):
            plan_classes(from_doc(doc))
