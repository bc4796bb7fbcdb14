"""``emit`` says when the --max-model-len it writes is the plan's (the longest planned request), below the window."""

from __future__ import annotations

from pathlib import Path

from hetplan import api
from hetplan.emit.ir_build import build_ir
from hetplan.emit.settings import EmitSettings
from hetplan.scenario import Scenario


def test_the_planned_max_model_len_is_named_in_a_note(tmp_path: Path) -> None:
    scenario = Scenario.model_validate(
        {
            "model": "Llama-3.1-8B",
            "workload": {"synthetic": {"class": "balanced", "rate_per_s": 2.0, "requests": 200}},
            "slo": {"ttft": "2s", "tpot": "100ms"},
            "gpus": ["L40S"],
            "cloud": "aws",
            "goodput_req_per_s": 2,
        }
    )
    plan = api.plan(scenario, analysis=False)
    ir = build_ir(plan, EmitSettings())
    planned = [n for n in ir.notes if n.startswith("--max-model-len")]
    assert len(planned) == 1 and "131,072-token window" in planned[0]
    lens = {g.engine.max_model_len_tokens for u in ir.units for g in u.groups}
    assert len(lens) == 1 and lens.pop() < 131072
    # a length the user gives is theirs: no note
    assert not [n for n in build_ir(plan, EmitSettings(max_model_len_tokens=8192)).notes if "max-model-len" in n]
