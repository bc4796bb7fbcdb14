"""A combo copy offered more than its capacity writes finite figures (example (c) under the issue-30 memory model:
the verification's search for a cheaper plan sized the homogeneous baseline at headroom -0.41, its copies carried
1.65x their capacity, the M/G/n TTFT was infinite and ``plan --json`` died on ``inf``)."""

from __future__ import annotations

import json
import math

from hetplan.plan.docunits import combo_doc
from hetplan.planning.deployed import combo_unit
from hetplan.planning.request import build_request
from hetplan.planning.solve import Planner
from hetplan.scenario import load_scenario
from tests.conftest import EXAMPLES


def test_an_overloaded_copy_has_a_finite_ttft_and_utilization_above_one() -> None:
    req = build_request(load_scenario(EXAMPLES / "llama3-70b-azure-conv.yaml"))[0]
    planner = Planner(req)
    combo = planner.cands.combos[0]
    row = combo_doc(combo_unit(req, planner.cands, combo, 1, 1.65 * combo.goodput_req_per_s, 1000.0))
    assert math.isfinite(row["predicted_ttft_s"]) and row["predicted_ttft_s"] > 0
    assert row["utilization"] > 1.6
    json.dumps(row, allow_nan=False)  # what the --json writer demands
    at_capacity = combo_doc(combo_unit(req, planner.cands, combo, 1, combo.goodput_req_per_s * (1 - 1e-9), 1000.0))
    assert row["predicted_ttft_s"] == at_capacity["predicted_ttft_s"]
