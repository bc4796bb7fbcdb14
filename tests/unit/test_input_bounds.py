"""Bounds found by fuzzing (tests/fuzz), each refused with an Error naming the file and row, never a traceback."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.conftest import FIXTURES

SCENARIO = """\
schema_version: 1
kind: scenario
name: tiny-8b
model: Llama-3-8B
workload: {synthetic: {class: balanced, rate_per_s: 2, requests: 200}}
slo: {ttft: 2s, tpot: 100ms, percentile: p90}
gpus: [H100]
cloud: aws
tp: [1]
max_ratio: 1
"""


def _run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res.exit_code, res.output


def test_a_trace_spanning_years_is_not_binned_into_billions_of_windows(tmp_path):
    """Mooncake timestamps years apart with 10-minute windows asked numpy for 1.2 TiB (22 years: within the
    century every trace may span, over the million windows a schedule may have)."""
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": 0, "input_length": 100, "output_length": 10},
            {"timestamp": 7e11, "input_length": 100, "output_length": 10}]  # fmt: skip
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "s.yaml").write_text(SCENARIO, encoding="utf-8")
    code, out = _run(["autoscale", str(tmp_path / "s.yaml"), "--load-curve", str(trace)])
    assert code == 2 and "Error:" in out and "more than 100,000" in out, out


def test_a_load_curve_rate_over_the_goodput_bound_names_its_row(tmp_path):
    """A rate of 1e300 req/s ended in an IndexError inside PuLP."""
    curve = tmp_path / "c.csv"
    curve.write_text("0,1,1\n600,1e300,1\n", encoding="utf-8")
    (tmp_path / "s.yaml").write_text(SCENARIO, encoding="utf-8")
    code, out = _run(["autoscale", str(tmp_path / "s.yaml"), "--load-curve", str(curve)])
    assert code == 2 and f"{curve}:2: rate 1e+300 req/s is over 1e+07 req/s" in out, out


def test_closed_loop_lengths_are_bounded():
    """--isl 2**64 overflowed int64 in numpy: refused by the flag's numeric edge; past 10M tokens by the length
    bound."""
    code, out = _run(["simulate", str(FIXTURES / "plan_example_a.json"), "--concurrency", "2", "--isl",
                      str(2**64), "--osl", "8"])  # fmt: skip
    assert code == 2 and "beyond the 1e+15 hetplan accepts for any number" in out, out
    code, out = _run(["simulate", str(FIXTURES / "plan_example_a.json"), "--concurrency", "2", "--isl",
                      str(2 * 10**7), "--osl", "8"])  # fmt: skip
    assert code == 2 and "--isl 20,000,000 is more than 10,000,000 tokens" in out, out


def test_a_model_name_too_long_to_be_a_path_is_an_unknown_model():
    code, out = _run(["estimate", "--model", "x" * 300, "--gpu", "H100"])
    assert code == 2 and "Error:" in out, out
    code, out = _run(["profile", "--emit-job", "--gpu-label", "X", "--model", "x" * 300])
    assert code == 2 and "Error:" in out, out


def test_azure_timestamps_in_mixed_time_zones_are_an_error(tmp_path):
    trace = tmp_path / "tz.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68+00:00,100,10\n"
                     "2023-11-16 18:15:47.68+05:00,100,10\n2023-11-16 18:15:48,100,10\n", encoding="utf-8")  # fmt: skip
    code, out = _run(["simulate", str(FIXTURES / "plan_example_a.json"), "--trace", str(trace)])
    assert code == 2 and "TIMESTAMP mixes time zones" in out, out


def test_an_all_zero_load_curve_and_an_infinite_diurnal_peak_are_errors(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO, encoding="utf-8")
    curve = tmp_path / "z.csv"
    curve.write_text("0,0,0\n600,0,0\n", encoding="utf-8")
    code, out = _run(["autoscale", str(tmp_path / "s.yaml"), "--load-curve", str(curve)])
    assert code == 2 and "every window's rate is 0" in out, out
    code, out = _run(["autoscale", str(tmp_path / "s.yaml"), "--diurnal", "1,inf,2"])
    assert code == 2 and "Error: diurnal curve" in out, out


def test_bf16_on_a_gpu_without_bf16_tensor_cores_is_an_error_not_a_key_error():
    code, out = _run(["estimate", "--model", "Llama-3-8B", "--gpu", "V100"])
    assert code == 2 and "Error: V100-SXM2 cannot run bf16 weights" in out and "--weight-dtype fp16" in out, out
