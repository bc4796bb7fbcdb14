"""The typed documents of calibrate-perf (hetplan/perf/calibration_file.py) and explore (hetplan/explore.py): read
by attribute, and their ``to_doc()`` is the document written, read back unchanged (key order included)."""

from __future__ import annotations

from pathlib import Path

import yaml

from hetplan.explore import ExploreDoc
from hetplan.io import to_json, to_yaml
from hetplan.perf import user_calibration as uc
from hetplan.perf.calibration_file import CalibrationFile

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "user_calibration"


def test_the_calibration_file_is_typed_and_round_trips():
    files = [FIX / "vllm_bench_c16.json", FIX / "points_measured.csv"]
    points, _ = uc.read_benchmarks(files, uc.Context(gpu="H100-SXM"))
    pred = uc.predict(points)
    typed = uc.calibration_file(pred, uc.fit(pred), [str(f) for f in files])
    assert typed.kind == uc.KIND and typed.overall.points == len(points)
    layout = [c for c in typed.corrections if c.tp != "*"]
    assert layout and all(c.ttft_factor > 0 and c.residuals.leave_one_out.ttft.median_abs >= 0 for c in layout)
    doc = typed.to_doc()
    assert list(doc["overall"]) == ["points", "before", "leave_one_out"]
    assert all(("band" in c) == (c["points"] >= uc.MIN_BAND_POINTS and c["tp"] != "*") for c in doc["corrections"])
    text = to_yaml(doc)
    assert to_yaml(CalibrationFile.model_validate(yaml.safe_load(text)).to_doc()) == text


def test_an_explore_document_keeps_each_rows_own_fields():
    planned = {"point": "ttft=1s", "values": {"ttft": "1s"}, "status": "ok", "goodput_target_req_per_s": 5.0,
               "slo_ttft_s": 1.0, "slo_tpot_s": 0.1, "strategy": None, "usd_per_hour": 71.1, "usd_per_month": 51901.0,
               "deployment": "2x L40S TP4", "gpus_used": {"L40S": 8}, "owned_gpus": {}, "check": "held",
               "out_of_sample": None, "attainment": 0.9, "ttft_q_s": 0.8, "tpot_q_s": 0.05, "misses": []}  # fmt: skip
    failed = {"point": "ttft=0.1s", "values": {"ttft": "0.1s"}, "status": "infeasible", "goodput_target_req_per_s": 5.0,
              "slo_ttft_s": 0.1, "slo_tpot_s": 0.1, "check": "not run", "error": "no combo meets the SLO"}  # fmt: skip
    doc = {"kind": "explore", "scenario": "s", "strategy": "all", "axes": [{"axis": "ttft", "values": ["1s", "0.1s"]}],
           "base_goodput_target_req_per_s": 5.0, "check": "c", "points": [planned, failed],
           "counts": {"ok": 1, "infeasible": 1, "error": 0}, "cheapest": "ttft=1s",
           "cheapest_held": "ttft=1s"}  # fmt: skip
    typed = ExploreDoc.model_validate(doc)
    assert typed.points[0].strategy is None and typed.points[1].usd_per_hour is None and typed.counts.infeasible == 1
    assert to_json(typed.to_doc()) == to_json(doc)  # a None that was written stays; a field never set stays out
