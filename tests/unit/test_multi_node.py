"""Layouts over several nodes (issue 30, item 2): TP x DP x EP and PP beyond the GPU's NVLink domain are estimated,
the catalog's scale-out link (``network_gbit_per_s``) enters the all-reduce, the all-to-all and the PP hand-offs that
cross nodes, and bad layouts are still refused naming the field."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hetplan import api
from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import find_gpu, find_model
from hetplan.catalog.schemas import GpuSpec
from hetplan.cli.main import app
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.calibration import curves_for
from hetplan.perf.closed_loop import build_rows, row_constants
from hetplan.perf.latency import InstanceModel
from hetplan.perf.links import INTER_NODE_LATENCY_S, NETWORK_EFFICIENCY, communication_s, node_layout
from hetplan.perf.points import estimate_points
from hetplan.perf.settings import PerfSettings

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
R1 = {"engine": "sglang", "model": "DeepSeek-R1", "weight_dtype": "fp4", "concurrency": "64", "isl": "1024",
      "osl": "1024"}  # fmt: skip


def _slow(gpu: GpuSpec, factor: float = 10.0) -> GpuSpec:
    """``gpu`` with a scale-out network ``factor`` times slower, nothing else changed."""
    return gpu.model_copy(update={"network_gbit_per_s": gpu.network_gbit_per_s / factor})


def _comm(gpu: GpuSpec, tp: int, dp: int, pp: int, tokens: float = 256.0) -> tuple[float, float, float]:
    """(all-reduce, all-to-all, hand-off) seconds of one step of DeepSeek-R1 fp4 on ``gpu`` (sglang curves)."""
    arch = ModelArch(find_model("DeepSeek-R1"), "fp4", "fp8")
    curves, _ = curves_for("sglang", gpu.arch, gpu.vendor, gpu.name, catalog=Catalog.shipped())
    r = build_rows([row_constants(arch, gpu, tp, dp, curves, 8192, True, 256, pp)])
    per_rank = np.array([tokens / dp])
    k = np.array([float(arch.spec.experts_per_token or 0)])
    ar, a2a, hand = communication_s(r, per_rank, k, np.array([True]))
    return float(ar[0]), float(a2a[0]), float(hand[0])


@pytest.mark.parametrize(
    ("tp", "dp", "pp", "node", "want"),
    [
        (8, 1, 1, 8, (1, 1, 0)),
        (16, 1, 1, 8, (2, 2, 0)),
        (4, 4, 1, 8, (2, 1, 0)),
        (1, 16, 1, 8, (2, 1, 0)),
        (8, 1, 2, 8, (2, 1, 1)),
        (4, 1, 4, 8, (2, 1, 1)),  # two 4-GPU stages per node: only the middle hand-off crosses
        (16, 1, 2, 72, (1, 1, 0)),  # NVL72: one node
    ],
)
def test_node_layout(tp: int, dp: int, pp: int, node: int, want: tuple[int, int, int]) -> None:
    assert node_layout(tp, dp, pp, node) == want


def test_sixteen_gpu_layouts_are_estimated_over_two_nodes() -> None:
    rows = [
        {**R1, "gpu": "B200", "tp": "16", "ep": "16"},  # TP over two nodes
        {**R1, "gpu": "B200", "tp": "1", "dp_attention": "16", "ep": "16"},  # attention DP x EP over two nodes
        {**R1, "gpu": "B200", "tp": "4", "dp_attention": "4", "ep": "16"},  # TP x DP x EP
        {**R1, "gpu": "B200", "tp": "8", "pp": "2"},  # PP across nodes
    ]
    out = estimate_points(rows)
    for row in out:
        assert "error" not in row, row
        assert row["ttft_s"] > 0 and row["tpot_s"] > 0
        note = " ".join(row["notes"])
        assert "16 GPUs span 2 nodes of 8" in note and "network_gbit_per_s" in note
    assert "TP all-reduce over 2 nodes" in " ".join(out[0]["notes"])
    assert "MoE all-to-all" in " ".join(out[1]["notes"])
    assert "1 PP hand-off" in " ".join(out[3]["notes"])


def test_nvl72_keeps_sixteen_gpus_in_one_node() -> None:
    b200, gb200 = estimate_points([{**R1, "gpu": g, "tp": "16", "ep": "16"} for g in ("B200", "GB200")])
    assert "error" not in b200 and "error" not in gb200
    assert not any("nodes" in n for n in gb200["notes"])
    # the same ring: over the 100 GB/s network on B200, over NVLink inside the NVL72 rack on GB200
    assert _comm(find_gpu("B200"), 16, 1, 1)[0] > 2 * _comm(find_gpu("GB200"), 16, 1, 1)[0]


def test_api_estimate_tp16_spans_two_nodes() -> None:
    est = api.estimate("DeepSeek-R1", "H100-SXM", tp=16, weight_dtype="fp8", kv_dtype="fp8", batch=8)
    assert est.tp == 16 and est.decode_step_latency_s > 0 and est.kv_capacity_tokens > 0
    assert any("16 GPUs span 2 nodes of 8" in w for w in est.warnings)
    inside = api.estimate("DeepSeek-R1", "H200-SXM", tp=8, weight_dtype="fp8", kv_dtype="fp8", batch=8)
    assert not any("nodes" in w for w in inside.warnings)


def test_inter_node_link_enters_the_all_reduce() -> None:
    h100 = find_gpu("H100-SXM")
    ar16, _, _ = _comm(h100, 16, 1, 1)
    ar16_slow, _, _ = _comm(_slow(h100), 16, 1, 1)
    # 10x slower network: the cross-node ring's bandwidth term grows 10x (it ran at the network, not NVLink)
    assert ar16_slow > 5 * ar16
    # the cross-node ring at the network's achieved bandwidth, plus 10 us per node hop of each phase
    arch = ModelArch(find_model("DeepSeek-R1"), "fp4", "fp8")
    net = h100.network_gbit_per_s * 1e9 / 8 * NETWORK_EFFICIENCY
    curves, _ = curves_for("sglang", h100.arch, h100.vendor, h100.name, catalog=Catalog.shipped())
    one = curves.allreduce_latency_s + 2 * INTER_NODE_LATENCY_S + 2 * 15 / 16 * 256 * arch.spec.hidden_size * 2 / net
    assert ar16 == pytest.approx(2 * arch.layers * one, rel=1e-9)
    # inside one node the network plays no part
    assert _comm(h100, 8, 1, 1)[0] == _comm(_slow(h100), 8, 1, 1)[0]


def test_inter_node_link_enters_the_all_to_all_and_pp_hand_offs() -> None:
    b200 = find_gpu("B200")
    _, a2a16, _ = _comm(b200, 1, 16, 1)
    _, a2a16_slow, _ = _comm(_slow(b200), 1, 16, 1)
    assert a2a16_slow > 3 * a2a16
    _, a2a8, _ = _comm(b200, 1, 8, 1)
    assert a2a8 == _comm(_slow(b200), 1, 8, 1)[1]
    # PP 2 of TP 8: the one hand-off crosses nodes; PP 2 of TP 4 stays inside a node
    assert _comm(_slow(b200), 8, 1, 2)[2] > 3 * _comm(b200, 8, 1, 2)[2]
    assert _comm(_slow(b200), 4, 1, 2)[2] == _comm(b200, 4, 1, 2)[2] > 0


def test_instance_model_uses_the_network_across_nodes() -> None:
    arch = ModelArch(find_model("DeepSeek-R1"), "fp8", "fp8")
    h100 = find_gpu("H100-SXM")
    s = PerfSettings.for_engine("vllm")
    fast, slow = InstanceModel(arch, h100, 16, 1, s), InstanceModel(arch, _slow(h100), 16, 1, s)
    assert slow.decode_step_latency_s(64, 2048)[()] > fast.decode_step_latency_s(64, 2048)[()]
    assert slow.allreduce_s(1024)[()] > 5 * fast.allreduce_s(1024)[()]  # the legacy roofline's ring too
    pp_fast, pp_slow = InstanceModel(arch, h100, 8, 2, s), InstanceModel(arch, _slow(h100), 8, 2, s)
    assert pp_slow.pp_handoff_s(8192)[()] > 3 * pp_fast.pp_handoff_s(8192)[()]
    one = InstanceModel(arch, h100, 4, 2, s)  # 8 GPUs: one node, unchanged by the network
    assert one.pp_handoff_s(8192)[()] == InstanceModel(arch, _slow(h100), 4, 2, s).pp_handoff_s(8192)[()]


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"tp": "12"}, "tp 12 does not divide"),
        ({"tp": "16", "ep": "3"}, "ep 3 does not divide"),
        ({"tp": "1", "dp_attention": "512", "ep": "512"}, "ep 512 exceeds the 256 experts"),
        ({"tp": "8", "pp": "100"}, "pp 100 exceeds"),
        ({"tp": "1", "dp_attention": "10000000", "ep": "8"}, "10,000,000 GPUs in one instance exceed the 1,024"),
    ],
)
def test_bad_multi_node_layouts_are_refused_naming_the_field(fields: dict[str, str], needle: str) -> None:
    (row,) = estimate_points([{**R1, "gpu": "B200", **fields}])
    assert needle in row["error"]


def test_cli_estimates_sixteen_gpus_and_refuses_bad_layouts() -> None:
    base = ("estimate", "--model", "DeepSeek-R1", "--gpu", "H100-SXM", "--weight-dtype", "fp8")
    res = runner.invoke(app, [*base, "--tp", "16", "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["tp"] == 16 and any("2 nodes" in w for w in doc["warnings"])
    loop = ("--concurrency", "32", "--isl", "1024", "--osl", "1024", "--json")
    res = runner.invoke(app, [*base, "--tp", "1", "--dp-attention", "16", "--ep", "16", *loop], env=ENV)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tpot_s"] > 0
    res = runner.invoke(app, [*base, "--tp", "16", "--pp", "128"], env=ENV)
    assert res.exit_code == 2 and "2,048 GPUs in one instance" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, [*base, "--tp", "12"], env=ENV)
    assert res.exit_code == 2 and "TP 12 does not divide" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, [*base, "--tp", "16", "--ep", "3", *loop], env=ENV)
    assert res.exit_code == 2 and "ep 3 does not divide" in res.output and "Traceback" not in res.output


def test_instance_model_still_refuses_tp_beyond_the_heads() -> None:
    with pytest.raises(InputError, match="does not divide"):
        InstanceModel(ModelArch(find_model("Llama-3.1-8B")), find_gpu("H100-SXM"), 64)
