"""The typed blocks of a plan (hetplan.plan.blocks, issue 29): a document with every block the planner and the
verification write reads into typed fields and writes back to the same bytes, key order included; a block of the
wrong shape is refused naming it."""

from __future__ import annotations

import copy
import json

import pytest

from hetplan.errors import InputError
from hetplan.plan.blocks import OwnedGpu, Verification
from hetplan.plan.doc import from_doc, read_plan_doc, to_doc
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "plan_example_a.json"

VERIFICATION = {
    "attainment_by_class": {"chat": 0.97, "long-output": 1.0},
    "jain_index": 0.999,
    "status": "verified",
    "in_sample_status": "verified",
    "out_of_sample": {"status": "holds", "runs": [{"label": "held-out", "trace": "t", "requests": 10,
                                                   "arrivals": "trace", "rate_req_per_s": 4, "attainment": 0.95,
                                                   "ttft_p_s": 0.5, "tpot_p_s": 0.02, "misses": []}],
                      "split": "last 30 %"},
    "verdict": "verified",
    "percentile": 90.0,
    "attainment": 0.99,
    "attainment_by_slo": {"ttft": 1.0, "tpot": 0.99, "joint": 0.99},
    "runs": [{"label": "at target", "rate_scale": 1.3, "attainment": {"ttft": 1.0, "tpot": 1.0, "joint": 1.0},
              "misses": []}],
    "warnings": [],
    "misses": [],
    "resized": {"attempts": [], "headroom_asked": 0.1, "per_strategy": [{"strategy": "cauchy", "plans_tried": 2}]},
    # written by the model-error check after the rest (hetplan.planning.verify): the block's last key
    "model_error": {"summary": "holds", "confidence": "p80", "holds_at_confidence": True, "margin_capped": False},
    "a_newer_key": {"kept": [1, 2]},
}  # fmt: skip


def _doc() -> dict:
    doc = read_plan_doc(FIXTURE)
    doc["verification"] = copy.deepcopy(VERIFICATION)
    doc["owned_gpus"] = {
        "L40S": {"owned": 8, "used": 0, "idle": 8, "idle_reason": "does not fit", "alone_req_per_s": 0.0},
        "H100-SXM": {"owned": 8, "used": 8, "idle": 0},
    }
    doc["dtype_search"] = [
        {"weight_dtype": "bf16", "kv_dtype": "auto", "status": "optimal", "strategy": "cauchy",
         "total_usd_per_hour": 81.93, "chosen": True, "gpus": ["H100-SXM"]},
        {"weight_dtype": "fp8", "kv_dtype": "auto", "status": "infeasible", "strategy": "cauchy", "reason": "x",
         "chosen": False},
    ]  # fmt: skip
    doc["quality_note"] = "fp8 weights change the outputs"
    return doc


def test_every_block_reads_typed_and_writes_back_the_same_bytes():
    doc = _doc()
    plan = from_doc(doc)
    v = plan.verification
    assert isinstance(v, Verification) and v.verified and v.resized is not None
    assert v.attainment_by_slo is not None and v.attainment_by_slo.joint == 0.99
    assert v.out_of_sample is not None and v.out_of_sample.runs[0].rate_req_per_s == 4
    assert v.resized.per_strategy[0].plans_tried == 2 and v.model_error is not None
    assert plan.owned_gpus is not None and isinstance(plan.owned_gpus["L40S"], OwnedGpu)
    assert plan.owned_gpus["L40S"].idle_reason == "does not fit"
    assert plan.dtype_search is not None and plan.dtype_search[1].reason == "x"
    assert plan.solver is not None and plan.solver.backend and plan.workload is not None
    back = to_doc(plan)
    assert back == doc
    # each block keeps its key order (an int stays an int: rate_req_per_s 4), the document the planner's order
    assert json.dumps(back["verification"]) == json.dumps(VERIFICATION)
    assert json.dumps(back["owned_gpus"]) == json.dumps(doc["owned_gpus"])
    assert list(back).index("owned_gpus") < list(back).index("solver") < list(back).index("dtype_search")
    assert from_doc(back) == plan and json.dumps(to_doc(from_doc(back))) == json.dumps(back)


def test_a_block_of_the_wrong_shape_is_refused_naming_it():
    doc = _doc()
    doc["verification"]["runs"] = "not a list"
    with pytest.raises(InputError, match="plan verification"):
        from_doc(doc)
    doc = _doc()
    doc["owned_gpus"] = ["L40S"]
    with pytest.raises(InputError, match="owned_gpus is not a mapping"):
        from_doc(doc)


def test_a_block_set_later_is_written_after_the_keys_it_was_read_with():
    v = Verification.from_doc({"status": "verified", "misses": []})
    assert list(v.with_(verdict="ok").to_doc()) == ["status", "misses", "verdict"]
    assert Verification().to_doc() == {}


def test_an_older_verification_block_with_an_attainment_map_still_reads():
    """Plans written before ``attainment_by_slo`` hold the attainment map in ``attainment``; reports read them."""
    doc = read_plan_doc(FIXTURE)
    doc["verification"] = {"attainment": {"ttft": 0.97, "tpot": 0.99, "joint": 0.96}, "misses": []}
    v = from_doc(doc).verification
    assert v is not None and v.joint_attainment is None
    assert to_doc(from_doc(doc))["verification"] == doc["verification"]
    doc["verification"] = {"attainment": 0.96}
    v = from_doc(doc).verification
    assert v is not None and v.joint_attainment == 0.96


def test_a_block_built_by_field_name_writes_its_aliased_field_in_place():
    """A producer builds a block by field name (``class_`` for the document's ``class``): the document keeps the
    order it was given in, the aliased field included (it went last before, the verification's class checks
    started with ``requests``)."""
    from hetplan.plan.blocks import ClassCheck

    made = ClassCheck(class_="chat", requests=3, holds=True)
    assert list(made.to_doc()) == ["class", "requests", "holds"]
    assert made.to_doc() == ClassCheck.from_doc({"class": "chat", "requests": 3, "holds": True}).to_doc()


def test_without_unsets_fields_so_they_are_not_written():
    """``Block.without``: the out-of-sample runs of a check that measured no capacity leave their capacity out."""
    from hetplan.plan.blocks import HeldOutRun

    run = HeldOutRun(label="held-out", misses=["x"], simulated_capacity_req_per_s=None, capacity_at_least_req_per_s=2.0)
    bare = run.without("simulated_capacity_req_per_s", "capacity_at_least_req_per_s")
    assert list(bare.to_doc()) == ["label", "misses"]
    assert bare.capacity_at_least_req_per_s is None and run.capacity_at_least_req_per_s == 2.0


def test_a_verification_block_tells_a_missing_field_from_a_written_one():
    """The report renders an older block's missing fields as "-" (None), its ``ttft_p90_s``-style quantiles and its
    attainment map as before: the typed block keeps "not written" apart from a written value."""
    old = Verification.from_doc({"ttft_p90_s": 0.5, "tpot_p90_s": None, "attainment": {"joint": 0.9}})
    assert old.status is None and old.requests is None and old.summary is None and old.classes is None
    assert old.slo_held is None and old.cascade_settings is None
    assert old.ttft_q_s(90) == 0.5 and old.tpot_q_s(90) is None and old.ttft_q_s(99) is None
    shares = old.attainment_shares
    assert shares is not None and shares.joint == 0.9 and shares.ttft is None
    new = Verification.from_doc({"misses": [], "ttft_p_s": None, "ttft_p90_s": 0.5, "attainment": 0.9,
                                 "cascade": {"kappa": 1.5, "q2": 0.2}})  # fmt: skip
    assert new.slo_held is True and new.ttft_q_s(90) is None  # a written ttft_p_s wins, null included
    assert new.attainment_shares is None and new.cascade_settings is not None and new.cascade_settings.kappa == 1.5
    assert Verification.from_doc({"misses": ["TTFT"]}).slo_held is False
    assert Verification.from_doc({"classes": []}).classes == []


def test_the_plan_has_no_untyped_views_left():
    """Plan.extra and Plan.scenario_extra (plain-data views kept while readers moved to the typed fields) are gone."""
    plan = from_doc(read_plan_doc(ROOT / "tests" / "fixtures" / "plan_example_a.json"))
    assert not hasattr(plan, "extra") and not hasattr(plan, "scenario_extra")
