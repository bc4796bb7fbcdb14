"""Golden files and byte-identical output.

``tests/golden/emit/plan.yaml`` is a hand-made plan; its emitted files for every target are kept under
``tests/golden/emit/expected/`` and must match byte for byte. After an intended change to an emitter, regenerate
them and review the diff::

    HETPLAN_UPDATE_GOLDEN=1 pytest tests/emit/test_golden.py
    git diff tests/golden/emit
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetplan import api
from hetplan.emit.settings import EmitSettings
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "emit"
PLAN = GOLDEN / "plan.yaml"
EXPECTED = GOLDEN / "expected"
SETTINGS = EmitSettings(
    gpus_per_node=4, dynamo_api_versions=("v1beta1", "v1alpha1"), router_image="registry.example/vllm-router:0.1"
)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("golden")
    api.emit(PLAN, out, ["all"], SETTINGS, validate=True)
    return out


@pytest.mark.slow
def test_golden_files_match(emitted):
    got = _tree(emitted)
    if os.environ.get("HETPLAN_UPDATE_GOLDEN") == "1":
        for old in EXPECTED.rglob("*"):
            if old.is_file():
                old.unlink()
        for rel, data in got.items():
            (EXPECTED / rel).parent.mkdir(parents=True, exist_ok=True)
            (EXPECTED / rel).write_bytes(data)
    want = _tree(EXPECTED)
    assert sorted(got) == sorted(want), "file set differs: regenerate with HETPLAN_UPDATE_GOLDEN=1 (see docstring)"
    for rel in want:
        assert got[rel] == want[rel], f"{rel} differs from tests/golden/emit/expected/{rel}"
    targets = {rel.split("/")[0] for rel in want if "/" in rel}
    assert targets == {"vllm", "kubernetes", "llmd", "dynamo"}
    missing = [rel for rel in want if rel != "manifest.json" and b"vLLM 0.11.0" not in want[rel]]
    assert not missing, f"files without the plan's engine version: {missing}"


def test_manifest_lists_every_file_with_its_sha256(emitted):
    manifest = json.loads((emitted / "manifest.json").read_text())
    files = {e["file"]: e for e in manifest["files"]}
    on_disk = {rel for rel in _tree(emitted) if rel != "manifest.json"}
    assert set(files) == on_disk
    for rel, entry in files.items():
        assert entry["sha256"] == hashlib.sha256((emitted / rel).read_bytes()).hexdigest()
        assert entry["target"] == rel.split("/")[0]
    assert manifest["targets"] == ["vllm", "kubernetes", "llmd", "dynamo"]
    assert [e["file"] for e in manifest["files"]] == sorted(files)
    assert all(os.access(emitted / rel, os.X_OK) for rel in files if rel.endswith(".sh"))


@pytest.mark.slow
def test_output_is_byte_identical_across_runs_and_processes(emitted, tmp_path):
    again = tmp_path / "again"
    api.emit(PLAN, again, ["all"], SETTINGS)
    assert _tree(again) == _tree(emitted)
    # a fresh interpreter with another hash seed: no set or dict ordering leaks into the files
    other = tmp_path / "other"
    code = (
        "from hetplan import api; from hetplan.emit.settings import EmitSettings; import sys; "
        "api.emit(sys.argv[1], sys.argv[2], ['all'], EmitSettings(gpus_per_node=4, "
        "dynamo_api_versions=('v1beta1', 'v1alpha1'), router_image='registry.example/vllm-router:0.1'))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(PLAN), str(other)], check=True, env=env, cwd=ROOT)
    assert _tree(other) == _tree(emitted)


def test_existing_files_are_not_overwritten_without_force(emitted, tmp_path):
    out = tmp_path / "out"
    api.emit(PLAN, out, ["vllm"], SETTINGS)
    before = _tree(out)
    from hetplan.errors import OutputExistsError

    with pytest.raises(OutputExistsError):
        api.emit(PLAN, out, ["vllm", "kubernetes"], SETTINGS)
    assert _tree(out) == before  # refused before writing anything, even the new kubernetes files
    api.emit(PLAN, out, ["vllm", "kubernetes"], SETTINGS, force=True)
    assert any(rel.startswith("kubernetes/") for rel in _tree(out))


# -- SGLang and TensorRT-LLM (issue 33): the same hand-made plan, re-labelled as made for each engine --------------

ENGINE_CASES = {
    # SGLang keeps --gpus-per-node 4: combo 1's TP8 instances span two nodes (--nnodes 2, LeaderWorkerSet)
    "sglang": EmitSettings(gpus_per_node=4, dynamo_api_versions=("v1beta1",)),
    # TensorRT-LLM instances stay on one node (rule trtllm-multi-node): nodes of 8 GPUs
    "trtllm": EmitSettings(gpus_per_node=8, dynamo_api_versions=("v1beta1",)),
}


ENGINE_FRACTION = {"sglang": 0.92}
"""SGLang's default 0.85 static fraction cannot hold Llama-3-70B on combo 0's two H100s (its weights take 66 of
68 GiB), so the SGLang golden plan was made with a higher ``--mem-fraction-static``."""


def engine_plan(engine: str, plan: Path = PLAN) -> dict:
    """``plan`` (default ``plan.yaml``) as a plan made with ``--engine engine``: the engine's defaults for the block
    size, batch cap and token budget (what ``PerfSettings.for_engine`` gives the planner), and its memory fraction (but
    :data:`ENGINE_FRACTION`)."""
    import yaml

    from hetplan.perf.settings import PerfSettings

    doc = yaml.safe_load(plan.read_text())
    if engine == "vllm":
        return doc
    s = PerfSettings.for_engine(engine)
    doc["scenario"]["perf_settings"].update(
        engine=engine,
        gpu_memory_utilization=ENGINE_FRACTION.get(engine, s.gpu_memory_utilization),
        activation_reserve_gib=s.activation_reserve_gib,
        block_size_tokens=s.block_size_tokens,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
    )
    return doc


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINE_CASES))
def test_engine_golden_files_match(engine, tmp_path):
    out = tmp_path / engine
    result = api.emit(engine_plan(engine), out, ["all"], ENGINE_CASES[engine], validate=True)
    assert result.validation is not None and result.validation.ok
    got = _tree(out)
    expected = GOLDEN / f"expected-{engine}"
    if os.environ.get("HETPLAN_UPDATE_GOLDEN") == "1":
        for old in expected.rglob("*"):
            if old.is_file():
                old.unlink()
        for rel, data in got.items():
            (expected / rel).parent.mkdir(parents=True, exist_ok=True)
            (expected / rel).write_bytes(data)
    want = _tree(expected)
    assert sorted(got) == sorted(want), "file set differs: regenerate with HETPLAN_UPDATE_GOLDEN=1 (see docstring)"
    for rel in want:
        assert got[rel] == want[rel], f"{rel} differs from tests/golden/emit/expected-{engine}/{rel}"
    # TensorRT-LLM prefill/decode units have no llm-d routing sidecar connector: `all` leaves llm-d out
    llmd = {"llmd"} if engine != "trtllm" else set()
    assert {rel.split("/")[0] for rel in want if "/" in rel} == {engine, "kubernetes", "dynamo"} | llmd
    version = {"sglang": "SGLang 0.5", "trtllm": "TensorRT-LLM 1.1"}[engine]
    missing = [rel for rel in want if rel != "manifest.json" and version not in want[rel].decode()]
    assert not missing, f"files without the plan's engine version: {missing}"


# -- multi-node (issue 33): a mixture-of-experts plan whose instances span two 8-GPU nodes -------------------------

MOE_PLAN = GOLDEN / "plan-moe-2node.yaml"
"""Qwen3-235B-A22B at TP 8 x PP 2 on H100-SXM, aggregated: each instance spans two nodes of 8 GPUs."""
ENGINE_VERSION = {"vllm": "vLLM 0.11.0", "sglang": "SGLang 0.5", "trtllm": "TensorRT-LLM 1.1"}


def _compare_or_update(got: dict[str, bytes], expected: Path) -> dict[str, bytes]:
    if os.environ.get("HETPLAN_UPDATE_GOLDEN") == "1":
        for old in expected.rglob("*"):
            if old.is_file():
                old.unlink()
        for rel, data in got.items():
            (expected / rel).parent.mkdir(parents=True, exist_ok=True)
            (expected / rel).write_bytes(data)
    want = _tree(expected)
    assert sorted(got) == sorted(want), "file set differs: regenerate with HETPLAN_UPDATE_GOLDEN=1 (see docstring)"
    for rel in want:
        assert got[rel] == want[rel], f"{rel} differs from {expected.relative_to(ROOT)}/{rel}"
    return want


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_two_node_moe_golden_files_match(engine, tmp_path):
    out = tmp_path / engine
    result = api.emit(engine_plan(engine, MOE_PLAN), out, ["all"], EmitSettings(), validate=True)
    assert result.validation is not None and result.validation.ok
    want = _compare_or_update(_tree(out), GOLDEN / f"expected-moe-2node-{engine}")
    texts = {rel: data.decode() for rel, data in want.items()}
    # every instance is a two-pod LeaderWorkerSet in Kubernetes and llm-d, a two-node Dynamo worker
    assert "size: 2" in texts["kubernetes/moe-2node-u0-aggregated-h100-sxm.yaml"]
    assert "size: 2" in texts["llmd/moe-2node-u0.yaml"]
    assert "nodeCount: 2" in texts["dynamo/moe-2node-u0.v1beta1.yaml"]
    if engine == "vllm":  # Ray: the leader starts the head and waits for the worker node, which joins it
        leader = texts["vllm/moe-2node-u0-aggregated-h100-sxm-leader.sh"]
        assert "ray start --head --port=6379" in leader
        assert "--tensor-parallel-size 8 \\\n  --pipeline-parallel-size 2" in leader
        assert "--distributed-executor-backend ray" in leader
        assert 'ray start --address="${LEADER}:6379"' in texts["vllm/moe-2node-u0-aggregated-h100-sxm-worker.sh"]
    else:  # SGLang: one launch per node, joined by --nnodes / --node-rank / --dist-init-addr
        node = texts["sglang/moe-2node-u0-aggregated-h100-sxm-node.sh"]
        assert '--nnodes 2 \\\n  --node-rank "$NODE_RANK" \\\n  --dist-init-addr "$LEADER:20000"' in node
        assert "--tp-size 8 \\\n  --pp-size 2" in node
        lws = texts["kubernetes/moe-2node-u0-aggregated-h100-sxm.yaml"]
        assert '--node-rank "$LWS_WORKER_INDEX"' in lws and "$LWS_LEADER_ADDRESS:20000" in lws
    missing = [rel for rel, text in texts.items() if rel != "manifest.json" and ENGINE_VERSION[engine] not in text]
    assert not missing, f"files without the plan's engine version: {missing}"


def test_two_node_moe_is_refused_for_tensorrt_llm(tmp_path):
    from hetplan.errors import EmitRuleError

    with pytest.raises(EmitRuleError) as info:
        api.emit(engine_plan("trtllm", MOE_PLAN), tmp_path / "t", ["all"], EmitSettings(), validate=True)
    assert info.value.rule == "trtllm-multi-node"
    assert "spans 2 nodes of 8 GPUs" in info.value.render()
    assert "trtllm-llmapi-launch" in info.value.render()
    assert not (tmp_path / "t").exists()  # refused before anything is written
