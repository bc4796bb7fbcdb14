"""Optional tier: feed every emitted ``vllm serve`` argv to vLLM's own argument parser.

Skipped unless ``HETPLAN_VLLM_ENV`` names a Python interpreter with vLLM installed (see docs/emit.md, "Checking
flags against a real vLLM"). The parser runs in that interpreter, in one subprocess for all argvs; it only
parses, so no GPU, model download or network is needed. Run it with::

    HETPLAN_VLLM_ENV=/path/to/vllm-env/bin/python pytest -m vllm_argparse tests/emit/test_vllm_argparse.py
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hetplan.emit import check_rules
from hetplan.emit.dynamo import worker_argv
from hetplan.emit.ir import DeploymentIR
from hetplan.emit.settings import EmitSettings
from hetplan.emit.vllm import serve_argv
from tests.emit.helpers import aggregated, combo, example_plan, ir_of, plan_doc, two_combo_plan

PYTHON = os.environ.get("HETPLAN_VLLM_ENV", "")

pytestmark = [
    pytest.mark.vllm_argparse,
    pytest.mark.skipif(
        not (PYTHON and Path(PYTHON).is_file() and os.access(PYTHON, os.X_OK)),
        reason="HETPLAN_VLLM_ENV does not point at a Python with vLLM (see docs/emit.md)",
    ),
]

# Runs inside the vLLM environment: parse each argv with the parser 'vllm serve' itself builds
# ("serve" mode), or with the engine-argument parser that dynamo.vllm extends ("engine" mode).
# Written against vLLM 0.11 (vllm.entrypoints.cli.serve.ServeSubcommand, vllm.platforms._current_platform).
CHILD = r"""
import contextlib, io, json, sys
import vllm.platforms as platforms
# Building the parser needs a platform; without a GPU vLLM finds none. Parsing does not depend on which.
try:
    from vllm.platforms.cuda import CudaPlatform as Platform
except Exception:
    from vllm.platforms.cpu import CpuPlatform as Platform
platforms._current_platform = Platform()
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand

def serve_parser():
    parser = FlexibleArgumentParser(prog="vllm")
    ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    return parser

def kv(value):
    if value is None or isinstance(value, dict):
        return value
    return {k: getattr(value, k) for k in ("kv_connector", "kv_role", "kv_buffer_device")}

out = []
for mode, argv in json.load(sys.stdin):
    parser = serve_parser() if mode == "serve" else AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(argv)
    except SystemExit:
        out.append({"ok": False, "error": err.getvalue()[-3000:]})
        continue
    out.append({
        "ok": True,
        "model": getattr(ns, "model_tag", None) or ns.model,
        "tensor_parallel_size": ns.tensor_parallel_size,
        "pipeline_parallel_size": ns.pipeline_parallel_size,
        "distributed_executor_backend": ns.distributed_executor_backend,
        "max_num_seqs": ns.max_num_seqs,
        "max_num_batched_tokens": ns.max_num_batched_tokens,
        "gpu_memory_utilization": ns.gpu_memory_utilization,
        "max_model_len": ns.max_model_len,
        "block_size": ns.block_size,
        "kv_cache_dtype": ns.kv_cache_dtype,
        "dtype": ns.dtype,
        "quantization": ns.quantization,
        "served_model_name": ns.served_model_name,
        "port": getattr(ns, "port", None),
        "kv_transfer_config": kv(ns.kv_transfer_config),
    })
print("HETPLAN-RESULT " + json.dumps(out))
"""


def _irs() -> list[DeploymentIR]:
    irs = [
        ir_of(two_combo_plan()),
        ir_of(example_plan("cauchy-h800-a800-h20")),
        ir_of(example_plan("llama3-70b-azure-conv", "melange")),
        ir_of(plan_doc([combo("H100-SXM", 8, 1, "A100-80GB-SXM", 8, 2)], model="Llama-3-70B"),
                 EmitSettings(gpus_per_node=4)),
        ir_of(plan_doc(instances=[aggregated("L40S", 2, pp=2)], model="Llama-3-70B")),
        ir_of(plan_doc([combo("H100-SXM", 1, 1, "L40S", 1, 1)], weight_dtype="fp8", kv_dtype="fp8"),
                 EmitSettings(kv_connector="MooncakeConnector", max_model_len_tokens=4096)),
    ]  # fmt: skip
    for ir in irs:
        check_rules(ir)
    return irs


@pytest.fixture(scope="module")
def parsed():
    cases = []
    for ir in _irs():
        for g in ir.groups:
            cases.append((ir, g, "serve", serve_argv(ir, g)[1:]))  # drop the 'vllm' program name
            dynamo = worker_argv(ir, g)[3:]  # drop 'python3 -m dynamo.vllm'
            if "--disaggregation-mode" in dynamo:  # a Dynamo flag, not a vLLM engine flag
                k = dynamo.index("--disaggregation-mode")
                del dynamo[k : k + 2]
            cases.append((ir, g, "engine", dynamo))
    payload = json.dumps([[mode, argv] for _, _, mode, argv in cases])
    proc = subprocess.run(
        [PYTHON, "-c", CHILD], input=payload, capture_output=True, text=True, timeout=600, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("HETPLAN-RESULT ")]
    assert proc.returncode == 0 and lines, f"vLLM parser run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return list(zip(cases, json.loads(lines[-1].split(" ", 1)[1]), strict=True))


def test_vllm_accepts_every_emitted_argv(parsed):
    failures = [f"{mode} {g.name}: {res['error']}" for (_, g, mode, _), res in parsed if not res["ok"]]
    assert not failures, "\n".join(failures)
    assert len(parsed) >= 20


def test_vllm_reads_the_values_hetplan_meant(parsed):
    for (ir, g, mode, _), res in parsed:
        e = g.engine
        assert res["model"] == ir.model.source
        assert res["tensor_parallel_size"] == e.tensor_parallel_size
        assert res["pipeline_parallel_size"] == e.pipeline_parallel_size
        assert res["max_num_seqs"] == e.max_num_seqs
        assert res["max_num_batched_tokens"] == e.max_num_batched_tokens
        assert res["gpu_memory_utilization"] == pytest.approx(e.gpu_memory_utilization)
        assert res["max_model_len"] == e.max_model_len_tokens
        assert res["block_size"] == e.block_size_tokens
        assert res["kv_cache_dtype"] == e.kv_cache_dtype
        assert res["dtype"] == e.dtype and res["quantization"] == e.quantization
        assert res["served_model_name"] in ([ir.model.served_name], ir.model.served_name)
        if mode == "serve":
            assert res["port"] == g.port
            assert res["distributed_executor_backend"] == e.distributed_executor_backend
        if e.kv_connector is None:
            assert res["kv_transfer_config"] is None
        else:
            role = e.kv_role if mode == "serve" else "kv_both"
            assert res["kv_transfer_config"] == {
                "kv_connector": e.kv_connector,
                "kv_role": role,
                "kv_buffer_device": "cuda",
            }
