"""The sweep's typed records at their edges: a row from a plan document (and from an older verification block),
the plan file ``--resume`` may reuse, and the summary written as ``summary.json`` and read back by the CLI."""

from __future__ import annotations

import csv
import json

from hetplan.io import to_json
from hetplan.sweep.grid import expand
from hetplan.sweep.outputs import SweepSummary, write_outputs
from hetplan.sweep.planfacts import PlanFacts
from hetplan.sweep.run import _reusable
from hetplan.sweep.table import COLUMNS, Timings, build_row
from tests.conftest import FIXTURES
from tests.sweep.helpers import write_grid


def _plan_doc() -> dict:
    return json.loads((FIXTURES / "plan_two_combos.json").read_text())


def test_a_row_reads_the_plan_documents_deployment_prices_and_an_older_verification_block(tmp_path, small):
    case = expand(write_grid(tmp_path), small).cases[0]
    doc = _plan_doc()
    doc["verification"] = {"attainment": {"joint": 0.95}, "goodput_req_per_s": 2.5, "ttft_p90_s": 1.25,
                           "tpot_p90_s": 0.05, "misses": []}  # fmt: skip
    row = build_row(case, "ok", doc, None, Timings(worker="host:1"))
    assert row.purchases == "A100-80GB-SXM=6 A10G=8 H100-SXM=2" and row.gpus_total == 16
    assert row.chosen_units.count("x [") == len(doc["combos"]) and row.priced_by == "aws"
    assert (row.verdict, row.sim_attainment, row.sim_ttft_q_s, row.sim_tpot_q_s, row.sim_misses) == (
        "held", 0.95, 1.25, 0.05, 0
    )  # fmt: skip
    assert row.worker == "host:1" and row.error == ""
    doc["sweep_case"] = {"verify_error": "simulation failed"}
    assert build_row(case, "ok", doc, None).verdict == "check failed"
    failed = build_row(case, "error", None, "no price")
    assert (failed.error, failed.verdict, failed.usd_per_hour, failed.solver_status) == ("no price", "not run", None,
                                                                                         None)  # fmt: skip


def test_resume_reuses_only_a_plan_file_of_the_same_inputs_that_reads_as_a_plan(tmp_path, small):
    """A hand-edited plan file whose inputs hash matches but whose fields are of the wrong kind is planned again,
    not read into a row (which stopped the whole sweep with an internal error)."""
    case = expand(write_grid(tmp_path), small).cases[0]
    doc = _plan_doc() | {"sweep_case": {"id": case.id, "inputs_sha256": case.inputs_sha256}}
    path = tmp_path / "case.json"
    path.write_text(to_json(doc), encoding="utf-8")
    facts = _reusable(case, path)
    assert isinstance(facts, PlanFacts)
    assert build_row(case, "ok", facts, None) == build_row(case, "ok", doc, None)
    path.write_text(to_json(doc | {"gpus_used": "H100-SXM=2"}), encoding="utf-8")
    assert _reusable(case, path) is None
    path.write_text(to_json(doc | {"sweep_case": {"inputs_sha256": "other"}}), encoding="utf-8")
    assert _reusable(case, path) is None


def test_the_summary_document_is_what_is_written_and_reads_back_as_the_same_summary(tmp_path, small):
    grid = expand(write_grid(tmp_path), small)
    ok, bad = grid.cases[0], grid.cases[5]
    rows = {ok.id: build_row(ok, "ok", _plan_doc(), None), bad.id: build_row(bad, "error", None, "no price")}
    out = tmp_path / "out"
    out.mkdir()
    summary = write_outputs(grid, out, rows, "local", 2.0, False)
    doc = summary.to_doc()
    assert json.loads((out / "summary.json").read_text()) == doc
    assert list(doc["verdicts"]) == ["held", "missed", "check failed", "not run"]
    assert doc["counts"] == {"ok": 1, "infeasible": 0, "error": 1} and doc["incomplete"] is True
    assert SweepSummary.model_validate(doc) == summary
    with open(out / "results.csv", encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == [name for name, _ in COLUMNS] and [r["case_id"] for r in table] == [ok.id, bad.id]
