"""What a GPU without curves of its own borrows (issue 30): an engine with no serving points on an architecture
takes the nearest architecture's scheduler fields and the other engines' overheads in seconds on its own
architecture (TensorRT-LLM on H200 held out took all of Blackwell's and came out 37 % / 26 % too fast); a GPU
without kernel tables on an architecture without curves takes a same-generation GPU's measured curves (an L4 the
L40S's, not Hopper's end-to-end ones); every borrowing says so in its note. No test reads ../shared."""

from __future__ import annotations

from types import ModuleType

import pytest

from hetplan.catalog.context import Catalog
from hetplan.perf.calibration import curves_for, load_perf_catalog


def _overheads(scale: float) -> dict[str, float]:
    """Overhead fields whose per-step times are ``scale`` times a base set (dimensionless fields fixed)."""
    return {
        "step_overhead_s": 5e-4 * scale,
        "layer_overhead_s": 1e-5 * scale,
        "moe_layer_overhead_s": 2e-5 * scale,
        "seq_overhead_s": 1e-6 * scale,
        "prefill_queue_factor": 2.0,
        "sync_share": 0.1,
        "ttft_overhead_s": 0.03,
        "ttft_token_overhead_s": 1e-5,
        "ttft_decode_steps": 3.0,
        "sync_half_clients": 64.0,
    }


def test_borrowed_overheads_take_seconds_from_the_other_engines_on_the_architecture(cp: ModuleType) -> None:
    own = {"Blackwell": _overheads(1.0)}
    peers = {"vllm": {"Hopper": _overheads(2.0), "Blackwell": _overheads(1.5)},
             "sglang": {"Hopper": _overheads(8.0), "Blackwell": _overheads(1.0)}}  # geometric mean 4x  # fmt: skip
    peers["sglang"]["Hopper"]["ttft_decode_steps"] = 17.0  # another engine's scheduler: not borrowed
    source, values, used = cp.borrow_overheads("trtllm", "Hopper", own, peers)
    assert (source, used) == ("Blackwell", ["sglang", "vllm"])
    for name in ("step_overhead_s", "layer_overhead_s", "moe_layer_overhead_s", "seq_overhead_s"):
        assert values[name] == pytest.approx(own["Blackwell"][name] * 4.0)
    for name in ("prefill_queue_factor", "sync_share", "ttft_decode_steps", "sync_half_clients"):
        assert values[name] == own["Blackwell"][name]
    # the engine's own architecture is never replaced; no peer on the architecture leaves the borrowed ones as fitted
    assert cp.borrow_overheads("trtllm", "Blackwell", own, peers)[1] == own["Blackwell"]
    alone = cp.borrow_overheads("trtllm", "Hopper", own, {"vllm": {"Blackwell": _overheads(3.0)}})
    assert alone[1:] == (own["Blackwell"], [])


def test_a_gpu_whose_engine_has_no_rows_on_its_architecture_says_what_it_borrowed(cp: ModuleType) -> None:
    arch_curves = {**_overheads(1.0), "gemm_max": 0.7, "gemm_half_tokens": 64.0, "mbu": 0.7, "kv_mbu": 0.7,
                   "attention_efficiency": 0.4, "allreduce_latency_s": 2e-5, "link_efficiency": 0.6,
                   "moe_efficiency": 1.0, "prefill_mix": 1.0}  # fmt: skip
    fit = {"curves": {"Blackwell": arch_curves}, "overheads": {"Blackwell": _overheads(1.0)}, "gpu_overheads": {},
           "kernels": {"H200-SXM": ({"gemm_max": 0.8}, {"tables": "h200_sxm"})}}  # fmt: skip
    peers = {"vllm": {"Hopper": _overheads(2.0), "Blackwell": _overheads(1.0)}}
    out = cp.assemble_gpu_curves("trtllm", fit, peers)
    curves = out["gpu_curves"]["H200-SXM"]
    assert curves["gemm_max"] == 0.8  # its own kernel tables
    assert curves["step_overhead_s"] == pytest.approx(2 * 5e-4)
    source = out["gpu_provenance"]["H200-SXM"]["overheads_from"]
    assert "trtllm Blackwell end-to-end rows" in source and "no end-to-end rows on Hopper" in source
    assert "in seconds from vllm on Hopper" in source


def test_l4_takes_the_l40s_curves_not_hoppers_and_says_so() -> None:
    shipped = Catalog.shipped()
    doc = load_perf_catalog("vllm", shipped)
    assert doc is not None and "L40S" in doc["gpu_curves"] and "Ada Lovelace" not in doc["curves"]
    curves, note = curves_for("vllm", "Ada Lovelace", "NVIDIA", "L4", catalog=shipped)
    l40s, _ = curves_for("vllm", "Ada Lovelace", "NVIDIA", "L40S", catalog=shipped)
    assert curves == l40s
    assert note is not None and "L40S" in note and "borrowed" in note and "Hopper" in note


def test_a10g_is_an_nvidia_ampere_gpu_and_takes_the_a100s_curves() -> None:
    shipped = Catalog.shipped()
    a10g = shipped.find_gpu("A10G")
    assert a10g.vendor != "NVIDIA"  # 'NVIDIA (AWS custom)': read as NVIDIA all the same
    curves, note = curves_for("trtllm", a10g.arch, a10g.vendor, a10g.name, catalog=shipped)
    a100, _ = curves_for("trtllm", "Ampere", "NVIDIA", "A100-80GB-SXM", catalog=shipped)
    assert curves == a100
    assert note is not None and "A100-80GB-SXM" in note


def test_a_gpu_with_kernel_tables_but_borrowed_overheads_says_so() -> None:
    _, note = curves_for("vllm", "Ampere", "NVIDIA", "A100-80GB-SXM", catalog=Catalog.shipped())
    assert note is not None and "own measured vllm kernel tables" in note and "Hopper" in note
    assert curves_for("vllm", "Hopper", "NVIDIA", "H100-SXM", catalog=Catalog.shipped())[1] is None


def test_a_gpu_of_an_architecture_without_any_measured_gpu_takes_the_nearest_architecture() -> None:
    curves, note = curves_for("vllm", "Turing", "NVIDIA", "T4", catalog=Catalog.shipped())
    assert curves == curves_for("vllm", "Hopper", catalog=Catalog.shipped())[0]
    assert note is not None and "Hopper curves" in note
