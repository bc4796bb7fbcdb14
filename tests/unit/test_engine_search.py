"""Several engines in one search (issue 15): each is planned and the cheapest plan is kept."""

from __future__ import annotations

import pytest

from hetplan import api
from hetplan.scenario import Scenario
from tests.conftest import EXAMPLES


def _scenario(**kw) -> Scenario:
    base = {"model": "Llama-3.1-8B", "workload": {"path": str(EXAMPLES / "data" / "azure_conv_15min.csv")},
            "gpus": ["H100", "L4"], "cloud": "aws", "goodput_req_per_s": 3.0, "weight_dtype": "bf16"}  # fmt: skip
    base.update(kw)
    return Scenario(**base)


def test_the_cheapest_engine_is_kept_and_every_engine_is_listed():
    pinned = {e: api.to_doc(api.plan(_scenario(engine=e), strategy="all", analysis=False)) for e in ("vllm", "sglang")}
    doc = api.to_doc(api.plan(_scenario(engines=["vllm", "sglang"]), strategy="all", analysis=False))
    cheapest = min(pinned, key=lambda e: (pinned[e]["total_usd_per_hour"], e != "vllm"))
    assert doc["total_usd_per_hour"] == pinned[cheapest]["total_usd_per_hour"]
    assert doc["engine"] == pinned[cheapest]["engine"]
    tried = {(d["engine"], d["weight_dtype"]): d for d in doc["dtype_search"]}
    assert set(tried) == {("vllm", "bf16"), ("sglang", "bf16")}
    for e in ("vllm", "sglang"):
        assert tried[e, "bf16"]["total_usd_per_hour"] == pinned[e]["total_usd_per_hour"]
    assert [d["chosen"] for d in doc["dtype_search"]].count(True) == 1


def test_one_engine_in_the_list_plans_as_that_engine():
    doc = api.to_doc(api.plan(_scenario(engines=["sglang"]), strategy="cauchy", analysis=False))
    assert (
        doc["engine"] == api.to_doc(api.plan(_scenario(engine="sglang"), strategy="cauchy", analysis=False))["engine"]
    )
    assert "dtype_search" not in doc


def test_an_unknown_engine_in_the_list_is_refused():
    with pytest.raises(ValueError, match="engines"):
        _scenario(engines=["vllm", "tgi"])
