"""``hetplan estimate`` takes the engine's memory knobs (issue 30 item 3) and refuses a request that can never fit
with the numbers instead of leaving it queued for a slot."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "200"}
BASE = ["estimate", "--model", "Llama-3.1-8B", "--gpu", "RTX-3090"]


def _run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, cli([*BASE, *args]), env=ENV)


def _kv(*args: str) -> int:
    res = _run(*args, "--json")
    assert res.exit_code == 0, res.output
    return int(json.loads(res.output)["kv_capacity_tokens"])


def test_knobs_move_the_kv_capacity() -> None:
    base = _kv()
    assert _kv("--gpu-memory-utilization", "0.95") > base
    # vLLM's RTX 3090 log (vllm-project/vllm issue 10517): 1,952 blocks = 31,232 tokens at 20,000 batched tokens
    big = _kv("--max-num-batched-tokens", "20000")
    assert abs(big / 31_232 - 1) < 0.05
    assert _kv("--max-num-seqs", "1024") < base  # a larger sampler reserve


def test_knob_out_of_range_names_the_field() -> None:
    res = _run("--gpu-memory-utilization", "1.5")
    assert res.exit_code != 0 and "gpu_memory_utilization must be in (0, 1]" in res.output
    assert "Traceback" not in res.output
    res = _run("--max-num-seqs", "0")
    assert res.exit_code != 0 and "max_num_seqs" in res.output


def test_max_model_len_beyond_the_kv_cache_is_refused_as_vllm_does() -> None:
    """The same log's 29,000-token run: vLLM refused to start (max seq len 29,000 > 23,648 tokens of KV)."""
    res = _run("--max-num-batched-tokens", "29000", "--max-model-len", "29000")
    assert res.exit_code != 0
    assert "max_model_len 29,000 exceeds the" in res.output and "--gpu-memory-utilization" in res.output


def test_request_that_can_never_fit_is_refused_with_the_numbers() -> None:
    res = _run("--prompt-tokens", "40000", "--output-tokens", "4000")
    assert res.exit_code != 0
    assert "44,000 tokens" in res.output and "can never fit" in res.output and "gpu_memory_utilization" in res.output
    closed = _run("--concurrency", "4", "--isl", "40000", "--osl", "4000")
    assert closed.exit_code != 0
    assert "can never fit" in closed.output and "queue for a slot" not in closed.output
    over = _run("--concurrency", "4", "--isl", "3000", "--osl", "400", "--max-model-len", "2048")
    assert over.exit_code != 0 and "exceeds max_model_len 2,048" in over.output


def test_max_model_len_beyond_the_model_window_is_refused() -> None:
    res = _run("--max-model-len", "200000")
    assert res.exit_code != 0 and "max_model_len 200,000 exceeds Llama-3.1-8B's window of 131,072" in res.output
    closed = _run("--concurrency", "1", "--isl", "100", "--osl", "10", "--max-model-len", "200000")
    assert closed.exit_code != 0 and "exceeds Llama-3.1-8B's window" in closed.output
