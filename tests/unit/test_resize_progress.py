"""Re-sizing names its attempt in every progress message (hetplan.planning.verify): a log shows which re-size
attempt or bisection step runs, not only "planning"."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from hetplan.plan.blocks import Verification
from hetplan.planning import resize


def test_each_resize_attempt_and_bisection_step_is_named() -> None:
    stage = resize.Stage()
    seen: list[str] = []

    def attempt(headroom: float, with_analysis: bool, lean: bool = True) -> Any:
        seen.append(stage.named("enumerating combos"))
        return SimpleNamespace(goodput_target_req_per_s=5.0, goodput_req_per_s=5.0 * (1 + headroom),
                               total_usd_per_hour=10.0 * (1 + headroom))  # fmt: skip

    def check(p: Any, capacity: str) -> Verification:
        ok = p.goodput_req_per_s >= 9.0
        status = "verified" if ok else "not verified"
        return Verification(status=status, simulated_capacity_req_per_s=p.goodput_req_per_s * 0.6, attainment=0.9,
                            dropped=0, misses=[] if ok else ["p90 TTFT"])  # fmt: skip

    first = attempt(0.1, False)
    seen.clear()
    best, headroom, resized = resize.resize_until_verified(
        first, check(first, "steer"), 0.1, attempt, check, stage=stage
    )
    assert seen[0].startswith("re-size attempt 1 of 5 (headroom ")
    assert seen[0].endswith(": enumerating combos")
    assert any(s.startswith("re-size bisection step 1 of 3") for s in seen)
    stage.shape = "the mixed plan (shape 1 of 3)"
    stage.attempt("re-size attempt 2 of 5 (headroom 0.5)")
    assert (
        stage.named("simulating") == "the mixed plan (shape 1 of 3): re-size attempt 2 of 5 (headroom 0.5): simulating"
    )


def test_the_headroom_kept_is_the_one_that_made_the_plan_kept():
    """A bisection step whose plan is no cheaper moves the search bound, not the kept plan: the headroom returned
    (``headroom_used``, and what the final plan is planned again at) is the one that made the kept plan."""

    def attempt(headroom: float, with_analysis: bool, lean: bool = True) -> Any:
        units = math.ceil((1 + headroom) * 2)  # whole units: a range of headrooms gives one deployment
        return SimpleNamespace(goodput_target_req_per_s=5.0, goodput_req_per_s=2.5 * units,
                               total_usd_per_hour=10.0 * units, made_at=headroom)  # fmt: skip

    def check(p: Any, capacity: str) -> Verification:
        ok = p.goodput_req_per_s >= 9.0
        status = "verified" if ok else "not verified"
        return Verification(status=status, simulated_capacity_req_per_s=p.goodput_req_per_s * 0.6, attainment=0.9,
                            dropped=0, misses=[] if ok else ["p90 TTFT"])  # fmt: skip

    first = attempt(0.1, False)
    best, headroom, resized = resize.resize_until_verified(first, check(first, "steer"), 0.1, attempt, check)
    assert best.total_usd_per_hour == 40.0
    assert headroom == best.made_at == pytest.approx(0.75)
    assert resized.headroom_used == pytest.approx(0.75)
