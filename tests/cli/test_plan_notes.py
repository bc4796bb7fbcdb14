"""The notes under a verified plan about cheaper strategies: a shape the verification simulated and could not
verify is named as such, not sent off to "plan it ... to verify it" (example (b) with --strategy all)."""

import copy
import json

from rich.console import Console

from hetplan.cli.render.plan import render_plan
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "plan_example_a.json"


def _text(doc):
    console = Console(width=200, record=True, force_terminal=False, color_system=None)
    render_plan(doc, console)
    return console.export_text()


def _cheaper(doc):
    return [n for n, b in doc["baselines"].items()
            if b.get("status") != "infeasible" and 0 < b["total_usd_per_hour"] < doc["total_usd_per_hour"]]  # fmt: skip


def test_a_shape_that_missed_in_simulation_is_not_offered_for_verification():
    doc = json.loads(FIXTURE.read_text())
    cheaper = _cheaper(doc)
    assert cheaper, "the fixture needs a baseline cheaper than its plan"
    name = cheaper[0]
    verified = copy.deepcopy(doc)
    verified["verification"] = {"resized": {"per_strategy": [{"strategy": name, "infeasible": "tried 6 plans"}]}}
    lines = [ln for ln in _text(verified).splitlines() if ln.startswith(f"note: {name} ")]
    assert len(lines) == 1
    assert "did not hold the SLOs in simulation" in lines[0] and "tried 6 plans" in lines[0]
    assert "to verify it" not in lines[0]
    # without that record (the shape was not simulated) the note still offers it
    verified["verification"] = {"resized": {"per_strategy": []}}
    lines = [ln for ln in _text(verified).splitlines() if ln.startswith(f"note: {name} ")]
    assert len(lines) == 1 and "to verify it" in lines[0]
