"""Scenario files take the engine's memory knobs (issue 30 item 3): validated naming the field, defaults the
engine's, and they reach the planner's settings (memory budget, step model) and the deployment's max_model_len."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hetplan.planning.request import build_request
from hetplan.scenario import Scenario
from tests.conftest import EXAMPLES

CONV = str(EXAMPLES / "data" / "azure_conv_15min.csv")


def _scenario(**kw) -> Scenario:  # type: ignore[no-untyped-def]
    base = {"model": "Llama-3.1-8B", "workload": {"path": CONV}, "gpus": ["H100", "L4"], "cloud": "aws",
            "goodput_req_per_s": 4}  # fmt: skip
    base.update(kw)
    return Scenario(**base)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpu_memory_utilization", 1.2),
        ("gpu_memory_utilization", 0),
        ("max_num_batched_tokens", 0),
        ("max_num_seqs", -1),
        ("max_model_len_tokens", 0),
    ],  # fmt: skip
)
def test_bad_knob_names_the_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=rf"{field}\n\s+Input should be (greater|less) than"):
        _scenario(**{field: value})


def test_knobs_reach_the_planner_settings() -> None:
    default = build_request(_scenario())[0]
    assert default.settings.gpu_memory_utilization == 0.9  # the engine's default
    req = build_request(
        _scenario(gpu_memory_utilization=0.8, max_num_batched_tokens=4096, max_num_seqs=128, max_model_len_tokens=4000)
    )[0]
    s = req.settings
    assert (s.gpu_memory_utilization, s.max_num_batched_tokens, s.max_num_seqs, s.max_model_len_tokens) == (
        0.8, 4096, 128, 4000,
    )  # fmt: skip
    assert req.deployment.max_model_len_tokens == 4000


def test_max_model_len_drops_longer_requests_like_the_window() -> None:
    """Requests over max_model_len are handled as those over the model's window: refused and reported."""
    _, workload, warnings, _ = build_request(_scenario(max_model_len_tokens=1024))
    assert int((workload.prompt_tokens).max()) <= 1024
    assert any("1,024" in w for w in warnings), warnings
